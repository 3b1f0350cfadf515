//! AVX2+FMA transforms of the Winograd F(2x2, 3x3) and F(4x4, 3x3) convolutions (`ops/winograd.rs`) for
//! `x86-64-v3`, eight tiles per `ymm`, with the AVX-512 kernels' contract (`winograd_x86.rs`,
//! `winograd4_x86.rs`) except that each is assembled for one tile row's tile count: blocks of eight tiles in a
//! loop, then the last block's tiles unrolled (AVX2 has no store masks, and `vmaskmovps` stores are slow on
//! some AMD cores), so the count argument is not read.
//!
//! Input transform `fn(p: *const f32, v: *mut f32, tiles: u64)`: per patch row, the eight tiles' columns come
//! from 128-bit loads (`vmovups` + `vinsertf128`: tiles t and t + 4 in one register) and a 4x8 transpose
//! (`vunpck[lh]ps`, `vunpck[lh]pd`; F(2x2): `vshufps` of the even and odd lanes); `Bᵀ` along the row into a
//! stack buffer, then `Bᵀ` down each column, storing element ξ = α·a + b at `v + ξ·v_stride`. F(4x4) uses the
//! `Bᵀ` of `winograd4_x86.rs` with the same instructions in the same order, so its results are bitwise those
//! of the AVX-512 kernel; F(2x2) applies its `Bᵀ` along the rows first (the AVX-512 kernel down the columns
//! first), which rounds differently within one ulp per add.
//!
//! Output transform `fn(m: *const f32, y: *mut f32, bias: *const f32, tiles: u64)`: `Aᵀ` down each column of
//! the α² products (the last block's loads under a `vmaskmovps` mask, so none passes the tile row) into the
//! stack buffer, then per output row `Aᵀ` along it, `bias[0]`, the NaN-keeping clamp, the tiles' columns
//! interleaved (`vunpck[lh]ps`/`pd`, `vperm2f128`) and stored up to `cols`. The same arithmetic as the AVX-512
//! kernels (bitwise for both tile sizes).

use super::winograd4_x86::{epilogue, prologue};
use super::winograd_x86::{disp, WinoIn, WinoOut};
use super::{xmm_of, YMM};
use iced_x86::code_asm::*;
use std::array::from_fn;

type R = AsmRegisterYmm;

/// F(4x4)'s `y = Bᵀ x` in place (`winograd4_x86::bt`'s instructions): `t` four temporaries, `c4` / `c5` the
/// broadcast 4 and 5; returns where y0..y5 are.
fn bt4(a: &mut CodeAssembler, x: [R; 6], t: [R; 4], c4: R, c5: R) -> Result<[R; 6], IcedError> {
    let [p, q, r, s] = t;
    a.vmovaps(p, x[4])?;
    a.vfnmadd231ps(p, x[2], c5)?;
    a.vfmadd231ps(p, x[0], c4)?;
    a.vmovaps(q, x[5])?;
    a.vfnmadd231ps(q, x[3], c5)?;
    a.vfmadd231ps(q, x[1], c4)?;
    a.vmovaps(r, x[4])?;
    a.vfnmadd231ps(r, x[2], c4)?;
    a.vmovaps(s, x[3])?;
    a.vfnmadd231ps(s, x[1], c4)?;
    a.vaddps(x[0], r, s)?;
    a.vsubps(x[5], r, s)?;
    a.vsubps(r, x[4], x[2])?;
    a.vsubps(s, x[3], x[1])?;
    a.vaddps(s, s, s)?;
    a.vaddps(x[1], r, s)?;
    a.vsubps(x[2], r, s)?;
    Ok([p, x[0], x[5], x[1], x[2], q])
}

/// F(2x2)'s `y = Bᵀ x` (`[x0 − x2, x1 + x2, x2 − x1, x1 − x3]`) into `t`.
fn bt2(a: &mut CodeAssembler, x: [R; 4], t: [R; 4]) -> Result<[R; 4], IcedError> {
    a.vsubps(t[0], x[0], x[2])?;
    a.vaddps(t[1], x[1], x[2])?;
    a.vsubps(t[2], x[2], x[1])?;
    a.vsubps(t[3], x[1], x[3])?;
    Ok(t)
}

