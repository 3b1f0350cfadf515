//! The direct convolution on AVX-512 (`x86-64-v4`): 16 channels per `zmm`, 16 pixels in `zmm0..16`, the
//! weights in `zmm16`/`zmm17`, the clamp bounds in `zmm27`/`zmm28` (the transpose clobbers `zmm16..32`).

use super::Regs;
use crate::kernel::conv::ConvDirect;
use crate::x86::isa::Avx512;

const REGS: Regs = Regs {
    weights: 16,
    bcast: 18,
    clamp: [27, 28],
};

/// Assembles the kernel; `Err` where `check` fails.
pub fn assemble(s: &ConvDirect) -> Result<Vec<u8>, String> {
    super::assemble::<Avx512>(s, &REGS)
}

#[cfg(all(test, target_arch = "x86_64", target_os = "linux"))]
mod tests {
    use super::super::tests::check_rows;
    use crate::x86::test_exec::skip_without_avx512;

    /// Bitwise against the fma chain.
    #[test]
    fn rows_match_the_fma_chain() {
        if skip_without_avx512("direct convolution kernel") {
            return;
        }
        check_rows(super::assemble);
    }
}
