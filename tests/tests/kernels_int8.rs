//! The int8 kernels against the reference semantics, exactly: each case is `QuantizeLinear → QLinearConv /
//! QLinearMatMul → DequantizeLinear` (f32 in and out, so the C harness can drive it), compiled once per kernel
//! variant (`harness::kernel_variants`, with `SKIPPED` lines for variants this CPU cannot run) and compared
//! bit for bit with the graph interpreter (`ir::eval`) running the imported, unoptimised graph. Shapes cover
//! odd K (a zero-padded last pair), K above one packed block (2048), row and column tails of the 4 x 8 tile,
//! padding on every side with the zero point, strides, dilations, groups, depthwise, 1x1 direct convolutions,
//! i8 and u8 activations, and saturation at both ends.

use bundlec::ir::Tensor;
use bundlec_tests::harness::{compile_with, kernel_variants, run_c, scratch};
use bundlec_tests::onnx::{Attr, Model};
use bundlec_tests::rand_vec;

/// One quantised product: x shape, weight shape, attributes, activation dtype (2 u8 / 3 i8), conv or matmul.
struct QCase {
    name: &'static str,
    x: Vec<usize>,
    w: Vec<usize>,
    attrs: Vec<(&'static str, Attr)>,
    act: i32,
    conv: bool,
    /// A residual `Add` (in QDQ form, then Relu) of a second quantised input after the product: fused into
    /// the implicit convolution's epilogue on VNNI (`kernel::qconv::QResidual`).
    residual: bool,
    /// The implicit convolution takes its transposed kernel (`QConvImplicit::transposed`) on `icelake`.
    transposed: bool,
}

fn ints(v: &[i64]) -> Attr {
    Attr::Ints(v.to_vec())
}

fn run_case(c: QCase) {
    let (lo, hi, zx, zy) = if c.act == 2 {
        (0, 255, 121, 97)
    } else {
        (-128, 127, -7, 11)
    };
    let nw: usize = c.w.iter().product();
    // Weights in [-127, 127] with both extremes present.
    let mut wv: Vec<i64> = rand_vec(nw, 7)
        .iter()
        .map(|v| ((v * 127.0).round() as i64).clamp(-127, 127))
        .collect();
    wv[0] = 127;
    wv[nw - 1] = -127;
    let m_out = if c.conv { c.w[0] } else { c.w[1] };
    let k: usize = if c.conv { nw / c.w[0] } else { c.w[0] };
    let ws: Vec<f32> = (0..m_out)
        .map(|i| 0.004 + 0.0007 * (i % 5) as f32)
        .collect();
    let x_scale = 0.02f32;
    // An output scale that spreads the sums over about ±70 steps (σ of Σ (x - zx)·w is about 90·73·√K in
    // integer units, times x_scale · w_scale ≈ 0.0054), so a few percent saturate and most do not.
    let y_scale = x_scale * 0.5 * (k as f32).sqrt();
    let mut m = Model::new();
    m.input("x", &c.x);
    let y_shape = if c.conv {
        let at = |key: &str| match c.attrs.iter().find(|(k, _)| *k == key) {
            Some((_, Attr::Ints(v))) => v.clone(),
            _ => vec![],
        };
        let (p, st, d) = (at("pads"), at("strides"), at("dilations"));
        let out = |i: usize| {
            (c.x[2 + i] as i64 + p[i] + p[2 + i] - d[i] * (c.w[2 + i] as i64 - 1) - 1) / st[i] + 1
        };
        vec![c.x[0], m_out, out(0) as usize, out(1) as usize]
    } else {
        let mut s = c.x.clone();
        *s.last_mut().expect("rank") = m_out;
        s
    };
    m.init("xs", &[], vec![x_scale]);
    m.init_ints("xz", &[], c.act, &[zx]);
    m.init_ints("w", &c.w, 3, &wv);
    m.init("ws", &[m_out], ws);
    m.init_ints("wz", &[m_out], 3, &vec![0; m_out]);
    m.init("ys", &[], vec![y_scale]);
    m.init_ints("yz", &[], c.act, &[zy]);
    m.node("QuantizeLinear", &["x", "xs", "xz"], &["xq"], vec![]);
    // The residual: r quantised with its own parameters (i8 where the activations are u8, and the reverse),
    // ready before the product (as a ResNet block's input or shortcut is).
    let (out_scale, out_zp, rs) = (y_scale * 1.5, zy, y_scale * 0.75);
    if c.residual {
        let (r_dt, rz) = if c.act == 2 { (3, -5) } else { (2, 131) };
        m.input("r", &y_shape);
        m.init("rs", &[], vec![rs]);
        m.init_ints("rz", &[], r_dt, &[rz]);
        m.node("QuantizeLinear", &["r", "rs", "rz"], &["rq"], vec![]);
    }
    if c.conv {
        let bias: Vec<i64> = (0..m_out as i64).map(|i| (i * 37 % 101) - 50).collect();
        m.init_ints("b", &[m_out], 6, &bias);
        m.node(
            "QLinearConv",
            &["xq", "xs", "xz", "w", "ws", "wz", "ys", "yz", "b"],
            &["yq"],
            c.attrs,
        );
    } else {
        m.node(
            "QLinearMatMul",
            &["xq", "xs", "xz", "w", "ws", "wz", "ys", "yz"],
            &["yq"],
            c.attrs,
        );
    }
    // The residual branch's tail: added to the product in QDQ form, Relu, quantised to the output's parameters.
    if c.residual {
        m.init("os", &[], vec![out_scale]);
        m.init_ints("oz", &[], c.act, &[out_zp]);
        m.node("DequantizeLinear", &["yq", "ys", "yz"], &["yd"], vec![]);
        m.node("DequantizeLinear", &["rq", "rs", "rz"], &["rd"], vec![]);
        m.node("Add", &["rd", "yd"], &["sum"], vec![]);
        m.node("Relu", &["sum"], &["act"], vec![]);
        m.node("QuantizeLinear", &["act", "os", "oz"], &["oq"], vec![]);
        m.node("DequantizeLinear", &["oq", "os", "oz"], &["y"], vec![]);
    } else {
        m.node("DequantizeLinear", &["yq", "ys", "yz"], &["y"], vec![]);
    }
    m.output("y", &y_shape);
    let bytes = m.bytes();
    let dir = scratch(&format!("q_{}", c.name));
    let path = dir.join("model.onnx");
    std::fs::write(&path, &bytes).expect("write");
    let g = bundlec::import::import_file(&path, &[]).expect("import");
    let n: usize = c.x.iter().product();
    // Inputs spanning the quantised range and beyond (saturation at both ends).
    let xv: Vec<f32> = rand_vec(n, 3)
        .iter()
        .map(|v| v * x_scale * (hi - lo) as f32 * 0.7)
        .collect();
    let mut inputs = vec![Tensor::f32(c.x.clone(), xv.clone())];
    let mut feeds = vec![xv];
    if c.residual {
        let len = y_shape.iter().product();
        let rv: Vec<f32> = rand_vec(len, 5).iter().map(|v| v * rs * 150.0).collect();
        inputs.push(Tensor::f32(y_shape.clone(), rv.clone()));
        feeds.push(rv);
    }
    let want = bundlec::ir::eval::run(&g, inputs, &mut |_, _| {}).expect("reference");
    assert_eq!(want[0].shape, y_shape, "{}: reference shape", c.name);
    let want = want[0].as_f32().expect("f32").to_vec();
    for (cpu, ok) in kernel_variants() {
        if !ok {
            eprintln!(
                "SKIPPED: {} with --cpu {cpu} (this CPU lacks its features)",
                c.name
            );
            continue;
        }
        let mut o = bundlec::Options::new(&format!("q_{}_{}", c.name, cpu.replace('-', "_")));
        o.cpu = cpu.to_string();
        let comp = compile_with(&bytes, o);
        let got = run_c(&comp, &feeds, &[want.len()]);
        let diff = got[0]
            .iter()
            .zip(&want)
            .filter(|(a, b)| a.to_bits() != b.to_bits())
            .count();
        assert_eq!(
            diff,
            0,
            "{} --cpu {cpu}: {diff} of {} outputs differ",
            c.name,
            want.len()
        );
        if c.transposed && cpu == "icelake" {
            let has = |s: &[u8]| comp.bundle.object.windows(s.len()).any(|w| w == s);
            assert!(
                has(b"_qconv_t") && !has(b"_qcompact"),
                "{} --cpu {cpu}: not the transposed implicit convolution",
                c.name
            );
        }
        if c.residual && matches!(cpu, "cascadelake" | "icelake") {
            // Where the implicit convolution writes its output itself on VNNI, no QAdd kernel is left.
            let has = |s: &[u8]| comp.bundle.object.windows(s.len()).any(|w| w == s);
            assert!(
                has(b"_qconv_vnni") && !has(b"_qadd"),
                "{} --cpu {cpu}: the residual add is not fused",
                c.name
            );
        }
        let top = (hi - out_zp) as f32 * out_scale;
        let sat = want
            .iter()
            .filter(|&&v| match c.residual {
                true => v == top,
                false => v == (lo - zy) as f32 * y_scale || v == (hi - zy) as f32 * y_scale,
            })
            .count();
        assert!(
            sat > 0 && sat * 5 < want.len(),
            "{}: {sat} of {} outputs saturated (the case should saturate a few)",
            c.name,
            want.len()
        );
    }
}

#[allow(clippy::too_many_arguments)] // one argument per conv parameter keeps the case table readable
fn conv(
    name: &'static str,
    x: [usize; 4],
    w: [usize; 4],
    pads: [i64; 4],
    strides: [i64; 2],
    dil: [i64; 2],
    group: i64,
    act: i32,
) {
    run_case(QCase {
        name,
        x: x.to_vec(),
        w: w.to_vec(),
        attrs: vec![
            ("pads", ints(&pads)),
            ("strides", ints(&strides)),
            ("dilations", ints(&dil)),
            ("group", Attr::Int(group)),
        ],
        act,
        conv: true,
        residual: false,
        transposed: false,
    });
}

#[test]
fn qconv_shapes() {
    conv(
        "c3x3",
        [1, 8, 12, 12],
        [16, 8, 3, 3],
        [1, 1, 1, 1],
        [1, 1],
        [1, 1],
        1,
        2,
    );
    conv(
        "odd_k_tails",
        [1, 3, 7, 9],
        [5, 3, 3, 3],
        [0, 2, 1, 0],
        [2, 1],
        [1, 2],
        1,
        2,
    );
    conv(
        "i8_groups",
        [2, 6, 9, 6],
        [9, 2, 3, 2],
        [1, 0, 0, 1],
        [1, 2],
        [1, 1],
        3,
        3,
    );
    conv(
        "depthwise_s2",
        [1, 16, 11, 11],
        [16, 1, 3, 3],
        [1, 1, 1, 1],
        [2, 2],
        [1, 1],
        16,
        2,
    );
    // A stride-2 stem: the byte im2col's 16-wide stride-2 copies, their scalar tails and clipped columns.
    conv(
        "stem_s2",
        [1, 3, 21, 75],
        [8, 3, 3, 3],
        [1, 1, 0, 1],
        [2, 2],
        [1, 1],
        1,
        2,
    );
    conv(
        "pointwise",
        [1, 24, 5, 7],
        [13, 24, 1, 1],
        [0, 0, 0, 0],
        [1, 1],
        [1, 1],
        1,
        2,
    );
    conv(
        "k_blocks",
        [1, 256, 4, 5],
        [6, 256, 3, 3],
        [1, 1, 1, 1],
        [1, 1],
        [1, 1],
        1,
        2,
    );
    // Row tiles of the AMX kernel: 50 output channels (a full 32-row tile and an 18-row tail over both A
    // tiles); 70 over K = 1100 (two K blocks accumulated, two 64-row units, a 6-row tail).
    conv(
        "rows_50",
        [1, 40, 6, 7],
        [50, 40, 3, 3],
        [1, 1, 1, 1],
        [1, 1],
        [1, 1],
        1,
        2,
    );
    // The implicit convolution on AMX (`kernel/qconv.rs`; im2col + GEMM elsewhere): i8 input flipped, 70
    // channels (two 64-channel blocks, a last quad of two), 37 output channels (a 32-row block and a 5-row
    // one), batch 2, rows of 21 (a 16-pixel block and a masked tail); then u8, a 3x5 window with asymmetric
    // pads, fewer than 32 output channels, rows of 40.
    conv(
        "amx_implicit_i8_b2",
        [2, 70, 9, 21],
        [37, 70, 3, 3],
        [1, 1, 1, 1],
        [1, 1],
        [1, 1],
        1,
        3,
    );
    conv(
        "amx_implicit_3x5",
        [1, 36, 11, 40],
        [20, 36, 3, 5],
        [0, 2, 1, 1],
        [1, 1],
        [1, 1],
        1,
        2,
    );
    // Stride 2 on AMX: phase planes (3x3 with pads; 1x1 with none, i8, batch 2; asymmetric pads over odd
    // sides).
    conv(
        "amx_implicit_s2",
        [1, 48, 13, 22],
        [40, 48, 3, 3],
        [1, 1, 1, 1],
        [2, 2],
        [1, 1],
        1,
        2,
    );
    conv(
        "amx_implicit_s2_1x1_i8",
        [2, 64, 14, 14],
        [33, 64, 1, 1],
        [0, 0, 0, 0],
        [2, 2],
        [1, 1],
        1,
        3,
    );
    conv(
        "amx_implicit_s2_odd",
        [1, 36, 9, 11],
        [17, 36, 3, 3],
        [0, 1, 1, 0],
        [2, 2],
        [1, 1],
        1,
        2,
    );
    // A stem: 3 channels (one quad per tap on VNNI), 7x7 at stride 2 over odd sides; and 8 channels, 3x3 at
    // stride 2, i8.
    conv(
        "stem_7x7_s2",
        [1, 3, 23, 21],
        [20, 3, 7, 7],
        [3, 3, 3, 3],
        [2, 2],
        [1, 1],
        1,
        2,
    );
    conv(
        "stem_c8_s2_i8",
        [1, 8, 16, 18],
        [13, 8, 3, 3],
        [1, 1, 1, 1],
        [2, 2],
        [1, 1],
        1,
        3,
    );
    // A 1x1 convolution written straight to the output: 63 positions, the last block overlapping the first.
    conv(
        "amx_implicit_1x1_direct",
        [1, 40, 7, 9],
        [45, 40, 1, 1],
        [0, 0, 0, 0],
        [1, 1],
        [1, 1],
        1,
        2,
    );
    conv(
        "rows_70_k1100",
        [1, 1100, 3, 5],
        [70, 1100, 1, 1],
        [0, 0, 0, 0],
        [1, 1],
        [1, 1],
        1,
        3,
    );
    // Direct depthwise: 32-wide row-kernel chunks (AVX-512), 8-wide interior chunks at stride 1 and 2, tails,
    // dilation, i8 activations, batch 2.
    for (name, x, w, pads, st, dil, act) in [
        (
            "dw_s1_wide",
            [1, 24, 20, 37],
            [24, 1, 3, 3],
            [1, 1, 1, 1],
            [1, 1],
            [1, 1],
            2,
        ),
        (
            "dw_s2_wide",
            [2, 8, 30, 45],
            [8, 1, 3, 3],
            [1, 0, 1, 1],
            [2, 2],
            [1, 1],
            3,
        ),
        (
            "dw_dil_5x5",
            [1, 4, 19, 40],
            [4, 1, 5, 5],
            [4, 4, 4, 4],
            [1, 1],
            [2, 2],
            2,
        ),
        (
            "dw_s2_u8",
            [1, 16, 21, 50],
            [16, 1, 3, 3],
            [1, 1, 1, 1],
            [2, 2],
            [1, 1],
            2,
        ),
        (
            "dw_i8_dil_rows",
            [1, 5, 9, 70],
            [5, 1, 3, 3],
            [2, 2, 2, 2],
            [1, 1],
            [2, 2],
            3,
        ),
        // MobileNetV2's narrow planes (one masked step per row), stride 2 over 33 outputs (a full step and a
        // one-output tail), a 5x5 stride-2 window with uneven pads, i8 at stride 2, and planes too large for
        // one stack plane (the row-kernel path in bands of output rows: 123 + 7 rows, and 5x5 stride 2 over i8).
        (
            "dw_7x7",
            [2, 20, 7, 7],
            [20, 1, 3, 3],
            [1, 1, 1, 1],
            [1, 1],
            [1, 1],
            2,
        ),
        (
            "dw_14x14",
            [1, 17, 14, 14],
            [17, 1, 3, 3],
            [1, 1, 1, 1],
            [1, 1],
            [1, 1],
            3,
        ),
        (
            "dw_s2_33",
            [1, 3, 9, 66],
            [3, 1, 3, 3],
            [1, 1, 1, 1],
            [2, 2],
            [1, 1],
            2,
        ),
        (
            "dw_5x5_s2",
            [1, 6, 23, 29],
            [6, 1, 5, 5],
            [2, 1, 1, 2],
            [2, 2],
            [1, 1],
            2,
        ),
        (
            "dw_i8_s2",
            [1, 4, 16, 64],
            [4, 1, 3, 3],
            [0, 1, 1, 0],
            [2, 2],
            [1, 1],
            3,
        ),
        // The VNNI row kernel's shapes: EfficientNet's 5x5 (two quads a row), 9x9 (27 quads: beyond the 16 in
        // registers), strides 3 and 4 (and 3 with dilation 2), i8 inputs through a 7x7 with uneven pads.
        (
            "dw_5x5_s1",
            [1, 9, 14, 14],
            [9, 1, 5, 5],
            [2, 2, 2, 2],
            [1, 1],
            [1, 1],
            2,
        ),
        (
            "dw_9x9",
            [1, 3, 20, 41],
            [3, 1, 9, 9],
            [4, 4, 4, 4],
            [1, 1],
            [1, 1],
            3,
        ),
        (
            "dw_s3",
            [1, 4, 25, 70],
            [4, 1, 3, 3],
            [1, 1, 1, 1],
            [3, 3],
            [1, 1],
            2,
        ),
        (
            "dw_s4_5x5",
            [2, 3, 33, 90],
            [3, 1, 5, 5],
            [2, 2, 1, 1],
            [4, 4],
            [1, 1],
            2,
        ),
        (
            "dw_s3_dil2",
            [1, 2, 22, 61],
            [2, 1, 3, 3],
            [2, 2, 2, 2],
            [3, 2],
            [2, 2],
            3,
        ),
        (
            "dw_i8_7x7",
            [1, 5, 17, 35],
            [5, 1, 7, 7],
            [3, 1, 2, 3],
            [1, 1],
            [1, 1],
            3,
        ),
        (
            "dw_big_s2_5x5",
            [1, 3, 301, 263],
            [3, 1, 5, 5],
            [2, 2, 2, 2],
            [2, 2],
            [1, 1],
            3,
        ),
        (
            "dw_big_plane",
            [1, 2, 130, 520],
            [2, 1, 3, 3],
            [1, 1, 1, 1],
            [1, 1],
            [1, 1],
            2,
        ),
    ] {
        conv(name, x, w, pads, st, dil, x[1] as i64, act);
    }
}

#[test]
fn qmatmul_shapes() {
    for (name, x, w, act) in [
        ("mm_tails", vec![3, 5, 37], vec![37, 11], 2),
        ("mm_i8", vec![4, 64], vec![64, 32], 3),
        ("mm_deep", vec![2, 2100], vec![2100, 9], 2),
        // Rows past one 32-row AMX tile (75 = 64 + 11: two units, a tail of 11), K past one 64-byte tile row.
        ("mm_rows", vec![2, 7, 130], vec![130, 75], 3),
        // One row: the VNNI GEMV (two units of 128 rows, a masked last block of 4; K padded from 2050 to 2064),
        // and an i8 row whose K (70) and rows (21) both leave tails.
        ("mv_wide", vec![1, 2050], vec![2050, 260], 2),
        ("mv_i8", vec![1, 1, 70], vec![70, 21], 3),
    ] {
        run_case(QCase {
            name,
            x,
            w,
            attrs: vec![],
            act,
            conv: false,
            residual: false,
            transposed: false,
        });
    }
}

/// A residual add after a 1x1 convolution (ResNet's bottleneck end): fused into the implicit convolution's
/// epilogue on VNNI (checked by the absence of a QAdd kernel there), a QAdd kernel elsewhere; u8 activations
/// with an i8 residual over 63 positions (the last block overlapping the one before), i8 with a u8 residual
/// and a 12-row block tail over two batch entries.
#[test]
fn qconv_residual_add() {
    for (name, x, w, act) in [
        ("res_u8", [1, 40, 7, 9], [45, 40, 1, 1], 2),
        ("res_i8_b2", [2, 64, 6, 8], [30, 64, 1, 1], 3),
    ] {
        run_case(QCase {
            name,
            x: x.to_vec(),
            w: w.to_vec(),
            attrs: vec![
                ("pads", ints(&[0, 0, 0, 0])),
                ("strides", ints(&[1, 1])),
                ("dilations", ints(&[1, 1])),
                ("group", Attr::Int(1)),
            ],
            act,
            conv: true,
            residual: true,
            transposed: false,
        });
    }
}

/// The transposed implicit convolution (output channels in the lanes) on small planes, where the position
/// blocks would compute whole padded rows: 3x3 on 7x7 (tiles of 4 and 3 positions), a 1x1 stride-2 i8
/// convolution from 14x14 with 30 input channels (a partial last quad, phase planes) and two channel blocks,
/// 3x3 on 14x14 over a batch of 2 (tiles 5, 5, 4), and 10-wide rows (two tiles of 5).
#[test]
fn qconv_transposed_tiles() {
    for (name, x, w, pad, stride, act) in [
        ("t_7x7", [1, 40, 7, 7], [64, 40, 3, 3], 1, 1, 2),
        ("t_1x1_s2_i8", [1, 30, 14, 14], [128, 30, 1, 1], 0, 2, 3),
        ("t_14x14_b2", [2, 16, 14, 14], [64, 16, 3, 3], 1, 1, 2),
        ("t_5x10", [1, 12, 5, 10], [64, 12, 3, 3], 1, 1, 3),
    ] {
        run_case(QCase {
            name,
            x: x.to_vec(),
            w: w.to_vec(),
            attrs: vec![
                ("pads", ints(&[pad; 4])),
                ("strides", ints(&[stride; 2])),
                ("dilations", ints(&[1, 1])),
                ("group", Attr::Int(1)),
            ],
            act,
            conv: true,
            residual: false,
            transposed: true,
        });
    }
}

/// `DequantizeLinear → MaxPool → QuantizeLinear` of equal parameters runs on the integers and equals the f32
/// chain bit for bit: ResNet's 3x3 stride-2 pad-1 window (vector chunks at stride 2), stride 1 with padding
/// (chunks at stride 1, an overlapping last chunk), a dilated 2x2 at stride 3 (scalar), a plane narrower than one
/// chunk; u8 and i8.
#[test]
fn qmaxpool_equals_the_f32_chain() {
    for (name, shape, k, st, pads, dil, signed) in [
        ("mp_3s2", [1usize, 3, 20, 41], 3i64, 2i64, 1i64, 1i64, false),
        ("mp_3s1_i8", [2, 2, 9, 50], 3, 1, 1, 1, true),
        ("mp_2s3_dil", [1, 2, 11, 29], 2, 3, 0, 2, false),
        ("mp_narrow_i8", [1, 4, 6, 7], 2, 2, 1, 1, true),
    ] {
        let dim = |x: usize| ((x as i64 + 2 * pads - dil * (k - 1) - 1) / st + 1) as usize;
        let out = [shape[0], shape[1], dim(shape[2]), dim(shape[3])];
        let (zt, z) = if signed { (3, -9) } else { (2, 131) };
        let mut m = Model::new();
        m.input("x", &shape).output("y", &out);
        m.init("s", &[], vec![0.05]);
        m.init_ints("z", &[], zt, &[z]);
        let attrs = vec![
            ("kernel_shape", ints(&[k, k])),
            ("strides", ints(&[st, st])),
            ("pads", ints(&[pads, pads, pads, pads])),
            ("dilations", ints(&[dil, dil])),
        ];
        m.node("QuantizeLinear", &["x", "s", "z"], &["xq"], vec![])
            .node("DequantizeLinear", &["xq", "s", "z"], &["xd"], vec![])
            .node("MaxPool", &["xd"], &["p"], attrs)
            .node("QuantizeLinear", &["p", "s", "z"], &["yq"], vec![])
            .node("DequantizeLinear", &["yq", "s", "z"], &["y"], vec![]);
        let bytes = m.bytes();
        let n: usize = shape.iter().product();
        let xv: Vec<f32> = rand_vec(n, 5).iter().map(|v| v * 9.0).collect();
        bitwise_in_every_variant(name, &bytes, &[(shape.to_vec(), xv)], Some(1));
    }
}

/// QLinearGlobalAveragePool (what `fold_qdq` also makes of DequantizeLinear → GlobalAveragePool →
/// QuantizeLinear) against the reference `qgap_one`, bit for bit: ResNet's 7x7 planes (three 16-byte steps and a
/// tail), planes of 3 (tail only) and 40x40 (1600: 100 steps); u8 and i8, saturation at both ends.
#[test]
fn qgap_matches_the_reference() {
    for (name, shape, signed) in [
        ("gap_7x7", [2usize, 5, 7, 7], false),
        ("gap_3_i8", [1, 9, 1, 3], true),
        ("gap_40_i8", [1, 3, 40, 40], true),
    ] {
        let out = [shape[0], shape[1], 1, 1];
        let (zt, zx, zy) = if signed { (3, -5, 17) } else { (2, 120, 3) };
        let mut m = Model::new();
        m.input("x", &shape).output("y", &out);
        m.init("xs", &[], vec![0.05]).init("ys", &[], vec![0.011]);
        m.init_ints("xz", &[], zt, &[zx]);
        m.init_ints("yz", &[], zt, &[zy]);
        m.node("QuantizeLinear", &["x", "xs", "xz"], &["xq"], vec![])
            .node(
                "QLinearGlobalAveragePool",
                &["xq", "xs", "xz", "ys", "yz"],
                &["yq"],
                vec![("channels_last", Attr::Int(0))],
            )
            .node("DequantizeLinear", &["yq", "ys", "yz"], &["y"], vec![]);
        let bytes = m.bytes();
        let n: usize = shape.iter().product();
        // Planes biased up or down so some averages saturate.
        let plane = shape[2] * shape[3];
        let xv: Vec<f32> = rand_vec(n, 9)
            .iter()
            .enumerate()
            .map(|(i, v)| v * 4.0 + [-5.0, 0.0, 5.0][(i / plane) % 3])
            .collect();
        let want = bitwise_in_every_variant(name, &bytes, &[(shape.to_vec(), xv)], Some(1));
        let lo = if signed { -128 } else { 0 };
        let hi = if signed { 127 } else { 255 };
        let ends = [(lo - zy) as f32 * 0.011, (hi - zy) as f32 * 0.011];
        assert!(
            ends.iter().all(|e| want.contains(e)) || shape[1] < 9,
            "{name}: saturates at both ends"
        );
    }
}

/// `DequantizeLinear ×2 → Add → [Relu] → QuantizeLinear` (a quantised residual) fuses into one QAdd whose output
/// equals the unfused f32 chain bit for bit, over an odd length (vector body and scalar tail) and saturation at
/// both ends: u8 and i8 outputs, with a Relu (a clamp inside the dtype's range) and without (saturation only),
/// dividing by the output scale (0.04: multiplying by its reciprocal differs for 1620 operand pairs) and
/// multiplying by a verified reciprocal (`qadd_reciprocal`: 0.03125, a power of two).
#[test]
fn qadd_equals_the_f32_chain() {
    let shape = [1usize, 5, 7, 3];
    let n: usize = shape.iter().product();
    for (name, relu, yt, zy, sy) in [
        ("qadd", true, 2, 30, 0.04),
        ("qadd_sat_u8", false, 2, 30, 0.04),
        ("qadd_relu_i8", true, 3, -60, 0.04),
        ("qadd_sat_i8", false, 3, -60, 0.04),
        ("qadd_recip", true, 2, 30, 0.03125),
        ("qadd_recip_i8", false, 3, -10, 0.03125),
    ] {
        let mut m = Model::new();
        m.input("a", &shape).input("b", &shape).output("y", &shape);
        m.init("sa", &[], vec![0.03]);
        m.init_ints("za", &[], 2, &[120]);
        m.init("sb", &[], vec![0.05]);
        m.init_ints("zb", &[], 2, &[7]);
        m.init("sy", &[], vec![sy]);
        m.init_ints("zy", &[], yt, &[zy]);
        m.node("QuantizeLinear", &["a", "sa", "za"], &["aq"], vec![])
            .node("QuantizeLinear", &["b", "sb", "zb"], &["bq"], vec![])
            .node("DequantizeLinear", &["aq", "sa", "za"], &["ad"], vec![])
            .node("DequantizeLinear", &["bq", "sb", "zb"], &["bd"], vec![])
            .node("Add", &["ad", "bd"], &["s"], vec![]);
        let q = if relu {
            m.node("Relu", &["s"], &["r"], vec![]);
            "r"
        } else {
            "s"
        };
        m.node("QuantizeLinear", &[q, "sy", "zy"], &["yq"], vec![])
            .node("DequantizeLinear", &["yq", "sy", "zy"], &["y"], vec![]);
        let bytes = m.bytes();
        let xa: Vec<f32> = rand_vec(n, 11).iter().map(|v| v * 6.0).collect();
        let xb: Vec<f32> = rand_vec(n, 12).iter().map(|v| v * 9.0).collect();
        let ins = [(shape.to_vec(), xa), (shape.to_vec(), xb)];
        let want = bitwise_in_every_variant(name, &bytes, &ins, Some(1));
        let (lo, hi) = if yt == 2 { (0, 255) } else { (-128, 127) };
        let lo = if relu { zy } else { lo };
        for end in [lo, hi] {
            let v = (end - zy) as f32 * sy;
            assert!(want.contains(&v), "{name}: saturates at {end}");
        }
    }
}

/// Writes `bytes` as model `name`, runs the graph interpreter on `inputs` (shape, values) for the reference,
/// then compiles and runs the model with every kernel variant this CPU runs (`SKIPPED` for the others) and
/// asserts every output bit-equal to it and, with `int8_ops`, that many integer ops in the bundle's report.
/// Returns the reference output.
fn bitwise_in_every_variant(
    name: &str,
    bytes: &[u8],
    inputs: &[(Vec<usize>, Vec<f32>)],
    int8_ops: Option<usize>,
) -> Vec<f32> {
    let path = scratch(&format!("q_{name}")).join("model.onnx");
    std::fs::write(&path, bytes).expect("write");
    let g = bundlec::import::import_file(&path, &[]).expect("import");
    let tensors = inputs
        .iter()
        .map(|(shape, v)| Tensor::f32(shape.clone(), v.clone()))
        .collect();
    let want = bundlec::ir::eval::run(&g, tensors, &mut |_, _| {}).expect("reference");
    let want = want[0].as_f32().expect("f32").to_vec();
    let values: Vec<Vec<f32>> = inputs.iter().map(|(_, v)| v.clone()).collect();
    for (cpu, ok) in kernel_variants() {
        if !ok {
            eprintln!("SKIPPED: {name} with --cpu {cpu} (this CPU lacks its features)");
            continue;
        }
        let mut o = bundlec::Options::new(&format!("q_{name}_{}", cpu.replace('-', "_")));
        o.cpu = cpu.to_string();
        let comp = compile_with(bytes, o);
        if let Some(k) = int8_ops {
            assert_eq!(comp.bundle.report.int8.len(), k, "{name}: integer ops");
        }
        let got = run_c(&comp, &values, &[want.len()]);
        let diff = got[0]
            .iter()
            .zip(&want)
            .filter(|(a, b)| a.to_bits() != b.to_bits())
            .count();
        assert_eq!(
            diff,
            0,
            "{name} --cpu {cpu}: {diff} of {} outputs differ",
            want.len()
        );
    }
    want
}
