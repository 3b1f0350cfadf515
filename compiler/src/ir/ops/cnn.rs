//! Convolutional ops on NCHW tensors: 2-D Conv (pads, strides, dilations, groups, bias, epilogue), max and
//! average pooling (ceil mode, count_include_pad) and global average pooling.

use super::args::{arity, f32s, want_f32};
use super::linalg::apply_epilogue;
use crate::ir::attrs::{ConvAttrs, PoolAttrs, PoolKind};
use crate::ir::op::Op;
use crate::ir::types::{DType, Shape, Tensor};

/// Output extent of a sliding window along one axis.
pub fn window_out(
    input: usize,
    k: usize,
    s: usize,
    d: usize,
    p0: usize,
    p1: usize,
    ceil: bool,
) -> Result<usize, String> {
    let eff = (k - 1) * d + 1;
    let padded = input + p0 + p1;
    if padded < eff {
        return Err(format!("window {eff} larger than padded input {padded}"));
    }
    let span = padded - eff;
    let mut out = if ceil {
        span.div_ceil(s) + 1
    } else {
        span / s + 1
    };
    // A window that would start entirely in the end padding is dropped (ONNX / PyTorch rule).
    if ceil && (out - 1) * s >= input + p0 {
        out -= 1;
    }
    Ok(out)
}

/// Output (H, W) of a 2-D sliding window over spatial dims `hw` with pads [top, left, bottom, right].
pub fn window_out_2d(
    hw: &[usize],
    k: [usize; 2],
    s: [usize; 2],
    d: [usize; 2],
    p: [usize; 4],
    ceil: bool,
) -> Result<[usize; 2], String> {
    Ok([
        window_out(hw[0], k[0], s[0], d[0], p[0], p[2], ceil)?,
        window_out(hw[1], k[1], s[1], d[1], p[1], p[3], ceil)?,
    ])
}

pub(crate) fn infer_conv(
    inputs: &[(DType, &[usize])],
    a: &ConvAttrs,
) -> Result<Vec<(DType, Shape)>, String> {
    let want = 2 + a.has_bias as usize + a.epilogue.residual as usize;
    arity(inputs, want, want)?;
    if a.epilogue.bias {
        return Err("a bias epilogue on Conv (B is its bias)".into());
    }
    super::linalg::unscaled(&a.epilogue)?;
    want_f32(inputs[0].0, "X")?;
    want_f32(inputs[1].0, "W")?;
    let (x, w) = (inputs[0].1, inputs[1].1);
    if x.len() != 4 || w.len() != 4 {
        return Err(format!(
            "only 2-D convolution is supported (X {x:?}, W {w:?})"
        ));
    }
    if a.group == 0 || x[1] % a.group != 0 || w[0] % a.group != 0 || w[1] * a.group != x[1] {
        return Err(format!(
            "channels do not match groups: X {x:?}, W {w:?}, group {}",
            a.group
        ));
    }
    if [w[2], w[3]] != a.kernel {
        return Err(format!("kernel_shape {:?} differs from W {w:?}", a.kernel));
    }
    if a.has_bias && inputs[2].1 != [w[0]] {
        return Err(format!("bias shape {:?} is not [{}]", inputs[2].1, w[0]));
    }
    let [oh, ow] = window_out_2d(&x[2..], a.kernel, a.strides, a.dilations, a.pads, false)?;
    let out = vec![x[0], w[0], oh, ow];
    if a.epilogue.residual && inputs[want - 1].1 != out.as_slice() {
        return Err(format!(
            "residual shape {:?} differs from output {out:?}",
            inputs[want - 1].1
        ));
    }
    Ok(vec![(DType::F32, out)])
}

pub(crate) fn eval_conv(inputs: &[&Tensor], a: &ConvAttrs) -> Result<Vec<Tensor>, String> {
    let shapes = super::args::types_of(inputs);
    let out_shape = infer_conv(&shapes, a)?.remove(0).1;
    let (xs, ws) = (&inputs[0].shape, &inputs[1].shape);
    let (x, w) = (f32s(inputs[0], "X")?, f32s(inputs[1], "W")?);
    let bias = if a.has_bias {
        Some(f32s(inputs[2], "B")?)
    } else {
        None
    };
    let (n, c, h, wd) = (xs[0], xs[1], xs[2], xs[3]);
    let (m, cg, kh, kw) = (ws[0], ws[1], ws[2], ws[3]);
    let (oh, ow) = (out_shape[2], out_shape[3]);
    let mg = m / a.group;
    let mut out = vec![0.0f32; n * m * oh * ow];
    for b in 0..n {
        for co in 0..m {
            let g = co / mg;
            for y in 0..oh {
                for xo in 0..ow {
                    let mut acc = 0.0f32;
                    for ci in 0..cg {
                        let cin = g * cg + ci;
                        for ky in 0..kh {
                            let iy = (y * a.strides[0] + ky * a.dilations[0]) as isize
                                - a.pads[0] as isize;
                            if iy < 0 || iy >= h as isize {
                                continue;
                            }
                            for kx in 0..kw {
                                let ix = (xo * a.strides[1] + kx * a.dilations[1]) as isize
                                    - a.pads[1] as isize;
                                if ix < 0 || ix >= wd as isize {
                                    continue;
                                }
                                let xv = x[((b * c + cin) * h + iy as usize) * wd + ix as usize];
                                acc += xv * w[((co * cg + ci) * kh + ky) * kw + kx];
                            }
                        }
                    }
                    out[((b * m + co) * oh + y) * ow + xo] = acc + bias.map_or(0.0, |bv| bv[co]);
                }
            }
        }
    }
    let res = if a.epilogue.residual {
        Some(f32s(inputs[inputs.len() - 1], "residual")?)
    } else {
        None
    };
    apply_epilogue(&mut out, &a.epilogue, res);
    Ok(vec![Tensor::f32(out_shape, out)])
}

