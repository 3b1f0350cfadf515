//! End-to-end: each test model is compiled by bundlec, linked into a C program by the system `cc` (nothing but
//! `NAME.o`), run, and compared with tract on the same ONNX bytes (SPEC §11 tolerance 1e-4).

use bundlec_tests::harness::{compile, run_c, tract_run};
use bundlec_tests::{assert_close, models, rand_vec};

const TOL: f32 = 1e-4;

fn check(
    name: &str,
    model: &[u8],
    inputs: &[(Vec<usize>, Vec<f32>)],
    out_lens: &[usize],
) -> bundlec_tests::harness::Compiled {
    let c = compile(model, name);
    let want = tract_run(model, inputs);
    let got = run_c(
        &c,
        &inputs.iter().map(|i| i.1.clone()).collect::<Vec<_>>(),
        out_lens,
    );
    assert_close(&got, &want, TOL, name);
    c
}

#[test]
fn addsub6_gives_23_in_four_layers() {
    let m = models::addsub6();
    let c = check(
        "addsub6",
        &m,
        &[(vec![1, 4], vec![10.0, 0.0, -1.5, 2.0])],
        &[4],
    );
    let got = run_c(&c, &[vec![10.0; 4]], &[4]);
    assert_eq!(got[0], vec![23.0; 4]);
    assert_eq!(
        c.bundle.report.layers, 4,
        "two independent chains: layers [add,add] [sub,sub] [add] [add]"
    );
    assert_eq!(c.bundle.report.kernels, 6);
}

#[test]
fn mlp_matches_tract() {
    for batch in [1, 3] {
        let x = rand_vec(batch * 37, 100 + batch as u64);
        let c = check(
            &format!("mlp{batch}"),
            &models::mlp(batch),
            &[(vec![batch, 37], x)],
            &[batch * 10],
        );
        // The MatMul absorbs its bias Add and the Relu (the Gemms' Tanh and Sigmoid stay maps).
        let passes = &c.bundle.report.passes;
        assert!(
            passes.contains(&("fuse_epilogues", 2)),
            "bias and Relu fused: {passes:?}"
        );
    }
}

/// An attention's scaling (a `Div` by √d, a `Mul` by a constant on the left) and its mask row join the score
/// products' epilogues, in every kernel set (the machine-code micro-kernels scale their accumulators).
#[test]
fn attention_scale_and_mask_fuse_and_match_tract() {
    let model = models::attention_scores();
    let x: Vec<f32> = rand_vec(2 * 37 * 8, 41).iter().map(|v| v * 2.0).collect();
    let want = tract_run(&model, &[(vec![1, 2, 37, 8], x.clone())]);
    check_kernel_sets_with(&model, "attention", &x, 2 * 37 * 37, &want, |c, name| {
        let passes = &c.bundle.report.passes;
        assert!(
            passes.contains(&("fuse_epilogues", 3)),
            "{name}: two scalings and the mask fused: {passes:?}"
        );
    });
}

#[test]
fn gelu_spellings_fuse_and_match_tract() {
    for batch in [1, 5] {
        let x = rand_vec(batch * 40, 300 + batch as u64);
        let c = check(
            &format!("gelu{batch}"),
            &models::gelu_mlp(batch),
            &[(vec![batch, 40], x)],
            &[batch * 24],
        );
        let passes = &c.bundle.report.passes;
        assert!(
            passes.contains(&("fuse_gelu", 3)),
            "three GELUs fused: {passes:?}"
        );
        // Three products (the first with its bias) and three GELU maps.
        assert_eq!(c.bundle.report.kernels, 6, "{passes:?}");
    }
}

#[test]
fn lenet_matches_tract() {
    for batch in [1, 2] {
        let x = rand_vec(batch * 784, 200 + batch as u64);
        let c = check(
            &format!("lenet{batch}"),
            &models::lenet(batch),
            &[(vec![batch, 1, 28, 28], x)],
            &[batch * 10],
        );
        let passes = &c.bundle.report.passes;
        assert!(
            passes.contains(&("fold_batchnorm", 1)),
            "BN folded into conv: {passes:?}"
        );
    }
}

