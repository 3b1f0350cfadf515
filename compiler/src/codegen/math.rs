//! Elementwise math in Cranelift IR for `f32` and `f32x4` alike: exp (Cody–Waite range reduction and a degree-7
//! polynomial, 2^n built from the exponent bits), log (exponent split and a degree-9 polynomial), erf, the
//! exact GELU's own erfc form, pow, sigmoid, tanh, rounding, and the unary ops and activations. No libm call is
//! ever emitted: rounding uses the 1.5·2^23 trick instead of `nearest`, which needs SSE4.1. Comparisons select
//! with `select` on scalars and `bitselect` on vectors (`fsel`).

use super::builder::Kb;
use crate::ir::{Activation, BinOp, UnOp};
use crate::kernel::math::{
    erf_series, erfc_coeffs, gelu_erf_half, EXP_BIAS, EXP_HI, EXP_LN2, EXP_LO, EXP_TAYLOR,
    GELU_ERF_P, GELU_TANH, ROUND_MAGIC,
};
use cranelift_codegen::ir::condcodes::FloatCC;
use cranelift_codegen::ir::types::{F32, I32, I32X4};
use cranelift_codegen::ir::{Endianness, InstBuilder, MemFlagsData, Type, Value};

fn int_ty(ty: Type) -> Type {
    if ty == F32 {
        I32
    } else {
        I32X4
    }
}

fn bitcast(kb: &mut Kb, to: Type, x: Value) -> Value {
    let f = MemFlagsData::new().with_endianness(Endianness::Little);
    kb.b.ins().bitcast(to, f, x)
}

fn iconst_ty(kb: &mut Kb, ty: Type, v: i32) -> Value {
    let s = kb.b.ins().iconst(I32, v as i64);
    if ty == I32 {
        s
    } else {
        kb.b.ins().splat(ty, s)
    }
}

/// e^x. Relative error about 2e-7 over [-86.99, ln(f32::MAX)], +∞ above (the input is clamped to 89, where
/// 2^n·p(r) overflows); +0 below -86.99 (`EXP_LO`), never a subnormal. The scale is built as 2^(n−1) and the
/// product doubled, so that n = 128 (inputs from 88.4 up) still has a normal scale.
pub fn exp(kb: &mut Kb, ty: Type, x: Value) -> Value {
    let lo = kb.fconst(ty, EXP_LO);
    let hi = kb.fconst(ty, EXP_HI);
    let x = kb.b.ins().fmax(x, lo);
    let x = kb.b.ins().fmin(x, hi);
    let log2e = kb.fconst(ty, std::f32::consts::LOG2_E);
    let magic = kb.fconst(ty, ROUND_MAGIC);
    let t = kb.mul_add(x, log2e, magic);
    let n = kb.b.ins().fsub(t, magic);
    let ln2_hi = kb.fconst(ty, EXP_LN2[0]);
    let ln2_lo = kb.fconst(ty, EXP_LN2[1]);
    let r = kb.mul_add(n, ln2_hi, x);
    let r = kb.mul_add(n, ln2_lo, r);
    let mut p = kb.fconst(ty, EXP_TAYLOR[0]);
    for &c in &EXP_TAYLOR[1..] {
        let cv = kb.fconst(ty, c);
        p = kb.mul_add(p, r, cv);
    }
    // 2^(n−1): the low mantissa bits of t hold n + 0x400000; (bits(t) - 0x4B400000 + 126) << 23.
    let ity = int_ty(ty);
    let tb = bitcast(kb, ity, t);
    let bias = iconst_ty(kb, ity, EXP_BIAS);
    let e = kb.b.ins().iadd(tb, bias);
    let e = kb.b.ins().ishl_imm_u(e, 23);
    let scale = bitcast(kb, ty, e);
    let half = kb.b.ins().fmul(p, scale);
    let two = kb.fconst(ty, 2.0);
    kb.b.ins().fmul(half, two)
}

/// 1 / (1 + e^-x).
pub fn sigmoid(kb: &mut Kb, ty: Type, x: Value) -> Value {
    let nx = kb.b.ins().fneg(x);
    let e = exp(kb, ty, nx);
    let one = kb.fconst(ty, 1.0);
    let d = kb.b.ins().fadd(one, e);
    kb.b.ins().fdiv(one, d)
}

