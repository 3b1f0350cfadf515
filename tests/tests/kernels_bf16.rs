//! The bf16 GEMM (`--precision bf16`) against a float64 reference of the same bf16-rounded operands: each case
//! is a MatMul with a constant B (optionally its bias, a residual Add and a Relu, which the passes fuse into the
//! GEMM), compiled for `--cpu native` where the CPU has AVX-512 BF16 (else a `SKIPPED` line). Since the
//! kernel's only rounding besides the operands' bf16 rounding is its f32 accumulation, the tolerance is the f32
//! accumulation bound `4·K·2^-24·Σ|a·b|` per output, about a thousand times tighter than the bf16 error itself:
//! a kernel that read a wrong element, dropped a pair or skipped the bias fails it. Shapes cover row tails of
//! the 8-row tile, column tails of the 32-column panel (masked stores), odd K (the zero pad of the last pair),
//! several 64-row units and panels. Winograd's bf16 GEMMs (a batch of them, `V` packed at run time) are
//! checked on integer data whose transforms, bf16 roundings and sums are all exact: the output must equal the
//! direct convolution's bit for bit.

use bundlec::kernel::gemm_bf16::{from_bf16, to_bf16};
use bundlec_tests::harness::{compile_with, run_c};
use bundlec_tests::onnx::Model;
use bundlec_tests::rand_vec;

/// Whether this machine runs AVX-512 BF16 code.
fn has_bf16() -> bool {
    bundlec::codegen::isa::host_ext().bf16
}

/// The model compiled with `--precision bf16` for each bf16 kernel variant this CPU runs: `znver4` (the
/// `vdpbf16ps` micro-kernel) and `sapphirerapids` (the AMX one); `SKIPPED` lines for the others.
fn compiled(name: &str, model: &[u8]) -> Vec<(&'static str, bundlec_tests::harness::Compiled)> {
    compiled_with(name, model, bundlec::lower::Winograd::Auto)
}

/// [`compiled`] with the `--winograd` choice.
fn compiled_with(
    name: &str,
    model: &[u8],
    winograd: bundlec::lower::Winograd,
) -> Vec<(&'static str, bundlec_tests::harness::Compiled)> {
    let ext = bundlec::codegen::isa::host_ext();
    let mut out = Vec::new();
    for (cpu, ok) in [
        ("znver4", ext.vbmi && ext.vnni),
        ("sapphirerapids", ext.amx),
    ] {
        if !ok {
            eprintln!("SKIPPED: {name} with --cpu {cpu} (this CPU lacks its features)");
            continue;
        }
        let mut o = bundlec::Options::new(&format!("{name}_{cpu}"));
        o.cpu = cpu.into();
        o.precision = bundlec::Precision::Bf16;
        o.winograd = winograd;
        out.push((cpu, compile_with(model, o)));
    }
    out
}

fn bf(v: f32) -> f64 {
    from_bf16(to_bf16(v)) as f64
}

/// `n` integers in `-r..=r` (as f32) from `seed`: data whose products and sums stay exact.
fn ints(n: usize, seed: u64, r: f32) -> Vec<f32> {
    rand_vec(n, seed)
        .iter()
        .map(|v| (v * (r + 0.49)).round().clamp(-r, r))
        .collect()
}

/// An ONNX ints attribute.
fn attr(v: &[i64]) -> bundlec_tests::onnx::Attr {
    bundlec_tests::onnx::Attr::Ints(v.to_vec())
}

/// Whether the bundle's object holds a kernel whose name contains `tag`.
fn has_kernel(comp: &bundlec_tests::harness::Compiled, tag: &[u8]) -> bool {
    comp.bundle.object.windows(tag.len()).any(|w| w == tag)
}

/// A float64 3x3 convolution with padding 1 of `x` (`[c][h][w]`) by `wts` (`[m][c][3][3]`, or `[c][1][3][3]`
/// when `depthwise`) plus `bias`, before any activation: `[m][h][w]`.
fn conv3x3(
    x: &[f64],
    [c, h, w]: [usize; 3],
    (wts, bias): (&[f32], &[f32]),
    m: usize,
    depthwise: bool,
) -> Vec<f64> {
    let mut y = vec![0f64; m * h * w];
    for o in 0..m {
        let chans = if depthwise { o..o + 1 } else { 0..c };
        for oy in 0..h {
            for ox in 0..w {
                let mut s = bias[o] as f64;
                for ch in chans.clone() {
                    let wrow = if depthwise { o * 9 } else { (o * c + ch) * 9 };
                    for t in 0..9 {
                        let (iy, ix) = ((oy + t / 3) as isize - 1, (ox + t % 3) as isize - 1);
                        if (0..h as isize).contains(&iy) && (0..w as isize).contains(&ix) {
                            s += wts[wrow + t] as f64 * x[(ch * h + iy as usize) * w + ix as usize];
                        }
                    }
                }
                y[(o * h + oy) * w + ox] = s;
            }
        }
    }
    y
}

