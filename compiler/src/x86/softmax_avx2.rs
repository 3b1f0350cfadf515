//! AVX2+FMA machine code for Softmax over contiguous rows (`x86-64-v3`, the default `--cpu`), any length: the
//! AVX-512 long-row kernel's three passes per row (`softmax_x86.rs`) eight floats per `ymm`, with the same
//! arithmetic as the Cranelift kernel (`ops::nn::emit_softmax`): the maximum by `vmaxps` (exact in any order);
//! the exponentials by `vmath_avx2`'s exp (the operations of `codegen::math::exp`), stored, their groups of
//! four added in order to one `xmm` (the Cranelift kernel's four partial sums), then `(s0 + s1) + (s2 + s3)`
//! and the elements past the last group one at a time; a division per element, in place. Results are bitwise
//! the Cranelift kernel's and the AVX-512 kernel's, so a fat bundle's sets agree. A row's last `len % 8`
//! elements go through `vmaskmovps` (lane masks from `kernels::tail_masks_ymm`'s comparison), loaded over
//! −∞ for the maximum. An encoder's 128-token attention rows took 1.9 ns per element in the Cranelift kernel.
//!
//! `fn(x: *const f32, y: *mut f32, rows: u64)` (System V).

use super::softmax_x86::{counted, each_row, sum_partials, supported};
use super::vmath_avx2::{begin, finish, y, Em, S};
use super::xmm_of;
use iced_x86::code_asm::*;

type Asm = CodeAssembler;
type R = Result<(), IcedError>;

/// Assembles the softmax of rows of `len` (`softmax_x86::supported`) elements.
pub fn assemble(len: usize) -> Result<Vec<u8>, String> {
    let e = |x: IcedError| x.to_string();
    if !supported(len) {
        return Err(format!("softmax: no AVX2 code for rows of {len}"));
    }
    let mut a = CodeAssembler::new(64).map_err(e)?;
    let (mut m, labels) = begin(&mut a).map_err(e)?;
    rows(&mut a, &mut m, len, labels.lanes).map_err(e)?;
    finish(a, &m, labels)
}

/// The row loop. Registers: the exponential's slots `ymm0..7` (it uses X, B, T1 and T2), the row's maximum
/// `ymm8` (then its sum), the tail's lane mask `ymm9`, the running sums `xmm10`, exp's clamp bounds
/// `ymm12`/`ymm13`, scratch `ymm14`/`ymm15`; `r9`/`r10` walk the row's input and output, `ecx` counts.
fn rows(a: &mut Asm, m: &mut Em, len: usize, lanes: CodeLabel) -> R {
    let tail = len % 8;
    if tail > 0 {
        a.mov(eax, tail as u32)?;
        super::tail_masks_ymm(a, eax, 1, lanes, [ymm9, ymm9, ymm9])?;
    }
    each_row(a, len, |a| row(a, m, len))
}

/// One row at `rdi` / `rsi`.
fn row(a: &mut Asm, m: &mut Em, len: usize) -> R {
    let (full, tail) = (len / 8, len % 8);
    let tail_at = (full * 32) as i32;
    // The maximum (the tail over −∞).
    a.vmovups(ymm8, m.f(f32::NEG_INFINITY))?;
    a.mov(r9, rdi)?;
    counted(a, full, &[r9], 32, |a| a.vmaxps(ymm8, ymm8, ptr(r9)))?;
    if tail > 0 {
        a.vmaskmovps(ymm0, ymm9, ptr(rdi + tail_at))?;
        a.vmovups(ymm15, m.f(f32::NEG_INFINITY))?;
        a.vblendvps(ymm0, ymm15, ymm0, ymm9)?;
        a.vmaxps(ymm8, ymm8, ymm0)?;
    }
    a.vperm2f128(ymm14, ymm8, ymm8, 0x01)?;
    a.vmaxps(ymm8, ymm8, ymm14)?;
    for imm in [0x4E, 0xB1] {
        a.vpermilps(ymm14, ymm8, imm)?;
        a.vmaxps(ymm8, ymm8, ymm14)?;
    }
    // The exponentials, stored, and their groups of four added in order to the running sums.
    a.vxorps(xmm10, xmm10, xmm10)?;
    a.mov(r9, rdi)?;
    a.mov(r10, rsi)?;
    counted(a, full, &[r9, r10], 32, |a| exp_step(a, m, 0))?;
    if tail > 0 {
        exp_step(a, m, tail)?;
    }
    // (s0 + s1) + (s2 + s3), then the elements past the last group of four (in the tail's `B`) one at a time.
    sum_partials(a, xmm10, xmm14)?;
    a.vbroadcastss(ymm8, xmm10)?;
    for j in len / 4 * 4..len {
        a.vmovups(ymm14, m.bits((j % 8) as u32))?;
        a.vpermps(ymm14, ymm14, y(S::B))?;
        a.vaddps(ymm8, ymm8, ymm14)?;
    }
    // The division, in place.
    a.mov(r10, rsi)?;
    counted(a, full, &[r10], 32, |a| {
        a.vmovups(ymm0, ptr(r10))?;
        a.vdivps(ymm0, ymm0, ymm8)?;
        a.vmovups(ptr(r10), ymm0)
    })?;
    if tail > 0 {
        a.vmaskmovps(ymm0, ymm9, ptr(rsi + tail_at))?;
        a.vdivps(ymm0, ymm0, ymm8)?;
        a.vmaskmovps(ptr(rsi + tail_at), ymm9, ymm0)?;
    }
    Ok(())
}

/// One vector of the exponential pass at `r9` (stored at `r10`); `tail` > 0 for the row's last, partial
/// vector (`ymm9`; its whole groups of four are summed, the rest by the caller).
fn exp_step(a: &mut Asm, m: &mut Em, tail: usize) -> R {
    if tail > 0 {
        a.vmaskmovps(y(S::X), ymm9, ptr(r9))?;
    } else {
        a.vmovups(y(S::X), ptr(r9))?;
    }
    a.vsubps(y(S::X), y(S::X), ymm8)?;
    m.exp(a, S::B, S::X)?;
    if tail > 0 {
        a.vmaskmovps(ptr(r10), ymm9, y(S::B))?;
    } else {
        a.vmovups(ptr(r10), y(S::B))?;
    }
    let groups = if tail > 0 { tail / 4 } else { 2 };
    if groups > 0 {
        a.vaddps(xmm10, xmm10, xmm_of(y(S::B)))?;
    }
    if groups > 1 {
        a.vextractf128(xmm14, y(S::B), 1)?;
        a.vaddps(xmm10, xmm10, xmm14)?;
    }
    Ok(())
}

#[cfg(all(test, target_arch = "x86_64", target_os = "linux"))]
mod tests {
    use super::super::softmax_x86::tests::check_rows;
    use super::assemble;
    use crate::ir::UnOp;

    /// Row lengths 1–48 and longer ones over 1–7 rows: bitwise the Cranelift kernel's arithmetic (with the
    /// AVX2 exp map), within 2e-6 of the reference, nothing written past the rows.
    #[test]
    fn rows_match_the_cranelift_order() {
        let no = !std::arch::is_x86_feature_detected!("avx2")
            || !std::arch::is_x86_feature_detected!("fma");
        if no {
            eprintln!("SKIPPED: AVX2 softmax rows (this CPU or OS cannot run them)");
            return;
        }
        let exp = super::super::vmath_avx2::assemble(UnOp::Exp).unwrap();
        check_rows(&exp, |len| assemble(len).unwrap());
    }
}
