//! npu_check MODEL.onnx [--input NAME:SPEC]... [--min-gain G] [--tol T]: the NPU path of a whole model, end to end.
//! Compiles MODEL CPU-only and with `--npu vnpu`, loads both bundles into this process, and runs the same inputs
//! through (1) the CPU-only entry function (the reference), (2) the NPU bundle's entry function (its segments'
//! CPU fallback: must be bitwise equal), (3) the op table with the emulator on this thread, (4) the BSP engine
//! with the emulator at 1 and 2 threads, and (5) the recipe Runner executing the mixed recipe. Paths 3-5 must
//! match the reference within T (SPEC §11 scaled error, default 1e-4). Prints the segments, their emulated cycles
//! and the errors; exits non-zero on any mismatch.

use bundle_rt::engine::{Engine, StdPort};
use bundle_rt::{Bundle, DType, Emulator, Instance};
use bundlec::partition::PartitionOptions;
use bundlec_tests::harness::compile_with;
use bundlec_tests::loaded::Loaded;
use bundlec_tests::{max_scaled_error, rand_vec};

fn input_bytes(dtype: DType, n: usize, seed: u64, name: &str) -> Vec<u8> {
    let v = rand_vec(n, seed);
    match dtype {
        DType::F32 => v.iter().flat_map(|x| x.to_le_bytes()).collect(),
        DType::I64 => {
            let hi = if name.to_lowercase().contains("mask") {
                2.0
            } else {
                64.0
            };
            v.iter()
                .flat_map(|x| {
                    (((x + 1.0) * 0.5 * hi) as i64)
                        .min(hi as i64 - 1)
                        .to_le_bytes()
                })
                .collect()
        }
        DType::I32 => v
            .iter()
            .flat_map(|x| (((x + 1.0) * 32.0) as i32).to_le_bytes())
            .collect(),
        _ => v.iter().map(|x| ((x + 1.0) * 1.5) as u8).collect(),
    }
}

