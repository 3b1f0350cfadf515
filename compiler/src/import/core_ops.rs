//! ONNX → IR mapping of the elementwise, logic and linear-algebra ops and Softmax.

use super::attrs::Attrs;
use super::importer::Importer;
use super::nodes::{Lowered, Node, Parser};
use crate::error::{Error, Result};
use crate::ir::{BinOp, CmpOp, DType, Epilogue, GemmAttrs, LogicOp, Op, TensorId, UnOp};

/// The ONNX ops this file maps, for `bundlec ops`.
pub const SUPPORTED: &[(&str, &str)] = &[
    (
        "Add, Sub, Mul, Div",
        "f32 (and i64 when folded); numpy broadcasting",
    ),
    ("Max, Min, Sum", "f32; any number of inputs; broadcasting"),
    (
        "Pow",
        "f32 (negative bases need integral exponents); i64 when folded",
    ),
    ("PRelu", "f32; slope broadcast to the input"),
    ("Mod", "f32 (fmod 0 or 1); integers when folded"),
    (
        "Equal, Less, LessOrEqual, Greater, GreaterOrEqual",
        "f32, i64, i32, u8, i8, bool; bool output; broadcasting",
    ),
    ("And, Or, Xor, Not", "bool; broadcasting"),
    (
        "IsNaN, IsInf",
        "f32; IsInf's detect_positive / detect_negative",
    ),
    (
        "Where",
        "bool condition, any dtype; broadcasting of all three",
    ),
    (
        "Relu, Sigmoid, Tanh, Exp, Neg, Abs, Sqrt, Reciprocal",
        "f32",
    ),
    (
        "Log, Erf, Floor, Ceil, Round, Sign, Softplus, Softsign, Mish",
        "f32",
    ),
    (
        "LeakyRelu, HardSigmoid, HardSwish, Elu, Selu, ThresholdedRelu, Celu, Gelu",
        "f32; alpha/beta/gamma attributes; Gelu approximate none or tanh",
    ),
    (
        "Clip",
        "f32; min/max as attributes (opset < 11) or constant inputs",
    ),
    (
        "Identity, Dropout",
        "inference only: Dropout's mask output must be unused",
    ),
    (
        "MatMul",
        "f32; batched with numpy broadcasting; 1-D operands",
    ),
    (
        "Gemm",
        "f32; transA, transB, alpha, beta; C broadcast to [M, N]",
    ),
    (
        "Softmax, LogSoftmax",
        "any axis; opset < 13 flattens the tail",
    ),
];

impl Importer<'_> {}

/// The unary op (with its attributes) of a node whose op type is one of the unary ones.
fn unary(name: &str, op: &str, a: &Attrs) -> Result<UnOp> {
    Ok(match op {
        "Relu" => UnOp::Relu,
        "Sigmoid" => UnOp::Sigmoid,
        "Tanh" => UnOp::Tanh,
        "Exp" => UnOp::Exp,
        "Neg" => UnOp::Neg,
        "Abs" => UnOp::Abs,
        "Sqrt" => UnOp::Sqrt,
        "Reciprocal" => UnOp::Reciprocal,
        "Log" => UnOp::Log,
        "Erf" => UnOp::Erf,
        "Floor" => UnOp::Floor,
        "Ceil" => UnOp::Ceil,
        "Round" => UnOp::Round,
        "Sign" => UnOp::Sign,
        "Softplus" => UnOp::Softplus,
        "Softsign" => UnOp::Softsign,
        "Mish" => UnOp::Mish,
        "LeakyRelu" => UnOp::LeakyRelu(a.finite_or_warn("alpha", 0.01)?),
        "HardSigmoid" => UnOp::HardSigmoid(a.finite("alpha", 0.2)?, a.finite("beta", 0.5)?),
        "HardSwish" => UnOp::HardSwish,
        "Elu" => UnOp::Elu(a.finite_or_warn("alpha", 1.0)?),
        "Selu" => UnOp::Selu(
            a.finite_or_warn("alpha", 1.673_263_2)?,
            a.finite("gamma", 1.050_701)?,
        ),
        "ThresholdedRelu" => UnOp::ThresholdedRelu(a.not_nan("alpha", 1.0)?),
        "Celu" => {
            // x / alpha: 0 is as bad as NaN.
            let alpha = a.finite("alpha", 1.0)?;
            if alpha == 0.0 {
                return Err(a.every_output("alpha", alpha));
            }
            UnOp::Celu(alpha)
        }
        "Gelu" => match a.string("approximate", "none")?.as_str() {
            "none" => UnOp::Gelu { tanh: false },
            "tanh" => UnOp::Gelu { tanh: true },
            m => {
                return Err(Error::node(
                    name,
                    op,
                    format!("attribute 'approximate': unknown value '{m}'"),
                ))
            }
        },
        _ => return Err(Error::node(name, op, "not a unary op")),
    })
}

