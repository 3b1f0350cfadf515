//! Compile-and-run harnesses: bundlec → files in a scratch directory → (a) a C program linked by `cc` with only
//! `NAME.o`, or (b) a shared object loaded into this process and driven through `bundle-rt`; and the tract
//! oracle on the same ONNX bytes.

use std::path::{Path, PathBuf};
use std::process::Command;
use tract_onnx::prelude::*;

/// A bundle compiled into a scratch directory.
pub struct Compiled {
    pub dir: PathBuf,
    pub name: String,
    pub bundle: bundlec::Bundle,
}

/// A fresh scratch directory for `name`.
pub fn scratch(name: &str) -> PathBuf {
    let d = std::env::temp_dir()
        .join("bundlec-tests")
        .join(format!("{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).expect("create scratch dir");
    d
}

/// Compiles ONNX bytes with default options.
pub fn compile(model: &[u8], name: &str) -> Compiled {
    compile_with(model, bundlec::Options::new(name))
}

/// Compiles ONNX bytes with the given options.
/// The kernel sets the kernel tests run every case with (`--cpu generic`: Cranelift only; `x86-64-v3` / `-v4`:
/// the AVX2 / AVX-512 machine-code micro-kernels; `cascadelake`: v4 plus the AVX-512 VNNI integer GEMM;
/// `icelake`: also VBMI, the VNNI depthwise row kernel; `sapphirerapids`: also the AMX tile integer GEMM),
/// and whether this machine can execute each.
pub fn kernel_variants() -> Vec<(&'static str, bool)> {
    #[cfg(target_arch = "x86_64")]
    {
        let v3 = std::arch::is_x86_feature_detected!("avx2")
            && std::arch::is_x86_feature_detected!("fma");
        let v4 = v3
            && std::arch::is_x86_feature_detected!("avx512f")
            && std::arch::is_x86_feature_detected!("avx512dq")
            && std::arch::is_x86_feature_detected!("avx512bw")
            && std::arch::is_x86_feature_detected!("avx512vl");
        let vnni = v4 && std::arch::is_x86_feature_detected!("avx512vnni");
        let vbmi = vnni && std::arch::is_x86_feature_detected!("avx512vbmi");
        let amx = vbmi && bundlec::codegen::isa::host_ext().amx;
        vec![
            ("generic", true),
            ("x86-64-v3", v3),
            ("x86-64-v4", v4),
            ("cascadelake", vnni),
            ("icelake", vbmi),
            ("sapphirerapids", amx),
        ]
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        vec![("generic", true)]
    }
}

pub fn compile_with(model: &[u8], opts: bundlec::Options) -> Compiled {
    let dir = scratch(&opts.name);
    let path = dir.join("model.onnx");
    std::fs::write(&path, model).expect("write model");
    let bundle = bundlec::compile_file(&path, &opts)
        .unwrap_or_else(|e| panic!("compile {}: {e}", opts.name));
    bundle.write(&dir).expect("write bundle");
    Compiled {
        dir,
        name: opts.name.clone(),
        bundle,
    }
}

fn run(cmd: &mut Command) -> String {
    let out = cmd.output().unwrap_or_else(|e| panic!("{cmd:?}: {e}"));
    assert!(
        out.status.success(),
        "{cmd:?} failed:\n{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("repo root")
        .to_path_buf()
}

/// Writes `bytes` as model `q_NAME`, runs the graph interpreter on `inputs` (shape, values) for the reference,
/// then compiles the model with every kernel variant this CPU runs (`SKIPPED` lines for the others), runs it
/// through the C harness and asserts every output bit-equal to the reference; `check` sees each variant's name
/// and bundle. Returns the reference output's shape and values. The int8 kernel tests' frame.
pub fn bitwise_in_every_variant(
    name: &str,
    bytes: &[u8],
    inputs: &[(Vec<usize>, Vec<f32>)],
    check: impl Fn(&str, &Compiled),
) -> (Vec<usize>, Vec<f32>) {
    let path = scratch(&format!("q_{name}")).join("model.onnx");
    std::fs::write(&path, bytes).expect("write");
    let g = bundlec::import::import_file(&path, &[]).expect("import");
    let tensors = inputs
        .iter()
        .map(|(shape, v)| bundlec::ir::Tensor::f32(shape.clone(), v.clone()))
        .collect();
    let want = bundlec::ir::eval::run(&g, tensors, &mut |_, _| {}).expect("reference");
    let shape = want[0].shape.clone();
    let want = want[0].as_f32().expect("f32").to_vec();
    let values: Vec<Vec<f32>> = inputs.iter().map(|(_, v)| v.clone()).collect();
    for (cpu, ok) in kernel_variants() {
        if !ok {
            eprintln!("SKIPPED: {name} with --cpu {cpu} (this CPU lacks its features)");
            continue;
        }
        let mut o = bundlec::Options::new(&format!("q_{name}_{}", cpu.replace('-', "_")));
        o.cpu = cpu.to_string();
        let comp = compile_with(bytes, o);
        let got = run_c(&comp, &values, &[want.len()]);
        let diff = (got[0].iter().zip(&want))
            .filter(|(a, b)| a.to_bits() != b.to_bits())
            .count();
        assert_eq!(
            diff,
            0,
            "{name} --cpu {cpu}: {diff} of {} outputs differ",
            want.len()
        );
        check(cpu, &comp);
    }
    (shape, want)
}

/// Links `NAME.o` with tests/c/run_bundle.c using `cc` and runs it. `out_lens` are the output element counts.
pub fn run_c(c: &Compiled, inputs: &[Vec<f32>], out_lens: &[usize]) -> Vec<Vec<f32>> {
    let exe = c.dir.join("run");
    run(Command::new("cc")
        .args([
            "-O2",
            "-std=c11",
            "-D_POSIX_C_SOURCE=200112L",
            "-Wall",
            "-Werror",
        ])
        .arg(format!("-DBUNDLE={}", c.name))
        .arg("-I")
        .arg(&c.dir)
        .arg(repo().join("tests/c/run_bundle.c"))
        .arg(c.dir.join(format!("{}.o", c.name)))
        .arg("-o")
        .arg(&exe));
    let mut cmd = Command::new(&exe);
    if c.bundle.embedded_weights {
        cmd.arg("-");
    } else {
        cmd.arg(c.dir.join(format!("{}.weights", c.name)));
    }
    for (i, v) in inputs.iter().enumerate() {
        let p = c.dir.join(format!("in{i}.bin"));
        std::fs::write(
            &p,
            v.iter().flat_map(|x| x.to_le_bytes()).collect::<Vec<u8>>(),
        )
        .expect("write input");
        cmd.arg(p);
    }
    let outs: Vec<PathBuf> = (0..out_lens.len())
        .map(|i| c.dir.join(format!("out{i}.bin")))
        .collect();
    cmd.args(&outs);
    run(&mut cmd);
    outs.iter()
        .zip(out_lens)
        .map(|(p, &n)| {
            let b = std::fs::read(p).expect("read output");
            assert_eq!(b.len(), n * 4, "output size");
            b.chunks_exact(4)
                .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
                .collect()
        })
        .collect()
}

/// Runs the model with tract (the oracle).
pub fn tract_run(model: &[u8], inputs: &[(Vec<usize>, Vec<f32>)]) -> Vec<Vec<f32>> {
    let m = tract_onnx::onnx()
        .model_for_read(&mut &model[..])
        .expect("tract parse")
        .into_optimized()
        .expect("tract optimize")
        .into_runnable()
        .expect("tract runnable");
    let ins: TVec<TValue> = inputs
        .iter()
        .map(|(s, v)| Tensor::from_shape(s, v).expect("tract input").into())
        .collect();
    let outs = m.run(ins).expect("tract run");
    outs.iter()
        .map(|t| {
            t.to_plain_array_view::<f32>()
                .expect("f32 output")
                .iter()
                .copied()
                .collect()
        })
        .collect()
}

/// Builds a shared object from `NAME.o` (for loading into a Rust test process).
pub fn shared_object(c: &Compiled) -> PathBuf {
    let so = c.dir.join(format!("lib{}.so", c.name));
    run(Command::new("cc")
        .arg("-shared")
        .arg("-o")
        .arg(&so)
        .arg(c.dir.join(format!("{}.o", c.name))));
    so
}
