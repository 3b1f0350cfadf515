//! Lowering of the logic family (`ir/ops/logic.rs`): comparisons, logical ops, Not and Where become one
//! `Logic` kernel walking every input through its broadcast strides (`broadcast_all`); a scalar result is
//! computed as a one-element vector.

use super::ctx::Ctx;
use super::shape::inputs;
use crate::error::{Error, Result};
use crate::ir::ops::logic::broadcast_all;
use crate::ir::{numel, NodeId, Op};
use crate::kernel::elementwise::LogicKind;
use crate::kernel::{Body, Buf, Role};

pub(super) fn lower(cx: &mut Ctx, n: NodeId, op: &Op) -> Result<()> {
    let node = cx.g.nodes[n].clone();
    let (ins, out) = (&node.inputs, node.outputs[0]);
    let shapes: Vec<Vec<usize>> = ins.iter().map(|&i| cx.shape(i)).collect();
    let refs: Vec<&[usize]> = shapes.iter().map(|s| s.as_slice()).collect();
    let (mut oshape, mut strides) =
        broadcast_all(&refs).map_err(|m| Error::node(&node.name, &node.onnx_op, m))?;
    if oshape.is_empty() {
        oshape = vec![1];
        strides = strides.iter().map(|_| vec![0]).collect();
    }
    let kind = match op {
        Op::Compare(c) => LogicKind::Cmp(*c, cx.g.tensors[ins[0]].dtype),
        Op::Logic(l) => LogicKind::Logic(*l),
        Op::Not => LogicKind::Not,
        Op::Where => LogicKind::Where(cx.g.tensors[out].dtype.size()),
        _ => return Err(Error::internal("lower", "logic lowering of another op")),
    };
    let elems = numel(&oshape);
    let mut args = inputs(ins);
    args.push((Role::Out, Buf::Tensor(out)));
    let body = Body::Logic {
        kind,
        out_shape: oshape,
        strides,
    };
    cx.push(n, None, &args, body, elems);
    Ok(())
}
