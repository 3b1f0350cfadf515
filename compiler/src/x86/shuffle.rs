//! Lane shuffles the kernels share: the 8x8 `ymm` and 16x16 `zmm` transposes, the AVX2 partial store of a
//! vector's first lanes, and the 16-lane weight packing of the channel-blocked kernels.

use super::regs::{xmm_of, YMM, ZMM};
use iced_x86::code_asm::{AsmRegisterYmm, CodeAssembler};
use iced_x86::IcedError;

/// Transposes the 8x8 block of `ymm0..8` (row r in `ymm r`) into `ymm8..16` (column c in `ymm 8 + c`),
/// clobbering `ymm0..8`: pixels-by-channels to channels-by-pixels and back in the AVX2 kernels.
pub(crate) fn transpose8_ymm(a: &mut CodeAssembler) -> Result<(), IcedError> {
    let y = |i: usize| YMM[i];
    for p in 0..4 {
        a.vunpcklps(y(8 + 2 * p), y(2 * p), y(2 * p + 1))?;
        a.vunpckhps(y(9 + 2 * p), y(2 * p), y(2 * p + 1))?;
    }
    for q in 0..2 {
        let (t0, t1, t2, t3) = (y(8 + 4 * q), y(9 + 4 * q), y(10 + 4 * q), y(11 + 4 * q));
        a.vshufps(y(4 * q), t0, t2, 0x44)?;
        a.vshufps(y(4 * q + 1), t0, t2, 0xEE)?;
        a.vshufps(y(4 * q + 2), t1, t3, 0x44)?;
        a.vshufps(y(4 * q + 3), t1, t3, 0xEE)?;
    }
    for c in 0..4 {
        a.vperm2f128(y(8 + c), y(c), y(4 + c), 0x20)?;
        a.vperm2f128(y(12 + c), y(c), y(4 + c), 0x31)?;
    }
    Ok(())
}

/// Stores the first `n` (1..=8) lanes of `y` at `at` without touching the memory after them (AVX2 has no
/// store masks; `vmaskmovps` stores are slow on some AMD cores): a full store, or 4 + 2 + 1 lanes (`scratch`
/// clobbered).
pub(crate) fn store_head_ymm(
    a: &mut CodeAssembler,
    at: iced_x86::code_asm::AsmMemoryOperand,
    y: AsmRegisterYmm,
    n: usize,
    scratch: AsmRegisterYmm,
) -> Result<(), IcedError> {
    if n >= 8 {
        return a.vmovups(at, y);
    }
    let (mut x, mut at, mut n) = (xmm_of(y), at, n);
    if n >= 4 {
        a.vmovups(at, x)?;
        a.vextractf128(xmm_of(scratch), y, 1)?;
        (x, at, n) = (xmm_of(scratch), at + 16, n - 4);
    }
    if n >= 2 {
        a.vmovlps(at, x)?;
        if n == 3 {
            a.vextractps(at + 8, x, 2)?;
        }
    } else if n == 1 {
        a.vmovss(at, x)?;
    }
    Ok(())
}

/// Transposes the 16x16 block held in `zmm0..zmm15` (row r in `zmm r`) in place, so that `zmm c` holds column
/// c: `vunpck[lh]ps`, `vunpck[lh]pd`, then two rounds of 128-bit lane shuffles; `zmm16..zmm31` are clobbered.
pub(crate) fn transpose16(a: &mut CodeAssembler) -> Result<(), IcedError> {
    let z = |i: usize| ZMM[i];
    for i in 0..8 {
        a.vunpcklps(z(16 + 2 * i), z(2 * i), z(2 * i + 1))?;
        a.vunpckhps(z(17 + 2 * i), z(2 * i), z(2 * i + 1))?;
    }
    for i in 0..4 {
        let t = |k: usize| z(16 + 4 * i + k);
        a.vunpcklpd(z(4 * i), t(0), t(2))?;
        a.vunpckhpd(z(4 * i + 1), t(0), t(2))?;
        a.vunpcklpd(z(4 * i + 2), t(1), t(3))?;
        a.vunpckhpd(z(4 * i + 3), t(1), t(3))?;
    }
    // u[4i + j] (zmm 4i + j) holds, in 128-bit lane L, column 4L + j of rows 4i .. 4i + 3.
    for j in 0..4 {
        a.vshuff32x4(z(16 + j), z(j), z(4 + j), 0x88)?;
        a.vshuff32x4(z(20 + j), z(j), z(4 + j), 0xdd)?;
        a.vshuff32x4(z(24 + j), z(8 + j), z(12 + j), 0x88)?;
        a.vshuff32x4(z(28 + j), z(8 + j), z(12 + j), 0xdd)?;
    }
    // Column c = 4L + j: lanes L of u[j], u[4 + j], u[8 + j], u[12 + j].
    for j in 0..4 {
        a.vshuff32x4(z(j), z(16 + j), z(24 + j), 0x88)?; // L = 0
        a.vshuff32x4(z(8 + j), z(16 + j), z(24 + j), 0xdd)?; // L = 2
        a.vshuff32x4(z(4 + j), z(20 + j), z(28 + j), 0x88)?; // L = 1
        a.vshuff32x4(z(12 + j), z(20 + j), z(28 + j), 0xdd)?; // L = 3
    }
    Ok(())
}

/// Rows of a row-major `[rows, k]` matrix packed in groups of 16 lanes for the channel-blocked kernels
/// (`depthwise_c16_x86.rs`: `[C/16, KH·KW, 16]`; `conv_direct/`: `[M/16, C·KH·KW, 16]`):
/// `out[g][t][l] = w[16·g + l][t]`, the rows past `rows` zero.
pub fn pack16(w: &[f32], rows: usize, k: usize) -> Vec<f32> {
    let mut out = vec![0.0; rows.next_multiple_of(16) * k];
    for r in 0..rows {
        for t in 0..k {
            out[(r / 16 * k + t) * 16 + r % 16] = w[r * k + t];
        }
    }
    out
}
