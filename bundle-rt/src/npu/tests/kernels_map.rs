//! ELTWISE, POOL and GAP in f32, u8 and i8 over several shapes, and int8 rounding, against straightforward
//! references written from the format page (f32 bit-exact, the order being specified; int8 exactly). Shares the
//! data helpers of `kernels.rs`.

use std::vec;
use std::vec::Vec;

use super::kernels::{acts, get, put, q_ref, F32, I8, U8};
use super::*;

#[derive(Clone, Copy, Debug)]
struct EltCase {
    n: usize,
    op: u32,
    mode: u32,
    inner: usize,
    act: u32,
    in_place: bool,
}

fn eltwise_check(c: EltCase, dt: u32, seed: u64) {
    let mut rng = Rng(seed);
    let nb = match c.mode {
        0 => c.n,
        1 => 1,
        _ => c.n.div_ceil(c.inner),
    };
    let a = acts(&mut rng, dt, c.n);
    let b = acts(&mut rng, dt, nb);
    let mut img = Image::default();
    let aa = put(&mut img, dt, &a);
    let ba = put(&mut img, dt, &b);
    let out = if c.in_place {
        aa
    } else {
        img.junk(c.n * if dt == F32 { 4 } else { 1 })
    };
    let (a_s, b_s, y_s) = (
        0.02 + rng.f().abs() * 0.05,
        0.02 + rng.f().abs() * 0.05,
        0.05 + rng.f().abs() * 0.2,
    );
    let zp = |rng: &mut Rng| {
        if dt == U8 {
            rng.int(0, 255)
        } else {
            rng.int(-128, 127)
        }
    };
    let (a_zp, b_zp, y_zp) = (zp(&mut rng), zp(&mut rng), zp(&mut rng));
    let (lo, hi) = match (dt, c.act) {
        (F32, _) => ((-0.3f32).to_bits(), 0.7f32.to_bits()),
        (U8, 2) => (20, 230),
        (U8, _) => (0, 255),
        (_, 2) => (-100i32 as u32, 90),
        _ => (-128i32 as u32, 127),
    };
    let words = [
        dt,
        c.op,
        aa,
        ba,
        out,
        c.n as u32,
        c.mode,
        c.inner as u32,
        c.act,
        lo,
        hi,
        a_s.to_bits(),
        a_zp as u32,
        b_s.to_bits(),
        b_zp as u32,
        y_s.to_bits(),
        y_zp as u32,
    ];
    let img_out = run_kernel(ELTWISE, &words, &img.bytes).unwrap();
    let what = std::format!("eltwise dt {dt} {c:?}");
    let bi = |i: usize| match c.mode {
        0 => i,
        1 => 0,
        _ => i / c.inner,
    };
    if dt == F32 {
        let want: Vec<f32> = (0..c.n)
            .map(|i| {
                let y = match c.op {
                    0 => a.0[i] + b.0[bi(i)],
                    1 => a.0[i] * b.0[bi(i)],
                    _ => a.0[i],
                };
                match c.act {
                    1 => y.max(0.0),
                    2 => y.clamp(-0.3, 0.7),
                    _ => y,
                }
            })
            .collect();
        assert_close(&rd_f32(&img_out, out, c.n), &want, &what);
    } else {
        let want: Vec<i32> = (0..c.n)
            .map(|i| {
                let ra = a_s * (a.1[i] - a_zp) as f32;
                let rb = b_s * (b.1[bi(i)] - b_zp) as f32;
                let r = match c.op {
                    0 => ra + rb,
                    1 => ra * rb,
                    _ => ra,
                };
                q_ref(dt, r / y_s, y_zp, lo as i32, hi as i32)
            })
            .collect();
        assert_eq!(rd_q(&img_out, out, c.n, dt == U8), want, "{what}");
    }
}

