//! AVX-512 machine code for Softmax over short contiguous rows (`len` ≤ 48: an attention's scores at the
//! sequence lengths of small encoders): each row lives in one to three `zmm` from load to store. A step takes
//! three rows of one vector (len ≤ 16) or one row of two or three, so that three independent chains overlap;
//! the row's maximum and sum are reduced across lanes with `vshuff32x4` / `vpermilps` and end up broadcast in
//! every lane; the exp is `vmath_x86`'s (the same operations as `codegen::math::exp`). The last vector of a row
//! whose length is not a multiple of 16 is loaded under `k1` over −∞ (so it adds nothing to the maximum), its
//! exp lanes past the row are zeroed before the sum and it is stored under `k1`. The division by the sum is
//! per element, as the Cranelift kernel's; the sum's order differs from it (16 lanes, not 4), within SPEC §11's
//! tolerance. A Cranelift row spent ~80 ns on a 16-wide row (f32x4 exp, a division per vector, reductions
//! through the stack); this runs about ten times faster.
//!
//! `fn(x: *const f32, y: *mut f32, rows: u64)` (System V).

use super::vmath_x86::{z, Em, NV, S};
use crate::codegen::math::{EXP_HI, EXP_LO};
use iced_x86::code_asm::*;

type Asm = CodeAssembler;
type R = Result<(), IcedError>;

/// The longest row this kernel takes.
pub const MAX_LEN: usize = 16 * NV;

/// Whether rows of `len` elements have machine code.
pub fn supported(len: usize) -> bool {
    (1..=MAX_LEN).contains(&len)
}

/// Assembles the softmax of rows of `len` (`supported`) elements.
pub fn assemble(len: usize) -> Result<Vec<u8>, String> {
    let e = |x: IcedError| x.to_string();
    if !supported(len) {
        return Err(format!("softmax: no AVX-512 code for rows of {len}"));
    }
    let chunks = len.div_ceil(16);
    let tail = len % 16;
    let mut a = CodeAssembler::new(64).map_err(e)?;
    let mut m = Em {
        consts: Vec::new(),
        n: NV,
    };
    let mut table = a.create_label();
    a.lea(r8, ptr(table)).map_err(e)?;
    let (lo, hi) = (m.off(EXP_LO.to_bits()), m.off(EXP_HI.to_bits()));
    a.vbroadcastss(zmm31, dword_ptr(r8 + lo)).map_err(e)?;
    a.vbroadcastss(zmm30, dword_ptr(r8 + hi)).map_err(e)?;
    let ninf = m.off(f32::NEG_INFINITY.to_bits());
    a.vbroadcastss(zmm28, dword_ptr(r8 + ninf)).map_err(e)?;
    if tail > 0 {
        a.mov(eax, (1u32 << tail) - 1).map_err(e)?;
        a.kmovw(k1, eax).map_err(e)?;
    }
    let row_bytes = (len * 4) as i32;
    // Rows per step: three when a row is one vector, else one.
    let tiers: Vec<usize> = if chunks == 1 { vec![3, 2, 1] } else { vec![1] };
    let mut labels: Vec<CodeLabel> = (0..=tiers.len()).map(|_| a.create_label()).collect();
    for (i, &rows) in tiers.iter().enumerate() {
        a.set_label(&mut labels[i]).map_err(e)?;
        a.cmp(rdx, rows as i32).map_err(e)?;
        a.jb(labels[i + 1]).map_err(e)?;
        step(&mut a, &mut m, rows, chunks, tail, row_bytes).map_err(e)?;
        a.add(rdi, rows as i32 * row_bytes).map_err(e)?;
        a.add(rsi, rows as i32 * row_bytes).map_err(e)?;
        a.sub(rdx, rows as i32).map_err(e)?;
        a.jmp(labels[i]).map_err(e)?;
    }
    a.set_label(&mut labels[tiers.len()]).map_err(e)?;
    a.vzeroupper().map_err(e)?;
    a.ret().map_err(e)?;
    a.set_label(&mut table).map_err(e)?;
    let bytes: Vec<u8> = m.consts.iter().flat_map(|c| c.to_le_bytes()).collect();
    a.db(&bytes).map_err(e)?;
    a.assemble(0).map_err(e)
}

