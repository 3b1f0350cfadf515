//! Data-movement ops: Reshape (also Flatten/Squeeze/Unsqueeze after import), Transpose and Concat. They work on
//! any dtype; values are copied, never converted.

use super::args::arity;
use crate::ir::op::Op;
use crate::ir::types::{numel, strides, DType, Data, Shape, Tensor};

pub(crate) fn infer_reshape(
    inputs: &[(DType, &[usize])],
    to: &[usize],
) -> Result<Vec<(DType, Shape)>, String> {
    arity(inputs, 1, 1)?;
    let n = crate::ir::types::checked_numel;
    if n(inputs[0].1).is_none() || n(inputs[0].1) != n(to) {
        return Err(format!("cannot reshape {:?} to {to:?}", inputs[0].1));
    }
    Ok(vec![(inputs[0].0, to.to_vec())])
}

pub(crate) fn eval_reshape(inputs: &[&Tensor], to: &[usize]) -> Result<Vec<Tensor>, String> {
    infer_reshape(&[(inputs[0].dtype, &inputs[0].shape)], to)?;
    let mut t = inputs[0].clone();
    t.shape = to.to_vec();
    Ok(vec![t])
}

pub(crate) fn infer_transpose(
    inputs: &[(DType, &[usize])],
    perm: &[usize],
) -> Result<Vec<(DType, Shape)>, String> {
    arity(inputs, 1, 1)?;
    let x = inputs[0].1;
    let mut seen = vec![false; x.len()];
    if perm.len() != x.len()
        || perm
            .iter()
            .any(|&p| p >= x.len() || std::mem::replace(&mut seen[p], true))
    {
        return Err(format!(
            "perm {perm:?} is not a permutation of rank {}",
            x.len()
        ));
    }
    Ok(vec![(inputs[0].0, perm.iter().map(|&p| x[p]).collect())])
}

/// For each output dimension, the input stride (elements) it walks.
pub fn transpose_strides(shape: &[usize], perm: &[usize]) -> Vec<usize> {
    let st = strides(shape);
    perm.iter().map(|&p| st[p]).collect()
}

fn gather<T: Copy>(src: &[T], out_shape: &[usize], in_strides: &[usize]) -> Vec<T> {
    let n = numel(out_shape);
    let mut idx = vec![0usize; out_shape.len()];
    let mut v = Vec::with_capacity(n);
    for _ in 0..n {
        v.push(
            src[idx
                .iter()
                .zip(in_strides)
                .map(|(i, s)| i * s)
                .sum::<usize>()],
        );
        super::args::advance(&mut idx, out_shape);
    }
    v
}

pub(crate) fn eval_transpose(inputs: &[&Tensor], perm: &[usize]) -> Result<Vec<Tensor>, String> {
    let (dt, out_shape) = infer_transpose(&[(inputs[0].dtype, &inputs[0].shape)], perm)?.remove(0);
    let st = transpose_strides(&inputs[0].shape, perm);
    let data = match &inputs[0].data {
        Data::F32(v) => Data::F32(gather(v, &out_shape, &st)),
        Data::I64(v) => Data::I64(gather(v, &out_shape, &st)),
    };
    Ok(vec![Tensor {
        dtype: dt,
        shape: out_shape,
        data,
    }])
}

pub(crate) fn infer_concat(
    inputs: &[(DType, &[usize])],
    axis: usize,
) -> Result<Vec<(DType, Shape)>, String> {
    if inputs.is_empty() {
        return Err("Concat needs at least one input".into());
    }
    let first = inputs[0].1;
    if axis >= first.len() {
        return Err(format!("axis {axis} out of range for rank {}", first.len()));
    }
    let mut out = first.to_vec();
    out[axis] = 0;
    for (i, (dt, s)) in inputs.iter().enumerate() {
        if *dt != inputs[0].0 {
            return Err(format!(
                "input {i} has dtype {dt}, expected {}",
                inputs[0].0
            ));
        }
        if s.len() != first.len() || (0..s.len()).any(|d| d != axis && s[d] != first[d]) {
            return Err(format!(
                "input {i} of shape {s:?} does not match {first:?} off axis {axis}"
            ));
        }
        out[axis] = out[axis]
            .checked_add(s[axis])
            .ok_or_else(|| format!("concatenated axis {axis} overflows"))?;
    }
    Ok(vec![(inputs[0].0, out)])
}

pub(crate) fn eval_concat(inputs: &[&Tensor], axis: usize) -> Result<Vec<Tensor>, String> {
    let shapes = super::args::types_of(inputs);
    let (dt, out_shape) = infer_concat(&shapes, axis)?.remove(0);
    let outer = numel(&out_shape[..axis]);
    let mut f = Vec::new();
    let mut i = Vec::new();
    for o in 0..outer {
        for t in inputs {
            let block = numel(&t.shape[axis..]);
            match &t.data {
                Data::F32(v) => f.extend_from_slice(&v[o * block..(o + 1) * block]),
                Data::I64(v) => i.extend_from_slice(&v[o * block..(o + 1) * block]),
            }
        }
    }
    let data = if dt == DType::F32 {
        Data::F32(f)
    } else {
        Data::I64(i)
    };
    Ok(vec![Tensor {
        dtype: dt,
        shape: out_shape,
        data,
    }])
}

/// The dtype and shape of each output of this family's `op` (`ops::infer`).
pub fn infer(op: &Op, inputs: &[(DType, &[usize])]) -> Result<Vec<(DType, Shape)>, String> {
    match op {
        Op::Reshape(s) => infer_reshape(inputs, s),
        Op::Transpose(p) => infer_transpose(inputs, p),
        Op::Concat(axis) => infer_concat(inputs, *axis),
        _ => Err(format!("{} is not in the shape family", op.name())),
    }
}

/// Evaluates this family's `op` (`ops::eval`).
pub fn eval(op: &Op, inputs: &[&Tensor]) -> Result<Vec<Tensor>, String> {
    match op {
        Op::Reshape(s) => eval_reshape(inputs, s),
        Op::Transpose(p) => eval_transpose(inputs, p),
        Op::Concat(axis) => eval_concat(inputs, *axis),
        _ => Err(format!("{} is not in the shape family", op.name())),
    }
}
