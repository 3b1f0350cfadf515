//! The operator set of the IR: one `Op` enum whose variants carry typed, already-validated attributes. Shape
//! rules and reference semantics live in `ir/ops/<family>.rs`; this file only holds the data.

use super::attrs::{
    BinOp, CmpOp, ConvAttrs, ConvTransposeAttrs, Epilogue, GemmAttrs, IntProduct, LogicOp,
    LrnAttrs, PadMode, PoolAttrs, PoolKind, QAddParams, QGapParams, QuantParams, ReduceKind,
    ResizeAttrs, UnOp,
};
use super::types::DType;

/// An IR operator.
#[derive(Debug, Clone, PartialEq)]
pub enum Op {
    /// Elementwise binary op with broadcasting.
    Binary(BinOp),
    /// Elementwise unary op.
    Unary(UnOp),
    /// Batched matrix product (numpy semantics) with an epilogue.
    MatMul(Epilogue),
    /// General matrix multiply.
    Gemm(GemmAttrs),
    /// 2-D convolution.
    Conv(ConvAttrs),
    /// 2-D transposed convolution.
    ConvTranspose(ConvTransposeAttrs),
    /// Inference batch normalisation: inputs x, scale, bias, mean, var.
    BatchNorm {
        /// Added to the variance.
        epsilon: f32,
    },
    /// 2-D pooling.
    Pool(PoolKind, PoolAttrs),
    /// Mean over all spatial positions, keeping dims.
    GlobalAveragePool,
    /// Data-preserving reshape to a static shape (Reshape, Flatten, Squeeze, Unsqueeze).
    Reshape(Vec<usize>),
    /// Axis permutation.
    Transpose(Vec<usize>),
    /// Concatenation along an axis.
    Concat(usize),
    /// Softmax over `[axis..]` flattened when `flatten_tail` (opset < 13), else over `axis` only.
    Softmax {
        /// The axis (non-negative).
        axis: usize,
        /// Opset < 13 semantics: the axis and every later one form one softmax row.
        flatten_tail: bool,
        /// LogSoftmax.
        log: bool,
    },
    /// Elementwise conversion to a dtype (ONNX Cast semantics: float to int truncates, to bool is x != 0).
    Cast(DType),
    /// Strided slice: per axis (all axes) the start and step; the output shape is given.
    Slice {
        /// First input index per axis.
        starts: Vec<i64>,
        /// Step per axis (non-zero).
        steps: Vec<i64>,
        /// Output shape.
        out: Vec<usize>,
    },
    /// Pad (or crop, for negative pads) every axis: begins and ends per axis.
    Pad {
        /// Elements added before each axis (negative crops).
        begins: Vec<i64>,
        /// Elements added after each axis.
        ends: Vec<i64>,
        /// Fill mode.
        mode: PadMode,
    },
    /// Broadcast to a shape.
    Expand(Vec<usize>),
    /// Repeat along each axis.
    Tile(Vec<usize>),
    /// Gather along an axis with integer indices (input 1; negative indices count from the end).
    Gather {
        /// The axis of the data input.
        axis: usize,
    },
    /// Trilu: the upper or lower triangle of the last two dims, the other elements zero. Element (i, j) of each
    /// matrix is kept when `j − i ≥ k` (upper) or `j − i ≤ k` (lower).
    Trilu {
        /// Keep the upper triangle (else the lower).
        upper: bool,
        /// Diagonal offset.
        k: i64,
    },
    /// Reduction over axes.
    Reduce {
        /// The reduction.
        kind: ReduceKind,
        /// Reduced axes (sorted, non-empty).
        axes: Vec<usize>,
        /// Keep reduced axes as size 1.
        keepdims: bool,
    },
    /// Index of the max / min along an axis (i64 output).
    ArgReduce {
        /// ArgMax (else ArgMin).
        max: bool,
        /// The axis.
        axis: usize,
        /// Keep the axis as size 1.
        keepdims: bool,
        /// Ties pick the last index.
        select_last: bool,
    },
    /// The `k` largest (or smallest) elements along an axis, in order, ties to the lower index: their values, or
    /// with `indices` their positions (i64). ONNX TopK is two of these, one per output.
    TopK {
        /// The axis.
        axis: usize,
        /// How many.
        k: usize,
        /// The largest (else the smallest).
        largest: bool,
        /// The positions instead of the values.
        indices: bool,
    },
    /// Layer / RMS normalisation over the axes from `axis` on; inputs x, scale, optional bias.
    LayerNorm {
        /// First normalised axis.
        axis: usize,
        /// Added to the variance.
        epsilon: f32,
        /// RMSNormalization: no mean subtraction.
        rms: bool,
    },
    /// Instance normalisation: inputs x [N, C, ...], scale \[C\], bias \[C\].
    InstanceNorm {
        /// Added to the variance.
        epsilon: f32,
    },
    /// Local response normalisation across channels.
    Lrn(LrnAttrs),
    /// Resize (Upsample) of every axis.
    Resize(ResizeAttrs),
    /// Comparison with broadcasting (bool output).
    Compare(CmpOp),
    /// Logical op on bools with broadcasting.
    Logic(LogicOp),
    /// Logical not.
    Not,
    /// Where(cond, x, y) with broadcasting.
    Where,
    /// f32 to u8 / i8 (QuantizeLinear).
    Quantize(QuantParams),
    /// u8 / i8 / i32 to f32 (DequantizeLinear).
    Dequantize(QuantParams),
    /// Integer 2-D convolution: x \[N,C,H,W\] u8/i8, w [M,C/group,KH,KW] i8 constant, or i32 "wide" weights in
    /// [-255, 255] (the attrs' bias and epilogue are unused: both live in the `IntProduct`).
    QConv(ConvAttrs, IntProduct),
    /// Integer matrix product: x [..., M, K] u8/i8 times w [K, N] i8 constant.
    QMatMul(IntProduct),
    /// Quantised add or multiply of two same-shaped u8 / i8 tensors (a residual connection, QLinearAdd/Mul).
    QAdd(QAddParams),
    /// Integer GlobalAveragePool of a u8 / i8 tensor (QLinearGlobalAveragePool, or a DequantizeLinear →
    /// GlobalAveragePool → QuantizeLinear).
    QGlobalAvgPool(QGapParams),
}

