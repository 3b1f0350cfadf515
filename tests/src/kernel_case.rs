//! The kernel test macro (STYLE rule 7): a single-node model compiled once per kernel variant
//! (`harness::kernel_variants`: the Cranelift kernels of `--cpu generic`, and the AVX2 and AVX-512 machine code
//! of `x86-64-v3` / `x86-64-v4`), linked with `cc`, run, and compared with the reference semantics
//! (`bundlec::ir::ops::eval`); a variant this CPU cannot run is skipped with a `SKIPPED` line, never silently.
//! `tests/kernels.rs` and `tests/kernels_conv.rs` run their cases through it.

use crate::harness::{compile_with, kernel_variants, run_c};
use crate::onnx::{Attr, Model};
use crate::{max_scaled_error, rand_vec};
use bundlec::ir::{ops, Tensor};

/// Builds a single-node model with float inputs (runtime) and initializers, runs it, and compares with `op`.
/// Returns each variant run and the constant bytes of its bundle.
pub fn case(
    name: &str,
    op_type: &str,
    attrs: Vec<(&str, Attr)>,
    runtime: &[(&str, Vec<usize>)],
    inits: &[(&str, Vec<usize>)],
    reference: &bundlec::ir::Op,
    out_shape: &[usize],
) -> Vec<(&'static str, usize)> {
    let mut m = Model::new();
    let mut all = Vec::new();
    let mut rt_vals = Vec::new();
    for (i, (n, s)) in runtime.iter().enumerate() {
        m.input(n, s);
        let v = rand_vec(s.iter().product(), 1000 + i as u64);
        all.push(Tensor::f32(s.clone(), v.clone()));
        rt_vals.push(v);
    }
    for (i, (n, s)) in inits.iter().enumerate() {
        let v = rand_vec(s.iter().product(), 2000 + i as u64);
        m.init(n, s, v.clone());
        all.push(Tensor::f32(s.clone(), v));
    }
    m.output("y", out_shape);
    let names: Vec<&str> = runtime.iter().chain(inits).map(|(n, _)| *n).collect();
    m.node(op_type, &names, &["y"], attrs);
    let bytes = m.bytes();
    let refs: Vec<&Tensor> = all.iter().collect();
    let want = ops::eval(reference, &refs).expect("reference");
    assert_eq!(want[0].shape, out_shape, "{name}: reference shape");
    let mut ran = Vec::new();
    for (cpu, runnable) in kernel_variants() {
        if !runnable {
            eprintln!("SKIPPED: {name} with --cpu {cpu} (this CPU lacks its features)");
            continue;
        }
        let mut o = bundlec::Options::new(&format!("{name}_{}", cpu.replace('-', "_")));
        o.cpu = cpu.to_string();
        // The F(4x4) cases ask for it (the default takes F(2x2), the more accurate).
        if name.starts_with("conv_wino4") {
            o.winograd = bundlec::lower::Winograd::F4;
        }
        let c = compile_with(&bytes, o);
        // Cases that must reach a particular machine-code kernel, found by its symbol `NAME__kI_<tag>` in the
        // object, with the kernel sets that have it: AVX-512 (V4), AVX2 (V3) or both.
        const V4: &[&str] = &["x86-64-v4"];
        const V3: &[&str] = &["x86-64-v3"];
        const BOTH: &[&str] = &["x86-64-v3", "x86-64-v4"];
        let required = [
            ("conv_wino4", "_wino4_in", "F(4x4, 3x3)", V4),
            ("conv_wino", "_wino_in", "the AVX2 Winograd transforms", V3),
            ("conv_strip", "_strip", "the AVX2 column strip", V3),
            (
                "conv_dwc16_small",
                "_dwc16",
                "the AVX2 channel-blocked depthwise kernel",
                V3,
            ),
            (
                "conv_dwc16",
                "_dwc16",
                "the channel-blocked depthwise kernel",
                V4,
            ),
            (
                "conv_direct_strided",
                "_direct",
                "the direct convolution kernel",
                V4,
            ),
            (
                "conv_direct_stem",
                "_direct",
                "the direct convolution kernel",
                BOTH,
            ),
            (
                "conv_direct_dilated",
                "_direct",
                "the direct convolution kernel",
                BOTH,
            ),
            (
                "conv_direct_in_place",
                "_direct",
                "the direct convolution kernel",
                BOTH,
            ),
            ("un_sigmoid", "_vmath", "the vector math map", BOTH),
            ("un_tanh", "_vmath", "the vector math map", BOTH),
            ("un_exp", "_vmath", "the vector math map", BOTH),
            ("un_erf", "_vmath", "the vector math map", BOTH),
            ("un_gelu", "_vmath", "the vector math map", BOTH),
            ("softmax_rows", "_softmax", "the softmax row kernel", BOTH),
            ("softmax_long", "_softmax", "the softmax row kernel", BOTH),
            (
                "matmul10",
                "_avx512_0",
                "the 16-column AVX-512 GEMM tiles",
                V4,
            ),
            (
                "matmul11",
                "_avx512_0",
                "the 16-column AVX-512 GEMM tiles",
                V4,
            ),
            (
                "maxpool0",
                "_maxpool",
                "the separable 3x3 stride-2 max pooling",
                BOTH,
            ),
            (
                "maxpool4",
                "_maxpool",
                "the separable 3x3 stride-2 max pooling",
                BOTH,
            ),
        ];
        for (prefix, tag, what, sets) in required {
            if name.starts_with(prefix) && sets.contains(&cpu) {
                let tag = tag.as_bytes();
                let found = c.bundle.object.windows(tag.len()).any(|w| w == tag);
                assert!(found, "{name} --cpu {cpu}: {what} was not chosen");
            }
        }
        let got = run_c(&c, &rt_vals, &[out_shape.iter().product()]);
        let e = max_scaled_error(&got[0], want[0].as_f32().expect("f32"));
        assert!(e <= 1e-4, "{name} --cpu {cpu}: max scaled error {e:e}");
        ran.push((cpu, c.bundle.report.sizes[0]));
    }
    ran
}

/// An ONNX ints attribute.
pub fn ints(v: &[i64]) -> Attr {
    Attr::Ints(v.to_vec())
}