/// Pooling's output type and shape. Max pooling also takes u8 / i8 (the integer max, which commutes with a
/// quantisation's monotone map: `fold_qdq` runs a DequantizeLinear → MaxPool → QuantizeLinear of equal
/// parameters on the integers).
pub(crate) fn infer_pool(
    kind: PoolKind,
    inputs: &[(DType, &[usize])],
    a: &PoolAttrs,
) -> Result<Vec<(DType, Shape)>, String> {
    arity(inputs, 1, 1)?;
    let dt = inputs[0].0;
    if !(kind == PoolKind::Max && matches!(dt, DType::U8 | DType::I8)) {
        want_f32(dt, "X")?;
    }
    let x = inputs[0].1;
    if x.len() != 4 {
        return Err(format!("only 2-D pooling is supported (X {x:?})"));
    }
    let [oh, ow] = window_out_2d(
        &x[2..],
        a.kernel,
        a.strides,
        a.dilations,
        a.pads,
        a.ceil_mode,
    )?;
    Ok(vec![(dt, vec![x[0], x[1], oh, ow])])
}

/// The window of output position `o` along one axis of `input` elements (kernel `k`, stride `s`, dilation `d`,
/// pads `p0` before and `p1` after): the input positions its taps read, in order, and the divisor
/// count_include_pad uses — the taps inside the padded extent, never the ceil_mode overhang past it.
pub fn pool_taps(
    o: usize,
    input: usize,
    [k, s, d]: [usize; 3],
    [p0, p1]: [usize; 2],
) -> (Vec<usize>, usize) {
    let pos = |t: usize| (o * s + t * d) as isize - p0 as isize;
    let inside = (0..k)
        .map(pos)
        .filter(|p| (0..input as isize).contains(p))
        .map(|p| p as usize)
        .collect();
    let padded = (0..k).filter(|&t| pos(t) < (input + p1) as isize).count();
    (inside, padded)
}

pub(crate) fn eval_pool(
    kind: PoolKind,
    inputs: &[&Tensor],
    a: &PoolAttrs,
) -> Result<Vec<Tensor>, String> {
    let out_shape = infer_pool(kind, &[(inputs[0].dtype, &inputs[0].shape)], a)?
        .remove(0)
        .1;
    if inputs[0].dtype != DType::F32 {
        return Ok(vec![eval_int_max(inputs[0], a, &out_shape)]);
    }
    let x = f32s(inputs[0], "X")?;
    let (h, w) = (inputs[0].shape[2], inputs[0].shape[3]);
    let (oh, ow) = (out_shape[2], out_shape[3]);
    let planes = out_shape[0] * out_shape[1];
    let mut out = Vec::with_capacity(planes * oh * ow);
    for p in 0..planes {
        let plane = &x[p * h * w..(p + 1) * h * w];
        for y in 0..oh {
            for xo in 0..ow {
                let v = match kind {
                    PoolKind::Max => {
                        let mut m = f32::NEG_INFINITY;
                        for ky in 0..a.kernel[0] {
                            let iy = (y * a.strides[0] + ky * a.dilations[0]) as isize
                                - a.pads[0] as isize;
                            for kx in 0..a.kernel[1] {
                                let ix = (xo * a.strides[1] + kx * a.dilations[1]) as isize
                                    - a.pads[1] as isize;
                                if iy >= 0 && (iy as usize) < h && ix >= 0 && (ix as usize) < w {
                                    m = m.max(plane[iy as usize * w + ix as usize]);
                                }
                            }
                        }
                        m
                    }
                    PoolKind::Average => {
                        let axis = |o: usize, i: usize, size: usize| {
                            let ksd = [a.kernel[i], a.strides[i], a.dilations[i]];
                            pool_taps(o, size, ksd, [a.pads[i], a.pads[i + 2]])
                        };
                        let ((ys, py), (xs, px)) = (axis(y, 0, h), axis(xo, 1, w));
                        let mut s = 0.0f32;
                        for &iy in &ys {
                            for &ix in &xs {
                                s += plane[iy * w + ix];
                            }
                        }
                        let count = if a.count_include_pad {
                            py * px
                        } else {
                            ys.len() * xs.len()
                        };
                        s / count.max(1) as f32
                    }
                };
                out.push(v);
            }
        }
    }
    Ok(vec![Tensor::f32(out_shape, out)])
}

