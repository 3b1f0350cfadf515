//! The AVX2 Winograd transforms against the formulas (f64, within f32 rounding), for both tile sizes and tile
//! rows that end inside an eight-tile block; F(4x4) bitwise against the AVX-512 kernels where the CPU has them.

use super::super::test_exec::{exec, guarded, pattern as val, skip_without_avx2};
use super::super::winograd4_x86::{self, tests::AT as AT4, tests::BT as BT4};
use super::*;

const BT2: [[f64; 6]; 4] = [
    [1.0, 0.0, -1.0, 0.0, 0.0, 0.0],
    [0.0, 1.0, 1.0, 0.0, 0.0, 0.0],
    [0.0, -1.0, 1.0, 0.0, 0.0, 0.0],
    [0.0, 1.0, 0.0, -1.0, 0.0, 0.0],
];
const AT2: [[f64; 6]; 2] = [
    [1.0, 1.0, 1.0, 0.0, 0.0, 0.0],
    [0.0, 1.0, -1.0, -1.0, 0.0, 0.0],
];

/// `Σ_k Σ_l T[a][k]·x(k, l)·T[b][l]` in f64 over the nonzero coefficients (a NaN reaches only the outputs
/// whose transform uses it); `t` has `rows` rows of `alpha` used columns.
fn sandwich(t: &[[f64; 6]], alpha: usize, x: impl Fn(usize, usize) -> f64) -> Vec<f64> {
    let r = t.len();
    let mut out = vec![0f64; r * r];
    for a in 0..r {
        for b in 0..r {
            for k in (0..alpha).filter(|&k| t[a][k] != 0.0) {
                for l in (0..alpha).filter(|&l| t[b][l] != 0.0) {
                    out[a * r + b] += t[a][k] * x(k, l) * t[b][l];
                }
            }
        }
    }
    out
}

fn close(got: f32, want: f64) -> bool {
    (f64::from(got) - want).abs() <= 1e-5 * (1.0 + want.abs())
}

/// `Bᵀ d B` per tile for tile rows around the eight-tile blocks; nothing stored past the tiles.
#[test]
fn input_transform_matches_the_formula() {
    if skip_without_avx2("AVX2 Winograd input transforms") {
        return;
    }
    for tile in [2usize, 4] {
        let (alpha, bt) = if tile == 4 {
            (6, &BT4[..])
        } else {
            (4, &BT2[..])
        };
        for n in [1usize, 7, 8, 9, 14, 17] {
            // The plane width `WinogradSpec::plane` gives.
            let pw = 16 * tile * n.div_ceil(16) + 16;
            let vs = n + 20;
            let code = assemble_in(tile, &WinoIn { pw, v_stride: vs }, n).unwrap();
            let f: extern "sysv64" fn(*const f32, *mut f32, u64) =
                // SAFETY: the assembled kernel's System V signature.
                unsafe { std::mem::transmute(exec(&code)) };
            let floats = alpha * pw;
            let p = guarded(floats);
            // SAFETY: `guarded` gives `floats` writable f32.
            let ps = unsafe { std::slice::from_raw_parts_mut(p, floats) };
            for (i, x) in ps.iter_mut().enumerate() {
                *x = val(i);
            }
            ps[tile + 1] = f32::NAN;
            let mut v = vec![-7.0f32; alpha * alpha * vs];
            f(p, v.as_mut_ptr(), 0);
            for t in 0..n {
                let want = sandwich(bt, alpha, |i, j| f64::from(ps[i * pw + tile * t + j]));
                for (xi, w) in want.iter().enumerate() {
                    let got = v[xi * vs + t];
                    let ok = if w.is_nan() {
                        got.is_nan()
                    } else {
                        close(got, *w)
                    };
                    assert!(ok, "F({tile}) n {n} t {t} ξ {xi}: {got} vs {w}");
                }
            }
            for x in 0..alpha * alpha {
                assert!(
                    v[x * vs + n..(x + 1) * vs].iter().all(|&y| y == -7.0),
                    "F({tile}) n {n}: past the tiles"
                );
            }
        }
    }
}

