//! Scratch: small-M GEMM micro-kernel, A row-major vs packed; B panels.
use bundlec::codegen::kernels::gemm_x86::{assemble, MicroSpec, Simd};
use std::time::Instant;
unsafe extern "C" {
    fn mmap(a: *mut u8, l: usize, p: i32, f: i32, fd: i32, o: i64) -> *mut u8;
    fn mprotect(a: *mut u8, l: usize, p: i32) -> i32;
}
type F = unsafe extern "C" fn(*const f32, *const f32, *mut f32, *const f32, *const f32, *const f32);
fn jit(spec: &MicroSpec) -> F {
    let code = assemble(spec).unwrap();
    unsafe {
        let len = code.len().div_ceil(4096) * 4096;
        let p = mmap(std::ptr::null_mut(), len, 3, 0x22, -1, 0);
        std::ptr::copy_nonoverlapping(code.as_ptr(), p, code.len());
        assert_eq!(mprotect(p, len, 5), 0);
        std::mem::transmute::<*mut u8, F>(p)
    }
}
fn main() {
    let args: Vec<usize> = std::env::args().skip(1).map(|a| a.parse().unwrap()).collect();
    let (m, k, n) = (args[0], args[1], args[2]);
    let (mr, nr) = (8, 32);
    let a: Vec<f32> = (0..m * k).map(|i| (i % 7) as f32 * 0.01).collect(); // [m][k]
    let mut ap = vec![0f32; m * k];
    for i in 0..m { for p in 0..k { ap[(i / 8) * 8 * k + p * 8 + i % 8] = a[i * k + p]; } }
    let b: Vec<f32> = (0..k * n).map(|i| (i % 5) as f32 * 0.01).collect();
    let mut c = vec![0f32; m * n];
    let flops = 2.0 * (m * k * n) as f64;
    for variant in ["rowmajor", "packed", "rowmajor_nopf", "packed_nopf"] {
        let packed = variant.starts_with("packed");
        let pf = if variant.ends_with("nopf") { 0 } else { 64 };
        let (a_rs, a_cs) = if packed { (1, 8) } else { (k, 1) };
        let f = jit(&MicroSpec { simd: Simd::Avx512, rows: mr, k, a_rs, a_cs, b_rs: nr, c_rs: n,
            accumulate: false, b_prefetch: pf, prefetch_next: false, a_prefetch: 0, b_next_cols: false, b_copy: false, epi: None });
        let mut best = f64::MAX;
        for _ in 0..2000 {
            let t = Instant::now();
            for cb in 0..n / nr {
                for rt in 0..m / mr {
                    let aptr = if packed { ap[rt * 8 * k..].as_ptr() } else { a[rt * 8 * k..].as_ptr() };
                    unsafe { f(aptr, b[cb * k * nr..].as_ptr(), c[rt * 8 * n + cb * nr..].as_mut_ptr(), aptr, aptr, aptr) };
                }
            }
            best = best.min(t.elapsed().as_secs_f64());
        }
        println!("{m}x{k}x{n} {variant:16} {:8.2} us {:6.1} GFLOP/s", best * 1e6, flops / best / 1e9);
    }
}