/// F(4x4)'s `y = Aᵀ x` in place (`winograd4_x86::at`'s arithmetic): `t` two temporaries, `c` the broadcast 2,
/// 4 and 8; returns where y0..y3 are.
fn at4(a: &mut CodeAssembler, x: [R; 6], t: [R; 2], c: [R; 3]) -> Result<[R; 4], IcedError> {
    let [s1, s2] = t;
    let [c2, c4, c8] = c;
    a.vaddps(s1, x[1], x[2])?;
    a.vsubps(x[1], x[1], x[2])?;
    a.vaddps(s2, x[3], x[4])?;
    a.vsubps(x[3], x[3], x[4])?;
    a.vaddps(x[0], x[0], s1)?;
    a.vaddps(x[0], x[0], s2)?;
    a.vaddps(x[5], x[5], x[1])?;
    a.vfmadd231ps(x[5], x[3], c8)?;
    a.vfmadd231ps(x[1], x[3], c2)?;
    a.vfmadd231ps(s1, s2, c4)?;
    Ok([x[0], x[1], s1, x[5]])
}

/// F(2x2)'s `y = Aᵀ x` (`[(x0 + x1) + x2, (x1 − x2) − x3]`) into `t`.
fn at2(a: &mut CodeAssembler, x: [R; 4], t: [R; 2]) -> Result<[R; 2], IcedError> {
    a.vaddps(t[0], x[0], x[1])?;
    a.vaddps(t[0], t[0], x[2])?;
    a.vsubps(t[1], x[1], x[2])?;
    a.vsubps(t[1], t[1], x[3])?;
    Ok(t)
}

/// The blocks of a tile row of `tiles` (≥ 1) tiles: whole blocks of eight in a counted loop (`ecx`), `rdi` and
/// `rsi` advancing by `step` bytes after each, then the last block (1 to 8 tiles) unrolled; `block(a, n,
/// last)` emits one block of `n` tiles.
fn blocks(
    a: &mut CodeAssembler,
    tiles: usize,
    step: [usize; 2],
    mut block: impl FnMut(&mut CodeAssembler, usize, bool) -> Result<(), IcedError>,
) -> Result<(), IcedError> {
    let full = (tiles - 1) / 8;
    if full > 0 {
        let mut top = a.create_label();
        a.mov(ecx, full as u32)?;
        a.set_label(&mut top)?;
        block(a, 8, false)?;
        a.add(rdi, step[0] as i32)?;
        a.add(rsi, step[1] as i32)?;
        a.dec(ecx)?;
        a.jnz(top)?;
    }
    block(a, tiles - 8 * full, true)
}

fn check_tile(tile: usize) -> Result<usize, String> {
    match tile {
        2 | 4 => Ok(tile + 2),
        _ => Err(format!("Winograd tile side {tile} (2 or 4)")),
    }
}