#[test]
fn matmul_bf16_matches_the_rounded_reference() {
    if !has_bf16() {
        eprintln!("SKIPPED: bf16 GEMM (this CPU lacks AVX-512 BF16)");
        return;
    }
    // (name, rows, K, N, bias, residual, relu); "bf_seq" has a leading batch dim of 1 ([1, rows, K], a
    // transformer's activations).
    for (name, m, k, n, bias, residual, relu) in [
        ("bf_small", 3usize, 5usize, 7usize, false, false, false),
        ("bf_tiles", 70, 64, 96, true, false, false),
        ("bf_odd_k", 9, 129, 45, true, true, false),
        ("bf_relu", 130, 200, 33, false, true, true),
        ("bf_seq", 20, 48, 40, true, false, false),
    ] {
        let lead: &[usize] = if name == "bf_seq" { &[1] } else { &[] };
        let dims = |a: usize, b: usize| [lead, &[a, b]].concat();
        let a: Vec<f32> = rand_vec(m * k, 21).iter().map(|v| v * 2.0).collect();
        let b: Vec<f32> = rand_vec(k * n, 22).iter().map(|v| v * 0.5).collect();
        let bv: Vec<f32> = rand_vec(n, 23).iter().map(|v| v * 3.0).collect();
        let rv: Vec<f32> = rand_vec(m * n, 24).to_vec();
        let mut model = Model::new();
        model.input("a", &dims(m, k));
        if residual {
            model.input("r", &dims(m, n));
        }
        model.output("y", &dims(m, n));
        model.init("b", &[k, n], b.clone());
        model.init("bias", &[n], bv.clone());
        model.node("MatMul", &["a", "b"], &["p"], vec![]);
        let mut last = "p".to_string();
        if bias {
            model.node("Add", &[&last, "bias"], &["pb"], vec![]);
            last = "pb".into();
        }
        if residual {
            model.node("Add", &[&last, "r"], &["pr"], vec![]);
            last = "pr".into();
        }
        if relu {
            model.node("Relu", &[&last], &["pa"], vec![]);
            last = "pa".into();
        }
        model.node("Identity", &[&last], &["y"], vec![]);
        let mut inputs = vec![a.clone()];
        if residual {
            inputs.push(rv.clone());
        }
        for (cpu, comp) in compiled(name, &model.bytes()) {
            assert!(
                comp.bundle.report.kernels >= 2,
                "{name}: the MatMul lowers to the bf16 conversion and GEMM"
            );
            let got = &run_c(&comp, &inputs, &[m * n])[0];
            check(
                name,
                cpu,
                got,
                [m, k, n],
                [&a, &b, &bv, &rv],
                [bias, residual, relu, false],
            );
        }
    }
}