/// tanh(x) = sign(x) (1 - e^-2|x|) / (1 + e^-2|x|).
pub fn tanh(kb: &mut Kb, ty: Type, x: Value) -> Value {
    let ax = kb.b.ins().fabs(x);
    let m2 = kb.fconst(ty, -2.0);
    let a = kb.b.ins().fmul(ax, m2);
    let e = exp(kb, ty, a);
    let one = kb.fconst(ty, 1.0);
    let num = kb.b.ins().fsub(one, e);
    let den = kb.b.ins().fadd(one, e);
    let t = kb.b.ins().fdiv(num, den);
    with_sign_of(kb, ty, t, x)
}

/// `mag` (>= 0) with the sign bit of `x`.
fn with_sign_of(kb: &mut Kb, ty: Type, mag: Value, x: Value) -> Value {
    let ity = int_ty(ty);
    let xb = bitcast(kb, ity, x);
    let sign = iconst_ty(kb, ity, i32::MIN);
    let s = kb.b.ins().band(xb, sign);
    let mb = bitcast(kb, ity, mag);
    let r = kb.b.ins().bor(mb, s);
    bitcast(kb, ty, r)
}

/// min(max(x, lo), hi), skipping infinite bounds.
pub fn clip(kb: &mut Kb, ty: Type, x: Value, lo: f32, hi: f32) -> Value {
    let mut v = x;
    if lo > f32::MIN {
        let l = kb.fconst(ty, lo);
        v = kb.b.ins().fmax(v, l);
    }
    if hi < f32::MAX {
        let h = kb.fconst(ty, hi);
        v = kb.b.ins().fmin(v, h);
    }
    v
}

