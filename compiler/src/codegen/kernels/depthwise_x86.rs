//! The AVX-512 f32 depthwise row kernel: the interior of one output row of a stride-1 or stride-2 depthwise
//! convolution, where every tap is inside the input (`ops/depthwise.rs` keeps the borders). Sixteen outputs per
//! `zmm`, four independent accumulators per step (64 outputs) so the FMA latency is hidden, then three, two, one,
//! then a masked tail. In rows mode (`rows`) up to eight output rows per step, their chains interleaved and
//! each input vector several rows read loaded once; with a compile-time count (`count`) each row is a fixed
//! sequence of steps under compile-time masks (MobileNetV2's 56x56 and 28x28 stride-1 layers 33–38 % faster
//! at 1 thread on a Zen 5 EPYC, its stride-2 ones 12–42 %). At stride 2 each tap loads 32 inputs as two
//! vectors and `vpermt2ps` gathers the even ones (the 32nd input, never used, is masked off so no read passes
//! the last needed element). Each output is `act(bias + Σ w[ky][kx] · x[..])` with one `vfmadd231ps` per tap
//! in (ky, kx)
//! order from the bias — the Cranelift interior's `fma` chain, so results are bitwise identical to it — and the
//! clamp keeps NaN and picks zeros as Cranelift's `fmax`/`fmin` do (bounds that are signed zeros are not fused).
//!
//! `fn(x: *const f32, out: *mut f32, w: *const f32, bias: *const f32, count: u64)` (System V): `x` is the input
//! under tap (0, 0) of the first output, `w` the channel's `kh·kw` weights, `bias` one float.

use super::ZMM;
use iced_x86::code_asm::*;

/// The compile-time shape of a row kernel.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DwRowF32 {
    /// Kernel (KH, KW).
    pub kernel: [usize; 2],
    /// Dilations.
    pub dilations: [usize; 2],
    /// Input row width in elements.
    pub w: usize,
    /// Stride along the row: 1 or 2.
    pub stride: usize,
    /// Whether `bias` points to the channel's bias (else the chain starts at +0.0).
    pub bias: bool,
    /// Lower clamp (f32 bits).
    pub lo: Option<u32>,
    /// Upper clamp (f32 bits).
    pub hi: Option<u32>,
    /// Max pooling instead: each output is the maximum of its window (`w` and `bias` unused, no clamp),
    /// starting from −∞, with Cranelift's `fmax` semantics (NaN propagates, +0 > −0).
    pub max: bool,
    /// Several output rows per call: a 6th argument `rows` (u64), and `[x, out]`, the floats `x` and `out`
    /// advance by from one output row to the next (the per-call setup — bias, bounds, taps — is done once).
    /// `None`: one row, five arguments.
    pub rows: Option<[usize; 2]>,
    /// Rows mode: the output count every call passes (the 5th argument), known at compile time. Each row is
    /// then a fixed sequence of steps under compile-time masks, its first vector's left padding and last
    /// vector's tail and right padding included, so a row of up to four vectors is one step (eight
    /// accumulators over the rows of `row_group`) instead of a first vector, a loop and a tail, each a few
    /// chains long. Rows longer than 256 outputs still loop.
    pub count: Option<usize>,
    /// Stride 2 on rows stored as their even columns, then their odd ones `split` floats further (a padded
    /// plane loaded that way, `ops/depthwise.rs`): each tap's inputs are then contiguous in the half of its
    /// column's parity, and the kernel loads them as at stride 1 — no `vpermt2ps` (AVX-512) or shuffles (AVX2)
    /// and half the loads. Dilation 1 only; `w` is the whole row (both halves).
    pub split: Option<usize>,
    /// Padding columns left of the row (0..16, AVX-512 only, not with `max` or `split`): `x` points that many
    /// columns before the row, and the row's first vector of outputs (its masked tail when `count < 16`) loads
    /// each tap with the lanes left of the row masked to +0, as the border path's zeroed taps — so a row whose
    /// only border is on the left runs whole in the kernel.
    pub left: usize,
    /// A row whose last outputs reach past its `w` inputs (AVX-512 only, not with `max` or `split`): the static
    /// output count of every call. Those outputs must all be in the row's last step — the masked tail, or the
    /// last vector, peeled off the loop, when the count is a multiple of 16 — which loads each tap with its
    /// lanes past the row masked to +0.
    pub right: Option<usize>,
}

