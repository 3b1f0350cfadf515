//! Per-op tests of the generated code against the reference semantics (`bundlec::ir::ops::eval`, the single
//! source of truth) over several shapes: sizes that are not multiples of the vector width or the GEMM tile,
//! every padding side, strides, dilations, groups and broadcasting patterns. Each case is a single-node model
//! compiled, linked with `cc` and run once per kernel variant (`KERNEL_VARIANTS`: the Cranelift kernels of
//! `--cpu generic`, and the AVX2 and AVX-512 machine-code GEMM micro-kernels of `x86-64-v3` / `x86-64-v4`); a
//! variant this CPU cannot run is skipped with a `SKIPPED` line, never silently.

use bundlec::ir::{ops, Tensor};
use bundlec_tests::harness::{compile_with, kernel_variants, run_c};
use bundlec_tests::onnx::{Attr, Model};
use bundlec_tests::{max_scaled_error, rand_vec};

/// Builds a single-node model with float inputs (runtime) and initializers, runs it, and compares with `op`.
/// Returns each variant run and the constant bytes of its bundle.
fn case(
    name: &str,
    op_type: &str,
    attrs: Vec<(&str, Attr)>,
    runtime: &[(&str, Vec<usize>)],
    inits: &[(&str, Vec<usize>)],
    reference: &bundlec::ir::Op,
    out_shape: &[usize],
) -> Vec<(&'static str, usize)> {
    let mut m = Model::new();
    let mut all = Vec::new();
    let mut rt_vals = Vec::new();
    for (i, (n, s)) in runtime.iter().enumerate() {
        m.input(n, s);
        let v = rand_vec(s.iter().product(), 1000 + i as u64);
        all.push(Tensor::f32(s.clone(), v.clone()));
        rt_vals.push(v);
    }
    for (i, (n, s)) in inits.iter().enumerate() {
        let v = rand_vec(s.iter().product(), 2000 + i as u64);
        m.init(n, s, v.clone());
        all.push(Tensor::f32(s.clone(), v));
    }
    m.output("y", out_shape);
    let names: Vec<&str> = runtime.iter().chain(inits).map(|(n, _)| *n).collect();
    m.node(op_type, &names, &["y"], attrs);
    let bytes = m.bytes();
    let refs: Vec<&Tensor> = all.iter().collect();
    let want = ops::eval(reference, &refs).expect("reference");
    assert_eq!(want[0].shape, out_shape, "{name}: reference shape");
    let mut ran = Vec::new();
    for (cpu, runnable) in kernel_variants() {
        if !runnable {
            eprintln!("SKIPPED: {name} with --cpu {cpu} (this CPU lacks its features)");
            continue;
        }
        let mut o = bundlec::Options::new(&format!("{name}_{}", cpu.replace('-', "_")));
        o.cpu = cpu.to_string();
        let c = compile_with(&bytes, o);
        // Cases that must reach a particular AVX-512 kernel, found by its symbol `NAME__kI_<tag>` in the object.
        let required = [
            ("conv_wino4", "_wino4_in", "F(4x4, 3x3)"),
            (
                "conv_dwc16",
                "_dwc16",
                "the channel-blocked depthwise kernel",
            ),
            ("conv_direct", "_direct", "the direct convolution kernel"),
            ("un_sigmoid", "_vmath", "the AVX-512 vector math map"),
            ("un_tanh", "_vmath", "the AVX-512 vector math map"),
            ("un_exp", "_vmath", "the AVX-512 vector math map"),
            ("un_erf", "_vmath", "the AVX-512 vector math map"),
            ("un_gelu", "_vmath", "the AVX-512 vector math map"),
            (
                "maxpool0",
                "_maxpool",
                "the separable 3x3 stride-2 max pooling",
            ),
            (
                "maxpool4",
                "_maxpool",
                "the separable 3x3 stride-2 max pooling",
            ),
        ];
        for (prefix, tag, what) in required {
            // The vector math maps have an AVX2 variant too.
            let both = tag == "_vmath" && cpu == "x86-64-v3";
            if name.starts_with(prefix) && (cpu == "x86-64-v4" || both) {
                let tag = tag.as_bytes();
                let found = c.bundle.object.windows(tag.len()).any(|w| w == tag);
                assert!(found, "{name}: {what} was not chosen");
            }
        }
        let got = run_c(&c, &rt_vals, &[out_shape.iter().product()]);
        let e = max_scaled_error(&got[0], want[0].as_f32().expect("f32"));
        assert!(e <= 1e-4, "{name} --cpu {cpu}: max scaled error {e:e}");
        ran.push((cpu, c.bundle.report.sizes[0]));
    }
    ran
}

