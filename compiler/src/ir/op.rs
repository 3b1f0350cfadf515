//! The operator set of the IR: one `Op` enum whose variants carry typed, already-validated attributes. Shape
//! rules and reference semantics live in `ir/ops/<family>.rs`; this file only holds the data.

/// Elementwise binary operators (numpy broadcasting).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BinOp {
    /// a + b
    Add,
    /// a - b
    Sub,
    /// a * b
    Mul,
    /// a / b
    Div,
    /// max(a, b)
    Max,
    /// min(a, b)
    Min,
}

/// Elementwise unary operators.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum UnOp {
    /// max(x, 0)
    Relu,
    /// 1 / (1 + e^-x)
    Sigmoid,
    /// tanh(x)
    Tanh,
    /// e^x
    Exp,
    /// -x
    Neg,
    /// |x|
    Abs,
    /// sqrt(x)
    Sqrt,
    /// 1 / x
    Reciprocal,
    /// min(max(x, lo), hi)
    Clip(f32, f32),
    /// x (copy)
    Identity,
    /// x >= 0 ? x : alpha * x
    LeakyRelu(f32),
    /// max(0, min(1, alpha * x + beta))
    HardSigmoid(f32, f32),
    /// x * max(0, min(1, x / 6 + 1 / 2))
    HardSwish,
    /// x >= 0 ? x : alpha * (e^x - 1)
    Elu(f32),
    /// gamma * (x >= 0 ? x : alpha * (e^x - 1))
    Selu(f32, f32),
}

/// The activation fused at the end of a conv / gemm / matmul.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub enum Activation {
    /// No activation.
    #[default]
    None,
    /// max(x, 0)
    Relu,
    /// min(max(x, lo), hi)
    Clip(f32, f32),
}

/// What a conv / gemm / matmul does after accumulating: optional residual add (its last input), then activation.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct Epilogue {
    /// The node's last input is added to the result (same shape as the output).
    pub residual: bool,
    /// Activation applied last.
    pub act: Activation,
}

/// 2-D convolution attributes. Inputs: x [N,C,H,W], w [M,C/group,KH,KW], optional bias [M], optional residual.
#[derive(Debug, Clone, PartialEq)]
pub struct ConvAttrs {
    /// Kernel size (KH, KW).
    pub kernel: [usize; 2],
    /// Strides (H, W).
    pub strides: [usize; 2],
    /// Pads: top, left, bottom, right.
    pub pads: [usize; 4],
    /// Dilations (H, W).
    pub dilations: [usize; 2],
    /// Groups.
    pub group: usize,
    /// Whether input 2 is a bias.
    pub has_bias: bool,
    /// Fused epilogue.
    pub epilogue: Epilogue,
}

/// Gemm attributes: Y = alpha * op(A) op(B) + beta * C.
#[derive(Debug, Clone, PartialEq)]
pub struct GemmAttrs {
    /// Scale of the product.
    pub alpha: f32,
    /// Scale of C.
    pub beta: f32,
    /// A is transposed.
    pub trans_a: bool,
    /// B is transposed.
    pub trans_b: bool,
    /// Whether input 2 (C) is present.
    pub has_c: bool,
    /// Fused epilogue.
    pub epilogue: Epilogue,
}

/// Max / average pooling attributes (2-D).
#[derive(Debug, Clone, PartialEq)]
pub struct PoolAttrs {
    /// Window (KH, KW).
    pub kernel: [usize; 2],
    /// Strides (H, W).
    pub strides: [usize; 2],
    /// Pads: top, left, bottom, right.
    pub pads: [usize; 4],
    /// Dilations (H, W); max pool only, 1 otherwise.
    pub dilations: [usize; 2],
    /// Output size rounds up.
    pub ceil_mode: bool,
    /// Average pool divides by the full window including padding.
    pub count_include_pad: bool,
}

/// Pooling kind.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PoolKind {
    /// Maximum over the window.
    Max,
    /// Average over the window.
    Average,
}

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
    },
}

impl Op {
    /// Whether the op only moves data (any dtype, bits copied unchanged) rather than computing in f32.
    pub fn moves_data(&self) -> bool {
        matches!(
            self,
            Op::Reshape(_) | Op::Transpose(_) | Op::Concat(_) | Op::Unary(UnOp::Identity)
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
            },
            Op::MatMul(_) => "matmul",
            Op::Gemm(_) => "gemm",
            Op::Conv(_) => "conv",
            Op::BatchNorm { .. } => "batchnorm",
            Op::Pool(PoolKind::Max, _) => "maxpool",
            Op::Pool(PoolKind::Average, _) => "avgpool",
            Op::GlobalAveragePool => "globalavgpool",
            Op::Reshape(_) => "reshape",
            Op::Transpose(_) => "transpose",
            Op::Concat(_) => "concat",
            Op::Softmax { .. } => "softmax",
        }
    }
}

impl Activation {
    /// Applies the activation to one value (reference semantics).
    pub fn apply(self, x: f32) -> f32 {
        match self {
            Activation::None => x,
            Activation::Relu => x.max(0.0),
            Activation::Clip(lo, hi) => x.max(lo).min(hi),
        }
    }
}
