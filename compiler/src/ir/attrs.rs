//! The typed attributes that `Op`'s variants carry (`op.rs`): elementwise operator kinds, the fused epilogue,
//! convolution, GEMM, pooling, resize and normalisation attributes, and the quantisation parameters. Each is
//! validated at import; shape rules and reference semantics live in `ir/ops/<family>.rs`.

use super::types::DType;

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
    /// a ^ b (real power; negative bases need an integral exponent)
    Pow,
    /// a >= 0 ? a : b * a (PRelu; b is the slope)
    PRelu,
    /// Remainder with the divisor's sign (ONNX Mod, fmod = 0)
    Mod,
    /// Remainder with the dividend's sign (ONNX Mod, fmod = 1; C fmod)
    FMod,
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
    /// ln(x)
    Log,
    /// erf(x)
    Erf,
    /// floor(x)
    Floor,
    /// ceil(x)
    Ceil,
    /// round half to even
    Round,
    /// -1, 0 or 1
    Sign,
    /// ln(1 + e^x)
    Softplus,
    /// x / (1 + |x|)
    Softsign,
    /// x > alpha ? x : 0
    ThresholdedRelu(f32),
    /// max(0, x) + min(0, alpha * (e^(x / alpha) - 1))
    Celu(f32),
    /// x * Φ(x) with the exact erf (`approximate = false`) or the tanh form
    Gelu {
        /// tanh approximation.
        tanh: bool,
    },
    /// x * tanh(softplus(x))
    Mish,
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

/// What a conv / gemm / matmul does after accumulating: a MatMul's scaling of the product and optional
/// per-column bias, optional residual add (its last input), then activation.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Epilogue {
    /// MatMul only (1 elsewhere): the product is multiplied by it before the bias — an attention's
    /// `Div(QKᵀ, √d)` folded in (`fuse_epilogues`).
    pub scale: f32,
    /// MatMul only (Conv and Gemm have their own bias inputs): input 2 holds N values (shape `[N]` or ones then
    /// `N`), added to every row of the product before the residual.
    pub bias: bool,
    /// The node's last input is added to the result (same shape as the output).
    pub residual: bool,
    /// Activation applied last.
    pub act: Activation,
}

impl Default for Epilogue {
    fn default() -> Self {
        Epilogue {
            scale: 1.0,
            bias: false,
            residual: false,
            act: Activation::None,
        }
    }
}

/// 2-D convolution attributes. Inputs: x \[N,C,H,W\], w [M,C/group,KH,KW], optional bias \[M\], optional residual.
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

/// 2-D transposed convolution attributes. Inputs: x \[N,C,H,W\], w [C,M/group,KH,KW], optional bias \[M\].
#[derive(Debug, Clone, PartialEq)]
pub struct ConvTransposeAttrs {
    /// Kernel size (KH, KW).
    pub kernel: [usize; 2],
    /// Strides (H, W).
    pub strides: [usize; 2],
    /// Pads removed from the full output: top, left, bottom, right.
    pub pads: [usize; 4],
    /// Dilations (H, W).
    pub dilations: [usize; 2],
    /// Extra output rows / columns at the end.
    pub output_padding: [usize; 2],
    /// Groups.
    pub group: usize,
    /// Whether input 2 is a bias.
    pub has_bias: bool,
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

/// Comparisons (bool output).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CmpOp {
    /// a == b
    Eq,
    /// a < b
    Lt,
    /// a <= b
    Le,
    /// a > b
    Gt,
    /// a >= b
    Ge,
}

/// Binary logical ops on bools.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LogicOp {
    /// a && b
    And,
    /// a || b
    Or,
    /// a != b
    Xor,
}

/// Reductions over a set of axes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReduceKind {
    /// Σ x
    Sum,
    /// Σ x / n
    Mean,
    /// max x
    Max,
    /// min x
    Min,
    /// Π x
    Prod,
    /// Σ |x|
    L1,
    /// sqrt(Σ x²)
    L2,
    /// Σ x²
    SumSquare,
    /// ln(Σ x)
    LogSum,
    /// ln(Σ e^x), computed as max + ln(Σ e^(x - max))
    LogSumExp,
}

/// How Pad fills positions outside the input.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum PadMode {
    /// A constant (its bits in the tensor's dtype, from an f64).
    Constant(f64),
    /// Mirror without repeating the edge.
    Reflect,
    /// Repeat the edge.
    Edge,
    /// Wrap around.
    Wrap,
}

/// Resize interpolation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ResizeMode {
    /// Nearest neighbour with the given rounding.
    Nearest(NearestMode),
    /// Linear per axis.
    Linear,
    /// Cubic convolution per axis.
    Cubic,
}

/// Rounding of the nearest-neighbour source coordinate.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NearestMode {
    /// round half down
    RoundPreferFloor,
    /// round half up
    RoundPreferCeil,
    /// floor
    Floor,
    /// ceil
    Ceil,
}

