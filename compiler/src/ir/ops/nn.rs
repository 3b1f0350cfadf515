//! Normalisation ops: inference BatchNormalization (per-channel scale and shift), Softmax / LogSoftmax, whose
//! row geometry (`softmax_geom`) codegen shares, LayerNormalization / RMSNormalization, InstanceNormalization
//! and LRN.

use super::args::{arity, f32s, want_f32};
use super::elementwise::broadcast_strides;
use crate::ir::attrs::LrnAttrs;
use crate::ir::op::Op;
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
    log: bool,
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
            let ls = sum.ln();
            for j in 0..len {
                if log {
                    out[at(j)] = x[at(j)] - m - ls;
                } else {
                    out[at(j)] /= sum;
                }
            }
        }
    }
    Ok(vec![Tensor::f32(inputs[0].shape.clone(), out)])
}

/// Layer-norm rows: (rows, len) for normalising the axes from `axis` on.
pub fn layernorm_geom(shape: &[usize], axis: usize) -> (usize, usize) {
    (numel(&shape[..axis]), numel(&shape[axis..]))
}

pub(crate) fn infer_layernorm(
    inputs: &[(DType, &[usize])],
    axis: usize,
) -> Result<Vec<(DType, Shape)>, String> {
    arity(inputs, 2, 3)?;
    let x = inputs[0].1;
    if axis >= x.len() {
        return Err(format!("axis {axis} out of range for shape {x:?}"));
    }
    for (i, (dt, s)) in inputs.iter().enumerate() {
        want_f32(*dt, ["X", "Scale", "B"][i])?;
        if i > 0
            && super::elementwise::broadcast_shapes(s, &x[axis..])
                .ok()
                .as_deref()
                != Some(&x[axis..])
        {
            return Err(format!(
                "{} of shape {s:?} does not broadcast to the normalised shape {:?}",
                ["X", "Scale", "B"][i],
                &x[axis..]
            ));
        }
    }
    Ok(vec![(DType::F32, x.to_vec())])
}

/// A per-row-element parameter expanded to the normalised shape `norm`.
pub fn expand_param(p: &Tensor, norm: &[usize]) -> Vec<f32> {
    let v = p.to_f32_vec();
    let st = broadcast_strides(&p.shape, norm);
    let n = numel(norm);
    let dims = super::super::types::strides(norm);
    (0..n)
        .map(|e| {
            let off: usize = (0..norm.len())
                .map(|d| (e / dims[d]) % norm[d] * st[d])
                .sum();
            v[off]
        })
        .collect()
}

/// Normalises one row: `(x - mean) / sqrt(var + eps)` (or `x / sqrt(mean(x²) + eps)` for RMS), then
/// `* scale[j] + bias[j]`.
pub fn normalize_row(
    x: &[f32],
    scale: &[f32],
    bias: Option<&[f32]>,
    eps: f32,
    rms: bool,
    out: &mut [f32],
) {
    let n = x.len() as f32;
    let mean = if rms { 0.0 } else { x.iter().sum::<f32>() / n };
    let var = x.iter().map(|v| (v - mean) * (v - mean)).sum::<f32>() / n;
    let inv = 1.0 / (var + eps).sqrt();
    for j in 0..x.len() {
        let s = scale[j % scale.len()];
        let b = bias.map_or(0.0, |b| b[j % b.len()]);
        out[j] = (x[j] - mean) * inv * s + b;
    }
}

pub(crate) fn eval_layernorm(
    inputs: &[&Tensor],
    axis: usize,
    eps: f32,
    rms: bool,
) -> Result<Vec<Tensor>, String> {
    let types = super::args::types_of(inputs);
    infer_layernorm(&types, axis)?;
    let shape = &inputs[0].shape;
    let x = f32s(inputs[0], "X")?;
    let (rows, len) = layernorm_geom(shape, axis);
    let scale = expand_param(inputs[1], &shape[axis..]);
    let bias = inputs.get(2).map(|b| expand_param(b, &shape[axis..]));
    let mut out = vec![0.0; x.len()];
    for r in 0..rows {
        let sl = r * len..(r + 1) * len;
        normalize_row(
            &x[sl.clone()],
            &scale,
            bias.as_deref(),
            eps,
            rms,
            &mut out[sl],
        );
    }
    Ok(vec![Tensor::f32(shape.clone(), out)])
}

