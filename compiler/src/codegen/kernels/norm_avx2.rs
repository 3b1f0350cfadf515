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

use super::norm_x86::{supported, NormRows};
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

/// Byte offsets of the constants after the code (`r11`): the row length as f32, eps, 1.
const N: i32 = 0;
const EPS: i32 = 4;
const ONE: i32 = 8;

/// Assembles the row kernel of `s`.
pub fn assemble(s: &NormRows) -> Result<Vec<u8>, String> {
    let e = |x: IcedError| x.to_string();
    if !supported(s.len) {
        return Err(format!("norm: no AVX2 code for rows of {}", s.len));
    }
    let mut a = CodeAssembler::new(64).map_err(e)?;
    let mut table = a.create_label();
    a.lea(r11, ptr(table)).map_err(e)?;
    a.vxorps(ymm13, ymm13, ymm13).map_err(e)?;
    let rb = (s.len * 4) as i32;
    let tiers: Vec<usize> = (1..=GROUP).rev().collect();
    let mut labels: Vec<CodeLabel> = (0..=tiers.len()).map(|_| a.create_label()).collect();
    for (i, &g) in tiers.iter().enumerate() {
        a.set_label(&mut labels[i]).map_err(e)?;
        a.cmp(r8, g as i32).map_err(e)?;
        a.jb(labels[i + 1]).map_err(e)?;
        group(&mut a, s, g).map_err(e)?;
        a.add(rdi, g as i32 * rb).map_err(e)?;
        a.add(rcx, g as i32 * rb).map_err(e)?;
        a.sub(r8, g as i32).map_err(e)?;
        a.jmp(labels[i]).map_err(e)?;
    }
    a.set_label(&mut labels[tiers.len()]).map_err(e)?;
    a.vzeroupper().map_err(e)?;
    a.ret().map_err(e)?;
    a.set_label(&mut table).map_err(e)?;
    let bytes: Vec<u8> = [s.len as f32, s.eps, 1.0]
        .iter()
        .flat_map(|c| c.to_le_bytes())
        .collect();
    a.db(&bytes).map_err(e)?;
    a.assemble(0).map_err(e)
}

/// `body` once per `step` bytes of a row while `count` steps remain, the byte offset in `r9`.
fn steps(a: &mut Asm, count: usize, step: i32, mut body: impl FnMut(&mut Asm) -> R) -> R {
    if count == 0 {
        return Ok(());
    }
    let mut top = a.create_label();
    a.xor(r9d, r9d)?;
    a.set_label(&mut top)?;
    body(a)?;
    a.add(r9, step)?;
    a.cmp(r9, count as i32 * step)?;
    a.jb(top)
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
        let v = x(2 * r);
        a.vdivss(v, v, dword_ptr(r11 + N))?;
        a.vaddss(v, v, dword_ptr(r11 + EPS))?;
        a.vsqrtss(v, v, v)?;
        a.vmovss(x(6 + r), dword_ptr(r11 + ONE))?;
        a.vdivss(x(6 + r), x(6 + r), v)?;
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
/// Cranelift kernel's order into lane 0 of `xmm 2r`, as `norm_x86::reduce`. `mean`: the variance pass.
fn reduce(a: &mut Asm, s: &NormRows, r: usize, mean: Option<AsmRegisterXmm>) -> R {
    let rb = (s.len * 4) as i32;
    let at = |j: usize| rdi + (r as i32 * rb + (4 * j) as i32);
    let (nblk, nvec) = (s.len / 16 * 16, s.len / 4 * 4);
    a.vextractf128(xmm9, y(2 * r), 1)?;
    a.vextractf128(xmm10, y(2 * r + 1), 1)?;
    let p = [x(2 * r), xmm9, x(2 * r + 1), xmm10];
    for (k, j) in (nblk..nvec).step_by(4).enumerate() {
        match mean {
            None => a.vaddps(p[k], p[k], xmmword_ptr(at(j)))?,
            Some(m) => {
                a.vmovups(xmm12, xmmword_ptr(at(j)))?;
                a.vsubps(xmm12, xmm12, m)?;
                a.vmulps(xmm12, xmm12, xmm12)?;
                a.vaddps(p[k], p[k], xmm12)?;
            }
        }
    }
    a.vaddps(p[0], p[0], p[1])?;
    a.vaddps(p[2], p[2], p[3])?;
    a.vaddps(p[0], p[0], p[2])?;
    super::softmax_x86::sum_partials(a, p[0], xmm9)?;
    for j in nvec..s.len {
        match mean {
            None => a.vaddss(p[0], p[0], dword_ptr(at(j)))?,
            Some(m) => {
                a.vmovss(xmm12, dword_ptr(at(j)))?;
                a.vsubss(xmm12, xmm12, m)?;
                a.vmulss(xmm12, xmm12, xmm12)?;
                a.vaddss(p[0], p[0], xmm12)?;
            }
        }
    }
    Ok(())
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
