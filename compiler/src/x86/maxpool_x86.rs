//! The AVX-512 separable 3x3 stride-2 max pooling kernel with a one-pixel top and left pad (the pooling after
//! a ResNet's stem). One call pools one NCHW plane, an output row at a time: the window's (up to) three input
//! rows are reduced to one row vertically (16 columns per `zmm`), then each output vector of 16 takes its even
//! and odd columns from two such vectors with `vpermt2ps` and the odd column left of each output with `valignd`
//! from the previous vector: three maxima per output vector instead of nine stride-2 gathers. Padding is
//! −∞ — columns past the row come from masked loads that leave −∞ in their lanes, rows outside the plane are
//! left out of the rows the code of the first and last output rows reads — so no padded copy is needed.
//!
//! Every maximum is Cranelift's `fmax` (`max_into`: NaN propagates, +0 beats −0), so the result is the same
//! value as the window's maximum in any order, bitwise for every non-NaN output.
//!
//! `fn(x: *const f32, out: *mut f32)` (System V): `x` the input plane, `out` the output plane.

use super::disp;
use crate::kernel::pool::MaxPool3s2;
use iced_x86::code_asm::*;

/// Assembles the kernel; `Err` for a zero size or displacements that do not fit.
pub fn assemble(s: &MaxPool3s2) -> Result<Vec<u8>, String> {
    let e = |x: IcedError| x.to_string();
    let name = "max pooling";
    let [h, w] = s.hw;
    let [oh, ow] = s.out;
    if h == 0 || w == 0 || oh == 0 || ow == 0 {
        return Err(format!("{name}: unsupported shape {s:?}"));
    }
    let chunks = ow.div_ceil(16);
    disp(name, (32 * chunks + 3 * w).max(2 * w + ow))?;
    let mut a = CodeAssembler::new(64).map_err(e)?;
    let (mut even, mut odd) = (a.create_label(), a.create_label());
    // zmm31 −∞, zmm30 / zmm29 the even / odd lane indices.
    super::broadcast_bits(&mut a, zmm31, f32::NEG_INFINITY.to_bits()).map_err(e)?;
    a.vmovups(zmm30, zmmword_ptr(even)).map_err(e)?;
    a.vmovups(zmm29, zmmword_ptr(odd)).map_err(e)?;
    output_rows(&mut a, s, out_row)?;
    a.vzeroupper().map_err(e)?;
    a.ret().map_err(e)?;
    for (label, first) in [(&mut even, 0u32), (&mut odd, 1)] {
        a.set_label(label).map_err(e)?;
        let idx: Vec<u8> = (0..16u32)
            .flat_map(|i| (2 * i + first).to_le_bytes())
            .collect();
        a.db(&idx).map_err(e)?;
    }
    a.assemble(0).map_err(e)
}

/// The output rows of a plane, for both kernel sets: `rdi` starts at the input row above output row oy's
/// centre row (row 2·oy − 1, one row before the plane for oy = 0, never read there), `rsi` at output row oy;
/// `out_row(a, rows)` emits one output row from the input rows `rows` (offsets from `rdi`'s row). Output rows
/// whose three rows are all inside run in a counted loop (`rdx`), the others unrolled with the rows they have.
pub(super) fn output_rows(
    a: &mut CodeAssembler,
    s: &MaxPool3s2,
    out_row: impl Fn(&mut CodeAssembler, &MaxPool3s2, &[usize]) -> Result<(), IcedError>,
) -> Result<(), String> {
    let e = |x: IcedError| x.to_string();
    let name = "max pooling";
    let [h, w] = s.hw;
    let [oh, ow] = s.out;
    a.sub(rdi, disp(name, w)?).map_err(e)?;
    let full_hi = (h.saturating_sub(2) / 2).min(oh - 1);
    let mut oy = 0;
    while oy < oh {
        let looped = oy >= 1 && oy <= full_hi;
        let count = if looped { full_hi - oy + 1 } else { 1 };
        let mut top = a.create_label();
        if looped {
            a.mov(rdx, count as u64).map_err(e)?;
            a.set_label(&mut top).map_err(e)?;
            out_row(a, s, &[0, 1, 2]).map_err(e)?;
        } else {
            out_row(a, s, &s.rows(oy)).map_err(e)?;
        }
        a.add(rdi, disp(name, 2 * w)?).map_err(e)?;
        a.add(rsi, disp(name, ow)?).map_err(e)?;
        if looped {
            a.dec(rdx).map_err(e)?;
            a.jnz(top).map_err(e)?;
        }
        oy += count;
    }
    Ok(())
}

