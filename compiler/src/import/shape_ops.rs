//! ONNX → IR mapping of the shape family (`ir/ops/shape.rs`): Flatten, Reshape, Squeeze and Unsqueeze (all one
//! `Reshape` with a constant target), Transpose and Concat, and the ops folded at import (Constant, Shape, Size).
//! Target shapes and axes must be constants, which shape-folded graphs have.

use super::importer::Importer;
use super::nodes::{Lowered, Node, Parser};
use super::tensor::decode;
use crate::error::{Error, Result};
use crate::ir::types::checked_numel;
use crate::ir::{numel, Op, Tensor, TensorId};

/// The ONNX ops this file maps, for `bundlec ops`.
pub const SUPPORTED: &[(&str, &str)] = &[
    (
        "Flatten, Reshape, Squeeze, Unsqueeze",
        "shape / axes must be constant",
    ),
    ("Transpose", "any rank"),
    ("Concat", "any rank, any axis"),
    ("Constant, Shape, Size", "folded at compile time"),
];

impl Importer<'_> {}

/// Resolves an ONNX Reshape spec (0 copies, -1 infers).
pub fn reshape_target(
    input: &[usize],
    spec: &[i64],
    allow_zero: bool,
) -> std::result::Result<Vec<usize>, String> {
    let mut out = Vec::with_capacity(spec.len());
    let mut infer = None;
    for (i, &d) in spec.iter().enumerate() {
        match d {
            -1 if infer.is_none() => {
                infer = Some(i);
                out.push(1);
            }
            0 if !allow_zero => out.push(
                *input
                    .get(i)
                    .ok_or(format!("shape[{i}] = 0 copies a missing input dim"))?,
            ),
            d if d >= 0 => out.push(d as usize),
            _ => return Err(format!("invalid target shape {spec:?}")),
        }
    }
    let over = || format!("target shape {spec:?} overflows");
    if out.len() > crate::ir::types::MAX_RANK {
        return Err(format!("target shape {spec:?} exceeds the rank limit"));
    }
    let total = checked_numel(input).ok_or_else(over)?;
    if let Some(i) = infer {
        let known = checked_numel(&out).ok_or_else(over)?;
        if known == 0 || !total.is_multiple_of(known) {
            return Err(format!("cannot infer -1 in {spec:?} for input {input:?}"));
        }
        out[i] = total / known;
    }
    if checked_numel(&out) != Some(total) {
        return Err(format!("cannot reshape {input:?} to {spec:?}"));
    }
    Ok(out)
}

fn squeeze_target(
    input: &[usize],
    axes: Option<&[i64]>,
    unsqueeze: bool,
) -> std::result::Result<Vec<usize>, String> {
    let out_rank = if unsqueeze {
        input.len() + axes.map_or(0, |a| a.len())
    } else {
        input.len()
    } as i64;
    let norm = |a: i64| if a < 0 { a + out_rank } else { a };
    if unsqueeze {
        let axes = axes.ok_or("Unsqueeze needs axes")?;
        if axes.len() > crate::ir::types::MAX_RANK {
            return Err(format!("{} axes exceed the rank limit", axes.len()));
        }
        let axes: Vec<i64> = axes.iter().map(|&a| norm(a)).collect();
        let mut out = Vec::new();
        let mut it = input.iter();
        for i in 0..out_rank {
            if axes.contains(&i) {
                out.push(1);
            } else {
                out.push(*it.next().ok_or("invalid axes")?);
            }
        }
        return Ok(out);
    }
    match axes {
        None => Ok(input.iter().copied().filter(|&d| d != 1).collect()),
        Some(a) => {
            let axes: Vec<i64> = a.iter().map(|&x| norm(x)).collect();
            for &x in &axes {
                if x < 0 || x >= out_rank || input[x as usize] != 1 {
                    return Err(format!("cannot squeeze axis {x} of {input:?}"));
                }
            }
            Ok(input
                .iter()
                .enumerate()
                .filter(|(i, _)| !axes.contains(&(*i as i64)))
                .map(|(_, &d)| d)
                .collect())
        }
    }
}

/// The parsers of this file's op types.
pub(super) const PARSERS: &[Parser] = &[
    (&["Flatten"], parse_flatten),
    (&["Reshape"], parse_reshape),
    (&["Squeeze", "Unsqueeze"], parse_squeeze),
    (&["Transpose"], parse_transpose),
    (&["Concat"], parse_concat),
    (&["Constant"], parse_constant),
    (&["Size"], parse_size),
    (&["Shape"], parse_shape),
];

/// `Flatten`.
fn parse_flatten(im: &mut Importer<'_>, n: &Node<'_>) -> Result<Lowered> {
    let Node { name, op, a, .. } = *n;
    let shape = |t: TensorId| im.g.tensors[t].shape.clone();
    let x = n.req(0)?;
    let s = shape(x);
    let r = s.len() as i64;
    let axis = a.int("axis", 1)?;
    let axis = if axis < 0 { axis + r } else { axis };
    if !(0..=r).contains(&axis) {
        return Err(Error::node(
            name,
            op,
            format!(
                "attribute 'axis': {} out of range for rank {r}",
                a.int("axis", 1)?
            ),
        ));
    }
    let axis = axis as usize;
    Ok(Lowered::Node(
        Op::Reshape(vec![numel(&s[..axis]), numel(&s[axis..])]),
        vec![x],
    ))
}

