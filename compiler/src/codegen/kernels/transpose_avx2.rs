//! AVX2 2-D block transpose of 32-bit elements (`x86-64-v3`): the gathering Transpose nodes' kernel
//! (`ops::data::block_plan`; an attention's `Kᵀ`), as `transpose_x86::assemble_block` does it with `zmm`, in
//! 8x8 blocks transposed in registers (`kernels::transpose8_ymm`): `dst[c][r] = src[r][c]` for `r < rows`,
//! `c < cols`, both strided. A column tail is loaded with `vmaskmovps` (its lanes from a compile-time mask
//! after the code) and a row tail stored a lane group at a time (`store_head_ymm`), so nothing outside the two
//! matrices is read or written. The Cranelift transpose took 25.8 µs for a 128-token attention's `Kᵀ` (4
//! heads of 64), ten times the AVX-512 kernel's 2.6.
//!
//! `fn(src: *const u32, dst: *mut u32)` (System V).

use super::transpose_x86::BlockTranspose;
use super::{store_head_ymm, transpose8_ymm, YMM};
use iced_x86::code_asm::*;

/// Assembles a `BlockTranspose`; `Err` when a stride does not fit a 32-bit displacement.
pub fn assemble_block(s: &BlockTranspose) -> Result<Vec<u8>, String> {
    let e = |x: IcedError| x.to_string();
    let disp = |elems: usize| super::disp("block transpose", elems);
    let loads: Vec<i32> = (0..8).map(|r| disp(r * s.ls)).collect::<Result<_, _>>()?;
    let stores: Vec<i32> = (0..8).map(|c| disp(c * s.ld)).collect::<Result<_, _>>()?;
    let (row_step, col_step) = (disp(8 * s.ls)?, disp(8 * s.ld)?);
    let mut a = CodeAssembler::new(64).map_err(e)?;
    let mut mask = a.create_label();
    // (columns, whether the loads are masked) per kind of column block: the full ones, then the tail.
    let mut col_blocks: Vec<(usize, bool)> = Vec::new();
    if s.cols >= 8 {
        col_blocks.push((8, false));
    }
    if !s.cols.is_multiple_of(8) {
        col_blocks.push((s.cols % 8, true));
    }
    // r8 / r9: the current column block's first source element and output row; r10 / r11: the current block.
    a.mov(r8, rdi).map_err(e)?;
    a.mov(r9, rsi).map_err(e)?;
    for (nc, masked) in col_blocks {
        let load_mask = masked.then_some(mask);
        // The full column blocks loop at run time (rdx counts them); the tail block runs once.
        let mut col_top = a.create_label();
        if !masked {
            a.mov(rdx, (s.cols / 8) as u64).map_err(e)?;
            a.set_label(&mut col_top).map_err(e)?;
        }
        a.mov(r10, r8).map_err(e)?;
        a.mov(r11, r9).map_err(e)?;
        if s.rows >= 8 {
            let mut row_top = a.create_label();
            a.mov(rcx, (s.rows / 8) as u64).map_err(e)?;
            a.set_label(&mut row_top).map_err(e)?;
            block(&mut a, &loads, &stores[..nc], load_mask, 8).map_err(e)?;
            a.add(r10, row_step).map_err(e)?;
            a.add(r11, 32).map_err(e)?;
            a.dec(rcx).map_err(e)?;
            a.jnz(row_top).map_err(e)?;
        }
        if !s.rows.is_multiple_of(8) {
            let n = s.rows % 8;
            block(&mut a, &loads[..n], &stores[..nc], load_mask, n).map_err(e)?;
        }
        if !masked {
            a.add(r8, 32).map_err(e)?;
            a.add(r9, col_step).map_err(e)?;
            a.dec(rdx).map_err(e)?;
            a.jnz(col_top).map_err(e)?;
        }
    }
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
    use super::super::transpose_x86::tests::check_block_transposes;

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