/// The parsers of this file's op types.
pub(super) const PARSERS: &[Parser] = &[
    (
        &[
            "Relu",
            "Sigmoid",
            "Tanh",
            "Exp",
            "Neg",
            "Abs",
            "Sqrt",
            "Reciprocal",
            "Log",
            "Erf",
            "Floor",
            "Ceil",
            "Round",
            "Sign",
            "Softplus",
            "Softsign",
            "Mish",
            "LeakyRelu",
            "HardSigmoid",
            "HardSwish",
            "Elu",
            "Selu",
            "ThresholdedRelu",
            "Celu",
            "Gelu",
        ],
        parse_unary,
    ),
    (&["Add", "Sub", "Mul", "Div"], parse_arithmetic),
    (&["Pow"], parse_pow),
    (&["PRelu"], parse_prelu),
    (
        &["Equal", "Less", "LessOrEqual", "Greater", "GreaterOrEqual"],
        parse_compare,
    ),
    (&["And", "Or", "Xor"], parse_logic),
    (&["Not"], parse_not),
    (&["Where"], parse_where),
    (&["IsNaN", "IsInf"], parse_is_special),
    (&["Mod"], parse_mod),
    (&["Max", "Min", "Sum"], parse_variadic),
    (&["Identity"], parse_identity),
    (&["Dropout"], parse_dropout),
    (&["Clip"], parse_clip),
    (&["MatMul"], parse_mat_mul),
    (&["Gemm"], parse_gemm),
    (&["Softmax", "LogSoftmax"], parse_softmax),
];

/// The unary ops (`unary`).
fn parse_unary(_: &mut Importer<'_>, n: &Node<'_>) -> Result<Lowered> {
    let Node { name, op, a, .. } = *n;
    let u = unary(name, op, a)?;
    Ok(Lowered::Node(Op::Unary(u), vec![n.req(0)?]))
}

/// `Add`, `Sub`, `Mul`, `Div`.
fn parse_arithmetic(im: &mut Importer<'_>, n: &Node<'_>) -> Result<Lowered> {
    let Node { name, op, a, .. } = *n;
    if a.has("axis") || a.int("broadcast", 0)? != 0 && im.opset < 7 {
        return Err(Error::unsupported(
            name,
            op,
            "legacy axis broadcasting (opset < 7) is not supported",
        ));
    }
    let b = match op {
        "Add" => BinOp::Add,
        "Sub" => BinOp::Sub,
        "Mul" => BinOp::Mul,
        _ => BinOp::Div,
    };
    Ok(Lowered::Node(Op::Binary(b), vec![n.req(0)?, n.req(1)?]))
}

/// `Pow`.
fn parse_pow(im: &mut Importer<'_>, n: &Node<'_>) -> Result<Lowered> {
    let (x, e) = (n.req(0)?, n.req(1)?);
    let small = scalar_const(im, e).filter(|v| [1.0, 2.0, 3.0, 4.0].contains(v));
    let run_time_f32 = im.g.constant(x).is_none()
        && im.g.tensors[x].dtype == DType::F32
        && im.g.tensors[e].shape.len() <= im.g.tensors[x].shape.len();
    // A small integer exponent of a run-time f32 (GELU's x³): multiplies instead of exp and log, as exact as
    // `pow` to within an ulp per multiply. The result keeps x's shape (an exponent of no higher rank does).
    if let (Some(v), true) = (small, run_time_f32) {
        let mul = |im: &mut Importer<'_>, tag: &str, a: TensorId, b: TensorId| {
            im.sub_node(n, tag, Op::Binary(BinOp::Mul), vec![a, b])
        };
        let square = |im: &mut Importer<'_>| mul(im, "square", x, x);
        return Ok(match v as u32 {
            1 => Lowered::Alias(x),
            2 => Lowered::Alias(square(im)?),
            3 => {
                let x2 = square(im)?;
                Lowered::Node(Op::Binary(BinOp::Mul), vec![x2, x])
            }
            _ => {
                let x2 = square(im)?;
                Lowered::Node(Op::Binary(BinOp::Mul), vec![x2, x2])
            }
        });
    }
    Ok(Lowered::Node(Op::Binary(BinOp::Pow), vec![x, e]))
}

