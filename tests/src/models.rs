//! Test models built by code with deterministic weights: the 6-node add/sub graph of the TVM BSP seed, an MLP,
//! a LeNet-style CNN, and a Concat/Transpose/Reshape/broadcast graph.

use crate::onnx::{Attr, Model};
use crate::rand_vec;

/// input + 1 - 2 and input + 3 - 4 + 5, summed: 10.0 → 23.0 (seed 004). Two independent chains (4 BSP layers).
pub fn addsub6() -> Vec<u8> {
    let mut m = Model::new();
    m.input("input", &[1, 4]).output("output", &[1, 4]);
    for (n, v) in [
        ("c1", 1.0),
        ("c2", 2.0),
        ("c3", 3.0),
        ("c4", 4.0),
        ("c5", 5.0),
    ] {
        m.init(n, &[1], vec![v]);
    }
    m.node("Add", &["input", "c1"], &["sid_1"], vec![])
        .node("Sub", &["sid_1", "c2"], &["sid_2"], vec![])
        .node("Add", &["input", "c3"], &["sid_3"], vec![])
        .node("Sub", &["sid_3", "c4"], &["sid_4"], vec![])
        .node("Add", &["sid_4", "c5"], &["sid_5"], vec![])
        .node("Add", &["sid_2", "sid_5"], &["output"], vec![]);
    m.bytes()
}

/// MLP: MatMul + bias + Relu, Gemm(transB) + Tanh, Gemm + Sigmoid.
pub fn mlp(batch: usize) -> Vec<u8> {
    let mut m = Model::new();
    m.input("x", &[batch, 37]).output("y", &[batch, 10]);
    m.init(
        "w1",
        &[37, 64],
        rand_vec(37 * 64, 1).iter().map(|v| v * 0.3).collect(),
    )
    .init("b1", &[64], rand_vec(64, 2))
    .init(
        "w2",
        &[33, 64],
        rand_vec(33 * 64, 3).iter().map(|v| v * 0.2).collect(),
    )
    .init("b2", &[33], rand_vec(33, 4))
    .init("w3", &[33, 10], rand_vec(330, 5))
    .init("b3", &[10], rand_vec(10, 6));
    m.node("MatMul", &["x", "w1"], &["h1"], vec![])
        .node("Add", &["h1", "b1"], &["h1b"], vec![])
        .node("Relu", &["h1b"], &["a1"], vec![])
        .node(
            "Gemm",
            &["a1", "w2", "b2"],
            &["h2"],
            vec![("transB", Attr::Int(1))],
        )
        .node("Tanh", &["h2"], &["a2"], vec![])
        .node(
            "Gemm",
            &["a2", "w3", "b3"],
            &["h3"],
            vec![("alpha", Attr::Float(0.7)), ("beta", Attr::Float(1.5))],
        )
        .node("Sigmoid", &["h3"], &["y"], vec![]);
    m.bytes()
}

