//! The AVX2 column strip: a GEMM's column tail of one to four columns (the pixel past 48 of a 7x7 plane, the
//! four past 192 of a 14x14 one) for a whole row group in one call, eight rows in the lanes of a `ymm`.
//!
//! The tail tiles it replaces (`gemm_x86.rs` at 8 columns) spend a whole 8-column vector per row on one to four
//! columns, and pack B's tail into a zero-padded panel per K block and row group: on ResNet-50's 7x7 layers at
//! `x86-64-v3` the one column past 48 cost 15–20 % of each layer, the four past 192 of its 14x14 ones 5–7 %.
//! Here A (weights, rows a row stride apart, steps of K adjacent) is turned on the fly into vectors of eight
//! rows at one step of K: per block of four steps, rows `r` and `r + 4` are loaded as the halves of a `ymm`
//! (`vmovups` + `vbroadcastf128` + `vblendps`) and two rounds of unpacks transpose the four registers within
//! their 128-bit halves; each vector then takes one FMA per column against a broadcast of B's element, read in
//! place. Several 8-row panels run together ([`chunk`]) so that enough accumulators hide the FMA latency; a K
//! not a multiple of four ends with single steps gathered by `vinsertps`.
//!
//! Each output is a sum of fma chains over blocks of `KC` steps of K in ascending order, each from +0.0 — the
//! chains the tiles compute — stored into the GEMM's column-tail buffer (row stride `c_rs`), whose epilogue (bias, residual, clamp) the caller applies
//! as it does after the tail tiles: results are bitwise the same.
//!
//! `fn(a: *const f32, b: *const f32, c: *mut f32, panels: u64)` (System V): `a` the first row at K = 0, `b` B's
//! element (0, first tail column), `c` the buffer's row 0, `panels` how many 8-row panels to compute.

use super::YMM;
use iced_x86::code_asm::*;

/// The most columns a strip takes.
pub const MAX_COLS: usize = 4;

/// Rows per panel: the lanes of a `ymm`.
pub const PANEL: usize = 8;

/// Steps of K per transposed block.
const BLOCK: usize = 4;

/// The compile-time shape of a column strip (strides in elements).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct StripSpec {
    /// Reduction length (≥ 1).
    pub k: usize,
    /// Depth of a K block (`GemmSpec::kc`, a multiple of 16).
    pub kc: usize,
    /// Columns (1..=[`MAX_COLS`]).
    pub cols: usize,
    /// A's row stride (its steps of K are adjacent).
    pub a_rs: usize,
    /// B's row stride (step per K).
    pub b_rs: usize,
    /// The output buffer's row stride (≥ `cols`).
    pub c_rs: usize,
}

/// Panels computed together for `cols` columns: at least eight accumulators where the registers allow it
/// (five hold a panel's block and the broadcast), and at most 32 rows, whose lines (rows a row stride apart, a
/// power of two for most layers: the same L1 set) must stay cached while their 16 steps of K are used.
/// ResNet-50 at `x86-64-v3` (AMD EPYC Zen 5, paired, bitwise equal): 2, 4 or 6 panels at one column within
/// 0.1 % of each other; eight panels, taken a block of K at a time across them, made its 2048 → 512 7x7
/// layers 25 % slower than the tail tiles.
pub fn chunk(cols: usize) -> usize {
    match cols {
        1 | 2 => 4,
        3 => 3,
        _ => 2,
    }
}

/// Byte displacement of `floats` elements as an `i32`, or an error naming the strip.
fn disp(floats: usize) -> Result<i32, String> {
    super::disp("column strip", floats)
}

