//! Lowering of the data-movement family (`ir/ops/shape.rs`): Reshape is nothing (its readers read its input:
//! `Ctx::alias`) unless its result is a model output or NPU segments need every boundary tensor
//! (`LowerOpts::keep_tensors`), then a byte copy; Transpose a gather through per-dimension input strides,
//! Concat one kernel copying each input's block per outer index.

use super::ctx::Ctx;
use crate::error::{Error, Result};
use crate::ir::ops::shape::transpose_strides;
use crate::ir::{numel, NodeId, Op};
use crate::kernel::{Body, Buf, Role};

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
            // A Reshape keeps the bytes in order: unless its result is a model output (its own buffer), it
            // emits nothing and its readers read its input.
            if !cx.opts.keep_tensors && !cx.g.outputs.contains(&out) {
                let src = cx.alias(ins[0]);
                cx.aliases.insert(out, src);
                return Ok(());
            }
            let body = Body::Copy(cx.g.tensors[out].size_bytes());
            cx.push(n, None, &[(Role::X, x), (Role::Out, y)], body, elems);
        }
        Op::Transpose(_) if cx.written.contains(&n) => {}
        Op::Transpose(perm) => {
            let in_strides = transpose_strides(&cx.shape(ins[0]), perm);
            // Rows kept whole and only MatMuls reading the result: they read the input through the strides.
            if !cx.opts.keep_tensors
                && perm.len() >= 2
                && perm[perm.len() - 1] == perm.len() - 1
                && read_only_as_matmul_operand(cx.g, &cx.uses, out)
            {
                let src = cx.alias(ins[0]);
                cx.views.insert(out, (src, in_strides));
                return Ok(());
            }
            // A transpose whose innermost output dim is not contiguous in the input gathers one element at a
            // time (~2 ns each, against ~0.2 for a row copy): weighted so that an attention's K transpose (4096
            // elements) splits over 2 threads.
            let (_, strides) = crate::kernel::data::coalesce_transpose(&out_shape, &in_strides);
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

/// Whether `t` is no model output and every live reader of it is an f32 MatMul reading it as A or B only.
fn read_only_as_matmul_operand(
    g: &crate::ir::Graph,
    uses: &crate::ir::Uses,
    t: crate::ir::TensorId,
) -> bool {
    let readers = uses.consumers(t);
    !g.outputs.contains(&t)
        && g.tensors[t].dtype == crate::ir::DType::F32
        && !readers.is_empty()
        && readers.iter().all(|&r| {
            let node = &g.nodes[r];
            matches!(node.op, Op::MatMul(_)) && node.inputs.iter().skip(2).all(|&i| i != t)
        })
}

/// The inputs of a variadic op as roles `In(0)`, `In(1)`, ...
pub(super) fn inputs(ins: &[crate::ir::TensorId]) -> Vec<(Role, Buf)> {
    ins.iter()
        .enumerate()
        .map(|(i, &t)| (Role::In(i as u32), Buf::Tensor(t)))
        .collect()
}
