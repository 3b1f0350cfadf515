//! The AVX2+FMA f32 depthwise row kernel (`x86-64-v3`, the default `--cpu`): the same contract and arithmetic as
//! the AVX-512 one in `depthwise_x86.rs` with eight outputs per `ymm`. Four accumulators per step (32 outputs),
//! then single vectors, then a tail under `vmaskmovps` masks built from the count, so no load passes the last
//! input the row needs and no store passes its last output. AVX2 has no embedded broadcast: each tap's weight is
//! broadcast once per step into a register shared by the step's vectors. At stride 2 a vector's 16 inputs are
//! two loads (the second masked to its first 7 lanes) and one `vshufps` of their even lanes, in the order of
//! outputs 0 1 4 5 2 3 6 7; the accumulators keep that order and one `vpermpd` per vector restores it before the
//! store (half the shuffles of sorting every tap's inputs: MobileNetV2's 112x112 stride-2 layer −2 % on Zen 5,
//! which has two shuffle pipes; not measured on cores with one). Each output is `act(bias + Σ w[ky][kx] · x[..])` with one `vfmadd231ps` per tap in (ky,
//! kx) order from the bias, bitwise the Cranelift interior's `fma` chain; the clamp keeps NaN
//! (`clamp_keep_nan`: `vmaxps`/`vminps` with the bound first). In rows mode with a compile-time count
//! (`DwRowF32::count`), rows of up to four vectors at load stride 1 run 8, 4 or 2 rows per step
//! (`grouped_step`), up to eight chains at once, the tail mask fixed at compile time.
//!
//! `fn(x: *const f32, out: *mut f32, w: *const f32, bias: *const f32, count: u64)` (System V).

use super::depthwise_avx2_edge::prologue;
use super::YMM;
use crate::kernel::depthwise::DwRowF32;
use iced_x86::code_asm::*;