impl DwRowF32 {
    /// With `right`: whether every output that reaches past the row is in the tail step (so no unmasked step
    /// reads past it), and the first vector is not the tail when there is left padding.
    pub fn right_fits(&self) -> bool {
        let Some(count) = self.right else {
            return true;
        };
        let rem = Self::last_lanes(count);
        let span = (self.kernel[1] - 1) * self.dilations[1];
        // Output o reads up to column o·st + span − left: inside while that is below w.
        let first_out = (self.w + self.left)
            .saturating_sub(span)
            .div_ceil(self.stride);
        let tail_ok = count >= rem && first_out >= count - rem;
        // A row of exactly 16 with left padding would take its first vector twice (`Part::First`, the peel).
        tail_ok && !(self.left > 0 && count == 16) && !self.max && self.split.is_none()
    }

    /// Outputs in a row's last step: the masked tail's, or a whole last vector when the count is a multiple of
    /// 16 (with `right` such a row's last vector is peeled off the loop).
    fn last_lanes(count: usize) -> usize {
        match count % 16 {
            0 => 16,
            r => r,
        }
    }

    /// The tail step's load masks `[first, second]` (the second half at stride 2) for the tap at column offset
    /// `kc`, with `right`'s lanes past the row cleared; `None` without `right`.
    /// `[None, None]` where a half's mask is the step's usual one (the tap does not reach past the row there).
    fn right_masks(&self, kc: usize) -> Option<[Option<u32>; 2]> {
        let count = self.right?;
        let (st, rem) = (self.stride, Self::last_lanes(count));
        let first = (count - rem) * st + kc;
        let needed = |j: usize| if st == 2 { j <= (rem - 1) * 2 } else { j < rem };
        let inside = |j: usize| {
            (first + j)
                .checked_sub(self.left)
                .is_some_and(|c| c < self.w)
        };
        let bits = |base: usize, lane: &dyn Fn(usize) -> bool| {
            (0..16)
                .filter(|&j| lane(base + j))
                .fold(0u32, |m, j| m | 1 << j)
        };
        let own = |base: usize| {
            let mask = bits(base, &|j| needed(j) && inside(j));
            Some(mask).filter(|&m| m != bits(base, &needed))
        };
        Some([own(0), own(16)])
    }

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

    /// With a static `count` at stride 2 (`eo` steps): the masks of the loads of the inputs `[0, 16)`,
    /// `[16, 32)` and `[32, 48)` from the first input of the `lanes` outputs from output `o0` under tap column 0:
    /// those any tap of the row reads (up to `2·(lanes − 1) + span`), less those left of the row or past its
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
    fn fixed_count(&self) -> Option<usize> {
        self.count.filter(|&c| c <= MAX_FIXED_COUNT)
    }

    /// The stride the kernel's loads walk the row at: 1 on split rows.
    pub(crate) fn load_stride(&self) -> usize {
        if self.split.is_some() {
            1
        } else {
            self.stride
        }
    }
}

/// The longest row laid out at compile time (`DwRowF32::count`): 16 vectors, four steps.
const MAX_FIXED_COUNT: usize = 256;

/// The part of a row a step computes.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Part {
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

/// The first register of the taps held in registers, up to zmm31 (zmm30 at stride 2, where zmm31 is the
/// even-lane index; more taps are broadcast from memory at each use): zmm12, or zmm16 where the second row's
/// accumulators take zmm12–15 (`row_group`).
fn tap_base(group: bool) -> usize {
    if group {
        16
    } else {
        12
    }
}

/// Each tap's byte offset from the row kernel's `x` (tap (ky, kx) at `ky·dh·w + kx·dw` floats; on split rows
/// `ky·dh·w + (kx mod 2)·split + kx / 2`), checked so that it plus `reach` bytes (a step's furthest load) fits a
/// 32-bit displacement.
pub(crate) fn tap_offsets(s: &DwRowF32, reach: usize) -> Result<Vec<i32>, String> {
    let kw = s.kernel[1];
    if s.split.is_some() && (s.stride != 2 || s.dilations[1] != 1 || s.max) {
        return Err(format!(
            "depthwise row kernel: split rows need stride 2, dilation 1: {s:?}"
        ));
    }
    (0..s.kernel[0] * kw)
        .map(|t| {
            let col = match s.split {
                Some(odd) => (t % kw % 2).checked_mul(odd)?.checked_add(t % kw / 2)?,
                None => t % kw * s.dilations[1],
            };
            let floats = (t / kw * s.dilations[0])
                .checked_mul(s.w)?
                .checked_add(col)?;
            let off = i32::try_from(floats.checked_mul(4)?).ok()?;
            off.checked_add(i32::try_from(reach).ok()?).map(|_| off)
        })
        .collect::<Option<_>>()
        .ok_or_else(|| format!("depthwise row kernel displacements out of range: {s:?}"))
}

