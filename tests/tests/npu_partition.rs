//! The partitioner end to end on real ONNX files: placements and reasons, the partition cache (written, reused,
//! rewritten on a key change, hostile files rejected with the field named), `--npu-strict`, the cost knob, and
//! bad target descriptions through the CLI (exit status 1 and an `error:` line).

use bundlec::npu::NpuTarget;
use bundlec::partition::{cache, partition, PartitionOptions};
use bundlec_tests::harness::scratch;
use bundlec_tests::models::lenet;
use bundlec_tests::onnx::{Attr, Model};
use std::path::{Path, PathBuf};
use std::process::Command;

fn opts(min_gain: f64, cache: Option<PathBuf>) -> PartitionOptions {
    PartitionOptions {
        target: NpuTarget::vnpu(),
        min_gain,
        cache,
        strict: false,
        model_hash: 1,
    }
}

fn lenet_file(dir: &Path) -> PathBuf {
    let p = dir.join("lenet.onnx");
    std::fs::write(&p, lenet(1)).unwrap();
    p
}

#[test]
fn lenet_places_convs_and_gemms_and_explains_the_rest() {
    let d = scratch("npu-lenet-partition");
    let g = bundlec::pipeline::optimized_graph(&lenet_file(&d), &[]).unwrap();
    let p = partition(&g, &opts(-0.9, None)).unwrap();
    assert!(!p.segments.is_empty());
    let on: Vec<&str> = p
        .placements
        .iter()
        .filter(|x| x.segment.is_some())
        .map(|x| g.nodes[x.node].onnx_op.as_str())
        .collect();
    assert!(on.contains(&"Conv") && on.contains(&"Gemm"), "{on:?}");
    for x in p.placements.iter().filter(|x| x.segment.is_none()) {
        assert!(
            x.constraint.is_some() && x.reason.is_some(),
            "node {} has no reason",
            g.nodes[x.node].name
        );
    }
    let soft = p
        .placements
        .iter()
        .find(|x| g.nodes[x.node].onnx_op == "Softmax")
        .unwrap();
    assert_eq!(soft.constraint, Some("op"));
    let table = bundlec::partition::report::table(&g, &p);
    assert!(
        table.contains("on the NPU") && table.contains("CPU nodes") && table.contains("MAC util"),
        "{table}"
    );
    // With a prohibitive gain requirement nothing pays and every placed node says why.
    let none = partition(&g, &opts(1e6, None)).unwrap();
    assert!(none.segments.is_empty());
    assert!(none.placements.iter().any(|x| x.constraint == Some("cost")));
    assert!(bundlec::partition::report::table(&g, &none).contains("nothing was placed on the NPU"));
}

#[test]
fn cache_is_written_reused_and_rewritten() {
    let d = scratch("npu-cache");
    let model = lenet_file(&d);
    let g = bundlec::pipeline::optimized_graph(&model, &[]).unwrap();
    let file = d.join("part.json");
    let p1 = partition(&g, &opts(-0.9, Some(file.clone()))).unwrap();
    assert!(!p1.from_cache);
    let doc: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&file).unwrap()).unwrap();
    let seg = &doc["segments"][0];
    for k in [
        "id",
        "inputs",
        "outputs",
        "nodes",
        "constant_initializers",
        "device",
        "generic_param",
    ] {
        assert!(seg.get(k).is_some(), "segment field {k} missing: {seg}");
    }
    // MetaDefProto's fields only (tests/py/check_metadef.py parses it with protobuf); extras are strings.
    assert_eq!(seg.as_object().unwrap().len(), 7, "{seg}");
    let total = seg["generic_param"]["cycles.total"].as_str().unwrap();
    assert_eq!(total, p1.segments[0].fused.total_cycles.to_string());
    assert_eq!(doc, cache::to_json(&g, &p1));
    let p2 = partition(&g, &opts(-0.9, Some(file.clone()))).unwrap();
    assert!(p2.from_cache);
    assert_eq!(p2.segments.len(), p1.segments.len());
    // Another flag value: another key, so the file is rewritten.
    let p3 = partition(&g, &opts(-0.8, Some(file.clone()))).unwrap();
    assert!(!p3.from_cache);
    let doc3: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&file).unwrap()).unwrap();
    assert_ne!(doc3["key"], doc["key"]);
    // A cache of the previous format (version 1) is rewritten, not refused.
    let mut old = doc3.clone();
    old["version"] = 1.into();
    std::fs::write(&file, old.to_string()).unwrap();
    let p4 = partition(&g, &opts(-0.8, Some(file.clone()))).unwrap();
    assert!(!p4.from_cache);
    let doc4: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&file).unwrap()).unwrap();
    assert_eq!(doc4["version"], cache::VERSION);
}

