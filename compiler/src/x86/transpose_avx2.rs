//! AVX2 transposes (`x86-64-v3`), in two kernels.
//!
//! `assemble_out`: the transposing epilogue of a convolution computed transposed, as `transpose_x86::assemble`
//! does it with `zmm`, for 8 channels per call: 8x8 blocks of `Cᵀ` transposed in registers, the residual rows
//! added and the clamp applied in the same order, a pixel tail loaded and stored with `vmaskmovps` under a
//! mask taken from a sliding window of ones and zeros. It is the base set of a fat bundle, whose lowering is
//! the AVX-512 set's. `fn(src: *const f32, out: *mut f32, residual: *const f32, pixels: u64)` (System V).
//!
//! `assemble_block`: the gathering Transpose nodes' 2-D block transpose of 32-bit elements
//! (`ops::data::block_plan`; an attention's `Kᵀ`), as `transpose_x86::assemble_block` does it with `zmm`, in
//! 8x8 blocks transposed in registers (`kernels::transpose8_ymm`): `dst[c][r] = src[r][c]` for `r < rows`,
//! `c < cols`, both strided. A column tail is loaded with `vmaskmovps` (its lanes from a compile-time mask
//! after the code) and a row tail stored a lane group at a time (`store_head_ymm`), so nothing outside the two
//! matrices is read or written. The Cranelift transpose took 25.8 µs for a 128-token attention's `Kᵀ` (4
//! heads of 64), ten times the AVX-512 kernel's 2.6.
//!
//! `fn(src: *const u32, dst: *mut u32)` (System V).

use super::transpose_x86::{block_loops, BlockTranspose, TransposeOut};
use super::{store_head_ymm, transpose8_ymm, YMM};
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

/// Assembles a `BlockTranspose`; `Err` when a stride does not fit a 32-bit displacement.
pub fn assemble_block(s: &BlockTranspose) -> Result<Vec<u8>, String> {
    let e = |x: IcedError| x.to_string();
    let mut a = CodeAssembler::new(64).map_err(e)?;
    let mut mask = a.create_label();
    let tail_rows = s.rows % 8;
    block_loops(&mut a, s, 8, |a, loads, stores, tail_cols, tail_row| {
        let lanes = if tail_row { tail_rows } else { 8 };
        block(a, loads, stores, tail_cols.then_some(mask), lanes)
    })?;
    a.vzeroupper().map_err(e)?;
    a.ret().map_err(e)?;
    // The column tail's load mask: its lanes all ones.
    a.set_label(&mut mask).map_err(e)?;
    let lanes: Vec<u8> = (0..8)
        .flat_map(|l| u32::to_le_bytes(if l < s.cols % 8 { u32::MAX } else { 0 }))
        .collect();
    a.db(&lanes).map_err(e)?;
    a.assemble(0).map_err(e)
}

/// One block at `r10` (source) / `r11` (output): `loads.len()` source rows into `ymm0..` (the others keep
/// what they held: they become output lanes that are not stored), under the mask at `load_mask` when given
/// (held in `ymm15` until the transpose); `stores.len()` output rows of `lanes` lanes each.
fn block(
    a: &mut CodeAssembler,
    loads: &[i32],
    stores: &[i32],
    load_mask: Option<CodeLabel>,
    lanes: usize,
) -> Result<(), IcedError> {
    if let Some(mask) = load_mask {
        a.vmovups(ymm15, ptr(mask))?;
    }
    for (r, &off) in loads.iter().enumerate() {
        if load_mask.is_some() {
            a.vmaskmovps(YMM[r], ymm15, ptr(r10 + off))?;
        } else {
            a.vmovups(YMM[r], ptr(r10 + off))?;
        }
    }
    transpose8_ymm(a)?;
    for (c, &off) in stores.iter().enumerate() {
        store_head_ymm(a, ptr(r11 + off), YMM[8 + c], lanes, ymm0)?;
    }
    Ok(())
}

#[cfg(all(test, target_arch = "x86_64", target_os = "linux"))]
mod tests {
    use super::super::transpose_x86::tests::{check_block_transposes, check_transposing_epilogue};

    /// The AVX-512 epilogue's cases (pixel tails, residual, clamp with NaN), 8 channels per call, bitwise.
    #[test]
    fn epilogue_matches_the_transpose() {
        if !std::arch::is_x86_feature_detected!("avx2") {
            eprintln!("SKIPPED: AVX2 transposing epilogue (this CPU or OS cannot run it)");
            return;
        }
        check_transposing_epilogue(|s| super::assemble_out(s).unwrap(), super::OUT_CHANNELS);
    }

    /// The AVX-512 kernel's cases (row and column counts in every class of 8 and 16, strides wider than the
    /// rows): every output element is its source's bits, and nothing else in the output is written.
    #[test]
    fn block_transposes_match_the_reference() {
        if !std::arch::is_x86_feature_detected!("avx2") {
            eprintln!("SKIPPED: AVX2 block transpose (this CPU or OS cannot run it)");
            return;
        }
        check_block_transposes(|s| super::assemble_block(s).unwrap());
    }
}
