//! The AVX2 direct convolution kernel of a network's stem (`x86-64-v3`): the contract, weight packing and
//! arithmetic of the AVX-512 kernel (`conv_direct_x86.rs`) with eight output channels per `ymm` and eight output
//! pixels of a row in eight accumulators. Each block of 16 packed channels is two passes of eight (the upper
//! half of each packed weight row the second); per tap the eight channels' weights are loaded once and each
//! pixel takes a `vbroadcastss` of its input and one `vfmadd231ps` (AVX2 has no embedded broadcast), over
//! (c, ky, kx) from +0.0 — the im2col GEMM's chain, bitwise. Then the bias add and the clamp (NaN kept), an 8x8
//! transpose (`vunpck[lh]ps`, `vshufps`, `vperm2f128`) so that each register holds one channel's eight pixels,
//! and eight stores, the last block's cut to its pixels (`store_head_ymm`): nothing past the row is written.
//!
//! `fn(x: *const f32, w: *const f32, bias: *const f32, out: *mut f32)` (System V), as the AVX-512 kernel's.
//! Saves and restores `rbx`, `r12`.

use super::conv_direct_x86::{assemble_blocks, channel_loop};

use super::{store_head_ymm, YMM};
use crate::kernel::conv::ConvDirect;
use iced_x86::code_asm::*;

/// Output pixels per block (the transpose's width).
const PIXELS: usize = 8;

/// Assembles the kernel; `Err` where `conv_direct_x86::check` fails.
pub fn assemble(s: &ConvDirect) -> Result<Vec<u8>, String> {
    assemble_blocks(s, PIXELS, 2, |a, half, n, plane_out| {
        pixel_block(a, s, half, n, plane_out)
    })
}

/// One block of `n` ≤ 8 output pixels for the eight channels of `half` of the 16-channel block: accumulators
/// `ymm0..8`, the tap weights alternating in `ymm8`/`ymm9`, the broadcasts in `ymm10`/`ymm11`, the clamp bounds
/// in `ymm12`/`ymm13`; then the transpose into `ymm8..16` and the stores.
fn pixel_block(
    a: &mut CodeAssembler,
    s: &ConvDirect,
    half: usize,
    n: usize,
    plane_out: usize,
) -> Result<(), IcedError> {
    let y = |i: usize| YMM[i];
    let d = |floats: usize| i32::try_from(floats * 4).unwrap_or(0);
    for j in 0..PIXELS {
        a.vxorps(y(j), y(j), y(j))?;
    }
    channel_loop(a, s, n, |a, t, off| {
        let wreg = y(8 + t % 2);
        a.vmovups(wreg, ptr(rax + d(t * 16 + 8 * half)))?;
        for (j, &o) in off.iter().enumerate() {
            let b = y(10 + j % 2);
            a.vbroadcastss(b, dword_ptr(rbx + o))?;
            a.vfmadd231ps(y(j), wreg, b)?;
        }
        Ok(())
    })?;
    let (lo, hi) = super::clamp_bounds_ymm(a, (s.lo, s.hi), [ymm12, ymm13])?;
    for j in 0..n {
        if s.bias {
            a.vaddps(y(j), y(j), ptr(rdx + d(8 * half)))?;
        }
        super::clamp_keep_nan(a, y(j), lo, hi)?;
    }
    // Rows j (pixels, lanes the channels) to rows c (channels, lanes the pixels).
    super::transpose8_ymm(a)?;
    for c in 0..8 {
        let dst = ptr(r10 + d(c * plane_out));
        store_head_ymm(a, dst, y(8 + c), n, ymm0)?;
    }
    Ok(())
}

#[cfg(all(test, target_arch = "x86_64", target_os = "linux"))]
mod tests {
    use super::super::conv_direct_x86::tests::check_rows;
    use super::super::test_exec::skip_without_avx2;
    use super::*;

    /// The AVX-512 kernel's cases, bitwise against the fma chain.
    #[test]
    fn rows_match_the_fma_chain() {
        if skip_without_avx2("AVX2 direct convolution kernel") {
            return;
        }
        check_rows(assemble);
    }
}