fn ints(v: &[i64]) -> Attr {
    Attr::Ints(v.to_vec())
}

/// (name, x, w, pads t l b r, strides, dilations, group)
type ConvCase = (
    &'static str,
    [usize; 4],
    [usize; 4],
    [usize; 4],
    [usize; 2],
    [usize; 2],
    usize,
);

#[test]
fn conv_shapes_pads_strides_groups() {
    use bundlec::ir::{ConvAttrs, Epilogue, Op};
    // (name, x, w, pads t l b r, strides, dilations, group)
    let cases: &[ConvCase] = &[
        (
            "c1",
            [1, 3, 5, 7],
            [5, 3, 3, 3],
            [1, 1, 1, 1],
            [1, 1],
            [1, 1],
            1,
        ),
        (
            "c2",
            [2, 2, 9, 6],
            [9, 2, 3, 2],
            [0, 2, 1, 0],
            [2, 1],
            [1, 2],
            1,
        ),
        (
            "c3",
            [1, 6, 8, 8],
            [6, 1, 3, 3],
            [1, 1, 1, 1],
            [2, 2],
            [1, 1],
            6,
        ),
        // Wide rows through im2col's AVX-512 strided row copy: stride 2 (two-vector steps and a masked tail of
        // 6), stride 1 (pair, single, tail of 2), and a first-layer 7x7 at stride 2 with pads 3.
        (
            "im2col_s2",
            [1, 3, 9, 75],
            [4, 3, 3, 3],
            [1, 1, 1, 1],
            [2, 2],
            [1, 1],
            1,
        ),
        (
            "im2col_s1",
            [1, 2, 5, 50],
            [3, 2, 3, 3],
            [1, 1, 1, 1],
            [1, 1],
            [1, 1],
            1,
        ),
        (
            "im2col_7x7",
            [1, 3, 20, 37],
            [8, 3, 7, 7],
            [3, 3, 3, 3],
            [2, 2],
            [1, 1],
            1,
        ),
        // At least 256 output pixels: weights packed in 8-row panels on micro-kernel targets, with a padded last
        // panel (13 rows) and per-group padding (two groups of 5 rows).
        (
            "packed",
            [1, 4, 18, 20],
            [13, 4, 3, 3],
            [1, 1, 1, 1],
            [1, 1],
            [1, 1],
            1,
        ),
        (
            "packed_groups",
            [1, 6, 16, 16],
            [10, 3, 3, 3],
            [1, 1, 1, 1],
            [1, 1],
            [1, 1],
            2,
        ),
        // Winograd F(2x2, 3x3) on AVX-512 (3x3, stride 1, >= 16 channels in and out, 16 to 31 4x4 tiles): even and odd
        // output sizes (a one-row last tile row, masked columns), batch 2, pads 0 and asymmetric pads up to 2.
        (
            "wino_even",
            [1, 16, 16, 16],
            [16, 16, 3, 3],
            [1, 1, 1, 1],
            [1, 1],
            [1, 1],
            1,
        ),
        (
            "wino_odd",
            [1, 17, 13, 15],
            [20, 17, 3, 3],
            [1, 1, 1, 1],
            [1, 1],
            [1, 1],
            1,
        ),
        (
            "wino_batch_nopad",
            [2, 16, 14, 18],
            [16, 16, 3, 3],
            [0, 0, 0, 0],
            [1, 1],
            [1, 1],
            1,
        ),
        (
            "wino_asym",
            [1, 24, 9, 37],
            [32, 24, 3, 3],
            [2, 1, 0, 2],
            [1, 1],
            [1, 1],
            1,
        ),
        // F(4x4, 3x3) (>= 32 tiles of 4x4, at most 3/4 of F(2x2)'s multiply-adds): a multiple of 4, heights
        // leaving 3 and 1 rows and widths 2 and 3 columns in the last tile, asymmetric pads, batch 2 with the
        // GEMM per ξ transposed (98 tiles, 64 output channels).
        (
            "wino4_even",
            [1, 16, 24, 24],
            [16, 16, 3, 3],
            [1, 1, 1, 1],
            [1, 1],
            [1, 1],
            1,
        ),
        (
            "wino4_odd",
            [1, 17, 27, 30],
            [20, 17, 3, 3],
            [1, 1, 1, 1],
            [1, 1],
            [1, 1],
            1,
        ),
        (
            "wino4_asym",
            [1, 24, 21, 37],
            [32, 24, 3, 3],
            [2, 1, 0, 2],
            [1, 1],
            [1, 1],
            1,
        ),
        (
            "wino4_transposed_batch",
            [2, 16, 28, 27],
            [64, 16, 3, 3],
            [1, 1, 1, 1],
            [1, 1],
            [1, 1],
            1,
        ),
        // Tile counts that fill 32-column blocks badly (49; 16, a 7x7 plane; 2 x 49 = 98) with a multiple of 32
        // output channels:
        // the GEMM per ξ is computed transposed and the block-transposing kernel writes M back.
        (
            "wino_transposed",
            [1, 32, 14, 14],
            [32, 32, 3, 3],
            [1, 1, 1, 1],
            [1, 1],
            [1, 1],
            1,
        ),
        (
            "wino_16_tiles",
            [1, 32, 7, 7],
            [64, 32, 3, 3],
            [1, 1, 1, 1],
            [1, 1],
            [1, 1],
            1,
        ),
        (
            "wino_transposed_batch",
            [2, 16, 13, 13],
            [64, 16, 3, 3],
            [1, 1, 1, 1],
            [1, 1],
            [1, 1],
            1,
        ),
        // Convs on narrow planes with a multiple of 32 output channels: computed transposed on AVX-512 (pixels
        // as GEMM rows) and written back by the 16x16 block-transposing epilogue; batch 2, 196 pixels.
        (
            "transposed_7x7",
            [1, 40, 7, 7],
            [64, 40, 1, 1],
            [0, 0, 0, 0],
            [1, 1],
            [1, 1],
            1,
        ),
        (
            "transposed_batch",
            [2, 24, 14, 14],
            [32, 24, 1, 1],
            [0, 0, 0, 0],
            [1, 1],
            [1, 1],
            1,
        ),
        // 3x3 ones transposed too (im2col columns read transposed, weights in 32-column panels): stride 1 with
        // K = 360 (a full and a tail K block; no pads, so 3x3 tiles, too few for Winograd), stride 2 from 14x14
        // with asymmetric pads.
        (
            "transposed_3x3",
            [1, 40, 7, 7],
            [64, 40, 3, 3],
            [0, 0, 0, 0],
            [1, 1],
            [1, 1],
            1,
        ),
        (
            "transposed_3x3_s2",
            [1, 24, 14, 14],
            [32, 24, 3, 3],
            [1, 0, 0, 1],
            [2, 2],
            [1, 1],
            1,
        ),
        // Depthwise (direct kernel): vector interior, asymmetric pads, dilation, 5x5, no interior at all.
        (
            "dw1",
            [2, 5, 9, 23],
            [5, 1, 3, 3],
            [1, 1, 1, 1],
            [1, 1],
            [1, 1],
            5,
        ),
        (
            "dw2",
            [1, 3, 10, 17],
            [3, 1, 3, 3],
            [0, 2, 1, 0],
            [1, 1],
            [2, 2],
            3,
        ),
        (
            "dw3",
            [1, 4, 12, 13],
            [4, 1, 5, 5],
            [2, 2, 2, 2],
            [2, 2],
            [1, 1],
            4,
        ),
        (
            "dw4",
            [1, 2, 3, 2],
            [2, 1, 3, 3],
            [2, 2, 2, 2],
            [1, 1],
            [1, 1],
            2,
        ),
        // Wide stride-1 rows: the AVX-512 row kernel's four-vector steps, single vectors and masked tails.
        (
            "dw6",
            [1, 3, 6, 70],
            [3, 1, 5, 5],
            [2, 2, 2, 2],
            [1, 1],
            [1, 1],
            3,
        ),
        (
            "dw7",
            [1, 2, 7, 101],
            [2, 1, 3, 3],
            [2, 1, 2, 3],
            [1, 1],
            [2, 2],
            2,
        ),
        (
            "dw8",
            [1, 3, 9, 80],
            [3, 1, 3, 3],
            [1, 1, 1, 1],
            [2, 2],
            [1, 1],
            3,
        ),
        (
            "dw9",
            [1, 2, 8, 75],
            [2, 1, 5, 5],
            [1, 2, 2, 1],
            [2, 2],
            [1, 1],
            2,
        ),
        (
            "dw5",
            [1, 7, 8, 9],
            [7, 1, 3, 3],
            [0, 0, 0, 0],
            [1, 2],
            [1, 1],
            7,
        ),
        // A padded plane at stride 2 (5x5 on 28x28): one row-kernel call runs every output row.
        (
            "dw_padded_s2",
            [1, 3, 28, 28],
            [3, 1, 5, 5],
            [2, 2, 2, 2],
            [2, 2],
            [1, 1],
            3,
        ),
        // Bordered only on top and left (the bottom and right pads are never reached) with a small border:
        // on AVX-512 whole rows with the left padding masked in the row kernel (`depthwise::edge_rows`).
        (
            "dw_left_s2",
            [1, 2, 96, 96],
            [2, 1, 3, 3],
            [1, 1, 1, 1],
            [2, 2],
            [1, 1],
            2,
        ),
        // Bordered only at the bottom and right (TensorFlow's SAME at stride 2): the last rows from a zeroed
        // buffer, the last column masked in the row kernel's tail (45 outputs: 13 in the tail).
        (
            "dw_right_s2",
            [1, 2, 90, 90],
            [2, 1, 3, 3],
            [0, 0, 1, 1],
            [2, 2],
            [1, 1],
            2,
        ),
        // Channel-blocked depthwise (AVX-512, planes up to 14x14, 16 channels per vector): 5x5, stride 2 with
        // asymmetric pads and a batch, a rectangular kernel with mixed strides, a plane past one 16-pixel block.
        (
            "dwc16_5x5",
            [1, 32, 7, 7],
            [32, 1, 5, 5],
            [2, 2, 2, 2],
            [1, 1],
            [1, 1],
            32,
        ),
        (
            "dwc16_s2",
            [2, 16, 14, 14],
            [16, 1, 3, 3],
            [0, 0, 1, 1],
            [2, 2],
            [1, 1],
            16,
        ),
        (
            "dwc16_rect",
            [1, 48, 9, 13],
            [48, 1, 3, 5],
            [1, 2, 1, 2],
            [1, 2],
            [1, 1],
            48,
        ),
        (
            "dwc16_14",
            [1, 16, 14, 14],
            [16, 1, 3, 3],
            [1, 1, 1, 1],
            [1, 1],
            [1, 1],
            16,
        ),
        (
            "c4",
            [1, 4, 6, 5],
            [6, 2, 1, 1],
            [0, 0, 0, 0],
            [1, 1],
            [1, 1],
            2,
        ),
        (
            "c5",
            [1, 13, 4, 3],
            [17, 13, 1, 1],
            [0, 0, 0, 0],
            [1, 1],
            [1, 1],
            1,
        ),
        (
            "c6",
            [1, 1, 11, 11],
            [3, 1, 7, 7],
            [3, 3, 3, 3],
            [2, 2],
            [1, 1],
            1,
        ),
        // Direct convolution of few-channel inputs (AVX-512, M a multiple of 16): a 7x7 stride-2 stem with
        // asymmetric pads and a batch (rows past one 16-pixel block and a tail), dilation 2 at stride 1, and an
        // unpadded input read in place with mixed strides.
        (
            "direct_stem",
            [2, 3, 23, 37],
            [32, 3, 7, 7],
            [3, 3, 2, 3],
            [2, 2],
            [1, 1],
            1,
        ),
        (
            "direct_dilated",
            [1, 2, 9, 20],
            [16, 2, 3, 3],
            [1, 0, 1, 2],
            [1, 1],
            [2, 2],
            1,
        ),
        (
            "direct_in_place",
            [1, 4, 10, 19],
            [16, 4, 3, 3],
            [0, 0, 0, 0],
            [1, 2],
            [1, 1],
            1,
        ),
        (
            "micro_tiles_and_tails",
            [1, 16, 19, 21],
            [27, 16, 3, 3],
            [1, 1, 1, 1],
            [1, 1],
            [1, 1],
            1,
        ),
    ];
    for (name, x, w, p, s, d, g) in cases {
        let attrs = ConvAttrs {
            kernel: [w[2], w[3]],
            strides: *s,
            pads: *p,
            dilations: *d,
            group: *g,
            has_bias: true,
            epilogue: Epilogue::default(),
        };
        let shapes = [
            (bundlec::ir::DType::F32, &x[..]),
            (bundlec::ir::DType::F32, &w[..]),
            (bundlec::ir::DType::F32, &[w[0]][..]),
        ];
        let out = ops::infer(&Op::Conv(attrs.clone()), &shapes).expect("infer")[0]
            .1
            .clone();
        let onnx_attrs = vec![
            ("pads", ints(&p.map(|v| v as i64))),
            ("strides", ints(&s.map(|v| v as i64))),
            ("dilations", ints(&d.map(|v| v as i64))),
            ("group", Attr::Int(*g as i64)),
        ];
        case(
            &format!("conv_{name}"),
            "Conv",
            onnx_attrs,
            &[("x", x.to_vec())],
            &[("w", w.to_vec()), ("b", vec![w[0]])],
            &Op::Conv(attrs),
            &out,
        );
    }
}

