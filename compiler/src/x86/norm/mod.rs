//! Machine code for LayerNorm / RMSNorm over contiguous rows with per-element scale and bias (the rows of
//! `ops::nn::emit_norm` without per-row parameters; InstanceNorm keeps the Cranelift kernel). One family over
//! the `Isa` trait: the frame, the three passes and the completion of the sums are written once here; `Rows`
//! gives each ISA's group size, registers, partial-sum extraction and row tail (`avx512.rs`: four rows per
//! step, a row's sums in one `zmm`, the tail under `k1`; `avx2.rs`: two rows, a row's sums in two `ymm`, the
//! tail four floats in an `xmm` and then one at a time).
//!
//! Each row's sums are held as the Cranelift kernel's four f32x4 partial sums (`Kb::row_sum`: lanes `4k..4k+4`
//! of a block of 16 floats go to partial `k`; the 4-float vectors past the last block to partials 0, 1, 2 in
//! turn; then `(p0 + p1) + (p2 + p3)`, the horizontal sum and the scalar tail), and every other operation is
//! the Cranelift kernel's (`v − mean` squared then added; `1 / √(var/n + eps)`; `((v − mean) · inv) · scale +
//! bias`, the bias `+0.0` when absent), so outputs are bitwise those of the Cranelift kernel on every ISA (a
//! fat bundle's sets agree). The rows of a group are independent chains: the Cranelift kernel waited on one
//! row's add latency (a 2-layer, hidden-256 encoder over 128 tokens: 8.8 µs per LayerNorm, 69 ns per row of
//! 256).
//!
//! `fn(x: *const f32, scale: *const f32, bias: *const f32, y: *mut f32, rows: u64)` (System V); `bias` is not
//! read without one. Registers: row `r`'s sums `v(SUMS·r ..)`, its mean `v(4 + r)`, its `1/σ` `v(INV + r)`,
//! scratch `v(T)`, `+0.0` in `v(ZERO)`; `r9` the byte offset within the rows, `r11` the constants.

pub mod avx2;
pub mod avx512;
#[cfg(all(test, target_arch = "x86_64", target_os = "linux"))]
pub(crate) mod tests;

use super::isa::{Isa, R};
use super::XMM;
use iced_x86::code_asm::*;

type Asm = CodeAssembler;

/// One row kernel's compile-time shape.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct NormRows {
    /// Row length (`supported`).
    pub len: usize,
    /// Added to the variance.
    pub eps: f32,
    /// RMSNorm: no mean subtracted.
    pub rms: bool,
    /// A bias is added (else `+0.0`, as the Cranelift kernel adds).
    pub bias: bool,
}

/// The longest row: byte offsets of four rows fit the displacements.
pub const MAX_LEN: usize = 1 << 20;

/// Whether rows of `len` elements have machine code.
pub fn supported(len: usize) -> bool {
    (1..=MAX_LEN).contains(&len)
}

/// Byte offsets of the constants after the code (`r11`): the row length as f32, eps, 1.
const N: i32 = 0;
const EPS: i32 = 4;
const ONE: i32 = 8;

/// The register of row `r`'s mean (`v(MEAN + r)`) on every ISA.
const MEAN: usize = 4;

/// An ISA's side of the row kernel.
pub trait Rows: Isa {
    /// The instruction set, for errors.
    const NAME: &'static str;
    /// Rows per step (then one fewer, down to one, for the rest).
    const GROUP: usize;
    /// Registers per row's sums (16 floats, a block, per step).
    const SUMS: usize;
    /// The first `1/σ` register.
    const INV: usize;
    /// The scratch register.
    const T: usize;
    /// The register that holds `+0.0`.
    const ZERO: usize;
    /// Before the rows: `+0.0` in `v(ZERO)` and what the tail needs.
    fn prologue(a: &mut Asm, s: &NormRows) -> R;
    /// Row `r`'s sums of its whole blocks completed in the Cranelift kernel's order into lane 0 of
    /// `XMM[SUMS·r]` (the partials extracted, then `finish_sums`).
    fn reduce(a: &mut Asm, s: &NormRows, r: usize, mean: Option<AsmRegisterXmm>) -> R;
    /// The normalisation of the elements of rows `0..g` past the last whole vector.
    fn tail(a: &mut Asm, s: &NormRows, g: usize) -> R;
}

