//! Reference semantics of the int8 family: QuantizeLinear / DequantizeLinear as ONNX specifies them (round half
//! to even, saturate), and the integer conv, matrix product, elementwise add/mul, pooling and global average
//! pooling with the requantisation the NPU (and later the int8 CPU kernels) must reproduce bit for bit:
//! `y = clamp(sat(rhe(f32(acc + bias) * scale) + zero_point), lo, hi)` with an exact i32 accumulator over
//! `(x - x_zero_point) * w`. Every formula here is the one `docs/npu-transaction-format.md` states for the
//! emulator; values are carried as `i32` whatever their storage type (u8 or i8).

use super::args::{arity, types_of};
use crate::ir::op::Op;
use crate::ir::{ConvAttrs, DType, IntProduct, QAddParams, QGapParams, QuantParams, Shape, Tensor};

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

/// ONNX QuantizeLinear of one value: `sat(rhe(x / scale) + zero_point)`; NaN maps to the zero point.
pub fn quantize_one(v: f32, scale: f32, zero_point: i32, signed: bool) -> i32 {
    quantize_quotient(v / scale, zero_point, signed)
}

/// QuantizeLinear after its division: `sat(rhe(q) + zero_point)`, NaN to the zero point.
fn quantize_quotient(q: f32, zero_point: i32, signed: bool) -> i32 {
    let r = rhe(q);
    if r.is_nan() {
        return zero_point;
    }
    sat(r + zero_point as f32, signed)
}

/// ONNX QuantizeLinear: `sat(rhe(x / scale) + zero_point)`.
pub fn quantize_linear(x: &[f32], scale: f32, zero_point: i32, signed: bool) -> Vec<i32> {
    x.iter()
        .map(|&v| quantize_one(v, scale, zero_point, signed))
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
    let [n, _, h, wd] = xs;
    let [kh, kw] = a.kernel;
    let oh = (h + a.pads[0] + a.pads[2] - (kh - 1) * a.dilations[0] - 1) / a.strides[0] + 1;
    let ow = (wd + a.pads[1] + a.pads[3] - (kw - 1) * a.dilations[1] - 1) / a.strides[1] + 1;
    let acc = qconv_acc(x, xs, w, m, a, q.x_zero_point);
    let plane = oh * ow;
    let y = acc
        .into_iter()
        .enumerate()
        .map(|(i, v)| {
            let mo = (i / plane) % m;
            requantize(
                v,
                q.bias[mo],
                q.scale[mo],
                q.y_zero_point,
                q.clamp,
                q.signed,
            )
        })
        .collect();
    (y, [n, m, oh, ow])
}

/// The exact i32 sums `Σ (x - x_zero_point) * w` of an integer 2-D convolution (padding contributes nothing),
/// laid out [n, m, oh, ow].
pub fn qconv_acc(
    x: &[i32],
    xs: [usize; 4],
    w: &[i32],
    m: usize,
    a: &ConvAttrs,
    x_zero_point: i32,
) -> Vec<i32> {
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
                                acc = acc.wrapping_add((xv - x_zero_point).wrapping_mul(wv));
                            }
                        }
                    }
                    y[((b * m + mo) * oh + oy) * ow + ox] = acc;
                }
            }
        }
    }
    y
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

/// The (outer, slices, inner) split of `shape` for per-slice parameters along `axis` (per tensor: one slice).
pub fn slices(shape: &[usize], q: &QuantParams) -> (usize, usize, usize) {
    match q.axis {
        Some(a) => (
            shape[..a].iter().product(),
            shape[a],
            shape[a + 1..].iter().product(),
        ),
        None => (1, 1, shape.iter().product()),
    }
}