/// Assembles the strip; `Err` when the shape or a displacement is out of range (the caller keeps the tiles).
pub fn assemble(s: &StripSpec) -> Result<Vec<u8>, String> {
    let e = |x: IcedError| x.to_string();
    if s.k == 0
        || s.kc == 0
        || !s.kc.is_multiple_of(16)
        || !(1..=MAX_COLS).contains(&s.cols)
        || s.c_rs < s.cols
    {
        return Err(format!("column strip shape out of range: {s:?}"));
    }
    let p = chunk(s.cols);
    let a_step = disp(p * PANEL * s.a_rs)?;
    let c_step = disp(p * PANEL * s.c_rs)?;
    disp(4 * BLOCK * s.b_rs)?;
    disp((p * PANEL - 1) * s.a_rs + 4 * BLOCK)?;
    disp((p * PANEL - 1) * s.c_rs + s.cols)?;
    disp((4 * BLOCK - 1) * s.b_rs + s.cols)?;
    let mut a = CodeAssembler::new(64).map_err(e)?;
    // rdi: A at the chunk's first row; rsi: B; rdx: C at the chunk's first row; rcx: panels left.
    let mut top = a.create_label();
    let mut rest = a.create_label();
    let mut done = a.create_label();
    a.set_label(&mut top).map_err(e)?;
    a.cmp(rcx, p as i32).map_err(e)?;
    a.jb(rest).map_err(e)?;
    chunk_body(&mut a, s, p).map_err(e)?;
    a.add(rdi, a_step).map_err(e)?;
    a.add(rdx, c_step).map_err(e)?;
    a.sub(rcx, p as i32).map_err(e)?;
    a.jmp(top).map_err(e)?;
    // The last chunk, of 1..p panels (none: done).
    a.set_label(&mut rest).map_err(e)?;
    for q in 1..p {
        let mut next = a.create_label();
        a.cmp(rcx, q as i32).map_err(e)?;
        a.jne(if q + 1 < p { next } else { done }).map_err(e)?;
        chunk_body(&mut a, s, q).map_err(e)?;
        if q + 1 < p {
            a.jmp(done).map_err(e)?;
            a.set_label(&mut next).map_err(e)?;
        }
    }
    a.set_label(&mut done).map_err(e)?;
    a.vzeroupper().map_err(e)?;
    a.ret().map_err(e)?;
    a.assemble(0).map_err(e)
}

/// `q` panels of `s.cols` columns at `rdi`, `rsi`, `rdx`: accumulator (panel, column) is `ymm[5 + panel·cols +
/// column]`; `ymm0..4` hold a panel's transposed block and the broadcast. `r8` counts blocks of four steps of
/// K, `r11` blocks of `kc`, `r9` and `r10` walk A and B. With more than one K block each block's sums start at
/// +0.0 and are added to the buffer, which starts at +0.0 (as the tiles do: `gemm_x86.rs`).
fn chunk_body(a: &mut CodeAssembler, s: &StripSpec, q: usize) -> Result<(), IcedError> {
    a.mov(r9, rdi)?;
    a.mov(r10, rsi)?;
    let (full, tail) = (s.k / s.kc, s.k % s.kc);
    if full + usize::from(tail > 0) == 1 {
        zero(a, s, q)?;
        steps(a, s, q, s.k)?;
        return store(a, s, q, false);
    }
    zero(a, s, q)?;
    store(a, s, q, false)?;
    if full > 0 {
        a.mov(r11, full as u64)?;
        let mut next = a.create_label();
        a.set_label(&mut next)?;
        zero(a, s, q)?;
        steps(a, s, q, s.kc)?;
        store(a, s, q, true)?;
        a.dec(r11)?;
        a.jnz(next)?;
    }
    if tail > 0 {
        zero(a, s, q)?;
        steps(a, s, q, tail)?;
        store(a, s, q, true)?;
    }
    Ok(())
}

/// Accumulator of `panel`, `col`.
fn acc(s: &StripSpec, panel: usize, col: usize) -> AsmRegisterYmm {
    YMM[5 + panel * s.cols + col]
}

/// Sets the accumulators to +0.0.
fn zero(a: &mut CodeAssembler, s: &StripSpec, q: usize) -> Result<(), IcedError> {
    for panel in 0..q {
        for col in 0..s.cols {
            let v = acc(s, panel, col);
            a.vxorps(v, v, v)?;
        }
    }
    Ok(())
}

