//! Lowering of Resize (`ir/ops/resize.rs`): one `Resample` kernel per non-identity axis, each reading the tap
//! indices and weights `axis_taps` gives (stored as constants), chained through scratch; an all-identity
//! Resize is a copy.

use super::ctx::Ctx;
use crate::error::{Error, Result};
use crate::ir::ops::resize::{axis_is_identity, axis_taps};
use crate::ir::{numel, NodeId, Op, Tensor};
use crate::kernel::{Body, Buf, Role};

pub(super) fn lower(cx: &mut Ctx, n: NodeId, op: &Op) -> Result<()> {
    let Op::Resize(a) = op else {
        return Err(Error::internal("lower", "resize lowering of another op"));
    };
    let node = cx.g.nodes[n].clone();
    let (x, out) = (node.inputs[0], node.outputs[0]);
    let mut shape = cx.shape(x);
    let axes: Vec<usize> = (0..shape.len())
        .filter(|&d| !axis_is_identity(a, d, shape[d]))
        .collect();
    if axes.is_empty() {
        let bytes = cx.g.tensors[out].size_bytes();
        let args = [(Role::X, Buf::Tensor(x)), (Role::Out, Buf::Tensor(out))];
        cx.push(n, None, &args, Body::Copy(bytes), numel(&shape));
        return Ok(());
    }
    let mut src = Buf::Tensor(x);
    for (k, &d) in axes.iter().enumerate() {
        let taps = axis_taps(a, d, shape[d]);
        let t = taps.iter().map(|t| t.len()).max().unwrap_or(1).max(1);
        let mut idx = Vec::with_capacity(taps.len() * t);
        let mut w = Vec::with_capacity(taps.len() * t);
        for tp in &taps {
            for j in 0..t {
                let (i, wt) = tp.get(j).copied().unwrap_or((0, 0.0));
                idx.push(i as i64);
                w.push(wt);
            }
        }
        let nt = idx.len();
        let idx_id = cx.constant(
            format!("{}.axis{d}.idx", node.name),
            Tensor::i64(vec![nt], idx),
        );
        let w_id = cx.constant(format!("{}.axis{d}.w", node.name), Tensor::f32(vec![nt], w));
        let (outer, n_in, inner) = (numel(&shape[..d]), shape[d], numel(&shape[d + 1..]));
        shape[d] = a.out[d];
        let dst = if k + 1 == axes.len() {
            Buf::Tensor(out)
        } else {
            cx.scratch(numel(&shape) * 4)
        };
        let body = Body::Resample {
            outer,
            n_in,
            n_out: a.out[d],
            inner,
            taps: t,
        };
        let step = format!("axis{d}");
        let work = numel(&shape) * t;
        let args = [
            (Role::X, src),
            (Role::Index, Buf::Tensor(idx_id)),
            (Role::W, Buf::Tensor(w_id)),
            (Role::Out, dst),
        ];
        cx.push(
            n,
            (axes.len() > 1).then_some(step.as_str()),
            &args,
            body,
            work,
        );
        src = dst;
    }
    Ok(())
}