/// `Reshape`.
fn parse_reshape(im: &mut Importer<'_>, n: &Node<'_>) -> Result<Lowered> {
    let Node {
        node, name, op, a, ..
    } = *n;
    let shape = |t: TensorId| im.g.tensors[t].shape.clone();
    let x = n.req(0)?;
    let spec = im
        .const_ints(n.req(1)?)
        .ok_or_else(|| super::nodes::err_const(node, name, &[1], "shape"))?;
    let to = reshape_target(&shape(x), &spec, a.int("allowzero", 0)? != 0)
        .map_err(|m| Error::node(name, op, m))?;
    Ok(Lowered::Node(Op::Reshape(to), vec![x]))
}

/// `Squeeze`, `Unsqueeze`.
fn parse_squeeze(im: &mut Importer<'_>, n: &Node<'_>) -> Result<Lowered> {
    let Node { name, op, a, .. } = *n;
    let shape = |t: TensorId| im.g.tensors[t].shape.clone();
    let x = n.req(0)?;
    let axes: Option<Vec<i64>> = if im.opset < 13 {
        a.ints("axes")?.map(|v| v.to_vec())
    } else {
        im.const_input(n, 1, "axes")?
    };
    let to = squeeze_target(&shape(x), axes.as_deref(), op == "Unsqueeze")
        .map_err(|m| Error::node(name, op, m))?;
    Ok(Lowered::Node(Op::Reshape(to), vec![x]))
}

/// `Transpose`.
fn parse_transpose(im: &mut Importer<'_>, n: &Node<'_>) -> Result<Lowered> {
    let Node { a, .. } = *n;
    let rank = |t: TensorId| im.g.tensors[t].shape.len();
    let x = n.req(0)?;
    let r = rank(x);
    let perm = match a.ints("perm")? {
        Some(p) => p
            .iter()
            .map(|&v| if v < 0 { usize::MAX } else { v as usize })
            .collect(),
        None => (0..r).rev().collect(),
    };
    Ok(Lowered::Node(Op::Transpose(perm), vec![x]))
}

/// `Concat`.
fn parse_concat(im: &mut Importer<'_>, n: &Node<'_>) -> Result<Lowered> {
    let Node {
        name, op, ins, a, ..
    } = *n;
    let rank = |t: TensorId| im.g.tensors[t].shape.len();
    let list: Vec<TensorId> = ins.iter().flatten().copied().collect();
    let first = *list
        .first()
        .ok_or_else(|| Error::node(name, op, "needs at least one input"))?;
    if !a.has("axis") {
        return Err(Error::node(name, op, "attribute 'axis' is required"));
    }
    let axis = a.axis("axis", 0, rank(first))?;
    Ok(Lowered::Node(Op::Concat(axis), list))
}

/// `Constant`.
fn parse_constant(im: &mut Importer<'_>, n: &Node<'_>) -> Result<Lowered> {
    let Node { name, op, a, .. } = *n;
    Ok(if let Some(t) = a.tensor("value")? {
        Lowered::Const(decode(t, im.model_dir, &mut im.budget)?)
    } else if a.has("value_float") {
        Lowered::Const(Tensor::f32(vec![], vec![a.float("value_float", 0.0)?]))
    } else if let Some(f) = a.floats("value_floats")?.filter(|_| a.has("value_floats")) {
        Lowered::Const(Tensor::f32(vec![f.len()], f.to_vec()))
    } else if a.has("value_int") {
        Lowered::Const(Tensor::i64(vec![], vec![a.int("value_int", 0)?]))
    } else if let Some(v) = a.ints("value_ints")? {
        Lowered::Const(Tensor::i64(vec![v.len()], v.to_vec()))
    } else {
        return Err(Error::unsupported(
            name,
            op,
            "only tensor, float(s) and int(s) values are supported",
        ));
    })
}

/// `Size`.
fn parse_size(im: &mut Importer<'_>, n: &Node<'_>) -> Result<Lowered> {
    let shape = |t: TensorId| im.g.tensors[t].shape.clone();
    Ok(Lowered::Const(Tensor::i64(
        vec![],
        vec![numel(&shape(n.req(0)?)) as i64],
    )))
}

/// `Shape`.
fn parse_shape(im: &mut Importer<'_>, n: &Node<'_>) -> Result<Lowered> {
    let Node { a, .. } = *n;
    let shape = |t: TensorId| im.g.tensors[t].shape.clone();
    let s: Vec<i64> = shape(n.req(0)?).iter().map(|&d| d as i64).collect();
    let r = s.len() as i64;
    let clamp = |v: i64| if v < 0 { (v + r).clamp(0, r) } else { v.clamp(0, r) } as usize;
    let (start, end) = (clamp(a.int("start", 0)?), clamp(a.int("end", r)?));
    let s = s[start..end.max(start)].to_vec();
    Ok(Lowered::Const(Tensor::i64(vec![s.len()], s)))
}
