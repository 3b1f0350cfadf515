//! Lowering of the elementwise family (`ir/ops/elementwise.rs`): a broadcast binary op becomes one `Binary`
//! kernel whose dimensions are coalesced at compile time; a unary op one `Unary` map (Identity a byte copy);
//! Cast a `Convert` kernel, or a copy when the dtype does not change.

use super::ctx::Ctx;
use crate::error::{Error, Result};
use crate::ir::ops::elementwise::broadcast_strides;
use crate::ir::{numel, NodeId, Op, UnOp};
use crate::kernel::elementwise::coalesce;
use crate::kernel::{Body, Buf, Role};

pub(super) fn lower(cx: &mut Ctx, n: NodeId, op: &Op) -> Result<()> {
    let (ins, out) = (cx.g.nodes[n].inputs.clone(), cx.g.nodes[n].outputs[0]);
    let out_shape = cx.shape(out);
    let elems = numel(&out_shape);
    let (x, y) = (Buf::Tensor(ins[0]), Buf::Tensor(out));
    let body = match op {
        Op::Binary(b) => {
            let (sa, sb) = (
                broadcast_strides(&cx.shape(ins[0]), &out_shape),
                broadcast_strides(&cx.shape(ins[1]), &out_shape),
            );
            let args = [(Role::A, x), (Role::B, Buf::Tensor(ins[1])), (Role::Out, y)];
            cx.push(
                n,
                None,
                &args,
                Body::Binary(coalesce(*b, &out_shape, &sa, &sb)),
                elems,
            );
            return Ok(());
        }
        Op::Unary(UnOp::Identity) => Body::Copy(cx.g.tensors[out].size_bytes()),
        Op::Unary(u) => Body::Unary(*u, elems),
        Op::Cast(to) => {
            let from = cx.g.tensors[ins[0]].dtype;
            if from == *to {
                Body::Copy(cx.g.tensors[out].size_bytes())
            } else {
                Body::Convert {
                    from,
                    to: *to,
                    len: elems,
                }
            }
        }
        _ => {
            return Err(Error::internal(
                "lower",
                "elementwise lowering of another op",
            ))
        }
    };
    let work = match op {
        Op::Unary(u) => elems * unary_cost(*u),
        _ => elems,
    };
    cx.push(n, None, &[(Role::X, x), (Role::Out, y)], body, work);
    Ok(())
}

/// Work per element of a unary map relative to a copy, for its task count: the exp / log based maps run a few
/// dozen vector instructions per element (an encoder's 16384-element exact GELU took ~45 µs as one task, the
/// other thread idle), a division a few.
pub(super) fn unary_cost(u: UnOp) -> usize {
    match u {
        UnOp::Sigmoid
        | UnOp::Tanh
        | UnOp::Exp
        | UnOp::Elu(_)
        | UnOp::Selu(..)
        | UnOp::Log
        | UnOp::Erf
        | UnOp::Softplus
        | UnOp::Celu(_)
        | UnOp::Gelu { .. }
        | UnOp::Mish => 16,
        UnOp::Sqrt | UnOp::Reciprocal | UnOp::Softsign => 4,
        _ => 1,
    }
}
