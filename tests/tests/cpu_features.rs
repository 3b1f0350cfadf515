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