/// How an output coordinate maps to an input coordinate.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CoordMode {
    /// (x + 0.5) / scale - 0.5
    HalfPixel,
    /// like half_pixel, 0 when the output length is 1
    PytorchHalfPixel,
    /// x * (in - 1) / (out - 1)
    AlignCorners,
    /// x / scale
    Asymmetric,
    /// (x + 0.5) / scale - 0.5 with the input's true scale (half_pixel_symmetric)
    HalfPixelSymmetric,
}

/// Resize attributes (ROI-free modes): per-axis scales and the output shape.
#[derive(Debug, Clone, PartialEq)]
pub struct ResizeAttrs {
    /// Output shape.
    pub out: Vec<usize>,
    /// Scale per axis (given, or output / input when sizes are given).
    pub scales: Vec<f64>,
    /// Interpolation.
    pub mode: ResizeMode,
    /// Coordinate transformation.
    pub coord: CoordMode,
    /// Cubic coefficient a.
    pub cubic_a: f32,
    /// Cubic/linear taps outside the input get weight 0 and the rest are renormalised.
    pub exclude_outside: bool,
}

/// LRN attributes.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct LrnAttrs {
    /// Channels in the window.
    pub size: usize,
    /// Scale of the sum of squares.
    pub alpha: f32,
    /// Exponent.
    pub beta: f32,
    /// Added to the scaled sum.
    pub bias: f32,
}

/// Linear quantisation of a tensor, per tensor or per slice along `axis`: `q = sat(rhe(x / scale) + zero_point)`
/// and `x = (q - zero_point) * scale` (ONNX QuantizeLinear / DequantizeLinear). Scales are finite and positive.
#[derive(Debug, Clone, PartialEq)]
pub struct QuantParams {
    /// The quantised dtype (u8 or i8; i32 for a dequantised bias).
    pub dtype: DType,
    /// The axis the per-slice parameters run along; `None` when there is one scale.
    pub axis: Option<usize>,
    /// Scale per slice (one when per tensor).
    pub scale: Vec<f32>,
    /// Zero point per slice (same length as `scale`).
    pub zero_point: Vec<i32>,
}

/// The requantisation stage of an integer conv / matrix product (`ir/ops/quant.rs::requantize`).
#[derive(Debug, Clone, PartialEq)]
pub struct Requant {
    /// `x_scale * w_scale[c] / y_scale` per output channel, computed in f32 in that order.
    pub scale: Vec<f32>,
    /// Output zero point.
    pub zero_point: i32,
    /// Output clamp (the fused Relu / Clip, else the dtype's range).
    pub clamp: (i32, i32),
    /// Output dtype (u8 or i8).
    pub dtype: DType,
}

/// What an integer conv / matrix product adds and produces: `acc = Σ (x - x_zero_point) * w` exactly in i32,
/// `acc + bias[c]`, then either the raw i32 (ConvInteger, MatMulInteger) or requantised to u8 / i8.
#[derive(Debug, Clone, PartialEq)]
pub struct IntProduct {
    /// Zero point of the activation input.
    pub x_zero_point: i32,
    /// i32 bias per output channel (conv) or column (matmul); zeros when the model has none.
    pub bias: Vec<i32>,
    /// Requantisation; `None` outputs the i32 sums.
    pub requant: Option<Requant>,
}

impl IntProduct {
    /// The output dtype.
    pub fn out_dtype(&self) -> DType {
        self.requant.as_ref().map_or(DType::I32, |r| r.dtype)
    }
}

/// A quantised elementwise add (or multiply) of same-shaped u8 / i8 tensors, exactly the f32 chain it replaces:
/// `y = clamp(sat(rhe(((a - za) · sa ⊕ (b - zb) · sb) / sy) + zy), lo, hi)` with ⊕ = + or × (each step an f32
/// operation).
#[derive(Debug, Clone, PartialEq)]
pub struct QAddParams {
    /// a's scale and zero point.
    pub a: (f32, i32),
    /// b's scale and zero point.
    pub b: (f32, i32),
    /// The output's scale and zero point.
    pub y: (f32, i32),
    /// Output clamp (a fused Relu / Clip, else the dtype's range).
    pub clamp: (i32, i32),
    /// Output dtype (u8 or i8).
    pub dtype: DType,
    /// Multiply instead of add (QLinearMul).
    pub mul: bool,
}

/// Parameters of an integer GlobalAveragePool (`Op::QGlobalAvgPool`, onnxruntime's QLinearGlobalAveragePool):
/// per plane of `size` elements `y = sat(rhe(f32(Σ (x - zx)) · m) + zy)` with the multiplier
/// `m = sx / (sy · f32(size))` computed in f32 in that order (the sum is exact in i32).
#[derive(Debug, Clone, PartialEq)]
pub struct QGapParams {
    /// The input's scale and zero point.
    pub x: (f32, i32),
    /// The output's scale and zero point.
    pub y: (f32, i32),
    /// Output dtype (u8 or i8).
    pub dtype: DType,
}

impl QGapParams {
    /// The requantisation multiplier for planes of `size` elements.
    pub fn multiplier(&self, size: usize) -> f32 {
        self.x.0 / (self.y.0 * size as f32)
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
