//! The six compute kernels over a core tile's data memory, with exactly the arithmetic of
//! `docs/npu-transaction-format.md`: f32 multiplies and adds rounded separately (never fused), in
//! the stated loop order; int8 products and sums exact in i32 (wrapping); [`rhe`](elem::rhe) rounds half to
//! even; [`requant`] saturates to the output type, then clamps.
//!
//! Invariant: kernels only run on a [`Params`] that `Params::parse` checked, so every element they
//! touch lies inside a region that fits the tile's data memory, and every index they form is below
//! the tile's size (no overflow). The memory accessors still go through `get` and do nothing (read
//! 0) outside memory, so even a broken invariant cannot panic. This file holds the accessors and
//! GEMM, EPILOGUE, ELTWISE and GAP; `window.rs` holds CONV and POOL.

use super::params::{Act, DType, Eltwise, Epilogue, Gap, Gemm, Params};

pub(crate) mod elem;
mod window;

pub(crate) use elem::{fmax, fmin};
use elem::{ldf, ldi, ldq, ldw, requant, stf, sti, stq};

/// Runs a checked kernel on the tile's data memory.
pub(crate) fn run(params: &Params, mem: &mut [u8]) {
    match params {
        Params::Conv(p) => window::conv(p, mem),
        Params::Gemm(p) => gemm(p, mem),
        Params::Epilogue(p) => epilogue(p, mem),
        Params::Eltwise(p) => eltwise(p, mem),
        Params::Pool(p) => window::pool(p, mem),
        Params::Gap(p) => gap(p, mem),
    }
}

/// The f32 activation: none, relu `max(y, 0)`, clip `min(max(y, lo), hi)`.
fn act_f32(act: &Act, y: f32) -> f32 {
    match act.code {
        1 => fmax(y, 0.0),
        2 => fmin(fmax(y, f32::from_bits(act.lo)), f32::from_bits(act.hi)),
        _ => y,
    }
}

fn gemm(p: &Gemm, mem: &mut [u8]) {
    for i in 0..p.m {
        for j in 0..p.n {
            let ai = i * p.n + j;
            if p.dt == DType::F32 {
                let mut v = if p.zero { 0.0 } else { ldf(mem, p.acc, ai) };
                for q in 0..p.k {
                    v += ldf(mem, p.a, i * p.k + q) * ldf(mem, p.b, q * p.n + j);
                }
                stf(mem, p.acc, ai, v);
            } else {
                let mut v = if p.zero { 0 } else { ldi(mem, p.acc, ai) };
                for q in 0..p.k {
                    let x = ldq(mem, p.dt, p.a, i * p.k + q).wrapping_sub(p.a_zp);
                    v = v.wrapping_add(x.wrapping_mul(ldw(mem, p.b, q * p.n + j)));
                }
                sti(mem, p.acc, ai, v);
            }
        }
    }
}

fn epilogue(p: &Epilogue, mem: &mut [u8]) {
    for i in 0..p.rows {
        for j in 0..p.cols {
            let e = i * p.cols + j;
            let v = if p.per_col { j } else { i };
            if p.dt == DType::F32 {
                let mut y = ldf(mem, p.acc, e);
                if let Some(bias) = p.bias {
                    y += ldf(mem, bias, v);
                }
                if let Some(res) = p.residual {
                    y += ldf(mem, res, e);
                }
                stf(mem, p.out, e, act_f32(&p.act, y));
            } else {
                let mut acc = ldi(mem, p.acc, e);
                if let Some(bias) = p.bias {
                    acc = acc.wrapping_add(ldi(mem, bias, v));
                }
                let r = acc as f32 * ldf(mem, p.scale, v);
                let (lo, hi) = (p.act.lo as i32, p.act.hi as i32);
                let y = requant(p.dt, r, p.out_zp, lo, hi);
                stq(mem, p.dt, p.out, e, y);
            }
        }
    }
}

fn eltwise(p: &Eltwise, mem: &mut [u8]) {
    for i in 0..p.n {
        let bi = match p.mode {
            0 => i,
            1 => 0,
            _ => i / p.inner,
        };
        if p.dt == DType::F32 {
            let a = ldf(mem, p.a, i);
            let y = match p.op {
                0 => a + ldf(mem, p.b, bi),
                1 => a * ldf(mem, p.b, bi),
                _ => a,
            };
            stf(mem, p.out, i, act_f32(&p.act, y));
        } else {
            let ra = p.a_scale * ldq(mem, p.dt, p.a, i).wrapping_sub(p.a_zp) as f32;
            let rb = || p.b_scale * ldq(mem, p.dt, p.b, bi).wrapping_sub(p.b_zp) as f32;
            let r = match p.op {
                0 => ra + rb(),
                1 => ra * rb(),
                _ => ra,
            };
            let (lo, hi) = (p.act.lo as i32, p.act.hi as i32);
            let y = requant(p.dt, r / p.y_scale, p.y_zp, lo, hi);
            stq(mem, p.dt, p.out, i, y);
        }
    }
}

fn gap(p: &Gap, mem: &mut [u8]) {
    for c in 0..p.c {
        if p.dt == DType::F32 {
            let mut s = 0.0f32;
            for i in 0..p.n {
                s += ldf(mem, p.inp, c * p.n + i);
            }
            stf(mem, p.out, c, s / p.n as f32);
        } else {
            let mut s = 0i32;
            for i in 0..p.n {
                s = s.wrapping_add(ldq(mem, p.dt, p.inp, c * p.n + i));
            }
            let y = requant(p.dt, s as f32 / p.n as f32, 0, i32::MIN, i32::MAX);
            stq(mem, p.dt, p.out, c, y);
        }
    }
}