/// One output row from the input rows `rows` (offsets from `rdi`'s row): per 16 outputs, the vertical maxima
/// of input columns `32q .. 32q + 32` in zmm0 / zmm1, their even and odd columns in zmm3 / zmm4, the odd column
/// left of each output (zmm5) from the previous odd vector (zmm28, −∞ at the row's start).
fn out_row(a: &mut CodeAssembler, s: &MaxPool3s2, rows: &[usize]) -> Result<(), IcedError> {
    let [_, w] = s.hw;
    let ow = s.out[1];
    let d = |floats: usize| i32::try_from(floats * 4).unwrap_or(0);
    a.vmovaps(zmm28, zmm31)?;
    for q in 0..ow.div_ceil(16) {
        for (half, v) in [zmm0, zmm1].into_iter().enumerate() {
            let col = 32 * q + 16 * half;
            let n = w.saturating_sub(col).min(16);
            if n == 0 || rows.is_empty() {
                a.vmovaps(v, zmm31)?;
                continue;
            }
            if n < 16 {
                a.mov(eax, (1u32 << n) - 1)?;
                a.kmovw(k1, eax)?;
            }
            for (i, &r) in rows.iter().enumerate() {
                let dst = if i == 0 { v } else { zmm2 };
                let src = zmmword_ptr(rdi + d(r * w + col));
                if n < 16 {
                    a.vmovaps(dst, zmm31)?;
                    a.vmovups(dst.k1(), src)?;
                } else {
                    a.vmovups(dst, src)?;
                }
                if i > 0 {
                    super::max_into(a, v, zmm2)?;
                }
            }
        }
        a.vmovaps(zmm3, zmm0)?;
        a.vpermt2ps(zmm3, zmm30, zmm1)?;
        a.vmovaps(zmm4, zmm0)?;
        a.vpermt2ps(zmm4, zmm29, zmm1)?;
        // Lane j: odd column j − 1 (lane 15 of the previous odd vector for j = 0).
        a.valignd(zmm5, zmm4, zmm28, 15)?;
        a.vmovaps(zmm28, zmm4)?;
        super::max_into(a, zmm5, zmm3)?;
        super::max_into(a, zmm5, zmm4)?;
        let n = (ow - 16 * q).min(16);
        let dst = zmmword_ptr(rsi + d(16 * q));
        if n < 16 {
            a.mov(eax, (1u32 << n) - 1)?;
            a.kmovw(k2, eax)?;
            a.vmovups(dst.k2(), zmm5)?;
        } else {
            a.vmovups(dst, zmm5)?;
        }
    }
    Ok(())
}

#[cfg(all(test, target_arch = "x86_64", target_os = "linux"))]
pub(super) mod tests {
    use super::super::test_exec::{exec, fmax, guarded, pattern, skip_without_avx512};
    use super::*;

    type Kernel = extern "sysv64" fn(*const f32, *mut f32);

    #[test]
    fn planes_match_the_window_maximum() {
        if skip_without_avx512("max pooling kernel") {
            return;
        }
        check_planes(assemble);
    }

    /// A kernel assembled by `assemble` against the window maximum with `fmax` over the in-plane taps — odd and
    /// even sizes, rows past 8- and 16-column blocks, one-row and one-column planes, bottom/right windows partly
    /// outside (ceil mode) — with NaN and signed zeros in the input; input and output end on guard pages.
    pub(in crate::x86) fn check_planes(assemble: fn(&MaxPool3s2) -> Result<Vec<u8>, String>) {
        for (h, w, ceil) in [
            (112, 112, false),
            (9, 10, false),
            (9, 10, true),
            (1, 1, false),
            (2, 37, true),
            (5, 33, false),
            (6, 64, true),
            (7, 17, false),
            (4, 23, true),
        ] {
            // Pads 1 on every side: floor((n − 1) / 2) + 1 outputs, or the ceiling.
            let dim = |n: usize| {
                if ceil {
                    (n - 1).div_ceil(2) + 1
                } else {
                    (n - 1) / 2 + 1
                }
            };
            let (oh, ow) = (dim(h), dim(w));
            let s = MaxPool3s2 {
                hw: [h, w],
                out: [oh, ow],
            };
            let f: Kernel = unsafe { std::mem::transmute(exec(&assemble(&s).unwrap())) };
            let x = guarded(h * w);
            let xv: Vec<f32> = (0..h * w)
                .map(|i| match i % 29 {
                    3 => f32::NAN,
                    5 | 6 => 0.0,
                    7 | 8 => -0.0,
                    _ => pattern(i),
                })
                .collect();
            let o = guarded(oh * ow);
            // SAFETY: x holds the plane, o the output plane.
            unsafe {
                std::ptr::copy_nonoverlapping(xv.as_ptr(), x, xv.len());
                f(x, o);
            }
            let got = unsafe { std::slice::from_raw_parts(o, oh * ow) };
            for oy in 0..oh {
                for ox in 0..ow {
                    let mut want = f32::NEG_INFINITY;
                    for ky in 0..3 {
                        for kx in 0..3 {
                            let (y, xx) = ((2 * oy + ky) as isize - 1, (2 * ox + kx) as isize - 1);
                            if (0..h as isize).contains(&y) && (0..w as isize).contains(&xx) {
                                want = fmax(want, xv[y as usize * w + xx as usize]);
                            }
                        }
                    }
                    let g = got[oy * ow + ox];
                    assert!(
                        g.to_bits() == want.to_bits() || (g.is_nan() && want.is_nan()),
                        "{h}x{w} ceil {ceil} ({oy},{ox}): {g} vs {want}"
                    );
                }
            }
        }
    }
}
