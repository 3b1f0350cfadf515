//! Every kernel in f32, u8 and i8 over several shapes, against straightforward references written
//! from the format page (f32 within 1e-5 relative — in fact bit-exact, the order being specified —
//! and int8 exactly).

use std::vec;
use std::vec::Vec;

use super::*;

/// dtype codes.
pub(super) const F32: u32 = 0;
pub(super) const U8: u32 = 1;
pub(super) const I8: u32 = 2;

/// Random activations for `dt`: f32 in [-1, 1), or the full u8 / i8 range.
pub(super) fn acts(rng: &mut Rng, dt: u32, n: usize) -> (Vec<f32>, Vec<i32>) {
    match dt {
        F32 => (rng.fs(n), vec![]),
        U8 => (vec![], rng.ints(n, 0, 255)),
        _ => (vec![], rng.ints(n, -128, 127)),
    }
}

/// Places activations of `dt` in the image.
pub(super) fn put(img: &mut Image, dt: u32, v: &(Vec<f32>, Vec<i32>)) -> u32 {
    if dt == F32 {
        img.f32s(&v.0)
    } else {
        img.q(&v.1)
    }
}

/// Reads back `n` outputs of `dt` (f32 as bits in the int slot, to compare uniformly).
pub(super) fn get(m: &[u8], dt: u32, at: u32, n: usize) -> (Vec<f32>, Vec<i32>) {
    if dt == F32 {
        (rd_f32(m, at, n), vec![])
    } else {
        (vec![], rd_q(m, at, n, dt == U8))
    }
}

/// The reference's int8 output: `clamp(sat(round_ties_even(r) + zp), lo, hi)`, stored saturated.
pub(super) fn q_ref(dt: u32, r: f32, zp: i32, lo: i32, hi: i32) -> i32 {
    let (tmin, tmax) = if dt == U8 { (0, 255) } else { (-128, 127) };
    let v = (r.round_ties_even() as i64 + zp as i64).clamp(tmin, tmax) as i32;
    v.max(lo).min(hi).clamp(tmin as i32, tmax as i32)
}

#[derive(Clone, Copy, Debug)]
struct ConvCase {
    cb: usize,
    h: usize,
    w: usize,
    mb: usize,
    oh: usize,
    ow: usize,
    k: (usize, usize),
    s: (usize, usize),
    d: (usize, usize),
    org: (i32, i32),
    depthwise: bool,
    zero: bool,
}

/// Input and weight indices of the taps of output (m, oh, ow), in the format's order.
fn conv_taps(c: &ConvCase, m: usize, oh: usize, ow: usize) -> Vec<(usize, usize)> {
    let mut v = vec![];
    let chans: Vec<usize> = if c.depthwise {
        vec![m]
    } else {
        (0..c.cb).collect()
    };
    for ch in chans {
        for ky in 0..c.k.0 {
            for kx in 0..c.k.1 {
                let r = (oh * c.s.0) as i64 + c.org.0 as i64 + (ky * c.d.0) as i64;
                let q = (ow * c.s.1) as i64 + c.org.1 as i64 + (kx * c.d.1) as i64;
                if r < 0 || q < 0 || r >= c.h as i64 || q >= c.w as i64 {
                    continue;
                }
                let xi = (ch * c.h + r as usize) * c.w + q as usize;
                let wi = if c.depthwise {
                    (m * c.k.0 + ky) * c.k.1 + kx
                } else {
                    ((m * c.cb + ch) * c.k.0 + ky) * c.k.1 + kx
                };
                v.push((xi, wi));
            }
        }
    }
    v
}

fn conv_check(c: ConvCase, dt: u32, seed: u64) {
    let mut rng = Rng(seed);
    let nx = c.cb * c.h * c.w;
    let nw = c.mb * if c.depthwise { 1 } else { c.cb } * c.k.0 * c.k.1;
    let na = c.mb * c.oh * c.ow;
    let x = acts(&mut rng, dt, nx);
    let x_zp = if dt == F32 { 0 } else { rng.int(-20, 140) };
    let mut img = Image::default();
    let xa = put(&mut img, dt, &x);
    let (wf, wq) = (rng.fs(nw), rng.ints(nw, -128, 127));
    let wa = if dt == F32 { img.f32s(&wf) } else { img.q(&wq) };
    let (af, aq) = (rng.fs(na), rng.ints(na, -5000, 5000));
    let aa = if dt == F32 {
        img.f32s(&af)
    } else {
        img.i32s(&aq)
    };
    let flags = c.zero as u32 | (c.depthwise as u32) << 1;
    let words = [
        dt,
        flags,
        xa,
        wa,
        aa,
        c.cb as u32,
        c.h as u32,
        c.w as u32,
        c.mb as u32,
        c.oh as u32,
        c.ow as u32,
        c.k.0 as u32,
        c.k.1 as u32,
        c.s.0 as u32,
        c.s.1 as u32,
        c.d.0 as u32,
        c.d.1 as u32,
        c.org.0 as u32,
        c.org.1 as u32,
        x_zp as u32,
    ];
    let out = run_kernel(CONV, &words, &img.bytes).unwrap();
    let what = std::format!("conv dt {dt} {c:?}");
    if dt == F32 {
        let mut want = vec![];
        for m in 0..c.mb {
            for oh in 0..c.oh {
                for ow in 0..c.ow {
                    let i = (m * c.oh + oh) * c.ow + ow;
                    let mut v = if c.zero { 0.0 } else { af[i] };
                    for (xi, wi) in conv_taps(&c, m, oh, ow) {
                        v += x.0[xi] * wf[wi];
                    }
                    want.push(v);
                }
            }
        }
        assert_close(&rd_f32(&out, aa, na), &want, &what);
    } else {
        let mut want = vec![];
        for m in 0..c.mb {
            for oh in 0..c.oh {
                for ow in 0..c.ow {
                    let i = (m * c.oh + oh) * c.ow + ow;
                    let mut v = if c.zero { 0 } else { aq[i] };
                    for (xi, wi) in conv_taps(&c, m, oh, ow) {
                        v += (x.1[xi] - x_zp) * wq[wi];
                    }
                    want.push(v);
                }
            }
        }
        assert_eq!(rd_i32(&out, aa, na), want, "{what}");
    }
}