#[test]
fn eltwise_all_dtypes_ops_and_broadcasts() {
    let mut cases = vec![];
    for op in 0..3 {
        for mode in 0..3 {
            for act in 0..3 {
                cases.push(EltCase {
                    n: 37,
                    op,
                    mode,
                    inner: 6,
                    act,
                    in_place: false,
                });
            }
        }
    }
    cases.push(EltCase {
        n: 48,
        op: 0,
        mode: 2,
        inner: 16,
        act: 1,
        in_place: true,
    });
    cases.push(EltCase {
        n: 1,
        op: 1,
        mode: 0,
        inner: 1,
        act: 0,
        in_place: true,
    });
    for (i, c) in cases.iter().enumerate() {
        for dt in [F32, U8, I8] {
            eltwise_check(*c, dt, 400 + i as u64);
        }
    }
}

#[derive(Clone, Copy, Debug)]
struct PoolCase {
    c: usize,
    h: usize,
    w: usize,
    oh: usize,
    ow: usize,
    k: (usize, usize),
    s: (usize, usize),
    d: (usize, usize),
    org: (i32, i32),
}

fn pool_check(p: PoolCase, dt: u32, kind: u32, seed: u64) {
    let mut rng = Rng(seed);
    let x = acts(&mut rng, dt, p.c * p.h * p.w);
    let mut img = Image::default();
    let xa = put(&mut img, dt, &x);
    let n = p.c * p.oh * p.ow;
    let out = img.junk(n * if dt == F32 { 4 } else { 1 });
    let words = [
        dt,
        kind,
        xa,
        out,
        p.c as u32,
        p.h as u32,
        p.w as u32,
        p.oh as u32,
        p.ow as u32,
        p.k.0 as u32,
        p.k.1 as u32,
        p.s.0 as u32,
        p.s.1 as u32,
        p.org.0 as u32,
        p.org.1 as u32,
        p.d.0 as u32,
        p.d.1 as u32,
    ];
    let img_out = run_kernel(POOL, &words, &img.bytes).unwrap();
    let what = std::format!("pool dt {dt} kind {kind} {p:?}");
    let (mut wf, mut wq) = (vec![], vec![]);
    for ch in 0..p.c {
        for oh in 0..p.oh {
            for ow in 0..p.ow {
                let mut idx = vec![];
                for ky in 0..p.k.0 {
                    for kx in 0..p.k.1 {
                        let r = (oh * p.s.0 + ky * p.d.0) as i64 + p.org.0 as i64;
                        let q = (ow * p.s.1 + kx * p.d.1) as i64 + p.org.1 as i64;
                        if r >= 0 && q >= 0 && r < p.h as i64 && q < p.w as i64 {
                            idx.push((ch * p.h + r as usize) * p.w + q as usize);
                        }
                    }
                }
                let div = if kind == 1 { p.k.0 * p.k.1 } else { idx.len() };
                if dt == F32 {
                    let vals: Vec<f32> = idx.iter().map(|&i| x.0[i]).collect();
                    wf.push(if kind == 0 {
                        vals.iter().copied().fold(f32::NEG_INFINITY, f32::max)
                    } else {
                        vals.iter().fold(0.0f32, |s, &v| s + v) / div as f32
                    });
                } else {
                    let vals: Vec<i32> = idx.iter().map(|&i| x.1[i]).collect();
                    wq.push(if kind == 0 {
                        *vals.iter().max().unwrap()
                    } else {
                        let s: i32 = vals.iter().sum();
                        q_ref(dt, s as f32 / div as f32, 0, -1000, 1000)
                    });
                }
            }
        }
    }
    if dt == F32 {
        assert_close(&rd_f32(&img_out, out, n), &wf, &what);
    } else {
        assert_eq!(rd_q(&img_out, out, n, dt == U8), wq, "{what}");
    }
}

