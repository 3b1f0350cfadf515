//! The capability query: can the NPU run this IR node on this target? Each constraint is one entry of
//! [`CONSTRAINTS`], checked in one place and documented once; a rejection names the constraint it breaks and
//! the value at fault, and `bundlec ops --npu` prints the same table. An accepted node becomes an [`NpuOp`]
//! (shapes, constants and attributes copied out of the IR); whether its working set fits the tile memory is
//! the last constraint, answered by compiling it.

use super::cnn::{ConvOp, GapOp, PoolMode, PoolOp};
use super::constraint::*;
use super::elementwise::{Broadcast, EltOp, EltwiseOp};
use super::linalg::GemmOp;
use super::shape::{CopyOp, CopyPart};
use super::{Elem, NpuOp, Weights};
use crate::ir::{numel, Activation, BinOp, DType, Graph, NodeId, Op, PoolKind, UnOp};
use crate::npu::target::NpuTarget;

fn no(c: &'static Constraint, detail: impl Into<String>) -> Reject {
    Reject::new(c, detail)
}

/// The ONNX op type the target lists for an IR op.
pub fn onnx_name(op: &Op) -> Option<&'static str> {
    Some(match op {
        Op::Conv(_) => "Conv",
        Op::MatMul(_) => "MatMul",
        Op::Gemm(_) => "Gemm",
        Op::Binary(BinOp::Add) => "Add",
        Op::Binary(BinOp::Mul) => "Mul",
        Op::Unary(UnOp::Relu) => "Relu",
        Op::Unary(UnOp::Clip(..)) => "Clip",
        Op::Pool(PoolKind::Max, _) => "MaxPool",
        Op::Pool(PoolKind::Average, _) => "AveragePool",
        Op::GlobalAveragePool => "GlobalAveragePool",
        Op::Concat(_) => "Concat",
        Op::Reshape(_) => "Reshape",
        Op::QConv(..) => "Conv",
        Op::QMatMul(_) => "MatMul",
        Op::QAdd(p) if p.mul => "Mul",
        Op::QAdd(_) => "Add",
        _ => return None,
    })
}

/// The NPU conv for a (Q)Conv node: f32 ones carry their bias, residual and activation; int8 ones a
/// requantisation (their activation is its clamp).
fn conv_op(
    a: &crate::ir::ConvAttrs,
    elem: Elem,
    (xs, ys): ([usize; 4], [usize; 4]),
    weights: Weights,
    bias: Vec<f32>,
    requant: Option<super::Requant>,
) -> NpuOp {
    let int8 = requant.is_some();
    NpuOp::Conv(ConvOp {
        elem,
        x: xs,
        m: ys[1],
        kernel: a.kernel,
        strides: a.strides,
        pads: a.pads,
        dilations: a.dilations,
        group: a.group,
        out: [ys[2], ys[3]],
        weights,
        bias,
        residual: a.epilogue.residual && !int8,
        act: if int8 {
            Activation::None
        } else {
            a.epilogue.act
        },
        requant,
    })
}

/// The constant i8 weights of an integer op.
fn i8_const(g: &Graph, t: crate::ir::TensorId) -> Result<Vec<i8>, Reject> {
    g.constant(t)
        .filter(|c| c.dtype == DType::I8)
        .map(|c| c.to_i64_vec().iter().map(|&v| v as i8).collect())
        .ok_or_else(|| {
            no(
                &CONST_WEIGHTS,
                format!("weights '{}' are not an i8 constant", g.tensors[t].name),
            )
        })
}

/// The NPU requantisation of an integer product (requantised outputs only).
fn requant(p: &crate::ir::IntProduct) -> Result<super::Requant, Reject> {
    let r = p.requant.as_ref().ok_or_else(|| {
        no(
            &DTYPE,
            "i32 output (ConvInteger / MatMulInteger) is not requantised",
        )
    })?;
    Ok(super::Requant {
        x_zero_point: p.x_zero_point,
        bias: p.bias.clone(),
        scale: r.scale.clone(),
        y_zero_point: r.zero_point,
        clamp: r.clamp,
    })
}

fn f32_const(g: &Graph, t: crate::ir::TensorId, what: &str) -> Result<Vec<f32>, Reject> {
    g.constant(t)
        .and_then(|c| c.as_f32().map(|v| v.to_vec()))
        .ok_or_else(|| {
            no(
                &CONST_WEIGHTS,
                format!("{what} '{}' is computed at run time", g.tensors[t].name),
            )
        })
}

