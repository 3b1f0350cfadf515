//! The block transpose on AVX-512: 16x16 blocks, `k1` the tail columns of the loads (zeroing), `k2` the tail
//! rows of the stores, both set once.

use super::Tails;
use crate::kernel::data::BlockTranspose;
use crate::x86::isa::{Avx512, R};
use iced_x86::code_asm::*;

impl Tails for Avx512 {
    type State = ();
    fn setup(a: &mut CodeAssembler, s: &BlockTranspose) -> Result<(), IcedError> {
        for (k, n) in [(k1, s.cols % 16), (k2, s.rows % 16)] {
            if n > 0 {
                a.mov(eax, (1u32 << n) - 1)?;
                a.kmovw(k, eax)?;
            }
        }
        Ok(())
    }
    fn prep(_: &mut CodeAssembler, _: ()) -> R {
        Ok(())
    }
    fn load_tail(a: &mut CodeAssembler, v: AsmRegisterZmm, disp: i32, _: ()) -> R {
        a.vmovups(v.k1().z(), zmmword_ptr(r10 + disp))
    }
    fn store_row(a: &mut CodeAssembler, disp: i32, v: AsmRegisterZmm, lanes: usize, _: ()) -> R {
        if lanes < 16 {
            a.vmovups(zmmword_ptr(r11 + disp).k2(), v)
        } else {
            a.vmovups(zmmword_ptr(r11 + disp), v)
        }
    }
    fn finish(_: &mut CodeAssembler, _: &mut (), _: &BlockTranspose) -> R {
        Ok(())
    }
}

/// Assembles the kernel; `Err` when a stride does not fit a 32-bit displacement.
pub fn assemble(s: &BlockTranspose) -> Result<Vec<u8>, String> {
    super::assemble::<Avx512>(s)
}

#[cfg(all(test, target_arch = "x86_64", target_os = "linux"))]
mod tests {
    use super::super::tests::check_block_transposes;
    use crate::x86::test_exec::skip_without_avx512;

    #[test]
    fn block_transposes_match_the_reference() {
        if skip_without_avx512("AVX-512 block transpose") {
            return;
        }
        check_block_transposes(|s| super::assemble(s).unwrap());
    }
}
