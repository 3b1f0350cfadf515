//! The steps of the AVX-512 depthwise row kernel (`depthwise_x86.rs`): the vectors of one to eight output rows
//! from the bias through every tap to the clamped store. A step with a run-time count (`Steps::dynamic`) covers
//! `n` whole vectors, a masked tail or a padded first or last vector, one load (two at stride 2) per tap and
//! vector; a step of a row laid out at compile time (`Steps::fixed`) covers given vectors under compile-time
//! masks, and where the taps allow loads each vector's inputs once per input row (`eo` at stride 2, `shifted`
//! at stride 1). Every output's chain is the one-row kernel's: `vfmadd231ps` per tap in (ky, kx) order.

use super::super::ZMM;
use crate::kernel::depthwise::DwRowF32;
use iced_x86::code_asm::*;

/// The longest row laid out at compile time (`DwRowF32::count`): 16 vectors, four steps.
const MAX_FIXED_COUNT: usize = 256;

/// The part of a row a step computes.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(super) enum Part {
    /// Whole vectors inside the row.
    Body,
    /// The masked tail (`super::tail_masks_zmm`'s k1 / k3 inputs, k5 outputs; with `right`, each tap's lanes
    /// past the row cleared too).
    Tail,
    /// The row's first vector with `left`: each tap's first load zeroes its lanes left of the row (k6).
    First,
    /// The peeled last vector of a row with `right` whose length is a multiple of 16: right masks on the
    /// loads, unmasked stores.
    Last,
    /// A row of fewer than 16 outputs with `left`: the masked tail, each tap's first load also zeroing its
    /// lanes left of the row.
    Narrow,
}

/// In rows mode, the output rows the kernel computes per step (`R` > 1) and the input rows from one output row
/// to the next, when it can: their fma chains interleaved and each input vector that several rows read loaded
/// once (`load_order`). A step's chains of KH·KW dependent fmas, four where a row has four vectors, left the
/// FMA units idle on rows of 28–56 outputs; so eight accumulators in all (zmm0–3, zmm12–15): eight rows of
/// one vector (rows of up to 16 outputs, `rows[1]`), four of two, else two rows of up to four.
pub(super) fn row_group(s: &DwRowF32) -> Option<(usize, usize)> {
    let [x, out] = s.rows?;
    let rows = match s.count.unwrap_or(out).div_ceil(16) {
        0 | 1 => 8,
        2 => 4,
        _ => 2,
    };
    (s.w > 0 && x.is_multiple_of(s.w)).then(|| (rows, x / s.w))
}

/// The loads of `order` (`load_order`, `kw` tap columns of dilation 1) by input row, for [`Steps::fixed`]'
/// `eo` and `shifted` steps: the byte offset of the row's tap-column-0 inputs, and per tap column the (row,
/// tap) pairs that multiply it.
type KxRow = (i32, Vec<Vec<(usize, usize)>>);
fn kx_rows(order: &[Load], tap_off: &[i32], row_x: i32, kw: usize) -> Vec<KxRow> {
    let mut rows: Vec<(usize, KxRow)> = Vec::new();
    for l in order {
        match rows.last_mut() {
            Some((ir, (_, by_kx))) if *ir == l.ir => by_kx[l.kx].extend(&l.pairs),
            _ => {
                // The first tap column's inputs lie `kx` floats before this load's.
                let (r, t) = l.pairs[0];
                let base = tap_off[t] + r as i32 * row_x - 4 * l.kx as i32;
                let mut by_kx = vec![Vec::new(); kw];
                by_kx[l.kx].extend(&l.pairs);
                rows.push((l.ir, (base, by_kx)));
            }
        }
    }
    rows.into_iter().map(|(_, row)| row).collect()
}

/// Accumulator `i` of a step (row r, vector v of n at `r·n + v`): zmm0–3, then zmm12–15.
fn acc(i: usize) -> AsmRegisterZmm {
    ZMM[if i < 4 { i } else { 8 + i }]
}

/// One load of a step on several output rows: the input row (from the step's first) and tap column it reads,
/// and the (row, tap) pairs that multiply it — the first gives its address.
struct Load {
    ir: usize,
    kx: usize,
    pairs: Vec<(usize, usize)>,
}

