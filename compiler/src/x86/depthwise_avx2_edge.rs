//! The AVX2 depthwise row kernel's edge rows: whole input rows whose outputs reach into the padding on the
//! left (`DwRowF32::left`) or right (`DwRowF32::right`), in rows mode with the output count fixed at compile
//! time (`DwRowF32::count`), so that a plane with a border runs whole in the kernel (`PlaneMode::Edge`, the
//! rows above and below the input from zeroed stack buffers) instead of its interior in the kernel and its
//! border on the scalar path, or a copy of the whole plane.
//!
//! Each row is laid out at compile time: steps of up to eight vectors (eight accumulators from the bias),
//! one `vbroadcastss` per tap and step, one `vfmadd231ps` per tap and vector in (ky, kx) order. A vector's
//! load for a tap is plain where all its eight lanes lie inside the row, else a `vmaskmovps` under a
//! compile-time mask of the lanes that are inside and needed (zero where none is), so the taps in the padding
//! read +0.0 — the border path's zeroed taps, bitwise — and no load leaves the row. At stride 2 a vector's 16
//! inputs are two such loads and one `vshufps` of their even lanes (outputs in the order 0 1 4 5 2 3 6 7, one
//! `vpermpd` before the store), as in the row kernel; the last vector's store is masked to the row's outputs.
//!
//! Same call as the row kernel in rows mode: `fn(x, out, w, bias, count, rows)` (System V), `x` the input
//! `left` columns before the first row's first column.

use super::depthwise_x86::tap_offsets;
use super::YMM;
use crate::kernel::depthwise::DwRowF32;
use iced_x86::code_asm::*;

/// Most outputs per edge row: its code grows with the row.
pub const MAX_COUNT: usize = 256;

/// Vectors per step (the accumulators ymm0–7).
const STEP: usize = 8;

/// How one load of a vector's tap reads the row.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Load {
    /// All eight lanes inside the row.
    Plain,
    /// Under the mask of these lanes (bit `i`: lane `i`).
    Masked(u8),
    /// No lane inside and needed: a zero vector.
    Zero,
}

/// The load of the eight inputs from column `c0` (relative to the row's first column) where lane `i` is
/// needed when `needed(i)`, in a row of `w` columns.
fn load(c0: isize, w: usize, needed: impl Fn(usize) -> bool) -> Load {
    let inside = |i: usize| (0..w as isize).contains(&(c0 + i as isize));
    if (0..8).all(inside) {
        return Load::Plain;
    }
    match (0..8)
        .filter(|&i| needed(i) && inside(i))
        .fold(0u8, |m, i| m | 1 << i)
    {
        0 => Load::Zero,
        m => Load::Masked(m),
    }
}

/// The masks the kernel keeps after its code, one label each, and which one each mask register holds.
struct Masks {
    labels: Vec<(u8, CodeLabel)>,
    held: [Option<u8>; 2],
}

impl Masks {
    /// Puts mask `bits` into `reg` (ymm12: `slot` 0, ymm13: 1) unless it holds it already.
    fn load(
        &mut self,
        a: &mut CodeAssembler,
        slot: usize,
        bits: u8,
    ) -> Result<AsmRegisterYmm, IcedError> {
        let reg = [ymm12, ymm13][slot];
        if self.held[slot] != Some(bits) {
            let label = match self.labels.iter().find(|(b, _)| *b == bits) {
                Some(&(_, l)) => l,
                None => {
                    let l = a.create_label();
                    self.labels.push((bits, l));
                    l
                }
            };
            a.vmovups(reg, ptr(label))?;
            self.held[slot] = Some(bits);
        }
        Ok(reg)
    }

    /// A masked or zero `load` of `at` into `dst` (its mask in `slot`); `false`, emitting nothing, for a plain
    /// one, which the caller takes as a memory operand.
    fn load_reg(
        &mut self,
        a: &mut CodeAssembler,
        load: Load,
        slot: usize,
        dst: AsmRegisterYmm,
        at: AsmMemoryOperand,
    ) -> Result<bool, IcedError> {
        match load {
            Load::Plain => return Ok(false),
            Load::Masked(bits) => {
                let m = self.load(a, slot, bits)?;
                a.vmaskmovps(dst, m, at)?;
            }
            Load::Zero => a.vxorps(dst, dst, dst)?,
        }
        Ok(true)
    }
}