#[test]
fn shapes_graph_matches_tract() {
    let a = rand_vec(30, 301);
    let b = rand_vec(40, 302);
    check(
        "shapes",
        &models::shapes(),
        &[(vec![2, 3, 5], a), (vec![2, 4, 5], b)],
        &[70, 70],
    );
}

#[test]
fn object_has_no_undefined_symbols_beyond_memcpy_memset() {
    let c = compile(&models::lenet(1), "nm_lenet");
    let file = object::File::parse(&*c.bundle.object).expect("parse object");
    use object::{Object, ObjectSymbol};
    let undefined: Vec<String> = file
        .symbols()
        .filter(|s| s.is_undefined() && !s.name().unwrap_or("").is_empty())
        .map(|s| s.name().unwrap_or("").to_string())
        .filter(|n| n != "memcpy" && n != "memset")
        .collect();
    assert!(undefined.is_empty(), "undefined symbols: {undefined:?}");
    let names: Vec<String> = file
        .symbols()
        .filter(|s| s.is_global() && s.is_definition())
        .map(|s| s.name().unwrap_or("").to_string())
        .collect();
    assert!(
        names.contains(&"nm_lenet".to_string()) && names.contains(&"nm_lenet_config".to_string()),
        "{names:?}"
    );
}

#[test]
fn weights_file_is_the_constant_area() {
    let c = compile(&models::mlp(1), "wmlp");
    let w = std::fs::read(c.dir.join("wmlp.weights")).expect("weights");
    assert_eq!(w.len(), c.bundle.report.sizes[0]);
    let h = std::fs::read_to_string(c.dir.join("wmlp.h")).expect("header");
    assert!(
        h.contains(&format!("#define WMLP_CONSTANT_MEM_SIZE {}", w.len())),
        "{h}"
    );
    assert!(h.contains("#define WMLP_X_OFFSET 0"), "{h}");
    assert!(h.contains("extern const struct BundleConfig wmlp_config;"));
}

#[test]
fn compiling_twice_is_byte_identical() {
    let a = compile(&models::lenet(1), "det_a");
    let b = compile(&models::lenet(1), "det_a");
    assert_eq!(a.bundle.object, b.bundle.object);
    assert_eq!(a.bundle.weights, b.bundle.weights);
    assert_eq!(a.bundle.recipe, b.bundle.recipe);
}

/// Whether this machine runs `--cpu x86-64-v4` bundles (`harness::kernel_variants`); says loudly that `what` is
/// skipped when it does not.
#[cfg(target_arch = "x86_64")]
fn runs_x86_64_v4(what: &str) -> bool {
    let runs = bundlec_tests::harness::kernel_variants()
        .iter()
        .any(|&(cpu, ok)| cpu == "x86-64-v4" && ok);
    if !runs {
        eprintln!("SKIPPED: {what} need the AVX-512 kernels (x86-64-v4), which this CPU lacks");
    }
    runs
}