/// Integer max pooling: the largest input under each window (padding taps skipped; the dtype's minimum when a
/// window holds no input).
fn eval_int_max(x: &Tensor, a: &PoolAttrs, out_shape: &[usize]) -> Tensor {
    let v = x.to_i64_vec();
    let (h, w) = (x.shape[2], x.shape[3]);
    let (oh, ow) = (out_shape[2], out_shape[3]);
    let lowest = if x.dtype == DType::I8 { -128 } else { 0 };
    let mut out = Vec::with_capacity(out_shape.iter().product());
    for p in 0..out_shape[0] * out_shape[1] {
        let plane = &v[p * h * w..(p + 1) * h * w];
        for y in 0..oh {
            for xo in 0..ow {
                let mut m = lowest;
                for ky in 0..a.kernel[0] {
                    let iy = (y * a.strides[0] + ky * a.dilations[0]) as isize - a.pads[0] as isize;
                    for kx in 0..a.kernel[1] {
                        let ix =
                            (xo * a.strides[1] + kx * a.dilations[1]) as isize - a.pads[1] as isize;
                        if iy >= 0 && (iy as usize) < h && ix >= 0 && (ix as usize) < w {
                            m = m.max(plane[iy as usize * w + ix as usize]);
                        }
                    }
                }
                out.push(m);
            }
        }
    }
    Tensor::ints(x.dtype, out_shape.to_vec(), out)
}

pub(crate) fn infer_global_pool(
    inputs: &[(DType, &[usize])],
) -> Result<Vec<(DType, Shape)>, String> {
    arity(inputs, 1, 1)?;
    want_f32(inputs[0].0, "X")?;
    let x = inputs[0].1;
    if x.len() < 3 {
        return Err(format!("GlobalAveragePool needs rank >= 3, got {x:?}"));
    }
    let mut out = x[..2].to_vec();
    out.extend(std::iter::repeat_n(1, x.len() - 2));
    Ok(vec![(DType::F32, out)])
}

pub(crate) fn eval_global_pool(inputs: &[&Tensor]) -> Result<Vec<Tensor>, String> {
    let out_shape = infer_global_pool(&[(inputs[0].dtype, &inputs[0].shape)])?
        .remove(0)
        .1;
    let x = f32s(inputs[0], "X")?;
    let planes = out_shape[0] * out_shape[1];
    let size = x.len() / planes.max(1);
    let out = (0..planes)
        .map(|p| x[p * size..(p + 1) * size].iter().sum::<f32>() / size as f32)
        .collect();
    Ok(vec![Tensor::f32(out_shape, out)])
}

/// The dtype and shape of each output of this family's `op` (`ops::infer`).
pub fn infer(op: &Op, inputs: &[(DType, &[usize])]) -> Result<Vec<(DType, Shape)>, String> {
    match op {
        Op::Conv(a) => infer_conv(inputs, a),
        Op::Pool(k, a) => infer_pool(*k, inputs, a),
        Op::GlobalAveragePool => infer_global_pool(inputs),
        _ => Err(format!("{} is not in the cnn family", op.name())),
    }
}

/// Evaluates this family's `op` (`ops::eval`).
pub fn eval(op: &Op, inputs: &[&Tensor]) -> Result<Vec<Tensor>, String> {
    match op {
        Op::Conv(a) => eval_conv(inputs, a),
        Op::Pool(k, a) => eval_pool(*k, inputs, a),
        Op::GlobalAveragePool => eval_global_pool(inputs),
        _ => Err(format!("{} is not in the cnn family", op.name())),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn window_sizes() {
        assert_eq!(window_out(224, 7, 2, 1, 3, 3, false).unwrap(), 112);
        assert_eq!(window_out(112, 3, 2, 1, 1, 1, false).unwrap(), 56);
        assert_eq!(window_out(5, 2, 2, 1, 0, 0, true).unwrap(), 3);
        assert_eq!(window_out(5, 2, 2, 1, 0, 0, false).unwrap(), 2);
    }

    #[test]
    fn pool_taps_count_padding() {
        // input 4, k 3, s 1, pads 1/1: the first window covers [-1, 2) -> reads 0 and 1, divisor 3.
        assert_eq!(pool_taps(0, 4, [3, 1, 1], [1, 1]), (vec![0, 1], 3));
        assert_eq!(pool_taps(3, 4, [3, 1, 1], [1, 1]), (vec![2, 3], 3));
        // Dilation 2, pads 2/2 over 5: taps at -2, 0, 2 -> reads 0 and 2, divisor 3; a ceil_mode window
        // starting at 4 reaches 8 past the padded end 7: divisor 2.
        assert_eq!(pool_taps(0, 5, [3, 1, 2], [2, 2]), (vec![0, 2], 3));
        assert_eq!(pool_taps(3, 5, [3, 2, 2], [2, 2]), (vec![4], 2));
    }
}
