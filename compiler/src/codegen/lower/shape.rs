//! Lowering of the data-movement family (`ir/ops/shape.rs`): Reshape is a byte copy (the planner may alias
//! it away), Transpose a gather through per-dimension input strides, Concat one kernel copying each input's
//! block per outer index.

use super::Ctx;
use crate::codegen::kernel::{Body, Buf, Role};
use crate::error::{Error, Result};
use crate::ir::ops::shape::transpose_strides;
use crate::ir::{numel, NodeId, Op};

pub(super) fn lower(cx: &mut Ctx, n: NodeId, op: &Op) -> Result<()> {
    let (ins, out) = (cx.g.nodes[n].inputs.clone(), cx.g.nodes[n].outputs[0]);
    let out_shape = cx.shape(out);
    let elems = numel(&out_shape);
    let elem = cx.g.tensors[out].dtype.size();
    let (x, y) = (Buf::Tensor(ins[0]), Buf::Tensor(out));
    match op {
        Op::Reshape(_) => {
            let body = Body::Copy(cx.g.tensors[out].size_bytes());
            cx.push(n, None, &[(Role::X, x), (Role::Out, y)], body, elems);
        }
        Op::Transpose(perm) => {
            let body = Body::Transpose {
                out_shape: out_shape.clone(),
                in_strides: transpose_strides(&cx.shape(ins[0]), perm),
                elem,
            };
            cx.push(n, None, &[(Role::X, x), (Role::Out, y)], body, elems);
        }
        Op::Concat(axis) => {
            let blocks = ins
                .iter()
                .map(|&i| numel(&cx.shape(i)[*axis..]) * elem)
                .collect();
            let mut args = inputs(&ins);
            args.push((Role::Out, y));
            let body = Body::Concat {
                outer: numel(&out_shape[..*axis]),
                blocks,
            };
            cx.push(n, None, &args, body, elems);
        }
        _ => return Err(Error::internal("lower", "shape lowering of another op")),
    }
    Ok(())
}

/// The inputs of a variadic op as roles `In(0)`, `In(1)`, ...
pub(super) fn inputs(ins: &[crate::ir::TensorId]) -> Vec<(Role, Buf)> {
    ins.iter()
        .enumerate()
        .map(|(i, &t)| (Role::In(i as u32), Buf::Tensor(t)))
        .collect()
}
