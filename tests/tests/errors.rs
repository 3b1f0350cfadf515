//! Bad input gets a clear error naming what is wrong — never a panic: unsupported ops (all listed at once),
//! malformed protobuf, inconsistent shapes, bad `--input` specs and bundle names, bad profiles and calibration
//! samples.

use bundlec::{Error, InputSpec, Options};
use bundlec_tests::harness::scratch;
use bundlec_tests::onnx::{Attr, Model};

fn compile_bytes(bytes: &[u8], opts: &Options) -> Result<bundlec::Bundle, Error> {
    let d = scratch(&format!("err_{}", opts.name));
    let p = d.join("m.onnx");
    std::fs::write(&p, bytes).expect("write");
    bundlec::compile_file(&p, opts)
}

#[test]
fn every_unsupported_node_is_listed() {
    let mut m = Model::new();
    m.input("x", &[1, 4]).output("y", &[1, 4]);
    m.node("GridSample", &["x", "x"], &["a"], vec![])
        .node("Relu", &["a"], &["b"], vec![])
        .node("Erfinv", &["b"], &["c"], vec![])
        .node("Add", &["c", "x"], &["y"], vec![]);
    let e = compile_bytes(&m.bytes(), &Options::new("u")).expect_err("unsupported");
    let Error::Unsupported(list) = &e else {
        panic!("wrong error {e}")
    };
    let ops: Vec<&str> = list.iter().map(|u| u.op.as_str()).collect();
    assert_eq!(ops, ["GridSample", "Erfinv"], "{e}");
    let msg = e.to_string();
    assert!(
        msg.contains("gridsample_0") && msg.contains("erfinv_2") && msg.contains("bundlec ops"),
        "{msg}"
    );
}

#[test]
fn malformed_protobuf_is_an_error() {
    let e = compile_bytes(
        b"\x08\x07garbage that is not a model\xff\xff",
        &Options::new("bad"),
    )
    .expect_err("malformed");
    assert!(matches!(e, Error::Malformed { .. }), "{e}");
    let mut truncated = bundlec_tests::models::lenet(1);
    truncated.truncate(truncated.len() / 2);
    assert!(compile_bytes(&truncated, &Options::new("trunc")).is_err());
    // A model with no nodes and an output that nothing produces.
    let mut empty = Model::new();
    empty.input("x", &[2]).output("y", &[2]);
    let e = compile_bytes(&empty.bytes(), &Options::new("empty")).expect_err("dangling output");
    assert!(e.to_string().contains("'y'"), "{e}");
}

#[test]
fn inconsistent_shapes_name_the_node() {
    let mut m = Model::new();
    m.input("x", &[2, 3]).output("y", &[2, 5]);
    m.init("w", &[4, 5], vec![0.0; 20]);
    m.node("MatMul", &["x", "w"], &["y"], vec![]);
    let e = compile_bytes(&m.bytes(), &Options::new("mm")).expect_err("shape");
    assert!(
        matches!(&e, Error::InvalidNode { node, .. } if node == "matmul_0"),
        "{e}"
    );
    let mut c = Model::new();
    c.input("x", &[1, 3, 8, 8]).output("y", &[1, 4, 8, 8]);
    c.init("w", &[4, 2, 3, 3], vec![0.0; 72]);
    c.node(
        "Conv",
        &["x", "w"],
        &["y"],
        vec![("pads", Attr::Ints(vec![1, 1, 1, 1]))],
    );
    let e = compile_bytes(&c.bytes(), &Options::new("cv")).expect_err("groups");
    assert!(e.to_string().contains("conv_0"), "{e}");
}

#[test]
fn bad_input_specs_and_names() {
    assert!("x:1x3xf99".parse::<InputSpec>().is_err());
    assert!(":1x2".parse::<InputSpec>().is_err());
    let s: InputSpec = "data:1x3x224x224xf32".parse().expect("spec");
    assert_eq!(s.shape, vec![1, 3, 224, 224]);
    let mut opts = Options::new("spec");
    opts.inputs = vec!["nosuch:1x4".parse().expect("spec")];
    let mut m = Model::new();
    m.input("x", &[1, 4]).output("y", &[1, 4]);
    m.node("Relu", &["x"], &["y"], vec![]);
    let e = compile_bytes(&m.bytes(), &opts).expect_err("unknown input");
    assert!(
        e.to_string().contains("nosuch") && e.to_string().contains("x"),
        "{e}"
    );
    let e = compile_bytes(&m.bytes(), &Options::new("3bad-name")).expect_err("name");
    assert!(e.to_string().contains("--name"), "{e}");
    // A libc function name would clash with the entry symbol at link time.
    let e = compile_bytes(&m.bytes(), &Options::new("abs")).expect_err("libc name");
    assert!(
        e.to_string().contains("'abs'") && e.to_string().contains("clash"),
        "{e}"
    );
}