fn check_params(shape: &[usize], q: &QuantParams) -> Result<(), String> {
    let want = match q.axis {
        Some(a) if a >= shape.len() => {
            return Err(format!("axis {a} out of range for rank {}", shape.len()))
        }
        Some(a) => shape[a],
        None => 1,
    };
    if q.scale.len() != want || q.zero_point.len() != want {
        return Err(format!(
            "{} scales and {} zero points for {want} slices",
            q.scale.len(),
            q.zero_point.len()
        ));
    }
    if let Some(s) = q.scale.iter().find(|s| !(s.is_finite() && **s > 0.0)) {
        return Err(format!("scale {s} is not finite and positive"));
    }
    let (lo, hi) =
        range_of(q.dtype).ok_or_else(|| format!("{} is not a quantised type", q.dtype))?;
    if let Some(z) = q.zero_point.iter().find(|z| **z < lo || **z > hi) {
        return Err(format!(
            "zero point {z} is outside the range of {}",
            q.dtype
        ));
    }
    Ok(())
}

/// The value range of a quantised dtype.
pub fn range_of(dt: DType) -> Option<(i32, i32)> {
    match dt {
        DType::U8 => Some((0, 255)),
        DType::I8 => Some((-128, 127)),
        DType::I32 => Some((i32::MIN, i32::MAX)),
        _ => None,
    }
}

pub(crate) fn infer_quantize(
    inputs: &[(DType, &[usize])],
    q: &QuantParams,
    dequantize: bool,
) -> Result<Vec<(DType, Shape)>, String> {
    arity(inputs, 1, 1)?;
    let (dt, shape) = inputs[0];
    check_params(shape, q)?;
    let (want_in, out) = if dequantize {
        (q.dtype, DType::F32)
    } else {
        if q.dtype == DType::I32 {
            return Err("quantising to i32 is not supported".into());
        }
        (DType::F32, q.dtype)
    };
    if dt != want_in {
        return Err(format!("input must be {want_in}, got {dt}"));
    }
    Ok(vec![(out, shape.to_vec())])
}

fn int_tensor(dtype: DType, shape: Shape, v: Vec<i32>) -> Tensor {
    Tensor::ints(dtype, shape, v.into_iter().map(i64::from).collect())
}

fn ints(t: &Tensor) -> Vec<i32> {
    t.to_i64_vec().into_iter().map(|v| v as i32).collect()
}

pub(crate) fn eval_quantize(inputs: &[&Tensor], q: &QuantParams) -> Result<Vec<Tensor>, String> {
    let (dt, shape) = infer_quantize(&types_of(inputs), q, false)?.remove(0);
    let x = super::args::f32s(inputs[0], "x")?;
    let (_, n, inner) = slices(&shape, q);
    let signed = dt == DType::I8;
    let y = x
        .iter()
        .enumerate()
        .map(|(i, &v)| {
            let c = (i / inner) % n;
            quantize_one(v, q.scale[c], q.zero_point[c], signed)
        })
        .collect();
    Ok(vec![int_tensor(dt, shape, y)])
}

pub(crate) fn eval_dequantize(inputs: &[&Tensor], q: &QuantParams) -> Result<Vec<Tensor>, String> {
    let shape = infer_quantize(&types_of(inputs), q, true)?.remove(0).1;
    let (_, n, inner) = slices(&shape, q);
    let y = ints(inputs[0])
        .iter()
        .enumerate()
        .map(|(i, &v)| {
            let c = (i / inner) % n;
            (v.wrapping_sub(q.zero_point[c])) as f32 * q.scale[c]
        })
        .collect();
    Ok(vec![Tensor::f32(shape, y)])
}