/// An inverted residual block on small planes (AVX-512): a transposed 1x1 expansion writes the `[P][16]` blocks
/// that the channel-blocked depthwise convolution reads (`GemmSpec::c_k16`, no transposing epilogue), which
/// writes its own `[P][16]` blocks that the transposed projection reads as A with no pack (no `.pack` op in the
/// bundle): a 3x3 depthwise layer with a Relu on 14x14 planes (clamped results stored straight from the fma
/// chains; 14 tiles of 14 rows) and a 5x5 one with Relu6 on 7x7 planes (the block copied out clamped; a tile
/// tail), biases, 112 channels padded to 128. Both match tract.
#[cfg(target_arch = "x86_64")]
#[test]
fn depthwise_writing_the_projection_blocks_matches_tract() {
    use bundlec_tests::onnx::{Attr, Model};
    if !runs_x86_64_v4("depthwise blocks") {
        return;
    }
    for (c, m, hw, k, relu6) in [(64, 96, 14, 3, false), (96, 112, 7, 5, true)] {
        let cin = 24;
        let mut g = Model::new();
        g.input("x", &[1, cin, hw, hw]);
        g.init("we", &[c, cin, 1, 1], rand_vec(c * cin, 2));
        g.init("be", &[c], rand_vec(c, 8));
        g.init("wd", &[c, 1, k, k], rand_vec(c * k * k, 3));
        g.init("bd", &[c], rand_vec(c, 4));
        g.init("wp", &[m, c, 1, 1], rand_vec(m * c, 5));
        g.init("bp", &[m], rand_vec(m, 6));
        g.output("y", &[1, m, hw, hw]);
        let pad = (k / 2) as i64;
        let dw = vec![
            ("group", Attr::Int(c as i64)),
            ("kernel_shape", Attr::Ints(vec![k as i64, k as i64])),
            ("pads", Attr::Ints(vec![pad; 4])),
        ];
        g.node("Conv", &["x", "we", "be"], &["e"], vec![]);
        g.node("Relu", &["e"], &["er"], vec![]);
        g.node("Conv", &["er", "wd", "bd"], &["d"], dw);
        if relu6 {
            g.init("lo", &[], vec![0.0]).init("hi", &[], vec![6.0]);
            g.node("Clip", &["d", "lo", "hi"], &["r"], vec![]);
        } else {
            g.node("Relu", &["d"], &["r"], vec![]);
        }
        g.node("Conv", &["r", "wp", "bp"], &["y"], vec![]);
        let model = g.bytes();
        let mut o = bundlec::Options::new("dw_blocks");
        o.cpu = "x86-64-v4".into();
        let compiled = bundlec_tests::harness::compile_with(&model, o);
        let ins = bundlec::emit::inspect::inspect("dw_blocks.o", &compiled.bundle.object)
            .expect("inspect");
        let names: Vec<&str> = ins.ops.iter().map(|op| op.name.as_str()).collect();
        assert_eq!(
            names.iter().filter(|n| n.ends_with(".gemm_t")).count(),
            2,
            "{k}x{k}: transposed expansion and projection: {names:?}"
        );
        // The projection (the last op) reads the depthwise blocks as they are: no pack before it.
        let last = names.len() - 1;
        assert!(
            names[last].ends_with(".gemm_t") && !names[last - 1].ends_with(".pack"),
            "{k}x{k}: no pack before the projection: {names:?}"
        );
        let x = rand_vec(cin * hw * hw, 7);
        let want = tract_run(&model, &[(vec![1, cin, hw, hw], x.clone())]);
        let got = run_c(&compiled, &[x], &[m * hw * hw]);
        assert_close(&got, &want, TOL, &format!("dw_blocks {k}x{k}"));
    }
}

