//! Test support shared by the integration tests: an ONNX model builder over `tract_onnx::pb` (models are made
//! by code, never committed), the tract oracle, and harnesses that compile a model with bundlec and run it
//! (a) as a C program linked by the system `cc` and (b) from Rust through `bundle-rt` after `cc -shared`.
#![allow(missing_docs)]

pub mod harness;
pub mod imports;
pub mod kernel_case;
pub mod loaded;
pub mod models;
pub mod onnx;

/// Max scaled error `|a - b| / max(1, |b|)` (SPEC §11).
pub fn max_scaled_error(got: &[f32], want: &[f32]) -> f32 {
    assert_eq!(got.len(), want.len(), "length mismatch");
    got.iter()
        .zip(want)
        .map(|(g, w)| (g - w).abs() / w.abs().max(1.0))
        .fold(0.0, f32::max)
}

/// Asserts every output is within `tol` scaled error (and neither has NaNs where the other does not).
pub fn assert_close(got: &[Vec<f32>], want: &[Vec<f32>], tol: f32, what: &str) {
    assert_eq!(got.len(), want.len(), "{what}: output count");
    for (i, (g, w)) in got.iter().zip(want).enumerate() {
        let e = max_scaled_error(g, w);
        assert!(
            e <= tol,
            "{what}: output {i} max scaled error {e:e} > {tol:e}"
        );
    }
}

/// The median of `v` (sorts it; the upper middle for an even count).
pub fn median(v: &mut [f64]) -> f64 {
    v.sort_by(|a, b| a.total_cmp(b));
    v[v.len() / 2]
}

/// Sets every input of a bundle's instance: float inputs to `rand_vec` (seeded with the input's index), integer
/// and bool inputs (token ids, masks) to ones.
pub fn fill_inputs(bundle: &bundle_rt::Bundle, inst: &mut bundle_rt::Instance) {
    for (k, t) in bundle.inputs().enumerate() {
        let (name, n) = (t.name.to_string(), t.elements);
        if t.dtype == bundle_rt::DType::F32 {
            inst.set_input(&name, &rand_vec(n, k as u64))
        } else {
            let mut one = vec![0u8; t.dtype.size()];
            one[0] = 1;
            inst.set_input_bytes(&name, &one.repeat(n))
        }
        .expect("input");
    }
}

/// Deterministic pseudo-random values in [-1, 1) (xorshift), so tests need no rand crate.
pub fn rand_vec(n: usize, seed: u64) -> Vec<f32> {
    let mut s = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    (0..n)
        .map(|_| {
            s ^= s << 13;
            s ^= s >> 7;
            s ^= s << 17;
            ((s >> 40) as f32 / (1u64 << 24) as f32) * 2.0 - 1.0
        })
        .collect()
}