fn check_product(x: DType, w: DType, p: &IntProduct, channels: usize) -> Result<(), String> {
    if !matches!(x, DType::U8 | DType::I8) {
        return Err(format!("X must be u8 or i8, got {x}"));
    }
    if !matches!(w, DType::I8 | DType::I32) {
        return Err(format!(
            "W must be i8 (or i32 wide weights in [-255, 255]), got {w}"
        ));
    }
    let (lo, hi) = range_of(x).unwrap_or((0, 0));
    if p.x_zero_point < lo || p.x_zero_point > hi {
        return Err(format!("x zero point {} is outside {x}", p.x_zero_point));
    }
    if p.bias.len() != channels {
        return Err(format!(
            "{} biases for {channels} output channels",
            p.bias.len()
        ));
    }
    if let Some(r) = &p.requant {
        let (lo, hi) = range_of(r.dtype)
            .filter(|_| r.dtype != DType::I32)
            .ok_or_else(|| format!("requantised output must be u8 or i8, got {}", r.dtype))?;
        if r.scale.len() != channels {
            return Err(format!(
                "{} scales for {channels} output channels",
                r.scale.len()
            ));
        }
        if let Some(s) = r.scale.iter().find(|s| !(s.is_finite() && **s > 0.0)) {
            return Err(format!(
                "requantisation scale {s} is not finite and positive"
            ));
        }
        if r.zero_point < lo
            || r.zero_point > hi
            || r.clamp.0 > r.clamp.1
            || r.clamp.0 < lo
            || r.clamp.1 > hi
        {
            return Err(format!(
                "output zero point {} / clamp {:?} outside {}",
                r.zero_point, r.clamp, r.dtype
            ));
        }
    }
    Ok(())
}

pub(crate) fn infer_qconv(
    inputs: &[(DType, &[usize])],
    a: &ConvAttrs,
    p: &IntProduct,
) -> Result<Vec<(DType, Shape)>, String> {
    arity(inputs, 2, 2)?;
    let plain = ConvAttrs {
        has_bias: false,
        epilogue: Default::default(),
        ..a.clone()
    };
    let f = [(DType::F32, inputs[0].1), (DType::F32, inputs[1].1)];
    let shape = super::cnn::infer_conv(&f, &plain)?.remove(0).1;
    check_product(inputs[0].0, inputs[1].0, p, shape[1])?;
    Ok(vec![(p.out_dtype(), shape)])
}

fn finish(acc: Vec<i32>, per: impl Fn(usize) -> usize, p: &IntProduct) -> Vec<i32> {
    acc.into_iter()
        .enumerate()
        .map(|(i, a)| {
            let c = per(i);
            match &p.requant {
                Some(r) => requantize(
                    a,
                    p.bias[c],
                    r.scale[c],
                    r.zero_point,
                    r.clamp,
                    r.dtype == DType::I8,
                ),
                None => a.wrapping_add(p.bias[c]),
            }
        })
        .collect()
}

pub(crate) fn eval_qconv(
    inputs: &[&Tensor],
    a: &ConvAttrs,
    p: &IntProduct,
) -> Result<Vec<Tensor>, String> {
    let (dt, shape) = infer_qconv(&types_of(inputs), a, p)?.remove(0);
    let xs = &inputs[0].shape;
    let m = inputs[1].shape[0];
    let acc = qconv_acc(
        &ints(inputs[0]),
        [xs[0], xs[1], xs[2], xs[3]],
        &ints(inputs[1]),
        m,
        a,
        p.x_zero_point,
    );
    let plane = shape[2] * shape[3];
    let y = finish(acc, |i| (i / plane) % m, p);
    Ok(vec![int_tensor(dt, shape, y)])
}

pub(crate) fn infer_qmatmul(
    inputs: &[(DType, &[usize])],
    p: &IntProduct,
) -> Result<Vec<(DType, Shape)>, String> {
    arity(inputs, 2, 2)?;
    let (x, w) = (inputs[0].1, inputs[1].1);
    if x.is_empty() || w.len() != 2 || x[x.len() - 1] != w[0] {
        return Err(format!("X {x:?} and W {w:?} do not form [.., K] x [K, N]"));
    }
    check_product(inputs[0].0, inputs[1].0, p, w[1])?;
    let mut out = x.to_vec();
    *out.last_mut().expect("non-empty") = w[1];
    Ok(vec![(p.out_dtype(), out)])
}