/// A step's loads on `rows` output rows `step` input rows apart, in issue order: one per distinct input
/// position (input row, tap column). Sorted by input row, then column, each row's taps come in (ky, kx)
/// order: every output's fma chain is the one-row kernel's.
fn load_order(s: &DwRowF32, rows: usize, step: usize) -> Vec<Load> {
    let [kh, kw] = s.kernel;
    let mut taps: Vec<(usize, usize, usize, usize)> = (0..rows)
        .flat_map(|r| (0..kh * kw).map(move |t| (r * step + t / kw * s.dilations[0], t % kw, r, t)))
        .collect();
    taps.sort_unstable();
    let mut loads: Vec<Load> = Vec::new();
    for (ir, kx, r, t) in taps {
        match loads.last_mut() {
            Some(l) if (l.ir, l.kx) == (ir, kx) => l.pairs.push((r, t)),
            _ => loads.push(Load {
                ir,
                kx,
                pairs: vec![(r, t)],
            }),
        }
    }
    loads
}

/// What a step emitter needs of `assemble`'s plan: the spec, the taps' byte offsets, the load stride, the row
/// group (`row_group`), the registers of the taps, the byte steps between the rows of a group, and the
/// fixed-row loading modes (`eo`, `shifted`: see `assemble`).
pub(super) struct Steps<'a> {
    pub(super) s: &'a DwRowF32,
    pub(super) tap_off: Vec<i32>,
    pub(super) st: usize,
    pub(super) group: Option<(usize, usize)>,
    pub(super) tap_base: usize,
    pub(super) reg_taps: usize,
    pub(super) row_x: i32,
    pub(super) row_out: i32,
    pub(super) eo: bool,
    pub(super) shifted: bool,
}