/// A fused residual (the node's last input) must be computed at run time: the NPU ops read it from `in`.
fn residual_is_activation(g: &Graph, n: NodeId, residual: bool) -> Result<(), Reject> {
    match g.nodes[n].inputs.last() {
        Some(&r) if residual && g.constant(r).is_some() => Err(no(
            &CONST_WEIGHTS,
            format!("the residual '{}' is a constant", g.tensors[r].name),
        )),
        _ => Ok(()),
    }
}

fn window_limits(
    s: &crate::npu::target::OpSupport,
    k: [usize; 2],
    st: [usize; 2],
    d: [usize; 2],
    p: [usize; 4],
) -> Result<(), Reject> {
    let lim = |v: usize, m: Option<u32>, c: &'static Constraint, what: &str| match m {
        Some(m) if v > m as usize => Err(no(c, format!("{what} {v} > {m}"))),
        _ => Ok(()),
    };
    for i in 0..2 {
        lim(k[i], s.max_kernel, &KERNEL, "kernel side")?;
        lim(st[i], s.max_stride, &STRIDE, "stride")?;
        lim(d[i], s.max_dilation, &DILATION, "dilation")?;
    }
    for (i, &pad) in p.iter().enumerate() {
        let ext = (k[i % 2] - 1) * d[i % 2] + 1;
        if pad >= ext {
            return Err(no(&PADS, format!("pad {pad} >= kernel extent {ext}")));
        }
    }
    Ok(())
}

