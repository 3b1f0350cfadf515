//! Kernels: the unit of the schedule and of the op table. A graph node lowers to one or more kernels (a conv to
//! `im2col` + `gemm`); each kernel names its argument buffers (graph tensors or its own scratch), which of them
//! it writes, its task count, and a `Body` describing the code to generate.

use super::ops::{conv::Im2colSpec, elementwise::BinarySpec, gemm::GemmSpec, pool::PoolSpec};
use crate::ir::{NodeId, TensorId, UnOp};

/// A buffer argument.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Buf {
    /// A graph tensor.
    Tensor(TensorId),
    /// Scratch buffer `i` of the lowering (activation area).
    Scratch(usize),
}

/// What a kernel computes; every variant's code generator lives in `codegen/ops/<family>.rs`.
#[derive(Debug, Clone, PartialEq)]
pub enum Body {
    /// Matrix product with epilogue.
    Gemm(GemmSpec),
    /// Convolution input unfolding.
    Im2col(Im2colSpec),
    /// Broadcast binary op.
    Binary(BinarySpec),
    /// Unary map over `len` elements.
    Unary(UnOp, usize),
    /// Per-channel affine map.
    Affine {
        /// N * C.
        planes: usize,
        /// C.
        c: usize,
        /// Elements per plane.
        inner: usize,
    },
    /// 2-D pooling.
    Pool(PoolSpec),
    /// Global average pooling.
    GlobalAvg {
        /// N * C.
        planes: usize,
        /// Elements per plane.
        size: usize,
    },
    /// Softmax over [outer, len, inner].
    Softmax {
        /// Rows.
        outer: usize,
        /// Softmax length.
        len: usize,
        /// Stride between consecutive softmax elements.
        inner: usize,
    },
    /// Byte copy.
    Copy(usize),
    /// Transpose gather.
    Transpose {
        /// Output shape.
        out_shape: Vec<usize>,
        /// Input stride per output dim (elements).
        in_strides: Vec<usize>,
        /// Element size in bytes.
        elem: usize,
    },
    /// Concatenation.
    Concat {
        /// Product of the dims before the axis.
        outer: usize,
        /// Bytes per outer index of each input.
        blocks: Vec<usize>,
    },
}

/// One schedulable kernel.
#[derive(Debug, Clone, PartialEq)]
pub struct Kernel {
    /// Unique name (`<node>` or `<node>.<step>`), used in the op table and the recipe.
    pub name: String,
    /// The graph node it implements.
    pub node: NodeId,
    /// Argument buffers, in the order the body reads them.
    pub args: Vec<Buf>,
    /// Indices into `args` of the buffers it writes.
    pub writes: Vec<usize>,
    /// Number of tasks (>= 1).
    pub tasks: u32,
    /// What to generate.
    pub body: Body,
}

impl Kernel {
    /// Units of independent work, the upper bound for `tasks`.
    pub fn units(&self) -> usize {
        match &self.body {
            Body::Gemm(g) => g.units(),
            Body::Im2col(s) => s.units(),
            Body::Binary(b) => b.units(),
            Body::Unary(_, len) => len.div_ceil(super::ops::elementwise::CHUNK),
            Body::Affine { planes, .. } | Body::GlobalAvg { planes, .. } => *planes,
            Body::Pool(p) => p.planes,
            Body::Softmax { outer, inner, .. } => outer * inner,
            Body::Copy(len) => len.div_ceil(super::ops::data::COPY_CHUNK),
            Body::Transpose { out_shape, .. } => out_shape[..out_shape.len() - 1].iter().product(),
            Body::Concat { outer, .. } => *outer,
        }
        .max(1)
    }
}

/// The result of lowering a graph: kernels in a valid sequential order, and scratch buffer sizes in bytes.
#[derive(Debug, Clone, Default)]
pub struct Lowering {
    /// Kernels.
    pub kernels: Vec<Kernel>,
    /// Scratch sizes (bytes), indexed by `Buf::Scratch`.
    pub scratch: Vec<usize>,
}
