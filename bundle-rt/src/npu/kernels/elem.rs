//! The emulated kernels' element access: 32-bit loads and stores, f32, i32 and quantised elements, saturation,
//! round-half-to-even, requantisation and the NaN-keeping clamps.

use crate::npu::params::DType;

/// The u32 at byte `at` (0 outside memory, which checked kernels never reach).
pub(super) fn ld32(mem: &[u8], at: usize) -> u32 {
    crate::npu::regs::u32_at(mem, at).unwrap_or(0)
}

/// Stores the u32 at byte `at` (nothing outside memory).
pub(super) fn st32(mem: &mut [u8], at: usize, v: u32) {
    if let Some(d) = at.checked_add(4).and_then(|end| mem.get_mut(at..end)) {
        d.copy_from_slice(&v.to_le_bytes());
    }
}

/// f32 element `i` of the array at `base`.
pub(super) fn ldf(mem: &[u8], base: usize, i: usize) -> f32 {
    f32::from_bits(ld32(mem, base + 4 * i))
}

/// Stores f32 element `i` of the array at `base`.
pub(super) fn stf(mem: &mut [u8], base: usize, i: usize, v: f32) {
    st32(mem, base + 4 * i, v.to_bits());
}

/// i32 element `i` of the array at `base`.
pub(super) fn ldi(mem: &[u8], base: usize, i: usize) -> i32 {
    ld32(mem, base + 4 * i) as i32
}

/// Stores i32 element `i` of the array at `base`.
pub(super) fn sti(mem: &mut [u8], base: usize, i: usize, v: i32) {
    st32(mem, base + 4 * i, v as u32);
}

/// int8 activation element `i` (u8 for dtype 1, i8 for dtype 2) widened to i32.
pub(super) fn ldq(mem: &[u8], dt: DType, base: usize, i: usize) -> i32 {
    let byte = mem.get(base + i).copied().unwrap_or(0);
    match dt {
        DType::U8 => i32::from(byte),
        _ => i32::from(byte as i8),
    }
}

/// i8 weight element `i`.
pub(super) fn ldw(mem: &[u8], base: usize, i: usize) -> i32 {
    i32::from(mem.get(base + i).copied().unwrap_or(0) as i8)
}

/// Stores int8 output element `i`, saturated to the output type.
pub(super) fn stq(mem: &mut [u8], dt: DType, base: usize, i: usize, v: i32) {
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
