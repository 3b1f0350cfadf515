//! Lowering of the elementwise family (`ir/ops/elementwise.rs`): a broadcast binary op becomes one `Binary`
//! kernel whose dimensions are coalesced at compile time; a unary op one `Unary` map (Identity a byte copy);
//! Cast a `Convert` kernel, or a copy when the dtype does not change.

use super::Ctx;
use crate::codegen::kernel::{Body, Buf, Role};
use crate::codegen::ops::elementwise::coalesce;
use crate::error::{Error, Result};
use crate::ir::ops::elementwise::broadcast_strides;
use crate::ir::{numel, NodeId, Op, UnOp};

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
    cx.push(n, None, &[(Role::X, x), (Role::Out, y)], body, elems);
    Ok(())
}
