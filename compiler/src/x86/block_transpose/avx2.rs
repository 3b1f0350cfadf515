//! The block transpose on AVX2: 8x8 blocks; a column tail loaded with `vmaskmovps` under the lane mask kept
//! after the code (in `ymm15` for the block), a row tail stored a lane group at a time (`store_head_ymm`).

use super::Tails;
use crate::kernel::data::BlockTranspose;
use crate::x86::isa::{Avx2, R};
use crate::x86::store_head_ymm;
use iced_x86::code_asm::*;

impl Tails for Avx2 {
    type State = CodeLabel;
    fn setup(a: &mut CodeAssembler, _: &BlockTranspose) -> Result<CodeLabel, IcedError> {
        Ok(a.create_label())
    }
    fn prep(a: &mut CodeAssembler, mask: CodeLabel) -> R {
        a.vmovups(ymm15, ptr(mask))
    }
    fn load_tail(a: &mut CodeAssembler, v: AsmRegisterYmm, disp: i32, _: CodeLabel) -> R {
        a.vmaskmovps(v, ymm15, ptr(r10 + disp))
    }
    fn store_row(
        a: &mut CodeAssembler,
        disp: i32,
        v: AsmRegisterYmm,
        lanes: usize,
        _: CodeLabel,
    ) -> R {
        store_head_ymm(a, ptr(r11 + disp), v, lanes, ymm0)
    }
    /// The column tail's load mask: its lanes all ones.
    fn finish(a: &mut CodeAssembler, mask: &mut CodeLabel, s: &BlockTranspose) -> R {
        a.set_label(mask)?;
        let lanes: Vec<u8> = (0..8)
            .flat_map(|l| u32::to_le_bytes(if l < s.cols % 8 { u32::MAX } else { 0 }))
            .collect();
        a.db(&lanes)
    }
}

/// Assembles the kernel; `Err` when a stride does not fit a 32-bit displacement.
pub fn assemble(s: &BlockTranspose) -> Result<Vec<u8>, String> {
    super::assemble::<Avx2>(s)
}

#[cfg(all(test, target_arch = "x86_64", target_os = "linux"))]
mod tests {
    use super::super::tests::check_block_transposes;
    use crate::x86::test_exec::skip_without_avx2;

    /// The AVX-512 kernel's cases, bitwise.
    #[test]
    fn block_transposes_match_the_reference() {
        if skip_without_avx2("AVX2 block transpose") {
            return;
        }
        check_block_transposes(|s| super::assemble(s).unwrap());
    }
}