/// Assembles the row kernel of `s` on ISA `I`: `r11` at the constant table (`N`, `EPS`, `ONE`), the
/// prologue, then steps of `GROUP` rows, then of fewer for the rest, down to one; `vzeroupper`, return, the
/// table.
pub fn assemble<I: Rows>(s: &NormRows) -> Result<Vec<u8>, String> {
    let e = |x: IcedError| x.to_string();
    if !supported(s.len) {
        return Err(format!("norm: no {} code for rows of {}", I::NAME, s.len));
    }
    let mut a = CodeAssembler::new(64).map_err(e)?;
    let mut table = a.create_label();
    a.lea(r11, ptr(table)).map_err(e)?;
    I::prologue(&mut a, s).map_err(e)?;
    let rb = (s.len * 4) as i32;
    let tiers: Vec<usize> = (1..=I::GROUP).rev().collect();
    let mut labels: Vec<CodeLabel> = (0..=tiers.len()).map(|_| a.create_label()).collect();
    for (i, &g) in tiers.iter().enumerate() {
        a.set_label(&mut labels[i]).map_err(e)?;
        a.cmp(r8, g as i32).map_err(e)?;
        a.jb(labels[i + 1]).map_err(e)?;
        group::<I>(&mut a, s, g).map_err(e)?;
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

/// `body` once per `step` bytes of a row, `count` times, the byte offset in `r9` (a counted loop).
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

/// Rows `0..g` of the group at `rdi` / `rcx`: the mean, the variance and `1/σ`, the normalisation.
fn group<I: Rows>(a: &mut Asm, s: &NormRows, g: usize) -> R {
    let rb = (s.len * 4) as i32;
    let part = (4 * I::LANES) as i32;
    // Row r's h-th vector of the current block.
    let x = |r: usize, h: usize| rdi + r9 + (r as i32 * rb + h as i32 * part);
    let sum = |r: usize, h: usize| I::v(I::SUMS * r + h);
    let (mean, inv, t) = (|r| I::v(MEAN + r), |r| I::v(I::INV + r), I::v(I::T));
    let clear = |a: &mut Asm, r: usize| -> R {
        for h in 0..I::SUMS {
            I::xor(a, sum(r, h), sum(r, h), sum(r, h))?;
        }
        Ok(())
    };
    // The mean (RMSNorm: +0.0).
    for r in 0..g {
        clear(a, r)?;
        if s.rms {
            I::xor(a, mean(r), mean(r), mean(r))?;
        }
    }
    if !s.rms {
        steps(a, s.len / 16, 64, |a| {
            for r in 0..g {
                for h in 0..I::SUMS {
                    I::add_mem(a, sum(r, h), x(r, h))?;
                }
            }
            Ok(())
        })?;
        for r in 0..g {
            let total = XMM[I::SUMS * r];
            I::reduce(a, s, r, None)?;
            a.vdivss(total, total, dword_ptr(r11 + N))?;
            I::broadcast(a, mean(r), total)?;
        }
    }
    // The variance, then 1 / √(var + eps).
    for r in 0..g {
        clear(a, r)?;
    }
    steps(a, s.len / 16, 64, |a| {
        for r in 0..g {
            for h in 0..I::SUMS {
                I::load(a, t, x(r, h))?;
                I::sub(a, t, t, mean(r))?;
                I::mul(a, t, t, t)?;
                I::add(a, sum(r, h), sum(r, h), t)?;
            }
        }
        Ok(())
    })?;
    for r in 0..g {
        I::reduce(a, s, r, Some(XMM[MEAN + r]))?;
        inv_sigma(a, XMM[I::SUMS * r], XMM[I::INV + r])?;
        I::broadcast(a, inv(r), XMM[I::INV + r])?;
    }
    // ((v − mean) · inv) · scale + bias, whole vectors, then the ISA's tail.
    steps(a, s.len / I::LANES, part, |a| {
        for r in 0..g {
            I::load(a, t, x(r, 0))?;
            I::sub(a, t, t, mean(r))?;
            I::mul(a, t, t, inv(r))?;
            I::mul_mem(a, t, t, rsi + r9)?;
            if s.bias {
                I::add_mem(a, t, rdx + r9)?;
            } else {
                I::add(a, t, t, I::v(I::ZERO))?;
            }
            I::store(a, rcx + r9 + r as i32 * rb, t)?;
        }
        Ok(())
    })?;
    I::tail(a, s, g)
}

/// `inv = 1 / √(v / n + eps)` from the variance's sum in lane 0 of `v` (which it clobbers), as the Cranelift
/// kernel computes it.
fn inv_sigma(a: &mut Asm, v: AsmRegisterXmm, inv: AsmRegisterXmm) -> R {
    a.vdivss(v, v, dword_ptr(r11 + N))?;
    a.vaddss(v, v, dword_ptr(r11 + EPS))?;
    a.vsqrtss(v, v, v)?;
    a.vmovss(inv, dword_ptr(r11 + ONE))?;
    a.vdivss(inv, inv, v)
}

/// Completes row `r`'s sums of its whole blocks of 16, held as the Cranelift kernel's four f32x4 partials in
/// `p`, in its order into lane 0 of `p[0]`: the 4-float vectors past the last block into partials 0, 1, 2,
/// `(p0 + p1) + (p2 + p3)`, the horizontal sum, then the scalar tail. `mean`: the elements are `(v − mean)²`
/// (the variance pass). `t`: scratch for the elements, and for the horizontal sum (which may reuse `p[1]`).
fn finish_sums(
    a: &mut Asm,
    s: &NormRows,
    r: usize,
    p: [AsmRegisterXmm; 4],
    mean: Option<AsmRegisterXmm>,
    [t, h]: [AsmRegisterXmm; 2],
) -> R {
    let rb = (s.len * 4) as i32;
    let row = |j: usize| rdi + (r as i32 * rb + (4 * j) as i32);
    let (nblk, nvec) = (s.len / 16 * 16, s.len / 4 * 4);
    for (k, j) in (nblk..nvec).step_by(4).enumerate() {
        match mean {
            None => a.vaddps(p[k], p[k], xmmword_ptr(row(j)))?,
            Some(m) => {
                a.vmovups(t, xmmword_ptr(row(j)))?;
                a.vsubps(t, t, m)?;
                a.vmulps(t, t, t)?;
                a.vaddps(p[k], p[k], t)?;
            }
        }
    }
    a.vaddps(p[0], p[0], p[1])?;
    a.vaddps(p[2], p[2], p[3])?;
    a.vaddps(p[0], p[0], p[2])?;
    super::softmax_x86::sum_partials(a, p[0], h)?;
    for j in nvec..s.len {
        match mean {
            None => a.vaddss(p[0], p[0], dword_ptr(row(j)))?,
            Some(m) => {
                a.vmovss(t, dword_ptr(row(j)))?;
                a.vsubss(t, t, m)?;
                a.vmulss(t, t, t)?;
                a.vaddss(p[0], p[0], t)?;
            }
        }
    }
    Ok(())
}
