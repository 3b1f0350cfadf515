//! ConvTranspose (2-D): shape rule, output geometry shared by the importer (`output_shape`, `auto_pad`) and
//! codegen, and the reference evaluation in scatter form — every input pixel adds `x · W` into the output
//! window it maps to — which `codegen/ops/conv.rs`'s col2im kernel follows.

use super::args::{arity, f32s, want_f32};
use crate::ir::attrs::ConvTransposeAttrs;
use crate::ir::op::Op;
use crate::ir::types::{DType, Shape, Tensor};

/// Output length of one spatial axis: s·(in − 1) + output_padding + (k − 1)·d + 1 − pad_begin − pad_end.
pub fn deconv_out(
    input: usize,
    k: usize,
    s: usize,
    d: usize,
    out_pad: usize,
    pb: usize,
    pe: usize,
) -> Result<usize, String> {
    let full = s * (input.max(1) - 1) + out_pad + (k - 1) * d + 1;
    full.checked_sub(pb + pe)
        .filter(|&o| o > 0)
        .ok_or_else(|| format!("pads {pb}+{pe} leave no output of the {full} positions"))
}

/// Pads [begin, end] and extra output padding that give `out` positions (the spec's total_padding rule:
/// SAME_UPPER puts the odd pad at the end, SAME_LOWER and an explicit `output_shape` at the beginning; an
/// output longer than the kernel covers is padded at the end, as `output_padding` does).
pub fn deconv_pads(
    input: usize,
    k: usize,
    s: usize,
    d: usize,
    out_pad: usize,
    out: usize,
    upper: bool,
) -> ([usize; 2], usize) {
    let full = s * (input.max(1) - 1) + out_pad + (k - 1) * d + 1;
    if out >= full {
        return ([0, 0], out_pad + out - full);
    }
    let t = full - out;
    (
        if upper {
            [t / 2, t - t / 2]
        } else {
            [t - t / 2, t / 2]
        },
        out_pad,
    )
}

pub(crate) fn infer_deconv(
    inputs: &[(DType, &[usize])],
    a: &ConvTransposeAttrs,
) -> Result<Vec<(DType, Shape)>, String> {
    let want = 2 + a.has_bias as usize;
    arity(inputs, want, want)?;
    want_f32(inputs[0].0, "X")?;
    want_f32(inputs[1].0, "W")?;
    let (x, w) = (inputs[0].1, inputs[1].1);
    if x.len() != 4 || w.len() != 4 {
        return Err(format!(
            "only 2-D ConvTranspose is supported (X {x:?}, W {w:?})"
        ));
    }
    if a.group == 0 || w[0] != x[1] || x[1] % a.group != 0 {
        return Err(format!(
            "channels do not match groups: X {x:?}, W {w:?}, group {}",
            a.group
        ));
    }
    if [w[2], w[3]] != a.kernel {
        return Err(format!("kernel_shape {:?} differs from W {w:?}", a.kernel));
    }
    let m = w[1] * a.group;
    if a.has_bias && inputs[2].1 != [m] {
        return Err(format!("bias shape {:?} is not [{m}]", inputs[2].1));
    }
    let mut out = vec![x[0], m];
    for i in 0..2 {
        out.push(deconv_out(
            x[2 + i],
            a.kernel[i],
            a.strides[i],
            a.dilations[i],
            a.output_padding[i],
            a.pads[i],
            a.pads[i + 2],
        )?);
    }
    Ok(vec![(DType::F32, out)])
}

pub(crate) fn eval_deconv(
    inputs: &[&Tensor],
    a: &ConvTransposeAttrs,
) -> Result<Vec<Tensor>, String> {
    let shapes = super::args::types_of(inputs);
    let (_, os) = infer_deconv(&shapes, a)?.remove(0);
    let x = f32s(inputs[0], "X")?;
    let w = f32s(inputs[1], "W")?;
    let xs = &inputs[0].shape;
    let (n, c, h, wd) = (xs[0], xs[1], xs[2], xs[3]);
    let (m, oh, ow) = (os[1], os[2], os[3]);
    let (cg, mg) = (c / a.group, m / a.group);
    let [kh, kw] = a.kernel;
    let mut out = vec![0.0f32; n * m * oh * ow];
    if a.has_bias {
        let b = f32s(inputs[2], "B")?;
        for (i, v) in out.iter_mut().enumerate() {
            *v = b[(i / (oh * ow)) % m];
        }
    }
    for b in 0..n {
        for ci in 0..c {
            let g = ci / cg;
            for iy in 0..h {
                for ix in 0..wd {
                    let xv = x[((b * c + ci) * h + iy) * wd + ix];
                    for mo in 0..mg {
                        let mm = g * mg + mo;
                        for ky in 0..kh {
                            let oy =
                                (iy * a.strides[0] + ky * a.dilations[0]) as i64 - a.pads[0] as i64;
                            if oy < 0 || oy >= oh as i64 {
                                continue;
                            }
                            for kx in 0..kw {
                                let ox = (ix * a.strides[1] + kx * a.dilations[1]) as i64
                                    - a.pads[1] as i64;
                                if ox < 0 || ox >= ow as i64 {
                                    continue;
                                }
                                let wv = w[((ci * mg + mo) * kh + ky) * kw + kx];
                                out[((b * m + mm) * oh + oy as usize) * ow + ox as usize] +=
                                    xv * wv;
                            }
                        }
                    }
                }
            }
        }
    }
    Ok(vec![Tensor::f32(os, out)])
}

/// The dtype and shape of each output of this family's `op` (`ops::infer`).
pub fn infer(op: &Op, inputs: &[(DType, &[usize])]) -> Result<Vec<(DType, Shape)>, String> {
    match op {
        Op::ConvTranspose(a) => infer_deconv(inputs, a),
        _ => Err(format!("{} is not in the deconv family", op.name())),
    }
}

/// Evaluates this family's `op` (`ops::eval`).
pub fn eval(op: &Op, inputs: &[&Tensor]) -> Result<Vec<Tensor>, String> {
    match op {
        Op::ConvTranspose(a) => eval_deconv(inputs, a),
        _ => Err(format!("{} is not in the deconv family", op.name())),
    }
}