/// Assembles the input transform of tiles of side `tile` (2 or 4) for tile rows of `tiles` tiles.
pub fn assemble_in(tile: usize, s: &WinoIn, tiles: usize) -> Result<Vec<u8>, String> {
    let e = |x: IcedError| x.to_string();
    let alpha = check_tile(tile)?;
    let row = (0..alpha)
        .map(|i| disp(i * s.pw))
        .collect::<Result<Vec<_>, _>>()?;
    let vs = (0..alpha * alpha)
        .map(|x| disp(x * s.v_stride))
        .collect::<Result<Vec<_>, _>>()?;
    // The furthest float a block reads: 8·tile + 4 (F(4x4)) or + 2 (F(2x2)) past its first, within the row.
    disp(8 * tile * tiles.div_ceil(8) + (alpha - 1) * s.pw + 8)?;
    let buf = (alpha * alpha * 32) as i32;
    let mut a = CodeAssembler::new(64).map_err(e)?;
    prologue(&mut a, 32, buf).map_err(e)?;
    let (c4, c5) = (ymm14, ymm15);
    if tile == 4 {
        super::broadcast_bits_ymm(&mut a, c4, 4.0f32.to_bits()).map_err(e)?;
        super::broadcast_bits_ymm(&mut a, c5, 5.0f32.to_bits()).map_err(e)?;
    }
    let slot = |i: usize, b: usize| ptr(rsp + (32 * (alpha * i + b)) as i32);
    // One block of `n` tiles from `rdi` into `rsi`.
    let block = |a: &mut CodeAssembler, n: usize| -> Result<(), IcedError> {
        for (i, &r) in row.iter().enumerate() {
            // Columns j of tiles 0..8 of patch row i, then Bᵀ along the row into slots (i, 0..α).
            let half = |a: &mut CodeAssembler, reg: R, lo: i32, hi: i32| -> Result<(), IcedError> {
                a.vmovups(xmm_of(reg), xmmword_ptr(rdi + r + 4 * lo))?;
                a.vinsertf128(reg, reg, xmmword_ptr(rdi + r + 4 * hi), 1)
            };
            let y: Vec<R> = if tile == 4 {
                // L_q = floats 4q.. | 4q + 16.. (tiles q and q + 4), q = 0..5.
                for (q, &reg) in YMM[..5].iter().enumerate() {
                    half(a, reg, 4 * q as i32, 4 * q as i32 + 16)?;
                }
                a.vunpcklps(ymm5, ymm0, ymm1)?;
                a.vunpckhps(ymm6, ymm0, ymm1)?;
                a.vunpcklps(ymm7, ymm2, ymm3)?;
                a.vunpckhps(ymm8, ymm2, ymm3)?;
                a.vunpcklps(ymm9, ymm1, ymm2)?;
                a.vunpcklps(ymm10, ymm3, ymm4)?;
                a.vunpcklpd(ymm0, ymm5, ymm7)?;
                a.vunpckhpd(ymm1, ymm5, ymm7)?;
                a.vunpcklpd(ymm2, ymm6, ymm8)?;
                a.vunpckhpd(ymm3, ymm6, ymm8)?;
                a.vunpcklpd(ymm4, ymm9, ymm10)?;
                a.vunpckhpd(ymm5, ymm9, ymm10)?;
                let x = [ymm0, ymm1, ymm2, ymm3, ymm4, ymm5];
                bt4(a, x, [ymm6, ymm7, ymm8, ymm9], c4, c5)?.to_vec()
            } else {
                // Floats 0..3 | 8..11 and 4..7 | 12..15 give columns 0 and 1; from float 2, columns 2 and 3.
                half(a, ymm0, 0, 8)?;
                half(a, ymm1, 4, 12)?;
                half(a, ymm2, 2, 10)?;
                half(a, ymm3, 6, 14)?;
                a.vshufps(ymm4, ymm0, ymm1, 0x88)?;
                a.vshufps(ymm5, ymm0, ymm1, 0xDD)?;
                a.vshufps(ymm6, ymm2, ymm3, 0x88)?;
                a.vshufps(ymm7, ymm2, ymm3, 0xDD)?;
                bt2(a, [ymm4, ymm5, ymm6, ymm7], [ymm0, ymm1, ymm2, ymm3])?.to_vec()
            };
            for (b, &yb) in y.iter().enumerate() {
                a.vmovaps(slot(i, b), yb)?;
            }
        }
        for b in 0..alpha {
            for (i, &xi) in YMM[..alpha].iter().enumerate() {
                a.vmovaps(xi, slot(i, b))?;
            }
            let y = if tile == 4 {
                bt4(a, from_fn(|i| YMM[i]), [ymm6, ymm7, ymm8, ymm9], c4, c5)?.to_vec()
            } else {
                bt2(a, from_fn(|i| YMM[i]), [ymm4, ymm5, ymm6, ymm7])?.to_vec()
            };
            for (ai, &ya) in y.iter().enumerate() {
                super::store_head_ymm(a, ptr(rsi + vs[alpha * ai + b]), ya, n, ymm13)?;
            }
        }
        Ok(())
    };
    if tiles > 0 {
        blocks(&mut a, tiles, [32 * tile, 32], |a, n, _| block(a, n)).map_err(e)?;
    }
    epilogue(&mut a).map_err(e)?;
    a.assemble(0).map_err(e)
}

