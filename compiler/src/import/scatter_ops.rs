//! ONNX → IR mapping of the element- and slice-indexed ops whose indices are constants (a BERT's token-type
//! embedding lookup, a Swin's shifted-window mask): GatherElements and GatherND become one `Gather` of the
//! flattened data (rows of it, for GatherND's slices) with an index map computed here; ScatterElements, Scatter
//! and ScatterND become a `Gather` from the data's rows followed by the updates' rows (reduction none: the last
//! update of a row wins), or, with a reduction, one `Gather` of the updates per write to the same row and the
//! reduction applied in index order, with the reduction's identity (−0, 1, −∞, +∞) for the rows a layer does not
//! write. Every constant input folds, through the same ops, under the constant budget. Run-time indices are
//! refused with an error naming the input.

use super::importer::Importer;
use super::nodes::{err_const, Lowered, Node, Parser};
use crate::error::{Error, Result};
use crate::ir::{numel, BinOp, DType, Op, Tensor, TensorId};

/// The ONNX ops this file maps, for `bundlec ops`.
pub const SUPPORTED: &[(&str, &str)] = &[
    (
        "GatherElements, GatherND",
        "constant indices (negative count from the end); GatherND batch_dims",
    ),
    (
        "ScatterElements, Scatter, ScatterND",
        "constant indices; reduction none, add, mul (f32 or folded), max, min (f32)",
    ),
];

/// The parsers of this file's op types.
pub(super) const PARSERS: &[Parser] = &[
    (&["GatherElements"], parse_gather_elements),
    (&["GatherND"], parse_gather_nd),
    (&["ScatterElements", "Scatter"], parse_scatter_elements),
    (&["ScatterND"], parse_scatter_nd),
];

/// Row-major strides of `shape`, in elements.
fn strides(shape: &[usize]) -> Vec<usize> {
    let mut s = vec![1; shape.len()];
    for i in (0..shape.len().saturating_sub(1)).rev() {
        s[i] = s[i + 1] * shape[i + 1];
    }
    s
}

/// The coordinates of element `flat` of `shape`.
fn unravel(mut flat: usize, shape: &[usize]) -> Vec<usize> {
    let mut c = vec![0; shape.len()];
    for i in (0..shape.len()).rev() {
        if shape[i] > 0 {
            c[i] = flat % shape[i];
            flat /= shape[i];
        }
    }
    c
}

/// Index `v` into an axis of length `len` (negative from the end), or the error naming it.
fn index(n: &Node<'_>, v: i64, len: usize, what: &str) -> Result<usize> {
    let u = if v < 0 { v + len as i64 } else { v };
    if (0..len as i64).contains(&u) {
        Ok(u as usize)
    } else {
        Err(Error::node(
            n.name,
            n.op,
            format!("index {v} is out of range for {what} of length {len}"),
        ))
    }
}

/// The data offsets the elements of an index tensor `vals` (shape `is`) name along `axis` of data of shape `xs`:
/// element `p`'s own coordinates with the one along `axis` replaced by its value (GatherElements'
/// and ScatterElements' addressing).
fn element_offsets(
    n: &Node<'_>,
    vals: &[i64],
    is: &[usize],
    xs: &[usize],
    axis: usize,
) -> Result<Vec<usize>> {
    let st = strides(xs);
    vals.iter()
        .enumerate()
        .map(|(p, &v)| {
            let mut c = unravel(p, is);
            c[axis] = index(n, v, xs[axis], "the axis")?;
            Ok(c.iter().zip(&st).map(|(a, b)| a * b).sum())
        })
        .collect()
}

/// The constant integer indices at input 1: their values and shape.
fn const_indices(im: &mut Importer<'_>, n: &Node<'_>) -> Result<(Vec<i64>, Vec<usize>)> {
    let idx = n.req(1)?;
    if !matches!(im.g.tensors[idx].dtype, DType::I64 | DType::I32) {
        return Err(Error::node(
            n.name,
            n.op,
            format!("indices of dtype {}", im.g.tensors[idx].dtype),
        ));
    }
    let c = im
        .const_tensor(Some(idx))
        .ok_or_else(|| err_const(n.node, n.name, &[1], "indices"))?;
    Ok((c.to_i64_vec(), c.shape))
}

