//! The int8 kernels against the reference semantics, exactly: each case is `QuantizeLinear → QLinearConv /
//! QLinearMatMul → DequantizeLinear` (f32 in and out, so the C harness can drive it), compiled once per kernel
//! variant (`harness::kernel_variants`, with `SKIPPED` lines for variants this CPU cannot run) and compared
//! bit for bit with the graph interpreter (`ir::eval`) running the imported, unoptimised graph. Shapes cover
//! odd K (a zero-padded last pair), K above one packed block (2048), row and column tails of the 4 x 8 tile,
//! padding on every side with the zero point, strides, dilations, groups, depthwise, 1x1 direct convolutions,
//! i8 and u8 activations, and saturation at both ends.

use bundlec_tests::harness::{bitwise_in_every_variant, Compiled};
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
    let n: usize = c.x.iter().product();
    // Inputs spanning the quantised range and beyond (saturation at both ends).
    let xv: Vec<f32> = rand_vec(n, 3)
        .iter()
        .map(|v| v * x_scale * (hi - lo) as f32 * 0.7)
        .collect();
    let mut inputs = vec![(c.x.clone(), xv)];
    if c.residual {
        let len = y_shape.iter().product();
        let rv: Vec<f32> = rand_vec(len, 5).iter().map(|v| v * rs * 150.0).collect();
        inputs.push((y_shape.clone(), rv));
    }
    let check = |cpu: &str, comp: &Compiled| {
        let has = |s: &[u8]| comp.bundle.object.windows(s.len()).any(|w| w == s);
        if c.transposed && cpu == "icelake" {
            assert!(
                has(b"_qconv_t") && !has(b"_qcompact"),
                "{} --cpu {cpu}: not the transposed implicit convolution",
                c.name
            );
        }
        if c.residual && matches!(cpu, "cascadelake" | "icelake") {
            // Where the implicit convolution writes its output itself on VNNI, no QAdd kernel is left.
            assert!(
                has(b"_qconv_vnni") && !has(b"_qadd"),
                "{} --cpu {cpu}: the residual add is not fused",
                c.name
            );
        }
    };
    let (shape, want) = bitwise_in_every_variant(c.name, &bytes, &inputs, check);
    assert_eq!(shape, y_shape, "{}: reference shape", c.name);
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

/// A convolution case, neither with a residual add nor asserting the transposed kernel.
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
) -> QCase {
    QCase {
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
    }
}

