//! AVX-512 machine code for Softmax over contiguous rows. Short ones (`len` ≤ 48: an attention's scores at the
//! sequence lengths of small encoders) are held in registers: each row lives in one to three `zmm` from load to store. A step takes
//! three rows of one vector (len ≤ 16) or one row of two or three, so that three independent chains overlap;
//! the row's maximum is reduced across lanes with `vshuff32x4` / `vpermilps`; the exp is `vmath_x86`'s (the
//! same operations as `codegen::math::exp`); the sum adds in the Cranelift kernel's order (four partial sums,
//! their pairs, then the elements past the last group of four, each broadcast by `vpermps`), and the division
//! is per element, so results are bitwise those of the Cranelift kernel (a fat bundle's sets agree). The last
//! vector of a row whose length is not a multiple of 16 is loaded under `k1` over −∞ (so it adds nothing to
//! the maximum) and stored under `k1`. The encoder's 128 rows of 16 took 11 µs in the Cranelift kernel (f32x4
//! exp, reductions through the lanes), 1.6–2.4 µs here.
//!
//! Longer rows (`assemble_long`: an attention over 128 or 512 keys) stream through memory in three passes per
//! row, with the same arithmetic: the maximum, `vmaxps` over the row's vectors; the exponentials, three vectors
//! per step, stored, their groups of four added in order to one `xmm` (the Cranelift kernel's four partial sums,
//! a dependency chain of a quarter as many adds as elements); then the division in place. Two rows run
//! together, each pass's steps alternating between them so that their chains overlap (the encoder's 512 rows of
//! 128: 20.0 → 18.4 µs; what is left is the exponentials' and the divisions' throughput). The Cranelift kernel
//! spent 1.9 ns per element on such rows (a 2-layer, hidden-256 encoder over 128 tokens: 124 µs of 2.3 ms per
//! layer).
//!
//! `fn(x: *const f32, y: *mut f32, rows: u64)` (System V).

use super::vmath_x86::{begin, finish, z, Em, NV, S};
use super::XMM;
use iced_x86::code_asm::*;

type Asm = CodeAssembler;
type R = Result<(), IcedError>;

/// The longest row held in registers; longer rows take `assemble_long`.
pub const MAX_LEN: usize = 16 * NV;

/// The longest row of any softmax row kernel (AVX-512 or AVX2): its byte offsets fit the displacements.
pub const MAX_ROW: usize = 1 << 24;

/// Whether rows of `len` elements have machine code.
pub fn supported(len: usize) -> bool {
    (1..=MAX_ROW).contains(&len)
}

/// Assembles the softmax of rows of `len` (`supported`) elements.
pub fn assemble(len: usize) -> Result<Vec<u8>, String> {
    let e = |x: IcedError| x.to_string();
    if !supported(len) {
        return Err(format!("softmax: no AVX-512 code for rows of {len}"));
    }
    if len > MAX_LEN {
        return assemble_long(len);
    }
    let mut a = CodeAssembler::new(64).map_err(e)?;
    let (mut m, table) = begin(&mut a).map_err(e)?;
    let ninf = m.off(f32::NEG_INFINITY.to_bits());
    a.vbroadcastss(zmm28, dword_ptr(r8 + ninf)).map_err(e)?;
    let tail = len % 16;
    if tail > 0 {
        a.mov(eax, (1u32 << tail) - 1).map_err(e)?;
        a.kmovw(k1, eax).map_err(e)?;
    }
    let row_bytes = (len * 4) as i32;
    // Rows per step: three when a row is one vector, else one.
    let tiers: Vec<usize> = if len <= 16 { vec![3, 2, 1] } else { vec![1] };
    let mut labels: Vec<CodeLabel> = (0..=tiers.len()).map(|_| a.create_label()).collect();
    for (i, &rows) in tiers.iter().enumerate() {
        a.set_label(&mut labels[i]).map_err(e)?;
        a.cmp(rdx, rows as i32).map_err(e)?;
        a.jb(labels[i + 1]).map_err(e)?;
        step(&mut a, &mut m, rows, len).map_err(e)?;
        a.add(rdi, rows as i32 * row_bytes).map_err(e)?;
        a.add(rsi, rows as i32 * row_bytes).map_err(e)?;
        a.sub(rdx, rows as i32).map_err(e)?;
        a.jmp(labels[i]).map_err(e)?;
    }
    a.set_label(&mut labels[tiers.len()]).map_err(e)?;
    finish(a, &m, table)
}