/// Applies a unary op (reference: `ir::ops::elementwise::apply_unary`).
pub fn unary(kb: &mut Kb, ty: Type, op: UnOp, x: Value) -> Value {
    match op {
        UnOp::Relu => clip(kb, ty, x, 0.0, f32::MAX),
        UnOp::Sigmoid => sigmoid(kb, ty, x),
        UnOp::Tanh => tanh(kb, ty, x),
        UnOp::Exp => exp(kb, ty, x),
        UnOp::Neg => kb.b.ins().fneg(x),
        UnOp::Abs => kb.b.ins().fabs(x),
        UnOp::Sqrt => kb.b.ins().sqrt(x),
        UnOp::Reciprocal => {
            let one = kb.fconst(ty, 1.0);
            kb.b.ins().fdiv(one, x)
        }
        UnOp::Clip(lo, hi) => clip(kb, ty, x, lo, hi),
        UnOp::Identity => x,
        UnOp::LeakyRelu(a) => {
            // max(x, 0) + a * min(x, 0): exact for both signs.
            let pos = clip(kb, ty, x, 0.0, f32::MAX);
            let neg = clip(kb, ty, x, f32::MIN, 0.0);
            let av = kb.fconst(ty, a);
            let n = kb.b.ins().fmul(neg, av);
            kb.b.ins().fadd(pos, n)
        }
        UnOp::HardSigmoid(a, b) => {
            let av = kb.fconst(ty, a);
            let bv = kb.fconst(ty, b);
            let m = kb.b.ins().fmul(x, av);
            let y = kb.b.ins().fadd(m, bv);
            clip(kb, ty, y, 0.0, 1.0)
        }
        UnOp::HardSwish => {
            let six = kb.fconst(ty, 6.0);
            let half = kb.fconst(ty, 0.5);
            let d = kb.b.ins().fdiv(x, six);
            let y = kb.b.ins().fadd(d, half);
            let g = clip(kb, ty, y, 0.0, 1.0);
            kb.b.ins().fmul(x, g)
        }
        UnOp::Elu(a) => elu(kb, ty, x, a),
        UnOp::Selu(a, g) => {
            let e = elu(kb, ty, x, a);
            let gv = kb.fconst(ty, g);
            kb.b.ins().fmul(e, gv)
        }
        UnOp::Log => log(kb, ty, x),
        UnOp::Erf => erf(kb, ty, x),
        UnOp::Round => round(kb, ty, x),
        UnOp::Floor | UnOp::Ceil => {
            // round(x) corrected by one where it went the wrong way.
            let r = round(kb, ty, x);
            let one = kb.fconst(ty, 1.0);
            let zero = kb.fconst(ty, 0.0);
            if op == UnOp::Floor {
                let c = fsel(kb, ty, FloatCC::GreaterThan, r, x, one, zero);
                kb.b.ins().fsub(r, c)
            } else {
                let c = fsel(kb, ty, FloatCC::LessThan, r, x, one, zero);
                kb.b.ins().fadd(r, c)
            }
        }
        UnOp::Sign => {
            let zero = kb.fconst(ty, 0.0);
            let one = kb.fconst(ty, 1.0);
            let m1 = kb.fconst(ty, -1.0);
            let neg = fsel(kb, ty, FloatCC::LessThan, x, zero, m1, x);
            fsel(kb, ty, FloatCC::GreaterThan, x, zero, one, neg)
        }
        UnOp::Softplus => softplus(kb, ty, x),
        UnOp::Softsign => {
            let a = kb.b.ins().fabs(x);
            let one = kb.fconst(ty, 1.0);
            let d = kb.b.ins().fadd(a, one);
            kb.b.ins().fdiv(x, d)
        }
        UnOp::ThresholdedRelu(a) => {
            let av = kb.fconst(ty, a);
            let zero = kb.fconst(ty, 0.0);
            fsel(kb, ty, FloatCC::GreaterThan, x, av, x, zero)
        }
        UnOp::Celu(a) => {
            let inv = kb.fconst(ty, 1.0 / a);
            let xs = kb.b.ins().fmul(x, inv);
            let e = elu(kb, ty, xs, 1.0);
            let av = kb.fconst(ty, a);
            let n = clip(kb, ty, e, f32::MIN, 0.0);
            let n = kb.b.ins().fmul(n, av);
            let p = clip(kb, ty, x, 0.0, f32::MAX);
            kb.b.ins().fadd(p, n)
        }
        UnOp::Gelu { tanh: false } => gelu_erf(kb, ty, x),
        UnOp::Gelu { tanh: true } => {
            let c = kb.fconst(ty, GELU_TANH[0]);
            let k = kb.fconst(ty, GELU_TANH[1]);
            let x2 = kb.b.ins().fmul(x, x);
            let x3 = kb.b.ins().fmul(x2, x);
            let inner = kb.mul_add(c, x3, x);
            let t = kb.b.ins().fmul(inner, k);
            let th = tanh(kb, ty, t);
            gelu_tail(kb, ty, x, th)
        }
        UnOp::Mish => {
            let sp = softplus(kb, ty, x);
            let t = tanh(kb, ty, sp);
            kb.b.ins().fmul(x, t)
        }
    }
}

/// The exact GELU `½·x·(1 + erf(x/√2))` as `x · r`: with `a = |x|/√2`, `h = ½·t·P(t)·e^(−a²)`
/// (`gelu_erf_half`) is ½·erfc(a), and `r` is `1 − h` for x ≥ 0 and `h` for x < 0 (no cancellation in
/// `1 + erf` for negative x). One division and a degree-4 polynomial where `erf` takes a series, a division and
/// a degree-9 polynomial: the encoder's GELU maps about twice as fast. Error within 3e-7 of max(1, |GELU|).
fn gelu_erf(kb: &mut Kb, ty: Type, x: Value) -> Value {
    let ax = kb.b.ins().fabs(x);
    let k = kb.fconst(ty, std::f32::consts::FRAC_1_SQRT_2);
    let a = kb.b.ins().fmul(ax, k);
    let one = kb.fconst(ty, 1.0);
    let p = kb.fconst(ty, GELU_ERF_P);
    let d = kb.mul_add(a, p, one);
    let t = kb.b.ins().fdiv(one, d);
    let half = gelu_erf_half();
    let mut q = kb.fconst(ty, half[0]);
    for &c in &half[1..] {
        let cv = kb.fconst(ty, c);
        q = kb.mul_add(q, t, cv);
    }
    let q = kb.b.ins().fmul(q, t);
    let x2 = kb.b.ins().fmul(x, x);
    let m = kb.fconst(ty, -0.5);
    let s = kb.b.ins().fmul(x2, m);
    let e = exp(kb, ty, s);
    let h = kb.b.ins().fmul(q, e);
    let r1 = kb.b.ins().fsub(one, h);
    let zero = kb.fconst(ty, 0.0);
    let r = fsel(kb, ty, FloatCC::LessThan, x, zero, h, r1);
    kb.b.ins().fmul(r, x)
}