/// `Aᵀ M A + bias`, clamped with NaN kept; widths that end inside a tile and an eight-tile block, 1 to `tile`
/// rows, no load past the last tile's products (guard page), nothing stored past `cols` or the rows.
#[test]
fn output_transform_matches_the_formula() {
    if skip_without_avx2("AVX2 Winograd output transforms") {
        return;
    }
    for tile in [2usize, 4] {
        let (alpha, at) = if tile == 4 {
            (6, &AT4[..])
        } else {
            (4, &AT2[..])
        };
        for (cols, rows) in [
            (1usize, 1usize),
            (7, 2),
            (15, 2),
            (16, tile),
            (33, 1),
            (56, tile),
            (63, 2),
        ] {
            let n = cols.div_ceil(tile);
            let ms = n + 3;
            let spec = WinoOut {
                m_stride: ms,
                cols,
                rows: rows.min(tile),
                bias: true,
                lo: Some((-6.0f32).to_bits()),
                hi: Some(6.0f32.to_bits()),
            };
            let f: extern "sysv64" fn(*const f32, *mut f32, *const f32, u64) =
                // SAFETY: the assembled kernel's System V signature.
                unsafe { std::mem::transmute(exec(&assemble_out(tile, &spec).unwrap())) };
            // The products end at the last tile of the last ξ: a load past it faults.
            let floats = (alpha * alpha - 1) * ms + n;
            let m = guarded(floats);
            // SAFETY: `guarded` gives `floats` writable f32.
            let mv = unsafe { std::slice::from_raw_parts_mut(m, floats) };
            for (i, x) in mv.iter_mut().enumerate() {
                *x = val(i) * 0.1;
            }
            mv[1] = f32::NAN;
            let bias = [0.5f32];
            let mut y = vec![-7.0f32; tile * cols + 80];
            f(m, y.as_mut_ptr(), bias.as_ptr(), 0);
            for t in 0..n {
                let want = sandwich(at, alpha, |k, l| f64::from(mv[(alpha * k + l) * ms + t]));
                for r in 0..spec.rows {
                    for q in 0..tile {
                        let col = tile * t + q;
                        if col >= cols {
                            continue;
                        }
                        let z = want[tile * r + q] + 0.5;
                        let got = y[r * cols + col];
                        let ok = if z.is_nan() {
                            got.is_nan()
                        } else {
                            close(got, z.clamp(-6.0, 6.0))
                        };
                        assert!(
                            ok,
                            "F({tile}) cols {cols} t {t} row {r} col {col}: {got} vs {z}"
                        );
                    }
                }
            }
            assert!(
                y[spec.rows * cols..].iter().all(|&v| v == -7.0),
                "F({tile}) cols {cols}: past the rows"
            );
        }
    }
}

/// F(4x4)'s transforms are the AVX-512 kernels' arithmetic: bitwise the same outputs.
#[test]
fn f4_bitwise_matches_avx512() {
    if skip_without_avx2("AVX2 Winograd F(4x4)")
        || super::super::test_exec::skip_without_avx512(
            "the AVX-512 Winograd F(4x4) transforms to compare",
        )
    {
        return;
    }
    let n = 14usize;
    let pw = 16 * 4 * n.div_ceil(16) + 16;
    let vs = n + 5;
    let p: Vec<f32> = (0..6 * pw).map(val).collect();
    let run_in = |code: Vec<u8>| {
        let f: extern "sysv64" fn(*const f32, *mut f32, u64) =
            // SAFETY: the assembled kernel's System V signature.
            unsafe { std::mem::transmute(exec(&code)) };
        let mut v = vec![0f32; 36 * vs];
        f(p.as_ptr(), v.as_mut_ptr(), n as u64);
        v
    };
    let spec = WinoIn { pw, v_stride: vs };
    let v2 = run_in(assemble_in(4, &spec, n).unwrap());
    let v5 = run_in(winograd4_x86::assemble_in(&spec).unwrap());
    assert!(v2.iter().zip(&v5).all(|(a, b)| a.to_bits() == b.to_bits()));
    let out = WinoOut {
        m_stride: vs,
        cols: 4 * n - 1,
        rows: 4,
        bias: true,
        lo: Some(0.0f32.to_bits()),
        hi: None,
    };
    let run_out = |code: Vec<u8>| {
        let f: extern "sysv64" fn(*const f32, *mut f32, *const f32, u64) =
            // SAFETY: the assembled kernel's System V signature.
            unsafe { std::mem::transmute(exec(&code)) };
        let mut y = vec![0f32; 4 * out.cols];
        f(v2.as_ptr(), y.as_mut_ptr(), [0.25f32].as_ptr(), n as u64);
        y
    };
    let y2 = run_out(assemble_out(4, &out).unwrap());
    let y5 = run_out(winograd4_x86::assemble_out(&out).unwrap());
    assert!(y2.iter().zip(&y5).all(|(a, b)| a.to_bits() == b.to_bits()));
}
