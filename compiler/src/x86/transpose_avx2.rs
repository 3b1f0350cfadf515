//! The AVX2 transposing epilogue (`x86-64-v3`) of a convolution computed transposed, as `transpose_x86::assemble`
//! does it with `zmm`, for 8 channels per call: 8x8 blocks of `Cᵀ` transposed in registers, the residual rows
//! added and the clamp applied in the same order, a pixel tail loaded and stored with `vmaskmovps` under a
//! mask taken from a sliding window of ones and zeros. It is the base set of a fat bundle, whose lowering is
//! the AVX-512 set's. `fn(src: *const f32, out: *mut f32, residual: *const f32, pixels: u64)` (System V). The
//! block transpose of the gathering Transpose nodes is `block_transpose/`.

use super::transpose_x86::TransposeOut;
use super::{transpose8_ymm, YMM};
use iced_x86::code_asm::*;

/// Channels per call of [`assemble_out`].
pub const OUT_CHANNELS: usize = 8;

/// Assembles the transposing epilogue for 8 channels; `Err` when the strides do not fit 32-bit displacements.
pub fn assemble_out(s: &TransposeOut) -> Result<Vec<u8>, String> {
    let e = |x: IcedError| x.to_string();
    let disp = |floats: usize| super::disp("transposing epilogue", floats);
    let rows: Vec<i32> = (0..8).map(|r| disp(r * s.m)).collect::<Result<_, _>>()?;
    let outs: Vec<i32> = (0..8).map(|c| disp(c * s.p)).collect::<Result<_, _>>()?;
    let block = disp(8 * s.m)?;
    let mut a = CodeAssembler::new(64).map_err(e)?;
    let (mut top, mut done, mut window) = (a.create_label(), a.create_label(), a.create_label());
    // rdi: Cᵀ at (p0, c0); rsi: out at (c0, p0); rdx: residual at (c0, p0); rcx: pixels left.
    a.set_label(&mut top).map_err(e)?;
    a.test(rcx, rcx).map_err(e)?;
    a.jz(done).map_err(e)?;
    // 8 pixel rows of 8 channels (rows past the pixels are the scratch's padding: loaded, never stored).
    for (r, &off) in rows.iter().enumerate() {
        a.vmovups(YMM[r], ptr(rdi + off)).map_err(e)?;
    }
    transpose8_ymm(&mut a).map_err(e)?;
    // Channel c's 8 pixels are in ymm(8 + c); ymm0 and ymm1 take the clamp's bounds, ymm2 the pixel mask
    // (the lanes below min(pixels, 8): window + 32 - 4·n), ymm3 a residual row.
    let (lo, hi) = super::clamp_bounds_ymm(&mut a, (s.lo, s.hi), [ymm0, ymm1]).map_err(e)?;
    a.mov(rax, 8u64).map_err(e)?;
    a.cmp(rcx, rax).map_err(e)?;
    a.cmovb(rax, rcx).map_err(e)?;
    a.neg(rax).map_err(e)?;
    a.lea(r9, ptr(window)).map_err(e)?;
    a.vmovups(ymm2, ptr(r9 + rax * 4 + 32)).map_err(e)?;
    for (c, &off) in outs.iter().enumerate() {
        let x = YMM[8 + c];
        if s.residual {
            a.vmaskmovps(ymm3, ymm2, ptr(rdx + off)).map_err(e)?;
            a.vaddps(x, x, ymm3).map_err(e)?;
        }
        super::clamp_keep_nan(&mut a, x, lo, hi).map_err(e)?;
        a.vmaskmovps(ptr(rsi + off), ymm2, x).map_err(e)?;
    }
    a.add(rdi, block).map_err(e)?;
    a.add(rsi, 32).map_err(e)?;
    a.add(rdx, 32).map_err(e)?;
    a.sub(rcx, 8).map_err(e)?;
    a.jbe(done).map_err(e)?;
    a.jmp(top).map_err(e)?;
    a.set_label(&mut done).map_err(e)?;
    a.vzeroupper().map_err(e)?;
    a.ret().map_err(e)?;
    // Eight lanes of ones, then eight of zeros.
    a.set_label(&mut window).map_err(e)?;
    let lanes: Vec<u8> = (0..16)
        .flat_map(|l| u32::to_le_bytes(if l < 8 { u32::MAX } else { 0 }))
        .collect();
    a.db(&lanes).map_err(e)?;
    a.assemble(0).map_err(e)
}

#[cfg(all(test, target_arch = "x86_64", target_os = "linux"))]
mod tests {
    use super::super::transpose_x86::tests::check_transposing_epilogue;

    /// The AVX-512 epilogue's cases (pixel tails, residual, clamp with NaN), 8 channels per call, bitwise.
    #[test]
    fn epilogue_matches_the_transpose() {
        if !std::arch::is_x86_feature_detected!("avx2") {
            eprintln!("SKIPPED: AVX2 transposing epilogue (this CPU or OS cannot run it)");
            return;
        }
        check_transposing_epilogue(|s| super::assemble_out(s).unwrap(), super::OUT_CHANNELS);
    }
}