pub(crate) fn eval_qmatmul(inputs: &[&Tensor], p: &IntProduct) -> Result<Vec<Tensor>, String> {
    let (dt, shape) = infer_qmatmul(&types_of(inputs), p)?.remove(0);
    let (k, n) = (inputs[1].shape[0], inputs[1].shape[1]);
    let x = ints(inputs[0]);
    let w = ints(inputs[1]);
    let rows = x.len() / k.max(1);
    let mut acc = vec![0i32; rows * n];
    for i in 0..rows {
        for j in 0..n {
            let mut s: i32 = 0;
            for q in 0..k {
                s = s.wrapping_add((x[i * k + q] - p.x_zero_point).wrapping_mul(w[q * n + j]));
            }
            acc[i * n + j] = s;
        }
    }
    let y = finish(acc, |i| i % n, p);
    Ok(vec![int_tensor(dt, shape, y)])
}

/// One element of a quantised add (the f32 chain DequantizeLinear, Add, QuantizeLinear, in that order).
pub fn qadd_one(a: i32, b: i32, p: &QAddParams) -> i32 {
    qadd_by(a, b, p, |x| x / p.y.0)
}

/// [`qadd_one`] with the division by the output scale given as `quotient`.
fn qadd_by(a: i32, b: i32, p: &QAddParams, quotient: impl Fn(f32) -> f32) -> i32 {
    let (da, db) = ((a - p.a.1) as f32 * p.a.0, (b - p.b.1) as f32 * p.b.0);
    let x = if p.mul { da * db } else { da + db };
    quantize_quotient(quotient(x), p.y.1, p.dtype == DType::I8).clamp(p.clamp.0, p.clamp.1)
}

/// `1 / sy` (f32) where multiplying by it instead of dividing by `sy` gives [`qadd_one`]'s result for every
/// pair of 8-bit operands (u8 or i8, `a` and `b` in -128..=255): a kernel may then multiply, and its results
/// stay bit-identical to the reference. Checked exhaustively (147 456 pairs); `None` where one pair differs.
pub fn qadd_reciprocal(p: &QAddParams) -> Option<f32> {
    let r = 1.0 / p.y.0;
    if !r.is_finite() || r == 0.0 {
        return None;
    }
    let same = |a, b| qadd_by(a, b, p, |x| x * r) == qadd_one(a, b, p);
    let all = (-128..=255).all(|a| (-128..=255).all(|b| same(a, b)));
    all.then_some(r)
}

pub(crate) fn infer_qadd(
    inputs: &[(DType, &[usize])],
    p: &QAddParams,
) -> Result<Vec<(DType, Shape)>, String> {
    arity(inputs, 2, 2)?;
    for (i, (dt, _)) in inputs.iter().enumerate() {
        if !matches!(dt, DType::U8 | DType::I8) {
            return Err(format!("input {i} must be u8 or i8, got {dt}"));
        }
    }
    if inputs[0].1 != inputs[1].1 {
        return Err(format!(
            "shapes {:?} and {:?} differ (no broadcasting)",
            inputs[0].1, inputs[1].1
        ));
    }
    let (lo, hi) = range_of(p.dtype)
        .filter(|_| p.dtype != DType::I32)
        .ok_or_else(|| format!("output must be u8 or i8, got {}", p.dtype))?;
    let finite = |s: f32| s.is_finite() && s > 0.0;
    if !(finite(p.a.0) && finite(p.b.0) && finite(p.y.0)) || p.clamp.0 < lo || p.clamp.1 > hi {
        return Err(format!("bad quantisation parameters {p:?}"));
    }
    Ok(vec![(p.dtype, inputs[0].1.to_vec())])
}

pub(crate) fn eval_qadd(inputs: &[&Tensor], p: &QAddParams) -> Result<Vec<Tensor>, String> {
    let (dt, shape) = infer_qadd(&types_of(inputs), p)?.remove(0);
    let (a, b) = (ints(inputs[0]), ints(inputs[1]));
    let y = a.iter().zip(&b).map(|(&x, &z)| qadd_one(x, z, p)).collect();
    Ok(vec![int_tensor(dt, shape, y)])
}

