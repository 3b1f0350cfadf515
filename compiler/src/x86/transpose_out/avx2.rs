//! The transposing epilogue on AVX2 (`x86-64-v3`, the base set of a fat bundle): 8 channels per call, 8x8 blocks;
//! after the transpose (columns in `ymm8..16`) the clamp bounds go to `ymm0`/`ymm1` and the block's pixel mask to
//! `ymm2`, read from a window of eight lanes of ones then eight of zeros placed after the code at
//! `window + 32 - 4·min(pixels, 8)`; the residual row is loaded into `ymm3` and the row stored with
//! `vmaskmovps` under that mask, so nothing past the row is read or written.

use super::{Pixels, TransposeOut};
use crate::x86::clamp_bounds_ymm;
use crate::x86::isa::{Avx2, Bounds, R};
use iced_x86::code_asm::*;

impl Pixels for Avx2 {
    type State = CodeLabel;
    const COUNT: AsmRegister64 = rcx;
    const ALWAYS_STEP_RESIDUAL: bool = true;
    fn setup(a: &mut CodeAssembler) -> Result<CodeLabel, IcedError> {
        Ok(a.create_label())
    }
    fn block_mask(_: &mut CodeAssembler) -> R {
        Ok(())
    }
    fn bounds(
        a: &mut CodeAssembler,
        s: &TransposeOut,
        window: CodeLabel,
    ) -> Result<Bounds<AsmRegisterYmm>, IcedError> {
        let bounds = clamp_bounds_ymm(a, (s.lo, s.hi), [ymm0, ymm1])?;
        a.mov(rax, 8u64)?;
        a.cmp(rcx, rax)?;
        a.cmovb(rax, rcx)?;
        a.neg(rax)?;
        a.lea(r9, ptr(window))?;
        a.vmovups(ymm2, ptr(r9 + rax * 4 + 32))?;
        Ok(bounds)
    }
    fn add_residual(a: &mut CodeAssembler, x: AsmRegisterYmm, disp: i32) -> R {
        a.vmaskmovps(ymm3, ymm2, ptr(rdx + disp))?;
        a.vaddps(x, x, ymm3)
    }
    fn store_out(a: &mut CodeAssembler, x: AsmRegisterYmm, disp: i32) -> R {
        a.vmaskmovps(ptr(rsi + disp), ymm2, x)
    }
    /// The window: eight lanes of ones, then eight of zeros.
    fn finish(a: &mut CodeAssembler, window: &mut CodeLabel) -> R {
        a.set_label(window)?;
        let lanes: Vec<u8> = (0..16)
            .flat_map(|l| u32::to_le_bytes(if l < 8 { u32::MAX } else { 0 }))
            .collect();
        a.db(&lanes)
    }
}

/// Channels per call of [`assemble`].
pub const CHANNELS: usize = 8;

/// Assembles the epilogue for 8 channels; `Err` when the strides do not fit 32-bit displacements.
pub fn assemble(s: &TransposeOut) -> Result<Vec<u8>, String> {
    super::assemble::<Avx2>(s)
}

#[cfg(all(test, target_arch = "x86_64", target_os = "linux"))]
mod tests {
    use super::super::tests::check_transposing_epilogue;
    use crate::x86::test_exec::skip_without_avx2;

    /// The AVX-512 epilogue's cases, 8 channels per call, bitwise.
    #[test]
    fn epilogue_matches_the_transpose() {
        if skip_without_avx2("AVX2 transposing epilogue") {
            return;
        }
        check_transposing_epilogue(|s| super::assemble(s).unwrap(), super::CHANNELS);
    }
}