/// `PRelu`.
fn parse_prelu(_: &mut Importer<'_>, n: &Node<'_>) -> Result<Lowered> {
    Ok(Lowered::Node(
        Op::Binary(BinOp::PRelu),
        vec![n.req(0)?, n.req(1)?],
    ))
}

/// `Equal`, `Less`, `LessOrEqual`, `Greater`, `GreaterOrEqual`.
fn parse_compare(_: &mut Importer<'_>, n: &Node<'_>) -> Result<Lowered> {
    let Node { op, .. } = *n;
    let c = match op {
        "Equal" => CmpOp::Eq,
        "Less" => CmpOp::Lt,
        "LessOrEqual" => CmpOp::Le,
        "Greater" => CmpOp::Gt,
        _ => CmpOp::Ge,
    };
    Ok(Lowered::Node(Op::Compare(c), vec![n.req(0)?, n.req(1)?]))
}

/// `And`, `Or`, `Xor`.
fn parse_logic(_: &mut Importer<'_>, n: &Node<'_>) -> Result<Lowered> {
    let Node { op, .. } = *n;
    let l = match op {
        "And" => LogicOp::And,
        "Or" => LogicOp::Or,
        _ => LogicOp::Xor,
    };
    Ok(Lowered::Node(Op::Logic(l), vec![n.req(0)?, n.req(1)?]))
}

/// `Not`.
fn parse_not(_: &mut Importer<'_>, n: &Node<'_>) -> Result<Lowered> {
    Ok(Lowered::Node(Op::Not, vec![n.req(0)?]))
}

/// `Where`.
fn parse_where(_: &mut Importer<'_>, n: &Node<'_>) -> Result<Lowered> {
    Ok(Lowered::Node(
        Op::Where,
        vec![n.req(0)?, n.req(1)?, n.req(2)?],
    ))
}

/// `IsNaN` (x ≠ x: `Not(Equal(x, x))`), `IsInf` (`Equal` with ±∞, of `|x|` when both signs count).
fn parse_is_special(im: &mut Importer<'_>, n: &Node<'_>) -> Result<Lowered> {
    let x = n.req(0)?;
    let out0 = n.node.output.first().map_or("", String::as_str);
    if n.op == "IsNaN" {
        let eq = im.sub_node(n, "eq", Op::Compare(CmpOp::Eq), vec![x, x])?;
        return Ok(Lowered::Node(Op::Not, vec![eq]));
    }
    let (pos, neg) = (
        n.a.int("detect_positive", 1)? != 0,
        n.a.int("detect_negative", 1)? != 0,
    );
    let (v, operand) = match (pos, neg) {
        (true, true) => (
            f32::INFINITY,
            im.sub_node(n, "abs", Op::Unary(UnOp::Abs), vec![x])?,
        ),
        (true, false) => (f32::INFINITY, x),
        (false, true) => (f32::NEG_INFINITY, x),
        // Neither sign: no element is reported; NaN equals nothing.
        (false, false) => (f32::NAN, x),
    };
    let c = im.g.add_constant(
        format!("{out0}.inf"),
        crate::ir::Tensor::f32(vec![], vec![v]),
    );
    Ok(Lowered::Node(Op::Compare(CmpOp::Eq), vec![operand, c]))
}

/// `Mod`.
fn parse_mod(_: &mut Importer<'_>, n: &Node<'_>) -> Result<Lowered> {
    let Node { a, .. } = *n;
    let b = if a.int("fmod", 0)? != 0 {
        BinOp::FMod
    } else {
        BinOp::Mod
    };
    Ok(Lowered::Node(Op::Binary(b), vec![n.req(0)?, n.req(1)?]))
}