/// A chain of bottlenecks on 14x14 planes (AVX-512) whose 1x1 convolutions are all computed transposed: the
/// tensors between them stay in channel blocks (`lower/cnn/blocked.rs`) — read as A with no pack, added as
/// residuals in the micro-kernels' epilogue — and only the graph input is packed (one `.pack` op); the last
/// block's output goes through a stride-2 1x1 convolution to 7x7 (its columns subsampled as blocks,
/// `blocked::strided_columns`) whose output the GlobalAveragePool head averages as blocks
/// (`Body::GlobalAvg::blocked`). At batch 1 and, where nothing is kept in blocks, batch 2, both matching tract.
#[cfg(target_arch = "x86_64")]
#[test]
fn blocked_bottleneck_chain_matches_tract() {
    use bundlec_tests::onnx::Model;
    if !runs_x86_64_v4("blocked bottlenecks") {
        return;
    }
    for nb in [1, 2] {
        let (cin, c, mid) = (16, 64, 32);
        let mut g = Model::new();
        g.input("x", &[nb, cin, 14, 14]);
        let cds = 128;
        g.output("head", &[nb, cds, 1, 1]);
        g.init("w0", &[c, cin, 1, 1], rand_vec(c * cin, 30));
        g.node("Conv", &["x", "w0"], &["c0"], vec![]);
        g.node("Relu", &["c0"], &["y0"], vec![]);
        for b in 1..=2 {
            let (wa, wb, ba) = (format!("wa{b}"), format!("wb{b}"), format!("ba{b}"));
            g.init(&wa, &[mid, c, 1, 1], rand_vec(mid * c, 31 + b));
            g.init(&ba, &[mid], rand_vec(mid, 33 + b));
            g.init(&wb, &[c, mid, 1, 1], rand_vec(c * mid, 35 + b));
            let (prev, a, r, p, s) = (
                format!("y{}", b - 1),
                format!("a{b}"),
                format!("r{b}"),
                format!("p{b}"),
                format!("s{b}"),
            );
            g.node("Conv", &[&prev, &wa, &ba], &[&a], vec![]);
            g.node("Relu", &[&a], &[&r], vec![]);
            g.node("Conv", &[&r, &wb], &[&p], vec![]);
            g.node("Add", &[&p, &prev], &[&s], vec![]);
            g.node("Relu", &[&s], &[&format!("y{b}")], vec![]);
        }
        g.init("wds", &[cds, c, 1, 1], rand_vec(cds * c, 38));
        let stride = vec![("strides", bundlec_tests::onnx::Attr::Ints(vec![2, 2]))];
        g.node("Conv", &["y2", "wds"], &["ds"], stride);
        g.node("Relu", &["ds"], &["dr"], vec![]);
        g.node("GlobalAveragePool", &["dr"], &["head"], vec![]);
        let model = g.bytes();
        let mut o = bundlec::Options::new("blocked_chain");
        o.cpu = "x86-64-v4".into();
        let compiled = bundlec_tests::harness::compile_with(&model, o);
        let ins = bundlec::emit::inspect::inspect("blocked_chain.o", &compiled.bundle.object)
            .expect("inspect");
        let names: Vec<&str> = ins.ops.iter().map(|op| op.name.as_str()).collect();
        assert_eq!(
            names.iter().filter(|n| n.ends_with(".gemm_t")).count(),
            6,
            "batch {nb}: six transposed GEMMs: {names:?}"
        );
        if nb == 1 {
            assert_eq!(
                names.iter().filter(|n| n.ends_with(".pack")).count(),
                1,
                "batch 1: only the input packed: {names:?}"
            );
            assert!(
                names.iter().any(|n| n.ends_with(".subsample")),
                "batch 1: the downsample's columns as blocks: {names:?}"
            );
        }
        let x = rand_vec(nb * cin * 196, 39);
        let want = tract_run(&model, &[(vec![nb, cin, 14, 14], x.clone())]);
        let got = run_c(&compiled, &[x], &[nb * cds]);
        assert_close(&got, &want, TOL, &format!("blocked_chain batch {nb}"));
    }
}