/// Convolutions under `--precision bf16`: the weights as bf16 rows, the columns packed into bf16 panels at run
/// time (`Body::PackBf16`), the bias per output channel. A 3x3 with padding, bias and Relu over a 9x11 plane
/// (99 pixels: three panels and a tail of 3; 37 channels: a row tail; K = 180), and a 1x1 with a fused residual
/// Add over 7x7 (a panel and a tail of 17) with odd K (33: the last pair padded).
#[test]
fn conv_bf16_matches_the_rounded_reference() {
    if !has_bf16() {
        eprintln!("SKIPPED: bf16 convolution (this CPU lacks AVX-512 BF16)");
        return;
    }
    // (name, C, M, H, W, kernel, pad, residual)
    for (name, c, m, h, w, kk, pad, residual) in [
        (
            "bfc_3x3", 20usize, 37usize, 9usize, 11usize, 3usize, 1usize, false,
        ),
        ("bfc_1x1_res", 33, 40, 7, 7, 1, 0, true),
        // Computed transposed (49 pixels, M a multiple of 16 or 32: `rules::transposed_wins`).
        ("bfc_1x1_t", 33, 64, 7, 7, 1, 0, true),
        ("bfc_3x3_t", 20, 96, 7, 7, 3, 1, false),
    ] {
        let k = c * kk * kk;
        let p = h * w;
        let x: Vec<f32> = rand_vec(c * p, 31).iter().map(|v| v * 2.0).collect();
        let wv: Vec<f32> = rand_vec(m * k, 32).iter().map(|v| v * 0.5).collect();
        let bv: Vec<f32> = rand_vec(m, 33).iter().map(|v| v * 3.0).collect();
        let rv: Vec<f32> = rand_vec(m * p, 34).to_vec();
        let mut model = Model::new();
        model.input("x", &[1, c, h, w]);
        if residual {
            model.input("r", &[1, m, h, w]);
        }
        model.output("y", &[1, m, h, w]);
        model.init("w", &[m, c, kk, kk], wv.clone());
        model.init("bias", &[m], bv.clone());
        let pads = [pad as i64; 4];
        model.node(
            "Conv",
            &["x", "w", "bias"],
            &["c"],
            vec![
                ("pads", attr(&pads)),
                ("kernel_shape", attr(&[kk as i64, kk as i64])),
            ],
        );
        let last = if residual {
            model.node("Add", &["c", "r"], &["cr"], vec![]);
            "cr"
        } else {
            model.node("Relu", &["c"], &["cr"], vec![]);
            "cr"
        };
        model.node("Identity", &[last], &["y"], vec![]);
        // The columns [K, P] (zero at padded taps): the GEMM's B.
        let mut cols = vec![0f32; k * p];
        for ch in 0..c {
            for t in 0..kk * kk {
                let (ky, kx) = (t / kk, t % kk);
                for oy in 0..h {
                    for ox in 0..w {
                        let (iy, ix) = (
                            (oy + ky) as isize - pad as isize,
                            (ox + kx) as isize - pad as isize,
                        );
                        if (0..h as isize).contains(&iy) && (0..w as isize).contains(&ix) {
                            cols[(ch * kk * kk + t) * p + oy * w + ox] =
                                x[ch * p + iy as usize * w + ix as usize];
                        }
                    }
                }
            }
        }
        let mut inputs = vec![x.clone()];
        if residual {
            inputs.push(rv.clone());
        }
        // The direct bf16 GEMM over im2col's columns, not Winograd's.
        let off = bundlec::lower::Winograd::Off;
        for (cpu, comp) in compiled_with(name, &model.bytes(), off) {
            let t = has_kernel(&comp, b"gemm_t");
            let want_t = cpu == "znver4" && name.ends_with("_t");
            assert_eq!(t, want_t, "{name} --cpu {cpu}: computed transposed");
            let got = &run_c(&comp, &inputs, &[m * p])[0];
            check(
                name,
                cpu,
                got,
                [m, k, p],
                [&wv, &cols, &bv, &rv],
                [true, residual, !residual, true],
            );
        }
    }
}

