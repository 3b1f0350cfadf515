//! `NAME_cpu_supported`: every bundle exports it; it must agree with the host's own feature detection for each
//! `--cpu` kernel set (so programs can refuse to call the entry function on a CPU that lacks a feature), and
//! the header must document it with the features it checks.

use bundlec_tests::harness::{compile_with, shared_object};
use std::ffi::CString;

fn supported(cpu: &str) -> (i32, String) {
    let mut o = bundlec::Options::new(&format!("feat_{}", cpu.replace('-', "_")));
    o.cpu = cpu.to_string();
    let c = compile_with(&bundlec_tests::models::mlp(1), o);
    let so = shared_object(&c);
    let path = CString::new(so.to_str().unwrap()).unwrap();
    // SAFETY: the shared object was just built from the bundle; the symbol has the documented signature
    // `int NAME_cpu_supported(void)` and only executes CPUID/XGETBV.
    unsafe {
        let h = libc::dlopen(path.as_ptr(), libc::RTLD_NOW | libc::RTLD_LOCAL);
        assert!(!h.is_null());
        let sym = CString::new(format!("{}_cpu_supported", c.name)).unwrap();
        let f = libc::dlsym(h, sym.as_ptr());
        assert!(!f.is_null(), "{sym:?} is not exported");
        let f: extern "C" fn() -> i32 = std::mem::transmute(f);
        (f(), c.bundle.header.clone())
    }
}

#[cfg(target_arch = "x86_64")]
#[test]
fn cpu_supported_matches_the_host() {
    let v3 =
        std::arch::is_x86_feature_detected!("avx2") && std::arch::is_x86_feature_detected!("fma");
    let v4 = v3
        && std::arch::is_x86_feature_detected!("avx512f")
        && std::arch::is_x86_feature_detected!("avx512dq")
        && std::arch::is_x86_feature_detected!("avx512bw")
        && std::arch::is_x86_feature_detected!("avx512vl");
    for (cpu, want, feature) in [
        ("generic", true, "sse2"),
        ("x86-64-v3", v3, "avx2"),
        ("x86-64-v4", v4, "avx512f"),
    ] {
        let (got, header) = supported(cpu);
        assert_eq!(got, want as i32, "--cpu {cpu}");
        assert!(
            header.contains("_cpu_supported(void);") && header.contains(feature),
            "--cpu {cpu}: header"
        );
    }
}

/// A fat bundle (`--cpu x86-64-v3,x86-64-v4`) carries both kernel sets behind one exported entry that picks the
/// faster set (`tests/fat_dispatch.rs`); it is lowered for the AVX-512 set, so on a CPU with AVX-512 its results
/// are bitwise those of `x86-64-v4`, and within 1e-5 of `x86-64-v3`'s anywhere. Its config and
/// `NAME_cpu_supported` describe the baseline, and bad lists are refused with the flag named.
#[cfg(target_arch = "x86_64")]
#[test]
fn fat_bundles_dispatch_and_match_single_sets_bitwise() {
    use bundlec_tests::harness::{compile_with, run_c};
    let model = bundlec_tests::models::lenet(2);
    let x = bundlec_tests::rand_vec(2 * 784, 31);
    let run = |cpu: &str, name: &str| {
        let mut o = bundlec::Options::new(name);
        o.cpu = cpu.to_string();
        let c = compile_with(&model, o);
        (run_c(&c, std::slice::from_ref(&x), &[20]), c)
    };
    let (fat, c) = run("x86-64-v3,x86-64-v4", "fat_lenet");
    let (v3, _) = run("x86-64-v3", "fat_v3");
    bundlec_tests::assert_close(&fat, &v3, 1e-5, "fat vs x86-64-v3");
    if std::arch::is_x86_feature_detected!("avx512f") {
        let (v4, _) = run("x86-64-v4", "fat_v4");
        assert_eq!(fat, v4, "fat vs x86-64-v4 bitwise");
    }
    use object::{Object, ObjectSymbol};
    let file = object::File::parse(&*c.bundle.object).expect("parse");
    let syms: Vec<(String, bool)> = file
        .symbols()
        .filter_map(|s| Some((s.name().ok()?.to_string(), s.is_global())))
        .collect();
    for (n, global) in [
        ("fat_lenet", true),
        ("fat_lenet_cpu_supported", true),
        ("fat_lenet__entry_fast", false),
        ("fat_lenet__entry_base", false),
        ("fat_lenet__pick", false),
    ] {
        assert!(
            syms.contains(&(n.to_string(), global)),
            "{n} (global {global}) in {syms:?}"
        );
    }
    let ins = bundlec::emit::inspect::inspect("fat.o", &c.bundle.object).expect("inspect");
    assert_eq!(
        ins.cpu_features,
        ["sse2", "avx", "fma", "avx2"],
        "the baseline's"
    );
    let fast = ins.fast_cpu_features.expect("a fastOps table");
    assert!(fast.iter().any(|f| f == "avx512f"), "FAST's: {fast:?}");
    for bad in [
        "x86-64-v3,x86-64-v3",
        "generic,x86-64-v4",
        "x86-64-v3,x86-64-v4,icelake",
        "x86-64-v3,icelake",
        // Reversed: the AVX-512 set cannot be the baseline.
        "x86-64-v4,x86-64-v3",
    ] {
        let mut o = bundlec::Options::new("fat_bad");
        o.cpu = bad.to_string();
        let dir = bundlec_tests::harness::scratch("fat_bad");
        std::fs::write(dir.join("m.onnx"), &model).expect("write");
        let err = bundlec::compile_file(&dir.join("m.onnx"), &o)
            .unwrap_err()
            .to_string();
        assert!(err.contains("--cpu") && err.contains(bad), "{bad}: {err}");
    }
}

