//! The ops added for real models (data movement, reductions, normalisations, resize, elementwise math) checked
//! against tract, the independent reference: each case is a small model with run-time float inputs and constant
//! index arguments, compiled by bundlec, linked with `cc`, run, and compared with tract running the same bytes
//! (max scaled error 1e-4, SPEC §11).

use bundlec_tests::harness::{compile, run_c, tract_run};
use bundlec_tests::onnx::{Attr, Model};
use bundlec_tests::{max_scaled_error, rand_vec};

/// One op applied to run-time input `x` (and optional extra run-time inputs), with i64 / f32 initializers.
struct Case {
    name: &'static str,
    op: &'static str,
    x: Vec<usize>,
    extra: Vec<(&'static str, Vec<usize>)>,
    ints: Vec<(&'static str, Vec<i64>)>,
    floats: Vec<(&'static str, Vec<usize>, Vec<f32>)>,
    attrs: Vec<(&'static str, Attr)>,
    out: Vec<usize>,
    opset: i64,
}

fn case(name: &'static str, op: &'static str, x: &[usize], out: &[usize]) -> Case {
    Case {
        name,
        op,
        x: x.to_vec(),
        extra: vec![],
        ints: vec![],
        floats: vec![],
        attrs: vec![],
        out: out.to_vec(),
        opset: 17,
    }
}

impl Case {
    fn ints(mut self, n: &'static str, v: &[i64]) -> Self {
        self.ints.push((n, v.to_vec()));
        self
    }
    fn floats(mut self, n: &'static str, s: &[usize], v: Vec<f32>) -> Self {
        self.floats.push((n, s.to_vec(), v));
        self
    }
    fn attr(mut self, k: &'static str, a: Attr) -> Self {
        self.attrs.push((k, a));
        self
    }
    fn input(mut self, n: &'static str, s: &[usize]) -> Self {
        self.extra.push((n, s.to_vec()));
        self
    }
    fn opset(mut self, o: i64) -> Self {
        self.opset = o;
        self
    }
    /// `inputs` lists the node's inputs by name ("" for an omitted optional one).
    fn check(self, inputs: &[&str]) {
        let mut m = Model::new();
        m.opset = self.opset;
        m.input("x", &self.x);
        let mut vals = vec![(self.x.clone(), rand_vec(self.x.iter().product(), 7))];
        for (i, (n, s)) in self.extra.iter().enumerate() {
            m.input(n, s);
            vals.push((s.clone(), rand_vec(s.iter().product(), 8 + i as u64)));
        }
        for (n, v) in &self.ints {
            m.init_i64(n, v.clone());
        }
        for (n, s, v) in &self.floats {
            m.init(n, s, v.clone());
        }
        m.output("y", &self.out);
        m.node(self.op, inputs, &["y"], self.attrs);
        let bytes = m.bytes();
        let c = compile(&bytes, &format!("t_{}", self.name));
        let flat: Vec<Vec<f32>> = vals.iter().map(|(_, v)| v.clone()).collect();
        let got = run_c(&c, &flat, &[self.out.iter().product()]);
        let want = tract_run(&bytes, &vals);
        let e = max_scaled_error(&got[0], &want[0]);
        assert!(e <= 1e-4, "{}: max scaled error {e:e} vs tract", self.name);
    }
}

#[test]
fn slice_pad_expand_tile_gather_split() {
    case("slice_neg", "Slice", &[4, 7, 5], &[2, 3, 5])
        .ints("st", &[3, -1])
        .ints("en", &[0, 0])
        .ints("ax", &[0, 1])
        .ints("sp", &[-2, -2])
        .check(&["x", "st", "en", "ax", "sp"]);
    for (name, mode) in [
        ("pad_reflect", "reflect"),
        ("pad_edge", "edge"),
        ("pad_const", "constant"),
    ] {
        case(name, "Pad", &[2, 3, 5, 4], &[2, 3, 8, 7])
            .ints("p", &[0, 0, 2, 1, 0, 0, 1, 2])
            .attr("mode", Attr::Str(mode))
            .check(&["x", "p"]);
    }
    case("expand", "Expand", &[3, 1, 5], &[2, 3, 4, 5])
        .ints("s", &[2, 1, 4, 1])
        .check(&["x", "s"]);
    case("tile", "Tile", &[2, 3], &[4, 9])
        .ints("r", &[2, 3])
        .check(&["x", "r"]);
    case("gather_axis1", "Gather", &[3, 5, 4], &[3, 4, 4])
        .ints("i", &[4, 0, -1, 2])
        .attr("axis", Attr::Int(1))
        .check(&["x", "i"]);
}

#[test]
fn reductions_and_argless_norms() {
    // ReduceSum takes axes as an input from opset 13, the others from 18.
    case("rsum", "ReduceSum", &[2, 3, 4, 5], &[2, 1, 4, 1])
        .ints("a", &[1, 3])
        .opset(13)
        .check(&["x", "a"]);
    for (name, op) in [
        ("rmax", "ReduceMax"),
        ("rl2", "ReduceL2"),
        ("rlse", "ReduceLogSumExp"),
        ("rprod", "ReduceProd"),
    ] {
        // Gapped axes (transpose first), keepdims.
        case(name, op, &[2, 3, 4, 5], &[2, 1, 4, 1])
            .attr("axes", Attr::Ints(vec![1, 3]))
            .opset(13)
            .check(&["x"]);
    }
    case("rmean_last", "ReduceMean", &[3, 7, 9], &[3, 7])
        .attr("axes", Attr::Ints(vec![-1]))
        .attr("keepdims", Attr::Int(0))
        .opset(13)
        .check(&["x"]);
    case("logsoftmax", "LogSoftmax", &[3, 11], &[3, 11]).check(&["x"]);
    case("layernorm", "LayerNormalization", &[2, 5, 12], &[2, 5, 12])
        .floats("g", &[12], rand_vec(12, 3))
        .floats("b", &[12], rand_vec(12, 4))
        .check(&["x", "g", "b"]);
    case(
        "instnorm",
        "InstanceNormalization",
        &[2, 3, 5, 6],
        &[2, 3, 5, 6],
    )
    .floats("g", &[3], rand_vec(3, 5))
    .floats("b", &[3], rand_vec(3, 6))
    .check(&["x", "g", "b"]);
    case("lrn", "LRN", &[2, 7, 3, 5], &[2, 7, 3, 5])
        .attr("size", Attr::Int(3))
        .attr("alpha", Attr::Float(0.2))
        .check(&["x"]);
}

#[test]
fn resize_modes() {
    case("resize_linear", "Resize", &[1, 2, 5, 7], &[1, 2, 10, 3])
        .floats("sc", &[4], vec![1.0, 1.0, 2.0, 0.5])
        .attr("mode", Attr::Str("linear"))
        .check(&["x", "", "sc"]);
    case(
        "resize_nearest_sizes",
        "Resize",
        &[1, 3, 4, 4],
        &[1, 3, 7, 9],
    )
    .ints("sz", &[1, 3, 7, 9])
    .attr("mode", Attr::Str("nearest"))
    .attr("coordinate_transformation_mode", Attr::Str("asymmetric"))
    .attr("nearest_mode", Attr::Str("floor"))
    .check(&["x", "", "", "sz"]);
    case("resize_align", "Resize", &[1, 1, 4, 5], &[1, 1, 7, 9])
        .ints("sz", &[1, 1, 7, 9])
        .attr("mode", Attr::Str("linear"))
        .attr("coordinate_transformation_mode", Attr::Str("align_corners"))
        .check(&["x", "", "", "sz"]);
}

#[test]
fn elementwise_math() {
    for (name, op) in [
        ("erf", "Erf"),
        ("softplus", "Softplus"),
        ("softsign", "Softsign"),
        ("floor", "Floor"),
        ("ceil", "Ceil"),
        ("round", "Round"),
        ("sign", "Sign"),
    ] {
        case(name, op, &[3, 37], &[3, 37]).check(&["x"]);
    }
    case("prelu", "PRelu", &[2, 3, 4], &[2, 3, 4])
        .floats("s", &[3, 1], vec![0.1, 0.2, 0.3])
        .check(&["x", "s"]);
    case("pow", "Pow", &[2, 9], &[2, 9])
        .floats(
            "e",
            &[9],
            vec![2.0, 3.0, -1.0, 0.0, 1.0, 2.0, 4.0, 5.0, 3.0],
        )
        .check(&["x", "e"]);
    case("pow_abs_frac", "Pow", &[5, 5], &[5, 5])
        .input("e", &[5, 5])
        .check(&["x", "e"]);
}

#[test]
fn conv_transpose() {
    let w = |n: usize, seed: u64| rand_vec(n, seed);
    case("deconv_s2", "ConvTranspose", &[1, 3, 5, 4], &[1, 4, 11, 9])
        .floats("w", &[3, 4, 3, 3], w(108, 1))
        .floats("b", &[4], w(4, 2))
        .attr("strides", Attr::Ints(vec![2, 2]))
        .check(&["x", "w", "b"]);
    case(
        "deconv_pads_outpad",
        "ConvTranspose",
        &[2, 2, 4, 6],
        &[2, 3, 8, 12],
    )
    .floats("w", &[2, 3, 3, 3], w(54, 3))
    .attr("strides", Attr::Ints(vec![2, 2]))
    .attr("pads", Attr::Ints(vec![1, 1, 1, 1]))
    .attr("output_padding", Attr::Ints(vec![1, 1]))
    .check(&["x", "w"]);
    case(
        "deconv_group_dil",
        "ConvTranspose",
        &[1, 4, 5, 5],
        &[1, 6, 9, 7],
    )
    .floats("w", &[4, 3, 3, 2], w(72, 4))
    .attr("group", Attr::Int(2))
    .attr("dilations", Attr::Ints(vec![2, 2]))
    .check(&["x", "w"]);
}

#[test]
fn compare_logic_where() {
    // min(x, y) and a clamp through Less / Greater / Or / Not / Where with broadcasting.
    let mut m = Model::new();
    m.input("x", &[3, 4, 5]).input("y", &[4, 1]);
    m.init("z", &[1], vec![0.25]);
    m.output("out", &[3, 4, 5]);
    m.node("Less", &["x", "y"], &["lt"], vec![]);
    m.node("Greater", &["x", "z"], &["gt"], vec![]);
    m.node("Or", &["lt", "gt"], &["either"], vec![]);
    m.node("Not", &["either"], &["neither"], vec![]);
    m.node("Where", &["lt", "x", "y"], &["mn"], vec![]);
    m.node("Where", &["neither", "z", "mn"], &["out"], vec![]);
    let bytes = m.bytes();
    let c = compile(&bytes, "t_where");
    let vals = vec![
        (vec![3, 4, 5], rand_vec(60, 11)),
        (vec![4, 1], rand_vec(4, 12)),
    ];
    let flat: Vec<Vec<f32>> = vals.iter().map(|(_, v)| v.clone()).collect();
    let got = run_c(&c, &flat, &[60]);
    let want = tract_run(&bytes, &vals);
    assert_eq!(got[0], want[0], "where/compare must be exact");
}

/// Reshapes emit no copy unless they make a model output (their readers read the reshape's input): a head split
/// of an activation and of the model input itself, next to a reshape with two readers and a transpose of a
/// transpose. Every output against tract.
#[test]
fn reshape_then_transpose_reads_the_reshape_input() {
    let mut m = Model::new();
    m.opset = 17;
    m.input("x", &[2, 6, 8]);
    m.init_i64("s4", vec![2, 6, 2, 4]);
    m.init_i64("s2", vec![2, 48]);
    m.node("Relu", &["x"], &["a"], vec![]);
    m.node("Reshape", &["a", "s4"], &["a4"], vec![]);
    m.node(
        "Transpose",
        &["a4"],
        &["y1"],
        vec![("perm", Attr::Ints(vec![0, 2, 1, 3]))],
    );
    m.node("Reshape", &["x", "s4"], &["x4"], vec![]);
    m.node(
        "Transpose",
        &["x4"],
        &["t"],
        vec![("perm", Attr::Ints(vec![0, 2, 1, 3]))],
    );
    m.node(
        "Transpose",
        &["t"],
        &["y2"],
        vec![("perm", Attr::Ints(vec![0, 1, 3, 2]))],
    );
    m.node("Reshape", &["a", "s2"], &["a2"], vec![]);
    m.node(
        "Transpose",
        &["a2"],
        &["y3"],
        vec![("perm", Attr::Ints(vec![1, 0]))],
    );
    m.node("Sigmoid", &["a2"], &["y4"], vec![]);
    let outs: [(&str, Vec<usize>); 4] = [
        ("y1", vec![2, 2, 6, 4]),
        ("y2", vec![2, 2, 4, 6]),
        ("y3", vec![48, 2]),
        ("y4", vec![2, 48]),
    ];
    for (n, s) in &outs {
        m.output(n, s);
    }
    let bytes = m.bytes();
    let c = compile(&bytes, "t_reshape_transpose");
    let x = rand_vec(96, 9);
    let got = run_c(&c, std::slice::from_ref(&x), &[96; 4]);
    let want = tract_run(&bytes, &[(vec![2, 6, 8], x)]);
    for (i, (n, _)) in outs.iter().enumerate() {
        // Data movement is exact; the sigmoid within SPEC §11's 1e-4.
        let tol = if *n == "y4" { 1e-4 } else { 0.0 };
        let e = max_scaled_error(&got[i], &want[i]);
        assert!(e <= tol, "{n}: max scaled error {e:e} vs tract");
    }
}

/// An attention block whose head splits and merge move no data: Q's and V's head splits (`Transpose` keeping
/// rows whole) are read by their MatMuls through strides, Kᵀ is one gather (two transposes fused), and the
/// context MatMul writes its result in the merged layout, which is also a model output, before a reshape and
/// the output projection. Batch 2, 3 heads of 4, sequence 5; against tract within SPEC §11's 1e-4.
#[test]
fn attention_head_views() {
    let (b, s, h, d) = (2usize, 5usize, 3usize, 4usize);
    let e = h * d;
    let mut m = Model::new();
    m.opset = 17;
    m.input("x", &[b, s, e]);
    m.init_i64("split", vec![b as i64, s as i64, h as i64, d as i64]);
    m.init_i64("merge", vec![b as i64, s as i64, e as i64]);
    for (i, w) in ["wq", "wk", "wv", "wo"].iter().enumerate() {
        m.init(w, &[e, e], rand_vec(e * e, 20 + i as u64));
    }
    let heads = || Attr::Ints(vec![0, 2, 1, 3]);
    for (w, p) in [("wq", "q"), ("wk", "k"), ("wv", "v")] {
        m.node("MatMul", &["x", w], &[&format!("{p}m")], vec![]);
        m.node(
            "Reshape",
            &[&format!("{p}m"), "split"],
            &[&format!("{p}r")],
            vec![],
        );
        m.node(
            "Transpose",
            &[&format!("{p}r")],
            &[&format!("{p}h")],
            vec![("perm", heads())],
        );
    }
    m.node(
        "Transpose",
        &["kh"],
        &["kt"],
        vec![("perm", Attr::Ints(vec![0, 1, 3, 2]))],
    );
    m.node("MatMul", &["qh", "kt"], &["scores"], vec![]);
    m.node(
        "Softmax",
        &["scores"],
        &["p"],
        vec![("axis", Attr::Int(-1))],
    );
    m.node("MatMul", &["p", "vh"], &["ctx"], vec![]);
    m.node("Transpose", &["ctx"], &["merged"], vec![("perm", heads())]);
    m.node("Reshape", &["merged", "merge"], &["flat"], vec![]);
    m.node("MatMul", &["flat", "wo"], &["y"], vec![]);
    m.output("y", &[b, s, e]);
    m.output("merged", &[b, s, h, d]);
    let bytes = m.bytes();
    let x = rand_vec(b * s * e, 7);
    let want = tract_run(&bytes, &[(vec![b, s, e], x.clone())]);
    for (cpu, runs) in bundlec_tests::harness::kernel_variants() {
        if !runs {
            eprintln!("SKIPPED: attention views with --cpu {cpu} (this CPU cannot run it)");
            continue;
        }
        let mut opts = bundlec::Options::new(&format!("t_attention_{}", cpu.replace('-', "_")));
        opts.cpu = cpu.to_string();
        let c = bundlec_tests::harness::compile_with(&bytes, opts);
        let got = run_c(&c, std::slice::from_ref(&x), &[b * s * e; 2]);
        for (i, n) in ["y", "merged"].iter().enumerate() {
            let err = max_scaled_error(&got[i], &want[i]);
            assert!(
                err <= 1e-4,
                "--cpu {cpu} {n}: max scaled error {err:e} vs tract"
            );
        }
    }
}