/// 0.5 * x * (1 + t).
fn gelu_tail(kb: &mut Kb, ty: Type, x: Value, t: Value) -> Value {
    let one = kb.fconst(ty, 1.0);
    let half = kb.fconst(ty, 0.5);
    let s = kb.b.ins().fadd(one, t);
    let hx = kb.b.ins().fmul(x, half);
    kb.b.ins().fmul(hx, s)
}

/// `a cc b ? t : e`, lane-wise.
pub fn fsel(kb: &mut Kb, ty: Type, cc: FloatCC, a: Value, b: Value, t: Value, e: Value) -> Value {
    let c = kb.b.ins().fcmp(cc, a, b);
    if ty == F32 {
        kb.b.ins().select(c, t, e)
    } else {
        let m = bitcast(kb, ty, c);
        kb.b.ins().bitselect(m, t, e)
    }
}

/// Round half to even: (x + 1.5·2^23) - 1.5·2^23 for |x| < 2^22; larger values are already integers.
pub fn round(kb: &mut Kb, ty: Type, x: Value) -> Value {
    let magic = kb.fconst(ty, ROUND_MAGIC);
    let t = kb.b.ins().fadd(x, magic);
    let r = kb.b.ins().fsub(t, magic);
    let ax = kb.b.ins().fabs(x);
    let big = kb.fconst(ty, 4194304.0);
    fsel(kb, ty, FloatCC::LessThan, ax, big, r, x)
}

/// ln(x): x = m·2^e with m in [√½, √2), ln(1 + f) by a degree-9 polynomial (relative error ~1e-7); ln(0) = -inf,
/// ln(x < 0) = NaN, ln(inf) = inf.
pub fn log(kb: &mut Kb, ty: Type, x: Value) -> Value {
    let ity = int_ty(ty);
    let bits = bitcast(kb, ity, x);
    let e = kb.b.ins().ushr_imm_u(bits, 23);
    let ff = iconst_ty(kb, ity, 0xff);
    let e = kb.b.ins().band(e, ff);
    let b126 = iconst_ty(kb, ity, 126);
    let e = kb.b.ins().isub(e, b126);
    let mmask = iconst_ty(kb, ity, 0x807f_ffff_u32 as i32);
    let m = kb.b.ins().band(bits, mmask);
    let half = iconst_ty(kb, ity, 0x3f00_0000);
    let m = kb.b.ins().bor(m, half);
    let m = bitcast(kb, ty, m); // [0.5, 1)
    let mut ef = kb.b.ins().fcvt_from_sint(ty, e);
    let sqrth = kb.fconst(ty, std::f32::consts::FRAC_1_SQRT_2);
    let one = kb.fconst(ty, 1.0);
    let zero = kb.fconst(ty, 0.0);
    let dec = fsel(kb, ty, FloatCC::LessThan, m, sqrth, one, zero);
    ef = kb.b.ins().fsub(ef, dec);
    let m2 = kb.b.ins().fadd(m, m);
    let mm = fsel(kb, ty, FloatCC::LessThan, m, sqrth, m2, m);
    let f = kb.b.ins().fsub(mm, one);
    let z = kb.b.ins().fmul(f, f);
    let coeffs = [
        7.037_683_6e-2,
        -1.151_461e-1,
        1.167_699_9e-1,
        -1.242_014_1e-1,
        1.424_932_3e-1,
        -1.666_805_8e-1,
        2.000_071_4e-1,
        -2.499_999_4e-1,
        3.333_333e-1,
    ];
    let mut p = kb.fconst(ty, coeffs[0]);
    for &c in &coeffs[1..] {
        let cv = kb.fconst(ty, c);
        p = kb.mul_add(p, f, cv);
    }
    let p = kb.b.ins().fmul(p, f);
    let mut y = kb.b.ins().fmul(p, z);
    let l1 = kb.fconst(ty, -2.121_944_4e-4);
    y = kb.mul_add(ef, l1, y);
    let mh = kb.fconst(ty, -0.5);
    y = kb.mul_add(z, mh, y);
    let mut r = kb.b.ins().fadd(f, y);
    let l2 = kb.fconst(ty, 0.693_359_4);
    r = kb.mul_add(ef, l2, r);
    let ninf = kb.fconst(ty, f32::NEG_INFINITY);
    let inf = kb.fconst(ty, f32::INFINITY);
    let nan = kb.fconst(ty, f32::NAN);
    let r = fsel(kb, ty, FloatCC::Equal, x, zero, ninf, r);
    let r = fsel(kb, ty, FloatCC::LessThan, x, zero, nan, r);
    fsel(kb, ty, FloatCC::Equal, x, inf, inf, r)
}