/// The NPU op for a node, or the constraint it breaks. Does not compile it (see [`NpuOp::program`]).
pub fn npu_op_for_node(g: &Graph, n: NodeId, t: &NpuTarget) -> Result<NpuOp, Reject> {
    let node = &g.nodes[n];
    let name = onnx_name(&node.op)
        .ok_or_else(|| no(&OP, format!("no NPU kernel for {}", node.onnx_op)))?;
    let s = t
        .op(name)
        .ok_or_else(|| no(&OP, format!("target '{}' does not list {name}", t.name)))?;
    let x = &g.tensors[node.inputs[0]];
    let elem = match x.dtype {
        DType::F32 => Elem::F32,
        DType::U8 => Elem::U8,
        DType::I8 => Elem::I8,
        d => return Err(no(&DTYPE, format!("{} is {}", x.name, d.name()))),
    };
    if !s.dtypes.iter().any(|d| d == elem.name()) {
        return Err(no(
            &DTYPE,
            format!("{name} in {} is not listed", elem.name()),
        ));
    }
    let int8_op = matches!(node.op, Op::QConv(..) | Op::QMatMul(_) | Op::QAdd(_));
    if (elem != Elem::F32) != int8_op && !node.op.moves_data() {
        return Err(no(
            &DTYPE,
            format!(
                "{} computes in {} (int8 ops are QConv, QMatMul, QAdd)",
                node.onnx_op,
                elem.name()
            ),
        ));
    }
    if int8_op && g.tensors[node.outputs[0]].dtype != x.dtype {
        return Err(no(
            &DTYPE,
            format!(
                "output {} differs from input {} (the NPU's int8 ops keep the type)",
                g.tensors[node.outputs[0]].dtype, x.dtype
            ),
        ));
    }
    for &tid in node.inputs.iter().chain(&node.outputs) {
        if g.tensors[tid].size_bytes() > i32::MAX as usize {
            return Err(no(
                &SIZE,
                format!(
                    "'{}' is {} B",
                    g.tensors[tid].name,
                    g.tensors[tid].size_bytes()
                ),
            ));
        }
    }
    let out = &g.tensors[node.outputs[0]];
    let shape4 = |v: &[usize]| -> Result<[usize; 4], Reject> {
        v.try_into()
            .map_err(|_| no(&RANK, format!("shape {v:?} is not 4-D")))
    };
    Ok(match &node.op {
        Op::Conv(a) => {
            let shapes = (shape4(&x.shape)?, shape4(&out.shape)?);
            window_limits(s, a.kernel, a.strides, a.dilations, a.pads)?;
            let w = Weights::F32(f32_const(g, node.inputs[1], "weights")?);
            let bias = if a.has_bias {
                f32_const(g, node.inputs[2], "bias")?
            } else {
                vec![]
            };
            residual_is_activation(g, n, a.epilogue.residual)?;
            conv_op(a, elem, shapes, w, bias, None)
        }
        Op::MatMul(e) => {
            let b = &g.tensors[node.inputs[1]];
            if b.shape.len() != 2 {
                return Err(no(&RANK, format!("right operand {:?} is not 2-D", b.shape)));
            }
            let w = f32_const(g, node.inputs[1], "right operand")?;
            if e.scale != 1.0 {
                return Err(no(&GEMM_ATTRS, format!("fused scale {}", e.scale)));
            }
            residual_is_activation(g, n, e.residual)?;
            let (k, nn) = (b.shape[0], b.shape[1]);
            let bias = if e.bias {
                f32_const(g, node.inputs[2], "bias")?
            } else {
                vec![]
            };
            NpuOp::Gemm(GemmOp {
                elem,
                m: numel(&x.shape) / k.max(1),
                k,
                n: nn,
                weights: Weights::F32(w),
                bias,
                residual: e.residual,
                act: e.act,
                requant: None,
            })
        }
        Op::Gemm(a) => {
            if a.alpha != 1.0 || a.beta != 1.0 || a.trans_a {
                return Err(no(
                    &GEMM_ATTRS,
                    format!(
                        "alpha {} beta {} transA {}",
                        a.alpha, a.beta, a.trans_a as u8
                    ),
                ));
            }
            let b = &g.tensors[node.inputs[1]];
            let w = f32_const(g, node.inputs[1], "B")?;
            let (k, nn) = if a.trans_b {
                (b.shape[1], b.shape[0])
            } else {
                (b.shape[0], b.shape[1])
            };
            let w = if a.trans_b {
                // B is [N, K]: the reference transpose gives the [K, N] the op library formats.
                let bt = crate::ir::Tensor::f32(vec![nn, k], w);
                crate::ir::ops::eval(&Op::Transpose(vec![1, 0]), &[&bt])
                    .map_err(|m| no(&GEMM_ATTRS, m))?
                    .remove(0)
                    .to_f32_vec()
            } else {
                w
            };
            let bias = if a.has_c {
                let c = f32_const(g, node.inputs[2], "C")?;
                match c.len() {
                    1 => vec![c[0]; nn],
                    l if l == nn => c,
                    l => return Err(no(&GEMM_ATTRS, format!("C has {l} elements, N = {nn}"))),
                }
            } else {
                vec![]
            };
            residual_is_activation(g, n, a.epilogue.residual)?;
            NpuOp::Gemm(GemmOp {
                elem,
                m: x.shape[0],
                k,
                n: nn,
                weights: Weights::F32(w),
                bias,
                residual: a.epilogue.residual,
                act: a.epilogue.act,
                requant: None,
            })
        }
        Op::QConv(a, p) => {
            let shapes = (shape4(&x.shape)?, shape4(&out.shape)?);
            window_limits(s, a.kernel, a.strides, a.dilations, a.pads)?;
            let w = Weights::I8(i8_const(g, node.inputs[1])?);
            conv_op(a, elem, shapes, w, vec![], Some(requant(p)?))
        }
        Op::QMatMul(p) => {
            let b = &g.tensors[node.inputs[1]];
            let (k, nn) = (b.shape[0], b.shape[1]);
            NpuOp::Gemm(GemmOp {
                elem,
                m: numel(&x.shape) / k.max(1),
                k,
                n: nn,
                weights: Weights::I8(i8_const(g, node.inputs[1])?),
                bias: vec![],
                residual: false,
                act: Activation::None,
                requant: Some(requant(p)?),
            })
        }
        Op::QAdd(p) => {
            let (ta, tb) = (&g.tensors[node.inputs[0]], &g.tensors[node.inputs[1]]);
            if ta.dtype != tb.dtype || ta.constant().is_some() || tb.constant().is_some() {
                return Err(no(
                    &BROADCAST,
                    "QAdd operands must be run-time tensors of one type",
                ));
            }
            let q = |(scale, zero_point): (f32, i32)| super::Quant { scale, zero_point };
            NpuOp::Eltwise(EltwiseOp {
                elem,
                op: if p.mul { EltOp::Mul } else { EltOp::Add },
                n: numel(&out.shape),
                b_const: None,
                broadcast: Broadcast::Same,
                act: Activation::None,
                quant: Some(([q(p.a), q(p.b), q(p.y)], p.clamp)),
            })
        }
        Op::Binary(b) => eltwise(g, n, *b, elem)?,
        Op::Unary(u) => NpuOp::Eltwise(EltwiseOp {
            elem,
            op: EltOp::Unary,
            n: numel(&x.shape),
            b_const: None,
            broadcast: Broadcast::Same,
            act: match u {
                UnOp::Clip(lo, hi) => Activation::Clip(*lo, *hi),
                _ => Activation::Relu,
            },
            quant: None,
        }),
        Op::Pool(kind, a) => {
            let xs = shape4(&x.shape)?;
            let ys = shape4(&out.shape)?;
            if a.ceil_mode {
                return Err(no(&CEIL, "ceil_mode = 1"));
            }
            if *kind == PoolKind::Average && a.dilations != [1, 1] {
                let d = a.dilations;
                return Err(no(&DILATION, format!("average pooling dilated {d:?}")));
            }
            window_limits(s, a.kernel, a.strides, a.dilations, a.pads)?;
            NpuOp::Pool(PoolOp {
                elem,
                mode: match (kind, a.count_include_pad) {
                    (PoolKind::Max, _) => PoolMode::Max,
                    (_, true) => PoolMode::AvgIncludePad,
                    _ => PoolMode::AvgExcludePad,
                },
                x: xs,
                kernel: a.kernel,
                strides: a.strides,
                pads: a.pads,
                dilations: a.dilations,
                out: [ys[2], ys[3]],
            })
        }
        Op::GlobalAveragePool => {
            if x.shape.len() < 3 {
                return Err(no(
                    &RANK,
                    format!("shape {:?} has no spatial dims", x.shape),
                ));
            }
            NpuOp::Gap(GapOp {
                elem,
                planes: x.shape[0] * x.shape[1],
                size: numel(&x.shape[2..]),
            })
        }
        Op::Concat(axis) => {
            let outer = numel(&out.shape[..*axis]);
            let e = elem.size();
            let parts = node
                .inputs
                .iter()
                .map(|&i| {
                    let td = &g.tensors[i];
                    CopyPart {
                        row_bytes: numel(&td.shape[*axis..]) * e,
                        constant: td.constant().map(|c| c.to_bytes()),
                    }
                })
                .collect();
            NpuOp::Copy(CopyOp { outer, parts })
        }
        Op::Reshape(_) => NpuOp::Copy(CopyOp {
            outer: 1,
            parts: vec![CopyPart {
                row_bytes: x.size_bytes(),
                constant: x.constant().map(|c| c.to_bytes()),
            }],
        }),
        _ => return Err(no(&OP, format!("no NPU kernel for {}", node.onnx_op))),
    })
}

