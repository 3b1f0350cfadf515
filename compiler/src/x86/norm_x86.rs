//! AVX-512 machine code for LayerNorm / RMSNorm over contiguous rows with per-element scale and bias (the rows
//! of `ops::nn::emit_norm` without per-row parameters; InstanceNorm keeps the Cranelift kernel). Four rows at
//! a time, each row's sums in one `zmm` whose four 128-bit quarters are the Cranelift kernel's four f32x4
//! partial sums (`Kb::row_sum`: lanes `4k..4k+4` of a block of 16 floats go to partial `k`, the whole 4-float
//! vectors past the last block to partials 0, 1, 2 in turn, then `(p0 + p1) + (p2 + p3)`, the horizontal sum
//! and the scalar tail), and every other operation the Cranelift kernel's (`v − mean` squared then added;
//! `1 / √(var/n + eps)`; `((v − mean) · inv) · scale + bias`, the bias `+0.0` when absent), so outputs are
//! bitwise those of the Cranelift kernel (a fat bundle's sets agree). The four rows' sums are independent
//! chains: the Cranelift kernel waited on one row's add latency (a 2-layer, hidden-256 encoder over 128 tokens:
//! 8.8 µs per LayerNorm, 69 ns per row of 256).
//!
//! `fn(x: *const f32, scale: *const f32, bias: *const f32, y: *mut f32, rows: u64)` (System V); `bias` is not
//! read without one. Registers: row `r`'s sums `zmm r`, its mean `zmm 4+r`, its `1/σ` `zmm 8+r`; scratch
//! `zmm12..15` (renamed per row); `+0.0` in `zmm16`; `r9` the byte offset within the rows, `r11` the constants.

use super::ZMM;
use iced_x86::code_asm::*;

type Asm = CodeAssembler;
type R = Result<(), IcedError>;

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

/// Rows per step (then 3, 2, 1 for the rest).
const GROUP: usize = 4;

/// Whether rows of `len` elements have machine code.
pub fn supported(len: usize) -> bool {
    (1..=MAX_LEN).contains(&len)
}

const T: AsmRegisterZmm = zmm12;

fn z(i: usize) -> AsmRegisterZmm {
    ZMM[i]
}

fn xmm(i: usize) -> AsmRegisterXmm {
    const X: [AsmRegisterXmm; 16] = [
        xmm0, xmm1, xmm2, xmm3, xmm4, xmm5, xmm6, xmm7, xmm8, xmm9, xmm10, xmm11, xmm12, xmm13,
        xmm14, xmm15,
    ];
    X[i]
}

/// Byte offsets of the constants after the code (`r11`, `assemble_rows`): the row length as f32, eps, 1.
pub(super) const N: i32 = 0;
pub(super) const EPS: i32 = 4;
pub(super) const ONE: i32 = 8;

/// Assembles the row kernel of `s`.
pub fn assemble(s: &NormRows) -> Result<Vec<u8>, String> {
    let prologue = |a: &mut Asm| {
        a.vxorps(zmm16, zmm16, zmm16)?;
        let tail = s.len % 16;
        if tail > 0 {
            a.mov(eax, (1u32 << tail) - 1)?;
            a.kmovw(k1, eax)?;
        }
        Ok(())
    };
    assemble_rows(s, "AVX-512", GROUP, prologue, |a, g| group(a, s, g))
}