/// The family an op belongs to: one file of `ir/ops/` holds its shape rule and reference semantics, one of
/// `lower/` its lowering (`lower/cnn/` for Cnn), and the importer's family files its ONNX mapping. Adding an op
/// to a family touches that family's files and this one, not the dispatchers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Family {
    /// Binary and unary maps, casts (`elementwise.rs`).
    Elementwise,
    /// MatMul and Gemm (`linalg.rs`).
    Linalg,
    /// Convolution and pooling (`cnn.rs`).
    Cnn,
    /// ConvTranspose (`deconv.rs`).
    Deconv,
    /// Normalisations and softmax (`nn.rs`).
    Nn,
    /// Reshape, Transpose, Concat (`shape.rs`).
    Shape,
    /// Offset-table gathers: Slice, Pad, Expand, Tile, Gather (`index.rs`).
    Index,
    /// Reductions (`reduce.rs`).
    Reduce,
    /// Resize (`resize.rs`).
    Resize,
    /// Comparisons, logic, Where (`logic.rs`).
    Logic,
    /// The int8 ops (`quant.rs`).
    Quant,
}

impl Op {
    /// The op's family.
    pub fn family(&self) -> Family {
        match self {
            Op::Binary(_) | Op::Unary(_) | Op::Cast(_) => Family::Elementwise,
            Op::MatMul(_) | Op::Gemm(_) => Family::Linalg,
            Op::Conv(_) | Op::Pool(..) | Op::GlobalAveragePool => Family::Cnn,
            Op::ConvTranspose(_) => Family::Deconv,
            Op::BatchNorm { .. }
            | Op::Softmax { .. }
            | Op::LayerNorm { .. }
            | Op::InstanceNorm { .. }
            | Op::Lrn(_) => Family::Nn,
            Op::Reshape(_) | Op::Transpose(_) | Op::Concat(_) => Family::Shape,
            Op::Slice { .. }
            | Op::Pad { .. }
            | Op::Expand(_)
            | Op::Tile(_)
            | Op::Gather { .. }
            | Op::Trilu { .. } => Family::Index,
            Op::Reduce { .. } | Op::ArgReduce { .. } | Op::TopK { .. } => Family::Reduce,
            Op::Resize(_) => Family::Resize,
            Op::Compare(_) | Op::Logic(_) | Op::Not | Op::Where => Family::Logic,
            Op::Quantize(_)
            | Op::Dequantize(_)
            | Op::QConv(..)
            | Op::QMatMul(_)
            | Op::QAdd(_)
            | Op::QGlobalAvgPool(_) => Family::Quant,
        }
    }
}

