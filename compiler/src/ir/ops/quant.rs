//! Reference semantics of the int8 family: QuantizeLinear / DequantizeLinear as ONNX specifies them (round half
//! to even, saturate), and the integer conv, matrix product, elementwise add/mul, pooling and global average
//! pooling with the requantisation the NPU (and later the int8 CPU kernels) must reproduce bit for bit:
//! `y = clamp(sat(rhe(f32(acc + bias) * scale) + zero_point), lo, hi)` with an exact i32 accumulator over
//! `(x - x_zero_point) * w`. Every formula here is the one `docs/npu-transaction-format.md` states for the
//! emulator; values are carried as `i32` whatever their storage type (u8 or i8).

use crate::ir::ConvAttrs;

/// Round to nearest, ties to even, in f32.
pub fn rhe(v: f32) -> f32 {
    v.round_ties_even()
}

/// Saturates to the range of u8 (`signed == false`) or i8.
pub fn sat(v: f32, signed: bool) -> i32 {
    let (lo, hi) = if signed {
        (-128.0, 127.0)
    } else {
        (0.0, 255.0)
    };
    v.clamp(lo, hi) as i32
}

/// ONNX QuantizeLinear: `sat(rhe(x / scale) + zero_point)`.
pub fn quantize_linear(x: &[f32], scale: f32, zero_point: i32, signed: bool) -> Vec<i32> {
    x.iter()
        .map(|&v| sat(rhe(v / scale) + zero_point as f32, signed))
        .collect()
}

/// ONNX DequantizeLinear: `(q - zero_point) * scale`.
pub fn dequantize_linear(q: &[i32], scale: f32, zero_point: i32) -> Vec<f32> {
    q.iter().map(|&v| (v - zero_point) as f32 * scale).collect()
}

/// Requantises one accumulator.
pub fn requantize(
    acc: i32,
    bias: i32,
    scale: f32,
    zero_point: i32,
    clamp: (i32, i32),
    signed: bool,
) -> i32 {
    let v = acc.wrapping_add(bias);
    sat(rhe(v as f32 * scale) + zero_point as f32, signed).clamp(clamp.0, clamp.1)
}

/// Output requantisation of an integer conv or matrix product.
#[derive(Debug, Clone, PartialEq)]
pub struct Requantize {
    /// Input zero point.
    pub x_zero_point: i32,
    /// i32 bias per output channel (conv) or column (matmul).
    pub bias: Vec<i32>,
    /// Combined scale per output channel / column.
    pub scale: Vec<f32>,
    /// Output zero point.
    pub y_zero_point: i32,
    /// Output clamp (the fused activation).
    pub clamp: (i32, i32),
    /// Output is i8 (else u8).
    pub signed: bool,
}

/// Integer 2-D convolution `x [n,c,h,w] * w [m,c/g,kh,kw]` with requantisation; `a`'s epilogue is ignored
/// (int8 activations are folded into `q.clamp`).
pub fn qconv(
    x: &[i32],
    xs: [usize; 4],
    w: &[i32],
    m: usize,
    a: &ConvAttrs,
    q: &Requantize,
) -> (Vec<i32>, [usize; 4]) {
    let [n, c, h, wd] = xs;
    let [kh, kw] = a.kernel;
    let oh = (h + a.pads[0] + a.pads[2] - (kh - 1) * a.dilations[0] - 1) / a.strides[0] + 1;
    let ow = (wd + a.pads[1] + a.pads[3] - (kw - 1) * a.dilations[1] - 1) / a.strides[1] + 1;
    let (cg, mg) = (c / a.group, m / a.group);
    let mut y = vec![0; n * m * oh * ow];
    for b in 0..n {
        for mo in 0..m {
            let gi = mo / mg;
            for oy in 0..oh {
                for ox in 0..ow {
                    let mut acc: i32 = 0;
                    for ci in 0..cg {
                        for ky in 0..kh {
                            for kx in 0..kw {
                                let iy = (oy * a.strides[0] + ky * a.dilations[0]) as i64
                                    - a.pads[0] as i64;
                                let ix = (ox * a.strides[1] + kx * a.dilations[1]) as i64
                                    - a.pads[1] as i64;
                                if iy < 0 || ix < 0 || iy >= h as i64 || ix >= wd as i64 {
                                    continue;
                                }
                                let xv = x
                                    [((b * c + gi * cg + ci) * h + iy as usize) * wd + ix as usize];
                                let wv = w[((mo * cg + ci) * kh + ky) * kw + kx];
                                acc = acc.wrapping_add((xv - q.x_zero_point).wrapping_mul(wv));
                            }
                        }
                    }
                    y[((b * m + mo) * oh + oy) * ow + ox] = requantize(
                        acc,
                        q.bias[mo],
                        q.scale[mo],
                        q.y_zero_point,
                        q.clamp,
                        q.signed,
                    );
                }
            }
        }
    }
    (y, [n, m, oh, ow])
}