/// The row kernel's frame, shared with `norm_avx2.rs`: `r11` at the constant table ([`N`], [`EPS`], [`ONE`]),
/// `prologue`, then steps of `group` rows (`body(a, g)` over the `g` rows at `rdi` / `rcx`), then of fewer for
/// the rest, down to one; `vzeroupper`, return, the table.
pub(super) fn assemble_rows(
    s: &NormRows,
    set: &str,
    group: usize,
    prologue: impl FnOnce(&mut Asm) -> R,
    mut body: impl FnMut(&mut Asm, usize) -> R,
) -> Result<Vec<u8>, String> {
    let e = |x: IcedError| x.to_string();
    if !supported(s.len) {
        return Err(format!("norm: no {set} code for rows of {}", s.len));
    }
    let mut a = CodeAssembler::new(64).map_err(e)?;
    let mut table = a.create_label();
    a.lea(r11, ptr(table)).map_err(e)?;
    prologue(&mut a).map_err(e)?;
    let rb = (s.len * 4) as i32;
    let tiers: Vec<usize> = (1..=group).rev().collect();
    let mut labels: Vec<CodeLabel> = (0..=tiers.len()).map(|_| a.create_label()).collect();
    for (i, &g) in tiers.iter().enumerate() {
        a.set_label(&mut labels[i]).map_err(e)?;
        a.cmp(r8, g as i32).map_err(e)?;
        a.jb(labels[i + 1]).map_err(e)?;
        body(&mut a, g).map_err(e)?;
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
pub(super) fn steps(
    a: &mut Asm,
    count: usize,
    step: i32,
    mut body: impl FnMut(&mut Asm) -> R,
) -> R {
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
    let x = |r: usize| rdi + r9 + r as i32 * rb;
    // The mean (RMSNorm: +0.0).
    for r in 0..g {
        a.vxorps(z(r), z(r), z(r))?;
        if s.rms {
            a.vxorps(z(4 + r), z(4 + r), z(4 + r))?;
        }
    }
    if !s.rms {
        steps(a, s.len / 16, 64, |a| {
            for r in 0..g {
                a.vaddps(z(r), z(r), zmmword_ptr(x(r)))?;
            }
            Ok(())
        })?;
        for r in 0..g {
            reduce(a, s, r, None)?;
            a.vdivss(xmm(r), xmm(r), dword_ptr(r11 + N))?;
            a.vbroadcastss(z(4 + r), xmm(r))?;
        }
    }
    // The variance, then 1 / √(var + eps).
    for r in 0..g {
        a.vxorps(z(r), z(r), z(r))?;
    }
    steps(a, s.len / 16, 64, |a| {
        for r in 0..g {
            a.vmovups(T, zmmword_ptr(x(r)))?;
            a.vsubps(T, T, z(4 + r))?;
            a.vmulps(T, T, T)?;
            a.vaddps(z(r), z(r), T)?;
        }
        Ok(())
    })?;
    for r in 0..g {
        reduce(a, s, r, Some(xmm(4 + r)))?;
        inv_sigma(a, xmm(r), xmm(8 + r))?;
        a.vbroadcastss(z(8 + r), xmm(8 + r))?;
    }
    // ((v − mean) · inv) · scale + bias, whole blocks then the tail under `k1`.
    steps(a, s.len / 16, 64, |a| {
        for r in 0..g {
            a.vmovups(T, zmmword_ptr(x(r)))?;
            normalize(a, s, r, rsi + r9, rdx + r9, false)?;
            a.vmovups(zmmword_ptr(rcx + r9 + r as i32 * rb), T)?;
        }
        Ok(())
    })?;
    let tail = s.len % 16;
    if tail > 0 {
        let off = (s.len / 16 * 64) as i32;
        for r in 0..g {
            a.vmovups(T.k1().z(), zmmword_ptr(rdi + off + r as i32 * rb))?;
            normalize(a, s, r, rsi + off, rdx + off, true)?;
            a.vmovups(zmmword_ptr(rcx + off + r as i32 * rb).k1(), T)?;
        }
    }
    Ok(())
}

/// `T = ((T − mean) · inv) · scale + bias` for row `r`, scale and bias at `sc` / `bi` (under `k1` when
/// `masked`: no read past the rows' end).
fn normalize(
    a: &mut Asm,
    s: &NormRows,
    r: usize,
    sc: AsmMemoryOperand,
    bi: AsmMemoryOperand,
    masked: bool,
) -> R {
    let t = if masked { T.k1().z() } else { T };
    a.vsubps(T, T, z(4 + r))?;
    a.vmulps(T, T, z(8 + r))?;
    a.vmulps(t, T, zmmword_ptr(sc))?;
    if s.bias {
        a.vaddps(t, T, zmmword_ptr(bi))
    } else {
        a.vaddps(T, T, zmm16)
    }
}

/// `inv = 1 / √(v / n + eps)` from the variance's sum in lane 0 of `v` (which it clobbers), as the Cranelift
/// kernel computes it.
pub(super) fn inv_sigma(a: &mut Asm, v: AsmRegisterXmm, inv: AsmRegisterXmm) -> R {
    a.vdivss(v, v, dword_ptr(r11 + N))?;
    a.vaddss(v, v, dword_ptr(r11 + EPS))?;
    a.vsqrtss(v, v, v)?;
    a.vmovss(inv, dword_ptr(r11 + ONE))?;
    a.vdivss(inv, inv, v)
}

/// Row `r`'s sum of its whole blocks (`zmm r`) completed in the Cranelift kernel's order into lane 0 of
/// `xmm r` (`finish_sums`). `mean`: the elements are `(v − mean)²` (the variance pass).
fn reduce(a: &mut Asm, s: &NormRows, r: usize, mean: Option<AsmRegisterXmm>) -> R {
    let p = [xmm(r), xmm12, xmm13, xmm14];
    for (k, &pk) in p.iter().enumerate().skip(1) {
        a.vextractf32x4(pk, z(r), k as u32)?;
    }
    finish_sums(a, s, r, p, mean, [xmm15, xmm12])
}

/// Completes row `r`'s sums of its whole blocks of 16, held as the Cranelift kernel's four f32x4 partials in
/// `p` (shared with `norm_avx2.rs`), in its order into lane 0 of `p[0]`: the 4-float vectors past the last
/// block into partials 0, 1, 2, `(p0 + p1) + (p2 + p3)`, the horizontal sum, then the scalar tail. `mean`:
/// the elements are `(v − mean)²` (the variance pass). `t`: scratch for the elements, and for the horizontal
/// sum (which may reuse `p[1]`).
pub(super) fn finish_sums(
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

#[cfg(all(test, target_arch = "x86_64", target_os = "linux"))]
pub(crate) mod tests {
    use super::super::test_exec::{exec, guarded, skip_without_avx512};
    use super::*;
    use crate::ir::ops::nn::normalize_row;

    type F = extern "sysv64" fn(*const f32, *const f32, *const f32, *mut f32, u64);

    /// `Kb::row_sum`'s order: four f32x4 partial sums over blocks of 16, the vectors past the last block into
    /// partials 0, 1, 2, `(p0 + p1) + (p2 + p3)` lane by lane, the horizontal sum, the scalar tail.
    fn row_sum(x: &[f32], f: impl Fn(f32) -> f32) -> f32 {
        let (nblk, nvec) = (x.len() / 16 * 16, x.len() / 4 * 4);
        let mut p = [[0f32; 4]; 4];
        for b in (0..nblk).step_by(16) {
            for (k, pk) in p.iter_mut().enumerate() {
                for (l, v) in pk.iter_mut().enumerate() {
                    *v += f(x[b + 4 * k + l]);
                }
            }
        }
        for (k, j) in (nblk..nvec).step_by(4).enumerate() {
            for (l, v) in p[k].iter_mut().enumerate() {
                *v += f(x[j + l]);
            }
        }
        let a: Vec<f32> = (0..4)
            .map(|l| (p[0][l] + p[1][l]) + (p[2][l] + p[3][l]))
            .collect();
        let mut s = (a[0] + a[1]) + (a[2] + a[3]);
        for &v in &x[nvec..] {
            s += f(v);
        }
        s
    }

    /// The Cranelift kernel's row (`ops::nn::emit_norm`), operation for operation.
    fn cranelift_row(x: &[f32], sc: &[f32], bi: Option<&[f32]>, eps: f32, rms: bool) -> Vec<f32> {
        let n = x.len() as f32;
        let mean = if rms { 0.0 } else { row_sum(x, |v| v) / n };
        let var = row_sum(x, |v| (v - mean) * (v - mean)) / n;
        let inv = 1.0 / (var + eps).sqrt();
        (0..x.len())
            .map(|j| ((x[j] - mean) * inv) * sc[j] + bi.map_or(0.0, |b| b[j]))
            .collect()
    }

    #[test]
    fn rows_match_the_cranelift_order() {
        if skip_without_avx512("norm rows") {
            return;
        }
        check_rows(|s| assemble(s).unwrap());
    }

    /// Checks the row kernels `build(spec)` over row lengths with every remainder (blocks of 16, 4-float
    /// vectors, scalars) and 1–9 rows (each group size and its remainders), with and without a bias, LayerNorm
    /// and RMSNorm: bitwise the Cranelift kernel's arithmetic, within 1e-5 of the reference, nothing read or
    /// written past the rows (guard pages after x, scale, bias and y; the float after the last row untouched).
    pub(crate) fn check_rows(build: impl Fn(&NormRows) -> Vec<u8>) {
        for len in (1..=40).chain([47, 64, 100, 128, 131, 256, 768, 1000]) {
            for (bias, rms) in [(true, false), (false, false), (true, true)] {
                let spec = NormRows {
                    len,
                    eps: 1e-5,
                    rms,
                    bias,
                };
                // SAFETY: the kernel's System V signature.
                let f: F = unsafe { std::mem::transmute(exec(&build(&spec))) };
                for rows in [1usize, 2, 3, 4, 5, 7, 9] {
                    let n = rows * len;
                    let (x, sc, bi, y) = (guarded(n), guarded(len), guarded(len), guarded(n + 1));
                    // SAFETY: each mapping holds the floats asked for (the guards follow them).
                    let (x, sc, bi, y) = unsafe {
                        (
                            std::slice::from_raw_parts_mut(x, n),
                            std::slice::from_raw_parts_mut(sc, len),
                            std::slice::from_raw_parts_mut(bi, len),
                            std::slice::from_raw_parts_mut(y, n + 1),
                        )
                    };
                    for (i, v) in x.iter_mut().enumerate() {
                        *v = ((i * 29 % 53) as f32 - 26.0) * 0.37 + (i / len) as f32;
                    }
                    for j in 0..len {
                        sc[j] = 0.5 + (j % 7) as f32 * 0.25;
                        bi[j] = (j % 5) as f32 * 0.1 - 0.2;
                    }
                    y.fill(-7.0);
                    f(
                        x.as_ptr(),
                        sc.as_ptr(),
                        bi.as_ptr(),
                        y.as_mut_ptr(),
                        rows as u64,
                    );
                    let b = bias.then_some(&bi[..]);
                    for r in 0..rows {
                        let row = &x[r * len..(r + 1) * len];
                        let want = cranelift_row(row, sc, b, 1e-5, rms);
                        let mut reference = vec![0f32; len];
                        normalize_row(row, sc, b, 1e-5, rms, &mut reference);
                        for j in 0..len {
                            let got = y[r * len + j];
                            assert_eq!(
                                got.to_bits(),
                                want[j].to_bits(),
                                "len {len} rows {rows} bias {bias} rms {rms} [{r}][{j}]"
                            );
                            assert!(
                                (got - reference[j]).abs() <= 1e-5 * reference[j].abs().max(1.0)
                            );
                        }
                    }
                    assert_eq!(y[n], -7.0, "len {len} rows {rows}: written past the rows");
                }
            }
        }
    }
}