#[test]
fn matmul_tails_and_batches() {
    use bundlec::ir::{Epilogue, Op};
    for (i, (a, b)) in [
        (vec![1, 1], vec![1, 1]),
        (vec![5, 3], vec![3, 9]),
        (vec![4, 8], vec![8, 8]),
        (vec![3, 7, 13], vec![13, 6]),
        (vec![2, 1, 3, 5], vec![4, 5, 2]),
        (vec![37, 70], vec![70, 45]),
        (vec![2, 19, 33], vec![33, 65]),
        (vec![16, 300], vec![300, 64]),
        (vec![9, 700], vec![700, 50]),
        // GEMV: a single row, only the row-tail micro-kernels.
        (vec![1, 300], vec![300, 70]),
        (vec![1, 1, 600], vec![600, 96]),
    ]
    .into_iter()
    .enumerate()
    {
        let op = Op::MatMul(Epilogue::default());
        let out = ops::infer(
            &op,
            &[(bundlec::ir::DType::F32, &a), (bundlec::ir::DType::F32, &b)],
        )
        .expect("infer")[0]
            .1
            .clone();
        case(
            &format!("matmul{i}"),
            "MatMul",
            vec![],
            &[("a", a.clone()), ("b", b.clone())],
            &[],
            &op,
            &out,
        );
    }
}