/// `Gather` along axis 0 of `t` with the constant index map `map` of shape `shape` (charged to the constant
/// budget).
fn gather_rows(
    im: &mut Importer<'_>,
    n: &Node<'_>,
    tag: &str,
    t: TensorId,
    map: Vec<usize>,
    shape: Vec<usize>,
) -> Result<TensorId> {
    im.budget
        .take(map.len(), DType::I64)
        .map_err(|m| Error::node(n.name, n.op, m))?;
    let out0 = n.node.output.first().map_or("", String::as_str);
    let vals = map.into_iter().map(|v| v as i64).collect();
    let m =
        im.g.add_constant(format!("{out0}.{tag}_map"), Tensor::i64(shape, vals));
    im.sub_node(n, tag, Op::Gather { axis: 0 }, vec![t, m])
}

/// `GatherElements`.
fn parse_gather_elements(im: &mut Importer<'_>, n: &Node<'_>) -> Result<Lowered> {
    let x = n.req(0)?;
    let xs = im.g.tensors[x].shape.clone();
    let axis = n.a.axis("axis", 0, xs.len())?;
    let (vals, is) = const_indices(im, n)?;
    if is.len() != xs.len() || (0..xs.len()).any(|d| d != axis && is[d] > xs[d]) {
        return Err(Error::node(
            n.name,
            n.op,
            format!("indices of shape {is:?} do not fit data of shape {xs:?} (axis {axis})"),
        ));
    }
    let map = element_offsets(n, &vals, &is, &xs, axis)?;
    let flat = im.sub_node(n, "flat", Op::Reshape(vec![numel(&xs)]), vec![x])?;
    Ok(Lowered::Alias(gather_rows(im, n, "gather", flat, map, is)?))
}

/// `GatherND`.
fn parse_gather_nd(im: &mut Importer<'_>, n: &Node<'_>) -> Result<Lowered> {
    let x = n.req(0)?;
    let xs = im.g.tensors[x].shape.clone();
    let (vals, is) = const_indices(im, n)?;
    let b = usize::try_from(n.a.int("batch_dims", 0)?).unwrap_or(usize::MAX);
    let k = is.last().copied().unwrap_or(0);
    if is.is_empty() || b >= is.len() || k == 0 || b + k > xs.len() || is[..b] != xs[..b] {
        return Err(Error::node(
            n.name,
            n.op,
            format!("indices of shape {is:?} (batch_dims {b}) do not fit data of shape {xs:?}"),
        ));
    }
    let lead = &is[..is.len() - 1];
    let (rows_shape, slice) = (&xs[..b + k], &xs[b + k..]);
    let st = strides(rows_shape);
    let map = (0..numel(lead))
        .map(|q| {
            let batch = unravel(q, lead);
            let mut row: usize = (0..b).map(|d| batch[d] * st[d]).sum();
            for j in 0..k {
                row += index(n, vals[q * k + j], xs[b + j], "an indexed axis")? * st[b + j];
            }
            Ok(row)
        })
        .collect::<Result<Vec<usize>>>()?;
    let rows = im.sub_node(
        n,
        "rows",
        Op::Reshape(vec![numel(rows_shape), numel(slice)]),
        vec![x],
    )?;
    let map_shape = if lead.is_empty() {
        vec![1]
    } else {
        lead.to_vec()
    };
    let g = gather_rows(im, n, "gather", rows, map, map_shape)?;
    let out: Vec<usize> = lead.iter().chain(slice).copied().collect();
    Ok(Lowered::Node(Op::Reshape(out), vec![g]))
}

/// `ScatterElements`, `Scatter`.
fn parse_scatter_elements(im: &mut Importer<'_>, n: &Node<'_>) -> Result<Lowered> {
    let (x, u) = (n.req(0)?, n.req(2)?);
    let xs = im.g.tensors[x].shape.clone();
    let us = im.g.tensors[u].shape.clone();
    let axis = n.a.axis("axis", 0, xs.len())?;
    let (vals, is) = const_indices(im, n)?;
    if is != us || is.len() != xs.len() || (0..xs.len()).any(|d| d != axis && is[d] > xs[d]) {
        return Err(Error::node(
            n.name,
            n.op,
            format!(
                "indices {is:?} and updates {us:?} do not fit data of shape {xs:?} (axis {axis})"
            ),
        ));
    }
    let targets = element_offsets(n, &vals, &is, &xs, axis)?;
    scatter(im, n, (x, &xs), u, 1, targets)
}