/// `depth` steps of K from `r9` / `r10` into the accumulators, advancing both past the whole blocks of four
/// steps (a shorter last block, `depth % 4`, ends the reduction).
fn steps(a: &mut CodeAssembler, s: &StripSpec, q: usize, depth: usize) -> Result<(), IcedError> {
    let row =
        |panel: usize, r: usize, k: usize| r9 + (4 * ((panel * PANEL + r) * s.a_rs + k)) as i32;
    let b_at = |k: usize, col: usize| r10 + (4 * (k * s.b_rs + col)) as i32;
    // One block of four steps of K at `kk` steps past r9 / r10 for `panel`.
    let block = |a: &mut CodeAssembler, panel: usize, kk: usize| -> Result<(), IcedError> {
        // Rows r and r + 4 of the block as the halves of ymm r (r < 4), ymm4 the scratch.
        for (r, &y) in YMM[..4].iter().enumerate() {
            a.vmovups(super::xmm_of(y), ptr(row(panel, r, kk)))?;
            a.vbroadcastf128(ymm4, ptr(row(panel, r + 4, kk)))?;
            a.vblendps(y, y, ymm4, 0xF0)?;
        }
        // Pairs of rows, then of pairs: step j of K ends in `steps[j]`, ymm1 free for the broadcast.
        a.vunpcklps(ymm4, ymm0, ymm1)?;
        a.vunpckhps(ymm1, ymm0, ymm1)?;
        a.vunpcklps(ymm0, ymm2, ymm3)?;
        a.vunpckhps(ymm3, ymm2, ymm3)?;
        a.vunpcklpd(ymm2, ymm4, ymm0)?;
        a.vunpckhpd(ymm0, ymm4, ymm0)?;
        a.vunpcklpd(ymm4, ymm1, ymm3)?;
        a.vunpckhpd(ymm3, ymm1, ymm3)?;
        let steps = [ymm2, ymm0, ymm4, ymm3];
        for (j, &v) in steps.iter().enumerate() {
            for col in 0..s.cols {
                a.vbroadcastss(ymm1, dword_ptr(b_at(kk + j, col)))?;
                a.vfmadd231ps(acc(s, panel, col), v, ymm1)?;
            }
        }
        Ok(())
    };
    // Blocks of K sixteen steps at a time (four blocks of each panel in turn, so that each row's line is used
    // whole while it is in L1), then four at a time.
    let blocks = depth / BLOCK;
    for (unroll, count) in [(4, blocks / 4), (1, blocks % 4)] {
        if count == 0 {
            continue;
        }
        a.mov(r8, count as u64)?;
        let mut step = a.create_label();
        a.set_label(&mut step)?;
        for panel in 0..q {
            for u in 0..unroll {
                block(a, panel, u * BLOCK)?;
            }
        }
        a.add(r9, (4 * unroll * BLOCK) as i32)?;
        a.add(r10, (4 * unroll * BLOCK * s.b_rs) as i32)?;
        a.dec(r8)?;
        a.jnz(step)?;
    }
    // The last depth % 4 steps one at a time: the eight rows gathered into ymm0 (rows 4..8 via xmm4).
    for j in 0..depth % BLOCK {
        for panel in 0..q {
            gather8(a, |r| row(panel, r, j))?;
            for col in 0..s.cols {
                a.vbroadcastss(ymm1, dword_ptr(b_at(j, col)))?;
                a.vfmadd231ps(acc(s, panel, col), ymm0, ymm1)?;
            }
        }
    }
    Ok(())
}

/// Gathers the floats at `at(0..8)` into the lanes of `ymm0` (through `xmm0` and `xmm4`).
fn gather8(a: &mut CodeAssembler, at: impl Fn(usize) -> AsmMemoryOperand) -> Result<(), IcedError> {
    for (half, x) in [xmm0, xmm4].into_iter().enumerate() {
        a.vmovss(x, dword_ptr(at(4 * half)))?;
        for lane in 1..4 {
            a.vinsertps(x, x, dword_ptr(at(4 * half + lane)), (lane << 4) as i32)?;
        }
    }
    a.vinsertf128(ymm0, ymm0, xmm4, 1)
}

