//! ab_layers MODEL.onnx RUNS VARIANT... : compiles the model once per variant, loads every bundle into this
//! process and runs them in turn, run after run (1 thread, then 2), so that a noisy machine's slow stretches hit
//! every variant alike; prints each layer's median time (`AB_STAT=p10`: 10th percentile) per variant at 1 and 2
//! threads (layers matched by their ops' names, so variants may differ in their layer lists) and the whole runs,
//! and checks that every variant's outputs are bitwise equal to the first's. A variant is `-` (the defaults),
//! `cpu=NAME` (`--cpu`), or `KEY=VALUE[,KEY=VALUE]` environment settings in force while it compiles
//! (experiment switches read by the compiler). `AB_FILTER` in the environment keeps only layers whose ops' names contain it. A development tool
//! for changes worth a few per cent, which a 2-core virtual machine's drift hides between separate runs.

use bundle_rt::engine::{Engine, StdPort};
use bundle_rt::profile::{reset_all, OpTiming};
use bundle_rt::Bundle;
use bundlec_tests::harness::compile_with;
use bundlec_tests::loaded::Loaded;
use bundlec_tests::median;
use std::collections::BTreeMap;
use std::time::Instant;

/// One compiled variant: its label and environment.
struct Variant {
    label: String,
    cpu: String,
    env: Vec<(String, String)>,
}

fn parse(arg: &str) -> Variant {
    let mut v = Variant {
        label: arg.to_string(),
        cpu: "native".into(),
        env: Vec::new(),
    };
    for kv in arg.split(',').filter(|s| *s != "-" && !s.is_empty()) {
        let (k, val) = kv.split_once('=').unwrap_or((kv, "1"));
        if k == "cpu" {
            v.cpu = val.to_string();
        } else {
            v.env.push((k.to_string(), val.to_string()));
        }
    }
    v
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if args.len() < 4 {
        eprintln!("usage: ab_layers MODEL.onnx RUNS VARIANT...");
        std::process::exit(2);
    }
    let runs: usize = args[2].parse().expect("RUNS");
    let variants: Vec<Variant> = args[3..].iter().map(|a| parse(a)).collect();
    let filter = std::env::var("AB_FILTER").unwrap_or_default();
    let model = std::fs::read(&args[1]).expect("read model");
    let compiled: Vec<_> = variants
        .iter()
        .enumerate()
        .map(|(i, v)| {
            for (k, val) in &v.env {
                // SAFETY: no other thread runs while the variants are compiled.
                unsafe { std::env::set_var(k, val) };
            }
            // Distinct names: each bundle is loaded from its own shared object.
            let mut opts = bundlec::Options::new(&format!("ab{i}"));
            opts.cpu = v.cpu.clone();
            let c = compile_with(&model, opts);
            for (k, _) in &v.env {
                // SAFETY: as above.
                unsafe { std::env::remove_var(k) };
            }
            c
        })
        .collect();
    let loaded: Vec<Loaded> = compiled.iter().map(Loaded::open).collect();
    let bundles: Vec<Bundle> = loaded
        .iter()
        .zip(&compiled)
        // SAFETY: config and entry come from the bundle just compiled for them.
        .map(|(l, c)| unsafe { Bundle::new(l.config, l.entry, &c.bundle.weights) }.expect("bundle"))
        .collect();
    let mut insts: Vec<_> = bundles
        .iter()
        .map(|b| {
            let mut inst = b.instance().expect("instance");
            bundlec_tests::fill_inputs(b, &mut inst);
            inst
        })
        .collect();
    let mut engines: Vec<_> = [1, 2]
        .iter()
        .map(|&t| Engine::new(StdPort::new(), t).expect("engine"))
        .collect();
    // [variant][threads]: layer name -> times (µs), and whole runs.
    let mut layer_t: Vec<Vec<BTreeMap<String, Vec<f64>>>> = (0..variants.len())
        .map(|_| vec![BTreeMap::new(); 2])
        .collect();
    let mut whole: Vec<Vec<Vec<f64>>> = vec![vec![Vec::new(); 2]; variants.len()];
    for run in 0..=runs {
        for (ti, e) in engines.iter_mut().enumerate() {
            // The variants take turns at running first: the first after a switch of thread count shares the
            // cores with the other engine's workers still spinning (it measured 2-15 % slow in the early layers).
            for k in 0..bundles.len() {
                let vi = (k + run) % bundles.len();
                let b = &bundles[vi];
                let view = *b.view();
                let timings = OpTiming::table(view.ops().len());
                reset_all(&timings);
                let t = Instant::now();
                e.run_profiled(&mut insts[vi], &timings).expect("run");
                let total = t.elapsed().as_secs_f64() * 1e6;
                if run == 0 {
                    continue;
                }
                whole[vi][ti].push(total);
                for layer in view.layers() {
                    let ops = layer.first_op as usize..(layer.first_op + layer.num_ops) as usize;
                    let names: Vec<&str> = ops.clone().map(|o| view.op_name(o)).collect();
                    let key = names.join(", ");
                    if !key.contains(&filter) {
                        continue;
                    }
                    let ts = &timings[ops];
                    let start = ts.iter().filter_map(OpTiming::first_start).min();
                    let end = ts.iter().filter_map(OpTiming::last_end).max();
                    let us = match (start, end) {
                        (Some(s), Some(e)) => e.saturating_sub(s) as f64 / 1e3,
                        _ => 0.0,
                    };
                    layer_t[vi][ti].entry(key).or_default().push(us);
                }
            }
        }
    }
    // Outputs: bitwise equal to the first variant's.
    for (vi, b) in bundles.iter().enumerate().skip(1) {
        for t in b.outputs() {
            let a = insts[0].output_bytes(t.name).expect("output");
            let o = insts[vi].output_bytes(t.name).expect("output");
            if a != o {
                println!("variant {}: output {} differs", variants[vi].label, t.name);
            }
        }
    }
    let labels: Vec<&str> = variants.iter().map(|v| v.label.as_str()).collect();
    println!("| layer | {} |", labels.join(" (1t/2t µs) | "));
    println!("|---|{}", "---|".repeat(labels.len()));
    let mut keys: Vec<String> = layer_t[0][0].keys().cloned().collect();
    for v in &layer_t[1..] {
        let more: Vec<String> = v[0].keys().filter(|k| !keys.contains(k)).cloned().collect();
        keys.extend(more);
    }
    // AB_STAT=p10: the 10th percentile instead of the median (a host with slow stretches: the fast runs).
    let p10 = std::env::var("AB_STAT").is_ok_and(|v| v == "p10");
    let median = |v: &mut Vec<f64>| {
        if p10 {
            v.sort_by(|a, b| a.total_cmp(b));
            v[v.len() / 10]
        } else {
            median(v)
        }
    };
    for key in &keys {
        let cells: Vec<String> = layer_t
            .iter_mut()
            .map(|v| {
                let [one, two] = &mut v[..] else {
                    unreachable!("two thread counts")
                };
                match (one.get_mut(key), two.get_mut(key)) {
                    (Some(a), Some(b)) => format!("{:.1} / {:.1}", median(a), median(b)),
                    _ => "-".into(),
                }
            })
            .collect();
        println!("| {key} | {} |", cells.join(" | "));
    }
    let cells: Vec<String> = whole
        .iter_mut()
        .map(|w| {
            format!(
                "{:.3} / {:.3} ms",
                median(&mut w[0]) / 1e3,
                median(&mut w[1]) / 1e3
            )
        })
        .collect();
    println!("| whole run | {} |", cells.join(" | "));
}
