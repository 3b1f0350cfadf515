//! The norm rows on AVX-512 (`x86-64-v4`): four rows per step, row `r`'s sums in `zmm r` (its four 128-bit
//! quarters are the four partials), its mean in `zmm 4+r`, its `1/σ` in `zmm 8+r`; scratch `zmm12..16`, `+0.0`
//! in `zmm16`. A row's last `len % 16` elements are loaded, normalised and stored under `k1` (set once in the
//! prologue), so nothing past the row is read or written.

use super::{finish_sums, NormRows, Rows, MEAN};
use crate::x86::isa::{Avx512, R};
use crate::x86::{XMM, ZMM};
use iced_x86::code_asm::*;

const T: AsmRegisterZmm = zmm12;

impl Rows for Avx512 {
    const NAME: &'static str = "AVX-512";
    const GROUP: usize = 4;
    const SUMS: usize = 1;
    const INV: usize = 8;
    const T: usize = 12;
    const ZERO: usize = 16;
    fn prologue(a: &mut CodeAssembler, s: &NormRows) -> R {
        a.vxorps(zmm16, zmm16, zmm16)?;
        let tail = s.len % 16;
        if tail > 0 {
            a.mov(eax, (1u32 << tail) - 1)?;
            a.kmovw(k1, eax)?;
        }
        Ok(())
    }
    /// The quarters of `zmm r` are the partials.
    fn reduce(a: &mut CodeAssembler, s: &NormRows, r: usize, mean: Option<AsmRegisterXmm>) -> R {
        let p = [XMM[r], xmm12, xmm13, xmm14];
        for (k, &pk) in p.iter().enumerate().skip(1) {
            a.vextractf32x4(pk, ZMM[r], k as u32)?;
        }
        finish_sums(a, s, r, p, mean, [xmm15, xmm12])
    }
    /// One masked vector per row.
    fn tail(a: &mut CodeAssembler, s: &NormRows, g: usize) -> R {
        if s.len.is_multiple_of(16) {
            return Ok(());
        }
        let rb = (s.len * 4) as i32;
        let off = (s.len / 16 * 64) as i32;
        for r in 0..g {
            a.vmovups(T.k1().z(), zmmword_ptr(rdi + off + r as i32 * rb))?;
            a.vsubps(T, T, ZMM[MEAN + r])?;
            a.vmulps(T, T, ZMM[Self::INV + r])?;
            a.vmulps(T.k1().z(), T, zmmword_ptr(rsi + off))?;
            if s.bias {
                a.vaddps(T.k1().z(), T, zmmword_ptr(rdx + off))?;
            } else {
                a.vaddps(T, T, zmm16)?;
            }
            a.vmovups(zmmword_ptr(rcx + off + r as i32 * rb).k1(), T)?;
        }
        Ok(())
    }
}

/// Assembles the row kernel of `s`.
pub fn assemble(s: &NormRows) -> Result<Vec<u8>, String> {
    super::assemble::<Avx512>(s)
}

#[cfg(all(test, target_arch = "x86_64", target_os = "linux"))]
mod tests {
    use super::super::tests::check_rows;
    use crate::x86::test_exec::skip_without_avx512;

    /// Bitwise the Cranelift order, no access past the rows.
    #[test]
    fn rows_match_the_cranelift_order() {
        if skip_without_avx512("norm rows") {
            return;
        }
        check_rows(|s| super::assemble(s).unwrap());
    }
}