/// Every output as f32 values (u8 / i8 / i32 outputs of int8 models converted exactly).
fn outputs_f32(i: &Instance, names: &[String]) -> Vec<Vec<f32>> {
    names
        .iter()
        .map(|n| match i.output::<f32>(n) {
            Ok(v) => v.to_vec(),
            Err(bundle_rt::Error::DTypeMismatch { dtype, .. }) => {
                let b = i.output_bytes(n).expect("output bytes");
                match dtype {
                    DType::U8 => b.iter().map(|&x| x as f32).collect(),
                    DType::I8 => b.iter().map(|&x| x as i8 as f32).collect(),
                    DType::I32 => b
                        .chunks_exact(4)
                        .map(|c| i32::from_le_bytes([c[0], c[1], c[2], c[3]]) as f32)
                        .collect(),
                    d => panic!("output {n}: {d:?} is not compared"),
                }
            }
            Err(e) => panic!("output {n}: {e:?}"),
        })
        .collect()
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let mut model = None;
    let (mut specs, mut min_gain, mut tol) = (Vec::new(), -0.5, 1e-4f32);
    // Both bundles on one kernel set with its own lowering, so that the NPU bundle's CPU fallback is bitwise the
    // CPU-only bundle's. (Under the fat default's AVX-512 lowering the NPU bundle lowers some of the ops around its
    // segments differently, e.g. MobileNetV2 within 1.2e-6.)
    let mut cpu_set = "x86-64-v3".to_string();
    let mut it = args.iter().skip(1);
    while let Some(a) = it.next() {
        match a.as_str() {
            "--input" => specs.push(
                it.next()
                    .expect("--input SPEC")
                    .parse::<bundlec::InputSpec>()
                    .expect("input spec"),
            ),
            "--min-gain" => min_gain = it.next().expect("--min-gain G").parse().expect("number"),
            "--tol" => tol = it.next().expect("--tol T").parse().expect("number"),
            "--cpu" => cpu_set = it.next().expect("--cpu CPU").to_string(),
            m => model = Some(m.to_string()),
        }
    }
    let Some(path) = model else {
        eprintln!(
            "usage: npu_check MODEL.onnx [--input NAME:SPEC]... [--min-gain G] [--tol T] [--cpu CPU]"
        );
        std::process::exit(2);
    };
    let bytes = std::fs::read(&path).expect("read model");
    let stem: String = std::path::Path::new(&path)
        .file_stem()
        .unwrap()
        .to_string_lossy()
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '_' })
        .collect();
    let mut o = bundlec::Options::new(&format!("cpu_{stem}"));
    o.inputs = specs.clone();
    if cfg!(target_arch = "x86_64") {
        o.cpu = cpu_set;
    }
    let cpu = compile_with(&bytes, o.clone());
    o.name = format!("npu_{stem}");
    o.npu = Some(PartitionOptions {
        target: bundlec::npu::NpuTarget::vnpu(),
        min_gain,
        cache: None,
        strict: true,
        model_hash: 0,
    });
    let npu = compile_with(&bytes, o);
    println!(
        "{path}: {} NPU segment(s)",
        npu.bundle.report.segments.len()
    );
    for (id, nodes, cycles) in &npu.bundle.report.segments {
        println!("  {id}: {nodes} ops, estimated {cycles} cycles");
    }
    let (lc, ln) = (Loaded::open(&cpu), Loaded::open(&npu));
    // SAFETY: configs and entries come from the bundles just compiled for them.
    let bc = unsafe { Bundle::new(lc.config, lc.entry, &cpu.bundle.weights) }.expect("cpu bundle");
    let bn = unsafe { Bundle::new(ln.config, ln.entry, &npu.bundle.weights) }.expect("npu bundle");
    let ins: Vec<(String, Vec<u8>)> = bc
        .inputs()
        .enumerate()
        .map(|(k, t)| {
            (
                t.name.to_string(),
                input_bytes(t.dtype, t.elements, 100 + k as u64, t.name),
            )
        })
        .collect();
    let outs: Vec<String> = bc.outputs().map(|t| t.name.to_string()).collect();
    let fill = |i: &mut Instance| {
        for (n, b) in &ins {
            i.set_input_bytes(n, b).expect("set input");
        }
    };
    let mut ic = bc.instance().expect("instance");
    fill(&mut ic);
    ic.run().expect("cpu entry");
    let want = outputs_f32(&ic, &outs);
    let mut failed = false;
    let mut report = |what: &str, got: Vec<Vec<f32>>, exact: bool| {
        let e = got
            .iter()
            .zip(&want)
            .map(|(g, w)| max_scaled_error(g, w))
            .fold(0.0f32, f32::max);
        let ok = if exact { got == want } else { e <= tol };
        println!(
            "  {what:<40} max scaled error {e:.3e} {}",
            if ok { "ok" } else { "FAILED" }
        );
        failed |= !ok;
    };
    let mut i = bn.instance().expect("instance");
    fill(&mut i);
    i.run().expect("npu bundle entry");
    report(
        "entry function (CPU fallback), bitwise",
        outputs_f32(&i, &outs),
        true,
    );
    let mut emu = Emulator::vnpu();
    let mut i = bn.instance().expect("instance");
    fill(&mut i);
    let t = std::time::Instant::now();
    i.run_ops_with_device(Some(&mut emu))
        .expect("op table + emulator");
    println!("  (emulated in {:.2} s)", t.elapsed().as_secs_f64());
    report("op table + emulator", outputs_f32(&i, &outs), false);
    for threads in [1, 2] {
        let mut e = Engine::new(StdPort::new(), threads).expect("engine");
        let mut i = bn.instance().expect("instance");
        fill(&mut i);
        e.run_with_device(&mut i, Some(&mut emu))
            .expect("engine + emulator");
        report(
            &format!("engine {threads} thread(s) + emulator"),
            outputs_f32(&i, &outs),
            false,
        );
    }
    let mut bufs: Vec<Vec<u8>> = bn.outputs().map(|t| vec![0u8; t.size_bytes]).collect();
    {
        let mut r = bundle_rt::runner::Runner::new(&bn, &npu.bundle.recipe).expect("runner");
        for (id, meta) in &npu.bundle.metas {
            let m = r
                .check_meta(id, meta)
                .expect("meta JSON matches its segment");
            assert!(!m.ops.is_empty(), "{id}: empty op_list");
        }
        for (n, b) in &ins {
            r.bind_input(n, b).expect("bind input");
        }
        for (n, b) in outs.iter().zip(bufs.iter_mut()) {
            r.bind_output(n, b).expect("bind output");
        }
        r.execute().expect("execute");
        r.wait().expect("wait");
        compare_cycles(&bn, &r, &npu.bundle.report.segments);
    }
    let dtypes: Vec<DType> = bn.outputs().map(|t| t.dtype).collect();
    let got = bufs
        .iter()
        .zip(&dtypes)
        .map(|(b, d)| match d {
            DType::U8 => b.iter().map(|&x| x as f32).collect(),
            DType::I8 => b.iter().map(|&x| x as i8 as f32).collect(),
            DType::I32 => b
                .chunks_exact(4)
                .map(|c| i32::from_le_bytes([c[0], c[1], c[2], c[3]]) as f32)
                .collect(),
            _ => b
                .chunks_exact(4)
                .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
                .collect(),
        })
        .collect();
    report("recipe Runner (mixed recipe) + emulator", got, false);
    if failed {
        std::process::exit(1);
    }
}

