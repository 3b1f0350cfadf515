//! Resize (and Upsample): separable per-axis resampling. `axis_taps` gives, for every output coordinate of one
//! axis, the input indices it reads and their weights, following the ONNX reference exactly: the coordinate
//! transformation, the neighbourhood of the edge-padded input (ties prefer the lower index), nearest / linear /
//! cubic coefficients and `exclude_outside`. Applying the axes one after another equals the n-d interpolation.
//! The kernel (`codegen/ops/nn.rs`) reads the same taps.

use super::args::arity;
use crate::ir::attrs::{CoordMode, NearestMode, ResizeAttrs, ResizeMode};
use crate::ir::op::Op;
use crate::ir::types::{numel, DType, Shape, Tensor};

/// Per output coordinate: (input index, already clamped to the input, weight) pairs.
pub type Taps = Vec<Vec<(usize, f32)>>;

fn source_coord(a: &ResizeAttrs, axis: usize, x: f64, in_len: usize) -> f64 {
    let scale = a.scales[axis];
    let out_f = scale * in_len as f64;
    match a.coord {
        CoordMode::AlignCorners => {
            if out_f == 1.0 {
                0.0
            } else {
                x * (in_len as f64 - 1.0) / (out_f - 1.0)
            }
        }
        CoordMode::Asymmetric => x / scale,
        CoordMode::PytorchHalfPixel => {
            if out_f == 1.0 {
                -0.5
            } else {
                (x + 0.5) / scale - 0.5
            }
        }
        CoordMode::HalfPixel => (x + 0.5) / scale - 0.5,
        CoordMode::HalfPixelSymmetric => {
            let adjustment = a.out[axis] as f64 / out_f;
            let center = in_len as f64 / 2.0;
            center * (1.0 - adjustment) + (x + 0.5) / scale - 0.5
        }
    }
}

fn coeffs(mode: ResizeMode, ratio: f64, a: f64) -> Vec<f64> {
    match mode {
        ResizeMode::Nearest(m) => {
            if ratio == 1.0 {
                return vec![0.0, 1.0];
            }
            let up = match m {
                NearestMode::RoundPreferFloor => ratio > 0.5,
                NearestMode::RoundPreferCeil => ratio >= 0.5,
                NearestMode::Floor => false,
                NearestMode::Ceil => true,
            };
            if up {
                vec![0.0, 1.0]
            } else {
                vec![1.0, 0.0]
            }
        }
        ResizeMode::Linear => vec![1.0 - ratio, ratio],
        ResizeMode::Cubic => {
            let (r, s) = (ratio, 1.0 - ratio);
            vec![
                ((a * (r + 1.0) - 5.0 * a) * (r + 1.0) + 8.0 * a) * (r + 1.0) - 4.0 * a,
                ((a + 2.0) * r - (a + 3.0)) * r * r + 1.0,
                ((a + 2.0) * s - (a + 3.0)) * s * s + 1.0,
                ((a * (s + 1.0) - 5.0 * a) * (s + 1.0) + 8.0 * a) * (s + 1.0) - 4.0 * a,
            ]
        }
    }
}

/// The taps of every output coordinate of `axis` (input length `in_len`).
pub fn axis_taps(a: &ResizeAttrs, axis: usize, in_len: usize) -> Taps {
    let n_out = a.out[axis];
    (0..n_out)
        .map(|o| {
            let x = source_coord(a, axis, o as f64, in_len);
            let ratio = if x.fract() == 0.0 { 1.0 } else { x - x.floor() };
            let mut c = coeffs(a.mode, ratio, a.cubic_a as f64);
            let n = c.len() as i64;
            // The n indices of the edge-padded input closest to x (ties: lower index), in order.
            let pad = (n + 1) / 2;
            let limit = in_len as i64 + 2 * pad;
            let xp = x + pad as f64;
            let centre = xp.floor() as i64;
            let mut cand: Vec<i64> = (centre - n..=centre + n)
                .filter(|i| (0..limit).contains(i))
                .collect();
            cand.sort_by(|&i, &j| {
                let (di, dj) = ((xp - i as f64).abs(), (xp - j as f64).abs());
                di.total_cmp(&dj).then(i.cmp(&j))
            });
            cand.truncate(n as usize);
            cand.sort();
            let idx: Vec<i64> = cand.iter().map(|&i| i - pad).collect();
            if a.exclude_outside {
                for (k, &i) in idx.iter().enumerate() {
                    if i < 0 || i >= in_len as i64 {
                        c[k] = 0.0;
                    }
                }
                let s: f64 = c.iter().sum();
                if s != 0.0 {
                    c.iter_mut().for_each(|v| *v /= s);
                }
            }
            idx.iter()
                .zip(&c)
                .filter(|(_, &w)| w != 0.0)
                .map(|(&i, &w)| (i.clamp(0, in_len as i64 - 1) as usize, w as f32))
                .collect()
        })
        .collect()
}