/// `Max`, `Min`, `Sum`.
fn parse_variadic(_: &mut Importer<'_>, n: &Node<'_>) -> Result<Lowered> {
    let Node { name, op, ins, .. } = *n;
    let b = match op {
        "Max" => BinOp::Max,
        "Min" => BinOp::Min,
        _ => BinOp::Add,
    };
    let list: Vec<TensorId> = ins.iter().flatten().copied().collect();
    Ok(match list.len() {
        0 => return Err(Error::node(name, op, "needs at least one input")),
        1 => Lowered::Alias(list[0]),
        _ => Lowered::Chain(b, list),
    })
}

/// `Identity`.
fn parse_identity(_: &mut Importer<'_>, n: &Node<'_>) -> Result<Lowered> {
    Ok(Lowered::Alias(n.req(0)?))
}

/// `Dropout`.
fn parse_dropout(im: &mut Importer<'_>, n: &Node<'_>) -> Result<Lowered> {
    let Node { node, name, op, .. } = *n;
    if im.extra_outputs_used(node) {
        return Err(Error::unsupported(
            name,
            op,
            "the mask output is used (training only)",
        ));
    }
    if let Some(t) = n.input(2) {
        if im.const_ints(t).is_none_or(|v| v.iter().any(|&x| x != 0)) {
            return Err(Error::unsupported(
                name,
                op,
                "training_mode is not constant false",
            ));
        }
    }
    Ok(Lowered::Alias(n.req(0)?))
}

/// `Clip`.
fn parse_clip(im: &mut Importer<'_>, n: &Node<'_>) -> Result<Lowered> {
    let Node {
        node, name, op, a, ..
    } = *n;
    let (lo, hi) = if im.opset < 11 {
        (a.not_nan("min", f32::MIN)?, a.not_nan("max", f32::MAX)?)
    } else {
        let bound = |i: usize, d: f32| -> Result<f32> {
            let Some(t) = n.input(i) else {
                return Ok(d);
            };
            let v = scalar_const(im, t).ok_or_else(|| {
                Error::unsupported(
                    name,
                    op,
                    format!(
                        "input '{}' (bound {i}) must be constant (a scalar)",
                        crate::error::clip_name(&node.input[i])
                    ),
                )
            })?;
            if v.is_nan() {
                return Err(Error::node(
                    name,
                    op,
                    format!(
                        "bound '{}' is NaN, which makes every output NaN",
                        crate::error::clip_name(&node.input[i])
                    ),
                ));
            }
            Ok(v)
        };
        (bound(1, f32::MIN)?, bound(2, f32::MAX)?)
    };
    Ok(Lowered::Node(
        Op::Unary(UnOp::Clip(lo, hi)),
        vec![n.req(0)?],
    ))
}

/// `MatMul`.
fn parse_mat_mul(_: &mut Importer<'_>, n: &Node<'_>) -> Result<Lowered> {
    Ok(Lowered::Node(
        Op::MatMul(Epilogue::default()),
        vec![n.req(0)?, n.req(1)?],
    ))
}

/// `Gemm`.
fn parse_gemm(_: &mut Importer<'_>, n: &Node<'_>) -> Result<Lowered> {
    let Node { a, .. } = *n;
    let c = n.input(2);
    let attrs = GemmAttrs {
        alpha: a.finite("alpha", 1.0)?,
        beta: a.finite("beta", 1.0)?,
        trans_a: a.int("transA", 0)? != 0,
        trans_b: a.int("transB", 0)? != 0,
        has_c: c.is_some(),
        epilogue: Epilogue::default(),
    };
    let mut v = vec![n.req(0)?, n.req(1)?];
    v.extend(c);
    Ok(Lowered::Node(Op::Gemm(attrs), v))
}

/// `Softmax`, `LogSoftmax`.
fn parse_softmax(im: &mut Importer<'_>, n: &Node<'_>) -> Result<Lowered> {
    let Node { op, a, .. } = *n;
    let rank = |t: TensorId| im.g.tensors[t].shape.len();
    let x = n.req(0)?;
    let legacy = im.opset < 13;
    let axis = a.axis("axis", if legacy { 1 } else { -1 }, rank(x))?;
    Ok(Lowered::Node(
        Op::Softmax {
            axis,
            flatten_tail: legacy,
            log: op == "LogSoftmax",
        },
        vec![x],
    ))
}

/// The value of scalar constant `t`, as f32.
fn scalar_const(im: &Importer<'_>, t: TensorId) -> Option<f32> {
    let c = im.g.constant(t)?;
    (c.len() == 1).then(|| c.to_f32_vec()[0])
}
