//! `Body`: what one kernel computes, one variant per kind of kernel, and its units of independent work. The
//! larger variants hold a spec from this module's family files; each variant's code generator lives in
//! `codegen/ops/<family>.rs`.

use super::conv::{pack_rows_units, Col2imSpec, ConvDirect, Im2colSpec, WinogradSpec};

use super::data::{coalesce_transpose, COPY_CHUNK};
use super::depthwise::{DepthwiseSpec, QDepthwiseSpec};
use super::elementwise::{BinarySpec, LogicKind, CHUNK};
use super::gemm::{GemmSpec, TransposeOut};
use super::pool::PoolSpec;
use super::qgemm::QGemmSpec;
use super::qgemv::QGemvSpec;
use super::quant::{qgap_planes_per_unit, QuantSpec};
use crate::ir::{DType, LrnAttrs, ReduceKind, UnOp};

/// What a kernel computes; every variant's code generator lives in `codegen/ops/<family>.rs`.
#[derive(Debug, Clone, PartialEq)]
pub enum Body {
    /// Matrix product with epilogue.
    Gemm(GemmSpec),
    /// Integer matrix product with requantisation: args packed A, B, C, bias (i32), scale (f32).
    QGemm(QGemmSpec),
    /// QuantizeLinear / DequantizeLinear: args x, scale, zero point, y.
    Quantize(QuantSpec),
    /// Direct int8 depthwise convolution.
    QDepthwise(QDepthwiseSpec),
    /// Quantised add of `len` elements: args a, b, y.
    QAdd {
        /// Parameters.
        params: crate::ir::QAddParams,
        /// The operands' dtypes.
        dtypes: [DType; 2],
        /// Elements.
        len: usize,
    },
    /// f32 rows to bf16 rows (`--precision bf16`): args X (`rows` rows of `k` floats, `src_rs` apart), Out
    /// (bf16 rows of `kp`, zero past `k`).
    ToBf16 {
        /// Rows, K, the source's row stride in floats, the padded K.
        dims: [usize; 4],
    },
    /// f32 channel blocks `[c/16][p][16]` (a channel-blocked depthwise kernel's output) to bf16 rows `[p][c]`
    /// (`--precision bf16`: a transposed GEMM's A, pixels as rows): args X, Out; a unit per block.
    BlocksToBf16 {
        /// Channels (a multiple of 16) and pixels.
        c: usize,
        /// Pixels.
        p: usize,
    },
    /// The bf16 GEMM (`kernel/gemm_bf16.rs`).
    GemmBf16(super::gemm_bf16::GemmBf16Spec),
    /// f32 rows to the bf16 GEMM's B panels (`kernel/gemm_bf16.rs`, a convolution's columns): args X (`k` rows
    /// of `n` floats, `src_rs` apart), Out (`[n/32][kp/2][32]` words of bf16 pairs, zero past `n` and `k`);
    /// `batch[0]` such matrices, `batch[1]` floats apart in X, their panels one after the other in Out.
    PackBf16 {
        /// Rows (K), columns (N), the source's row stride in floats, the padded K.
        dims: [usize; 4],
        /// Matrices, and the source's stride between them in floats.
        batch: [usize; 2],
    },
    /// One-row integer matrix product on AVX-512 VNNI: args packed A, x, y, bias, \[scale\].
    QGemv(QGemvSpec),
    /// The implicit int8 convolution's reorder (`kernel/qconv.rs`): args X (the NCHW input), Out (the
    /// reordered planes of every batch entry).
    QReorder(super::qconv::QConvImplicit),
    /// The implicit int8 convolution on AMX (`kernel/qconv.rs`): args A (weights), B (the reordered planes),
    /// Out (`[N, M, positions]`), Bias (i32), Scale (f32).
    QConvImplicit(super::qconv::QConvImplicit),
    /// Integer GlobalAveragePool: args x, y; `planes` planes of `size` elements, one output each.
    QGlobalAvg {
        /// Parameters.
        params: crate::ir::QGapParams,
        /// The input's dtype.
        dtype: DType,
        /// Planes (N · C).
        planes: usize,
        /// Elements per plane.
        size: usize,
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
    Depthwise(DepthwiseSpec),
    /// Depthwise convolution on small planes, 16 channels per unit in the lanes of a vector (machine code:
    /// `x86/depthwise_c16_x86.rs`, on AVX2 `depthwise_c16_avx2.rs`): roles X, W (packed
    /// `[C/16, KH·KW, 16]`), \[Bias\], Out; C is a multiple of 16.
    DepthwiseC16(DepthwiseSpec),
    /// Direct convolution of a few-channel input or a strided window (machine code: `x86/conv_direct/`,
    /// one family over `x86::isa::Isa`): roles X (the input zero-padded to `spec.padded`, `[N, C, Hp, Wp]`), W
    /// (packed `[M/16, C·KH·KW, 16]`), \[Bias\], Out. One unit per (batch, output row).
    ConvDirect {
        /// Batch.
        n: usize,
        /// The kernel's shape.
        spec: ConvDirect,
    },
    /// The transposing epilogue of a convolution computed transposed (AVX-512 machine code): roles X (`Cᵀ`,
    /// `[N, P16, M]`, P16 = P rounded up to 16), \[Residual\], Out (`[N, M, P]`); adds the residual and applies
    /// `act` when present. One unit per (batch, 16 channels); M is a multiple of 16.
    TransposeOut {
        /// Batch.
        n: usize,
        /// Pixels, channels, residual and the activation applied after it (`Activation::None` when the GEMM
        /// applied it): the same epilogue a GEMM runs fused (`GemmSpec::transpose_out`).
        t: TransposeOut,
    },
    /// Winograd F(2x2, 3x3) input transform: roles X, Out (`V`).
    WinogradIn(WinogradSpec),
    /// Winograd F(2x2, 3x3) output transform with bias and clamp: roles X (`M`), \[Bias\], Out.
    WinogradOut(WinogradSpec),
    /// Transposed-convolution column folding.
    Col2im(Col2imSpec),
    /// Comparison / logical op / Where over a broadcast: args inputs..., out.
    Logic {
        /// What to compute.
        kind: LogicKind,
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
    /// TopK over [outer, len, inner] rows into [outer, k, inner]: args x, out (values of `dtype`, or i64
    /// indices).
    TopK {
        /// The input's element type (f32, i32 or i64).
        dtype: crate::ir::DType,
        /// The largest (else the smallest).
        largest: bool,
        /// Write the positions (i64) instead of the values.
        indices: bool,
        /// How many.
        k: usize,
        /// Rows.
        outer: usize,
        /// Row length.
        len: usize,
        /// Stride of the row's axis.
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

impl Body {
    /// Units of independent work, the upper bound for `tasks`.
    pub fn units(&self) -> usize {
        match self {
            Body::Gemm(g) => g.units(),
            Body::QGemm(g) => g.units(),
            Body::QGemv(g) => g.units(),
            Body::QReorder(s) => s.n * s.quads(),
            Body::QConvImplicit(s) => s.units(),
            Body::ToBf16 { dims } => dims[0].div_ceil(16),
            Body::BlocksToBf16 { c, .. } => c / 16,
            Body::PackBf16 { dims, batch } => batch[0] * dims[1].div_ceil(super::gemm_bf16::NR),
            Body::GemmBf16(g) => g.units(),
            Body::Quantize(q) => q.planes,
            Body::QAdd { len, .. } => len.div_ceil(1024),
            Body::QGlobalAvg { planes, size, .. } => planes.div_ceil(qgap_planes_per_unit(*size)),
            Body::QDepthwise(s) => s.n * s.c,
            Body::Im2col(s) => s.units(),
            Body::PackRows { n, k, p, panel } => {
                let (panels, parts) = pack_rows_units([*n, *k, *p], *panel);
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
            Body::Unary(_, len) => len.div_ceil(CHUNK),
            Body::GlobalAvg {
                planes,
                blocked: true,
                ..
            } => planes / 16,
            Body::Affine { planes, .. } | Body::GlobalAvg { planes, .. } => *planes,
            Body::Pool(p) => p.planes,
            Body::Softmax { outer, inner, .. } => outer * inner,
            Body::Convert { len, .. } => len.div_ceil(CHUNK),
            Body::IndexMap { out_shape, .. } => out_shape[..out_shape.len() - 1].iter().product(),
            Body::Gather { outer, k, .. } => outer * k,
            Body::Reduce { outer, inner, .. }
            | Body::ArgReduce { outer, inner, .. }
            | Body::TopK { outer, inner, .. } => outer * inner,
            Body::Norm { rows, .. } => *rows,
            Body::Lrn { n, c, .. } => n * c,
            Body::Resample { outer, n_out, .. } => outer * n_out,
            Body::Copy(len) => len.div_ceil(COPY_CHUNK),
            Body::Transpose {
                out_shape,
                in_strides,
                ..
            } => {
                let (shape, _) = coalesce_transpose(out_shape, in_strides);
                shape[..shape.len() - 1].iter().product()
            }
            Body::Concat { outer, .. } => *outer,
        }
        .max(1)
    }
}