/// Assembles the edge-row kernel; `Err` for a shape it does not take (no static count or rows, more than
/// [`MAX_COUNT`] outputs, max pooling, split rows, a stride other than 1 or 2) or displacements that do not fit.
pub fn assemble(s: &DwRowF32) -> Result<Vec<u8>, String> {
    let e = |x: IcedError| x.to_string();
    let (Some(step_rows), Some(count)) = (s.rows, s.count) else {
        return Err(format!(
            "AVX2 depthwise edge rows need rows mode and a static count: {s:?}"
        ));
    };
    let taps = s.kernel[0] * s.kernel[1];
    if taps == 0
        || count == 0
        || count > MAX_COUNT
        || s.max
        || s.split.is_some()
        || !(1..=2).contains(&s.stride)
        || s.right.is_some_and(|r| r != count)
    {
        return Err(format!(
            "AVX2 depthwise edge rows: shape out of range: {s:?}"
        ));
    }
    let st = s.stride;
    // The furthest load: the last vector's second half.
    let tap_off = tap_offsets(s, count.div_ceil(8) * 32 * st + 64)?;
    let mut a = CodeAssembler::new(64).map_err(e)?;
    // ymm0-7 accumulators, ymm8 bias, ymm9 lo, ymm10 hi, ymm11 the broadcast tap, ymm12-13 masks, ymm14-15
    // inputs.
    let (lo, hi) = prologue(&mut a, s).map_err(e)?;
    let mut masks = Masks {
        labels: Vec::new(),
        held: [None; 2],
    };
    let (kw, dw) = (s.kernel[1], s.dilations[1]);
    let vectors: Vec<usize> = (0..count).step_by(8).collect();
    let row = |a: &mut CodeAssembler, masks: &mut Masks| -> Result<(), IcedError> {
        // The row loop jumps back here: what the mask registers held is unknown.
        masks.held = [None; 2];
        for chunk in vectors.chunks(STEP) {
            for acc in &YMM[..chunk.len()] {
                a.vmovaps(*acc, ymm8)?;
            }
            for (t, &off) in tap_off.iter().enumerate() {
                a.vbroadcastss(ymm11, dword_ptr(rdx + (t * 4) as i32))?;
                let kx = (t % kw * dw) as isize;
                for (v, &o0) in chunk.iter().enumerate() {
                    let n = (count - o0).min(8);
                    let at = rdi + off + (o0 * st * 4) as i32;
                    let c0 = (o0 * st) as isize + kx - s.left as isize;
                    let acc = YMM[v];
                    if st == 1 {
                        let l = load(c0, s.w, |i| i < n);
                        if masks.load_reg(a, l, 0, ymm14, ptr(at))? {
                            a.vfmadd231ps(acc, ymm14, ymm11)?;
                        } else {
                            a.vfmadd231ps(acc, ymm11, ptr(at))?;
                        }
                        continue;
                    }
                    // Stride 2: lane i of the first load is input 2·o + kx for output i / 2 (even i), of the
                    // second for output 4 + i / 2.
                    let first = load(c0, s.w, |i| i % 2 == 0 && i / 2 < n);
                    let second = load(c0 + 8, s.w, |i| i % 2 == 0 && 4 + i / 2 < n);
                    if !masks.load_reg(a, first, 0, ymm14, ptr(at))? {
                        a.vmovups(ymm14, ptr(at))?;
                    }
                    if masks.load_reg(a, second, 1, ymm15, ptr(at + 32))? {
                        a.vshufps(ymm14, ymm14, ymm15, 0x88)?;
                    } else {
                        a.vshufps(ymm14, ymm14, ptr(at + 32), 0x88)?;
                    }
                    a.vfmadd231ps(acc, ymm14, ymm11)?;
                }
            }
            for (v, &o0) in chunk.iter().enumerate() {
                let acc = YMM[v];
                if st == 2 {
                    a.vpermpd(acc, acc, 0xd8)?;
                }
                super::clamp_keep_nan(a, acc, lo, hi)?;
                let out = ptr(rsi + (o0 * 4) as i32);
                match count - o0 {
                    n if n >= 8 => a.vmovups(out, acc)?,
                    n => {
                        let m = masks.load(a, 0, ((1u16 << n) - 1) as u8)?;
                        a.vmaskmovps(out, m, acc)?;
                    }
                }
            }
        }
        Ok(())
    };
    super::row_groups(&mut a, step_rows, 1, |a, _| row(a, &mut masks))?;
    a.vzeroupper().map_err(e)?;
    a.ret().map_err(e)?;
    for (bits, mut label) in masks.labels {
        a.set_label(&mut label).map_err(e)?;
        let lanes: Vec<u8> = (0..8)
            .flat_map(|i| if bits >> i & 1 == 1 { u32::MAX } else { 0 }.to_le_bytes())
            .collect();
        a.db(&lanes).map_err(e)?;
    }
    a.assemble(0).map_err(e)
}

/// The row kernels' common setup (the edge rows' here and `depthwise_avx2.rs`'s): ymm8 the bias
/// (`rcx`) broadcast, or +0.0 without one; ymm9 / ymm10 the clamp bounds, returned for `clamp_keep_nan`.
pub(super) fn prologue(a: &mut CodeAssembler, s: &DwRowF32) -> Result<super::BoundsYmm, IcedError> {
    if s.bias {
        a.vbroadcastss(ymm8, dword_ptr(rcx))?;
    } else {
        a.vxorps(ymm8, ymm8, ymm8)?;
    }
    super::clamp_bounds_ymm(a, (s.lo, s.hi), [ymm9, ymm10])
}