/// Assembles the AVX2 row kernel (edge rows, with left or right padding, in `depthwise_avx2_edge.rs`); `Err`
/// when the shape or the displacements are out of range (the caller keeps the Cranelift path). Max-pool mode is
/// AVX-512 only.
pub fn assemble(s: &DwRowF32) -> Result<Vec<u8>, String> {
    if s.left > 0 || s.right.is_some() {
        return super::depthwise_avx2_edge::assemble(s);
    }
    let e = |x: IcedError| x.to_string();
    let taps = s.kernel[0] * s.kernel[1];
    // + 256 bytes: the furthest load of a four-vector step.
    let tap_off = super::depthwise_x86::tap_offsets(s, 256)?;
    if taps == 0 || !(1..=2).contains(&s.stride) || s.max || s.left > 0 || s.right.is_some() {
        return Err(format!(
            "AVX2 depthwise row kernel shape out of range: {s:?}"
        ));
    }
    let st = s.load_stride();
    let mut a = CodeAssembler::new(64).map_err(e)?;
    // ymm0-3 accumulators, ymm4-7 inputs, ymm8 bias, ymm9 lo, ymm10 hi, ymm11 the broadcast tap, ymm12 the
    // input mask (tail), ymm13 the second-half mask, ymm14 the output mask, ymm15 scratch (second half, NaN).
    let (lo, hi) = prologue(&mut a, s).map_err(e)?;
    let mut table = a.create_label();
    let mut lanes = a.create_label();
    if st == 2 {
        // ymm13: the 7 inputs a full stride-2 vector needs from its second half (element 15 is unused).
        a.vmovups(ymm13, ptr(table)).map_err(e)?;
    }
    // One step of `n` vectors, masked (ymm12 inputs / ymm13 second half / ymm14 outputs) when `masked`.
    let step = |a: &mut CodeAssembler, n: usize, masked: bool| -> Result<(), IcedError> {
        for acc in &YMM[..n] {
            a.vmovaps(*acc, ymm8)?;
        }
        for (t, &off) in tap_off.iter().enumerate() {
            a.vbroadcastss(ymm11, dword_ptr(rdx + (t * 4) as i32))?;
            for v in 0..n {
                let x = YMM[4 + v];
                let at = rdi + (off + (v * 32 * st) as i32);
                if masked {
                    a.vmaskmovps(x, ymm12, ptr(at))?;
                } else {
                    a.vmovups(x, ptr(at))?;
                }
                if st == 2 {
                    // Even inputs in the lane order of outputs 0 1 4 5 2 3 6 7 (one shuffle; the
                    // accumulators keep that order, and one `vpermpd` restores it before the store).
                    a.vmaskmovps(ymm15, ymm13, ptr(at + 32))?;
                    a.vshufps(x, x, ymm15, 0x88)?;
                }
                a.vfmadd231ps(YMM[v], x, ymm11)?;
            }
        }
        for (v, &x) in YMM[..n].iter().enumerate() {
            if st == 2 {
                a.vpermpd(x, x, 0xd8)?;
            }
            super::clamp_keep_nan(a, x, lo, hi)?;
            let out = ptr(rsi + (v * 32) as i32);
            if masked {
                a.vmaskmovps(out, ymm14, x)?;
            } else {
                a.vmovups(out, x)?;
            }
        }
        Ok(())
    };
    // Rows mode with a compile-time count of at most four vectors at load stride 1: rows in groups.
    if let (Some(step_rows), Some(count)) = (s.rows, s.count) {
        let vecs = count.div_ceil(8);
        if st == 1 && (1..=GROUP_MAX_VECS).contains(&vecs) {
            // The furthest row of a group (at most eight) and vector, checked once: `grouped_step` takes them
            // as fitting.
            let far = 8 * step_rows[0].max(step_rows[1]) + 8 * GROUP_MAX_VECS;
            super::disp("AVX2 depthwise row groups", far)?;
            let tail = count - 8 * (vecs - 1);
            if tail < 8 {
                a.vmovups(ymm12, ptr(table)).map_err(e)?;
            }
            let group = 1 << (8 / vecs).ilog2();
            super::row_groups(&mut a, step_rows, group, |a, g| {
                grouped_step(a, (&tap_off, (lo, hi)), g, vecs, tail, step_rows)
            })?;
            a.vzeroupper().map_err(e)?;
            a.ret().map_err(e)?;
            a.set_label(&mut table).map_err(e)?;
            let mask: Vec<u8> = (0..8)
                .flat_map(|l| (if l < tail { u32::MAX } else { 0 }).to_le_bytes())
                .collect();
            a.db(&mask).map_err(e)?;
            return a.assemble(0).map_err(e);
        }
    }
    let rows = match s.rows {
        Some(_) => {
            let labels = super::rows_begin(&mut a).map_err(e)?;
            if st == 2 {
                // The previous row's tail overwrote the second-half mask.
                a.vmovups(ymm13, ptr(table)).map_err(e)?;
            }
            Some(labels)
        }
        None => None,
    };
    super::row_loop(&mut a, (r8, rdi, rsi), 8, 4, (32 * st, 32), step, |a| {
        super::tail_masks_ymm(a, r8d, st, lanes, [ymm14, ymm12, ymm13])
    })
    .map_err(e)?;
    if let (Some(labels), Some(step)) = (rows, s.rows) {
        super::rows_end(&mut a, labels, step)?;
    }
    a.vzeroupper().map_err(e)?;
    a.ret().map_err(e)?;
    a.set_label(&mut table).map_err(e)?;
    // The stride-2 second-half mask (lanes 0..6 set), then the lane indices.
    let half: Vec<u8> = (0..8u32)
        .flat_map(|i| if i < 7 { u32::MAX } else { 0 }.to_le_bytes())
        .collect();
    a.db(&half).map_err(e)?;
    super::lane_table(&mut a, &mut lanes).map_err(e)?;
    a.assemble(0).map_err(e)
}

/// The most vectors per row that rows mode takes in groups of rows (`grouped_step`).
const GROUP_MAX_VECS: usize = 4;

/// `g` rows of `vecs` vectors (the last `tail` lanes wide, under the `ymm12` mask when under 8) in one step of
/// `g · vecs` ≤ 8 chains: accumulators `ymm0..`, from the bias (`ymm8`), one `vfmadd231ps` per tap in (ky, kx)
/// order with the input as its memory operand (a masked vector's input through `ymm15`), then the clamp and the
/// stores. The same chain per output as a row at a time, bitwise; rows a `step_rows[0]` / `[1]` floats apart.
fn grouped_step(
    a: &mut CodeAssembler,
    (tap_off, (lo, hi)): (&[i32], super::BoundsYmm),
    g: usize,
    vecs: usize,
    tail: usize,
    [x, out]: [usize; 2],
) -> Result<(), IcedError> {
    let d = |floats: usize| i32::try_from(floats * 4).unwrap_or(0);
    let masked = |v: usize| v + 1 == vecs && tail < 8;
    for acc in &YMM[..g * vecs] {
        a.vmovaps(*acc, ymm8)?;
    }
    for (t, &off) in tap_off.iter().enumerate() {
        a.vbroadcastss(ymm11, dword_ptr(rdx + (t * 4) as i32))?;
        for r in 0..g {
            for v in 0..vecs {
                let acc = YMM[r * vecs + v];
                let at = ptr(rdi + off + d(r * x + 8 * v));
                if masked(v) {
                    a.vmaskmovps(ymm15, ymm12, at)?;
                    a.vfmadd231ps(acc, ymm15, ymm11)?;
                } else {
                    a.vfmadd231ps(acc, ymm11, at)?;
                }
            }
        }
    }
    for r in 0..g {
        for v in 0..vecs {
            let acc = YMM[r * vecs + v];
            super::clamp_keep_nan(a, acc, lo, hi)?;
            let at = ptr(rsi + d(r * out + 8 * v));
            if masked(v) {
                a.vmaskmovps(at, ymm12, acc)?;
            } else {
                a.vmovups(at, acc)?;
            }
        }
    }
    Ok(())
}

