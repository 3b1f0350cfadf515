//! Kernels: the unit of the schedule and of the op table. A graph node lowers to one or more kernels (a conv to
//! `im2col` + `gemm`); each kernel names its argument buffers (graph tensors or its own scratch), which of them
//! it writes, its task count, and a `Body` describing the code to generate.

use super::ops::{
    conv::Col2imSpec, conv::Im2colSpec, elementwise::BinarySpec, gemm::GemmSpec, pool::PoolSpec,
};
use crate::ir::{DType, LrnAttrs, NodeId, ReduceKind, TensorId, UnOp};
use cranelift_entity::{entity_impl, PrimaryMap};

/// A kernel of a `Lowering`.
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct KernelId(u32);
entity_impl!(KernelId, "k");

/// A scratch buffer of a `Lowering` (it lives in the activation area).
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ScratchId(u32);
entity_impl!(ScratchId, "s");

/// A buffer argument.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Buf {
    /// A graph tensor.
    Tensor(TensorId),
    /// A scratch buffer of the lowering.
    Scratch(ScratchId),
}

/// What an argument is to its kernel. Bodies look their buffers up by role (`Kb::arg`), never by position;
/// the one argument a kernel writes has role `Out`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Role {
    /// The data input.
    X,
    /// The first operand of a binary op or a matrix product.
    A,
    /// The second operand of a binary op or a matrix product.
    B,
    /// Weights: a convolution's filters, a resample's tap weights.
    W,
    /// Bias: per channel, per row or per column.
    Bias,
    /// Per-channel scale (affine map, normalisation, quantisation, requantisation).
    Scale,
    /// Per-channel shift of the affine map.
    Shift,
    /// Per-channel zero points.
    ZeroPoint,
    /// Run-time or compile-time indices (Gather, resample taps).
    Index,
    /// Compile-time offset tables (IndexMap).
    Table,
    /// The residual added in a fused epilogue.
    Residual,
    /// Input `i` of a variadic op (Concat, logic ops).
    In(u32),
    /// The buffer the kernel writes.
    Out,
    /// A buffer the kernel writes and reads back itself (a transposed GEMM's `Cᵀ` before its fused
    /// transposing epilogue writes `Out`).
    Scratch,
}

/// One argument: a buffer and its role.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Arg {
    /// What the kernel does with it.
    pub role: Role,
    /// The buffer.
    pub buf: Buf,
}