/// Assembles the output transform of tiles of side `tile` (2 or 4): `cols / tile` tiles (rounded up) per call.
pub fn assemble_out(tile: usize, s: &WinoOut) -> Result<Vec<u8>, String> {
    let e = |x: IcedError| x.to_string();
    let alpha = check_tile(tile)?;
    if !(1..=tile).contains(&s.rows) || s.cols == 0 {
        return Err(format!(
            "Winograd output rows or columns out of range: {s:?}"
        ));
    }
    let tiles = s.cols.div_ceil(tile);
    let ms = (0..alpha * alpha)
        .map(|x| disp(x * s.m_stride))
        .collect::<Result<Vec<_>, _>>()?;
    let rows = (0..s.rows)
        .map(|p| disp(p * s.cols))
        .collect::<Result<Vec<_>, _>>()?;
    disp(8 * tile * tiles.div_ceil(8) + s.rows * s.cols)?;
    let buf = (tile * alpha * 32) as i32;
    let mut a = CodeAssembler::new(64).map_err(e)?;
    let mut table = a.create_label();
    prologue(&mut a, 32, buf).map_err(e)?;
    // ymm8..10: 2, 4, 8; ymm11 bias, ymm12 lo, ymm13 hi, ymm14 the last block's load mask, ymm15 scratch.
    let c = [ymm8, ymm9, ymm10];
    if tile == 4 {
        for (&reg, v) in c.iter().zip([2.0f32, 4.0, 8.0]) {
            super::broadcast_bits_ymm(&mut a, reg, v.to_bits()).map_err(e)?;
        }
    }
    if s.bias {
        a.vbroadcastss(ymm11, dword_ptr(rdx)).map_err(e)?;
    }
    let (lo, hi) = super::clamp_bounds_ymm(&mut a, (s.lo, s.hi), [ymm12, ymm13]).map_err(e)?;
    // Whole blocks in a loop, then the last (1 to 8 tiles, up to `cols`) unrolled.
    let full = (tiles - 1) / 8;
    let last = tiles - 8 * full;
    if last < 8 {
        a.vmovups(ymm14, ptr(table)).map_err(e)?;
    }
    let slot = |p: usize, b: usize| ptr(rsp + (32 * (alpha * p + b)) as i32);
    // One block of `n` tiles from `rdi`, `width` output columns at `rsi`.
    let block = |a: &mut CodeAssembler, n: usize, width: usize| -> Result<(), IcedError> {
        let x = &YMM[..alpha];
        for b in 0..alpha {
            for (ai, &xa) in x.iter().enumerate() {
                let at = ptr(rdi + ms[alpha * ai + b]);
                if n < 8 {
                    a.vmaskmovps(xa, ymm14, at)?;
                } else {
                    a.vmovups(xa, at)?;
                }
            }
            let y = if tile == 4 {
                at4(a, from_fn(|i| YMM[i]), [ymm6, ymm7], c)?.to_vec()
            } else {
                at2(a, from_fn(|i| YMM[i]), [ymm4, ymm5])?.to_vec()
            };
            for (p, &yp) in y.iter().enumerate().take(s.rows) {
                a.vmovaps(slot(p, b), yp)?;
            }
        }
        for (p, &row) in rows.iter().enumerate() {
            for (b, &xb) in x.iter().enumerate() {
                a.vmovaps(xb, slot(p, b))?;
            }
            let y = if tile == 4 {
                at4(a, from_fn(|i| YMM[i]), [ymm6, ymm7], c)?.to_vec()
            } else {
                at2(a, from_fn(|i| YMM[i]), [ymm4, ymm5])?.to_vec()
            };
            for &yq in &y {
                if s.bias {
                    a.vaddps(yq, yq, ymm11)?;
                }
                super::clamp_keep_nan(a, yq, lo, hi)?;
            }
            // Output floats tile·t + q of the block, in memory order.
            let out: Vec<R> = if tile == 4 {
                let [y0, y1, y2, y3] = [y[0], y[1], y[2], y[3]];
                let [u0, u1, u2, u3] = [ymm2, ymm3, ymm4, ymm7];
                a.vunpcklps(u0, y0, y1)?;
                a.vunpckhps(u1, y0, y1)?;
                a.vunpcklps(u2, y2, y3)?;
                a.vunpckhps(u3, y2, y3)?;
                // [t0 | t4], [t1 | t5], [t2 | t6], [t3 | t7], then pairs of tiles.
                let [o0, o1, o2, o3] = [y0, y1, y2, y3];
                a.vunpcklpd(o0, u0, u2)?;
                a.vunpckhpd(o1, u0, u2)?;
                a.vunpcklpd(o2, u1, u3)?;
                a.vunpckhpd(o3, u1, u3)?;
                a.vperm2f128(u0, o0, o1, 0x20)?;
                a.vperm2f128(u1, o2, o3, 0x20)?;
                a.vperm2f128(u2, o0, o1, 0x31)?;
                a.vperm2f128(u3, o2, o3, 0x31)?;
                vec![u0, u1, u2, u3]
            } else {
                let [u0, u1] = [ymm2, ymm3];
                a.vunpcklps(u0, y[0], y[1])?;
                a.vunpckhps(u1, y[0], y[1])?;
                a.vperm2f128(y[0], u0, u1, 0x20)?;
                a.vperm2f128(y[1], u0, u1, 0x31)?;
                vec![y[0], y[1]]
            };
            for (q, &w) in out.iter().enumerate() {
                let left = width.saturating_sub(8 * q);
                if left > 0 {
                    super::store_head_ymm(a, ptr(rsi + row + 32 * q as i32), w, left, ymm15)?;
                }
            }
        }
        Ok(())
    };
    blocks(&mut a, tiles, [32, 32 * tile], |a, n, last| {
        block(
            a,
            n,
            if last {
                s.cols - 8 * tile * full
            } else {
                8 * tile
            },
        )
    })
    .map_err(e)?;
    epilogue(&mut a).map_err(e)?;
    a.set_label(&mut table).map_err(e)?;
    let mask: Vec<u8> = (0..8)
        .flat_map(|l| (if l < last { u32::MAX } else { 0 }).to_le_bytes())
        .collect();
    a.db(&mask).map_err(e)?;
    a.assemble(0).map_err(e)
}

#[cfg(all(test, target_arch = "x86_64", target_os = "linux"))]
mod tests;