/// One step of `rows` rows of `len`, each `len / 16` rounded up vectors: vector v is row v / chunks, chunk
/// v % chunks.
fn step(a: &mut Asm, m: &mut Em, rows: usize, len: usize) -> R {
    let (chunks, tail, row_bytes) = (len.div_ceil(16), len % 16, (len * 4) as i32);
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
        row_max(a, acc, z(S::T1, r))?;
    }
    for v in 0..n {
        a.vsubps(z(S::X, v), z(S::X, v), z(S::A, first(v)))?;
    }
    m.exp(a, S::B, S::X)?;
    // Each row's sum, broadcast, in C of its first vector, in the Cranelift kernel's order (`ops::nn`):
    // four partial sums over the row's whole groups of four, then (s0 + s1) + (s2 + s3), then the rest one
    // element at a time (a row shorter than four: all of it, from its first element).
    let groups = len / 4;
    for r in (0..n).step_by(chunks) {
        // D is free here and below zmm16, so its xmm has a VEX encoding.
        let (acc, t) = (z(S::C, r), z(S::D, r));
        let mut rest = groups * 4..len;
        if groups > 0 {
            let (accx, tx) = (x(S::C, r), x(S::D, r));
            a.vmovaps(accx, x(S::B, r))?;
            for g in 1..groups {
                let v = r + g / 4;
                if g % 4 == 0 {
                    a.vaddps(accx, accx, x(S::B, v))?;
                } else {
                    a.vextractf32x4(tx, z(S::B, v), (g % 4) as u32)?;
                    a.vaddps(accx, accx, tx)?;
                }
            }
            sum_partials(a, accx, tx)?;
            a.vbroadcastss(acc, accx)?;
        } else {
            lane(a, m, acc, z(S::B, r), 0)?;
            rest = 1..len;
        }
        for j in rest {
            lane(a, m, t, z(S::B, r + j / 16), j % 16)?;
            a.vaddps(acc, acc, t)?;
        }
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

/// Rows longer than `MAX_LEN`, three passes each (see the file's comment). Registers: the step's slots
/// `zmm0..23` (the exponential uses X, B, T1 and T2: the running sums live in C's `xmm9`, scratch in `xmm10`,
/// both VEX-encodable), the row's maximum `zmm24` (then its sum), the lane index `zmm25`, scratch `zmm27`,
/// −∞ `zmm28`; `r9`/`r10` walk the row's input and output, `ecx` counts.
fn assemble_long(len: usize) -> Result<Vec<u8>, String> {
    let e = |x: IcedError| x.to_string();
    let mut a = CodeAssembler::new(64).map_err(e)?;
    let (mut m, table) = begin(&mut a).map_err(e)?;
    long_rows(&mut a, &mut m, len).map_err(e)?;
    finish(a, &m, table)
}

fn long_rows(a: &mut Asm, m: &mut Em, len: usize) -> R {
    let ninf = m.off(f32::NEG_INFINITY.to_bits());
    a.vbroadcastss(zmm28, dword_ptr(r8 + ninf))?;
    let tail = len % 16;
    if tail > 0 {
        a.mov(eax, (1u32 << tail) - 1)?;
        a.kmovw(k1, eax)?;
    }
    // Two rows at a time, then the last one alone.
    let rb = (len * 4) as i32;
    let pair = [
        Row {
            off: 0,
            max: zmm24,
            sum: xmm9,
        },
        Row {
            off: rb,
            max: zmm26,
            sum: xmm11,
        },
    ];
    let (mut top, mut one, mut done) = (a.create_label(), a.create_label(), a.create_label());
    a.set_label(&mut top)?;
    a.cmp(rdx, 2)?;
    a.jb(one)?;
    long_row(a, m, len, &pair)?;
    a.add(rdi, 2 * rb)?;
    a.add(rsi, 2 * rb)?;
    a.sub(rdx, 2)?;
    a.jmp(top)?;
    a.set_label(&mut one)?;
    a.test(rdx, rdx)?;
    a.jz(done)?;
    long_row(a, m, len, &pair[..1])?;
    a.set_label(&mut done)
}

/// One of the rows `long_row` runs together: its byte offset from `rdi` / `rsi`, the register of its maximum
/// (then of its sum, broadcast) and its running sums' `xmm` (VEX-encodable).
struct Row {
    off: i32,
    max: AsmRegisterZmm,
    sum: AsmRegisterXmm,
}

/// One row, or two interleaved (each pass's steps alternate between them, so that one row's dependency
/// chains — the maximum, the running sums, a quarter as many adds as elements — overlap the other's), at
/// `rdi` / `rsi` plus each row's offset. Each row's arithmetic is the one-row kernel's.
fn long_row(a: &mut Asm, m: &mut Em, len: usize, rows: &[Row]) -> R {
    let (full, tail) = (len / 16, len % 16);
    let tail_at = (full * 64) as i32;
    // The maximum.
    for r in rows {
        a.vmovaps(r.max, zmm28)?;
    }
    a.mov(r9, rdi)?;
    counted(a, full, &[r9], 64, |a| {
        for r in rows {
            a.vmaxps(r.max, r.max, zmmword_ptr(r9 + r.off))?;
        }
        Ok(())
    })?;
    for r in rows {
        if tail > 0 {
            a.vmovaps(zmm0, zmm28)?;
            a.vmovups(zmm0.k1(), zmmword_ptr(rdi + (tail_at + r.off)))?;
            a.vmaxps(r.max, r.max, zmm0)?;
        }
        row_max(a, r.max, zmm27)?;
    }
    // The exponentials, stored, and their groups of four added in order to the running sums.
    for r in rows {
        a.vxorps(r.sum, r.sum, r.sum)?;
    }
    a.mov(r9, rdi)?;
    a.mov(r10, rsi)?;
    let (steps, rest) = (full / NV, full % NV);
    counted(a, steps, &[r9, r10], 64 * NV as i32, |a| {
        for r in rows {
            exp_step(a, m, NV, 0, r)?;
        }
        Ok(())
    })?;
    if rest > 0 {
        for r in rows {
            exp_step(a, m, rest, 0, r)?;
        }
        a.add(r9, 64 * rest as i32)?;
        a.add(r10, 64 * rest as i32)?;
    }
    for r in rows {
        if tail > 0 {
            exp_step(a, m, 1, tail, r)?;
        }
        // (s0 + s1) + (s2 + s3) in every lane, then the elements past the last group of four one at a time
        // (from the tail step's exponentials, still in B).
        sum_partials(a, r.sum, xmm10)?;
        a.vbroadcastss(r.max, r.sum)?;
        for j in len / 4 * 4..len {
            lane(a, m, zmm27, z(S::B, 0), j % 16)?;
            a.vaddps(r.max, r.max, zmm27)?;
        }
    }
    // The division, in place.
    a.mov(r10, rsi)?;
    counted(a, full, &[r10], 64, |a| {
        for (i, r) in rows.iter().enumerate() {
            let y = z(S::X, i);
            a.vmovups(y, zmmword_ptr(r10 + r.off))?;
            a.vdivps(y, y, r.max)?;
            a.vmovups(zmmword_ptr(r10 + r.off), y)?;
        }
        Ok(())
    })?;
    if tail > 0 {
        for r in rows {
            let at = tail_at + r.off;
            a.vmovups(zmm0.k1().z(), zmmword_ptr(rsi + at))?;
            a.vdivps(zmm0, zmm0, r.max)?;
            a.vmovups(zmmword_ptr(rsi + at).k1(), zmm0)?;
        }
    }
    Ok(())
}

/// The loop over `rdx` rows of `len` elements from `rdi` (input) and `rsi` (output), `row` emitting one.
pub(super) fn each_row(a: &mut Asm, len: usize, mut row: impl FnMut(&mut Asm) -> R) -> R {
    let (mut top, mut done) = (a.create_label(), a.create_label());
    a.set_label(&mut top)?;
    a.test(rdx, rdx)?;
    a.jz(done)?;
    row(a)?;
    let row_bytes = (len * 4) as i32;
    a.add(rdi, row_bytes)?;
    a.add(rsi, row_bytes)?;
    a.dec(rdx)?;
    a.jmp(top)?;
    a.set_label(&mut done)
}

/// `(s0 + s1) + (s2 + s3)` of the four partial sums in `acc`, in its lane 0 (and every lane); `t` is scratch.
/// The Cranelift kernel's horizontal sum (`Kb::hsum`), in its order.
pub(super) fn sum_partials(a: &mut Asm, acc: AsmRegisterXmm, t: AsmRegisterXmm) -> R {
    a.vpermilps(t, acc, 0xB1)?;
    a.vaddps(acc, acc, t)?;
    a.vpermilps(t, acc, 0x4E)?;
    a.vaddps(acc, acc, t)
}

/// One step of the exponential pass over `n` vectors of row `r` at `r9` (stored at `r10`), plus the row's
/// offset: `tail` > 0 for the row's last, partial vector (`k1`; its whole groups of four are summed, the rest
/// by the caller).
fn exp_step(a: &mut Asm, m: &mut Em, n: usize, tail: usize, r: &Row) -> R {
    m.n = n;
    for v in 0..n {
        let (x, at) = (z(S::X, v), 64 * v as i32 + r.off);
        if tail > 0 {
            a.vmovaps(x, zmm28)?;
            a.vmovups(x.k1(), zmmword_ptr(r9 + at))?;
        } else {
            a.vmovups(x, zmmword_ptr(r9 + at))?;
        }
        a.vsubps(x, x, r.max)?;
    }
    m.exp(a, S::B, S::X)?;
    for v in 0..n {
        let (y, at) = (z(S::B, v), 64 * v as i32 + r.off);
        if tail > 0 {
            a.vmovups(zmmword_ptr(r10 + at).k1(), y)?;
        } else {
            a.vmovups(zmmword_ptr(r10 + at), y)?;
        }
        let groups = if tail > 0 { tail / 4 } else { 4 };
        for g in 0..groups {
            a.vextractf32x4(xmm10, y, g as u32)?;
            a.vaddps(r.sum, r.sum, xmm10)?;
        }
    }
    Ok(())
}

/// `count` (compile-time) runs of `body`, each followed by advancing `ptrs` by `stride` bytes; counts in `ecx`.
pub(super) fn counted(
    a: &mut Asm,
    count: usize,
    ptrs: &[AsmRegister64],
    stride: i32,
    mut body: impl FnMut(&mut Asm) -> R,
) -> R {
    if count == 0 {
        return Ok(());
    }
    let mut top = a.create_label();
    a.mov(ecx, count as u32)?;
    a.set_label(&mut top)?;
    body(a)?;
    for &p in ptrs {
        a.add(p, stride)?;
    }
    a.dec(ecx)?;
    a.jnz(top)
}

/// `d` = lane `l` of `src` in every lane (`vpermps` by a broadcast index in `zmm25`).
fn lane(a: &mut Asm, m: &mut Em, d: AsmRegisterZmm, src: AsmRegisterZmm, l: usize) -> R {
    a.vpbroadcastd(zmm25, dword_ptr(r8 + m.off(l as u32)))?;
    a.vpermps(d, zmm25, src)
}

/// The `xmm` under `z(s, v)`, for the slots below `zmm16` (VEX-encodable: `X` .. `E`).
fn x(s: S, v: usize) -> AsmRegisterXmm {
    XMM[s as usize * NV + v]
}

/// The maximum of `r`'s 16 lanes in every lane (exact in any order); `t` is scratch.
fn row_max(a: &mut Asm, r: AsmRegisterZmm, t: AsmRegisterZmm) -> R {
    for (shuffle, imm) in [(true, 0x4E), (true, 0xB1), (false, 0x4E), (false, 0xB1)] {
        if shuffle {
            a.vshuff32x4(t, r, r, imm)?;
        } else {
            a.vpermilps(t, r, imm)?;
        }
        a.vmaxps(r, r, t)?;
    }
    Ok(())
}

#[cfg(all(test, target_arch = "x86_64", target_os = "linux"))]
pub(crate) mod tests {
    use super::super::test_exec::{exec, skip_without_avx512};
    use super::*;
    use crate::ir::UnOp;

    type F = extern "sysv64" fn(*const f32, *mut f32, u64);

    fn kernel(code: Vec<u8>) -> F {
        // SAFETY: the assembled kernels' System V signature.
        unsafe { std::mem::transmute(exec(&code)) }
    }

    /// Every row length up to the limit of the short kernel and longer ones over 1–7 rows (each tier of the
    /// step, the long rows' steps, remainders and tails): bitwise the Cranelift kernel's arithmetic (the exp
    /// map's bits, its summation order, a division per element), within 2e-6 of the reference softmax, nothing
    /// written past the rows; a −∞ in a row gets (about) 0.
    #[test]
    fn rows_match_the_cranelift_order() {
        if skip_without_avx512("softmax rows") {
            return;
        }
        let exp = super::super::vmath_x86::assemble(UnOp::Exp).unwrap();
        check_rows(&exp, |len| assemble(len).unwrap());
    }

    /// Checks the softmax row kernels `build(len)` against the exp map `exp` (machine code of the same set).
    pub(crate) fn check_rows(exp: &[u8], build: impl Fn(usize) -> Vec<u8>) {
        let exp = kernel(exp.to_vec());
        for len in (1..=MAX_LEN).chain([49, 50, 63, 64, 65, 67, 100, 128, 131, 144, 257, 515]) {
            let f = kernel(build(len));
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
                    let d: Vec<f32> = row.iter().map(|&v| v - mx).collect();
                    let mut e = vec![0f32; len];
                    exp(d.as_ptr(), e.as_mut_ptr(), len as u64);
                    let groups = len / 4;
                    let (mut sum, rest) = if groups > 0 {
                        let mut p = [e[0], e[1], e[2], e[3]];
                        for g in 1..groups {
                            for (l, s) in p.iter_mut().enumerate() {
                                *s += e[4 * g + l];
                            }
                        }
                        ((p[0] + p[1]) + (p[2] + p[3]), 4 * groups..len)
                    } else {
                        (e[0], 1..len)
                    };
                    for j in rest {
                        sum += e[j];
                    }
                    let exact: f64 = row.iter().map(|&v| ((v - mx) as f64).exp()).sum();
                    for j in 0..len {
                        let got = y[r * len + j];
                        let want = e[j] / sum;
                        assert_eq!(
                            got.to_bits(),
                            want.to_bits(),
                            "len {len} rows {rows} [{r}][{j}]"
                        );
                        let reference = (((row[j] - mx) as f64).exp() / exact) as f32;
                        assert!(
                            (got - reference).abs() <= 2e-6,
                            "len {len} [{r}][{j}]: {got}"
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
