//! Single-node ONNX models for every NPU op, and a mixed CPU/NPU model, compiled with `--npu vnpu --npu-strict`
//! and run three ways on the same inputs: the entry function (the segments' CPU fallback kernels), the op table
//! with the emulator running the segments' transactions, and the recipe Runner executing the mixed recipe. The
//! emulated results must equal the CPU ones within SPEC §11's tolerance. Also checks the artefacts: one `.txn` per
//! segment that `bundlec inspect --txn` reads back (moving f32 data with AIE-ML BDs, queues and TCTs), the
//! header's segment list, the recipe's npu runs.

use bundle_rt::{Bundle, Emulator};
use bundlec::partition::PartitionOptions;
use bundlec_tests::harness::{compile_with, Compiled};
use bundlec_tests::loaded::Loaded;
use bundlec_tests::onnx::{Attr, Model};
use bundlec_tests::{assert_close, rand_vec};

fn compile_npu(model: &[u8], name: &str) -> Compiled {
    let mut o = bundlec::Options::new(name);
    o.npu = Some(PartitionOptions {
        target: bundlec::npu::NpuTarget::vnpu(),
        min_gain: -1.0,
        cache: None,
        strict: true,
        model_hash: 0,
    });
    compile_with(model, o)
}

/// Compiles with the NPU, runs entry / op table + emulator / Runner, compares; returns the segment count.
fn check(model: &[u8], name: &str) -> usize {
    let c = compile_npu(model, name);
    let segs = c.bundle.report.segments.len();
    assert!(segs > 0, "{name}: nothing on the NPU");
    for (id, _, _) in &c.bundle.report.segments {
        let txn = std::fs::read(c.dir.join(format!("{name}.{id}.txn"))).expect("txn file");
        let text = bundlec::npu::disasm::disassemble(&txn).expect("disassemble");
        // f32 data moves through AIE-ML buffer descriptors and start queues, completed by TCTs.
        assert!(
            text.contains("BLOCKWRITE") && text.contains("TCT") && text.contains("DDR_PATCH"),
            "{text}"
        );
    }
    assert!(c
        .bundle
        .header
        .contains(&format!("{}_NUM_NPU_SEGMENTS {segs}", name.to_uppercase())));
    let recipe: serde_json::Value = serde_json::from_str(&c.bundle.recipe).unwrap();
    assert_eq!(recipe["header"]["xclbin"], "vnpu.json");
    let npu_runs: Vec<_> = recipe["execution"]["runs"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|r| r["where"] == "npu")
        .collect();
    assert_eq!(npu_runs.len(), segs);
    // DynamicDispatch's call: opcode 2, arg1 the segment's `weight` instruction buffer (u32 0, u32 bytes + 8,
    // the .txn file), arg2 its size in words; `DPU` kernels without `ctrlcode`.
    for (run, (id, txn)) in npu_runs.iter().zip(&c.bundle.txns) {
        assert_eq!(run["name"], id.as_str());
        assert_eq!(
            run["constants"][0],
            serde_json::json!({"argidx": 0, "type": "int", "value": 2})
        );
        let instr = &run["arguments"][0];
        assert_eq!(instr["argidx"], 1);
        let buf = recipe["resources"]["buffers"]
            .as_array()
            .unwrap()
            .iter()
            .find(|b| b["name"] == instr["name"])
            .expect("instruction buffer declared");
        assert_eq!(buf["type"], "weight");
        assert_eq!(buf["size"], txn.len() + 8);
        assert_eq!(run["constants"][1]["argidx"], 2);
        assert_eq!(run["constants"][1]["value"], (txn.len() + 8) / 4);
    }
    for k in recipe["resources"]["kernels"].as_array().unwrap() {
        assert_eq!(k["instance"], "DPU");
        assert!(k.get("ctrlcode").is_none(), "{k}");
    }

    let l = Loaded::open(&c);
    // SAFETY: config and entry come from the bundle just compiled for them.
    let b = unsafe { Bundle::new(l.config, l.entry, &c.bundle.weights) }.expect("bundle");
    assert_eq!(b.view().npu_segments().count(), segs);
    let ins: Vec<(String, Vec<f32>)> = b
        .inputs()
        .enumerate()
        .map(|(k, t)| (t.name.to_string(), rand_vec(t.elements, 7 + k as u64)))
        .collect();
    let outs: Vec<(String, usize)> = b
        .outputs()
        .map(|t| (t.name.to_string(), t.elements))
        .collect();
    let run = |device: bool| -> Vec<Vec<f32>> {
        let mut i = b.instance().expect("instance");
        for (n, v) in &ins {
            i.set_input(n, v).expect("input");
        }
        if device {
            i.run_ops_with_device(Some(&mut Emulator::vnpu()))
                .expect("emulator run");
        } else {
            i.run().expect("entry");
        }
        outs.iter()
            .map(|(n, _)| i.output::<f32>(n).expect("output").to_vec())
            .collect()
    };
    let want = run(false);
    assert_close(
        &run(true),
        &want,
        1e-4,
        &format!("{name}: op table + emulator"),
    );
    let mut bufs: Vec<Vec<f32>> = outs.iter().map(|(_, n)| vec![0.0; *n]).collect();
    {
        let mut r = bundle_rt::runner::Runner::new(&b, &c.bundle.recipe).expect("runner");
        // DynamicDispatch's meta JSON beside each transaction, read by the Runner against its segment.
        assert_eq!(c.bundle.metas.len(), segs);
        for (id, _) in &c.bundle.txns {
            let text = std::fs::read_to_string(c.dir.join(format!("{name}.{id}.meta.json")))
                .expect("meta file");
            let meta = r.check_meta(id, &text).expect("meta matches the segment");
            assert!(!meta.ops.is_empty() && !meta.tensors.is_empty());
        }
        for (n, v) in &ins {
            r.bind_input_typed(n, v).expect("bind");
        }
        for ((n, _), buf) in outs.iter().zip(bufs.iter_mut()) {
            r.bind_output_typed(n, buf).expect("bind");
        }
        r.execute().expect("execute");
        r.wait().expect("wait");
    }
    assert_close(&bufs, &want, 1e-4, &format!("{name}: Runner"));
    segs
}