#[test]
fn gemm_constant_b_in_column_panels() {
    use bundlec::ir::{Epilogue, GemmAttrs, Op};
    // (m, k, n, transB): GEMVs and few-row GEMMs whose constant B is packed in column panels on x86 (N not a
    // multiple of the 24 / 32 panel width: the last panel zero-padded, the column tail by the Cranelift tile),
    // and one with more rows than GEMV_MAX_ROWS, read in place.
    for (i, (m, k, n, trans_b)) in [
        (1, 300, 100, true),
        (1, 257, 1000, true),
        (3, 70, 64, false),
        (8, 513, 45, true),
        (9, 40, 70, true),
    ]
    .into_iter()
    .enumerate()
    {
        let attrs = GemmAttrs {
            alpha: 1.0,
            beta: 1.0,
            trans_a: false,
            trans_b,
            has_c: true,
            epilogue: Epilogue::default(),
        };
        let b = if trans_b { vec![n, k] } else { vec![k, n] };
        let ran = case(
            &format!("gemv{i}"),
            "Gemm",
            vec![("transB", Attr::Int(i64::from(trans_b)))],
            &[("a", vec![m, k])],
            &[("b", b), ("c", vec![n])],
            &Op::Gemm(attrs),
            &[m, n],
        );
        for (cpu, constants) in ran {
            let panel = match cpu {
                "x86-64-v3" => 24,
                "x86-64-v4" => 32,
                _ => continue,
            };
            let padded = if m <= 8 { n.next_multiple_of(panel) } else { n };
            assert!(
                constants >= (k * padded + n) * 4,
                "gemv{i} --cpu {cpu}: {constants} constant bytes, B not in {panel}-column panels"
            );
        }
    }
}