#[cfg(all(test, target_arch = "x86_64", target_os = "linux"))]
mod tests {
    use super::super::test_exec::{check_dw_row, exec, guarded};
    use super::*;

    /// Every row length class (quads, singles, masked tails) at strides 1 and 2, 3x3 and 5x5, dilation 2, with
    /// the input ending on a guard page (a read past the last needed input faults), against the fma chain with
    /// the clamp; NaN kept; nothing written past the row.
    #[test]
    fn split_rows_match_the_fma_chain() {
        if !std::arch::is_x86_feature_detected!("avx2")
            || !std::arch::is_x86_feature_detected!("fma")
        {
            eprintln!(
                "SKIPPED: AVX2 depthwise row kernel, split rows (this CPU or OS cannot run it)"
            );
            return;
        }
        super::super::test_exec::check_split_rows(assemble);
    }

    /// Edge rows (`depthwise_avx2_edge.rs`): left and right padding with the count fixed at compile time,
    /// against the fma chain with the padded taps as +0; without a static count they do not assemble.
    #[test]
    fn edge_rows_match_zeroed_taps() {
        if super::super::test_exec::skip_without_avx2("AVX2 depthwise row kernel, edge rows") {
            return;
        }
        super::super::test_exec::check_edge_padding(assemble, &[false, true], |s| {
            s.count.is_some()
        });
    }

    #[test]
    fn rows_mode_matches_one_call_per_row() {
        if !std::arch::is_x86_feature_detected!("avx2")
            || !std::arch::is_x86_feature_detected!("fma")
        {
            eprintln!(
                "SKIPPED: AVX2 depthwise row kernel, rows mode (this CPU or OS cannot run it)"
            );
            return;
        }
        super::super::test_exec::check_rows_mode(assemble);
    }

    #[test]
    fn rows_match_the_fma_chain_bitwise() {
        let avx2 = std::arch::is_x86_feature_detected!("avx2");
        let fma = std::arch::is_x86_feature_detected!("fma");
        if !avx2 || !fma {
            eprintln!("SKIPPED: AVX2 depthwise row kernel (this CPU or OS cannot run it)");
            return;
        }
        for (k, gap, st) in [(3, 1, 1), (5, 1, 1), (3, 2, 1), (3, 1, 2), (5, 1, 2)] {
            for count in [0usize, 1, 3, 7, 8, 9, 31, 32, 33, 70] {
                let w = (count.max(1) - 1) * st + (k - 1) * gap + 1;
                let spec = super::super::test_exec::relu6_row(k, gap, st, w);
                let code = assemble(&spec).unwrap();
                let need = w * (k - 1) * gap + w;
                let wts: Vec<f32> = (0..k * k).map(|t| (t as f32 - 4.0) * 0.3).collect();
                let bias = [0.25f32];
                let mut out = vec![-1.0f32; count + 8];
                // SAFETY: `need` floats before a guard page; the kernel reads the `count` outputs' windows, all
                // inside them (a read past them faults), and writes `count` floats of `out`.
                let x = unsafe { std::slice::from_raw_parts_mut(guarded(need), need) };
                for (i, v) in x.iter_mut().enumerate() {
                    *v = if i == 5 {
                        f32::NAN
                    } else {
                        ((i * 37 % 101) as f32 - 50.0) * 0.07
                    };
                }
                type RowFn = extern "sysv64" fn(*const f32, *mut f32, *const f32, *const f32, u64);
                // SAFETY: the assembled kernel's System V signature.
                let f: RowFn = unsafe { std::mem::transmute(exec(&code)) };
                f(
                    x.as_ptr(),
                    out.as_mut_ptr(),
                    wts.as_ptr(),
                    bias.as_ptr(),
                    count as u64,
                );
                let xs = &*x;
                check_dw_row(&out, count, xs, &wts, bias[0], k, gap, st, w);
            }
        }
    }
}