/// Transposed convolution GEMMs whose channels are a multiple of 16 but not of 32 (`transposed_wins`): their
/// weights, bias and `Cᵀ` padded to whole 32-column blocks, the padding never transposed. A 14x14 projection to
/// 112 channels with a bias and a residual after a depthwise layer that writes its blocks (`C16Out::Blocked`),
/// and a 3x3 convolution from 128 to 80 channels on 7x7 planes (Winograd, its GEMMs transposed); both match
/// tract, bitwise-free of the padding.
#[cfg(target_arch = "x86_64")]
#[test]
fn padded_transposed_gemms_match_tract() {
    use bundlec_tests::onnx::{Attr, Model};
    if !runs_x86_64_v4("transposed GEMMs") {
        return;
    }
    let (c, m) = (48, 112);
    let mut g = Model::new();
    g.input("x", &[1, c, 14, 14]);
    g.input("res", &[1, m, 14, 14]);
    g.init("wd", &[c, 1, 3, 3], rand_vec(c * 9, 21));
    g.init("wp", &[m, c, 1, 1], rand_vec(m * c, 22));
    g.init("bp", &[m], rand_vec(m, 23));
    g.output("y", &[1, m, 14, 14]);
    let dw = vec![
        ("group", Attr::Int(c as i64)),
        ("kernel_shape", Attr::Ints(vec![3, 3])),
        ("pads", Attr::Ints(vec![1, 1, 1, 1])),
    ];
    g.node("Conv", &["x", "wd"], &["d"], dw);
    g.node("Relu", &["d"], &["r"], vec![]);
    g.node("Conv", &["r", "wp", "bp"], &["p"], vec![]);
    g.node("Add", &["p", "res"], &["y"], vec![]);
    let (c7, m7) = (128, 80);
    let mut g7 = Model::new();
    g7.input("x", &[1, c7, 7, 7]);
    g7.init("w", &[m7, c7, 3, 3], rand_vec(m7 * c7 * 9, 24));
    g7.init("b", &[m7], rand_vec(m7, 25));
    g7.output("y", &[1, m7, 7, 7]);
    let pads = vec![("pads", Attr::Ints(vec![1, 1, 1, 1]))];
    g7.node("Conv", &["x", "w", "b"], &["c"], pads);
    g7.node("Relu", &["c"], &["y"], vec![]);
    let cases = [
        (
            "pad_proj",
            g.bytes(),
            ".gemm_t",
            vec![(vec![1, c, 14, 14], 26), (vec![1, m, 14, 14], 27)],
        ),
        (
            "pad_wino",
            g7.bytes(),
            ".winograd_gemm_t",
            vec![(vec![1, c7, 7, 7], 28)],
        ),
    ];
    for (name, model, op, inputs) in cases {
        let mut o = bundlec::Options::new(name);
        o.cpu = "x86-64-v4".into();
        let compiled = bundlec_tests::harness::compile_with(&model, o);
        let file = format!("{name}.o");
        let ins = bundlec::emit::inspect::inspect(&file, &compiled.bundle.object).expect("inspect");
        let names: Vec<&str> = ins.ops.iter().map(|op| op.name.as_str()).collect();
        assert!(
            names.iter().any(|n| n.ends_with(op)),
            "{name}: {op} in {names:?}"
        );
        let xs: Vec<(Vec<usize>, Vec<f32>)> = inputs
            .iter()
            .map(|(shape, seed)| (shape.clone(), rand_vec(shape.iter().product(), *seed)))
            .collect();
        let want = tract_run(&model, &xs);
        let flat: Vec<Vec<f32>> = xs.into_iter().map(|(_, v)| v).collect();
        let out = if name == "pad_proj" { m * 196 } else { m7 * 49 };
        let got = run_c(&compiled, &flat, &[out]);
        assert_close(&got, &want, TOL, name);
    }
}

/// A 1x1 convolution read only by a depthwise one (an inverted residual's expansion, 32x32 pixels) splits its
/// output channels into row groups (`GemmSpec::row_groups`; 36 channels: groups of 8 and a tail of 4) and still
/// matches tract, with each kernel set this CPU runs.
#[test]
fn expansion_feeding_a_depthwise_conv_matches_tract() {
    use bundlec_tests::onnx::{Attr, Model};
    let (c, m) = (8, 36);
    let mut g = Model::new();
    g.input("x", &[1, c, 32, 32]);
    g.init("we", &[m, c, 1, 1], rand_vec(m * c, 11));
    g.init("be", &[m], rand_vec(m, 12));
    g.init("wd", &[m, 1, 3, 3], rand_vec(m * 9, 13));
    g.output("y", &[1, m, 32, 32]);
    g.node("Conv", &["x", "we", "be"], &["e"], vec![]);
    g.node("Relu", &["e"], &["r"], vec![]);
    let dw = vec![
        ("group", Attr::Int(m as i64)),
        ("kernel_shape", Attr::Ints(vec![3, 3])),
        ("pads", Attr::Ints(vec![1, 1, 1, 1])),
    ];
    g.node("Conv", &["r", "wd"], &["y"], dw);
    let model = g.bytes();
    let x = rand_vec(c * 1024, 14);
    let want = tract_run(&model, &[(vec![1, c, 32, 32], x.clone())]);
    check_kernel_sets(&model, "feed_dw", &x, m * 1024, &want);
}