#[test]
fn winograd_bf16_is_exact_on_integers() {
    if !has_bf16() {
        eprintln!("SKIPPED: bf16 Winograd (this CPU lacks AVX-512 BF16)");
        return;
    }
    // 3x3, pad 1, bias and Relu; computed plain with 36 and 49 tiles (one panel and a column tail, several
    // 64-row units: M = 70) and transposed with 49 and 16 tiles (a row tail of one tile; M a multiple of 16
    // with 49 of 64 or 16 of 32 columns used: `rules::transposed_wins`); an odd C (the zero pad of the last
    // pair). Inputs
    // in -3..=3 and weights in -2..=2 make F(2x2)'s V (sums of 16 inputs) integers below 256 and U (sums of
    // 9 weights over 4) quarters below 5, both exact in bf16, and every product and sum exact in f32.
    for (name, c, m, h, w, transposed) in [
        ("bfw_36", 24usize, 20usize, 12usize, 12usize, false),
        ("bfw_49", 17, 70, 14, 13, false),
        ("bfw_t49", 19, 64, 14, 14, true),
        ("bfw_t16", 32, 32, 8, 7, true),
    ] {
        let x = ints(c * h * w, 41, 3.0);
        let wv = ints(m * c * 9, 42, 2.0);
        let bv = ints(m, 43, 5.0);
        let mut model = Model::new();
        model.input("x", &[1, c, h, w]);
        model.output("y", &[1, m, h, w]);
        model.init("w", &[m, c, 3, 3], wv.clone());
        model.init("bias", &[m], bv.clone());
        model.node(
            "Conv",
            &["x", "w", "bias"],
            &["c"],
            vec![("pads", attr(&[1; 4])), ("kernel_shape", attr(&[3, 3]))],
        );
        model.node("Relu", &["c"], &["y"], vec![]);
        let xf: Vec<f64> = x.iter().map(|&v| v as f64).collect();
        let want: Vec<f64> = conv3x3(&xf, [c, h, w], (&wv, &bv), m, false)
            .into_iter()
            .map(|v| v.max(0.0))
            .collect();
        for (cpu, comp) in compiled(name, &model.bytes()) {
            // The AMX variant keeps the direct bf16 GEMM; on the vdpbf16ps one Winograd's GEMMs are bf16.
            let wino = has_kernel(&comp, b"winograd_pack");
            assert_eq!(
                wino,
                cpu == "znver4",
                "{name} --cpu {cpu}: bf16 Winograd chosen"
            );
            let t = has_kernel(&comp, b"winograd_gemm_t");
            assert_eq!(
                t,
                wino && transposed,
                "{name} --cpu {cpu}: computed transposed"
            );
            let got = &run_c(&comp, std::slice::from_ref(&x), &[m * h * w])[0];
            for (i, (&g, &e)) in got.iter().zip(&want).enumerate() {
                assert_eq!(g as f64, e, "{name} --cpu {cpu}: y[{i}]");
            }
            eprintln!("{name} --cpu {cpu}: exact (winograd: {wino})");
        }
    }
}

#[test]
fn bf16_channel_blocks_feed_the_depthwise_kernel() {
    if !has_bf16() {
        eprintln!("SKIPPED: bf16 channel blocks (this CPU lacks AVX-512 BF16)");
        return;
    }
    // An inverted residual's expansion on a 7x7 plane (computed transposed) and its 3x3 depthwise reader: the
    // expansion stores channel blocks, the depthwise kernel reads them. M = 80 leaves a block of padding past
    // the channels (ld = 96). Integer data keeps every value exact (bf16 operands, f32 sums).
    let (c, m, h, w) = (24usize, 80usize, 7usize, 7usize);
    let p = h * w;
    let (x, we, be) = (ints(c * p, 51, 3.0), ints(m * c, 52, 2.0), ints(m, 53, 4.0));
    let (wd, bd) = (ints(m * 9, 54, 2.0), ints(m, 55, 3.0));
    let mut model = Model::new();
    model.input("x", &[1, c, h, w]);
    model.output("y", &[1, m, h, w]);
    model.init("we", &[m, c, 1, 1], we.clone());
    model.init("be", &[m], be.clone());
    model.init("wd", &[m, 1, 3, 3], wd.clone());
    model.init("bd", &[m], bd.clone());
    let one = vec![("kernel_shape", attr(&[1, 1]))];
    model.node("Conv", &["x", "we", "be"], &["e"], one);
    model.node("Relu", &["e"], &["er"], vec![]);
    let dw = vec![
        ("kernel_shape", attr(&[3, 3])),
        ("pads", attr(&[1; 4])),
        ("group", bundlec_tests::onnx::Attr::Int(m as i64)),
    ];
    model.node("Conv", &["er", "wd", "bd"], &["y"], dw);
    let e: Vec<f64> = (0..m * p)
        .map(|i| {
            let (o, q) = (i / p, i % p);
            let s: f64 = (0..c)
                .map(|ch| we[o * c + ch] as f64 * x[ch * p + q] as f64)
                .sum();
            (s + be[o] as f64).max(0.0)
        })
        .collect();
    let y = conv3x3(&e, [m, h, w], (&wd, &bd), m, true);
    for (cpu, comp) in compiled("bfb_dw", &model.bytes()) {
        if cpu == "znver4" {
            // Pack, transposed GEMM into blocks, depthwise: no transposing kernel between them (4 without).
            assert_eq!(comp.bundle.report.kernels, 3, "--cpu {cpu}: kernels");
        }
        let got = &run_c(&comp, std::slice::from_ref(&x), &[m * p])[0];
        for (i, (&g, &want)) in got.iter().zip(&y).enumerate() {
            assert_eq!(g as f64, want, "--cpu {cpu}: y[{i}]");
        }
        eprintln!("bfb_dw --cpu {cpu}: exact");
    }
}

