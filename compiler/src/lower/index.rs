//! Lowering of the index-mapping family (`ir/ops/index.rs`). Slice, Pad, Expand and Tile become one
//! `IndexMap` kernel reading the per-axis offset tables `offset_tables` computes (stored as an i64 constant);
//! Gather one `Gather` kernel copying rows by run-time indices; Trilu the `Logic` kernel's Where over a constant
//! mask of the matrix (broadcast over the leading dims) and a constant zero.

use super::ctx::Ctx;
use crate::error::{Error, Result};
use crate::ir::ops::index::{fill_value, gather_geom, offset_tables, trilu_keeps};
use crate::ir::ops::logic::broadcast_all;
use crate::ir::types::Data;
use crate::ir::{numel, DType, NodeId, Op, Tensor};
use crate::kernel::elementwise::LogicKind;
use crate::kernel::{Body, Buf, Role};

pub(super) fn lower(cx: &mut Ctx, n: NodeId, op: &Op) -> Result<()> {
    if let Op::Trilu { upper, k } = op {
        return lower_trilu(cx, n, *upper, *k);
    }
    let Op::Gather { axis } = op else {
        return lower_index_map(cx, n);
    };
    let node = cx.g.nodes[n].clone();
    let (ins, out) = (&node.inputs, node.outputs[0]);
    let ((outer, nn, k, inner), _) = gather_geom(&cx.shape(ins[0]), &cx.shape(ins[1]), *axis)
        .map_err(|m| Error::node(&node.name, &node.onnx_op, m))?;
    let body = Body::Gather {
        outer,
        n: nn,
        k,
        inner,
        elem: cx.g.tensors[out].dtype.size(),
        idx_elem: cx.g.tensors[ins[1]].dtype.size(),
    };
    let args = [
        (Role::X, Buf::Tensor(ins[0])),
        (Role::Index, Buf::Tensor(ins[1])),
        (Role::Out, Buf::Tensor(out)),
    ];
    cx.push(n, None, &args, body, numel(&cx.shape(out)));
    Ok(())
}

fn lower_index_map(cx: &mut Ctx, n: NodeId) -> Result<()> {
    let node = cx.g.nodes[n].clone();
    let (x, out) = (node.inputs[0], node.outputs[0]);
    let (mut out_shape, mut tabs) = offset_tables(&node.op, &cx.shape(x))
        .map_err(|m| Error::node(&node.name, &node.onnx_op, m))?;
    if out_shape.is_empty() {
        out_shape = vec![1];
        tabs = vec![vec![0]];
    }
    let dt = cx.g.tensors[out].dtype;
    let elem = dt.size();
    let fill = match dt {
        DType::F32 => (fill_value(&node.op) as f32).to_bits() as u64,
        _ => {
            let bits = fill_value(&node.op) as i64 as u64;
            if elem == 8 {
                bits
            } else {
                bits & ((1u64 << (elem * 8)) - 1)
            }
        }
    };
    let last = &tabs[tabs.len() - 1];
    let contig_from = (last[0] >= 0
        && last
            .iter()
            .enumerate()
            .all(|(j, &t)| t == last[0] + j as i64))
    .then_some(last[0]);
    let mut tab_at = Vec::with_capacity(tabs.len());
    let mut flat = Vec::new();
    for t in &tabs {
        tab_at.push(flat.len());
        flat.extend_from_slice(t);
    }
    let tn = flat.len();
    let tabs_id = cx.constant(format!("{}.tables", node.name), Tensor::i64(vec![tn], flat));
    let elems = numel(&out_shape);
    let body = Body::IndexMap {
        out_shape,
        tab_at,
        elem,
        fill,
        contig_from,
    };
    let args = [
        (Role::X, Buf::Tensor(x)),
        (Role::Table, Buf::Tensor(tabs_id)),
        (Role::Out, Buf::Tensor(out)),
    ];
    cx.push(n, None, &args, body, elems);
    Ok(())
}

/// Trilu as `Where(mask, x, 0)`: the mask a `[rows, cols]` bool constant (`trilu_keeps`), the zero a scalar
/// constant of x's dtype; the `Logic` kernel broadcasts both over the leading dims.
fn lower_trilu(cx: &mut Ctx, n: NodeId, upper: bool, k: i64) -> Result<()> {
    let node = cx.g.nodes[n].clone();
    let (x, out) = (node.inputs[0], node.outputs[0]);
    let shape = cx.shape(x);
    let (rows, cols) = match shape.as_slice() {
        [.., r, c] => (*r, *c),
        _ => return Err(Error::internal("lower", "Trilu of rank < 2")),
    };
    let mask = (0..rows * cols)
        .map(|e| i64::from(trilu_keeps(upper, k, e / cols, e % cols)))
        .collect();
    let mask = Tensor {
        dtype: DType::Bool,
        shape: vec![rows, cols],
        data: Data::I64(mask),
    };
    let dtype = cx.g.tensors[out].dtype;
    let zero = match dtype {
        DType::F32 => Tensor::f32(vec![], vec![0.0]),
        _ => Tensor {
            dtype,
            shape: vec![],
            data: Data::I64(vec![0]),
        },
    };
    let mask = cx.constant(format!("{}.mask", node.name), mask);
    let zero = cx.constant(format!("{}.zero", node.name), zero);
    let (out_shape, strides) = broadcast_all(&[&[rows, cols], &shape, &[]])
        .map_err(|m| Error::node(&node.name, &node.onnx_op, m))?;
    let elems = numel(&out_shape);
    let body = Body::Logic {
        kind: LogicKind::Where(dtype.size()),
        out_shape,
        strides,
    };
    let args = [
        (Role::In(0), Buf::Tensor(mask)),
        (Role::In(1), Buf::Tensor(x)),
        (Role::In(2), Buf::Tensor(zero)),
        (Role::Out, Buf::Tensor(out)),
    ];
    cx.push(n, None, &args, body, elems);
    Ok(())
}
