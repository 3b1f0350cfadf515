//! The norm family's test: the Cranelift kernel's order of operations, re-stated, and the checks every ISA's row
//! kernel passes.

use super::NormRows;
use crate::ir::ops::nn::normalize_row;
use crate::x86::test_exec::{exec, guarded};

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
                        assert!((got - reference[j]).abs() <= 1e-5 * reference[j].abs().max(1.0));
                    }
                }
                assert_eq!(y[n], -7.0, "len {len} rows {rows}: written past the rows");
            }
        }
    }
}