/// Three linear layers, each followed by the exact GELU spelled out in elementary ops in one of the three
/// groupings `passes::fuse_gelu` recognises: `(x·0.5)·(1+erf(x/√2))`, `(x·(1+erf(x·(1/√2))))·0.5` and
/// `x·((1+erf(x/√2))·0.5)`. Input [batch, 40], output [batch, 24].
pub fn gelu_mlp(batch: usize) -> Vec<u8> {
    let mut m = Model::new();
    m.input("x", &[batch, 40]).output("y", &[batch, 24]);
    let w = |n: usize, seed: u64| rand_vec(n, seed).iter().map(|v| v * 0.6).collect();
    m.init("w1", &[40, 32], w(40 * 32, 11))
        .init("b1", &[32], rand_vec(32, 12))
        .init("w2", &[32, 32], w(32 * 32, 13))
        .init("w3", &[32, 24], w(32 * 24, 14))
        .init("sqrt2", &[], vec![std::f32::consts::SQRT_2])
        .init("rsqrt2", &[1], vec![std::f32::consts::FRAC_1_SQRT_2])
        .init("one", &[], vec![1.0])
        .init("half", &[], vec![0.5]);
    m.node("MatMul", &["x", "w1"], &["h1"], vec![])
        .node("Add", &["h1", "b1"], &["x1"], vec![])
        .node("Div", &["x1", "sqrt2"], &["s1"], vec![])
        .node("Erf", &["s1"], &["e1"], vec![])
        .node("Mul", &["x1", "half"], &["p1"], vec![])
        .node("Add", &["e1", "one"], &["o1"], vec![])
        .node("Mul", &["p1", "o1"], &["g1"], vec![])
        .node("MatMul", &["g1", "w2"], &["x2"], vec![])
        .node("Mul", &["rsqrt2", "x2"], &["s2"], vec![])
        .node("Erf", &["s2"], &["e2"], vec![])
        .node("Add", &["one", "e2"], &["o2"], vec![])
        .node("Mul", &["x2", "o2"], &["p2"], vec![])
        .node("Mul", &["p2", "half"], &["g2"], vec![])
        .node("MatMul", &["g2", "w3"], &["x3"], vec![])
        .node("Div", &["x3", "sqrt2"], &["s3"], vec![])
        .node("Erf", &["s3"], &["e3"], vec![])
        .node("Add", &["e3", "one"], &["o3"], vec![])
        .node("Mul", &["half", "o3"], &["p3"], vec![])
        .node("Mul", &["x3", "p3"], &["y"], vec![]);
    m.bytes()
}

/// Two attention blocks over x [1, 2, 37, 8] (2 heads, 37 tokens, 8 features each) with queries, keys and values
/// all x: scores `x·xᵀ` divided by √8 (not a power of two) plus a constant mask row [1, 1, 1, 37], softmax,
/// times x; then that context's scores scaled by a `Mul` with 0.125 on the left, softmax. Output the second
/// softmax [1, 2, 37, 37]. `passes::fuse_epilogues` folds both scalings and the mask into the products.
pub fn attention_scores() -> Vec<u8> {
    let mut m = Model::new();
    m.input("x", &[1, 2, 37, 8]).output("y", &[1, 2, 37, 37]);
    let mask: Vec<f32> = (0..37)
        .map(|j| if j % 5 == 4 { -1e4 } else { 0.0 })
        .collect();
    m.init("sqrt_d", &[], vec![8f32.sqrt()])
        .init("eighth", &[1], vec![0.125])
        .init("mask", &[1, 1, 1, 37], mask);
    let swap = || vec![("perm", Attr::Ints(vec![0, 1, 3, 2]))];
    m.node("Transpose", &["x"], &["xt"], swap())
        .node("MatMul", &["x", "xt"], &["s1"], vec![])
        .node("Div", &["s1", "sqrt_d"], &["d1"], vec![])
        .node("Add", &["d1", "mask"], &["m1"], vec![])
        .node("Softmax", &["m1"], &["p1"], vec![("axis", Attr::Int(-1))])
        .node("MatMul", &["p1", "x"], &["c"], vec![])
        .node("Transpose", &["c"], &["ct"], swap())
        .node("MatMul", &["c", "ct"], &["s2"], vec![])
        .node("Mul", &["eighth", "s2"], &["d2"], vec![])
        .node("Softmax", &["d2"], &["y"], vec![("axis", Attr::Int(-1))]);
    m.bytes()
}