#[test]
fn qconv_shapes() {
    run_case(conv(
        "c3x3",
        [1, 8, 12, 12],
        [16, 8, 3, 3],
        [1, 1, 1, 1],
        [1, 1],
        [1, 1],
        1,
        2,
    ));
    run_case(conv(
        "odd_k_tails",
        [1, 3, 7, 9],
        [5, 3, 3, 3],
        [0, 2, 1, 0],
        [2, 1],
        [1, 2],
        1,
        2,
    ));
    run_case(conv(
        "i8_groups",
        [2, 6, 9, 6],
        [9, 2, 3, 2],
        [1, 0, 0, 1],
        [1, 2],
        [1, 1],
        3,
        3,
    ));
    run_case(conv(
        "depthwise_s2",
        [1, 16, 11, 11],
        [16, 1, 3, 3],
        [1, 1, 1, 1],
        [2, 2],
        [1, 1],
        16,
        2,
    ));
    // A stride-2 stem: the byte im2col's 16-wide stride-2 copies, their scalar tails and clipped columns.
    run_case(conv(
        "stem_s2",
        [1, 3, 21, 75],
        [8, 3, 3, 3],
        [1, 1, 0, 1],
        [2, 2],
        [1, 1],
        1,
        2,
    ));
    run_case(conv(
        "pointwise",
        [1, 24, 5, 7],
        [13, 24, 1, 1],
        [0, 0, 0, 0],
        [1, 1],
        [1, 1],
        1,
        2,
    ));
    run_case(conv(
        "k_blocks",
        [1, 256, 4, 5],
        [6, 256, 3, 3],
        [1, 1, 1, 1],
        [1, 1],
        [1, 1],
        1,
        2,
    ));
    // Row tiles of the AMX kernel: 50 output channels (a full 32-row tile and an 18-row tail over both A
    // tiles); 70 over K = 1100 (two K blocks accumulated, two 64-row units, a 6-row tail).
    run_case(conv(
        "rows_50",
        [1, 40, 6, 7],
        [50, 40, 3, 3],
        [1, 1, 1, 1],
        [1, 1],
        [1, 1],
        1,
        2,
    ));
    // The implicit convolution on AMX (`kernel/qconv.rs`; im2col + GEMM elsewhere): i8 input flipped, 70
    // channels (two 64-channel blocks, a last quad of two), 37 output channels (a 32-row block and a 5-row
    // one), batch 2, rows of 21 (a 16-pixel block and a masked tail); then u8, a 3x5 window with asymmetric
    // pads, fewer than 32 output channels, rows of 40.
    run_case(conv(
        "amx_implicit_i8_b2",
        [2, 70, 9, 21],
        [37, 70, 3, 3],
        [1, 1, 1, 1],
        [1, 1],
        [1, 1],
        1,
        3,
    ));
    run_case(conv(
        "amx_implicit_3x5",
        [1, 36, 11, 40],
        [20, 36, 3, 5],
        [0, 2, 1, 1],
        [1, 1],
        [1, 1],
        1,
        2,
    ));
    // Stride 2 on AMX: phase planes (3x3 with pads; 1x1 with none, i8, batch 2; asymmetric pads over odd
    // sides).
    run_case(conv(
        "amx_implicit_s2",
        [1, 48, 13, 22],
        [40, 48, 3, 3],
        [1, 1, 1, 1],
        [2, 2],
        [1, 1],
        1,
        2,
    ));
    run_case(conv(
        "amx_implicit_s2_1x1_i8",
        [2, 64, 14, 14],
        [33, 64, 1, 1],
        [0, 0, 0, 0],
        [2, 2],
        [1, 1],
        1,
        3,
    ));
    run_case(conv(
        "amx_implicit_s2_odd",
        [1, 36, 9, 11],
        [17, 36, 3, 3],
        [0, 1, 1, 0],
        [2, 2],
        [1, 1],
        1,
        2,
    ));
    // A stem: 3 channels (one quad per tap on VNNI), 7x7 at stride 2 over odd sides; and 8 channels, 3x3 at
    // stride 2, i8.
    run_case(conv(
        "stem_7x7_s2",
        [1, 3, 23, 21],
        [20, 3, 7, 7],
        [3, 3, 3, 3],
        [2, 2],
        [1, 1],
        1,
        2,
    ));
    run_case(conv(
        "stem_c8_s2_i8",
        [1, 8, 16, 18],
        [13, 8, 3, 3],
        [1, 1, 1, 1],
        [2, 2],
        [1, 1],
        1,
        3,
    ));
    // A 1x1 convolution written straight to the output: 63 positions, the last block overlapping the first.
    run_case(conv(
        "amx_implicit_1x1_direct",
        [1, 40, 7, 9],
        [45, 40, 1, 1],
        [0, 0, 0, 0],
        [1, 1],
        [1, 1],
        1,
        2,
    ));
    run_case(conv(
        "rows_70_k1100",
        [1, 1100, 3, 5],
        [70, 1100, 1, 1],
        [0, 0, 0, 0],
        [1, 1],
        [1, 1],
        1,
        3,
    ));
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
            residual: true,
            ..conv(name, x, w, [0; 4], [1, 1], [1, 1], 1, act)
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
            transposed: true,
            ..conv(name, x, w, [pad; 4], [stride; 2], [1, 1], 1, act)
        });
    }
}
