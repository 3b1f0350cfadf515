//! The transposing epilogue on AVX-512 (`x86-64-v4`): 16 channels per call, 16x16 blocks; the block's pixels in
//! `k1` (`block_mask`, which takes `rcx`, so `r8` counts), the residual added under `k1` with zeroing, the clamp
//! bounds in `zmm27`/`zmm28` (the transpose's temporaries are dead by then), the rows stored under `k1`.

use super::{Pixels, TransposeOut};
use crate::x86::isa::{Avx512, Bounds, R};
use crate::x86::{block_mask, clamp_bounds};
use iced_x86::code_asm::*;

impl Pixels for Avx512 {
    type State = ();
    const COUNT: AsmRegister64 = r8;
    const ALWAYS_STEP_RESIDUAL: bool = false;
    fn setup(a: &mut CodeAssembler) -> R {
        a.mov(r8, rcx)
    }
    fn block_mask(a: &mut CodeAssembler) -> R {
        block_mask(a, k1, r8)
    }
    fn bounds(
        a: &mut CodeAssembler,
        s: &TransposeOut,
        _: (),
    ) -> Result<Bounds<AsmRegisterZmm>, IcedError> {
        clamp_bounds(a, (s.lo, s.hi), [zmm27, zmm28])
    }
    fn add_residual(a: &mut CodeAssembler, x: AsmRegisterZmm, disp: i32) -> R {
        a.vaddps(x.k1().z(), x, zmmword_ptr(rdx + disp))
    }
    fn store_out(a: &mut CodeAssembler, x: AsmRegisterZmm, disp: i32) -> R {
        a.vmovups(zmmword_ptr(rsi + disp).k1(), x)
    }
    fn finish(_: &mut CodeAssembler, _: &mut ()) -> R {
        Ok(())
    }
}

/// Assembles the epilogue for 16 channels; `Err` when the strides do not fit 32-bit displacements.
pub fn assemble(s: &TransposeOut) -> Result<Vec<u8>, String> {
    super::assemble::<Avx512>(s)
}

#[cfg(all(test, target_arch = "x86_64", target_os = "linux"))]
mod tests {
    use super::super::tests::check_transposing_epilogue;
    use crate::x86::test_exec::skip_without_avx512;

    /// Pixel tails, residual, clamp with NaN: bitwise.
    #[test]
    fn blocks_match_the_transpose() {
        if skip_without_avx512("AVX-512 transposing epilogue") {
            return;
        }
        check_transposing_epilogue(|s| super::assemble(s).unwrap(), 16);
    }
}
