//! ONNX node → IR op mapping, one arm per ONNX op type: attribute parsing, opset differences, and rejection
//! reasons for unsupported forms. Here: the elementwise, logic and linear-algebra ops and Softmax, then each
//! other family's file in turn (`cnn_ops.rs`, `shape_ops.rs`, `data_ops.rs`, `resize_ops.rs`, `nn_ops.rs`,
//! `quant_ops.rs`). Nodes whose inputs are all constants are folded by the caller.

use super::attrs::Attrs;
use super::importer::Importer;
use crate::error::{Error, Result};
use crate::ir::{BinOp, CmpOp, DType, Epilogue, GemmAttrs, LogicOp, Op, Tensor, TensorId, UnOp};
use tract_onnx::pb::NodeProto;

/// What an ONNX node becomes.
pub enum Lowered {
    /// One IR node: the op and its inputs.
    Node(Op, Vec<TensorId>),
    /// A chain of binary ops folded left over the inputs (variadic Max/Min/Sum).
    Chain(BinOp, Vec<TensorId>),
    /// The node's output is another tensor (Identity, inference Dropout).
    Alias(TensorId),
    /// The node's output is a compile-time constant.
    Const(Tensor),
    /// One IR node per ONNX output, in order (Split).
    Many(Vec<(Op, Vec<TensorId>)>),
    /// A chain: the first op reads the inputs, each later op the previous one's output; the last writes the
    /// node's output (QLinearGlobalAveragePool: dequantize, pool, quantize).
    Seq(Vec<Op>, Vec<TensorId>),
}

/// Input `i` of a node (`ins`: None for an omitted optional input), or the error naming the node that lacks it.
pub(super) fn required(
    ins: &[Option<TensorId>],
    name: &str,
    op: &str,
    i: usize,
) -> Result<TensorId> {
    ins.get(i)
        .copied()
        .flatten()
        .ok_or_else(|| Error::node(name, op, format!("missing input {i}")))
}

/// Every ONNX op type the importer maps, for `bundlec ops`.
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

