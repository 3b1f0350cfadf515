//! Per-op tests of the generated code against the reference semantics (`bundlec::ir::ops::eval`, the single
//! source of truth) through the kernel test macro (`bundlec_tests::kernel_case`, every kernel variant this CPU
//! runs): matrix products with tails and batches, GEMV panels, every pooling pad, transposes, broadcasting and
//! the unary maps, at sizes that are not multiples of the vector width or the GEMM tile. Convolutions are in
//! `kernels_conv.rs`.

use bundlec::ir::ops;
use bundlec_tests::kernel_case::{case, ints};
use bundlec_tests::onnx::Attr;

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
        // B copied by each K block's first tile (K >= 128, 2+ tiles): two full K blocks and a tail, a column
        // tail and a row tail (both reading B in place), two batches.
        (vec![2, 43, 520], vec![520, 70]),
        // Narrower than the AVX-512 tile (16-column tiles): an attention's scores over 16 keys, and 21
        // columns (a column tail of 5).
        (vec![2, 4, 16, 32], vec![2, 4, 32, 16]),
        (vec![3, 20, 40], vec![40, 21]),
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
    // 2, padded top and left) take the separable kernel (AVX2 and AVX-512).
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
        // 2-D blocks transposed in registers, AVX2 and AVX-512 (`data::block_plan`): an attention's Kᵀ from the
        // head split, tails in both block dims with batches, an NHWC layout change (3 rows), a 2-D one.
        ("tr_kt", vec![2, 16, 4, 32], vec![0, 2, 3, 1]),
        ("tr_tails", vec![3, 37, 41], vec![0, 2, 1]),
        ("tr_nhwc", vec![1, 3, 20, 19], vec![0, 2, 3, 1]),
        ("tr_mid", vec![5, 18, 2, 33], vec![2, 3, 0, 1]),
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

/// LayerNorm over the last axis (the AVX-512 and AVX2 row kernels: groups of four or two rows and the rest, rows with
/// whole blocks of 16, 4-float vectors and scalars past them) and over the last two (one long row per batch),
/// with and without a bias; InstanceNorm (per-channel parameters: the Cranelift kernel everywhere).
#[test]
fn layernorm_rows() {
    use bundlec::ir::Op;
    for (name, x, axis, bias) in [
        ("ln_rows12", vec![2, 5, 12], 2usize, true),
        ("ln_rows7_nobias", vec![9, 7], 1, false),
        ("ln_rows40", vec![6, 40], 1, true),
        ("ln_rows256", vec![1, 11, 256], 2, true),
        ("ln_rows131_nobias", vec![5, 131], 1, false),
        ("ln_last_two", vec![3, 6, 21], 1, true),
    ] {
        let p_shape: Vec<usize> = x[axis..].to_vec();
        let mut inits = vec![("g", p_shape.clone())];
        if bias {
            inits.push(("b", p_shape));
        }
        case(
            name,
            "LayerNormalization",
            vec![
                ("axis", Attr::Int(axis as i64)),
                ("epsilon", Attr::Float(1e-3)),
            ],
            &[("x", x.clone())],
            &inits,
            &Op::LayerNorm {
                axis,
                epsilon: 1e-3,
                rms: false,
            },
            &x,
        );
    }
    case(
        "instnorm",
        "InstanceNormalization",
        vec![],
        &[("x", vec![2, 3, 5, 6])],
        &[("g", vec![3]), ("b", vec![3])],
        &Op::InstanceNorm { epsilon: 1e-5 },
        &[2, 3, 5, 6],
    );
}

/// Softmax: contiguous rows (the row kernels, AVX2 and AVX-512: short rows of 5, 16, 33 and 48 — the AVX-512
/// kernel's steps of three rows and the remainders — and long ones of 100, 128 and 131, streamed), and a
/// strided axis (the Cranelift kernel everywhere).
#[test]
fn softmax_rows_and_axes() {
    use bundlec::ir::Op;
    for (name, x, axis) in [
        ("softmax_rows5", vec![7, 5], 1usize),
        ("softmax_rows16", vec![2, 4, 16, 16], 3),
        ("softmax_rows33", vec![4, 33], 1),
        ("softmax_rows48", vec![5, 48], 1),
        ("softmax_long", vec![3, 100], 1),
        ("softmax_long128", vec![2, 2, 128], 2),
        ("softmax_long131", vec![5, 131], 1),
        ("softmax_axis0", vec![6, 7], 0),
    ] {
        case(
            name,
            "Softmax",
            vec![("axis", Attr::Int(axis as i64))],
            &[("x", x.clone())],
            &[],
            &Op::Softmax {
                axis,
                flatten_tail: false,
                log: false,
            },
            &x,
        );
    }
}