/// An expansion whose 48 channels split into 6 groups of 8 (`lower/cnn/mod.rs::feed_groups`), between
/// intermediate tensors: the entry function runs it and the depthwise convolution after it group by group
/// (`kernel/interleave.rs`), so the planner must keep the expansion's input alive until the depthwise layer
/// ends (it would otherwise hand its bytes to the depthwise output, which the later groups' expansion reads
/// over). Matches tract with each kernel set this CPU runs. Where the kernel set interleaves them, the op table
/// and the recipe hold the pair as one op of 6 tasks (`codegen::PairOp`), and the engine at 1, 2 and 4 threads,
/// the op table on one thread and the recipe Runner give the entry function's outputs bitwise.
#[test]
fn interleaved_expansion_and_depthwise_match_tract() {
    use bundlec_tests::onnx::{Attr, Model};
    let (c, m) = (8, 48);
    let mut g = Model::new();
    g.input("x", &[1, c, 32, 32]);
    g.init("we", &[m, c, 1, 1], rand_vec(m * c, 21));
    g.init("wd", &[m, 1, 3, 3], rand_vec(m * 9, 23));
    g.init("wp", &[c, m, 1, 1], rand_vec(m * c, 24));
    g.output("y", &[1, c, 32, 32]);
    g.node("Relu", &["x"], &["x0"], vec![]);
    g.node("Conv", &["x0", "we"], &["e"], vec![]);
    g.node("Relu", &["e"], &["r"], vec![]);
    let dw = vec![
        ("group", Attr::Int(m as i64)),
        ("kernel_shape", Attr::Ints(vec![3, 3])),
        ("pads", Attr::Ints(vec![1, 1, 1, 1])),
    ];
    g.node("Conv", &["r", "wd"], &["d"], dw);
    g.node("Relu", &["d"], &["d0"], vec![]);
    g.node("Conv", &["d0", "wp"], &["y"], vec![]);
    let model = g.bytes();
    let x = rand_vec(c * 1024, 25);
    let want = tract_run(&model, &[(vec![1, c, 32, 32], x.clone())]);
    check_kernel_sets_with(&model, "inter_dw", &x, c * 1024, &want, |compiled, name| {
        if !name.ends_with("generic") {
            check_pair_op(compiled, name, &x);
        }
    });
    // A fat bundle: the pair's wrapper in both op tables (its base set needs AVX2 and FMA).
    #[cfg(target_arch = "x86_64")]
    if std::arch::is_x86_feature_detected!("avx2") && std::arch::is_x86_feature_detected!("fma") {
        let mut o = bundlec::Options::new("inter_dw_fat");
        o.cpu = "x86-64-v3,x86-64-v4".into();
        let fat = bundlec_tests::harness::compile_with(&model, o);
        check_pair_op(&fat, "inter_dw_fat", &x);
    } else {
        eprintln!("SKIPPED: inter_dw_fat (this CPU lacks AVX2 and FMA)");
    }
}