#[test]
fn bf16_rows_from_depthwise_blocks() {
    if !has_bf16() {
        eprintln!("SKIPPED: bf16 rows from channel blocks (this CPU lacks AVX-512 BF16)");
        return;
    }
    // A 3x3 depthwise layer and the 1x1 projection after it on a 7x7 plane (computed transposed): the depthwise
    // kernel writes channel blocks, converted to bf16 rows for the projection. Integer data keeps every value
    // exact (depthwise outputs below 256, exact in bf16; f32 sums).
    let (c, m, h, w) = (48usize, 32usize, 7usize, 7usize);
    let p = h * w;
    let (x, wd, bd) = (ints(c * p, 61, 2.0), ints(c * 9, 62, 1.0), ints(c, 63, 2.0));
    let (wp, bp) = (ints(m * c, 64, 2.0), ints(m, 65, 3.0));
    let mut model = Model::new();
    model.input("x", &[1, c, h, w]);
    model.output("y", &[1, m, h, w]);
    model.init("wd", &[c, 1, 3, 3], wd.clone());
    model.init("bd", &[c], bd.clone());
    model.init("wp", &[m, c, 1, 1], wp.clone());
    model.init("bp", &[m], bp.clone());
    let dw = vec![
        ("kernel_shape", attr(&[3, 3])),
        ("pads", attr(&[1; 4])),
        ("group", bundlec_tests::onnx::Attr::Int(c as i64)),
    ];
    model.node("Conv", &["x", "wd", "bd"], &["d"], dw);
    model.node("Relu", &["d"], &["dr"], vec![]);
    let one = vec![("kernel_shape", attr(&[1, 1]))];
    model.node("Conv", &["dr", "wp", "bp"], &["y"], one);
    let xf: Vec<f64> = x.iter().map(|&v| v as f64).collect();
    let d: Vec<f64> = conv3x3(&xf, [c, h, w], (&wd, &bd), c, true)
        .into_iter()
        .map(|v| v.max(0.0))
        .collect();
    for (cpu, comp) in compiled("bfr_dw", &model.bytes()) {
        let rows = has_kernel(&comp, b"rowsbf16");
        assert_eq!(
            rows,
            cpu == "znver4",
            "--cpu {cpu}: bf16 rows from the depthwise blocks"
        );
        let got = &run_c(&comp, std::slice::from_ref(&x), &[m * p])[0];
        for o in 0..m {
            for q in 0..p {
                let s: f64 = (0..c).map(|ch| wp[o * c + ch] as f64 * d[ch * p + q]).sum();
                let want = s + bp[o] as f64;
                assert_eq!(got[o * p + q] as f64, want, "--cpu {cpu}: y[{o}][{q}]");
            }
        }
        eprintln!("bfr_dw --cpu {cpu}: exact");
    }
}

/// Compares `got` with the float64 product of the bf16-rounded operands within the f32 accumulation bound (the
/// bias per column, or with `bias_row` per row).
fn check(
    name: &str,
    cpu: &str,
    got: &[f32],
    [m, k, n]: [usize; 3],
    [a, b, bv, rv]: [&[f32]; 4],
    [bias, residual, relu, bias_row]: [bool; 4],
) {
    {
        let mut worst = 0.0f64;
        for i in 0..m {
            for j in 0..n {
                let (mut s, mut mag) = (0.0f64, 0.0f64);
                for p in 0..k {
                    let t = bf(a[i * k + p]) * bf(b[p * n + j]);
                    s += t;
                    mag += t.abs();
                }
                if bias {
                    let b = if bias_row { bv[i] } else { bv[j] } as f64;
                    s += b;
                    mag += b.abs();
                }
                if residual {
                    s += rv[i * n + j] as f64;
                    mag += (rv[i * n + j] as f64).abs();
                }
                if relu {
                    s = s.max(0.0);
                }
                let tol = 4.0 * (k + 2) as f64 * f32::EPSILON as f64 / 2.0 * mag + 1e-30;
                let err = (got[i * n + j] as f64 - s).abs();
                assert!(
                    err <= tol,
                    "{name} --cpu {cpu}: y[{i}][{j}] = {} against {s} (error {err:e}, tolerance {tol:e})",
                    got[i * n + j]
                );
                worst = worst.max(err / tol);
            }
        }
        eprintln!("{name} --cpu {cpu}: worst error {worst:.3} of the tolerance");
    }
}
