//! bench_engine MODEL.onnx \[RUNS\]: compiles the model, loads the bundle into this process and prints a table of
//! latencies for the entry function and the bundle-rt BSP engine at 1, 2 and 4 threads (interleaved), checking
//! that every engine result is bitwise equal to the entry function's.

use bundle_rt::engine::{Engine, StdPort};
use bundle_rt::Bundle;
use bundlec_tests::harness::compile;
use bundlec_tests::loaded::Loaded;
use bundlec_tests::median;
use std::time::Instant;

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let Some(path) = args.get(1) else {
        eprintln!("usage: bench_engine MODEL.onnx [RUNS]");
        std::process::exit(2);
    };
    let runs: usize = args.get(2).and_then(|s| s.parse().ok()).unwrap_or(5);
    let model = std::fs::read(path).expect("read model");
    let c = compile(&model, "bench");
    let l = Loaded::open(&c);
    // SAFETY: config and entry come from the bundle just compiled for them.
    let b = unsafe { Bundle::new(l.config, l.entry, &c.bundle.weights) }.expect("bundle");
    let inputs: Vec<(String, usize)> = b
        .inputs()
        .map(|t| (t.name.to_string(), t.elements))
        .collect();
    let output = b.outputs().next().expect("an output").name.to_string();
    let fill = |i: &mut bundle_rt::Instance| {
        for (k, (n, len)) in inputs.iter().enumerate() {
            i.set_input(n, &bundlec_tests::rand_vec(*len, k as u64))
                .expect("input");
        }
    };
    let mut inst = b.instance().expect("instance");
    fill(&mut inst);
    inst.run().expect("entry");
    let want = inst.output::<f32>(&output).expect("output").to_vec();
    let threads = [1usize, 2, 4];
    let mut engines: Vec<_> = threads
        .iter()
        .map(|&t| Engine::new(StdPort::new(), t).expect("engine"))
        .collect();
    let mut times = vec![Vec::new(); threads.len() + 1];
    for _ in 0..runs {
        let t = Instant::now();
        inst.run().expect("entry");
        times[0].push(t.elapsed().as_secs_f64() * 1e3);
        for (i, e) in engines.iter_mut().enumerate() {
            let mut x = b.instance().expect("instance");
            fill(&mut x);
            let t = Instant::now();
            e.run(&mut x).expect("engine");
            times[i + 1].push(t.elapsed().as_secs_f64() * 1e3);
            assert_eq!(
                x.output::<f32>(&output).expect("output"),
                &want[..],
                "engine at {} threads is not bitwise equal",
                threads[i]
            );
        }
    }
    println!(
        "| {} | runner | median ms | min ms | speed-up |\n|---|---|---|---|---|",
        path
    );
    let base = median(&mut times[0].clone());
    for (i, t) in times.iter_mut().enumerate() {
        let name = if i == 0 {
            "entry function".to_string()
        } else {
            format!("engine, {} threads", threads[i - 1])
        };
        let m = median(t);
        let mn = t.iter().cloned().fold(f64::INFINITY, f64::min);
        println!("| | {name} | {m:.2} | {mn:.2} | {:.2} |", base / m);
    }
    println!("all engine outputs bitwise equal to the entry function: yes");
    // The recipe runner on the same bundle, with externally bound buffers.
    let mut out = vec![0u8; want.len() * 4];
    {
        let mut r = bundle_rt::runner::Runner::new(&b, &c.bundle.recipe).expect("runner");
        for (k, (n, len)) in inputs.iter().enumerate() {
            r.bind_input_typed(n, &bundlec_tests::rand_vec(*len, k as u64))
                .expect("bind input");
        }
        r.bind_output(&output, &mut out).expect("bind output");
        let t = Instant::now();
        r.execute().expect("execute");
        r.wait().expect("wait");
        println!("recipe runner: {:.2} ms", t.elapsed().as_secs_f64() * 1e3);
    }
    let want_bytes: Vec<u8> = want.iter().flat_map(|x| x.to_le_bytes()).collect();
    assert_eq!(
        out, want_bytes,
        "runner output is not bitwise equal to the entry function"
    );
    println!("recipe runner output bitwise equal to the entry function: yes");
}
