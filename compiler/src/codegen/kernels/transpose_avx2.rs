//! AVX2 2-D block transpose of 32-bit elements (`x86-64-v3`): the gathering Transpose nodes' kernel
//! (`ops::data::block_plan`; an attention's `Kᵀ`), as `transpose_x86::assemble_block` does it with `zmm`, in
//! 8x8 blocks transposed in registers (`kernels::transpose8_ymm`): `dst[c][r] = src[r][c]` for `r < rows`,
//! `c < cols`, both strided. A column tail is loaded with `vmaskmovps` (its lanes from a compile-time mask
//! after the code) and a row tail stored a lane group at a time (`store_head_ymm`), so nothing outside the two
//! matrices is read or written. The Cranelift transpose took 25.8 µs for a 128-token attention's `Kᵀ` (4
//! heads of 64), ten times the AVX-512 kernel's 2.6.
//!
//! `fn(src: *const u32, dst: *mut u32)` (System V).

use super::transpose_x86::{block_loops, BlockTranspose};
use super::{store_head_ymm, transpose8_ymm, YMM};
use iced_x86::code_asm::*;

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