/// In rows mode, the output rows the kernel computes per step (`R` > 1) and the input rows from one output row
/// to the next, when it can: their fma chains interleaved and each input vector that several rows read loaded
/// once (`load_order`). A step's chains of KH·KW dependent fmas, four where a row has four vectors, left the
/// FMA units idle on rows of 28–56 outputs; so eight accumulators in all (zmm0–3, zmm12–15): eight rows of
/// one vector (rows of up to 16 outputs, `rows[1]`), four of two, else two rows of up to four.
fn row_group(s: &DwRowF32) -> Option<(usize, usize)> {
    let [x, out] = s.rows?;
    let rows = match s.count.unwrap_or(out).div_ceil(16) {
        0 | 1 => 8,
        2 => 4,
        _ => 2,
    };
    (s.w > 0 && x.is_multiple_of(s.w)).then(|| (rows, x / s.w))
}

/// The loads of `order` (`load_order`, `kw` tap columns of dilation 1) by input row, for `step_static`'s
/// `eo` and `shifted` steps: the byte offset of the row's tap-column-0 inputs, and per tap column the (row,
/// tap) pairs that multiply it.
type KxRow = (i32, Vec<Vec<(usize, usize)>>);
fn kx_rows(order: &[Load], tap_off: &[i32], row_x: i32, kw: usize) -> Vec<KxRow> {
    let mut rows: Vec<KxRow> = Vec::new();
    for (t, r, loads) in order {
        let kx = t % kw;
        let base = tap_off[*t] + *r as i32 * row_x - 4 * kx as i32;
        match rows.last_mut() {
            Some((b, by_kx)) if *b == base => by_kx[kx].extend(loads),
            _ => {
                let mut by_kx = vec![Vec::new(); kw];
                by_kx[kx].extend(loads);
                rows.push((base, by_kx));
            }
        }
    }
    rows
}

/// Accumulator `i` of a step (row r, vector v of n at `r·n + v`): zmm0–3, then zmm12–15.
fn acc(i: usize) -> AsmRegisterZmm {
    ZMM[if i < 4 { i } else { 8 + i }]
}

/// A step's loads on `rows` output rows `step` input rows apart, in issue order: one per distinct input
/// position (input row, tap column) — the first (tap, row) reading it gives its address — with the (row, tap)
/// pairs that multiply it. Sorted by input row, then column, each row's taps come in (ky, kx) order: every
/// output's fma chain is the one-row kernel's.
type Load = (usize, usize, Vec<(usize, usize)>);
fn load_order(s: &DwRowF32, rows: usize, step: usize) -> Vec<Load> {
    let [kh, kw] = s.kernel;
    let mut taps: Vec<(usize, usize, usize, usize)> = (0..rows)
        .flat_map(|r| (0..kh * kw).map(move |t| (r * step + t / kw * s.dilations[0], t % kw, r, t)))
        .collect();
    taps.sort_unstable();
    let mut loads: Vec<(usize, usize, Load)> = Vec::new();
    for (ir, kx, r, t) in taps {
        match loads.last_mut() {
            Some((lr, lx, load)) if (*lr, *lx) == (ir, kx) => load.2.push((r, t)),
            _ => loads.push((ir, kx, (t, r, vec![(r, t)]))),
        }
    }
    loads.into_iter().map(|(_, _, l)| l).collect()
}

