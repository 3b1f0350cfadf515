//! The AVX2 separable 3x3 stride-2 max pooling with a one-pixel top and left pad (`x86-64-v3`): the contract
//! and the algorithm of the AVX-512 kernel (`maxpool_x86.rs`) with eight outputs per `ymm`. Per output row the
//! window's (up to) three input rows are reduced vertically, sixteen columns in two `ymm`; `vshufps` +
//! `vpermpd` give their even and odd columns, and the odd column left of each output is the odd vector rotated
//! by one lane (`vpermps`) with lane 0 from the previous one (`vblendps`). Columns past the row are −∞ (loads
//! under `vmaskmovps` masks blended with −∞), rows outside the plane are left out, stores past the row are
//! split into 4 + 2 + 1 lanes (`store_head_ymm`): nothing outside the planes is read or written.
//!
//! Every maximum is Cranelift's `fmax` (NaN propagates, +0 beats −0): `vmaxps` both ways, their AND (which
//! picks +0 from a pair of zeros), and `acc + x` in unordered lanes.
//!
//! `fn(x: *const f32, out: *mut f32)` (System V): `x` the input plane, `out` the output plane.

use super::maxpool_x86::output_rows;

use super::{disp, store_head_ymm};
use crate::kernel::pool::MaxPool3s2;
use iced_x86::code_asm::*;

/// `acc = fmax(acc, x)` (clobbers ymm8–ymm10).
fn fmax_into(
    a: &mut CodeAssembler,
    acc: AsmRegisterYmm,
    x: AsmRegisterYmm,
) -> Result<(), IcedError> {
    a.vmaxps(ymm8, acc, x)?;
    a.vmaxps(ymm9, x, acc)?;
    a.vandps(ymm8, ymm8, ymm9)?;
    a.vcmpps(ymm10, acc, x, 3)?;
    a.vaddps(ymm9, acc, x)?;
    a.vblendvps(acc, ymm8, ymm9, ymm10)
}

/// Assembles the kernel; `Err` for a zero size or displacements that do not fit.
pub fn assemble(s: &MaxPool3s2) -> Result<Vec<u8>, String> {
    let e = |x: IcedError| x.to_string();
    let name = "max pooling";
    let [h, w] = s.hw;
    let [oh, ow] = s.out;
    if h == 0 || w == 0 || oh == 0 || ow == 0 {
        return Err(format!("{name}: unsupported shape {s:?}"));
    }
    disp(name, (16 * ow.div_ceil(8) + 3 * w).max(2 * w + ow))?;
    let mut a = CodeAssembler::new(64).map_err(e)?;
    let (mut masks, mut rot) = (a.create_label(), a.create_label());
    // ymm15 −∞, ymm14 the rotation indices [7, 0, 1, .., 6].
    super::broadcast_bits_ymm(&mut a, ymm15, f32::NEG_INFINITY.to_bits()).map_err(e)?;
    a.vmovups(ymm14, ptr(rot)).map_err(e)?;
    a.lea(r8, ptr(masks)).map_err(e)?;
    output_rows(&mut a, s, out_row)?;
    a.vzeroupper().map_err(e)?;
    a.ret().map_err(e)?;
    // Lane masks: the 8 dwords from `masks + 4·(8 − n)` have their first n lanes set.
    a.set_label(&mut masks).map_err(e)?;
    let m: Vec<u8> = (0..16)
        .flat_map(|l| (if l < 8 { u32::MAX } else { 0 }).to_le_bytes())
        .collect();
    a.db(&m).map_err(e)?;
    a.set_label(&mut rot).map_err(e)?;
    let idx: Vec<u8> = [7u32, 0, 1, 2, 3, 4, 5, 6]
        .iter()
        .flat_map(|i| i.to_le_bytes())
        .collect();
    a.db(&idx).map_err(e)?;
    a.assemble(0).map_err(e)
}

/// One output row from the input rows `rows` (offsets from `rdi`'s row): per 8 outputs, the vertical maxima of
/// input columns `16q .. 16q + 16` in ymm0 / ymm1, their even and odd columns in ymm3 / ymm4, the odd column
/// left of each output from the rotated odd vector with lane 0 from the previous one (ymm6, −∞ at the start).
fn out_row(a: &mut CodeAssembler, s: &MaxPool3s2, rows: &[usize]) -> Result<(), IcedError> {
    let [_, w] = s.hw;
    let ow = s.out[1];
    let d = |floats: usize| i32::try_from(floats * 4).unwrap_or(0);
    a.vmovaps(ymm6, ymm15)?;
    for q in 0..ow.div_ceil(8) {
        for (half, v) in [ymm0, ymm1].into_iter().enumerate() {
            let col = 16 * q + 8 * half;
            let n = w.saturating_sub(col).min(8);
            if n == 0 || rows.is_empty() {
                a.vmovaps(v, ymm15)?;
                continue;
            }
            if n < 8 {
                a.vmovups(ymm12, ptr(r8 + d(8 - n)))?;
            }
            for (i, &r) in rows.iter().enumerate() {
                let dst = if i == 0 { v } else { ymm2 };
                let src = ptr(rdi + d(r * w + col));
                if n < 8 {
                    a.vmaskmovps(ymm11, ymm12, src)?;
                    a.vblendvps(dst, ymm15, ymm11, ymm12)?;
                } else {
                    a.vmovups(dst, src)?;
                }
                if i > 0 {
                    fmax_into(a, v, ymm2)?;
                }
            }
        }
        // Even / odd columns: [0 2 8 10 | 4 6 12 14] and [1 3 9 11 | 5 7 13 15], then qwords in order.
        a.vshufps(ymm3, ymm0, ymm1, 0x88)?;
        a.vpermpd(ymm3, ymm3, 0xD8)?;
        a.vshufps(ymm4, ymm0, ymm1, 0xDD)?;
        a.vpermpd(ymm4, ymm4, 0xD8)?;
        // Lane j: odd column j − 1 (lane 7 of the previous odd vector for j = 0).
        a.vpermps(ymm7, ymm14, ymm4)?;
        a.vblendps(ymm5, ymm7, ymm6, 0x01)?;
        a.vmovaps(ymm6, ymm7)?;
        fmax_into(a, ymm5, ymm3)?;
        fmax_into(a, ymm5, ymm4)?;
        let n = (ow - 8 * q).min(8);
        store_head_ymm(a, ptr(rsi + d(8 * q)), ymm5, n, ymm13)?;
    }
    Ok(())
}

#[cfg(all(test, target_arch = "x86_64", target_os = "linux"))]
mod tests {
    use super::super::maxpool_x86::tests::check_planes;
    use super::super::test_exec::skip_without_avx2;
    use super::*;

    /// The kernel against the window maximum (`maxpool_x86`'s cases: NaN, signed zeros, guard pages).
    #[test]
    fn planes_match_the_window_maximum() {
        if skip_without_avx2("AVX2 max pooling kernel") {
            return;
        }
        check_planes(assemble);
    }
}