#[test]
fn pools_every_padding_case() {
    use bundlec::ir::{Op, PoolAttrs, PoolKind};
    // The last three have rows wide enough for the AVX-512 max-pool row kernel (stride 2 and 1, with a
    // two-vector step and masked tails); the others only take the border path. Max pools 0 and 4 (3x3, stride
    // 2, padded top and left) take the separable AVX-512 kernel.
    let narrow = vec![2, 3, 9, 10];
    let wide = vec![1, 2, 7, 75];
    for (i, (k, s, p, ceil, inc, x)) in [
        ([3, 3], [2, 2], [1, 1, 1, 1], false, false, &narrow),
        ([2, 3], [1, 2], [1, 0, 0, 2], false, true, &narrow),
        ([3, 3], [2, 2], [0, 0, 0, 0], true, false, &narrow),
        ([3, 2], [3, 2], [1, 1, 1, 1], true, true, &narrow),
        ([3, 3], [2, 2], [1, 1, 1, 1], false, false, &wide),
        ([3, 3], [1, 1], [1, 1, 1, 1], false, false, &wide),
        ([2, 3], [1, 2], [1, 0, 0, 2], true, false, &wide),
    ]
    .into_iter()
    .enumerate()
    {
        let attrs = PoolAttrs {
            kernel: k,
            strides: s,
            pads: p,
            dilations: [1, 1],
            ceil_mode: ceil,
            count_include_pad: inc,
        };
        let x = x.clone();
        for (kind, onnx) in [
            (PoolKind::Max, "MaxPool"),
            (PoolKind::Average, "AveragePool"),
        ] {
            let op = Op::Pool(kind, attrs.clone());
            let out = ops::infer(&op, &[(bundlec::ir::DType::F32, &x)]).expect("infer")[0]
                .1
                .clone();
            let mut a = vec![
                ("kernel_shape", ints(&k.map(|v| v as i64))),
                ("strides", ints(&s.map(|v| v as i64))),
                ("pads", ints(&p.map(|v| v as i64))),
                ("ceil_mode", Attr::Int(ceil as i64)),
            ];
            if kind == PoolKind::Average {
                a.push(("count_include_pad", Attr::Int(inc as i64)));
            }
            case(
                &format!("{}{i}", onnx.to_lowercase()),
                onnx,
                a,
                &[("x", x.clone())],
                &[],
                &op,
                &out,
            );
        }
    }
}

