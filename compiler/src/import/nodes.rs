//! ONNX node → IR op mapping, one arm per ONNX op type: attribute parsing, opset differences, and rejection
//! reasons for unsupported forms. Nodes whose inputs are all constants are folded by the caller.

use super::attrs::Attrs;
use super::tensor::decode;
use super::Importer;
use crate::error::{Error, Result};
use crate::ir::{
    numel, BinOp, CmpOp, ConvAttrs, DType, Epilogue, GemmAttrs, LogicOp, Op, PoolAttrs, PoolKind,
    Tensor, TensorId, UnOp,
};
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
        "Conv",
        "2-D, f32; pads, auto_pad, strides, dilations, group (incl. depthwise), bias",
    ),
    (
        "BatchNormalization",
        "inference (training_mode = 0); folded into a preceding Conv",
    ),
    (
        "MaxPool",
        "2-D; pads, auto_pad, strides, dilations, ceil_mode; no Indices output",
    ),
    (
        "AveragePool",
        "2-D; pads, auto_pad, strides, ceil_mode, count_include_pad",
    ),
    ("GlobalAveragePool", "rank >= 3"),
    (
        "Flatten, Reshape, Squeeze, Unsqueeze",
        "shape / axes must be constant",
    ),
    ("Transpose", "any rank"),
    ("Concat", "any rank, any axis"),
    (
        "Softmax, LogSoftmax",
        "any axis; opset < 13 flattens the tail",
    ),
    ("Constant, Shape, Size", "folded at compile time"),
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
        let a = Attrs::new(node, name);
        let contrib = node.domain == "com.microsoft"
            && matches!(op, "QLinearAdd" | "QLinearMul" | "QLinearGlobalAveragePool");
        if !node.domain.is_empty() && node.domain != "ai.onnx" && !contrib {
            return Err(Error::unsupported(
                name,
                op,
                format!("domain '{}' is not supported", node.domain),
            ));
        }
        let req = |i: usize| -> Result<TensorId> {
            ins.get(i)
                .copied()
                .flatten()
                .ok_or_else(|| Error::node(name, op, format!("missing input {i}")))
        };
        let rank = |t: TensorId| self.g.tensors[t].shape.len();
        let shape = |t: TensorId| self.g.tensors[t].shape.clone();
        let un = |u: UnOp| -> Result<Lowered> { Ok(Lowered::Node(Op::Unary(u), vec![req(0)?])) };
        Ok(match op {
            "Add" | "Sub" | "Mul" | "Div" => {
                if a.has("axis") || a.int("broadcast", 0) != 0 && self.opset < 7 {
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
                let b = if a.int("fmod", 0) != 0 {
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
            "ThresholdedRelu" => un(UnOp::ThresholdedRelu(a.float("alpha", 1.0)))?,
            "Celu" => un(UnOp::Celu(a.float("alpha", 1.0)))?,
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
            "LeakyRelu" => un(UnOp::LeakyRelu(a.float("alpha", 0.01)))?,
            "HardSigmoid" => un(UnOp::HardSigmoid(
                a.float("alpha", 0.2),
                a.float("beta", 0.5),
            ))?,
            "HardSwish" => un(UnOp::HardSwish)?,
            "Elu" => un(UnOp::Elu(a.float("alpha", 1.0)))?,
            "Selu" => un(UnOp::Selu(
                a.float("alpha", 1.673_263_2),
                a.float("gamma", 1.050_701),
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
                    (a.float("min", f32::MIN), a.float("max", f32::MAX))
                } else {
                    let bound = |i: usize, d: f32| -> Result<f32> {
                        match ins.get(i).copied().flatten() {
                            None => Ok(d),
                            Some(t) => self.scalar_const(t).ok_or_else(|| {
                                Error::unsupported(
                                    name,
                                    op,
                                    format!(
                                        "input '{}' (bound {i}) must be constant (a scalar)",
                                        node.input[i]
                                    ),
                                )
                            }),
                        }
                    };
                    (bound(1, f32::MIN)?, bound(2, f32::MAX)?)
                };
                Lowered::Node(Op::Unary(UnOp::Clip(lo, hi)), vec![req(0)?])
            }
            "MatMul" => Lowered::Node(Op::MatMul(Epilogue::default()), vec![req(0)?, req(1)?]),
            "Gemm" => {
                let c = ins.get(2).copied().flatten();
                let attrs = GemmAttrs {
                    alpha: a.float("alpha", 1.0),
                    beta: a.float("beta", 1.0),
                    trans_a: a.int("transA", 0) != 0,
                    trans_b: a.int("transB", 0) != 0,
                    has_c: c.is_some(),
                    epilogue: Epilogue::default(),
                };
                let mut v = vec![req(0)?, req(1)?];
                v.extend(c);
                Lowered::Node(Op::Gemm(attrs), v)
            }
            "Conv" => {
                let (x, w) = (req(0)?, req(1)?);
                let bias = ins.get(2).copied().flatten();
                let attrs = self.conv_attrs(&a, op, x, w, bias.is_some())?;
                let mut v = vec![x, w];
                v.extend(bias);
                Lowered::Node(Op::Conv(attrs), v)
            }
            "BatchNormalization" => {
                if a.int("training_mode", 0) != 0 {
                    return Err(Error::unsupported(name, op, "training_mode = 1"));
                }
                if self.extra_outputs_used(node) {
                    return Err(Error::unsupported(
                        name,
                        op,
                        "running mean/var outputs are used (training only)",
                    ));
                }
                Lowered::Node(
                    Op::BatchNorm {
                        epsilon: a.float("epsilon", 1e-5),
                    },
                    (0..5).map(req).collect::<Result<_>>()?,
                )
            }
            "MaxPool" | "AveragePool" => {
                let x = req(0)?;
                if rank(x) != 4 {
                    return Err(Error::unsupported(
                        name,
                        op,
                        format!("only 2-D pooling is supported (input rank {})", rank(x)),
                    ));
                }
                if op == "MaxPool" && self.extra_outputs_used(node) {
                    return Err(Error::unsupported(
                        name,
                        op,
                        "the Indices output is not supported",
                    ));
                }
                if a.int("storage_order", 0) != 0 {
                    return Err(Error::unsupported(name, op, "storage_order = 1"));
                }
                let k = a.positive_usizes("kernel_shape", 2, 0)?;
                if !a.has("kernel_shape") {
                    return Err(Error::node(
                        name,
                        op,
                        "attribute 'kernel_shape' is required",
                    ));
                }
                let strides = a.positive_usizes("strides", 2, 1)?;
                let dil = a.positive_usizes("dilations", 2, 1)?;
                if op == "AveragePool" && dil != [1, 1] {
                    return Err(Error::unsupported(name, op, "dilations on AveragePool"));
                }
                let kernel = [k[0], k[1]];
                let xs = shape(x);
                let pads = self.pads(&a, op, &xs[2..], &kernel, &strides, &dil)?;
                let attrs = PoolAttrs {
                    kernel,
                    strides: [strides[0], strides[1]],
                    pads,
                    dilations: [dil[0], dil[1]],
                    ceil_mode: a.int("ceil_mode", 0) != 0,
                    count_include_pad: a.int("count_include_pad", 0) != 0,
                };
                let kind = if op == "MaxPool" {
                    PoolKind::Max
                } else {
                    PoolKind::Average
                };
                Lowered::Node(Op::Pool(kind, attrs), vec![x])
            }
            "GlobalAveragePool" => Lowered::Node(Op::GlobalAveragePool, vec![req(0)?]),
            "Flatten" => {
                let x = req(0)?;
                let s = shape(x);
                let r = s.len() as i64;
                let axis = a.int("axis", 1);
                let axis = if axis < 0 { axis + r } else { axis };
                if !(0..=r).contains(&axis) {
                    return Err(Error::node(
                        name,
                        op,
                        format!(
                            "attribute 'axis': {} out of range for rank {r}",
                            a.int("axis", 1)
                        ),
                    ));
                }
                let axis = axis as usize;
                Lowered::Node(
                    Op::Reshape(vec![numel(&s[..axis]), numel(&s[axis..])]),
                    vec![x],
                )
            }
            "Reshape" => {
                let x = req(0)?;
                let spec = self
                    .const_ints(req(1)?)
                    .ok_or_else(|| super::data_ops::err_const(node, name, &[1], "shape"))?;
                let to = reshape_target(&shape(x), &spec, a.int("allowzero", 0) != 0)
                    .map_err(|m| Error::node(name, op, m))?;
                Lowered::Node(Op::Reshape(to), vec![x])
            }
            "Squeeze" | "Unsqueeze" => {
                let x = req(0)?;
                let axes: Option<Vec<i64>> =
                    if self.opset < 13 {
                        a.ints("axes").map(|v| v.to_vec())
                    } else {
                        match ins.get(1).copied().flatten() {
                            None => None,
                            Some(t) => Some(self.const_ints(t).ok_or_else(|| {
                                super::data_ops::err_const(node, name, &[1], "axes")
                            })?),
                        }
                    };
                let to = squeeze_target(&shape(x), axes.as_deref(), op == "Unsqueeze")
                    .map_err(|m| Error::node(name, op, m))?;
                Lowered::Node(Op::Reshape(to), vec![x])
            }
            "Transpose" => {
                let x = req(0)?;
                let r = rank(x);
                let perm = match a.ints("perm") {
                    Some(p) => p
                        .iter()
                        .map(|&v| if v < 0 { usize::MAX } else { v as usize })
                        .collect(),
                    None => (0..r).rev().collect(),
                };
                Lowered::Node(Op::Transpose(perm), vec![x])
            }
            "Concat" => {
                let list: Vec<TensorId> = ins.iter().flatten().copied().collect();
                let first = *list
                    .first()
                    .ok_or_else(|| Error::node(name, op, "needs at least one input"))?;
                if !a.has("axis") {
                    return Err(Error::node(name, op, "attribute 'axis' is required"));
                }
                let axis = a.axis("axis", 0, rank(first))?;
                Lowered::Node(Op::Concat(axis), list)
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
            "Constant" => {
                if let Some(t) = a.tensor("value") {
                    Lowered::Const(decode(t, self.model_dir)?)
                } else if a.has("value_float") {
                    Lowered::Const(Tensor::f32(vec![], vec![a.float("value_float", 0.0)]))
                } else if let Some(f) = a.floats("value_floats").filter(|_| a.has("value_floats")) {
                    Lowered::Const(Tensor::f32(vec![f.len()], f.to_vec()))
                } else if a.has("value_int") {
                    Lowered::Const(Tensor::i64(vec![], vec![a.int("value_int", 0)]))
                } else if let Some(v) = a.ints("value_ints") {
                    Lowered::Const(Tensor::i64(vec![v.len()], v.to_vec()))
                } else {
                    return Err(Error::unsupported(
                        name,
                        op,
                        "only tensor, float(s) and int(s) values are supported",
                    ));
                }
            }
            "Size" => Lowered::Const(Tensor::i64(vec![], vec![numel(&shape(req(0)?)) as i64])),
            "Shape" => {
                let s: Vec<i64> = shape(req(0)?).iter().map(|&d| d as i64).collect();
                let r = s.len() as i64;
                let clamp = |v: i64| if v < 0 { (v + r).clamp(0, r) } else { v.clamp(0, r) } as usize;
                let (start, end) = (clamp(a.int("start", 0)), clamp(a.int("end", r)));
                let s = s[start..end.max(start)].to_vec();
                Lowered::Const(Tensor::i64(vec![s.len()], s))
            }
            _ => {
                if let Some(l) = self.lower_data_op(node, name, ins, &a)? {
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

    /// The attributes of a 2-D Conv-like node (Conv, QLinearConv, ConvInteger) with input `x` and weights `w`.
    pub(super) fn conv_attrs(
        &self,
        a: &Attrs,
        op: &str,
        x: TensorId,
        w: TensorId,
        has_bias: bool,
    ) -> Result<ConvAttrs> {
        let (xs, ws) = (
            self.g.tensors[x].shape.clone(),
            self.g.tensors[w].shape.clone(),
        );
        if xs.len() != 4 || ws.len() != 4 {
            return Err(Error::unsupported(
                a.name,
                op,
                format!(
                    "only 2-D convolution is supported (input rank {})",
                    xs.len()
                ),
            ));
        }
        let kernel = a.positive_usizes("kernel_shape", 2, 0)?;
        let kernel = if a.has("kernel_shape") {
            [kernel[0], kernel[1]]
        } else {
            [ws[2], ws[3]]
        };
        let strides = a.positive_usizes("strides", 2, 1)?;
        let dil = a.positive_usizes("dilations", 2, 1)?;
        let pads = self.pads(a, op, &xs[2..], &kernel, &strides, &dil)?;
        Ok(ConvAttrs {
            kernel,
            strides: [strides[0], strides[1]],
            pads,
            dilations: [dil[0], dil[1]],
            group: a.int("group", 1).max(0) as usize,
            has_bias,
            epilogue: Epilogue::default(),
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

    /// Explicit pads [top, left, bottom, right] from `pads` or `auto_pad`.
    fn pads(
        &self,
        a: &Attrs,
        op: &str,
        spatial: &[usize],
        k: &[usize; 2],
        s: &[usize],
        d: &[usize],
    ) -> Result<[usize; 4]> {
        let auto = a.string("auto_pad", "NOTSET")?;
        match auto.as_str() {
            "NOTSET" => {
                let p = a.usizes("pads", 4, 0)?;
                Ok([p[0], p[1], p[2], p[3]])
            }
            "VALID" => Ok([0; 4]),
            "SAME_UPPER" | "SAME_LOWER" => {
                let mut pads = [0usize; 4];
                for i in 0..2 {
                    let out = spatial[i].div_ceil(s[i].max(1));
                    let eff = (k[i] - 1) * d[i] + 1;
                    let total = ((out - 1) * s[i] + eff).saturating_sub(spatial[i]);
                    let (small, big) = (total / 2, total - total / 2);
                    let (begin, end) = if auto == "SAME_UPPER" {
                        (small, big)
                    } else {
                        (big, small)
                    };
                    pads[i] = begin;
                    pads[i + 2] = end;
                }
                Ok(pads)
            }
            other => Err(Error::node(
                a.name,
                op,
                format!("attribute 'auto_pad': unknown value '{other}'"),
            )),
        }
    }
}

/// Resolves an ONNX Reshape spec (0 copies, -1 infers).
pub fn reshape_target(
    input: &[usize],
    spec: &[i64],
    allow_zero: bool,
) -> std::result::Result<Vec<usize>, String> {
    let mut out = Vec::with_capacity(spec.len());
    let mut infer = None;
    for (i, &d) in spec.iter().enumerate() {
        match d {
            -1 if infer.is_none() => {
                infer = Some(i);
                out.push(1);
            }
            0 if !allow_zero => out.push(
                *input
                    .get(i)
                    .ok_or(format!("shape[{i}] = 0 copies a missing input dim"))?,
            ),
            d if d >= 0 => out.push(d as usize),
            _ => return Err(format!("invalid target shape {spec:?}")),
        }
    }
    let total = numel(input);
    if let Some(i) = infer {
        let known = numel(&out);
        if known == 0 || !total.is_multiple_of(known) {
            return Err(format!("cannot infer -1 in {spec:?} for input {input:?}"));
        }
        out[i] = total / known;
    }
    if numel(&out) != total {
        return Err(format!("cannot reshape {input:?} to {spec:?}"));
    }
    Ok(out)
}

fn squeeze_target(
    input: &[usize],
    axes: Option<&[i64]>,
    unsqueeze: bool,
) -> std::result::Result<Vec<usize>, String> {
    let out_rank = if unsqueeze {
        input.len() + axes.map_or(0, |a| a.len())
    } else {
        input.len()
    } as i64;
    let norm = |a: i64| if a < 0 { a + out_rank } else { a };
    if unsqueeze {
        let axes: Vec<i64> = axes
            .ok_or("Unsqueeze needs axes")?
            .iter()
            .map(|&a| norm(a))
            .collect();
        let mut out = Vec::new();
        let mut it = input.iter();
        for i in 0..out_rank {
            if axes.contains(&i) {
                out.push(1);
            } else {
                out.push(*it.next().ok_or("invalid axes")?);
            }
        }
        return Ok(out);
    }
    match axes {
        None => Ok(input.iter().copied().filter(|&d| d != 1).collect()),
        Some(a) => {
            let axes: Vec<i64> = a.iter().map(|&x| norm(x)).collect();
            for &x in &axes {
                if x < 0 || x >= out_rank || input[x as usize] != 1 {
                    return Err(format!("cannot squeeze axis {x} of {input:?}"));
                }
            }
            Ok(input
                .iter()
                .enumerate()
                .filter(|(i, _)| !axes.contains(&(*i as i64)))
                .map(|(_, &d)| d)
                .collect())
        }
    }
}
