//! profile_layers MODEL.onnx \[RUNS\] \[CPU\]: compiles the model (`--cpu` CPU, default `native`; `CPU/bf16` adds
//! `--precision bf16`), runs it on the
//! bundle-rt engine at 1 and 2 threads with per-op timing (`Engine::run_profiled`), and prints the layers that
//! take longest at 2 threads: each layer's wall time (first task start to last task end; median over RUNS
//! runs) at 1 and 2 threads, the speed-up, and its ops' names. The last line compares the sum of the layers
//! with the whole run, whose difference is the engine's own cost (wake-ups, barriers). `PROFILE_TOP` in the
//! environment sets how many layers are listed (default 40). A development tool for finding the layers that
//! scale badly; benchmarks are `scripts/bench.py`.

use bundle_rt::engine::{Engine, StdPort};
use bundle_rt::profile::{reset_all, OpTiming};
use bundle_rt::Bundle;
use bundlec_tests::harness::compile_with;
use bundlec_tests::loaded::Loaded;
use bundlec_tests::median;
use std::time::Instant;

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let Some(path) = args.get(1) else {
        eprintln!("usage: profile_layers MODEL.onnx [RUNS] [CPU]");
        std::process::exit(2);
    };
    let runs: usize = args.get(2).and_then(|s| s.parse().ok()).unwrap_or(10);
    let top: usize = std::env::var("PROFILE_TOP")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(40);
    let mut opts = bundlec::Options::new("profile");
    // CPU, or CPU/bf16 for `--precision bf16` (as bench.py spells it).
    let cpu = args.get(3).cloned().unwrap_or_else(|| "native".into());
    let (cpu, bf16) = match cpu.strip_suffix("/bf16") {
        Some(c) => (c.to_string(), true),
        None => (cpu, false),
    };
    opts.cpu = cpu;
    if bf16 {
        opts.precision = bundlec::lower::Precision::Bf16;
    }
    let model = std::fs::read(path).expect("read model");
    let c = compile_with(&model, opts);
    let l = Loaded::open(&c);
    // SAFETY: config and entry come from the bundle just compiled for them.
    let b = unsafe { Bundle::new(l.config, l.entry, &c.bundle.weights) }.expect("bundle");
    let view = *b.view();
    let mut inst = b.instance().expect("instance");
    bundlec_tests::fill_inputs(&b, &mut inst);
    let layers = view.layers();
    let timings = OpTiming::table(view.ops().len());
    // [threads][layer] -> wall times in µs; [threads] -> whole runs.
    let mut wall = vec![vec![Vec::new(); layers.len()]; 2];
    // [layer] -> the sum of the layer's task times at 2 threads, in µs.
    let mut busy = vec![Vec::new(); layers.len()];
    let mut whole = vec![Vec::new(); 2];
    let mut engines: Vec<_> = [1, 2]
        .iter()
        .map(|&t| Engine::new(StdPort::new(), t).expect("engine"))
        .collect();
    for run in 0..=runs {
        for (ti, e) in engines.iter_mut().enumerate() {
            reset_all(&timings);
            let t = Instant::now();
            e.run_profiled(&mut inst, &timings).expect("run");
            let total = t.elapsed().as_secs_f64() * 1e6;
            if run == 0 {
                continue; // warm-up
            }
            whole[ti].push(total);
            for (li, layer) in layers.iter().enumerate() {
                let ops = &timings[layer.first_op as usize..][..layer.num_ops as usize];
                let start = ops.iter().filter_map(OpTiming::first_start).min();
                let end = ops.iter().filter_map(OpTiming::last_end).max();
                let us = match (start, end) {
                    (Some(s), Some(e)) => e.saturating_sub(s) as f64 / 1e3,
                    _ => 0.0,
                };
                wall[ti][li].push(us);
                if ti == 1 {
                    busy[li].push(ops.iter().map(OpTiming::busy).sum::<u64>() as f64 / 1e3);
                }
            }
        }
    }
    let med: Vec<Vec<f64>> = wall
        .into_iter()
        .map(|w| w.into_iter().map(|mut t| median(&mut t)).collect())
        .collect();
    let busy: Vec<f64> = busy.into_iter().map(|mut b| median(&mut b)).collect();
    let mut order: Vec<usize> = (0..layers.len()).collect();
    order.sort_by(|&a, &b| med[1][b].total_cmp(&med[1][a]));
    println!(
        "| layer | 1t µs | 2t µs | speed-up | 2t busy / 1t | tasks | ops |\n|---|---|---|---|---|---|---|"
    );
    for &li in order.iter().take(top) {
        let layer = &layers[li];
        let first = layer.first_op as usize;
        let ops = first..first + layer.num_ops as usize;
        // The ops the 2-thread engine runs (an interleaved pair's op, not its kernels alone: `tasks_on`).
        let runs = |o: &usize| view.ops()[*o].tasks_on(2) > 0;
        let tasks: u32 = view.ops()[ops.clone()].iter().map(|o| o.tasks_on(2)).sum();
        let names: Vec<&str> = ops.filter(runs).map(|o| view.op_name(o)).collect();
        println!(
            "| {li} | {:.1} | {:.1} | {:.2} | {:.2} | {tasks} | {} |",
            med[0][li],
            med[1][li],
            med[0][li] / med[1][li].max(1e-3),
            busy[li] / med[0][li].max(1e-3),
            names.join(", ")
        );
    }
    for (ti, threads) in [1, 2].iter().enumerate() {
        let sum: f64 = med[ti].iter().sum();
        let total = median(&mut whole[ti]);
        println!(
            "{threads} thread(s): layers {:.2} ms, whole run {:.2} ms, engine overhead {:.2} ms",
            sum / 1e3,
            total / 1e3,
            (total - sum) / 1e3
        );
    }
}