#[test]
fn conv_all_dtypes_and_shapes() {
    let base = ConvCase {
        cb: 3,
        h: 6,
        w: 7,
        mb: 4,
        oh: 6,
        ow: 7,
        k: (3, 3),
        s: (1, 1),
        d: (1, 1),
        org: (-1, -1),
        depthwise: false,
        zero: true,
    };
    let cases = [
        base,
        // Accumulate into the existing values.
        ConvCase {
            zero: false,
            ..base
        },
        // 1x1, no padding, odd tails.
        ConvCase {
            cb: 5,
            h: 3,
            w: 5,
            mb: 3,
            oh: 3,
            ow: 5,
            k: (1, 1),
            org: (0, 0),
            ..base
        },
        // Stride 2, padding on every side (the window runs past the bottom and right edges too).
        ConvCase {
            h: 7,
            w: 6,
            oh: 4,
            ow: 4,
            s: (2, 2),
            org: (-1, -2),
            k: (3, 4),
            ..base
        },
        // Dilation 2 with asymmetric padding, rectangular kernel, stride (1, 3).
        ConvCase {
            oh: 5,
            ow: 3,
            k: (2, 3),
            s: (1, 3),
            d: (2, 2),
            org: (-2, 0),
            ..base
        },
        // Depthwise 3x3 with padding, stride 2, accumulate.
        ConvCase {
            cb: 4,
            mb: 4,
            depthwise: true,
            s: (2, 1),
            oh: 3,
            ..base
        },
        ConvCase {
            cb: 2,
            mb: 2,
            depthwise: true,
            zero: false,
            k: (5, 5),
            org: (-2, -2),
            d: (1, 2),
            ..base
        },
        // A slab that is a band of rows: origin below 0 and above (a middle tile of a tall image).
        ConvCase {
            h: 4,
            oh: 2,
            org: (1, -1),
            ..base
        },
        // Windows entirely outside the slab (only padding).
        ConvCase {
            h: 2,
            w: 2,
            oh: 3,
            ow: 3,
            org: (-3, -3),
            s: (2, 2),
            ..base
        },
        // Single everything.
        ConvCase {
            cb: 1,
            h: 1,
            w: 1,
            mb: 1,
            oh: 1,
            ow: 1,
            k: (1, 1),
            org: (0, 0),
            ..base
        },
    ];
    for (i, c) in cases.iter().enumerate() {
        for dt in [F32, U8, I8] {
            conv_check(*c, dt, 100 + i as u64);
        }
    }
}

fn gemm_check(m: usize, k: usize, n: usize, dt: u32, zero: bool, seed: u64) {
    let mut rng = Rng(seed);
    let a = acts(&mut rng, dt, m * k);
    let a_zp = if dt == F32 { 0 } else { rng.int(-128, 255) };
    let (bf, bq) = (rng.fs(k * n), rng.ints(k * n, -128, 127));
    let (af, aq) = (rng.fs(m * n), rng.ints(m * n, -9000, 9000));
    let mut img = Image::default();
    let aa = put(&mut img, dt, &a);
    let ba = if dt == F32 { img.f32s(&bf) } else { img.q(&bq) };
    let acc = if dt == F32 {
        img.f32s(&af)
    } else {
        img.i32s(&aq)
    };
    let words = [
        dt,
        zero as u32,
        aa,
        ba,
        acc,
        m as u32,
        k as u32,
        n as u32,
        a_zp as u32,
    ];
    let out = run_kernel(GEMM, &words, &img.bytes).unwrap();
    let what = std::format!("gemm dt {dt} {m}x{k}x{n} zero {zero}");
    if dt == F32 {
        let mut want = vec![];
        for i in 0..m {
            for j in 0..n {
                let mut v = if zero { 0.0 } else { af[i * n + j] };
                for p in 0..k {
                    v += a.0[i * k + p] * bf[p * n + j];
                }
                want.push(v);
            }
        }
        assert_close(&rd_f32(&out, acc, m * n), &want, &what);
    } else {
        let mut want = vec![];
        for i in 0..m {
            for j in 0..n {
                let mut v = if zero { 0 } else { aq[i * n + j] };
                for p in 0..k {
                    v += (a.1[i * k + p] - a_zp) * bq[p * n + j];
                }
                want.push(v);
            }
        }
        assert_eq!(rd_i32(&out, acc, m * n), want, "{what}");
    }
}