#[test]
fn hostile_cache_files_name_the_field() {
    let d = scratch("npu-cache-hostile");
    let model = lenet_file(&d);
    let g = bundlec::pipeline::optimized_graph(&model, &[]).unwrap();
    let file = d.join("part.json");
    partition(&g, &opts(-0.9, Some(file.clone()))).unwrap();
    let good: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&file).unwrap()).unwrap();
    type Mutation = Box<dyn Fn(&mut serde_json::Value)>;
    let cases: Vec<(Mutation, &str)> = vec![
        (
            Box::new(|v| v["segments"][0]["nodes"][0] = "no_such_tensor".into()),
            "segments[0].nodes[0]",
        ),
        (
            Box::new(|v| v["segments"][0]["nodes"][0] = 7.into()),
            "segments[0].nodes[0]",
        ),
        (Box::new(|v| v["segments"] = "x".into()), "segments"),
        (Box::new(|v| v["version"] = 99.into()), "version"),
        (
            Box::new(|v| {
                let n = v["segments"][0]["nodes"][0].clone();
                v["segments"][0]["nodes"].as_array_mut().unwrap().push(n);
            }),
            "two segments",
        ),
        (
            Box::new(|v| {
                let prob = v["rejected"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .find(|r| r["op"] == "Softmax")
                    .unwrap()["node"]
                    .clone();
                v["segments"][0]["nodes"].as_array_mut().unwrap().push(prob);
            }),
            "cannot run on the NPU",
        ),
    ];
    for (mutate, want) in cases {
        let mut v = good.clone();
        mutate(&mut v);
        std::fs::write(&file, v.to_string()).unwrap();
        let e = partition(&g, &opts(-0.9, Some(file.clone())))
            .unwrap_err()
            .to_string();
        assert!(e.contains(want) && e.contains("part.json"), "{want}: {e}");
    }
    std::fs::write(&file, "{not json").unwrap();
    let e = partition(&g, &opts(-0.9, Some(file.clone())))
        .unwrap_err()
        .to_string();
    assert!(e.contains("part.json"), "{e}");
}

#[test]
fn strict_fails_when_nothing_lands_on_the_npu() {
    let d = scratch("npu-strict");
    let mut m = Model::new();
    m.input("x", &[2, 5]).output("y", &[2, 5]);
    m.node("Softmax", &["x"], &["y"], vec![("axis", Attr::Int(1))]);
    let path = d.join("softmax.onnx");
    std::fs::write(&path, m.bytes()).unwrap();
    let mut o = bundlec::Options::new("sm");
    o.npu = Some(PartitionOptions {
        strict: true,
        ..opts(0.0, None)
    });
    let e = bundlec::compile_file(&path, &o).unwrap_err().to_string();
    assert!(
        e.contains("--npu-strict") && e.contains("Softmax") && e.contains("no NPU kernel"),
        "{e}"
    );
}

fn bundlec_cli(args: &[&str]) -> (i32, String, String) {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap();
    let out = Command::new(env!("CARGO"))
        .args(["run", "-q", "-p", "bundlec", "--bin", "bundlec", "--"])
        .args(args)
        .current_dir(root)
        .output()
        .unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into(),
        String::from_utf8_lossy(&out.stderr).into(),
    )
}