/// What a kernel computes; every variant's code generator lives in `codegen/ops/<family>.rs`.
#[derive(Debug, Clone, PartialEq)]
pub enum Body {
    /// Matrix product with epilogue.
    Gemm(GemmSpec),
    /// Integer matrix product with requantisation: args packed A, B, C, bias (i32), scale (f32).
    QGemm(super::ops::qgemm::QGemmSpec),
    /// QuantizeLinear / DequantizeLinear: args x, scale, zero point, y.
    Quantize(super::ops::quant::QuantSpec),
    /// Direct int8 depthwise convolution.
    QDepthwise(super::ops::qdepthwise::QDepthwiseSpec),
    /// Quantised add of `len` elements: args a, b, y.
    QAdd {
        /// Parameters.
        params: crate::ir::QAddParams,
        /// The operands' dtypes.
        dtypes: [DType; 2],
        /// Elements.
        len: usize,
    },
    /// Convolution input unfolding.
    Im2col(Im2colSpec),
    /// A transposed GEMM's A packed in row panels (`ops::conv::emit_pack_rows`): roles X (`[n, K, P]`, read
    /// transposed), Out (`[n, Pp/panel, K, panel]`, Pp = P rounded up to the panel, the rows past P zero). One
    /// unit per (batch, panel).
    PackRows {
        /// Batch.
        n: usize,
        /// Depth (the input's rows).
        k: usize,
        /// The GEMM's rows (the input's row length: pixels).
        p: usize,
        /// Rows per panel (`lower::ROW_PANEL`).
        panel: usize,
    },
    /// A strided 1x1 convolution's columns from channel blocks (`lower/cnn/blocked.rs`): X `[C/16, H·W, 16]`,
    /// Out `[C/16, OH·OW, 16]`, each output pixel the 16-float vector of input pixel `(oy·sh, ox·sw)`. One unit
    /// per 16 channels.
    SubsampleBlocks {
        /// Channels (a multiple of 16).
        c: usize,
        /// Input height and width.
        hw: [usize; 2],
        /// Strides.
        strides: [usize; 2],
        /// Output height and width.
        out: [usize; 2],
    },
    /// Direct depthwise convolution.
    Depthwise(super::ops::depthwise::DepthwiseSpec),
    /// Depthwise convolution on small planes, 16 channels per unit in the lanes of a vector (machine code:
    /// `kernels/depthwise_c16_x86.rs`, on AVX2 `depthwise_c16_avx2.rs`): roles X, W (packed
    /// `[C/16, KH·KW, 16]`), \[Bias\], Out; C is a multiple of 16.
    DepthwiseC16(super::ops::depthwise::DepthwiseSpec),
    /// Direct convolution of a few-channel input or a strided window (machine code: `kernels/conv_direct_x86.rs`,
    /// on AVX2 `conv_direct_avx2.rs`): roles X (the input zero-padded to `spec.padded`, `[N, C, Hp, Wp]`), W
    /// (packed `[M/16, C·KH·KW, 16]`), \[Bias\], Out. One unit per (batch, output row).
    ConvDirect {
        /// Batch.
        n: usize,
        /// The kernel's shape.
        spec: crate::codegen::kernels::conv_direct_x86::ConvDirect,
    },
    /// The transposing epilogue of a convolution computed transposed (AVX-512 machine code): roles X (`Cᵀ`,
    /// `[N, P16, M]`, P16 = P rounded up to 16), \[Residual\], Out (`[N, M, P]`); adds the residual and applies
    /// `act` when present. One unit per (batch, 16 channels); M is a multiple of 16.
    TransposeOut {
        /// Batch.
        n: usize,
        /// Pixels, channels, residual and the activation applied after it (`Activation::None` when the GEMM
        /// applied it): the same epilogue a GEMM runs fused (`GemmSpec::transpose_out`).
        t: super::ops::gemm::TransposeOut,
    },
    /// Winograd F(2x2, 3x3) input transform: roles X, Out (`V`).
    WinogradIn(super::ops::winograd::WinogradSpec),
    /// Winograd F(2x2, 3x3) output transform with bias and clamp: roles X (`M`), \[Bias\], Out.
    WinogradOut(super::ops::winograd::WinogradSpec),
    /// Transposed-convolution column folding.
    Col2im(Col2imSpec),
    /// Comparison / logical op / Where over a broadcast: args inputs..., out.
    Logic {
        /// What to compute.
        kind: super::ops::logic::LogicKind,
        /// Output shape (rank >= 1).
        out_shape: Vec<usize>,
        /// Each input's strides over the output (elements).
        strides: Vec<Vec<usize>>,
    },
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
        /// The input is the channel blocks `[C/16, size, 16]` of a transposed GEMM (`lower/cnn/blocked.rs`;
        /// batch 1), not planes: one unit per 16 channels.
        blocked: bool,
    },
    /// Softmax (or LogSoftmax) over [outer, len, inner].
    Softmax {
        /// Rows.
        outer: usize,
        /// Softmax length.
        len: usize,
        /// Stride between consecutive softmax elements.
        inner: usize,
        /// LogSoftmax.
        log: bool,
    },
    /// Elementwise dtype conversion of `len` elements.
    Convert {
        /// Source dtype.
        from: DType,
        /// Target dtype.
        to: DType,
        /// Elements.
        len: usize,
    },
    /// Per-axis offset-table gather (Slice, Pad, Expand, Tile): args src, tables (i64), dst.
    IndexMap {
        /// Output shape (rank >= 1).
        out_shape: Vec<usize>,
        /// Start of each axis' table in the tables buffer (elements).
        tab_at: Vec<usize>,
        /// Element size in bytes.
        elem: usize,
        /// Fill bits for `FILL` entries.
        fill: u64,
        /// The last axis' table, when it is a contiguous run of in-range offsets starting here (rows are then
        /// block copies).
        contig_from: Option<i64>,
    },
    /// Gather of `inner`-element rows by run-time indices: args data, indices, out.
    Gather {
        /// Product of the dims before the axis.
        outer: usize,
        /// Axis length.
        n: usize,
        /// Number of indices.
        k: usize,
        /// Elements per gathered row.
        inner: usize,
        /// Element size in bytes.
        elem: usize,
        /// Index element size (4 or 8).
        idx_elem: usize,
    },
    /// Reduction over [outer, len, inner]: args x, out.
    Reduce {
        /// The reduction.
        kind: ReduceKind,
        /// Rows.
        outer: usize,
        /// Reduced length.
        len: usize,
        /// Stride of the reduced axis.
        inner: usize,
    },
    /// ArgMax / ArgMin over [outer, len, inner] to i64: args x, out.
    ArgReduce {
        /// ArgMax.
        max: bool,
        /// Ties pick the last index.
        last: bool,
        /// Rows.
        outer: usize,
        /// Reduced length.
        len: usize,
        /// Stride of the reduced axis.
        inner: usize,
    },
    /// Row normalisation (LayerNorm, RMSNorm, InstanceNorm): args x, scale, \[bias\], out.
    Norm {
        /// Rows.
        rows: usize,
        /// Row length.
        len: usize,
        /// Added to the variance.
        eps: f32,
        /// No mean subtraction.
        rms: bool,
        /// Scale/bias are per row (index row % channels) rather than per row element.
        channels: Option<usize>,
        /// Whether a bias is present.
        has_bias: bool,
    },
    /// Local response normalisation: args x, out.
    Lrn {
        /// Batch.
        n: usize,
        /// Channels.
        c: usize,
        /// Elements per channel plane.
        inner: usize,
        /// Attributes.
        attrs: LrnAttrs,
    },
    /// One axis of a separable resample: args x, tap indices (i64), tap weights (f32), out.
    Resample {
        /// Product of the dims before the axis.
        outer: usize,
        /// Input axis length.
        n_in: usize,
        /// Output axis length.
        n_out: usize,
        /// Elements after the axis.
        inner: usize,
        /// Taps per output coordinate.
        taps: usize,
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
    /// Argument buffers with their roles; the one with role `Out` is written, the others are read. Their order
    /// is the order of the kernel's argument pointer array.
    pub args: Vec<Arg>,
    /// Number of tasks (>= 1).
    pub tasks: u32,
    /// What to generate.
    pub body: Body,
}