/// One step of `rows` rows of `chunks` vectors: vector v is row v / chunks, chunk v % chunks.
fn step(a: &mut Asm, m: &mut Em, rows: usize, chunks: usize, tail: usize, row_bytes: i32) -> R {
    let n = rows * chunks;
    m.n = n;
    let at = |v: usize| (v / chunks) as i32 * row_bytes + (v % chunks) as i32 * 64;
    let masked = |v: usize| tail > 0 && v % chunks == chunks - 1;
    let first = |v: usize| v / chunks * chunks;
    for v in 0..n {
        let x = z(S::X, v);
        if masked(v) {
            a.vmovaps(x, zmm28)?;
            a.vmovups(x.k1(), zmmword_ptr(rdi + at(v)))?;
        } else {
            a.vmovups(x, zmmword_ptr(rdi + at(v)))?;
        }
    }
    // Each row's maximum, broadcast, in A of its first vector.
    for r in (0..n).step_by(chunks) {
        let acc = z(S::A, r);
        a.vmovaps(acc, z(S::X, r))?;
        for c in 1..chunks {
            a.vmaxps(acc, acc, z(S::X, r + c))?;
        }
        across(a, acc, z(S::T1, r), true)?;
    }
    for v in 0..n {
        a.vsubps(z(S::X, v), z(S::X, v), z(S::A, first(v)))?;
    }
    m.exp(a, S::B, S::X)?;
    for v in (0..n).filter(|&v| masked(v)) {
        a.vmovaps(z(S::B, v).k1().z(), z(S::B, v))?;
    }
    // Each row's sum, broadcast, in C of its first vector.
    for r in (0..n).step_by(chunks) {
        let acc = z(S::C, r);
        a.vmovaps(acc, z(S::B, r))?;
        for c in 1..chunks {
            a.vaddps(acc, acc, z(S::B, r + c))?;
        }
        across(a, acc, z(S::T1, r), false)?;
    }
    for v in 0..n {
        let y = z(S::B, v);
        a.vdivps(y, y, z(S::C, first(v)))?;
        if masked(v) {
            a.vmovups(zmmword_ptr(rsi + at(v)).k1(), y)?;
        } else {
            a.vmovups(zmmword_ptr(rsi + at(v)), y)?;
        }
    }
    Ok(())
}

/// Reduces `r` across its 16 lanes (maximum or sum), the result in every lane; `t` is scratch.
fn across(a: &mut Asm, r: AsmRegisterZmm, t: AsmRegisterZmm, max: bool) -> R {
    let fold = |a: &mut Asm| {
        if max {
            a.vmaxps(r, r, t)
        } else {
            a.vaddps(r, r, t)
        }
    };
    a.vshuff32x4(t, r, r, 0x4E)?;
    fold(a)?;
    a.vshuff32x4(t, r, r, 0xB1)?;
    fold(a)?;
    a.vpermilps(t, r, 0x4E)?;
    fold(a)?;
    a.vpermilps(t, r, 0xB1)?;
    fold(a)
}

#[cfg(all(test, target_arch = "x86_64", target_os = "linux"))]
mod tests {
    use super::super::test_exec::{exec, skip_without_avx512};
    use super::*;

    /// Every row length up to the limit over 1–7 rows (each tier of the step and the remainders), against the
    /// reference softmax within 2e-6; nothing written past the rows; a −∞ in a row gets (about) 0.
    #[test]
    fn rows_match_the_reference() {
        if skip_without_avx512("softmax rows") {
            return;
        }
        for len in 1..=MAX_LEN {
            type F = extern "sysv64" fn(*const f32, *mut f32, u64);
            // SAFETY: the assembled kernel's System V signature.
            let f: F = unsafe { std::mem::transmute(exec(&assemble(len).unwrap())) };
            for rows in 1..=7usize {
                let mut x: Vec<f32> = (0..rows * len)
                    .map(|i| ((i * 29 % 53) as f32 - 26.0) * 0.37)
                    .collect();
                if len > 1 {
                    x[0] = f32::NEG_INFINITY;
                }
                let mut y = vec![-5.0f32; rows * len + 1];
                f(x.as_ptr(), y.as_mut_ptr(), rows as u64);
                for r in 0..rows {
                    let row = &x[r * len..(r + 1) * len];
                    let mx = row.iter().fold(f32::NEG_INFINITY, |a, &b| a.max(b));
                    let sum: f64 = row.iter().map(|&v| ((v - mx) as f64).exp()).sum();
                    for (j, &v) in row.iter().enumerate() {
                        let want = (((v - mx) as f64).exp() / sum) as f32;
                        let got = y[r * len + j];
                        assert!(
                            (got - want).abs() <= 2e-6,
                            "len {len} rows {rows} [{r}][{j}]: {got} vs {want}"
                        );
                    }
                }
                assert_eq!(
                    y[rows * len],
                    -5.0,
                    "len {len} rows {rows}: write past the rows"
                );
            }
        }
    }
}
