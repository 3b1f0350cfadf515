//! Elementwise math in Cranelift IR for `f32` and `f32x4` alike: exp (Cody–Waite range reduction and a degree-7
//! polynomial, 2^n built from the exponent bits), sigmoid, tanh, and the unary ops and activations. No libm
//! call is ever emitted: rounding uses the 1.5·2^23 trick instead of `nearest`, which needs SSE4.1.

use super::builder::Kb;
use crate::ir::{Activation, BinOp, UnOp};
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

/// e^x. Relative error about 2e-7 over the clamped range [-87.3, 88.3]; below that it returns ~1.2e-38.
pub fn exp(kb: &mut Kb, ty: Type, x: Value) -> Value {
    let lo = kb.fconst(ty, -87.3);
    let hi = kb.fconst(ty, 88.3);
    let x = kb.b.ins().fmax(x, lo);
    let x = kb.b.ins().fmin(x, hi);
    let log2e = kb.fconst(ty, std::f32::consts::LOG2_E);
    let magic = kb.fconst(ty, 12582912.0); // 1.5 * 2^23: adding it rounds to an integer
    let t = kb.mul_add(x, log2e, magic);
    let n = kb.b.ins().fsub(t, magic);
    let ln2_hi = kb.fconst(ty, -0.693_359_4);
    let ln2_lo = kb.fconst(ty, 2.121_944_4e-4);
    let r = kb.mul_add(n, ln2_hi, x);
    let r = kb.mul_add(n, ln2_lo, r);
    // e^r on |r| <= 0.35: Taylor to degree 7 (truncation < 1e-8 relative), Horner form.
    let coeffs = [
        1.0 / 5040.0,
        1.0 / 720.0,
        1.0 / 120.0,
        1.0 / 24.0,
        1.0 / 6.0,
        0.5,
        1.0,
        1.0,
    ];
    let mut p = kb.fconst(ty, coeffs[0]);
    for &c in &coeffs[1..] {
        let cv = kb.fconst(ty, c);
        p = kb.mul_add(p, r, cv);
    }
    // 2^n: the low mantissa bits of t hold n + 0x400000; (bits(t) - 0x4B400000 + 127) << 23.
    let ity = int_ty(ty);
    let tb = bitcast(kb, ity, t);
    let bias = iconst_ty(kb, ity, 127 - 0x4B40_0000);
    let e = kb.b.ins().iadd(tb, bias);
    let e = kb.b.ins().ishl_imm_u(e, 23);
    let scale = bitcast(kb, ty, e);
    kb.b.ins().fmul(p, scale)
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
    // Copy x's sign bit onto t (t >= 0).
    let ity = int_ty(ty);
    let xb = bitcast(kb, ity, x);
    let sign = iconst_ty(kb, ity, i32::MIN);
    let s = kb.b.ins().band(xb, sign);
    let tb = bitcast(kb, ity, t);
    let r = kb.b.ins().bor(tb, s);
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
    }
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
    match op {
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