impl Op {
    /// Whether the op only moves data (any dtype, bits copied unchanged) rather than computing in f32.
    pub fn moves_data(&self) -> bool {
        matches!(
            self,
            Op::Reshape(_)
                | Op::Transpose(_)
                | Op::Concat(_)
                | Op::Unary(UnOp::Identity)
                | Op::Slice { .. }
                | Op::Pad { .. }
                | Op::Expand(_)
                | Op::Tile(_)
                | Op::Gather { .. }
                | Op::Trilu { .. }
        )
    }
    /// Whether the op takes non-f32 tensors at run time (data movement, Cast, the int8 family, and max pooling,
    /// whose integer form `fold_qdq` makes).
    pub fn any_input_dtype(&self) -> bool {
        self.moves_data()
            || matches!(
                self,
                Op::Pool(PoolKind::Max, _)
                    | Op::Cast(_)
                    | Op::Compare(_)
                    | Op::Logic(_)
                    | Op::Not
                    | Op::Where
                    | Op::Dequantize(_)
                    | Op::QConv(..)
                    | Op::QMatMul(_)
                    | Op::QAdd(_)
                    | Op::QGlobalAvgPool(_)
                    | Op::TopK { .. }
            )
    }
    /// Whether the op may produce a non-f32 tensor at run time (data movement, Cast, ArgMax/ArgMin, the int8
    /// family).
    pub fn any_output_dtype(&self) -> bool {
        self.any_input_dtype()
            || matches!(
                self,
                Op::ArgReduce { .. } | Op::TopK { indices: true, .. } | Op::Quantize(_)
            )
    }
    /// A short name for reports and kernel names.
    pub fn name(&self) -> &'static str {
        match self {
            Op::Binary(b) => match b {
                BinOp::Add => "add",
                BinOp::Sub => "sub",
                BinOp::Mul => "mul",
                BinOp::Div => "div",
                BinOp::Max => "max",
                BinOp::Min => "min",
                BinOp::Pow => "pow",
                BinOp::PRelu => "prelu",
                BinOp::Mod => "mod",
                BinOp::FMod => "fmod",
            },
            Op::Unary(u) => match u {
                UnOp::Relu => "relu",
                UnOp::Sigmoid => "sigmoid",
                UnOp::Tanh => "tanh",
                UnOp::Exp => "exp",
                UnOp::Neg => "neg",
                UnOp::Abs => "abs",
                UnOp::Sqrt => "sqrt",
                UnOp::Reciprocal => "reciprocal",
                UnOp::Clip(..) => "clip",
                UnOp::Identity => "identity",
                UnOp::LeakyRelu(_) => "leakyrelu",
                UnOp::HardSigmoid(..) => "hardsigmoid",
                UnOp::HardSwish => "hardswish",
                UnOp::Elu(_) => "elu",
                UnOp::Selu(..) => "selu",
                UnOp::Log => "log",
                UnOp::Erf => "erf",
                UnOp::Floor => "floor",
                UnOp::Ceil => "ceil",
                UnOp::Round => "round",
                UnOp::Sign => "sign",
                UnOp::Softplus => "softplus",
                UnOp::Softsign => "softsign",
                UnOp::ThresholdedRelu(_) => "thresholdedrelu",
                UnOp::Celu(_) => "celu",
                UnOp::Gelu { .. } => "gelu",
                UnOp::Mish => "mish",
            },
            Op::MatMul(_) => "matmul",
            Op::Gemm(_) => "gemm",
            Op::Conv(_) => "conv",
            Op::ConvTranspose(_) => "convtranspose",
            Op::BatchNorm { .. } => "batchnorm",
            Op::Pool(PoolKind::Max, _) => "maxpool",
            Op::Pool(PoolKind::Average, _) => "avgpool",
            Op::GlobalAveragePool => "globalavgpool",
            Op::Reshape(_) => "reshape",
            Op::Transpose(_) => "transpose",
            Op::Concat(_) => "concat",
            Op::Softmax { log: false, .. } => "softmax",
            Op::Softmax { log: true, .. } => "logsoftmax",
            Op::Cast(_) => "cast",
            Op::Slice { .. } => "slice",
            Op::Pad { .. } => "pad",
            Op::Expand(_) => "expand",
            Op::Tile(_) => "tile",
            Op::Gather { .. } => "gather",
            Op::Trilu { .. } => "trilu",
            Op::Reduce { kind, .. } => match kind {
                ReduceKind::Sum => "reducesum",
                ReduceKind::Mean => "reducemean",
                ReduceKind::Max => "reducemax",
                ReduceKind::Min => "reducemin",
                ReduceKind::Prod => "reduceprod",
                ReduceKind::L1 => "reducel1",
                ReduceKind::L2 => "reducel2",
                ReduceKind::SumSquare => "reducesumsquare",
                ReduceKind::LogSum => "reducelogsum",
                ReduceKind::LogSumExp => "reducelogsumexp",
            },
            Op::ArgReduce { max: true, .. } => "argmax",
            Op::ArgReduce { max: false, .. } => "argmin",
            Op::TopK { indices: false, .. } => "topk",
            Op::TopK { indices: true, .. } => "topk_indices",
            Op::LayerNorm { rms: false, .. } => "layernorm",
            Op::LayerNorm { rms: true, .. } => "rmsnorm",
            Op::InstanceNorm { .. } => "instancenorm",
            Op::Lrn(_) => "lrn",
            Op::Resize(_) => "resize",
            Op::Compare(c) => match c {
                CmpOp::Eq => "equal",
                CmpOp::Lt => "less",
                CmpOp::Le => "lessorequal",
                CmpOp::Gt => "greater",
                CmpOp::Ge => "greaterorequal",
            },
            Op::Logic(l) => match l {
                LogicOp::And => "and",
                LogicOp::Or => "or",
                LogicOp::Xor => "xor",
            },
            Op::Not => "not",
            Op::Where => "where",
            Op::Quantize(_) => "quantize",
            Op::Dequantize(_) => "dequantize",
            Op::QConv(..) => "qconv",
            Op::QMatMul(_) => "qmatmul",
            Op::QAdd(p) if p.mul => "qmul",
            Op::QAdd(_) => "qadd",
            Op::QGlobalAvgPool(_) => "qglobalavgpool",
        }
    }
}