/// Stores the accumulators into the buffer at `rdx` (row `panel·8 + lane`, column `col`), with `add` after
/// adding the values already there (gathered into `ymm0` the way the last steps of K gather A).
fn store(a: &mut CodeAssembler, s: &StripSpec, q: usize, add: bool) -> Result<(), IcedError> {
    let at = |panel: usize, lane: usize, col: usize| {
        rdx + (4 * ((panel * PANEL + lane) * s.c_rs + col)) as i32
    };
    for panel in 0..q {
        for col in 0..s.cols {
            let v = acc(s, panel, col);
            if add {
                gather8(a, |lane| at(panel, lane, col))?;
                a.vaddps(v, v, ymm0)?;
            }
            let lo = super::xmm_of(v);
            a.vmovss(dword_ptr(at(panel, 0, col)), lo)?;
            for lane in 1..4 {
                a.vextractps(dword_ptr(at(panel, lane, col)), lo, lane as i32)?;
            }
            a.vextractf128(xmm4, v, 1)?;
            a.vmovss(dword_ptr(at(panel, 4, col)), xmm4)?;
            for lane in 5..8 {
                a.vextractps(dword_ptr(at(panel, lane, col)), xmm4, (lane - 4) as i32)?;
            }
        }
    }
    Ok(())
}

#[cfg(all(test, target_arch = "x86_64", target_os = "linux"))]
mod tests {
    use super::super::test_exec::{exec, guarded, pattern, skip_without_avx2};
    use super::*;

    /// Every shape's outputs bitwise against the fma chains over blocks of K from +0.0, summed, and nothing else in the buffer
    /// written; A and B end on guard pages (no read past them). Panel counts cover whole chunks and every
    /// remainder.
    #[test]
    fn strips_match_the_fma_chain() {
        if skip_without_avx2("AVX2 column strip") {
            return;
        }
        for cols in 1..=MAX_COLS {
            for k in [1, 3, 4, 16, 77, KC, KC + 5, 2 * KC + 16, 3 * KC] {
                for panels in 1..=2 * chunk(cols) + 1 {
                    check(cols, k, panels);
                }
            }
        }
    }

    /// The K block depth of the checks.
    const KC: usize = 64;

    fn check(cols: usize, k: usize, panels: usize) {
        let b_rs = cols + 5;
        let c_rs = 8;
        let rows = panels * PANEL;
        let a_rs = k + 3;
        let spec = StripSpec {
            k,
            kc: KC,
            cols,
            a_rs,
            b_rs,
            c_rs,
        };
        let code = assemble(&spec).unwrap();
        let f: extern "sysv64" fn(*const f32, *const f32, *mut f32, u64) =
            // SAFETY: the assembled strip, whose contract is this signature.
            unsafe { std::mem::transmute(exec(&code)) };
        let a_len = (rows - 1) * a_rs + k;
        let b_len = (k - 1) * b_rs + cols;
        let (a, b) = (guarded(a_len), guarded(b_len));
        // SAFETY: `guarded` buffers of exactly these lengths.
        let (a, b) = unsafe {
            (
                std::slice::from_raw_parts_mut(a, a_len),
                std::slice::from_raw_parts_mut(b, b_len),
            )
        };
        for (i, x) in a.iter_mut().enumerate() {
            *x = pattern(i);
        }
        for (i, x) in b.iter_mut().enumerate() {
            *x = pattern(i * 7 + 3);
        }
        let mut c = vec![-1.0f32; rows * c_rs];
        f(a.as_ptr(), b.as_ptr(), c.as_mut_ptr(), panels as u64);
        for r in 0..rows {
            for j in 0..c_rs {
                let want = if j < cols {
                    (0..k).step_by(KC).fold(0.0f32, |total, lo| {
                        total
                            + (lo..k.min(lo + KC)).fold(0.0f32, |acc, p| {
                                let av = a[r * a_rs + p];
                                av.mul_add(b[p * b_rs + j], acc)
                            })
                    })
                } else {
                    -1.0
                };
                let got = c[r * c_rs + j];
                assert_eq!(
                    got.to_bits(),
                    want.to_bits(),
                    "cols {cols} k {k} panels {panels}: row {r} col {j}: {got} vs {want}"
                );
            }
        }
    }
}
