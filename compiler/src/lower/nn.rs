//! Lowering of the normalisation family (`ir/ops/nn.rs`). An unfused BatchNormalization becomes an `Affine`
//! kernel with per-channel scale and shift folded at compile time; Softmax / LogSoftmax one `Softmax` kernel
//! over the row geometry `softmax_geom` gives; LayerNorm / RMSNorm / InstanceNorm one `Norm` kernel whose
//! broadcast parameters are expanded to the row at compile time; LRN one `Lrn` kernel.

use super::ctx::Ctx;
use crate::error::{Error, Result};
use crate::ir::ops::nn::{batchnorm_affine, expand_param, layernorm_geom, softmax_geom};
use crate::ir::{numel, NodeId, Op, Tensor};
use crate::kernel::{Body, Buf, Role};

pub(super) fn lower(cx: &mut Ctx, n: NodeId, op: &Op) -> Result<()> {
    let node = cx.g.nodes[n].clone();
    let (ins, out) = (&node.inputs, node.outputs[0]);
    let out_shape = cx.shape(out);
    let elems = numel(&out_shape);
    let (x, y) = (
        (Role::X, Buf::Tensor(ins[0])),
        (Role::Out, Buf::Tensor(out)),
    );
    match op {
        Op::BatchNorm { epsilon } => {
            let p: Vec<Vec<f32>> = ins[1..]
                .iter()
                .map(|&i| cx.g.constant(i).map(|c| c.to_f32_vec()))
                .collect::<Option<_>>()
                .ok_or_else(|| {
                    Error::unsupported(
                        &node.name,
                        "BatchNormalization",
                        "scale, bias, mean and var must be constants",
                    )
                })?;
            let (s, sh) = batchnorm_affine(&p[0], &p[1], &p[2], &p[3], *epsilon);
            let c = s.len();
            let sc = cx.constant(format!("{}.scale", node.name), Tensor::f32(vec![c], s));
            let st = cx.constant(format!("{}.shift", node.name), Tensor::f32(vec![c], sh));
            let planes = out_shape[0] * c;
            let body = Body::Affine {
                planes,
                c,
                inner: elems / planes.max(1),
            };
            let args = [
                x,
                (Role::Scale, Buf::Tensor(sc)),
                (Role::Shift, Buf::Tensor(st)),
                y,
            ];
            cx.push(n, None, &args, body, elems);
        }
        Op::Softmax {
            axis,
            flatten_tail,
            log,
        } => {
            let (outer, len, inner) = softmax_geom(&out_shape, *axis, *flatten_tail);
            let body = Body::Softmax {
                outer,
                len,
                inner,
                log: *log,
            };
            // Work per element: dominated by its exp.
            let work = elems * super::elementwise::unary_cost(crate::ir::UnOp::Exp);
            cx.push(n, None, &[x, y], body, work);
        }
        Op::LayerNorm { .. } | Op::InstanceNorm { .. } => lower_norm(cx, n)?,
        Op::Lrn(a) => {
            let xs = cx.shape(ins[0]);
            let body = Body::Lrn {
                n: xs[0],
                c: xs[1],
                inner: numel(&xs[2..]),
                attrs: *a,
            };
            cx.push(n, None, &[x, y], body, elems * a.size);
        }
        _ => return Err(Error::internal("lower", "nn lowering of another op")),
    }
    Ok(())
}

fn lower_norm(cx: &mut Ctx, n: NodeId) -> Result<()> {
    let node = cx.g.nodes[n].clone();
    let ins = &node.inputs;
    let xs = cx.shape(ins[0]);
    // `param_shape`: what scale and bias cover (the normalised axes, or the channels for InstanceNorm).
    let (rows, len, eps, rms, channels, param_shape) = match node.op {
        Op::LayerNorm { axis, epsilon, rms } => {
            let (rows, len) = layernorm_geom(&xs, axis);
            (rows, len, epsilon, rms, None, xs[axis..].to_vec())
        }
        Op::InstanceNorm { epsilon } => (
            xs[0] * xs[1],
            numel(&xs[2..]),
            epsilon,
            false,
            Some(xs[1]),
            vec![xs[1]],
        ),
        _ => return Err(Error::internal("lower", "lower_norm on a non-norm node")),
    };
    let want = numel(&param_shape);
    let mut args = vec![(Role::X, Buf::Tensor(ins[0]))];
    for (i, &p) in ins.iter().enumerate().skip(1) {
        let buf = if numel(&cx.shape(p)) == want {
            Buf::Tensor(p)
        } else {
            // A broadcast parameter: expanded to the row at compile time.
            let c = cx.g.constant(p).cloned().ok_or_else(|| {
                Error::unsupported(
                    &node.name,
                    &node.onnx_op,
                    format!(
                        "a run-time input {i} that broadcasts (shape {:?})",
                        cx.shape(p)
                    ),
                )
            })?;
            let v = expand_param(&c, &param_shape);
            Buf::Tensor(cx.constant(
                format!("{}.param{i}", node.name),
                Tensor::f32(vec![want], v),
            ))
        };
        args.push((if i == 1 { Role::Scale } else { Role::Bias }, buf));
    }
    let has_bias = args.len() == 3;
    let body = Body::Norm {
        rows,
        len,
        eps,
        rms,
        channels,
        has_bias,
    };
    args.push((Role::Out, Buf::Tensor(node.outputs[0])));
    // Work per element: the mean and variance passes and the normalising pass with its affine map.
    cx.push(n, None, &args, body, rows * len * 8);
    Ok(())
}