impl Steps<'_> {
    /// Tap `t` times `x` into `acc` (the maximum in max mode), the tap from its register or broadcast from memory.
    fn tap(
        &self,
        a: &mut CodeAssembler,
        acc: AsmRegisterZmm,
        x: AsmRegisterZmm,
        t: usize,
    ) -> Result<(), IcedError> {
        if self.s.max {
            super::super::max_into(a, acc, x)
        } else if t < self.reg_taps {
            a.vfmadd231ps(acc, x, ZMM[self.tap_base + t])
        } else {
            a.vfmadd231ps(acc, x, dword_bcst(rdx + (t * 4) as i32))
        }
    }

    /// Loads the 16 floats at `rdi + at` into `x` under the compile-time mask `m` (through k6; all lanes: a
    /// plain load, none: zeroed without a load).
    fn load(a: &mut CodeAssembler, x: AsmRegisterZmm, at: i32, m: u32) -> Result<(), IcedError> {
        match m {
            0 => a.vpxord(x, x, x),
            0xffff => a.vmovups(x, zmmword_ptr(rdi + at)),
            _ => {
                a.mov(eax, m)?;
                a.kmovw(k6, eax)?;
                a.vmovups(x.k6().z(), zmmword_ptr(rdi + at))
            }
        }
    }

    /// Clamps accumulator `x` and stores it at `rsi + at`, under k5 when `masked`.
    fn store(
        &self,
        a: &mut CodeAssembler,
        x: AsmRegisterZmm,
        at: i32,
        masked: bool,
    ) -> Result<(), IcedError> {
        let s = self.s;
        super::super::clamp_keep_nan(a, x, s.lo.map(|b| (zmm9, b)), s.hi.map(|_| zmm10))?;
        let dst = zmmword_ptr(rsi + at);
        if masked {
            a.vmovups(dst.k5(), x)
        } else {
            a.vmovups(dst, x)
        }
    }

    /// One step of `n` vectors of a row's `part` (see `Part`) on `rr` rows (1, or those of `group`), the count
    /// at run time.
    pub(super) fn dynamic(
        &self,
        a: &mut CodeAssembler,
        n: usize,
        part: Part,
        rr: usize,
    ) -> Result<(), IcedError> {
        let (s, st) = (self.s, self.st);
        let masked = matches!(part, Part::Tail | Part::Narrow);
        let left = match part {
            Part::First | Part::Narrow => s.left,
            _ => 0,
        };
        let acc = |r: usize, v: usize| acc(r * n + v);
        for r in 0..rr {
            for v in 0..n {
                a.vmovaps(acc(r, v), zmm8)?;
            }
        }
        for Load { pairs, .. } in load_order(s, rr, self.group.map_or(0, |g| g.1)) {
            let (r, t) = pairs[0];
            let off = self.tap_off[t] + r as i32 * self.row_x;
            let kc = t % s.kernel[1] * s.dilations[1];
            for v in 0..n {
                let x = ZMM[4 + v];
                let at = rdi + (off + (v * 64 * st) as i32);
                let outside = left.saturating_sub(kc);
                let right = match part {
                    Part::Tail | Part::Last | Part::Narrow => s.right_masks(kc),
                    Part::Body | Part::First => None,
                };
                if let Some([Some(m1), _]) = right {
                    // (`right_masks` clears the lanes left of the row too.)
                    a.mov(eax, m1)?;
                    a.kmovw(k6, eax)?;
                    a.vmovups(x.k6().z(), zmmword_ptr(at))?;
                } else if masked && outside > 0 {
                    a.mov(eax, (0xffffu32 << outside) & 0xffff)?;
                    a.kmovw(k6, eax)?;
                    a.kandw(k6, k6, k1)?;
                    a.vmovups(x.k6().z(), zmmword_ptr(at))?;
                } else if masked {
                    a.vmovups(x.k1().z(), zmmword_ptr(at))?;
                } else if outside > 0 {
                    a.mov(eax, (0xffffu32 << outside) & 0xffff)?;
                    a.kmovw(k6, eax)?;
                    a.vmovups(x.k6().z(), zmmword_ptr(at))?;
                } else {
                    a.vmovups(x, zmmword_ptr(at))?;
                }
                if st == 2 {
                    // Second half (k3 in the tail, k4 otherwise), then the even lanes of both halves.
                    let hi = rdi + (off + (v * 128 + 64) as i32);
                    let k = match right {
                        Some([_, Some(m3)]) => {
                            a.mov(eax, m3)?;
                            a.kmovw(k7, eax)?;
                            zmm11.k7()
                        }
                        _ if masked => zmm11.k3(),
                        _ => zmm11.k4(),
                    };
                    a.vmovups(k.z(), zmmword_ptr(hi))?;
                    a.vpermt2ps(x, zmm31, zmm11)?;
                }
                for &(r, t) in &pairs {
                    self.tap(a, acc(r, v), x, t)?;
                }
            }
        }
        for r in 0..rr {
            for v in 0..n {
                self.store(
                    a,
                    acc(r, v),
                    r as i32 * self.row_out + (v * 64) as i32,
                    masked,
                )?;
            }
        }
        Ok(())
    }

    /// One step of a row laid out at compile time: `vecs` (first output, lanes) on `rr` rows, every load and
    /// store under its compile-time mask.
    pub(super) fn fixed(
        &self,
        a: &mut CodeAssembler,
        vecs: &[(usize, usize)],
        rr: usize,
    ) -> Result<(), IcedError> {
        let (s, st) = (self.s, self.st);
        let n = vecs.len();
        let acc = |r: usize, v: usize| acc(r * n + v);
        for r in 0..rr {
            for v in 0..n {
                a.vmovaps(acc(r, v), zmm8)?;
            }
        }
        let order = load_order(s, rr, self.group.map_or(0, |g| g.1));
        if self.eo || self.shifted {
            let kw = s.kernel[1];
            for (base, by_kx) in kx_rows(&order, &self.tap_off, self.row_x, kw) {
                for (v, &(o0, lanes)) in vecs.iter().enumerate() {
                    let at = base + (o0 * 4 * st) as i32;
                    let masks = s.window_masks(o0, lanes, kw - 1);
                    if self.eo {
                        // Inputs [0, 32) in zmm4/zmm5 and from 32 in zmm6; the even lanes (tap column 0) in
                        // zmm7, the odd ones (1) in zmm4. Three columns: the even ones one further (2) in
                        // zmm5. Five: the even and odd lanes from 32 in zmm5 / zmm6, and columns 2, 3, 4 the
                        // even, odd and even lanes shifted on by one, one and two (`valignd` into zmm11).
                        // Three loads where each tap took two.
                        for (i, (&m, x)) in masks.iter().zip([zmm4, zmm5, zmm6]).enumerate() {
                            Self::load(a, x, at + 64 * i as i32, m)?;
                        }
                        a.vmovaps(zmm7, zmm4)?;
                        a.vpermt2ps(zmm7, zmm31, zmm5)?;
                        a.vpermt2ps(zmm4, zmm30, zmm5)?;
                        let cols = if kw == 3 {
                            a.valignd(zmm5, zmm6, zmm7, 1)?;
                            vec![(zmm7, None), (zmm4, None), (zmm5, None)]
                        } else {
                            a.vpermps(zmm5, zmm31, zmm6)?;
                            a.vpermps(zmm6, zmm30, zmm6)?;
                            vec![
                                (zmm7, None),
                                (zmm4, None),
                                (zmm7, Some((zmm5, 1))),
                                (zmm4, Some((zmm6, 1))),
                                (zmm7, Some((zmm5, 2))),
                            ]
                        };
                        for (&(low, high), loads) in cols.iter().zip(&by_kx) {
                            let x = match high {
                                None => low,
                                Some((high, by)) => {
                                    a.valignd(zmm11, high, low, by)?;
                                    zmm11
                                }
                            };
                            for &(r, t) in loads {
                                self.tap(a, acc(r, v), x, t)?;
                            }
                        }
                        continue;
                    }
                    // Inputs [0, 16) in zmm4 and [16, 32) in zmm5 (as many as the row's taps read), tap
                    // column kx their `valignd` by kx in zmm6.
                    for (i, (&m, x)) in masks.iter().zip([zmm4, zmm5]).enumerate() {
                        Self::load(a, x, at + 64 * i as i32, m)?;
                    }
                    for (kx, loads) in by_kx.iter().enumerate() {
                        let x = if kx == 0 {
                            zmm4
                        } else {
                            a.valignd(zmm6, zmm5, zmm4, kx as i32)?;
                            zmm6
                        };
                        for &(r, t) in loads {
                            self.tap(a, acc(r, v), x, t)?;
                        }
                    }
                }
            }
        } else {
            for Load { pairs, .. } in order {
                let (r, t) = pairs[0];
                let off = self.tap_off[t] + r as i32 * self.row_x;
                let kc = t % s.kernel[1] * s.dilations[1];
                for (v, &(o0, lanes)) in vecs.iter().enumerate() {
                    let at = off + (o0 * 4 * st) as i32;
                    let [m1, m2] = s.static_masks(o0, lanes, kc);
                    let x = ZMM[4 + v];
                    Self::load(a, x, at, m1)?;
                    if st == 2 {
                        let k = if m2 == 0x7fff {
                            zmm11.k4()
                        } else {
                            a.mov(eax, m2)?;
                            a.kmovw(k7, eax)?;
                            zmm11.k7()
                        };
                        a.vmovups(k.z(), zmmword_ptr(rdi + (at + 64)))?;
                        a.vpermt2ps(x, zmm31, zmm11)?;
                    }
                    for &(r, t) in &pairs {
                        self.tap(a, acc(r, v), x, t)?;
                    }
                }
            }
        }
        for (v, &(o0, lanes)) in vecs.iter().enumerate() {
            if lanes < 16 {
                a.mov(eax, (1u32 << lanes) - 1)?;
                a.kmovw(k5, eax)?;
            }
            for r in 0..rr {
                self.store(
                    a,
                    acc(r, v),
                    r as i32 * self.row_out + (o0 * 4) as i32,
                    lanes < 16,
                )?;
            }
        }
        Ok(())
    }
}

