//! The NPU op library's constraints, each documented once (`CONSTRAINTS`, which `bundlec ops --npu` prints), and
//! `Reject`: the constraint a node breaks with the value at fault. A leaf the op families and the capability
//! query share.

/// One documented constraint of the NPU op library.
#[derive(Debug, PartialEq, Eq)]
pub struct Constraint {
    /// Short id used in tables and cache files.
    pub id: &'static str,
    /// The ops it applies to.
    pub ops: &'static str,
    /// What must hold.
    pub text: &'static str,
}

macro_rules! constraints {
    ($($name:ident = $id:literal, $ops:literal, $text:literal;)*) => {
        $(#[doc = $text] pub static $name: Constraint = Constraint { id: $id, ops: $ops, text: $text };)*
        /// Every constraint, in check order.
        pub static CONSTRAINTS: &[&Constraint] = &[$(&$name),*];
    };
}

constraints! {
    OP = "op", "all", "the target description lists the op (`ops[].op`)";
    DTYPE = "dtype", "all", "the activation dtype is one the target lists for the op (`ops[].dtypes`)";
    SIZE = "size", "all", "every tensor of the node is at most 2 GiB (32-bit DMA offsets)";
    CONST_WEIGHTS = "const-weights", "Conv, MatMul, Gemm", "weights, bias and Gemm's C are compile-time constants; a residual is an activation";
    RANK = "rank", "Conv, pools, MatMul", "Conv and pools are 2-D (NCHW); MatMul's right operand is 2-D";
    KERNEL = "kernel", "Conv, MaxPool, AveragePool", "kernel sides are at most `ops[].max_kernel`";
    STRIDE = "stride", "Conv, MaxPool, AveragePool", "strides are at most `ops[].max_stride`";
    DILATION = "dilation", "Conv, MaxPool, AveragePool", "dilations are at most `ops[].max_dilation`, an AveragePool's 1";
    PADS = "pads", "Conv, MaxPool, AveragePool", "each pad is smaller than the kernel extent (no output row sees only padding)";
    CEIL = "ceil-mode", "MaxPool, AveragePool", "ceil_mode is 0";
    GEMM_ATTRS = "gemm-attrs", "Gemm, MatMul", "alpha = beta = 1 (a MatMul's fused scale 1), transA = 0, C has N elements (or 1)";
    BROADCAST = "broadcast", "Add, Mul", "operands have one shape, or the right (or left) operand is a constant scalar or varies along one axis";
    LOCAL_MEMORY = "local-memory", "all", "after tiling, the op's working set fits one tile's local memory";
    DMA = "dma", "all", "after tiling, every transfer fits AIE-ML buffer descriptors: whole 32-bit words at word-aligned DDR and local addresses (a run may end in its tensor's 64-byte padding), walks within the BD fields";
}

/// Why a node stays on the CPU.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Reject {
    /// The constraint broken.
    pub constraint: &'static Constraint,
    /// The value at fault.
    pub detail: String,
}

impl std::fmt::Display for Reject {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "[{}] {}", self.constraint.id, self.detail)
    }
}

impl Reject {
    /// A rejection for breaking `c`, with the value at fault.
    pub fn new(c: &'static Constraint, detail: impl Into<String>) -> Reject {
        Reject {
            constraint: c,
            detail: detail.into(),
        }
    }
}
