//! The six compute kernels over a core tile's data memory, with exactly the arithmetic of
//! `docs/npu-transaction-format.md`: f32 multiplies and adds rounded separately (never fused), in
//! the stated loop order; int8 products and sums exact in i32 (wrapping); [`rhe`] rounds half to
//! even; [`requant`] saturates to the output type, then clamps.
//!
//! Invariant: kernels only run on a [`Params`] that `Params::parse` checked, so every element they
//! touch lies inside a region that fits the tile's data memory, and every index they form is below
//! the tile's size (no overflow). The memory accessors still go through `get` and do nothing (read
//! 0) outside memory, so even a broken invariant cannot panic. This file holds the accessors and
//! GEMM, EPILOGUE, ELTWISE and GAP; `window.rs` holds CONV and POOL.

use super::params::{Act, DType, Eltwise, Epilogue, Gap, Gemm, Params};

mod window;

pub(crate) use window::check_windows;

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

/// The u32 at byte `at` (0 outside memory, which checked kernels never reach).
fn ld32(mem: &[u8], at: usize) -> u32 {
    super::regs::u32_at(mem, at).unwrap_or(0)
}

/// Stores the u32 at byte `at` (nothing outside memory).
fn st32(mem: &mut [u8], at: usize, v: u32) {
    if let Some(d) = at.checked_add(4).and_then(|end| mem.get_mut(at..end)) {
        d.copy_from_slice(&v.to_le_bytes());
    }
}

/// f32 element `i` of the array at `base`.
fn ldf(mem: &[u8], base: usize, i: usize) -> f32 {
    f32::from_bits(ld32(mem, base + 4 * i))
}

/// Stores f32 element `i` of the array at `base`.
fn stf(mem: &mut [u8], base: usize, i: usize, v: f32) {
    st32(mem, base + 4 * i, v.to_bits());
}

/// i32 element `i` of the array at `base`.
fn ldi(mem: &[u8], base: usize, i: usize) -> i32 {
    ld32(mem, base + 4 * i) as i32
}

/// Stores i32 element `i` of the array at `base`.
fn sti(mem: &mut [u8], base: usize, i: usize, v: i32) {
    st32(mem, base + 4 * i, v as u32);
}

/// int8 activation element `i` (u8 for dtype 1, i8 for dtype 2) widened to i32.
fn ldq(mem: &[u8], dt: DType, base: usize, i: usize) -> i32 {
    let byte = mem.get(base + i).copied().unwrap_or(0);
    match dt {
        DType::U8 => i32::from(byte),
        _ => i32::from(byte as i8),
    }
}

/// i8 weight element `i`.
fn ldw(mem: &[u8], base: usize, i: usize) -> i32 {
    i32::from(mem.get(base + i).copied().unwrap_or(0) as i8)
}

/// Stores int8 output element `i`, saturated to the output type.
fn stq(mem: &mut [u8], dt: DType, base: usize, i: usize, v: i32) {
    if let Some(d) = mem.get_mut(base + i) {
        *d = sat(dt, v) as u8;
    }
}

/// Clamps to the output type's range: [0, 255] for u8, [-128, 127] for i8.
pub(crate) fn sat(dt: DType, v: i32) -> i32 {
    match dt {
        DType::U8 => v.clamp(0, 255),
        _ => v.clamp(-128, 127),
    }
}

/// Rounds to the nearest integer, ties to even (`f32::round_ties_even`, with plain arithmetic so it
/// builds for `no_std`): values of magnitude ≥ 2^23, infinities and NaN are returned unchanged;
/// below, `|x| + 2^23` lies in [2^23, 2^24) where the f32 spacing is 1, so the addition itself
/// rounds half to even (2^23 is even); the sign is put back (so -0.4 gives -0).
pub(crate) fn rhe(x: f32) -> f32 {
    const TWO23: f32 = 8_388_608.0;
    let sign = x.to_bits() & 0x8000_0000;
    let mag = f32::from_bits(x.to_bits() & 0x7FFF_FFFF);
    if mag.is_nan() || mag >= TWO23 {
        return x;
    }
    let r = (mag + TWO23) - TWO23;
    f32::from_bits(r.to_bits() | sign)
}

/// The int8 output of a real value `r` in output units: `clamp(sat(rhe(r) + zp), lo, hi)`, with
/// `rhe(r)` converted to i32 saturating (NaN gives 0) and `+ zp` saturating; the result is
/// saturated again when stored, so a clamp range wider than the type cannot escape it.
pub(crate) fn requant(dt: DType, r: f32, zp: i32, lo: i32, hi: i32) -> i32 {
    let q = (rhe(r) as i32).saturating_add(zp);
    sat(dt, q).max(lo).min(hi)
}

/// `max(y, lo)`: `lo` when `y < lo` or `y` is NaN, else `y`.
pub(crate) fn fmax(y: f32, lo: f32) -> f32 {
    if y < lo || y.is_nan() {
        lo
    } else {
        y
    }
}

/// `min(y, hi)`: `hi` when `y > hi` or `y` is NaN, else `y`.
pub(crate) fn fmin(y: f32, hi: f32) -> f32 {
    if y > hi || y.is_nan() {
        hi
    } else {
        y
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
