//! AVX2 machine code for LayerNorm / RMSNorm over contiguous rows (`x86-64-v3`, the default `--cpu`): the
//! AVX-512 kernel's arithmetic (`norm_x86.rs`) two rows at a time, each row's sums in two `ymm` (the Cranelift
//! kernel's partial sums 0 and 1 in the first, 2 and 3 in the second, so that their 128-bit halves are its
//! four f32x4 partials), reduced in its order; results are bitwise the Cranelift and AVX-512 kernels', so a
//! fat bundle's sets agree. The normalisation runs eight floats per `ymm`, then a row's last four in an `xmm`
//! and the rest one at a time (AVX2 has no store masks).
//!
//! `fn(x: *const f32, scale: *const f32, bias: *const f32, y: *mut f32, rows: u64)` (System V), as the AVX-512
//! kernel. Registers: row `r`'s sums `ymm 2r`, `ymm 2r+1`, its mean `ymm 4+r`, its `1/σ` `ymm 6+r`; scratch
//! `ymm8..12`; `+0.0` in `ymm13`; `r9` the byte offset within the rows, `r11` the constants.

use super::norm_x86::{assemble_rows, finish_sums, inv_sigma, steps, NormRows, N};
use super::{xmm_of, YMM};
use iced_x86::code_asm::*;

type Asm = CodeAssembler;
type R = Result<(), IcedError>;

/// Rows per step (then one for the last).
const GROUP: usize = 2;

const T: AsmRegisterYmm = ymm8;

fn y(i: usize) -> AsmRegisterYmm {
    YMM[i]
}

fn x(i: usize) -> AsmRegisterXmm {
    xmm_of(YMM[i])
}

/// Assembles the row kernel of `s`.
pub fn assemble(s: &NormRows) -> Result<Vec<u8>, String> {
    let prologue = |a: &mut Asm| a.vxorps(ymm13, ymm13, ymm13);
    assemble_rows(s, "AVX2", GROUP, prologue, |a, g| group(a, s, g))
}

/// Rows `0..g` of the group at `rdi` / `rcx`.
fn group(a: &mut Asm, s: &NormRows, g: usize) -> R {
    let rb = (s.len * 4) as i32;
    let row = |r: usize, off: i32| rdi + r9 + (r as i32 * rb + off);
    let nb = s.len / 16;
    // The mean (RMSNorm: +0.0).
    for r in 0..g {
        for h in 0..2 {
            a.vxorps(y(2 * r + h), y(2 * r + h), y(2 * r + h))?;
        }
        if s.rms {
            a.vxorps(y(4 + r), y(4 + r), y(4 + r))?;
        }
    }
    if !s.rms {
        steps(a, nb, 64, |a| {
            for r in 0..g {
                for h in 0..2 {
                    a.vaddps(
                        y(2 * r + h),
                        y(2 * r + h),
                        ymmword_ptr(row(r, 32 * h as i32)),
                    )?;
                }
            }
            Ok(())
        })?;
        for r in 0..g {
            reduce(a, s, r, None)?;
            a.vdivss(x(2 * r), x(2 * r), dword_ptr(r11 + N))?;
            a.vbroadcastss(y(4 + r), x(2 * r))?;
        }
    }
    // The variance, then 1 / √(var + eps).
    for r in 0..g {
        for h in 0..2 {
            a.vxorps(y(2 * r + h), y(2 * r + h), y(2 * r + h))?;
        }
    }
    steps(a, nb, 64, |a| {
        for r in 0..g {
            for h in 0..2 {
                a.vmovups(T, ymmword_ptr(row(r, 32 * h as i32)))?;
                a.vsubps(T, T, y(4 + r))?;
                a.vmulps(T, T, T)?;
                a.vaddps(y(2 * r + h), y(2 * r + h), T)?;
            }
        }
        Ok(())
    })?;
    for r in 0..g {
        reduce(a, s, r, Some(x(4 + r)))?;
        inv_sigma(a, x(2 * r), x(6 + r))?;
        a.vbroadcastss(y(6 + r), x(6 + r))?;
    }
    // ((v − mean) · inv) · scale + bias: eight floats at a time, then four, then one.
    steps(a, s.len / 8, 32, |a| {
        for r in 0..g {
            a.vmovups(T, ymmword_ptr(row(r, 0)))?;
            a.vsubps(T, T, y(4 + r))?;
            a.vmulps(T, T, y(6 + r))?;
            a.vmulps(T, T, ymmword_ptr(rsi + r9))?;
            if s.bias {
                a.vaddps(T, T, ymmword_ptr(rdx + r9))?;
            } else {
                a.vaddps(T, T, ymm13)?;
            }
            a.vmovups(ymmword_ptr(rcx + r9 + r as i32 * rb), T)?;
        }
        Ok(())
    })?;
    let t = xmm8;
    let mut j = s.len / 8 * 8;
    while j < s.len {
        let four = s.len - j >= 4;
        let off = (4 * j) as i32;
        for r in 0..g {
            let (xa, ya) = (rdi + (r as i32 * rb + off), rcx + (r as i32 * rb + off));
            if four {
                a.vmovups(t, xmmword_ptr(xa))?;
                a.vsubps(t, t, x(4 + r))?;
                a.vmulps(t, t, x(6 + r))?;
                a.vmulps(t, t, xmmword_ptr(rsi + off))?;
                if s.bias {
                    a.vaddps(t, t, xmmword_ptr(rdx + off))?;
                } else {
                    a.vaddps(t, t, xmm13)?;
                }
                a.vmovups(xmmword_ptr(ya), t)?;
            } else {
                a.vmovss(t, dword_ptr(xa))?;
                a.vsubss(t, t, x(4 + r))?;
                a.vmulss(t, t, x(6 + r))?;
                a.vmulss(t, t, dword_ptr(rsi + off))?;
                if s.bias {
                    a.vaddss(t, t, dword_ptr(rdx + off))?;
                } else {
                    a.vaddss(t, t, xmm13)?;
                }
                a.vmovss(dword_ptr(ya), t)?;
            }
        }
        j += if four { 4 } else { 1 };
    }
    Ok(())
}

/// Row `r`'s sums of its whole blocks (`ymm 2r`: partials 0 and 1, `ymm 2r+1`: 2 and 3) completed in the
/// Cranelift kernel's order into lane 0 of `xmm 2r` (`norm_x86::finish_sums`). `mean`: the variance pass.
fn reduce(a: &mut Asm, s: &NormRows, r: usize, mean: Option<AsmRegisterXmm>) -> R {
    a.vextractf128(xmm9, y(2 * r), 1)?;
    a.vextractf128(xmm10, y(2 * r + 1), 1)?;
    let p = [x(2 * r), xmm9, x(2 * r + 1), xmm10];
    finish_sums(a, s, r, p, mean, [xmm12, xmm9])
}

#[cfg(all(test, target_arch = "x86_64", target_os = "linux"))]
mod tests {
    use super::super::norm_x86::tests::check_rows;
    use super::super::test_exec::skip_without_avx2;
    use super::*;

    /// The AVX-512 kernel's checks: bitwise the Cranelift order, no access past the rows.
    #[test]
    fn rows_match_the_cranelift_order() {
        if skip_without_avx2("norm rows (AVX2)") {
            return;
        }
        check_rows(|s| assemble(s).unwrap());
    }
}