/// ln(1 + e^x), x itself above 20.
fn softplus(kb: &mut Kb, ty: Type, x: Value) -> Value {
    let e = exp(kb, ty, x);
    let one = kb.fconst(ty, 1.0);
    let s = kb.b.ins().fadd(one, e);
    let l = log(kb, ty, s);
    let t = kb.fconst(ty, 20.0);
    fsel(kb, ty, FloatCC::GreaterThan, x, t, x, l)
}

/// erf(x): the same two forms as `ir::ops::elementwise::erf` (series below |x| = 0.5, 1 - erfc above), in f32.
pub fn erf(kb: &mut Kb, ty: Type, x: Value) -> Value {
    let a = kb.b.ins().fabs(x);
    // Series: 2/√π · a · Σ (-a²)^n / (n! (2n+1)), n < 7.
    let x2 = kb.b.ins().fmul(a, a);
    let series = erf_series();
    let mut p = kb.fconst(ty, series[0]);
    for &c in &series[1..] {
        let cv = kb.fconst(ty, c);
        p = kb.mul_add(p, x2, cv);
    }
    let k = kb.fconst(ty, std::f32::consts::FRAC_2_SQRT_PI);
    let small = kb.b.ins().fmul(p, a);
    let small = kb.b.ins().fmul(small, k);
    // erfc(a) = t·exp(-a² + P(t)), t = 1 / (1 + a/2).
    let one = kb.fconst(ty, 1.0);
    let half = kb.fconst(ty, 0.5);
    let d = kb.mul_add(a, half, one);
    let t = kb.b.ins().fdiv(one, d);
    let c = erfc_coeffs();
    let mut q = kb.fconst(ty, c[0]);
    for &cc in &c[1..] {
        let cv = kb.fconst(ty, cc);
        q = kb.mul_add(q, t, cv);
    }
    let q = kb.b.ins().fsub(q, x2);
    let e = exp(kb, ty, q);
    let erfc = kb.b.ins().fmul(t, e);
    let large = kb.b.ins().fsub(one, erfc);
    let r = fsel(kb, ty, FloatCC::LessThan, a, half, small, large);
    with_sign_of(kb, ty, r, x)
}

