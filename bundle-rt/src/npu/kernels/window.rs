//! The windowed kernels, CONV and POOL, and the window arithmetic they share.
//!
//! Output position `(oh, ow)` reads input row `oh * stride_h + row0 + ky * dil_h` and column
//! `ow * stride_w + col0 + kx * dil_w`; taps outside the slab are skipped (zero padding). Instead of
//! testing every tap, [`taps`] computes the range of `ky` (or `kx`) that lands inside the slab:
//! the valid taps, in ascending order, are exactly those the format's loop would not skip, so the
//! summation order is unchanged, and a huge kernel or dilation cannot make a loop run past the slab.

use core::ops::Range;

use super::elem::{ldf, ldi, ldq, ldw, requant, stf, sti, stq};
use crate::npu::params::{base, taps, Conv, DType, Pool, Window};

/// The valid taps of output `(oh, ow)`: (first input row, row taps, first column, column taps).
fn window(w: &Window, oh: usize, ow: usize) -> (i64, Range<usize>, i64, Range<usize>) {
    let bh = base(oh, w.sh, w.row0);
    let bw = base(ow, w.sw, w.col0);
    let ry = taps(bh, w.kh, w.dh, w.in_rows);
    let rx = taps(bw, w.kw, w.dw, w.in_w);
    (bh, ry, bw, rx)
}

/// Index of input element `[c][bh + ky * dh][bw + kx * dw]` (a valid tap: inside the slab).
fn at(w: &Window, c: usize, bh: i64, ky: usize, bw: i64, kx: usize) -> usize {
    let r = (bh + (ky * w.dh) as i64) as usize;
    let q = (bw + (kx * w.dw) as i64) as usize;
    (c * w.in_rows + r) * w.in_w + q
}

pub(crate) fn conv(p: &Conv, mem: &mut [u8]) {
    let w = &p.win;
    for m in 0..p.mb {
        let chans = if p.depthwise { m..m + 1 } else { 0..w.c };
        for oh in 0..w.out_rows {
            for ow in 0..w.out_w {
                let (bh, ry, bw, rx) = window(w, oh, ow);
                let ai = (m * w.out_rows + oh) * w.out_w + ow;
                // Weight index of tap (c, ky, kx).
                let wi = |c: usize, ky: usize, kx: usize| {
                    let mc = if p.depthwise { m } else { m * w.c + c };
                    (mc * w.kh + ky) * w.kw + kx
                };
                if p.dt == DType::F32 {
                    let mut v = if p.zero { 0.0 } else { ldf(mem, p.acc, ai) };
                    for c in chans.clone() {
                        for ky in ry.clone() {
                            for kx in rx.clone() {
                                let x = ldf(mem, p.inp, at(w, c, bh, ky, bw, kx));
                                v += x * ldf(mem, p.w, wi(c, ky, kx));
                            }
                        }
                    }
                    stf(mem, p.acc, ai, v);
                } else {
                    let mut v = if p.zero { 0 } else { ldi(mem, p.acc, ai) };
                    for c in chans.clone() {
                        for ky in ry.clone() {
                            for kx in rx.clone() {
                                let x = ldq(mem, p.dt, p.inp, at(w, c, bh, ky, bw, kx));
                                let t = x.wrapping_sub(p.x_zp).wrapping_mul(ldw(
                                    mem,
                                    p.w,
                                    wi(c, ky, kx),
                                ));
                                v = v.wrapping_add(t);
                            }
                        }
                    }
                    sti(mem, p.acc, ai, v);
                }
            }
        }
    }
}

pub(crate) fn pool(p: &Pool, mem: &mut [u8]) {
    let w = &p.win;
    let full = (w.kh as u64).saturating_mul(w.kw as u64);
    for c in 0..w.c {
        for oh in 0..w.out_rows {
            for ow in 0..w.out_w {
                let (bh, ry, bw, rx) = window(w, oh, ow);
                let count = (ry.len() as u64).saturating_mul(rx.len() as u64);
                let divisor = if p.kind == 1 { full } else { count };
                let oi = (c * w.out_rows + oh) * w.out_w + ow;
                let taps = || {
                    let rx = rx.clone();
                    ry.clone()
                        .flat_map(move |ky| rx.clone().map(move |kx| (ky, kx)))
                };
                if p.dt == DType::F32 {
                    let xs = taps().map(|(ky, kx)| ldf(mem, p.inp, at(w, c, bh, ky, bw, kx)));
                    let y = if p.kind == 0 {
                        xs.reduce(|best, x| if x > best { x } else { best })
                            .unwrap_or(0.0)
                    } else {
                        xs.fold(0.0f32, |s, x| s + x) / divisor as f32
                    };
                    stf(mem, p.out, oi, y);
                } else {
                    let xs = taps().map(|(ky, kx)| ldq(mem, p.dt, p.inp, at(w, c, bh, ky, bw, kx)));
                    let y = if p.kind == 0 {
                        xs.max().unwrap_or(0)
                    } else {
                        let s = xs.fold(0i32, |s, x| s.wrapping_add(x));
                        requant(p.dt, s as f32 / divisor as f32, 0, i32::MIN, i32::MAX)
                    };
                    stq(mem, p.dt, p.out, oi, y);
                }
            }
        }
    }
}