/// The interleaved pair of `compiled` (the model of `interleaved_expansion_and_depthwise_match_tract`, input
/// `x`) is one op of 6 tasks in the recipe and the op table, followed in the table by its two kernels alone (for
/// thread counts that do not divide 6), and the op table on one thread, the engine at 1, 2, 3 threads (the
/// pair's op) and 4 and 8 (its kernels alone) and the recipe Runner give the entry function's output bitwise.
fn check_pair_op(compiled: &bundlec_tests::harness::Compiled, name: &str, x: &[f32]) {
    let c = x.len() / 1024;
    let recipe: serde_json::Value = serde_json::from_str(&compiled.bundle.recipe).unwrap();
    let runs = recipe["execution"]["runs"].as_array().unwrap();
    let pair = runs
        .iter()
        .find(|r| r["name"].as_str().unwrap().contains('+'));
    let pair = pair.unwrap_or_else(|| panic!("{name}: no pair op in the recipe"));
    assert_eq!(pair["constants"][0]["value"], 6, "{name}: the pair's tasks");
    let loaded = bundlec_tests::loaded::Loaded::open(compiled);
    // SAFETY: config and entry come from the bundle just compiled for them.
    let b =
        unsafe { bundle_rt::Bundle::new(loaded.config, loaded.entry, &compiled.bundle.weights) }
            .expect("bundle");
    let view = *b.view();
    let pair_ops: Vec<usize> = (0..view.ops().len())
        .filter(|&i| view.op_name(i).contains('+'))
        .collect();
    assert_eq!(pair_ops.len(), 1, "{name}: pair ops in the op table");
    let p = pair_ops[0];
    let pairing: Vec<u32> = view.ops()[p..p + 3].iter().map(|o| o.pairing).collect();
    assert_eq!(
        pairing,
        [6 << 8 | 1, 6 << 8 | 2, 6 << 8 | 2],
        "{name}: the pair and its kernels"
    );
    let halves: Vec<&str> = view.op_name(p).split('+').collect();
    assert_eq!(
        [view.op_name(p + 1), view.op_name(p + 2)],
        [halves[0], halves[1]]
    );
    assert_eq!(
        view.ops()[p + 2].layer,
        view.ops()[p].layer + 1,
        "{name}: depthwise layer"
    );
    for (threads, paired) in [(1, true), (2, true), (3, true), (4, false), (8, false)] {
        let tasks: Vec<u32> = view.ops()[p..p + 3]
            .iter()
            .map(|o| o.tasks_on(threads))
            .collect();
        assert_eq!(tasks[0] > 0, paired, "{name}: {threads} threads");
        assert_eq!(
            tasks[1] > 0 && tasks[2] > 0,
            !paired,
            "{name}: {threads} threads"
        );
    }
    let run = |how: usize| -> Vec<f32> {
        let mut i = b.instance().expect("instance");
        i.set_input("x", x).expect("input");
        match how {
            0 => i.run().expect("entry"),
            1 => i.run_ops().expect("op table"),
            t => {
                let port = bundle_rt::engine::StdPort::new();
                let mut e = bundle_rt::engine::Engine::new(port, t).expect("engine");
                e.run(&mut i).expect("engine run");
            }
        }
        i.output::<f32>("y").expect("output").to_vec()
    };
    let entry = run(0);
    let bits = |v: &[f32]| v.iter().map(|f| f.to_bits()).collect::<Vec<_>>();
    for how in [1, 2, 3, 4, 8] {
        assert_eq!(
            bits(&run(how)),
            bits(&entry),
            "{name}: run {how} vs the entry"
        );
    }
    let mut out = vec![0f32; c * 1024];
    {
        let mut r = bundle_rt::runner::Runner::new(&b, &compiled.bundle.recipe).expect("runner");
        r.bind_input_typed("x", x).expect("bind");
        r.bind_output_typed("y", &mut out).expect("bind");
        r.execute().expect("execute");
        r.wait().expect("wait");
    }
    assert_eq!(bits(&out), bits(&entry), "{name}: Runner vs the entry");
}

