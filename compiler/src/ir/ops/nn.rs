//! Normalisation ops: inference BatchNormalization (per-channel scale and shift) and Softmax, whose row geometry
//! (`softmax_geom`) codegen shares.

use super::{arity, f32s, want_f32};
use crate::ir::types::{numel, DType, Shape, Tensor};

pub(crate) fn infer_batchnorm(inputs: &[(DType, &[usize])]) -> Result<Vec<(DType, Shape)>, String> {
    arity(inputs, 5, 5)?;
    let x = inputs[0].1;
    if x.len() < 2 {
        return Err(format!("X must have rank >= 2, got {x:?}"));
    }
    for (i, what) in ["scale", "B", "mean", "var"].iter().enumerate() {
        want_f32(inputs[i + 1].0, what)?;
        if inputs[i + 1].1 != [x[1]] {
            return Err(format!(
                "{what} shape {:?} is not [{}]",
                inputs[i + 1].1,
                x[1]
            ));
        }
    }
    Ok(vec![(inputs[0].0, x.to_vec())])
}

/// Per-channel (scale, shift) such that y = x * scale + shift equals batch normalisation.
pub fn batchnorm_affine(
    scale: &[f32],
    bias: &[f32],
    mean: &[f32],
    var: &[f32],
    eps: f32,
) -> (Vec<f32>, Vec<f32>) {
    let s: Vec<f32> = scale
        .iter()
        .zip(var)
        .map(|(g, v)| g / (v + eps).sqrt())
        .collect();
    let t = bias
        .iter()
        .zip(mean)
        .zip(&s)
        .map(|((b, m), s)| b - m * s)
        .collect();
    (s, t)
}

pub(crate) fn eval_batchnorm(inputs: &[&Tensor], eps: f32) -> Result<Vec<Tensor>, String> {
    arity(inputs, 5, 5)?;
    let x = f32s(inputs[0], "X")?;
    let p: Vec<&[f32]> = inputs[1..]
        .iter()
        .map(|t| f32s(t, "parameter"))
        .collect::<Result<_, _>>()?;
    let (s, t) = batchnorm_affine(p[0], p[1], p[2], p[3], eps);
    let shape = &inputs[0].shape;
    let c = shape[1];
    let inner = numel(&shape[2..]);
    let out = x.iter().enumerate().map(|(i, &v)| {
        let ch = (i / inner) % c;
        v * s[ch] + t[ch]
    });
    Ok(vec![Tensor::f32(shape.clone(), out.collect())])
}

/// Softmax as [outer, len, inner]: each (outer, inner) pair is one softmax over `len` values with stride `inner`.
pub fn softmax_geom(shape: &[usize], axis: usize, flatten_tail: bool) -> (usize, usize, usize) {
    let outer = numel(&shape[..axis]);
    if flatten_tail {
        (outer, numel(&shape[axis..]), 1)
    } else {
        (outer, shape[axis], numel(&shape[axis + 1..]))
    }
}

pub(crate) fn infer_softmax(
    inputs: &[(DType, &[usize])],
    axis: usize,
) -> Result<Vec<(DType, Shape)>, String> {
    arity(inputs, 1, 1)?;
    want_f32(inputs[0].0, "input")?;
    if axis >= inputs[0].1.len() {
        return Err(format!(
            "axis {axis} out of range for shape {:?}",
            inputs[0].1
        ));
    }
    Ok(vec![(DType::F32, inputs[0].1.to_vec())])
}

pub(crate) fn eval_softmax(
    inputs: &[&Tensor],
    axis: usize,
    flatten_tail: bool,
) -> Result<Vec<Tensor>, String> {
    infer_softmax(&[(inputs[0].dtype, &inputs[0].shape)], axis)?;
    let x = f32s(inputs[0], "input")?;
    let (outer, len, inner) = softmax_geom(&inputs[0].shape, axis, flatten_tail);
    let mut out = vec![0.0f32; x.len()];
    for o in 0..outer {
        for i in 0..inner {
            let at = |j: usize| o * len * inner + j * inner + i;
            let m = (0..len).map(|j| x[at(j)]).fold(f32::NEG_INFINITY, f32::max);
            let mut sum = 0.0f32;
            for j in 0..len {
                let e = (x[at(j)] - m).exp();
                out[at(j)] = e;
                sum += e;
            }
            for j in 0..len {
                out[at(j)] /= sum;
            }
        }
    }
    Ok(vec![Tensor::f32(inputs[0].shape.clone(), out)])
}
