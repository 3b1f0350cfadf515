//! Lowering of the data-movement family (`ir/ops/shape.rs`): Reshape is a byte copy, or nothing when a Transpose
//! is its only reader (which then reads the reshape's input), Transpose a gather through per-dimension input
//! strides, Concat one kernel copying each input's block per outer index.

use super::Ctx;
use crate::codegen::kernel::{Body, Buf, Role};
use crate::error::{Error, Result};
use crate::ir::ops::shape::transpose_strides;
use crate::ir::{numel, Graph, NodeId, Op, TensorId};

/// Work per element of a gathering transpose, in the copy's units (`task_count`).
const GATHER_WEIGHT: usize = 8;

pub(super) fn lower(cx: &mut Ctx, n: NodeId, op: &Op) -> Result<()> {
    let (ins, out) = (cx.g.nodes[n].inputs.clone(), cx.g.nodes[n].outputs[0]);
    let out_shape = cx.shape(out);
    let elems = numel(&out_shape);
    let elem = cx.g.tensors[out].dtype.size();
    let (x, y) = (Buf::Tensor(ins[0]), Buf::Tensor(out));
    match op {
        Op::Reshape(_) => {
            // A reshape whose only reader is a Transpose needs no copy: the transpose reads the reshape's input.
            if !cx.opts.keep_reshapes && read_only_by_transpose(cx.g, out) {
                cx.reshaped.insert(out, ins[0]);
                return Ok(());
            }
            let body = Body::Copy(cx.g.tensors[out].size_bytes());
            cx.push(n, None, &[(Role::X, x), (Role::Out, y)], body, elems);
        }
        Op::Transpose(perm) => {
            let in_strides = transpose_strides(&cx.shape(ins[0]), perm);
            // A transpose whose innermost output dim is not contiguous in the input gathers one element at a
            // time (~2 ns each, against ~0.2 for a row copy): weighted so that an attention's K transpose (4096
            // elements) splits over 2 threads.
            let (_, strides) =
                crate::codegen::ops::data::coalesce_transpose(&out_shape, &in_strides);
            let work = if strides.last() == Some(&1) {
                elems
            } else {
                elems.saturating_mul(GATHER_WEIGHT)
            };
            let body = Body::Transpose {
                out_shape: out_shape.clone(),
                in_strides,
                elem,
            };
            let x = Buf::Tensor(cx.reshaped.get(&ins[0]).copied().unwrap_or(ins[0]));
            cx.push(n, None, &[(Role::X, x), (Role::Out, y)], body, work);
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

/// Whether `t` is not a model output and exactly one live node reads it, once, and that node is a Transpose. A
/// Reshape keeps the bytes in order, so such a transpose can read the reshape's input in place of its output
/// (`Ctx::reshaped`) and the reshape's copy goes: an encoder's head splits (`[B, S, H·D] -> [B, S, H, D] ->
/// [B, H, S, D]`) copied every Q, K and V once more.
fn read_only_by_transpose(g: &Graph, t: TensorId) -> bool {
    crate::passes::single_use(g, t).is_some_and(|n| matches!(g.nodes[n].op, Op::Transpose(_)))
}

/// The inputs of a variadic op as roles `In(0)`, `In(1)`, ...
pub(super) fn inputs(ins: &[crate::ir::TensorId]) -> Vec<(Role, Buf)> {
    ins.iter()
        .enumerate()
        .map(|(i, &t)| (Role::In(i as u32), Buf::Tensor(t)))
        .collect()
}