/// Whether resampling `axis` is the identity (same length and every output reads its own index).
pub fn axis_is_identity(a: &ResizeAttrs, axis: usize, in_len: usize) -> bool {
    a.out[axis] == in_len
        && axis_taps(a, axis, in_len)
            .iter()
            .enumerate()
            .all(|(o, t)| t.len() == 1 && t[0] == (o, 1.0))
}

pub(crate) fn infer_resize(
    inputs: &[(DType, &[usize])],
    a: &ResizeAttrs,
) -> Result<Vec<(DType, Shape)>, String> {
    arity(inputs, 1, 1)?;
    let x = inputs[0].1;
    if a.out.len() != x.len() || a.scales.len() != x.len() {
        return Err(format!(
            "output shape {:?} / scales {:?} do not match the input rank {}",
            a.out,
            a.scales,
            x.len()
        ));
    }
    if x.contains(&0) {
        return Err("cannot resize an empty tensor".into());
    }
    Ok(vec![(inputs[0].0, a.out.clone())])
}

/// Resamples one axis of a float tensor.
pub fn resample_axis(x: &[f32], shape: &[usize], axis: usize, taps: &Taps) -> Vec<f32> {
    let outer = numel(&shape[..axis]);
    let (n_in, inner) = (shape[axis], numel(&shape[axis + 1..]));
    let mut out = Vec::with_capacity(outer * taps.len() * inner);
    for o in 0..outer {
        for t in taps {
            for i in 0..inner {
                let mut acc = 0.0f32;
                for &(j, w) in t {
                    acc += w * x[(o * n_in + j) * inner + i];
                }
                out.push(acc);
            }
        }
    }
    out
}

pub(crate) fn eval_resize(inputs: &[&Tensor], a: &ResizeAttrs) -> Result<Vec<Tensor>, String> {
    infer_resize(&[(inputs[0].dtype, &inputs[0].shape)], a)?;
    let mut shape = inputs[0].shape.clone();
    let mut v = inputs[0].to_f32_vec();
    for axis in 0..shape.len() {
        if axis_is_identity(a, axis, shape[axis]) {
            continue;
        }
        let taps = axis_taps(a, axis, shape[axis]);
        v = resample_axis(&v, &shape, axis, &taps);
        shape[axis] = a.out[axis];
    }
    Ok(vec![Tensor::f32(shape, v)])
}

/// The dtype and shape of each output of this family's `op` (`ops::infer`).
pub fn infer(op: &Op, inputs: &[(DType, &[usize])]) -> Result<Vec<(DType, Shape)>, String> {
    match op {
        Op::Resize(a) => infer_resize(inputs, a),
        _ => Err(format!("{} is not in the resize family", op.name())),
    }
}

/// Evaluates this family's `op` (`ops::eval`).
pub fn eval(op: &Op, inputs: &[&Tensor]) -> Result<Vec<Tensor>, String> {
    match op {
        Op::Resize(a) => eval_resize(inputs, a),
        _ => Err(format!("{} is not in the resize family", op.name())),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn attrs(mode: ResizeMode, coord: CoordMode, out: usize, scale: f64) -> ResizeAttrs {
        ResizeAttrs {
            out: vec![out],
            scales: vec![scale],
            mode,
            coord,
            cubic_a: -0.75,
            exclude_outside: false,
        }
    }

    #[test]
    fn linear_half_pixel_upsample() {
        // onnx reference: resize [1,2,3,4] x2 linear half_pixel
        let a = attrs(ResizeMode::Linear, CoordMode::HalfPixel, 8, 2.0);
        let x = Tensor::f32(vec![4], vec![1., 2., 3., 4.]);
        let r = eval_resize(&[&x], &a).unwrap()[0].to_f32_vec();
        assert_eq!(r, [1.0, 1.25, 1.75, 2.25, 2.75, 3.25, 3.75, 4.0]);
    }

    #[test]
    fn nearest_asymmetric_floor() {
        let a = attrs(
            ResizeMode::Nearest(NearestMode::Floor),
            CoordMode::Asymmetric,
            6,
            3.0,
        );
        let x = Tensor::f32(vec![2], vec![5., 7.]);
        assert_eq!(
            eval_resize(&[&x], &a).unwrap()[0].to_f32_vec(),
            [5., 5., 5., 7., 7., 7.]
        );
    }
}