/// LeNet-style: Conv+BN+Relu, MaxPool, Conv(bias)+Relu, AveragePool (count_include_pad 0 with padding), Flatten,
/// Gemm, Relu, Gemm, Softmax. Input [n, 1, 28, 28].
pub fn lenet(batch: usize) -> Vec<u8> {
    let mut m = Model::new();
    m.input("image", &[batch, 1, 28, 28])
        .output("prob", &[batch, 10]);
    m.init(
        "c1w",
        &[6, 1, 5, 5],
        rand_vec(150, 11).iter().map(|v| v * 0.4).collect(),
    )
    .init(
        "bn_s",
        &[6],
        rand_vec(6, 12).iter().map(|v| 1.0 + 0.3 * v).collect(),
    )
    .init("bn_b", &[6], rand_vec(6, 13))
    .init(
        "bn_m",
        &[6],
        rand_vec(6, 14).iter().map(|v| 0.1 * v).collect(),
    )
    .init(
        "bn_v",
        &[6],
        rand_vec(6, 15)
            .iter()
            .map(|v| 1.0 + 0.5 * v.abs())
            .collect(),
    )
    .init(
        "c2w",
        &[16, 6, 5, 5],
        rand_vec(2400, 16).iter().map(|v| v * 0.15).collect(),
    )
    .init("c2b", &[16], rand_vec(16, 17))
    .init(
        "f1w",
        &[120, 400],
        rand_vec(48000, 18).iter().map(|v| v * 0.08).collect(),
    )
    .init("f1b", &[120], rand_vec(120, 19))
    .init(
        "f2w",
        &[10, 120],
        rand_vec(1200, 20).iter().map(|v| v * 0.2).collect(),
    )
    .init("f2b", &[10], rand_vec(10, 21));
    m.node(
        "Conv",
        &["image", "c1w"],
        &["c1"],
        vec![("pads", Attr::Ints(vec![2, 2, 2, 2]))],
    )
    .node(
        "BatchNormalization",
        &["c1", "bn_s", "bn_b", "bn_m", "bn_v"],
        &["bn1"],
        vec![],
    )
    .node("Relu", &["bn1"], &["r1"], vec![])
    .node(
        "MaxPool",
        &["r1"],
        &["p1"],
        vec![
            ("kernel_shape", Attr::Ints(vec![2, 2])),
            ("strides", Attr::Ints(vec![2, 2])),
        ],
    )
    .node("Conv", &["p1", "c2w", "c2b"], &["c2"], vec![])
    .node("Relu", &["c2"], &["r2"], vec![])
    .node(
        "AveragePool",
        &["r2"],
        &["p2"],
        vec![
            ("kernel_shape", Attr::Ints(vec![3, 3])),
            ("strides", Attr::Ints(vec![2, 2])),
            ("pads", Attr::Ints(vec![1, 1, 0, 0])),
            ("count_include_pad", Attr::Int(0)),
        ],
    )
    .node("Flatten", &["p2"], &["flat"], vec![])
    .node(
        "Gemm",
        &["flat", "f1w", "f1b"],
        &["f1"],
        vec![("transB", Attr::Int(1))],
    )
    .node("Relu", &["f1"], &["r3"], vec![])
    .node(
        "Gemm",
        &["r3", "f2w", "f2b"],
        &["logits"],
        vec![("transB", Attr::Int(1))],
    )
    .node("Softmax", &["logits"], &["prob"], vec![]);
    m.bytes()
}

/// Concat / Transpose / Reshape / broadcasting / Exp / Div / Softmax on two inputs.
pub fn shapes() -> Vec<u8> {
    let mut m = Model::new();
    m.input("a", &[2, 3, 5])
        .input("b", &[2, 4, 5])
        .output("y", &[2, 5, 7])
        .output("z", &[5, 14]);
    m.init("scale", &[7], (1..=7).map(|i| i as f32 * 0.5).collect())
        .init("bias", &[5, 1], rand_vec(5, 31))
        .init_i64("shape", vec![5, -1]);
    m.node("Concat", &["a", "b"], &["ab"], vec![("axis", Attr::Int(1))])
        .node(
            "Transpose",
            &["ab"],
            &["t"],
            vec![("perm", Attr::Ints(vec![0, 2, 1]))],
        )
        .node("Mul", &["t", "scale"], &["ts"], vec![])
        .node("Add", &["ts", "bias"], &["tb"], vec![])
        .node("Exp", &["tb"], &["e"], vec![])
        .node("Div", &["e", "scale"], &["d"], vec![])
        .node("Softmax", &["d"], &["y"], vec![("axis", Attr::Int(1))])
        .node("Reshape", &["tb", "shape"], &["z"], vec![]);
    m.bytes()
}