impl Importer<'_> {
    /// Maps one node. `ins` are the node's inputs (None for an omitted optional input).
    pub(super) fn lower_node(
        &mut self,
        node: &NodeProto,
        name: &str,
        ins: &[Option<TensorId>],
    ) -> Result<Lowered> {
        let op = node.op_type.as_str();
        let a = Attrs::new(node, name, self.warnings.clone());
        let contrib = node.domain == "com.microsoft"
            && matches!(op, "QLinearAdd" | "QLinearMul" | "QLinearGlobalAveragePool");
        if !node.domain.is_empty() && node.domain != "ai.onnx" && !contrib {
            return Err(Error::unsupported(
                name,
                op,
                format!("domain '{}' is not supported", node.domain),
            ));
        }
        let req = |i: usize| required(ins, name, op, i);
        let rank = |t: TensorId| self.g.tensors[t].shape.len();
        let un = |u: UnOp| -> Result<Lowered> { Ok(Lowered::Node(Op::Unary(u), vec![req(0)?])) };
        Ok(match op {
            "Add" | "Sub" | "Mul" | "Div" => {
                if a.has("axis") || a.int("broadcast", 0)? != 0 && self.opset < 7 {
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
                Lowered::Node(Op::Binary(b), vec![req(0)?, req(1)?])
            }
            "Pow" => Lowered::Node(Op::Binary(BinOp::Pow), vec![req(0)?, req(1)?]),
            "PRelu" => Lowered::Node(Op::Binary(BinOp::PRelu), vec![req(0)?, req(1)?]),
            "Equal" | "Less" | "LessOrEqual" | "Greater" | "GreaterOrEqual" => {
                let c = match op {
                    "Equal" => CmpOp::Eq,
                    "Less" => CmpOp::Lt,
                    "LessOrEqual" => CmpOp::Le,
                    "Greater" => CmpOp::Gt,
                    _ => CmpOp::Ge,
                };
                Lowered::Node(Op::Compare(c), vec![req(0)?, req(1)?])
            }
            "And" | "Or" | "Xor" => {
                let l = match op {
                    "And" => LogicOp::And,
                    "Or" => LogicOp::Or,
                    _ => LogicOp::Xor,
                };
                Lowered::Node(Op::Logic(l), vec![req(0)?, req(1)?])
            }
            "Not" => Lowered::Node(Op::Not, vec![req(0)?]),
            "Where" => Lowered::Node(Op::Where, vec![req(0)?, req(1)?, req(2)?]),
            "Mod" => {
                let b = if a.int("fmod", 0)? != 0 {
                    BinOp::FMod
                } else {
                    BinOp::Mod
                };
                Lowered::Node(Op::Binary(b), vec![req(0)?, req(1)?])
            }
            "Log" => un(UnOp::Log)?,
            "Erf" => un(UnOp::Erf)?,
            "Floor" => un(UnOp::Floor)?,
            "Ceil" => un(UnOp::Ceil)?,
            "Round" => un(UnOp::Round)?,
            "Sign" => un(UnOp::Sign)?,
            "Softplus" => un(UnOp::Softplus)?,
            "Softsign" => un(UnOp::Softsign)?,
            "Mish" => un(UnOp::Mish)?,
            "ThresholdedRelu" => un(UnOp::ThresholdedRelu(a.not_nan("alpha", 1.0)?))?,
            "Celu" => {
                // x / alpha: 0 is as bad as NaN.
                let alpha = a.finite("alpha", 1.0)?;
                if alpha == 0.0 {
                    return Err(a.every_output("alpha", alpha));
                }
                un(UnOp::Celu(alpha))?
            }
            "Gelu" => match a.string("approximate", "none")?.as_str() {
                "none" => un(UnOp::Gelu { tanh: false })?,
                "tanh" => un(UnOp::Gelu { tanh: true })?,
                m => {
                    return Err(Error::node(
                        name,
                        op,
                        format!("attribute 'approximate': unknown value '{m}'"),
                    ))
                }
            },
            "Max" | "Min" | "Sum" => {
                let b = match op {
                    "Max" => BinOp::Max,
                    "Min" => BinOp::Min,
                    _ => BinOp::Add,
                };
                let list: Vec<TensorId> = ins.iter().flatten().copied().collect();
                match list.len() {
                    0 => return Err(Error::node(name, op, "needs at least one input")),
                    1 => Lowered::Alias(list[0]),
                    _ => Lowered::Chain(b, list),
                }
            }
            "Relu" => un(UnOp::Relu)?,
            "Sigmoid" => un(UnOp::Sigmoid)?,
            "Tanh" => un(UnOp::Tanh)?,
            "Exp" => un(UnOp::Exp)?,
            "Neg" => un(UnOp::Neg)?,
            "Abs" => un(UnOp::Abs)?,
            "Sqrt" => un(UnOp::Sqrt)?,
            "Reciprocal" => un(UnOp::Reciprocal)?,
            "Identity" => Lowered::Alias(req(0)?),
            "LeakyRelu" => un(UnOp::LeakyRelu(a.finite_or_warn("alpha", 0.01)?))?,
            "HardSigmoid" => un(UnOp::HardSigmoid(
                a.finite("alpha", 0.2)?,
                a.finite("beta", 0.5)?,
            ))?,
            "HardSwish" => un(UnOp::HardSwish)?,
            "Elu" => un(UnOp::Elu(a.finite_or_warn("alpha", 1.0)?))?,
            "Selu" => un(UnOp::Selu(
                a.finite_or_warn("alpha", 1.673_263_2)?,
                a.finite("gamma", 1.050_701)?,
            ))?,
            "Dropout" => {
                if self.extra_outputs_used(node) {
                    return Err(Error::unsupported(
                        name,
                        op,
                        "the mask output is used (training only)",
                    ));
                }
                if let Some(t) = ins.get(2).copied().flatten() {
                    if self.const_ints(t).is_none_or(|v| v.iter().any(|&x| x != 0)) {
                        return Err(Error::unsupported(
                            name,
                            op,
                            "training_mode is not constant false",
                        ));
                    }
                }
                Lowered::Alias(req(0)?)
            }
            "Clip" => {
                let (lo, hi) = if self.opset < 11 {
                    (a.not_nan("min", f32::MIN)?, a.not_nan("max", f32::MAX)?)
                } else {
                    let bound = |i: usize, d: f32| -> Result<f32> {
                        let Some(t) = ins.get(i).copied().flatten() else {
                            return Ok(d);
                        };
                        let v = self.scalar_const(t).ok_or_else(|| {
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
                Lowered::Node(Op::Unary(UnOp::Clip(lo, hi)), vec![req(0)?])
            }
            "MatMul" => Lowered::Node(Op::MatMul(Epilogue::default()), vec![req(0)?, req(1)?]),
            "Gemm" => {
                let c = ins.get(2).copied().flatten();
                let attrs = GemmAttrs {
                    alpha: a.finite("alpha", 1.0)?,
                    beta: a.finite("beta", 1.0)?,
                    trans_a: a.int("transA", 0)? != 0,
                    trans_b: a.int("transB", 0)? != 0,
                    has_c: c.is_some(),
                    epilogue: Epilogue::default(),
                };
                let mut v = vec![req(0)?, req(1)?];
                v.extend(c);
                Lowered::Node(Op::Gemm(attrs), v)
            }
            "Softmax" | "LogSoftmax" => {
                let x = req(0)?;
                let legacy = self.opset < 13;
                let axis = a.axis("axis", if legacy { 1 } else { -1 }, rank(x))?;
                Lowered::Node(
                    Op::Softmax {
                        axis,
                        flatten_tail: legacy,
                        log: op == "LogSoftmax",
                    },
                    vec![x],
                )
            }
            _ => {
                if let Some(l) = self.lower_cnn_op(node, name, ins, &a)? {
                    return Ok(l);
                }
                if let Some(l) = self.lower_shape_op(node, name, ins, &a)? {
                    return Ok(l);
                }
                if let Some(l) = self.lower_data_op(node, name, ins, &a)? {
                    return Ok(l);
                }
                if let Some(l) = self.lower_resize_op(node, name, ins, &a)? {
                    return Ok(l);
                }
                if let Some(l) = self.lower_nn_op(node, name, ins, &a)? {
                    return Ok(l);
                }
                if let Some(l) = self.lower_quant_op(node, name, ins, &a)? {
                    return Ok(l);
                }
                return Err(Error::unsupported(name, op, "op is not supported"));
            }
        })
    }

    fn scalar_const(&self, t: TensorId) -> Option<f32> {
        let c = self.g.constant(t)?;
        (c.len() == 1).then(|| c.to_f32_vec()[0])
    }

    pub(super) fn const_ints(&self, t: TensorId) -> Option<Vec<i64>> {
        let c = self.g.constant(t)?;
        (c.dtype != DType::F32).then(|| c.to_i64_vec())
    }
}