impl DwRowF32 {
    /// With a static `count`: the load masks `[first, second]` (the second half at stride 2) of the tap at column
    /// offset `kc` for the `lanes` outputs from output `o0`: the inputs those outputs need, less those left of
    /// the row (`left`) or past its end (`right`).
    fn static_masks(&self, o0: usize, lanes: usize, kc: usize) -> [u32; 2] {
        let st = self.load_stride();
        let needed = |i: usize| {
            if st == 2 {
                i <= 2 * (lanes - 1)
            } else {
                i < lanes
            }
        };
        let edge = self.left > 0 || self.right.is_some();
        let inside = |i: usize| {
            !edge
                || (o0 * st + kc + i)
                    .checked_sub(self.left)
                    .is_some_and(|c| c < self.w)
        };
        [0, 16].map(|h| {
            (0..16)
                .filter(|&j| needed(h + j) && inside(h + j))
                .fold(0u32, |m, j| m | 1 << j)
        })
    }

    /// With a static `count` (`Steps::fixed`' `eo` and `shifted`): the masks of the loads of the inputs `[0, 16)`,
    /// `[16, 32)` and `[32, 48)` from the first input of the `lanes` outputs from output `o0` under tap column 0:
    /// those any tap of the row reads (up to `stride·(lanes − 1) + span`), less those left of the row or past its
    /// end.
    fn window_masks(&self, o0: usize, lanes: usize, span: usize) -> [u32; 3] {
        let st = self.stride;
        let edge = self.left > 0 || self.right.is_some();
        let inside = |i: usize| {
            !edge
                || (o0 * st + i)
                    .checked_sub(self.left)
                    .is_some_and(|c| c < self.w)
        };
        [0, 16, 32].map(|h| {
            (0..16)
                .filter(|&j| h + j <= st * (lanes - 1) + span && inside(h + j))
                .fold(0u32, |m, j| m | 1 << j)
        })
    }

    /// `count` where the kernel lays the row out at compile time: rows of up to `MAX_FIXED_COUNT` outputs (a
    /// longer one loops, so the code stays a few KiB).
    pub(super) fn fixed_count(&self) -> Option<usize> {
        self.count.filter(|&c| c <= MAX_FIXED_COUNT)
    }
}