impl Kernel {
    /// The buffer the kernel writes.
    pub fn out(&self) -> Option<Buf> {
        self.args
            .iter()
            .find(|a| a.role == Role::Out)
            .map(|a| a.buf)
    }
    /// The buffers the kernel reads.
    pub fn reads(&self) -> impl Iterator<Item = Buf> + '_ {
        self.args
            .iter()
            .filter(|a| a.role != Role::Out)
            .map(|a| a.buf)
    }
    /// Units of independent work, the upper bound for `tasks`.
    pub fn units(&self) -> usize {
        match &self.body {
            Body::Gemm(g) => g.units(),
            Body::QGemm(g) => g.units(),
            Body::Quantize(q) => q.planes,
            Body::QAdd { len, .. } => len.div_ceil(1024),
            Body::QDepthwise(s) => s.n * s.c,
            Body::Im2col(s) => s.units(),
            Body::PackRows { n, k, p, panel } => {
                let (panels, parts) = super::ops::conv::pack_rows_units([*n, *k, *p], *panel);
                n * panels * parts
            }
            Body::Col2im(s) => s.n * s.m,
            Body::SubsampleBlocks { c, .. } => c / 16,
            Body::Depthwise(s) => s.n * s.c,
            Body::DepthwiseC16(s) => s.n * s.c / 16,
            Body::ConvDirect { n, spec } => n * spec.out[0],
            Body::WinogradIn(s) => s.n * s.c,
            Body::TransposeOut { n, t } => n * t.m.div_ceil(16),
            Body::WinogradOut(s) => s.n * s.m,
            Body::Logic { out_shape, .. } => out_shape[..out_shape.len() - 1].iter().product(),
            Body::Binary(b) => b.units(),
            Body::Unary(_, len) => len.div_ceil(super::ops::elementwise::CHUNK),
            Body::GlobalAvg {
                planes,
                blocked: true,
                ..
            } => planes / 16,
            Body::Affine { planes, .. } | Body::GlobalAvg { planes, .. } => *planes,
            Body::Pool(p) => p.planes,
            Body::Softmax { outer, inner, .. } => outer * inner,
            Body::Convert { len, .. } => len.div_ceil(super::ops::elementwise::CHUNK),
            Body::IndexMap { out_shape, .. } => out_shape[..out_shape.len() - 1].iter().product(),
            Body::Gather { outer, k, .. } => outer * k,
            Body::Reduce { outer, inner, .. } | Body::ArgReduce { outer, inner, .. } => {
                outer * inner
            }
            Body::Norm { rows, .. } => *rows,
            Body::Lrn { n, c, .. } => n * c,
            Body::Resample { outer, n_out, .. } => outer * n_out,
            Body::Copy(len) => len.div_ceil(super::ops::data::COPY_CHUNK),
            Body::Transpose {
                out_shape,
                in_strides,
                ..
            } => {
                let (shape, _) = super::ops::data::coalesce_transpose(out_shape, in_strides);
                shape[..shape.len() - 1].iter().product()
            }
            Body::Concat { outer, .. } => *outer,
        }
        .max(1)
    }
}

/// The result of lowering a graph: kernels in a valid sequential order, and scratch buffer sizes in bytes.
#[derive(Debug, Clone, Default)]
pub struct Lowering {
    /// Kernels.
    pub kernels: PrimaryMap<KernelId, Kernel>,
    /// Scratch sizes (bytes).
    pub scratch: PrimaryMap<ScratchId, usize>,
}