/// Residual epilogues writing over their residual's buffer (`plan/in_place.rs`): a bottleneck block between two
/// other convolutions (so that its input and output are intermediate tensors) on 32x32 planes (a GEMM adding
/// the residual in its micro-kernel epilogue, K = 64) and on 14x14 ones (computed transposed where the kernel
/// set has AVX-512), then a 1x1 convolution whose residual is also its input, which must keep its own buffer.
/// The recipe shows the bottleneck's output sharing its residual's bytes and the other not; the outputs match
/// tract with each kernel set this CPU runs.
#[test]
fn residual_in_place_matches_tract() {
    use bundlec_tests::onnx::Model;
    let (c, m) = (32, 64);
    for hw in [32, 14] {
        let mut g = Model::new();
        g.input("x", &[1, c, hw, hw]);
        for (i, (o, k)) in [(c, c), (m, c), (c, m), (c, c), (c, c)].iter().enumerate() {
            g.init(
                &format!("w{i}"),
                &[*o, *k, 1, 1],
                rand_vec(o * k, 30 + i as u64),
            );
        }
        g.output("y", &[1, c, hw, hw]);
        g.node("Conv", &["x", "w0"], &["x0"], vec![]); // conv_0
        g.node("Relu", &["x0"], &["x1"], vec![]);
        // The expansion reads a Sigmoid of x1: x1 (the residual) then has a reader other than a 1x1
        // convolution and stays planes, not the channel blocks (`lower/cnn/blocked.rs`) that conv_4's planes
        // could not share.
        g.node("Sigmoid", &["x1"], &["x2"], vec![]);
        g.node("Conv", &["x2", "w1"], &["e"], vec![]); // conv_3
        g.node("Relu", &["e"], &["e1"], vec![]);
        g.node("Conv", &["e1", "w2"], &["f"], vec![]); // conv_5: residual x1, in place
        g.node("Add", &["f", "x1"], &["s"], vec![]);
        g.node("Relu", &["s"], &["s1"], vec![]);
        g.node("Conv", &["s1", "w3"], &["u"], vec![]); // conv_8: residual s1 is also its input
        g.node("Add", &["u", "s1"], &["v"], vec![]);
        g.node("Conv", &["v", "w4"], &["y"], vec![]);
        let model = g.bytes();
        let x = rand_vec(c * hw * hw, 40);
        let want = tract_run(&model, &[(vec![1, c, hw, hw], x.clone())]);
        let name = format!("in_place{hw}");
        check_kernel_sets_with(&model, &name, &x, c * hw * hw, &want, |compiled, name| {
            // Per kernel run: the distinct offsets of its activation arguments of the block's size (its
            // output, residual and, for conv_8, input), when it has at least two such arguments.
            let recipe: serde_json::Value = serde_json::from_str(&compiled.bundle.recipe).unwrap();
            let bytes = (c * hw * hw * 4) as u64;
            let distinct = |node: &str| -> Vec<usize> {
                (recipe["execution"]["runs"].as_array().unwrap().iter())
                    .filter(|r| r["name"].as_str().unwrap().starts_with(node))
                    .filter_map(|r| {
                        let mut offs: Vec<u64> = (r["arguments"].as_array().unwrap().iter())
                            .filter(|a| a["name"] == "activations" && a["size"] == bytes)
                            .map(|a| a["offset"].as_u64().unwrap())
                            .collect();
                        let n = offs.len();
                        offs.sort();
                        offs.dedup();
                        (n >= 2).then_some(offs.len())
                    })
                    .collect()
            };
            // conv_5's output and residual share; conv_8's output keeps its own bytes beside its input.
            assert_eq!(distinct("conv_5"), [1], "{name}");
            assert_eq!(distinct("conv_8"), [2], "{name}");
        });
    }
}

/// Compiles `model` as `NAME_<cpu>` with each kernel set this CPU runs (saying loudly which it skips), runs it from
/// C on the one input `x` and checks its `out_len` outputs against `want`.
fn check_kernel_sets(model: &[u8], name: &str, x: &[f32], out_len: usize, want: &[Vec<f32>]) {
    check_kernel_sets_with(model, name, x, out_len, want, |_, _| {});
}

/// [`check_kernel_sets`], with `inspect` called on each compiled bundle and its name before it runs.
fn check_kernel_sets_with(
    model: &[u8],
    name: &str,
    x: &[f32],
    out_len: usize,
    want: &[Vec<f32>],
    inspect: impl Fn(&bundlec_tests::harness::Compiled, &str),
) {
    for (cpu, runnable) in bundlec_tests::harness::kernel_variants() {
        if !runnable {
            eprintln!("SKIPPED: {name} with --cpu {cpu} (this CPU lacks its features)");
            continue;
        }
        let full = format!("{name}_{}", cpu.replace('-', "_"));
        let mut o = bundlec::Options::new(&full);
        o.cpu = cpu.to_string();
        let compiled = bundlec_tests::harness::compile_with(model, o);
        inspect(&compiled, &full);
        let got = run_c(&compiled, &[x.to_vec()], &[out_len]);
        assert_close(&got, want, TOL, &format!("{name} {cpu}"));
    }
}