/// a^b: e^(b·ln|a|), negated for a negative base with an odd integral exponent, NaN for a negative base with a
/// fractional one, 1 when b = 0.
pub fn pow(kb: &mut Kb, ty: Type, a: Value, b: Value) -> Value {
    let aa = kb.b.ins().fabs(a);
    let l = log(kb, ty, aa);
    let m = kb.b.ins().fmul(l, b);
    let r = exp(kb, ty, m);
    let zero = kb.fconst(ty, 0.0);
    // |a| = 0: 0 for b > 0, inf for b < 0.
    let inf = kb.fconst(ty, f32::INFINITY);
    let z = fsel(kb, ty, FloatCC::GreaterThan, b, zero, zero, inf);
    let r = fsel(kb, ty, FloatCC::Equal, aa, zero, z, r);
    let rb = round(kb, ty, b);
    let half = kb.fconst(ty, 0.5);
    let hb = kb.b.ins().fmul(rb, half);
    let rhb = round(kb, ty, hb);
    let neg_r = kb.b.ins().fneg(r);
    let nan = kb.fconst(ty, f32::NAN);
    // For a < 0: odd integer b → -r, even → r, fractional → NaN.
    let odd = fsel(kb, ty, FloatCC::NotEqual, hb, rhb, neg_r, r);
    let neg = fsel(kb, ty, FloatCC::Equal, rb, b, odd, nan);
    let r = fsel(kb, ty, FloatCC::LessThan, a, zero, neg, r);
    let one = kb.fconst(ty, 1.0);
    fsel(kb, ty, FloatCC::Equal, b, zero, one, r)
}

/// max(x, 0) + a * (e^min(x, 0) - 1).
fn elu(kb: &mut Kb, ty: Type, x: Value, a: f32) -> Value {
    let pos = clip(kb, ty, x, 0.0, f32::MAX);
    let neg = clip(kb, ty, x, f32::MIN, 0.0);
    let e = exp(kb, ty, neg);
    let one = kb.fconst(ty, 1.0);
    let em1 = kb.b.ins().fsub(e, one);
    let av = kb.fconst(ty, a);
    let n = kb.b.ins().fmul(em1, av);
    kb.b.ins().fadd(pos, n)
}

/// Applies a binary op (reference: `ir::ops::elementwise::apply_binary`).
pub fn binary(kb: &mut Kb, op: BinOp, a: Value, b: Value) -> Value {
    let ty = kb.b.func.dfg.value_type(a);
    match op {
        BinOp::Pow => pow(kb, ty, a, b),
        BinOp::PRelu => {
            let zero = kb.fconst(ty, 0.0);
            let m = kb.b.ins().fmul(a, b);
            fsel(kb, ty, FloatCC::LessThan, a, zero, m, a)
        }
        BinOp::FMod | BinOp::Mod => {
            // a - trunc(a / b) * b, then moved to the divisor's sign for Mod.
            let q = kb.b.ins().fdiv(a, b);
            let aq = kb.b.ins().fabs(q);
            let fl = unary(kb, ty, UnOp::Floor, aq);
            let zero = kb.fconst(ty, 0.0);
            let nfl = kb.b.ins().fneg(fl);
            let t = fsel(kb, ty, FloatCC::LessThan, q, zero, nfl, fl);
            let tb = kb.b.ins().fmul(t, b);
            let r = kb.b.ins().fsub(a, tb);
            if op == BinOp::FMod {
                return r;
            }
            let rb = kb.b.ins().fadd(r, b);
            let rneg = kb.b.ins().fcmp(FloatCC::LessThan, r, zero);
            let bneg = kb.b.ins().fcmp(FloatCC::LessThan, b, zero);
            let nz = kb.b.ins().fcmp(FloatCC::NotEqual, r, zero);
            let differ = kb.b.ins().bxor(rneg, bneg);
            let fix = kb.b.ins().band(differ, nz);
            if ty == F32 {
                kb.b.ins().select(fix, rb, r)
            } else {
                let m = bitcast(kb, ty, fix);
                kb.b.ins().bitselect(m, rb, r)
            }
        }
        BinOp::Add => kb.b.ins().fadd(a, b),
        BinOp::Sub => kb.b.ins().fsub(a, b),
        BinOp::Mul => kb.b.ins().fmul(a, b),
        BinOp::Div => kb.b.ins().fdiv(a, b),
        BinOp::Max => kb.b.ins().fmax(a, b),
        BinOp::Min => kb.b.ins().fmin(a, b),
    }
}

/// Applies a fused activation.
pub fn activation(kb: &mut Kb, ty: Type, act: Activation, x: Value) -> Value {
    match act {
        Activation::None => x,
        Activation::Relu => clip(kb, ty, x, 0.0, f32::MAX),
        Activation::Clip(lo, hi) => clip(kb, ty, x, lo, hi),
    }
}