/// One node `op` over runtime inputs and float initializers.
fn single(
    op: &str,
    runtime: &[(&str, &[usize])],
    inits: &[(&str, &[usize])],
    out: &[usize],
    attrs: Vec<(&str, Attr)>,
) -> Vec<u8> {
    let mut m = Model::new();
    for (n, s) in runtime {
        m.input(n, s);
    }
    for (i, (n, s)) in inits.iter().enumerate() {
        m.init(n, s, rand_vec(s.iter().product(), 50 + i as u64));
    }
    m.output("y", out);
    let names: Vec<&str> = runtime.iter().chain(inits).map(|(n, _)| *n).collect();
    m.node(op, &names, &["y"], attrs);
    m.bytes()
}

fn ints(v: &[i64]) -> Attr {
    Attr::Ints(v.to_vec())
}

#[test]
fn conv_single_node() {
    let m = single(
        "Conv",
        &[("x", &[1, 8, 15, 13])],
        &[("w", &[16, 8, 3, 3]), ("b", &[16])],
        &[1, 16, 8, 7],
        vec![("strides", ints(&[2, 2])), ("pads", ints(&[1, 1, 2, 1]))],
    );
    assert_eq!(check(&m, "npu_conv"), 1);
}

/// Model tensors named like the recipe's own buffers (`weights`, `activations`, `npu0.instr`): the recipe gives
/// its buffers other names, and the Runner still matches the CPU bundle.
#[test]
fn tensors_named_like_recipe_buffers() {
    let mut m = Model::new();
    m.input("npu0.instr", &[1, 4, 9, 9])
        .input("activations", &[1, 4, 9, 9]);
    m.init("w", &[8, 4, 3, 3], rand_vec(8 * 4 * 9, 61));
    m.output("weights", &[1, 8, 9, 9]);
    m.node("Add", &["npu0.instr", "activations"], &["s"], vec![]);
    let pads = vec![("pads", ints(&[1, 1, 1, 1]))];
    m.node("Conv", &["s", "w"], &["weights"], pads);
    check(&m.bytes(), "npu_names");
    let c = compile_npu(&m.bytes(), "npu_names");
    let recipe: serde_json::Value = serde_json::from_str(&c.bundle.recipe).unwrap();
    let names: Vec<&str> = recipe["resources"]["buffers"]
        .as_array()
        .unwrap()
        .iter()
        .map(|b| b["name"].as_str().unwrap())
        .collect();
    let want = [
        "npu0.instr",
        "activations",
        "weights",
        "weights_1",
        "activations_1",
        "npu0.instr_1",
    ];
    assert_eq!(names, want);
}