#[test]
fn bad_index_arguments_name_the_node() {
    // Slice with run-time starts: unsupported, naming the node and the input.
    let mut m = Model::new();
    m.input("x", &[4, 4]).input("s", &[1]);
    m.init_i64("e", vec![3]);
    m.output("y", &[2, 4]);
    m.node("Slice", &["x", "s", "e"], &["y"], vec![]);
    let e = compile_bytes(&m.bytes(), &Options::new("slice_rt")).expect_err("runtime starts");
    let s = e.to_string();
    assert!(
        s.contains("slice_0") && s.contains("'s'") && s.contains("constant"),
        "{s}"
    );
    // Pad whose pads do not match the rank.
    let mut m = Model::new();
    m.input("x", &[4, 4]);
    m.init_i64("p", vec![1, 1]);
    m.output("y", &[5, 5]);
    m.node("Pad", &["x", "p"], &["y"], vec![]);
    let e = compile_bytes(&m.bytes(), &Options::new("pad_bad")).expect_err("bad pads");
    assert!(
        e.to_string().contains("pad_0") && e.to_string().contains("pads"),
        "{e}"
    );
    // Gather with float indices.
    let mut m = Model::new();
    m.input("x", &[4, 4]).input("i", &[2]);
    m.output("y", &[2, 4]);
    m.node("Gather", &["x", "i"], &["y"], vec![]);
    let e = compile_bytes(&m.bytes(), &Options::new("gather_f")).expect_err("float indices");
    assert!(
        e.to_string().contains("gather_0") && e.to_string().contains("indices"),
        "{e}"
    );
}

#[test]
fn bad_profiles_and_samples_name_the_file_and_tensor() {
    use bundlec::profile::Profile;
    let d = scratch("err_profile");
    let cases = [
        ("not: [yaml", "profile"),
        (
            "version: 9\nmodel: m\nsamples: 1\nbins: 2\ntensors: {}\n",
            "version 9",
        ),
        (
            "version: 1\nmodel: m\nsamples: 1\nbins: 2\ntensors:\n  t1:\n    min: 2.0\n    max: 1.0\n    count: 1\n    range: 1.0\n    histogram: 2x0\n",
            "tensor 't1'",
        ),
        (
            "version: 1\nmodel: m\nsamples: 1\nbins: 2\ntensors:\n  t2:\n    min: 0.0\n    max: 1.0\n    count: 1\n    range: 1.0\n    histogram: 1x0 zz\n",
            "bad histogram entry 'zz'",
        ),
    ];
    for (i, (text, want)) in cases.iter().enumerate() {
        let p = d.join(format!("p{i}.yaml"));
        std::fs::write(&p, text).expect("write");
        let e = Profile::read(&p).expect_err("bad profile");
        let msg = e.to_string();
        assert!(
            msg.contains(want) && msg.contains(&format!("p{i}.yaml")),
            "{msg}"
        );
    }
    // A sample of the wrong shape names the file and both shapes.
    let npy = d.join("s.npy");
    let mut b = b"\x93NUMPY\x01\x00".to_vec();
    let h = "{'descr': '<f4', 'fortran_order': False, 'shape': (1, 3), }\n";
    b.extend_from_slice(&(h.len() as u16).to_le_bytes());
    b.extend_from_slice(h.as_bytes());
    b.extend_from_slice(&[0u8; 12]);
    std::fs::write(&npy, &b).expect("write");
    let ins = vec![("x".to_string(), vec![1, 4], bundlec::ir::DType::F32)];
    let img = bundlec::profile::inputs::ImageOptions {
        mode: bundlec::profile::inputs::ImageMode::ZeroToOne,
        resize: 0,
        mean: [0.0; 3],
        std: [1.0; 3],
        nhwc: false,
    };
    let e = bundlec::profile::inputs::load(&npy, &ins, &img).expect_err("shape");
    let msg = e.to_string();
    assert!(
        msg.contains("s.npy") && msg.contains("[1, 3]") && msg.contains("[1, 4]"),
        "{msg}"
    );
}

/// A tail whose output shape depends on the data (NonZero) is refused naming its node and pointing at
/// `--outputs`; `--outputs` then compiles the static part before it (the graph input the tail alone reads is
/// dropped), whose output matches the arithmetic; a name nothing produces is an error naming it.
#[test]
fn outputs_select_the_static_part_before_a_data_dependent_tail() {
    let mut m = Model::new();
    m.input("x", &[2, 3])
        .input("t", &[2, 3])
        .output("y", &[2, 4]);
    let w: Vec<f32> = (0..6).map(|i| i as f32 * 0.5 - 1.0).collect();
    m.init("w", &[2, 3], w.clone());
    m.node("Relu", &["x"], &["r"], vec![])
        .node("Mul", &["r", "w"], &["m"], vec![])
        .node("Add", &["m", "t"], &["s"], vec![])
        .node("NonZero", &["s"], &["y"], vec![]);
    let e = compile_bytes(&m.bytes(), &Options::new("dd")).expect_err("data-dependent");
    let msg = e.to_string();
    assert!(
        msg.contains("nonzero_3")
            && msg.contains("depends on the input data")
            && msg.contains("--outputs"),
        "{msg}"
    );
    let mut opts = Options::new("dd_head");
    opts.outputs = vec!["m".into()];
    let c = bundlec_tests::harness::compile_with(&m.bytes(), opts);
    let x: Vec<f32> = vec![-1.0, 2.0, 0.5, 3.0, -0.25, 1.5];
    let got = bundlec_tests::harness::run_c(&c, std::slice::from_ref(&x), &[6]);
    let want: Vec<f32> = x.iter().zip(&w).map(|(a, b)| a.max(0.0) * b).collect();
    assert_eq!(got[0], want);
    let mut bad = Options::new("dd_bad");
    bad.outputs = vec!["nope".into()];
    let e = compile_bytes(&m.bytes(), &bad).expect_err("unknown output");
    assert!(
        e.to_string().contains("'nope'") && e.to_string().contains("--outputs"),
        "{e}"
    );
}
