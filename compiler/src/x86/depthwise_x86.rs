//! The AVX-512 f32 depthwise row kernel: the interior of one output row of a stride-1 or stride-2 depthwise
//! convolution, where every tap is inside the input (`ops/depthwise.rs` keeps the borders). Sixteen outputs per
//! `zmm`, four independent accumulators per step (64 outputs) so the FMA latency is hidden, then three, two, one,
//! then a masked tail. In rows mode (`rows`) up to eight output rows per step, their chains interleaved and
//! each input vector several rows read loaded once; with a compile-time count (`count`) each row is a fixed
//! sequence of steps under compile-time masks (MobileNetV2's 56x56 and 28x28 stride-1 layers 33–38 % faster
//! at 1 thread on a Zen 5 EPYC, its stride-2 ones 12–42 %). At stride 2 each tap loads 32 inputs as two
//! vectors and `vpermt2ps` gathers the even ones (the 32nd input, never used, is masked off so no read passes
//! the last needed element). Each output is `act(bias + Σ w[ky][kx] · x[..])` with one `vfmadd231ps` per tap
//! in (ky, kx) order from the bias — the Cranelift interior's `fma` chain, so results are bitwise identical to
//! it — and the clamp keeps NaN and picks zeros as Cranelift's `fmax`/`fmin` do (bounds that are signed zeros
//! are not fused).
//!
//! `fn(x: *const f32, out: *mut f32, w: *const f32, bias: *const f32, count: u64)` (System V): `x` is the input
//! under tap (0, 0) of the first output, `w` the channel's `kh·kw` weights, `bias` one float.

use super::ZMM;
use iced_x86::code_asm::*;

mod steps;
use crate::kernel::depthwise::DwRowF32;
use steps::{row_group, Part, Steps};

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
    // Stride-2 rows of three or five taps laid out at compile time take the even and odd inputs of one load of
    // each vector (`Steps::fixed`' `eo`): the odd lanes' index in zmm30, so the taps in registers end at zmm29.
    let eo = st == 2 && fixed.is_some() && matches!(s.kernel[1], 3 | 5) && s.dilations[1] == 1;
    let reg_taps = if eo {
        30 - tap_base
    } else {
        32 - tap_base - usize::from(st == 2)
    };
    let mut a = CodeAssembler::new(64).map_err(e)?;
    // zmm0-3 accumulators, zmm4-7 inputs, zmm8 bias, zmm9 lo, zmm10 hi, zmm11 a stride-2 second half or a
    // shifted tap column, zmm12.. taps (or zmm12-15 the other rows' accumulators, the taps from zmm16).
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
    // Stride-1 rows of up to five tap columns and four vectors laid out at compile time load each vector's
    // inputs once per input row (`Steps::fixed`' `shifted`): tap column kx by `valignd` of two loads. Zen 5,
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
    let steps = Steps {
        s,
        tap_off,
        st,
        group,
        tap_base,
        reg_taps,
        row_x,
        row_out,
        eo,
        shifted,
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
                steps.fixed(a, chunk, rr)?;
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
            steps.dynamic(a, 1, Part::Narrow, rr)?;
            a.jmp(done)?;
            // The row's first 16 outputs, then the rest as usual.
            a.set_label(&mut wide)?;
            steps.dynamic(a, 1, Part::First, rr)?;
            a.add(rdi, (64 * st) as i32)?;
            a.add(rsi, 64)?;
            a.sub(r8, 16)?;
        }
        if peel {
            a.sub(r8, 16)?;
        }
        let step = |a: &mut CodeAssembler, n: usize, masked: bool| {
            steps.dynamic(a, n, if masked { Part::Tail } else { Part::Body }, rr)
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
            steps.dynamic(a, 1, Part::Last, rr)?;
        }
        // The row loop may end on its own label: a zero-size instruction takes this one.
        a.zero_bytes()?;
        a.set_label(&mut done)?;
        a.zero_bytes()
    };
    match s.rows {
        Some(step) => super::row_groups(&mut a, step, group.map_or(1, |g| g.0), row)?,
        None => row(&mut a, 1).map_err(e)?,
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
mod tests;