/// The compiler's per-segment estimate against the cycles the emulator counted running the same transaction:
/// each term of the segment table's `est_cycles` (instruction, data, compute), their total
/// `instruction + max(data, compute)`, and the report's per-op ("Vela-style") total must be within 10%.
/// Both count from the same transaction with the target's rates: the compiler sums per-op DMA cycles (each
/// rounded up) and per-op busiest-tile compute, the emulator rounds all DMA bytes once and sums per tile;
/// the report's total overlaps DMA and compute op by op, the emulator's over the whole segment. What
/// neither counts is what a real array adds: DMA contention, lock and stream stalls, instruction decode.
fn compare_cycles(
    bn: &Bundle<'_>,
    r: &bundle_rt::runner::Runner<'_, '_>,
    report: &[(String, usize, u64)],
) {
    let runs = r
        .recipe()
        .runs
        .iter()
        .filter(|run| run.location == bundle_rt::runner::Where::Npu);
    let rel = |e: u64, g: u64| (e as f64 - g as f64).abs() / (g.max(1) as f64);
    for (run, got) in runs.zip(r.npu_cycles()) {
        let seg = bn.view().find_npu_segment(&run.name).expect("segment");
        let est = seg.est_cycles;
        let vela = report
            .iter()
            .find(|(id, _, _)| *id == run.name)
            .map_or(0, |s| s.2);
        let terms = [
            ("instruction", est[0], got.instruction),
            ("data", est[1], got.data),
            ("compute", est[2], got.compute),
            ("bound", est[0] + est[1].max(est[2]), got.bound()),
            ("elapsed", vela, got.total()),
        ];
        let text: Vec<String> = terms
            .iter()
            .map(|(n, e, g)| format!("{n} {e} / {g} ({:.2}%)", 100.0 * rel(*e, *g)))
            .collect();
        println!(
            "  {}: cycles estimated / emulated: {}",
            run.name,
            text.join(", ")
        );
        for (n, e, g) in terms {
            assert!(
                rel(e, g) <= 0.10,
                "{}: the {n} estimate {e} is not within 10% of the emulated {g}",
                run.name
            );
        }
    }
}