fn eltwise(g: &Graph, n: NodeId, b: BinOp, elem: Elem) -> Result<NpuOp, Reject> {
    let node = &g.nodes[n];
    let out = &g.tensors[node.outputs[0]];
    let (mut a, mut bt) = (node.inputs[0], node.inputs[1]);
    // The activation operand of the output's shape goes first (add and mul commute).
    if g.tensors[a].shape != out.shape || (g.constant(a).is_some() && g.constant(bt).is_none()) {
        std::mem::swap(&mut a, &mut bt);
    }
    let (ta, tb) = (&g.tensors[a], &g.tensors[bt]);
    if ta.shape != out.shape || ta.constant().is_some() {
        return Err(no(&BROADCAST, format!("{:?} and {:?}", ta.shape, tb.shape)));
    }
    let op = if b == BinOp::Add {
        EltOp::Add
    } else {
        EltOp::Mul
    };
    let total = numel(&out.shape);
    let (b_const, broadcast) = match tb.constant() {
        None if tb.shape == out.shape => (None, Broadcast::Same),
        None => {
            return Err(no(
                &BROADCAST,
                format!(
                    "run-time operand {:?} broadcasts to {:?}",
                    tb.shape, out.shape
                ),
            ))
        }
        Some(c) => {
            let bytes = c.to_bytes();
            let nb = numel(&tb.shape);
            if nb == 1 {
                (Some(bytes), Broadcast::Scalar)
            } else if tb.shape == out.shape {
                (Some(bytes), Broadcast::Same)
            } else {
                // Right-align; exactly one non-1 axis equal to the output's, everything after it 1.
                let r = out.shape.len();
                let pad = r
                    .checked_sub(tb.shape.len())
                    .ok_or_else(|| no(&BROADCAST, "operand rank exceeds output rank"))?;
                let full: Vec<usize> = std::iter::repeat_n(1, pad)
                    .chain(tb.shape.iter().copied())
                    .collect();
                let axes: Vec<usize> = (0..r).filter(|&i| full[i] != 1).collect();
                match axes.as_slice() {
                    [ax] if full[*ax] == out.shape[*ax] => {
                        let inner = numel(&out.shape[ax + 1..]);
                        (
                            Some(bytes),
                            Broadcast::PerRow {
                                inner,
                                period: full[*ax],
                            },
                        )
                    }
                    _ => {
                        return Err(no(
                            &BROADCAST,
                            format!("constant {:?} against {:?}", tb.shape, out.shape),
                        ))
                    }
                }
            }
        }
    };
    Ok(NpuOp::Eltwise(EltwiseOp {
        elem,
        op,
        n: total,
        b_const,
        broadcast,
        act: Activation::None,
        quant: None,
    }))
}
