//! Lowering of the reductions (`ir/ops/reduce.rs`): Reduce* over a set of axes and ArgMax / ArgMin along one
//! become one kernel over the `[outer, len, inner]` rows `reduce_geom` gives; when the reduced axes are not
//! adjacent a `Transpose` kernel first moves them last, into scratch.

use super::ctx::Ctx;
use crate::error::{Error, Result};
use crate::ir::ops::reduce::reduce_geom;
use crate::ir::ops::shape::transpose_strides;
use crate::ir::{numel, NodeId, Op};
use crate::kernel::{Body, Buf, Role};

pub(super) fn lower(cx: &mut Ctx, n: NodeId, op: &Op) -> Result<()> {
    let out = Buf::Tensor(cx.g.nodes[n].outputs[0]);
    let (src, body) = match op {
        Op::Reduce { kind, axes, .. } => {
            let (src, (outer, len, inner)) = reduce_source(cx, n, axes);
            let body = Body::Reduce {
                kind: *kind,
                outer,
                len,
                inner,
            };
            (src, body)
        }
        Op::ArgReduce {
            max,
            axis,
            select_last,
            ..
        } => {
            let (src, (outer, len, inner)) = reduce_source(cx, n, &[*axis]);
            let body = Body::ArgReduce {
                max: *max,
                last: *select_last,
                outer,
                len,
                inner,
            };
            (src, body)
        }
        Op::TopK {
            axis,
            k,
            largest,
            indices,
        } => {
            let (src, (outer, len, inner)) = reduce_source(cx, n, &[*axis]);
            let x = cx.g.nodes[n].inputs[0];
            let body = Body::TopK {
                dtype: cx.g.tensors[x].dtype,
                largest: *largest,
                indices: *indices,
                k: *k,
                outer,
                len,
                inner,
            };
            (src, body)
        }
        _ => return Err(Error::internal("lower", "reduce lowering of another op")),
    };
    let work = match &body {
        Body::Reduce {
            outer, len, inner, ..
        }
        | Body::ArgReduce {
            outer, len, inner, ..
        }
        | Body::TopK {
            outer, len, inner, ..
        } => outer * len * inner,
        _ => 0,
    };
    cx.push(n, None, &[(Role::X, src), (Role::Out, out)], body, work);
    Ok(())
}

/// The buffer a reduction reads and its row geometry: the input itself when the reduced axes are adjacent,
/// else a scratch copy transposed so they come last.
fn reduce_source(cx: &mut Ctx, n: NodeId, axes: &[usize]) -> (Buf, (usize, usize, usize)) {
    let x = cx.g.nodes[n].inputs[0];
    let xs = cx.shape(x);
    let (perm, geo) = reduce_geom(&xs, axes);
    match perm {
        None => (Buf::Tensor(x), geo),
        Some(p) => {
            let s = cx.scratch(numel(&xs) * 4);
            let body = Body::Transpose {
                out_shape: p.iter().map(|&d| xs[d]).collect(),
                in_strides: transpose_strides(&xs, &p),
                elem: 4,
            };
            let args = [(Role::X, Buf::Tensor(x)), (Role::Out, s)];
            cx.push(n, Some("transpose"), &args, body, numel(&xs));
            (s, geo)
        }
    }
}