#[test]
fn cli_partition_ops_and_bad_targets() {
    let d = scratch("npu-cli");
    let model = lenet_file(&d);
    let m = model.to_str().unwrap();
    let (rc, out, _) = bundlec_cli(&["partition", m, "--npu", "vnpu", "--npu-min-gain", "-0.9"]);
    assert_eq!(rc, 0);
    assert!(
        out.contains("segment npu0") && out.contains("Softmax"),
        "{out}"
    );
    let (rc, out, _) = bundlec_cli(&["partition", m, "--npu", "vnpu", "--json"]);
    assert_eq!(rc, 0);
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(v["target"], "vnpu");
    let mut t: serde_json::Value = serde_json::from_str(bundlec::npu::target::VNPU_JSON).unwrap();
    t["ops"][0]["max_kernel"] = 0.into();
    let tf = d.join("bad.json");
    std::fs::write(&tf, t.to_string()).unwrap();
    let (rc, _, err) = bundlec_cli(&["partition", m, "--npu", tf.to_str().unwrap()]);
    assert_eq!(rc, 1);
    assert!(
        err.starts_with("error:") && err.contains("ops[0].max_kernel"),
        "{err}"
    );
    let (rc, _, err) = bundlec_cli(&[
        "partition",
        m,
        "--npu",
        d.join("missing.json").to_str().unwrap(),
    ]);
    assert_eq!(rc, 1);
    assert!(err.contains("missing.json"), "{err}");
    let (rc, _, err) = bundlec_cli(&["inspect", "--txn", m]);
    assert_eq!(rc, 1);
    assert!(err.starts_with("error:"), "{err}");
}

/// The MAC utilisation column of a placement table, in percent.
fn utilisations(table: &str) -> Vec<f64> {
    table
        .lines()
        .filter(|l| l.trim_start().starts_with("| ") && l.trim_end().ends_with("% |"))
        .filter_map(|l| {
            let cells: Vec<&str> = l.split('|').map(str::trim).collect();
            cells
                .get(cells.len() - 2)?
                .trim_end_matches('%')
                .parse()
                .ok()
        })
        .collect()
}

/// Utilisation is measured against the MAC rate of the op's own type: an int8 convolution against the int8 rate
/// (8x the f32 one on vnpu), so no op can show more than 100%; an f32 one against the f32 rate.
#[test]
fn mac_utilisation_uses_the_ops_own_rate() {
    let d = scratch("npu-int8-util");
    let mut m = Model::new();
    m.input("x", &[1, 16, 16, 16]).output("y", &[1, 32, 16, 16]);
    m.init("xs", &[], vec![0.02]);
    m.init_ints("xz", &[], 2, &[128]);
    let w: Vec<i64> = (0..32 * 16 * 9).map(|i| (i * 7 % 255) - 127).collect();
    m.init_ints("w", &[32, 16, 3, 3], 3, &w);
    m.init("ws", &[32], vec![0.004; 32]);
    m.init_ints("wz", &[32], 3, &[0; 32]);
    m.init("ys", &[], vec![0.3]);
    m.init_ints("yz", &[], 2, &[10]);
    m.node("QuantizeLinear", &["x", "xs", "xz"], &["xq"], vec![])
        .node(
            "QLinearConv",
            &["xq", "xs", "xz", "w", "ws", "wz", "ys", "yz"],
            &["yq"],
            vec![("pads", Attr::Ints(vec![1, 1, 1, 1]))],
        )
        .node("DequantizeLinear", &["yq", "ys", "yz"], &["y"], vec![]);
    let path = d.join("qconv.onnx");
    std::fs::write(&path, m.bytes()).unwrap();
    let g = bundlec::pipeline::optimized_graph(&path, &[]).unwrap();
    let p = partition(&g, &opts(-1.0, None)).unwrap();
    let table = bundlec::partition::report::table(&g, &p);
    let util = utilisations(&table);
    assert!(!util.is_empty(), "{table}");
    assert!(util.iter().all(|&u| (0.0..=100.0).contains(&u)), "{table}");
    let lenet = bundlec::pipeline::optimized_graph(&lenet_file(&d), &[]).unwrap();
    let lp = partition(&lenet, &opts(-0.9, None)).unwrap();
    let lt = bundlec::partition::report::table(&lenet, &lp);
    let lu = utilisations(&lt);
    assert!(
        !lu.is_empty() && lu.iter().all(|&u| (0.0..=100.0).contains(&u)),
        "{lt}"
    );
    assert!(lu.iter().any(|&u| u > 0.0), "{lt}");
}