/// Transposes whose rows the input holds contiguously (copied) and ones it does not (gathered), with size-1
/// dims that coalescing drops and dims it merges.
#[test]
fn transposes_coalesced_and_gathered() {
    use bundlec::ir::Op;
    let cases: &[(&str, Vec<usize>, Vec<usize>)] = &[
        ("tr_heads", vec![1, 7, 3, 20], vec![0, 2, 1, 3]),
        ("tr_last2", vec![2, 3, 9, 5], vec![0, 1, 3, 2]),
        ("tr_rev", vec![2, 3, 4, 5], vec![3, 2, 1, 0]),
        ("tr_outer", vec![3, 4, 6, 2], vec![1, 0, 2, 3]),
        ("tr_ones", vec![1, 6, 1, 8], vec![2, 0, 3, 1]),
        ("tr_same", vec![4, 1, 5], vec![1, 0, 2]),
    ];
    for (name, x, perm) in cases {
        let out: Vec<usize> = perm.iter().map(|&p| x[p]).collect();
        let perm_i: Vec<i64> = perm.iter().map(|&p| p as i64).collect();
        case(
            name,
            "Transpose",
            vec![("perm", ints(&perm_i))],
            &[("x", x.clone())],
            &[],
            &Op::Transpose(perm.clone()),
            &out,
        );
    }
}

#[test]
fn elementwise_broadcasts_and_odd_lengths() {
    use bundlec::ir::{BinOp, Op, UnOp};
    for (i, (a, b)) in [
        (vec![7], vec![7]),
        (vec![3, 5], vec![5]),
        (vec![2, 3, 4, 5], vec![3, 1, 1]),
        (vec![3, 1, 5], vec![1, 4, 1]),
        (vec![1029], vec![1]),
    ]
    .into_iter()
    .enumerate()
    {
        for (op, name) in [
            (BinOp::Add, "Add"),
            (BinOp::Sub, "Sub"),
            (BinOp::Mul, "Mul"),
            (BinOp::Div, "Div"),
        ] {
            let out = bundlec::ir::ops::elementwise::broadcast_shapes(&a, &b).expect("broadcast");
            case(
                &format!("{}{i}", name.to_lowercase()),
                name,
                vec![],
                &[("a", a.clone()), ("b", b.clone())],
                &[],
                &Op::Binary(op),
                &out,
            );
        }
    }
    for (u, name) in [
        (UnOp::Sigmoid, "Sigmoid"),
        (UnOp::Tanh, "Tanh"),
        (UnOp::Exp, "Exp"),
        (UnOp::Erf, "Erf"),
        (UnOp::Gelu { tanh: false }, "Gelu"),
        (UnOp::Relu, "Relu"),
        (UnOp::Abs, "Abs"),
    ] {
        case(
            &format!("un_{}", name.to_lowercase()),
            name,
            vec![],
            &[("x", vec![3, 1031])],
            &[],
            &Op::Unary(u),
            &[3, 1031],
        );
    }
}