#[test]
fn pool_all_dtypes_kinds_and_shapes() {
    let base = PoolCase {
        c: 3,
        h: 7,
        w: 6,
        oh: 4,
        ow: 3,
        k: (3, 3),
        s: (2, 2),
        d: (1, 1),
        org: (-1, -1),
    };
    let cases = [
        base,
        PoolCase {
            k: (2, 2),
            org: (0, 0),
            oh: 3,
            ow: 3,
            ..base
        },
        // Padding on every side: the last windows run past the bottom and right.
        PoolCase {
            k: (3, 2),
            s: (3, 3),
            oh: 3,
            ow: 3,
            org: (-1, -1),
            ..base
        },
        // Dilation and asymmetric stride.
        PoolCase {
            d: (2, 2),
            s: (1, 2),
            oh: 5,
            ow: 3,
            org: (-2, -1),
            ..base
        },
        // A kernel larger than the slab.
        PoolCase {
            h: 2,
            w: 3,
            k: (5, 5),
            s: (1, 1),
            oh: 2,
            ow: 3,
            org: (-2, -2),
            ..base
        },
        PoolCase {
            c: 1,
            h: 1,
            w: 1,
            oh: 1,
            ow: 1,
            k: (1, 1),
            s: (1, 1),
            org: (0, 0),
            ..base
        },
    ];
    for (i, p) in cases.iter().enumerate() {
        for dt in [F32, U8, I8] {
            for kind in 0..3 {
                pool_check(*p, dt, kind, 500 + i as u64);
            }
        }
    }
}

#[test]
fn pool_empty_window_is_an_error_only_where_it_matters() {
    // Output column 2's window starts at column 6 of a 4-wide slab.
    let p = PoolCase {
        c: 1,
        h: 4,
        w: 4,
        oh: 1,
        ow: 3,
        k: (2, 2),
        s: (1, 3),
        d: (1, 1),
        org: (0, 0),
    };
    for kind in [0u32, 2] {
        let mut img = Image::default();
        let xa = img.f32s(&[1.0; 16]);
        let out = img.junk(12);
        let words = [0, kind, xa, out, 1, 4, 4, 1, 3, 2, 2, 1, 3, 0, 0, 1, 1];
        let e = run_kernel(POOL, &words, &img.bytes).unwrap_err();
        assert!(
            matches!(
                e,
                crate::Error::Npu {
                    why: crate::error::NpuWhy::EmptyWindow { row: 0, col: 2 },
                    ..
                }
            ),
            "{e:?}"
        );
    }
    // Counting padding, an empty window averages to 0.
    pool_check(p, F32, 1, 1);
}

fn gap_check(c: usize, n: usize, dt: u32, seed: u64) {
    let mut rng = Rng(seed);
    let x = acts(&mut rng, dt, c * n);
    let mut img = Image::default();
    let xa = put(&mut img, dt, &x);
    let out = img.junk(c * if dt == F32 { 4 } else { 1 });
    let words = [dt, 0, xa, out, c as u32, n as u32];
    let img_out = run_kernel(GAP, &words, &img.bytes).unwrap();
    let what = std::format!("gap dt {dt} {c}x{n}");
    if dt == F32 {
        let want: Vec<f32> = (0..c)
            .map(|ch| x.0[ch * n..(ch + 1) * n].iter().fold(0.0f32, |s, &v| s + v) / n as f32)
            .collect();
        assert_close(&rd_f32(&img_out, out, c), &want, &what);
    } else {
        let want: Vec<i32> = (0..c)
            .map(|ch| {
                let s: i32 = x.1[ch * n..(ch + 1) * n].iter().sum();
                q_ref(dt, s as f32 / n as f32, 0, -1000, 1000)
            })
            .collect();
        assert_eq!(get(&img_out, dt, out, c).1, want, "{what}");
    }
}

#[test]
fn gap_all_dtypes_and_shapes() {
    for (i, &(c, n)) in [(1, 1), (3, 49), (16, 7), (5, 2)].iter().enumerate() {
        for dt in [F32, U8, I8] {
            gap_check(c, n, dt, 600 + i as u64);
        }
    }
}

#[test]
fn int8_rounding_ties_go_to_even() {
    // GAP over two values: sums 1, 3, -1, -3 over n = 2 are the ties 0.5, 1.5, -0.5, -1.5.
    let mut img = Image::default();
    let xa = img.q(&[0, 1, 1, 2, 0, -1, -1, -2]);
    let out = img.junk(4);
    let m = run_kernel(GAP, &[I8, 0, xa, out, 4, 2], &img.bytes).unwrap();
    assert_eq!(rd_q(&m, out, 4, false), [0, 2, 0, -2]);
}