/// Assembles the row kernel; `Err` when the displacements do not fit (the caller keeps the Cranelift path).
pub fn assemble(s: &DwRowF32) -> Result<Vec<u8>, String> {
    let e = |x: IcedError| x.to_string();
    let taps = s.kernel[0] * s.kernel[1];
    // + 512 bytes: the furthest load of a four-vector step; with a static count, of the row's last one.
    let fixed = s.fixed_count();
    let reach = fixed.map_or(Some(512), |c| c.checked_mul(8)?.checked_add(512));
    let reach = reach.ok_or_else(|| format!("depthwise row kernel: row out of range: {s:?}"))?;
    let tap_off = tap_offsets(s, reach)?;
    if taps == 0 || !(1..=2).contains(&s.stride) {
        return Err(format!("depthwise row kernel shape out of range: {s:?}"));
    }
    let st = s.load_stride();
    if s.left > 0 && (s.left >= 16 || s.max || s.split.is_some()) {
        return Err(format!(
            "depthwise row kernel: left padding out of range: {s:?}"
        ));
    }
    if !s.right_fits() {
        return Err(format!(
            "depthwise row kernel: right padding out of range: {s:?}"
        ));
    }
    // Rows mode computes several output rows per step where it can (`row_group`): their accumulators in
    // zmm0-3 and zmm12-15, the taps from zmm16.
    let group = row_group(s);
    let tap_base = tap_base(group.is_some());
    let reg_taps = 32 - tap_base - usize::from(st == 2);
    let mut a = CodeAssembler::new(64).map_err(e)?;
    // zmm0-3 accumulators, zmm4-7 inputs, zmm8 bias, zmm9 lo, zmm10 hi, zmm11 NaN-saved value (k2 its mask),
    // zmm12.. taps (or the second row's accumulators).
    if s.max {
        super::broadcast_bits(&mut a, zmm8, f32::NEG_INFINITY.to_bits()).map_err(e)?;
    } else if s.bias {
        a.vbroadcastss(zmm8, dword_ptr(rcx)).map_err(e)?;
    } else {
        a.vpxord(zmm8, zmm8, zmm8).map_err(e)?;
    }
    for (reg, c) in [(zmm9, s.lo), (zmm10, s.hi)] {
        if let Some(bits) = c {
            super::broadcast_bits(&mut a, reg, bits).map_err(e)?;
        }
    }
    let mut table = a.create_label();
    // Stride-2 rows of three taps laid out at compile time take the even and odd inputs of one load of each
    // vector (`step_static`'s `eo`): the odd lanes' index in zmm30, when the taps leave it free.
    let eo = st == 2
        && fixed.is_some()
        && s.kernel[1] == 3
        && s.dilations[1] == 1
        && tap_base + if s.max { 0 } else { taps.min(reg_taps) } <= 30;
    // Stride-1 rows of up to five tap columns and four vectors laid out at compile time load each vector's
    // inputs once per input row (`step_static`'s `shifted`): tap column kx by `valignd` of two loads. Zen 5,
    // 1 thread, paired: 3x3 on 56x56 planes 10 % faster (MobileNetV2, EfficientNet-Lite0), 28x28 and 5x5 the
    // same, but 3x3 on 112x112 (seven vectors a row) 4-6 % slower, hence the four.
    let shifted = st == 1
        && s.split.is_none()
        && fixed.is_some_and(|c| c <= 64)
        && (2..=5).contains(&s.kernel[1])
        && s.dilations[1] == 1;
    let mut table_odd = a.create_label();
    if eo {
        a.vmovups(zmm30, zmmword_ptr(table_odd)).map_err(e)?;
    }
    if st == 2 {
        a.vmovups(zmm31, zmmword_ptr(table)).map_err(e)?;
        // k4: the 31 inputs a full stride-2 vector needs from its second load's 16 (element 31 is unused).
        a.mov(eax, 0x7fffu32).map_err(e)?;
        a.kmovw(k4, eax).map_err(e)?;
    }
    for t in 0..if s.max { 0 } else { taps.min(reg_taps) } {
        a.vbroadcastss(ZMM[tap_base + t], dword_ptr(rdx + (t * 4) as i32))
            .map_err(e)?;
    }
    let [row_x, row_out] = match (group, s.rows) {
        (Some(_), Some([x, out])) => [x, out].map(|f| i32::try_from(f * 4)),
        _ => [Ok(0), Ok(0)],
    };
    let (row_x, row_out) = (
        row_x.map_err(|_| format!("depthwise row kernel: row step out of range: {s:?}"))?,
        row_out.map_err(|_| format!("depthwise row kernel: row step out of range: {s:?}"))?,
    );
    // One step of `n` vectors of a row's `part` (see `Part`) on `rr` rows (1, or those of `group`).
    let step_with =
        |a: &mut CodeAssembler, n: usize, part: Part, rr: usize| -> Result<(), IcedError> {
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
            for (t, r, loads) in load_order(s, rr, group.map_or(0, |g| g.1)) {
                let off = tap_off[t] + r as i32 * row_x;
                let kc = t % s.kernel[1] * s.dilations[1];
                for v in 0..n {
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
                        a.vmovups(ZMM[4 + v].k6().z(), zmmword_ptr(at))?;
                    } else if masked && outside > 0 {
                        a.mov(eax, (0xffffu32 << outside) & 0xffff)?;
                        a.kmovw(k6, eax)?;
                        a.kandw(k6, k6, k1)?;
                        a.vmovups(ZMM[4 + v].k6().z(), zmmword_ptr(at))?;
                    } else if masked {
                        a.vmovups(ZMM[4 + v].k1().z(), zmmword_ptr(at))?;
                    } else if outside > 0 {
                        a.mov(eax, (0xffffu32 << outside) & 0xffff)?;
                        a.kmovw(k6, eax)?;
                        a.vmovups(ZMM[4 + v].k6().z(), zmmword_ptr(at))?;
                    } else {
                        a.vmovups(ZMM[4 + v], zmmword_ptr(at))?;
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
                        a.vpermt2ps(ZMM[4 + v], zmm31, zmm11)?;
                    }
                    for &(r, t) in &loads {
                        if s.max {
                            super::max_into(a, acc(r, v), ZMM[4 + v])?;
                        } else if t < reg_taps {
                            a.vfmadd231ps(acc(r, v), ZMM[4 + v], ZMM[tap_base + t])?;
                        } else {
                            a.vfmadd231ps(acc(r, v), ZMM[4 + v], dword_bcst(rdx + (t * 4) as i32))?;
                        }
                    }
                }
            }
            for r in 0..rr {
                for v in 0..n {
                    let x = acc(r, v);
                    super::clamp_keep_nan(a, x, s.lo.map(|b| (zmm9, b)), s.hi.map(|_| zmm10))?;
                    let dst = zmmword_ptr(rsi + (r as i32 * row_out + (v * 64) as i32));
                    if masked {
                        a.vmovups(dst.k5(), x)?;
                    } else {
                        a.vmovups(dst, x)?;
                    }
                }
            }
            Ok(())
        };
    // With a static count: `vecs` (first output, lanes) of a row in one step on `rr` rows, every load and
    // store under its compile-time mask.
    let step_static =
        |a: &mut CodeAssembler, vecs: &[(usize, usize)], rr: usize| -> Result<(), IcedError> {
            let n = vecs.len();
            let acc = |r: usize, v: usize| acc(r * n + v);
            for r in 0..rr {
                for v in 0..n {
                    a.vmovaps(acc(r, v), zmm8)?;
                }
            }
            let order = load_order(s, rr, group.map_or(0, |g| g.1));
            if eo {
                // Per input row and vector: inputs [0, 32) in zmm4/zmm5 and input 32 in zmm6; the even
                // lanes (tap column 0) in zmm7, the odd ones (1) in zmm4, the even ones one further (2) in
                // zmm5 — three loads where each tap took two; each output's chain as before.
                for (base, by_kx) in kx_rows(&order, &tap_off, row_x, 3) {
                    for (v, &(o0, lanes)) in vecs.iter().enumerate() {
                        let at = base + (o0 * 8) as i32;
                        let masks = s.window_masks(o0, lanes, 2);
                        for (i, (&m, x)) in masks.iter().zip([zmm4, zmm5, zmm6]).enumerate() {
                            let src = zmmword_ptr(rdi + (at + 64 * i as i32));
                            match m {
                                0 => a.vpxord(x, x, x)?,
                                0xffff => a.vmovups(x, src)?,
                                _ => {
                                    a.mov(eax, m)?;
                                    a.kmovw(k6, eax)?;
                                    a.vmovups(x.k6().z(), src)?;
                                }
                            }
                        }
                        a.vmovaps(zmm7, zmm4)?;
                        a.vpermt2ps(zmm7, zmm31, zmm5)?;
                        a.vpermt2ps(zmm4, zmm30, zmm5)?;
                        a.valignd(zmm5, zmm6, zmm7, 1)?;
                        for (x, loads) in [zmm7, zmm4, zmm5].into_iter().zip(&by_kx) {
                            for &(r, t) in loads {
                                if s.max {
                                    super::max_into(a, acc(r, v), x)?;
                                } else if t < reg_taps {
                                    a.vfmadd231ps(acc(r, v), x, ZMM[tap_base + t])?;
                                } else {
                                    a.vfmadd231ps(acc(r, v), x, dword_bcst(rdx + (t * 4) as i32))?;
                                }
                            }
                        }
                    }
                }
            }
            if shifted {
                // Per input row and vector: inputs [0, 16) in zmm4 and [16, 32) in zmm5 (as many as the
                // row's taps read), tap column kx their `valignd` by kx in zmm6.
                let kw = s.kernel[1];
                for (base, by_kx) in kx_rows(&order, &tap_off, row_x, kw) {
                    for (v, &(o0, lanes)) in vecs.iter().enumerate() {
                        let at = base + (o0 * 4) as i32;
                        let masks = s.window_masks(o0, lanes, kw - 1);
                        for (i, (&m, x)) in masks.iter().zip([zmm4, zmm5]).enumerate() {
                            let src = zmmword_ptr(rdi + (at + 64 * i as i32));
                            match m {
                                0 => a.vpxord(x, x, x)?,
                                0xffff => a.vmovups(x, src)?,
                                _ => {
                                    a.mov(eax, m)?;
                                    a.kmovw(k6, eax)?;
                                    a.vmovups(x.k6().z(), src)?;
                                }
                            }
                        }
                        for (kx, loads) in by_kx.iter().enumerate() {
                            let x = if kx == 0 {
                                zmm4
                            } else {
                                a.valignd(zmm6, zmm5, zmm4, kx as i32)?;
                                zmm6
                            };
                            for &(r, t) in loads {
                                if s.max {
                                    super::max_into(a, acc(r, v), x)?;
                                } else if t < reg_taps {
                                    a.vfmadd231ps(acc(r, v), x, ZMM[tap_base + t])?;
                                } else {
                                    a.vfmadd231ps(acc(r, v), x, dword_bcst(rdx + (t * 4) as i32))?;
                                }
                            }
                        }
                    }
                }
            }
            for (t, r, loads) in order.into_iter().filter(|_| !eo && !shifted) {
                let off = tap_off[t] + r as i32 * row_x;
                let kc = t % s.kernel[1] * s.dilations[1];
                for (v, &(o0, lanes)) in vecs.iter().enumerate() {
                    let at = off + (o0 * 4 * st) as i32;
                    let [m1, m2] = s.static_masks(o0, lanes, kc);
                    let x = ZMM[4 + v];
                    if m1 == 0xffff {
                        a.vmovups(x, zmmword_ptr(rdi + at))?;
                    } else {
                        a.mov(eax, m1)?;
                        a.kmovw(k6, eax)?;
                        a.vmovups(x.k6().z(), zmmword_ptr(rdi + at))?;
                    }
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
                    for &(r, t) in &loads {
                        if s.max {
                            super::max_into(a, acc(r, v), x)?;
                        } else if t < reg_taps {
                            a.vfmadd231ps(acc(r, v), x, ZMM[tap_base + t])?;
                        } else {
                            a.vfmadd231ps(acc(r, v), x, dword_bcst(rdx + (t * 4) as i32))?;
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
                    let x = acc(r, v);
                    super::clamp_keep_nan(a, x, s.lo.map(|b| (zmm9, b)), s.hi.map(|_| zmm10))?;
                    let dst = zmmword_ptr(rsi + (r as i32 * row_out + (o0 * 4) as i32));
                    if lanes < 16 {
                        a.vmovups(dst.k5(), x)?;
                    } else {
                        a.vmovups(dst, x)?;
                    }
                }
            }
            Ok(())
        };
    let peel = s.right.is_some_and(|count| count % 16 == 0);
    // One row's outputs (`rr` rows with `group`) from rdi to rsi, r8 outputs each; steps of up to four
    // vectors, eight accumulators in all.
    let row = |a: &mut CodeAssembler, rr: usize| -> Result<(), IcedError> {
        if let Some(count) = fixed {
            let vecs: Vec<(usize, usize)> = (0..count)
                .step_by(16)
                .map(|o0| (o0, (count - o0).min(16)))
                .collect();
            for chunk in vecs.chunks((8 / rr).min(4)) {
                step_static(a, chunk, rr)?;
            }
            return a.zero_bytes();
        }
        let mut done = a.create_label();
        if s.left > 0 {
            // A row of fewer than 16 outputs is one masked step with the left lanes zeroed.
            let mut wide = a.create_label();
            a.cmp(r8, 16)?;
            a.jae(wide)?;
            a.test(r8, r8)?;
            a.jz(done)?;
            super::tail_masks_zmm(a, r8d, st)?;
            step_with(a, 1, Part::Narrow, rr)?;
            a.jmp(done)?;
            // The row's first 16 outputs, then the rest as usual.
            a.set_label(&mut wide)?;
            step_with(a, 1, Part::First, rr)?;
            a.add(rdi, (64 * st) as i32)?;
            a.add(rsi, 64)?;
            a.sub(r8, 16)?;
        }
        if peel {
            a.sub(r8, 16)?;
        }
        let step = |a: &mut CodeAssembler, n: usize, masked: bool| {
            step_with(a, n, if masked { Part::Tail } else { Part::Body }, rr)
        };
        super::row_loop(
            a,
            (r8, rdi, rsi),
            16,
            (8 / rr).min(4),
            (64 * st, 64),
            step,
            |a| super::tail_masks_zmm(a, r8d, st),
        )?;
        if peel {
            // The loop leaves the pointers at the row's last vector.
            step_with(a, 1, Part::Last, rr)?;
        }
        // The row loop may end on its own label: a zero-size instruction takes this one.
        a.zero_bytes()?;
        a.set_label(&mut done)?;
        a.zero_bytes()
    };
    match (s.rows, group) {
        (Some(step), Some((rows, _))) => {
            super::row_groups(&mut a, step, rows, |a, rr| row(a, rr))?;
        }
        (Some(step), None) => {
            let labels = super::rows_begin(&mut a).map_err(e)?;
            row(&mut a, 1).map_err(e)?;
            super::rows_end(&mut a, labels, step)?;
        }
        (None, _) => row(&mut a, 1).map_err(e)?,
    }
    a.vzeroupper().map_err(e)?;
    a.ret().map_err(e)?;
    if st == 2 {
        a.set_label(&mut table).map_err(e)?;
        let idx: Vec<u8> = (0..16u32).flat_map(|i| (2 * i).to_le_bytes()).collect();
        a.db(&idx).map_err(e)?;
    }
    if eo {
        a.set_label(&mut table_odd).map_err(e)?;
        let idx: Vec<u8> = (0..16u32).flat_map(|i| (2 * i + 1).to_le_bytes()).collect();
        a.db(&idx).map_err(e)?;
    }
    a.assemble(0).map_err(e)
}

#[cfg(all(test, target_arch = "x86_64", target_os = "linux"))]
mod tests {
    use super::super::test_exec::{check_dw_row, exec, fmax, pattern, skip_without_avx512};
    use super::*;

    type RowFn = extern "sysv64" fn(*const f32, *mut f32, *const f32, *const f32, u64);

    fn row_fn(code: &[u8]) -> RowFn {
        // SAFETY: the assembled kernel's System V signature.
        unsafe { std::mem::transmute(exec(code)) }
    }

    /// Left and right padding (0–2 columns each side; strides 1 and 2, 3x3 and 5x5, dilation 1 and 2), counts
    /// 1..80 (under 16 with left padding: one masked step), in rows mode over three rows: every output against the fma chain with the taps outside the row
    /// as +0, bitwise; the rows end on a guard page and nothing is written past a row.
    #[test]
    fn edge_padding_matches_zeroed_taps() {
        if super::super::test_exec::skip_without_avx512(
            "AVX-512 depthwise row kernel, edge padding",
        ) {
            return;
        }
        type Many = extern "sysv64" fn(*const f32, *mut f32, *const f32, *const f32, u64, u64);
        let page = super::super::test_exec::guarded(8192);
        let cases = [
            (3, 1, 2, 1, 0),
            (3, 1, 1, 1, 0),
            (5, 1, 2, 2, 0),
            (5, 1, 1, 2, 0),
            (3, 2, 1, 2, 0),
            (3, 1, 2, 0, 1),
            (5, 1, 2, 1, 2),
            (3, 1, 1, 1, 1),
            (5, 2, 1, 0, 2),
        ];
        // Each case with the count passed at run time, then fixed at compile time (`DwRowF32::count`).
        let cases = [false, true]
            .into_iter()
            .flat_map(|f| cases.map(move |c| (f, c)));
        for (fixed, (k, gap, st, left, right)) in cases {
            for count in 1usize..=80 {
                let Some(w) = ((count - 1) * st + (k - 1) * gap + 1).checked_sub(left + right)
                else {
                    continue;
                };
                let rows = 3;
                let h = (rows - 1) * st + (k - 1) * gap + 1;
                let x: Vec<f32> = (0..w * h).map(|i| pattern(i * 3 + k)).collect();
                // SAFETY: the last `x.len()` (≤ 8192) floats before the guard page.
                let at = unsafe { page.add(8192 - x.len()) };
                // SAFETY: `at` has `x.len()` writable floats.
                unsafe { std::ptr::copy_nonoverlapping(x.as_ptr(), at, x.len()) };
                let out_w = count + 3;
                let spec = DwRowF32 {
                    rows: Some([st * w, out_w]),
                    count: fixed.then_some(count),
                    left,
                    right: (right > 0).then_some(count),
                    ..super::super::test_exec::relu6_row(k, gap, st, w)
                };
                if !spec.right_fits() {
                    assert!(assemble(&spec).is_err(), "{spec:?} assembles");
                    continue;
                }
                let code = assemble(&spec).unwrap();
                // SAFETY: the assembled kernel's System V signature.
                let f: Many = unsafe { std::mem::transmute(exec(&code)) };
                let wts: Vec<f32> = (0..k * k).map(|i| pattern(i + 9) * 0.25).collect();
                let bias = -0.125f32;
                let mut out = vec![-1.0f32; rows * out_w];
                // x under tap (0, 0) of output 0: `left` columns before the first row (never read).
                let x0 = at.wrapping_sub(left);
                f(
                    x0,
                    out.as_mut_ptr(),
                    wts.as_ptr(),
                    &bias,
                    count as u64,
                    rows as u64,
                );
                for r in 0..rows {
                    for o in 0..count {
                        let mut acc = bias;
                        for ky in 0..k {
                            for kx in 0..k {
                                let c = (o * st + kx * gap) as isize - left as isize;
                                let inside = c >= 0 && (c as usize) < w;
                                let v = if inside {
                                    x[(r * st + ky * gap) * w + c as usize]
                                } else {
                                    0.0
                                };
                                acc = v.mul_add(wts[ky * k + kx], acc);
                            }
                        }
                        let want = acc.clamp(0.0, 6.0);
                        let got = out[r * out_w + o];
                        let at = format!(
                            "k{k} d{gap} s{st} l{left} r{right} n{count} r{r} o{o} fixed {fixed}"
                        );
                        assert_eq!(got.to_bits(), want.to_bits(), "{at}");
                    }
                    assert!(out[r * out_w + count..(r + 1) * out_w]
                        .iter()
                        .all(|&v| v == -1.0));
                }
            }
        }
    }

    #[test]
    fn split_rows_match_the_fma_chain() {
        if super::super::test_exec::skip_without_avx512("AVX-512 depthwise row kernel, split rows")
        {
            return;
        }
        super::super::test_exec::check_split_rows(assemble);
    }

    #[test]
    fn rows_mode_matches_one_call_per_row() {
        if super::super::test_exec::skip_without_avx512("AVX-512 depthwise row kernel, rows mode") {
            return;
        }
        super::super::test_exec::check_rows_mode(assemble);
    }

    /// Every row length from 0 to 150 (quads, singles and masked tails), 3x3 and 5x5 (memory-broadcast taps),
    /// against the fma chain with the clamp; NaN kept.
    #[test]
    fn rows_match_the_fma_chain_bitwise() {
        if !std::arch::is_x86_feature_detected!("avx512f") {
            eprintln!("SKIPPED: AVX-512 depthwise row kernel (this CPU or OS cannot run it)");
            return;
        }
        for (k, gap, st) in [(3, 1, 1), (5, 1, 1), (3, 2, 1), (3, 1, 2), (5, 1, 2)] {
            let w = 2 * 160 + (k - 1) * gap;
            let spec = super::super::test_exec::relu6_row(k, gap, st, w);
            let code = assemble(&spec).unwrap();
            let mut x: Vec<f32> = (0..w * (k - 1) * gap + w + 64).map(pattern).collect();
            x[5] = f32::NAN;
            let wts: Vec<f32> = (0..k * k).map(|t| (t as f32 - 4.0) * 0.3).collect();
            let bias = [0.25f32];
            for count in [0usize, 1, 15, 16, 17, 63, 64, 65, 100, 150] {
                let mut out = vec![-1.0f32; count + 16];
                row_fn(&code)(
                    x.as_ptr(),
                    out.as_mut_ptr(),
                    wts.as_ptr(),
                    bias.as_ptr(),
                    count as u64,
                );
                check_dw_row(&out, count, &x, &wts, bias[0], k, gap, st, w);
            }
        }
    }

    /// Max mode over every row length up to 150 at strides 1 and 2: NaN propagates, +0 beats −0 in either
    /// order, and no write passes the row.
    #[test]
    fn max_rows_match_fmax() {
        if skip_without_avx512("AVX-512 max-pool row kernel") {
            return;
        }
        for (k, st) in [(3usize, 1usize), (3, 2), (2, 2)] {
            let w = 2 * 160 + k;
            let spec = DwRowF32 {
                kernel: [k, k],
                dilations: [1, 1],
                w,
                stride: st,
                bias: false,
                lo: None,
                hi: None,
                max: true,
                rows: None,
                count: None,
                split: None,
                left: 0,
                right: None,
            };
            let code = assemble(&spec).unwrap();
            let mut x: Vec<f32> = (0..w * k + 64).map(pattern).collect();
            x[7] = f32::NAN;
            for (i, v) in x.iter_mut().enumerate().skip(40).take(40) {
                *v = if i % 3 == 0 { 0.0 } else { -0.0 };
            }
            for count in [0usize, 1, 15, 16, 17, 40, 63, 64, 65, 150] {
                let mut out = vec![-1.0f32; count + 16];
                // `w` and `bias` are not read in max mode.
                let none = std::ptr::null();
                row_fn(&code)(x.as_ptr(), out.as_mut_ptr(), none, none, count as u64);
                for (o, &got) in out.iter().enumerate().take(count) {
                    let mut want = f32::NEG_INFINITY;
                    for ky in 0..k {
                        for kx in 0..k {
                            want = fmax(want, x[o * st + ky * w + kx]);
                        }
                    }
                    assert!(
                        got.to_bits() == want.to_bits() || (got.is_nan() && want.is_nan()),
                        "k{k} s{st} count {count} out {o}: {got} vs {want}"
                    );
                }
                assert!(
                    out[count..].iter().all(|&v| v == -1.0),
                    "wrote past the row"
                );
            }
        }
    }
}