#[test]
fn gemm_all_dtypes_and_shapes() {
    let shapes = [(1, 1, 1), (3, 5, 7), (8, 17, 3), (1, 64, 9), (16, 2, 16)];
    for (i, &(m, k, n)) in shapes.iter().enumerate() {
        for dt in [F32, U8, I8] {
            for zero in [true, false] {
                gemm_check(m, k, n, dt, zero, 200 + i as u64);
            }
        }
    }
}

#[derive(Clone, Copy, Debug)]
struct EpiCase {
    rows: usize,
    cols: usize,
    bias: bool,
    per_col: bool,
    residual: bool,
    act: u32,
    in_place: bool,
}

fn epilogue_check(c: EpiCase, dt: u32, seed: u64) {
    let mut rng = Rng(seed);
    let n = c.rows * c.cols;
    let vlen = if c.per_col { c.cols } else { c.rows };
    let mut img = Image::default();
    let (accf, accq) = (rng.fs(n), rng.ints(n, -40000, 40000));
    let acc = if dt == F32 {
        img.f32s(&accf)
    } else {
        img.i32s(&accq)
    };
    let (bf, bq) = (rng.fs(vlen), rng.ints(vlen, -3000, 3000));
    let bias = if dt == F32 {
        img.f32s(&bf)
    } else {
        img.i32s(&bq)
    };
    let resf = rng.fs(n);
    let res = img.f32s(&resf);
    let scales: Vec<f32> = (0..vlen).map(|_| 0.001 + rng.f().abs() * 0.01).collect();
    let scale = img.f32s(&scales);
    let out = if c.in_place && dt == F32 {
        acc
    } else {
        img.junk(n * if dt == F32 { 4 } else { 1 })
    };
    let out_zp = if dt == F32 { 0 } else { rng.int(-20, 20) };
    let (lo, hi) = match (dt, c.act) {
        (F32, _) => ((-0.25f32).to_bits(), 0.5f32.to_bits()),
        (U8, 0) => (0, 255),
        (U8, 1) => (out_zp.max(0) as u32, 255),
        (U8, _) => (10, 200),
        (_, 0) => (-128i32 as u32, 127),
        (_, 1) => (out_zp as u32, 127),
        _ => (-50i32 as u32, 60),
    };
    let flags = c.bias as u32 | (c.per_col as u32) << 1 | (c.residual as u32) << 2;
    let words = [
        dt,
        flags,
        acc,
        bias,
        res,
        out,
        c.rows as u32,
        c.cols as u32,
        c.act,
        lo,
        hi,
        scale,
        out_zp as u32,
    ];
    let img_out = run_kernel(EPILOGUE, &words, &img.bytes).unwrap();
    let what = std::format!("epilogue dt {dt} {c:?}");
    let mut wf = vec![];
    let mut wq = vec![];
    for i in 0..c.rows {
        for j in 0..c.cols {
            let e = i * c.cols + j;
            let v = if c.per_col { j } else { i };
            if dt == F32 {
                let mut y = accf[e];
                if c.bias {
                    y += bf[v];
                }
                if c.residual {
                    y += resf[e];
                }
                y = match c.act {
                    1 => y.max(0.0),
                    2 => y.clamp(-0.25, 0.5),
                    _ => y,
                };
                wf.push(y);
            } else {
                let acc = accq[e] + if c.bias { bq[v] } else { 0 };
                wq.push(q_ref(
                    dt,
                    acc as f32 * scales[v],
                    out_zp,
                    lo as i32,
                    hi as i32,
                ));
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
fn epilogue_all_dtypes_and_modes() {
    let base = EpiCase {
        rows: 5,
        cols: 7,
        bias: true,
        per_col: false,
        residual: false,
        act: 0,
        in_place: false,
    };
    let mut cases = vec![];
    for act in 0..3 {
        for bias in [false, true] {
            for per_col in [false, true] {
                cases.push(EpiCase {
                    act,
                    bias,
                    per_col,
                    ..base
                });
            }
        }
    }
    cases.push(EpiCase {
        rows: 1,
        cols: 1,
        ..base
    });
    cases.push(EpiCase {
        rows: 16,
        cols: 3,
        in_place: true,
        act: 1,
        ..base
    });
    for (i, c) in cases.iter().enumerate() {
        for dt in [F32, U8, I8] {
            epilogue_check(*c, dt, 300 + i as u64);
        }
        let c = EpiCase {
            residual: true,
            ..*c
        };
        epilogue_check(c, F32, 350 + i as u64);
    }
}