/// bundle-rt runs a fat bundle's `fastOps` (FAST's kernels for the same ops) where the CPU has `fastCpuFeatures`:
/// the engine at 1, 2 and 4 threads and the op table give the entry function's bits, and a `fastOps` table that
/// differs from `ops` in anything but the functions is refused with the field named.
#[cfg(target_arch = "x86_64")]
#[test]
fn fat_bundles_run_the_fast_op_table_in_bundle_rt() {
    use bundle_rt::engine::{Engine, StdPort};
    use bundle_rt::{Bundle, BundleOp, ConfigView};
    use bundlec_tests::loaded::Loaded;
    let mut o = bundlec::Options::new("fat_rt");
    o.cpu = "x86-64-v3,x86-64-v4".into();
    let c = compile_with(&bundlec_tests::models::lenet(2), o);
    let l = Loaded::open(&c);
    let raw = l.config;
    assert!(!raw.fast_ops.is_null() && raw.fast_cpu_features != 0);
    // SAFETY: fastOps has numOps entries (the compiler's contract; checked by ConfigView below too).
    let (base, fast) = unsafe {
        (
            std::slice::from_raw_parts(raw.ops, raw.num_ops as usize),
            std::slice::from_raw_parts(raw.fast_ops, raw.num_ops as usize),
        )
    };
    let fn_of = |op: &BundleOp| op.func.map(|f| f as usize);
    let differ = base
        .iter()
        .zip(fast)
        .filter(|(b, f)| fn_of(b) != fn_of(f))
        .count();
    assert!(differ > 0, "the micro-kernel ops have FAST functions");
    let v4 = std::arch::is_x86_feature_detected!("avx512f")
        && std::arch::is_x86_feature_detected!("avx512dq")
        && std::arch::is_x86_feature_detected!("avx512bw")
        && std::arch::is_x86_feature_detected!("avx512vl");
    // SAFETY: config and entry come from the bundle compiled for them.
    let b = unsafe { Bundle::new(l.config, l.entry, &c.bundle.weights) }.expect("bundle");
    assert_eq!(
        b.view().fast_ops(),
        v4,
        "fastOps where the CPU has FAST's features"
    );
    let want = if v4 { fast } else { base };
    assert_eq!(b.view().ops().as_ptr(), want.as_ptr());
    let x = bundlec_tests::rand_vec(2 * 784, 5);
    let mut inst = b.instance().expect("instance");
    inst.set_input("image", &x).expect("input");
    inst.run().expect("entry");
    let by_entry = inst.output::<f32>("prob").expect("output").to_vec();
    inst.run_ops().expect("op table");
    assert_eq!(inst.output::<f32>("prob").expect("output"), &by_entry[..]);
    for threads in [1, 2, 4] {
        let mut e = Engine::new(StdPort::new(), threads).expect("engine");
        let mut i2 = b.instance().expect("instance");
        i2.set_input("image", &x).expect("input");
        e.run(&mut i2).expect("engine run");
        assert_eq!(
            i2.output::<f32>("prob").expect("output"),
            &by_entry[..],
            "engine at {threads} threads"
        );
    }
    // A fastOps entry with another task count, and FAST features without a table, are refused by name.
    let mut bad_ops = fast.to_vec();
    bad_ops[1].num_tasks += 1;
    let mut cfg = *raw;
    cfg.fast_ops = bad_ops.as_ptr();
    // SAFETY: every pointer of cfg is the compiled config's or bad_ops', alive here.
    let err = unsafe { ConfigView::new(&cfg) }.unwrap_err().to_string();
    assert!(err.contains("fastOps[1].numTasks"), "{err}");
    let mut cfg = *raw;
    cfg.fast_ops = std::ptr::null();
    // SAFETY: as above.
    let err = unsafe { ConfigView::new(&cfg) }.unwrap_err().to_string();
    assert!(err.contains("fastCpuFeatures"), "{err}");
}