pub(crate) fn infer_instancenorm(
    inputs: &[(DType, &[usize])],
) -> Result<Vec<(DType, Shape)>, String> {
    arity(inputs, 3, 3)?;
    let x = inputs[0].1;
    if x.len() < 3 {
        return Err(format!("input must have rank >= 3, got {x:?}"));
    }
    for (i, what) in ["scale", "B"].iter().enumerate() {
        want_f32(inputs[i + 1].0, what)?;
        if inputs[i + 1].1 != [x[1]] {
            return Err(format!(
                "{what} shape {:?} is not [{}]",
                inputs[i + 1].1,
                x[1]
            ));
        }
    }
    Ok(vec![(DType::F32, x.to_vec())])
}

pub(crate) fn eval_instancenorm(inputs: &[&Tensor], eps: f32) -> Result<Vec<Tensor>, String> {
    let types = super::args::types_of(inputs);
    infer_instancenorm(&types)?;
    let shape = &inputs[0].shape;
    let x = f32s(inputs[0], "input")?;
    let (s, b) = (f32s(inputs[1], "scale")?, f32s(inputs[2], "B")?);
    let (c, len) = (shape[1], numel(&shape[2..]));
    let mut out = vec![0.0; x.len()];
    for p in 0..numel(&shape[..2]) {
        let sl = p * len..(p + 1) * len;
        let ch = p % c;
        normalize_row(
            &x[sl.clone()],
            &s[ch..=ch],
            Some(&b[ch..=ch]),
            eps,
            false,
            &mut out[sl],
        );
    }
    Ok(vec![Tensor::f32(shape.clone(), out)])
}

/// The channel window [lo, hi] of LRN for channel `c` of `channels`.
pub fn lrn_window(a: &LrnAttrs, c: usize, channels: usize) -> (usize, usize) {
    let before = (a.size - 1) / 2;
    let after = a.size - 1 - before;
    (c.saturating_sub(before), (c + after).min(channels - 1))
}

pub(crate) fn infer_lrn(inputs: &[(DType, &[usize])]) -> Result<Vec<(DType, Shape)>, String> {
    arity(inputs, 1, 1)?;
    want_f32(inputs[0].0, "input")?;
    if inputs[0].1.len() < 3 {
        return Err(format!("input must have rank >= 3, got {:?}", inputs[0].1));
    }
    Ok(vec![(DType::F32, inputs[0].1.to_vec())])
}

pub(crate) fn eval_lrn(inputs: &[&Tensor], a: &LrnAttrs) -> Result<Vec<Tensor>, String> {
    infer_lrn(&[(inputs[0].dtype, &inputs[0].shape)])?;
    let shape = &inputs[0].shape;
    let x = f32s(inputs[0], "input")?;
    let (c, inner) = (shape[1], numel(&shape[2..]));
    let mut out = vec![0.0; x.len()];
    for n in 0..shape[0] {
        for ch in 0..c {
            let (lo, hi) = lrn_window(a, ch, c);
            for p in 0..inner {
                let at = |k: usize| (n * c + k) * inner + p;
                let sq: f32 = (lo..=hi).map(|k| x[at(k)] * x[at(k)]).sum();
                let d = (a.bias + a.alpha / a.size as f32 * sq).powf(a.beta);
                out[at(ch)] = x[at(ch)] / d;
            }
        }
    }
    Ok(vec![Tensor::f32(shape.clone(), out)])
}

/// The dtype and shape of each output of this family's `op` (`ops::infer`).
pub fn infer(op: &Op, inputs: &[(DType, &[usize])]) -> Result<Vec<(DType, Shape)>, String> {
    match op {
        Op::BatchNorm { .. } => infer_batchnorm(inputs),
        Op::Softmax { axis, .. } => infer_softmax(inputs, *axis),
        Op::LayerNorm { axis, .. } => infer_layernorm(inputs, *axis),
        Op::InstanceNorm { .. } => infer_instancenorm(inputs),
        Op::Lrn(_) => infer_lrn(inputs),
        _ => Err(format!("{} is not in the nn family", op.name())),
    }
}

/// Evaluates this family's `op` (`ops::eval`).
pub fn eval(op: &Op, inputs: &[&Tensor]) -> Result<Vec<Tensor>, String> {
    match op {
        Op::BatchNorm { epsilon } => eval_batchnorm(inputs, *epsilon),
        Op::Softmax {
            axis,
            flatten_tail,
            log,
        } => eval_softmax(inputs, *axis, *flatten_tail, *log),
        Op::LayerNorm { axis, epsilon, rms } => eval_layernorm(inputs, *axis, *epsilon, *rms),
        Op::InstanceNorm { epsilon } => eval_instancenorm(inputs, *epsilon),
        Op::Lrn(a) => eval_lrn(inputs, a),
        _ => Err(format!("{} is not in the nn family", op.name())),
    }
}
