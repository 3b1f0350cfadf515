//! The norm rows on AVX2 (`x86-64-v3`, the default `--cpu`): two rows per step, row `r`'s sums in `ymm 2r` (the
//! Cranelift kernel's partials 0 and 1) and `ymm 2r+1` (2 and 3), its mean in `ymm 4+r`, its `1/σ` in
//! `ymm 6+r`; scratch `ymm8..13`, `+0.0` in `ymm13`. AVX2 has no store masks: a row's elements past its last
//! whole `ymm` go four at a time in an `xmm`, then one at a time.

use super::{finish_sums, NormRows, Rows, MEAN};
use crate::x86::isa::{Avx2, R};
use crate::x86::{XMM, YMM};
use iced_x86::code_asm::*;

impl Rows for Avx2 {
    const NAME: &'static str = "AVX2";
    const GROUP: usize = 2;
    const SUMS: usize = 2;
    const INV: usize = 6;
    const T: usize = 8;
    const ZERO: usize = 13;
    fn prologue(a: &mut CodeAssembler, _: &NormRows) -> R {
        a.vxorps(ymm13, ymm13, ymm13)
    }
    /// The halves of `ymm 2r` and `ymm 2r+1` are the partials.
    fn reduce(a: &mut CodeAssembler, s: &NormRows, r: usize, mean: Option<AsmRegisterXmm>) -> R {
        a.vextractf128(xmm9, YMM[2 * r], 1)?;
        a.vextractf128(xmm10, YMM[2 * r + 1], 1)?;
        let p = [XMM[2 * r], xmm9, XMM[2 * r + 1], xmm10];
        finish_sums(a, s, r, p, mean, [xmm12, xmm9])
    }
    /// Four floats in an `xmm`, then one at a time.
    fn tail(a: &mut CodeAssembler, s: &NormRows, g: usize) -> R {
        let rb = (s.len * 4) as i32;
        let t = xmm8;
        let mut j = s.len / 8 * 8;
        while j < s.len {
            let four = s.len - j >= 4;
            let off = (4 * j) as i32;
            for r in 0..g {
                let (xa, ya) = (rdi + (r as i32 * rb + off), rcx + (r as i32 * rb + off));
                let (mean, inv) = (XMM[MEAN + r], XMM[Self::INV + r]);
                if four {
                    a.vmovups(t, xmmword_ptr(xa))?;
                    a.vsubps(t, t, mean)?;
                    a.vmulps(t, t, inv)?;
                    a.vmulps(t, t, xmmword_ptr(rsi + off))?;
                    if s.bias {
                        a.vaddps(t, t, xmmword_ptr(rdx + off))?;
                    } else {
                        a.vaddps(t, t, xmm13)?;
                    }
                    a.vmovups(xmmword_ptr(ya), t)?;
                } else {
                    a.vmovss(t, dword_ptr(xa))?;
                    a.vsubss(t, t, mean)?;
                    a.vmulss(t, t, inv)?;
                    a.vmulss(t, t, dword_ptr(rsi + off))?;
                    if s.bias {
                        a.vaddss(t, t, dword_ptr(rdx + off))?;
                    } else {
                        a.vaddss(t, t, xmm13)?;
                    }
                    a.vmovss(dword_ptr(ya), t)?;
                }
            }
            j += if four { 4 } else { 1 };
        }
        Ok(())
    }
}

/// Assembles the row kernel of `s`.
pub fn assemble(s: &NormRows) -> Result<Vec<u8>, String> {
    super::assemble::<Avx2>(s)
}

#[cfg(all(test, target_arch = "x86_64", target_os = "linux"))]
mod tests {
    use super::super::tests::check_rows;
    use crate::x86::test_exec::skip_without_avx2;

    /// The AVX-512 kernel's checks: bitwise the Cranelift order, no access past the rows.
    #[test]
    fn rows_match_the_cranelift_order() {
        if skip_without_avx2("norm rows (AVX2)") {
            return;
        }
        check_rows(|s| super::assemble(s).unwrap());
    }
}