/// Integer matrix product `x [m,k] · w [k,n]` with per-column requantisation.
pub fn qgemm(x: &[i32], w: &[i32], m: usize, k: usize, n: usize, q: &Requantize) -> Vec<i32> {
    let mut y = vec![0; m * n];
    for i in 0..m {
        for j in 0..n {
            let mut acc: i32 = 0;
            for p in 0..k {
                acc = acc.wrapping_add((x[i * k + p] - q.x_zero_point).wrapping_mul(w[p * n + j]));
            }
            y[i * n + j] = requantize(
                acc,
                q.bias[j],
                q.scale[j],
                q.y_zero_point,
                q.clamp,
                q.signed,
            );
        }
    }
    y
}

/// QLinearAdd (`mul == false`) / QLinearMul of same-shape operands (each `(values, scale, zero_point)`), output
/// scale and zero point, clamp.
pub fn qbinary(
    a: (&[i32], f32, i32),
    b: (&[i32], f32, i32),
    mul: bool,
    y: (f32, i32),
    clamp: (i32, i32),
    signed: bool,
) -> Vec<i32> {
    a.0.iter()
        .zip(b.0)
        .map(|(&av, &bv)| {
            let ra = a.1 * (av - a.2) as f32;
            let rb = b.1 * (bv - b.2) as f32;
            let r = if mul { ra * rb } else { ra + rb };
            sat(rhe(r / y.0) + y.1 as f32, signed).clamp(clamp.0, clamp.1)
        })
        .collect()
}

/// Integer global average pool over `[planes][size]`: `rhe(f32(Σ) / f32(size))`.
pub fn qgap(x: &[i32], planes: usize, size: usize) -> Vec<i32> {
    (0..planes)
        .map(|p| {
            let s: i32 = x[p * size..(p + 1) * size].iter().sum();
            rhe(s as f32 / size as f32) as i32
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quantize_rounds_half_to_even_and_saturates() {
        assert_eq!(
            quantize_linear(&[0.5, 1.5, 2.5, -0.5, 300.0, -3.0], 1.0, 0, false),
            vec![0, 2, 2, 0, 255, 0]
        );
        assert_eq!(
            quantize_linear(&[-200.0, 2.5, -2.5], 1.0, 0, true),
            vec![-128, 2, -2]
        );
        assert_eq!(quantize_linear(&[1.0], 0.5, 10, false), vec![12]);
        assert_eq!(dequantize_linear(&[12, 10], 0.5, 10), vec![1.0, 0.0]);
    }

    #[test]
    fn requantize_matches_the_formula() {
        assert_eq!(requantize(100, 5, 0.1, 3, (0, 255), false), 13); // rhe(10.5) = 10, + 3
        assert_eq!(requantize(-1000, 0, 1.0, 0, (-128, 127), true), -128);
        assert_eq!(requantize(50, 0, 1.0, 0, (0, 20), false), 20);
    }

    #[test]
    fn gap_and_binary() {
        assert_eq!(qgap(&[1, 2, 3, 4, 5, 7], 2, 3), vec![2, 5]);
        let y = qbinary(
            (&[10, 20], 0.5, 10),
            (&[4, 4], 1.0, 0),
            false,
            (0.25, 1),
            (0, 255),
            false,
        );
        assert_eq!(y, vec![17, 37]);
    }
}