/// `ScatterND`.
fn parse_scatter_nd(im: &mut Importer<'_>, n: &Node<'_>) -> Result<Lowered> {
    let (x, u) = (n.req(0)?, n.req(2)?);
    let xs = im.g.tensors[x].shape.clone();
    let us = im.g.tensors[u].shape.clone();
    let (vals, is) = const_indices(im, n)?;
    let k = is.last().copied().unwrap_or(0);
    let fits = !is.is_empty() && k >= 1 && k <= xs.len() && {
        let want: Vec<usize> = is[..is.len() - 1].iter().chain(&xs[k..]).copied().collect();
        us == want
    };
    if !fits {
        return Err(Error::node(
            n.name,
            n.op,
            format!("indices {is:?} and updates {us:?} do not fit data of shape {xs:?}"),
        ));
    }
    let st = strides(&xs[..k]);
    let targets = (0..vals.len() / k)
        .map(|q| {
            (0..k).try_fold(0, |row, j| {
                Ok(row + index(n, vals[q * k + j], xs[j], "an indexed axis")? * st[j])
            })
        })
        .collect::<Result<Vec<usize>>>()?;
    scatter(im, n, (x, &xs), u, numel(&xs[k..]), targets)
}

/// The scatter of update rows `u` (each `s` elements) into the rows of `x` (`targets[i]`: the row update `i`
/// writes), with the node's `reduction`.
fn scatter(
    im: &mut Importer<'_>,
    n: &Node<'_>,
    (x, xs): (TensorId, &[usize]),
    u: TensorId,
    s: usize,
    targets: Vec<usize>,
) -> Result<Lowered> {
    if numel(xs) == 0 || s == 0 {
        return Err(Error::unsupported(n.name, n.op, "zero-sized data"));
    }
    let rows = numel(xs) / s;
    let dtype = im.g.tensors[x].dtype;
    if im.g.tensors[u].dtype != dtype {
        return Err(Error::node(
            n.name,
            n.op,
            "updates and data differ in dtype",
        ));
    }
    let reduction = n.a.string("reduction", "none")?;
    let x2 = im.sub_node(n, "rows", Op::Reshape(vec![rows, s]), vec![x])?;
    let u2 = im.sub_node(n, "updates", Op::Reshape(vec![targets.len(), s]), vec![u])?;
    // Each row's writes, in index order.
    let mut writes: Vec<Vec<usize>> = vec![Vec::new(); rows];
    for (i, &r) in targets.iter().enumerate() {
        writes[r].push(i);
    }
    if reduction == "none" {
        let map = (0..rows)
            .map(|r| writes[r].last().map_or(r, |&i| rows + i))
            .collect();
        let both = im.sub_node(n, "concat", Op::Concat(0), vec![x2, u2])?;
        let g = gather_rows(im, n, "scatter", both, map, vec![rows])?;
        return Ok(Lowered::Node(Op::Reshape(xs.to_vec()), vec![g]));
    }
    let (op, identity) = match reduction.as_str() {
        "add" => (BinOp::Add, -0.0f32),
        "mul" => (BinOp::Mul, 1.0),
        "max" => (BinOp::Max, f32::NEG_INFINITY),
        "min" => (BinOp::Min, f32::INFINITY),
        r => return Err(n.a.err("reduction", format!("unknown value '{r}'"))),
    };
    if dtype != DType::F32 {
        return Err(Error::unsupported(
            n.name,
            n.op,
            format!("reduction '{reduction}' on {dtype} data"),
        ));
    }
    let out0 = n.node.output.first().map_or("", String::as_str);
    let ident = im.g.add_constant(
        format!("{out0}.identity"),
        Tensor::f32(vec![1, s], vec![identity; s]),
    );
    let table = im.sub_node(n, "concat", Op::Concat(0), vec![ident, u2])?;
    let layers = writes.iter().map(Vec::len).max().unwrap_or(0);
    let mut acc = x2;
    for j in 0..layers {
        let map = (0..rows)
            .map(|r| writes[r].get(j).map_or(0, |&i| 1 + i))
            .collect();
        let g = gather_rows(im, n, &format!("layer{j}"), table, map, vec![rows])?;
        acc = im.sub_node(n, &format!("reduce{j}"), Op::Binary(op), vec![acc, g])?;
    }
    Ok(Lowered::Node(Op::Reshape(xs.to_vec()), vec![acc]))
}