pub(crate) fn infer_qgap(
    inputs: &[(DType, &[usize])],
    p: &QGapParams,
) -> Result<Vec<(DType, Shape)>, String> {
    arity(inputs, 1, 1)?;
    let (dt, x) = inputs[0];
    if !matches!(dt, DType::U8 | DType::I8) {
        return Err(format!("input must be u8 or i8, got {dt}"));
    }
    if x.len() < 3 {
        return Err(format!("QGlobalAvgPool needs rank >= 3, got {x:?}"));
    }
    if !matches!(p.dtype, DType::U8 | DType::I8) {
        return Err(format!("output must be u8 or i8, got {}", p.dtype));
    }
    let finite = |s: f32| s.is_finite() && s > 0.0;
    if !(finite(p.x.0) && finite(p.y.0)) {
        return Err(format!("bad quantisation parameters {p:?}"));
    }
    let mut out = x[..2].to_vec();
    out.extend(std::iter::repeat_n(1, x.len() - 2));
    Ok(vec![(p.dtype, out)])
}

/// One plane of an integer GlobalAveragePool ([`QGapParams`]).
pub fn qgap_one(plane: &[i32], p: &QGapParams) -> i32 {
    let sum: i64 = plane.iter().map(|&v| (v - p.x.1) as i64).sum();
    let v = rhe(sum as i32 as f32 * p.multiplier(plane.len()));
    let (lo, hi) = range_of(p.dtype).unwrap_or((0, 255));
    (v.clamp(lo as f32 - p.y.1 as f32, hi as f32 - p.y.1 as f32) as i32) + p.y.1
}

pub(crate) fn eval_qgap(inputs: &[&Tensor], p: &QGapParams) -> Result<Vec<Tensor>, String> {
    let (dt, shape) = infer_qgap(&types_of(inputs), p)?.remove(0);
    let x = ints(inputs[0]);
    let planes = shape[0] * shape[1];
    let size = x.len() / planes.max(1);
    let y = (0..planes)
        .map(|i| qgap_one(&x[i * size..(i + 1) * size], p))
        .collect();
    Ok(vec![int_tensor(dt, shape, y)])
}

/// The dtype and shape of each output of this family's `op` (`ops::infer`).
pub fn infer(op: &Op, inputs: &[(DType, &[usize])]) -> Result<Vec<(DType, Shape)>, String> {
    match op {
        Op::Quantize(q) => infer_quantize(inputs, q, false),
        Op::Dequantize(q) => infer_quantize(inputs, q, true),
        Op::QConv(a, p) => infer_qconv(inputs, a, p),
        Op::QMatMul(p) => infer_qmatmul(inputs, p),
        Op::QAdd(p) => infer_qadd(inputs, p),
        Op::QGlobalAvgPool(p) => infer_qgap(inputs, p),
        _ => Err(format!("{} is not in the quant family", op.name())),
    }
}

/// Evaluates this family's `op` (`ops::eval`).
pub fn eval(op: &Op, inputs: &[&Tensor]) -> Result<Vec<Tensor>, String> {
    match op {
        Op::Quantize(q) => eval_quantize(inputs, q),
        Op::Dequantize(q) => eval_dequantize(inputs, q),
        Op::QConv(a, p) => eval_qconv(inputs, a, p),
        Op::QMatMul(p) => eval_qmatmul(inputs, p),
        Op::QAdd(p) => eval_qadd(inputs, p),
        Op::QGlobalAvgPool(p) => eval_qgap(inputs, p),
        _ => Err(format!("{} is not in the quant family", op.name())),
    }
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

    fn add(sy: f32) -> QAddParams {
        QAddParams {
            a: (0.03, 120),
            b: (0.05, 7),
            y: (sy, 30),
            clamp: (30, 255),
            dtype: DType::U8,
            mul: false,
        }
    }

    #[test]
    fn reciprocal_only_where_every_pair_agrees() {
        // A power of two's reciprocal is exact; 1 / 0.04 rounds, and 1620 of the pairs then round differently.
        assert_eq!(qadd_reciprocal(&add(0.0625)), Some(16.0));
        assert_eq!(qadd_reciprocal(&add(0.04)), None);
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
