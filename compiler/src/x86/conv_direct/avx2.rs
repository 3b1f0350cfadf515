//! The direct convolution on AVX2 (`x86-64-v3`): each block of 16 packed channels in two passes of eight per
//! `ymm`, 8 pixels in `ymm0..8`, the weights in `ymm8`/`ymm9`, the broadcasts in `ymm10`/`ymm11` (AVX2 has no
//! embedded broadcast), the clamp bounds in `ymm12`/`ymm13`; the transpose leaves the channels in `ymm8..16`.

use super::Regs;
use crate::kernel::conv::ConvDirect;
use crate::x86::isa::Avx2;

const REGS: Regs = Regs {
    weights: 8,
    bcast: 10,
    clamp: [12, 13],
};

/// Assembles the kernel; `Err` where `check` fails.
pub fn assemble(s: &ConvDirect) -> Result<Vec<u8>, String> {
    super::assemble::<Avx2>(s, &REGS)
}

#[cfg(all(test, target_arch = "x86_64", target_os = "linux"))]
mod tests {
    use super::super::tests::check_rows;
    use crate::x86::test_exec::skip_without_avx2;

    /// The AVX-512 kernel's cases, bitwise against the fma chain.
    #[test]
    fn rows_match_the_fma_chain() {
        if skip_without_avx2("AVX2 direct convolution kernel") {
            return;
        }
        check_rows(super::assemble);
    }
}
