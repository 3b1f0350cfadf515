//! Tests of the AVX-512 depthwise row kernel (`depthwise_x86.rs`): every variant against the fma chain or the
//! one-row kernel, bitwise, with guard pages past the rows.
use super::super::test_exec::{check_dw_row, exec, fmax, pattern, skip_without_avx512};
use super::*;

type RowFn = extern "sysv64" fn(*const f32, *mut f32, *const f32, *const f32, u64);

fn row_fn(code: &[u8]) -> RowFn {
    // SAFETY: the assembled kernel's System V signature.
    unsafe { std::mem::transmute(exec(code)) }
}

/// Left and right padding (0–2 columns each side), with the count at run time and fixed at compile time,
/// against the fma chain with the padded taps as +0 (`test_exec::check_edge_padding`).
#[test]
fn edge_padding_matches_zeroed_taps() {
    if super::super::test_exec::skip_without_avx512("AVX-512 depthwise row kernel, edge padding") {
        return;
    }
    super::super::test_exec::check_edge_padding(assemble, &[false, true], DwRowF32::right_fits);
}

#[test]
fn split_rows_match_the_fma_chain() {
    if super::super::test_exec::skip_without_avx512("AVX-512 depthwise row kernel, split rows") {
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