#[test]
fn depthwise_conv_single_node() {
    let m = single(
        "Conv",
        &[("x", &[1, 16, 12, 12])],
        &[("w", &[16, 1, 3, 3])],
        &[1, 16, 12, 12],
        vec![("group", Attr::Int(16)), ("pads", ints(&[1, 1, 1, 1]))],
    );
    check(&m, "npu_dwconv");
}

#[test]
fn matmul_and_gemm_single_node() {
    check(
        &single(
            "MatMul",
            &[("x", &[2, 5, 40])],
            &[("w", &[40, 33])],
            &[2, 5, 33],
            vec![],
        ),
        "npu_matmul",
    );
    check(
        &single(
            "Gemm",
            &[("x", &[3, 64])],
            &[("w", &[10, 64]), ("c", &[10])],
            &[3, 10],
            vec![("transB", Attr::Int(1))],
        ),
        "npu_gemm",
    );
}

#[test]
fn elementwise_single_nodes() {
    check(
        &single(
            "Add",
            &[("a", &[2, 3, 10, 10]), ("b", &[2, 3, 10, 10])],
            &[],
            &[2, 3, 10, 10],
            vec![],
        ),
        "npu_add",
    );
    check(
        &single(
            "Mul",
            &[("a", &[1, 8, 6, 6])],
            &[("s", &[8, 1, 1])],
            &[1, 8, 6, 6],
            vec![],
        ),
        "npu_mul",
    );
    check(
        &single("Relu", &[("x", &[4, 1000])], &[], &[4, 1000], vec![]),
        "npu_relu",
    );
    let mut m = Model::new();
    m.input("x", &[3, 77]).output("y", &[3, 77]);
    m.init("lo", &[], vec![-0.3]).init("hi", &[], vec![0.4]);
    m.node("Clip", &["x", "lo", "hi"], &["y"], vec![]);
    check(&m.bytes(), "npu_clip");
}

#[test]
fn pools_single_nodes() {
    check(
        &single(
            "MaxPool",
            &[("x", &[1, 6, 17, 17])],
            &[],
            &[1, 6, 9, 9],
            vec![
                ("kernel_shape", ints(&[3, 3])),
                ("strides", ints(&[2, 2])),
                ("pads", ints(&[1, 1, 1, 1])),
            ],
        ),
        "npu_maxpool",
    );
    check(
        &single(
            "AveragePool",
            &[("x", &[1, 6, 10, 10])],
            &[],
            &[1, 6, 10, 10],
            vec![
                ("kernel_shape", ints(&[3, 3])),
                ("pads", ints(&[1, 1, 1, 1])),
            ],
        ),
        "npu_avgpool",
    );
    check(
        &single(
            "GlobalAveragePool",
            &[("x", &[2, 20, 7, 7])],
            &[],
            &[2, 20, 1, 1],
            vec![],
        ),
        "npu_gap",
    );
}

#[test]
fn concat_single_node() {
    check(
        &single(
            "Concat",
            &[("a", &[1, 3, 5, 5]), ("b", &[1, 4, 5, 5])],
            &[("c", &[1, 2, 5, 5])],
            &[1, 9, 5, 5],
            vec![("axis", Attr::Int(1))],
        ),
        "npu_concat",
    );
}

#[test]
fn lenet_mixes_cpu_and_npu() {
    let segs = check(&bundlec_tests::models::lenet(2), "npu_lenet");
    assert!(segs >= 1);
}
