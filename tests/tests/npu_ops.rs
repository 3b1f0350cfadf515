//! The NPU op library against the reference semantics: every op variant (f32 and int8) is compiled for `vnpu`
//! (arg map, transaction, parameter blocks, NPU-layout constants), its transaction is run by bundle-rt's
//! emulator on op-local buffers, and the result is compared with `bundlec::ir::ops` — `eval` for f32 (SPEC §11
//! tolerance), `ir::ops::quant` for int8 (exactly). One macro, `npu_case!`, defines every case; shapes cover tails,
//! every padding side, strides, dilations, groups, depthwise, broadcasts and multi-chunk accumulation.

use bundle_rt::{Device, Emulator, NpuBuffers};
use bundlec::ir::ops::quant::{self, Requantize};
use bundlec::ir::{
    ops, Activation, BinOp, ConvAttrs, Epilogue, Op, PoolAttrs, PoolKind, Tensor, UnOp,
};
use bundlec::npu::ops::cnn::{ConvOp, GapOp, PoolMode, PoolOp};
use bundlec::npu::ops::elementwise::{Broadcast, EltOp, EltwiseOp};
use bundlec::npu::ops::linalg::GemmOp;
use bundlec::npu::ops::shape::{CopyOp, CopyPart};
use bundlec::npu::ops::{ArgKind, Elem, NpuOp, Quant, Requant, Weights};
use bundlec::npu::{txn, NpuTarget};
use bundlec_tests::{max_scaled_error, rand_vec};

/// Expected output of a case.
enum Want {
    F32(Vec<f32>),
    Int(Vec<i32>),
}

struct Case {
    op: NpuOp,
    /// Activation inputs in arg-map order (raw bytes).
    inputs: Vec<Vec<u8>>,
    want: Want,
    elem: Elem,
}

fn f32_bytes(v: &[f32]) -> Vec<u8> {
    v.iter().flat_map(|x| x.to_le_bytes()).collect()
}
fn int_bytes(v: &[i32]) -> Vec<u8> {
    v.iter().map(|&x| x as u8).collect()
}

/// Compiles the op, runs its transaction on the emulator with op-local buffers, returns the output bytes.
fn run(op: &NpuOp, inputs: &[Vec<u8>], out_bytes: usize) -> Vec<u8> {
    let t = NpuTarget::vnpu();
    let p = op.program(&t).expect("program");
    let txn = txn::container(&t, &p.body);
    let ins: Vec<_> = p
        .arg_map
        .iter()
        .filter(|e| e.kind == ArgKind::Input)
        .collect();
    assert_eq!(ins.len(), inputs.len(), "arg map inputs");
    // Every tensor sits 64-byte padded in its buffer, as in a segment's fused buffers: a transfer's last run may
    // end in the padding.
    let in_size = ins
        .iter()
        .map(|e| (e.offset + e.size) as usize)
        .max()
        .unwrap_or(0)
        .max(1)
        .next_multiple_of(64);
    let mut inb = vec![0u8; in_size];
    for (e, v) in ins.iter().zip(inputs) {
        assert_eq!(e.size as usize, v.len(), "input size in the arg map");
        inb[e.offset as usize..e.offset as usize + v.len()].copy_from_slice(v);
    }
    let out_e = p
        .arg_map
        .iter()
        .find(|e| e.kind == ArgKind::Output)
        .expect("output entry");
    assert_eq!(out_e.size as usize, out_bytes, "output size in the arg map");
    let mut out = vec![0xA5u8; out_bytes.next_multiple_of(64)];
    let mut scratch = vec![0u8; 64];
    let consts = if p.consts.is_empty() {
        vec![0u8; 64]
    } else {
        p.consts.clone()
    };
    let params = if p.params.is_empty() {
        vec![0u8; 64]
    } else {
        p.params.clone()
    };
    let cycles = Emulator::vnpu()
        .run(
            &txn,
            NpuBuffers {
                input: &inb,
                output: &mut out,
                scratch: &mut scratch,
                constants: &consts,
                params: &params,
            },
        )
        .unwrap_or_else(|e| panic!("emulator: {e}"));
    assert!(cycles.instruction > 0);
    out.truncate(out_bytes);
    out
}

fn check(c: Case) {
    match c.want {
        Want::F32(w) => {
            let got: Vec<f32> = run(&c.op, &c.inputs, w.len() * 4)
                .chunks(4)
                .map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]]))
                .collect();
            let e = max_scaled_error(&got, &w);
            assert!(e <= 1e-4, "max scaled error {e:e}");
        }
        Want::Int(w) => {
            let got: Vec<i32> = run(&c.op, &c.inputs, w.len())
                .iter()
                .map(|&b| {
                    if c.elem == Elem::I8 {
                        b as i8 as i32
                    } else {
                        b as i32
                    }
                })
                .collect();
            let bad = got.iter().zip(&w).filter(|(a, b)| a != b).count();
            assert_eq!(
                bad,
                0,
                "{bad} of {} int8 outputs differ; first got {:?} want {:?}",
                w.len(),
                &got[..8.min(got.len())],
                &w[..8.min(w.len())]
            );
        }
    }
}

/// One test per op variant; every variant goes through the same compile → emulate → compare path.
macro_rules! npu_case {
    ($($name:ident => $case:expr;)*) => {
        $(#[test] fn $name() { check($case); })*
    };
}

fn conv_attrs(
    k: usize,
    s: usize,
    p: [usize; 4],
    d: usize,
    group: usize,
    residual: bool,
    act: Activation,
) -> ConvAttrs {
    ConvAttrs {
        kernel: [k, k],
        strides: [s, s],
        pads: p,
        dilations: [d, d],
        group,
        has_bias: true,
        epilogue: Epilogue {
            residual,
            act,
            ..Default::default()
        },
    }
}

/// f32 conv `x [n,c,h,w]`, `m` outputs, checked against `ir::ops::eval`.
fn conv_f32(x: [usize; 4], m: usize, a: ConvAttrs) -> Case {
    let [n, c, h, w] = x;
    let k = a.kernel[0];
    let xv = rand_vec(n * c * h * w, 11);
    let wv = rand_vec(m * (c / a.group) * k * k, 12);
    let bv = rand_vec(m, 13);
    let mut ins = vec![
        Tensor::f32(x.to_vec(), xv.clone()),
        Tensor::f32(vec![m, c / a.group, k, k], wv.clone()),
        Tensor::f32(vec![m], bv.clone()),
    ];
    let probe = ops::eval(
        &Op::Conv(ConvAttrs {
            epilogue: Epilogue::default(),
            ..a.clone()
        }),
        &ins.iter().collect::<Vec<_>>(),
    )
    .unwrap();
    let ys = probe[0].shape.clone();
    let rv = rand_vec(ys.iter().product(), 14);
    if a.epilogue.residual {
        ins.push(Tensor::f32(ys.clone(), rv.clone()));
    }
    let want =
        ops::eval(&Op::Conv(a.clone()), &ins.iter().collect::<Vec<_>>()).unwrap()[0].to_f32_vec();
    let mut inputs = vec![f32_bytes(&xv)];
    if a.epilogue.residual {
        inputs.push(f32_bytes(&rv));
    }
    Case {
        op: NpuOp::Conv(ConvOp {
            elem: Elem::F32,
            x,
            m,
            kernel: a.kernel,
            strides: a.strides,
            pads: a.pads,
            dilations: a.dilations,
            group: a.group,
            out: [ys[2], ys[3]],
            weights: Weights::F32(wv),
            bias: bv,
            residual: a.epilogue.residual,
            act: a.epilogue.act,
            requant: None,
        }),
        inputs,
        want: Want::F32(want),
        elem: Elem::F32,
    }
}

fn ints(n: usize, seed: u64, lo: i32, hi: i32) -> Vec<i32> {
    rand_vec(n, seed)
        .iter()
        .map(|&v| lo + (((v + 1.0) * 0.5 * (hi - lo + 1) as f32) as i32).min(hi - lo))
        .collect()
}

fn range(elem: Elem) -> (i32, i32) {
    elem.range()
}

/// int8 conv against `quant::qconv`.
fn conv_int8(elem: Elem, x: [usize; 4], m: usize, a: ConvAttrs, relu: bool) -> Case {
    let [n, c, h, w] = x;
    let k = a.kernel[0];
    let (lo, hi) = range(elem);
    let xv = ints(n * c * h * w, 21, lo, hi);
    let wv = ints(m * (c / a.group) * k * k, 22, -127, 127);
    let x_zp = if elem == Elem::U8 { 128 } else { -3 };
    let y_zp = if elem == Elem::U8 { 100 } else { 5 };
    let q = Requantize {
        x_zero_point: x_zp,
        bias: ints(m, 23, -2000, 2000),
        scale: rand_vec(m, 24)
            .iter()
            .map(|v| 0.0005 + 0.002 * v.abs())
            .collect(),
        y_zero_point: y_zp,
        clamp: if relu { (y_zp, hi) } else { (lo, hi) },
        signed: elem == Elem::I8,
    };
    let (want, ys) = quant::qconv(&xv, x, &wv, m, &a, &q);
    Case {
        op: NpuOp::Conv(ConvOp {
            elem,
            x,
            m,
            kernel: a.kernel,
            strides: a.strides,
            pads: a.pads,
            dilations: a.dilations,
            group: a.group,
            out: [ys[2], ys[3]],
            weights: Weights::I8(wv.iter().map(|&v| v as i8).collect()),
            bias: vec![],
            residual: false,
            act: Activation::None,
            requant: Some(Requant {
                x_zero_point: q.x_zero_point,
                bias: q.bias.clone(),
                scale: q.scale.clone(),
                y_zero_point: q.y_zero_point,
                clamp: q.clamp,
            }),
        }),
        inputs: vec![int_bytes(&xv)],
        want: Want::Int(want),
        elem,
    }
}

fn gemm_f32(m: usize, k: usize, n: usize, residual: bool, act: Activation) -> Case {
    let xv = rand_vec(m * k, 31);
    let wv = rand_vec(k * n, 32);
    let bv = rand_vec(n, 33);
    let rv = rand_vec(m * n, 34);
    let mut ins = vec![
        Tensor::f32(vec![m, k], xv.clone()),
        Tensor::f32(vec![k, n], wv.clone()),
        Tensor::f32(vec![n], bv.clone()),
    ];
    if residual {
        ins.push(Tensor::f32(vec![m, n], rv.clone()));
    }
    let attrs = bundlec::ir::GemmAttrs {
        alpha: 1.0,
        beta: 1.0,
        trans_a: false,
        trans_b: false,
        has_c: true,
        epilogue: Epilogue {
            residual,
            act,
            ..Default::default()
        },
    };
    let want =
        ops::eval(&Op::Gemm(attrs), &ins.iter().collect::<Vec<_>>()).unwrap()[0].to_f32_vec();
    let mut inputs = vec![f32_bytes(&xv)];
    if residual {
        inputs.push(f32_bytes(&rv));
    }
    Case {
        op: NpuOp::Gemm(GemmOp {
            elem: Elem::F32,
            m,
            k,
            n,
            weights: Weights::F32(wv),
            bias: bv,
            residual,
            act,
            requant: None,
        }),
        inputs,
        want: Want::F32(want),
        elem: Elem::F32,
    }
}

fn gemm_int8(elem: Elem, m: usize, k: usize, n: usize) -> Case {
    let (lo, hi) = range(elem);
    let xv = ints(m * k, 41, lo, hi);
    let wv = ints(k * n, 42, -128, 127);
    let q = Requantize {
        x_zero_point: if elem == Elem::U8 { 120 } else { 0 },
        bias: ints(n, 43, -500, 500),
        scale: rand_vec(n, 44)
            .iter()
            .map(|v| 0.001 + 0.001 * v.abs())
            .collect(),
        y_zero_point: if elem == Elem::U8 { 128 } else { -1 },
        clamp: (lo, hi),
        signed: elem == Elem::I8,
    };
    let want = quant::qgemm(&xv, &wv, m, k, n, &q);
    Case {
        op: NpuOp::Gemm(GemmOp {
            elem,
            m,
            k,
            n,
            weights: Weights::I8(wv.iter().map(|&v| v as i8).collect()),
            bias: vec![],
            residual: false,
            act: Activation::None,
            requant: Some(Requant {
                x_zero_point: q.x_zero_point,
                bias: q.bias,
                scale: q.scale,
                y_zero_point: q.y_zero_point,
                clamp: q.clamp,
            }),
        }),
        inputs: vec![int_bytes(&xv)],
        want: Want::Int(want),
        elem,
    }
}

/// f32 elementwise: `b` is a run-time operand (`Same`) or a constant with the given broadcast shape.
fn elt_f32(op: EltOp, shape: &[usize], b_shape: Option<&[usize]>, act: Activation) -> Case {
    let n: usize = shape.iter().product();
    let av = rand_vec(n, 51);
    let (b_shape, b_const) = match b_shape {
        Some(s) => (s.to_vec(), true),
        None => (shape.to_vec(), false),
    };
    let bv = rand_vec(b_shape.iter().product(), 52);
    let a = Tensor::f32(shape.to_vec(), av.clone());
    let b = Tensor::f32(b_shape.clone(), bv.clone());
    let mut want = match op {
        EltOp::Add => ops::eval(&Op::Binary(BinOp::Add), &[&a, &b]).unwrap()[0].to_f32_vec(),
        EltOp::Mul => ops::eval(&Op::Binary(BinOp::Mul), &[&a, &b]).unwrap()[0].to_f32_vec(),
        EltOp::Unary => av.clone(),
    };
    want = match act {
        Activation::None => want,
        Activation::Relu => ops::eval(
            &Op::Unary(UnOp::Relu),
            &[&Tensor::f32(shape.to_vec(), want)],
        )
        .unwrap()[0]
            .to_f32_vec(),
        Activation::Clip(lo, hi) => ops::eval(
            &Op::Unary(UnOp::Clip(lo, hi)),
            &[&Tensor::f32(shape.to_vec(), want)],
        )
        .unwrap()[0]
            .to_f32_vec(),
    };
    let nb: usize = b_shape.iter().product();
    let broadcast = if !b_const || nb == n {
        Broadcast::Same
    } else if nb == 1 {
        Broadcast::Scalar
    } else {
        let full: Vec<usize> = std::iter::repeat_n(1, shape.len() - b_shape.len())
            .chain(b_shape.iter().copied())
            .collect();
        let ax = (0..shape.len()).rev().find(|&i| full[i] != 1).unwrap();
        Broadcast::PerRow {
            inner: shape[ax + 1..].iter().product(),
            period: shape[ax],
        }
    };
    let mut inputs = vec![f32_bytes(&av)];
    if !b_const && op != EltOp::Unary {
        inputs.push(f32_bytes(&bv));
    }
    Case {
        op: NpuOp::Eltwise(EltwiseOp {
            elem: Elem::F32,
            op,
            n,
            b_const: (b_const && op != EltOp::Unary).then(|| f32_bytes(&bv)),
            broadcast,
            act,
            quant: None,
        }),
        inputs,
        want: Want::F32(want),
        elem: Elem::F32,
    }
}

fn elt_int8(elem: Elem, mul: bool, n: usize) -> Case {
    let (lo, hi) = range(elem);
    let av = ints(n, 61, lo, hi);
    let bv = ints(n, 62, lo, hi);
    let qa = Quant {
        scale: 0.02,
        zero_point: if elem == Elem::U8 { 128 } else { 1 },
    };
    let qb = Quant {
        scale: 0.03,
        zero_point: if elem == Elem::U8 { 100 } else { -2 },
    };
    let qy = Quant {
        scale: if mul { 0.05 } else { 0.04 },
        zero_point: if elem == Elem::U8 { 90 } else { 0 },
    };
    let want = quant::qbinary(
        (&av, qa.scale, qa.zero_point),
        (&bv, qb.scale, qb.zero_point),
        mul,
        (qy.scale, qy.zero_point),
        (lo, hi),
        elem == Elem::I8,
    );
    Case {
        op: NpuOp::Eltwise(EltwiseOp {
            elem,
            op: if mul { EltOp::Mul } else { EltOp::Add },
            n,
            b_const: None,
            broadcast: Broadcast::Same,
            act: Activation::None,
            quant: Some(([qa, qb, qy], (lo, hi))),
        }),
        inputs: vec![int_bytes(&av), int_bytes(&bv)],
        want: Want::Int(want),
        elem,
    }
}

fn pool(elem: Elem, mode: PoolMode, x: [usize; 4], k: usize, s: usize, p: [usize; 4]) -> Case {
    let [n, c, h, w] = x;
    let vals: Vec<f32> = match elem {
        Elem::F32 => rand_vec(n * c * h * w, 71),
        _ => ints(n * c * h * w, 71, range(elem).0, range(elem).1)
            .iter()
            .map(|&v| v as f32)
            .collect(),
    };
    let attrs = PoolAttrs {
        kernel: [k, k],
        strides: [s, s],
        pads: p,
        dilations: [1, 1],
        ceil_mode: false,
        count_include_pad: mode == PoolMode::AvgIncludePad,
    };
    let kind = if mode == PoolMode::Max {
        PoolKind::Max
    } else {
        PoolKind::Average
    };
    let y = ops::eval(
        &Op::Pool(kind, attrs),
        &[&Tensor::f32(x.to_vec(), vals.clone())],
    )
    .unwrap()
    .remove(0);
    let op = NpuOp::Pool(PoolOp {
        elem,
        mode,
        x,
        kernel: [k, k],
        strides: [s, s],
        pads: p,
        dilations: [1, 1],
        out: [y.shape[2], y.shape[3]],
    });
    match elem {
        Elem::F32 => Case {
            op,
            inputs: vec![f32_bytes(&vals)],
            want: Want::F32(y.to_f32_vec()),
            elem,
        },
        _ => Case {
            op,
            inputs: vec![int_bytes(
                &vals.iter().map(|&v| v as i32).collect::<Vec<_>>(),
            )],
            want: Want::Int(
                y.to_f32_vec()
                    .iter()
                    .map(|&v| quant::rhe(v) as i32)
                    .collect(),
            ),
            elem,
        },
    }
}

fn gap(elem: Elem, planes: usize, size: usize) -> Case {
    let op = NpuOp::Gap(GapOp { elem, planes, size });
    match elem {
        Elem::F32 => {
            let v = rand_vec(planes * size, 81);
            let want = ops::eval(
                &Op::GlobalAveragePool,
                &[&Tensor::f32(vec![1, planes, size, 1], v.clone())],
            )
            .unwrap()[0]
                .to_f32_vec();
            Case {
                op,
                inputs: vec![f32_bytes(&v)],
                want: Want::F32(want),
                elem,
            }
        }
        _ => {
            let v = ints(planes * size, 81, range(elem).0, range(elem).1);
            Case {
                op,
                inputs: vec![int_bytes(&v)],
                want: Want::Int(quant::qgap(&v, planes, size)),
                elem,
            }
        }
    }
}

/// Concat along `axis` of f32 inputs; input `const_at` (if any) is a constant.
fn concat(shapes: &[Vec<usize>], axis: usize, const_at: Option<usize>) -> Case {
    let ts: Vec<Tensor> = shapes
        .iter()
        .enumerate()
        .map(|(i, s)| Tensor::f32(s.clone(), rand_vec(s.iter().product(), 90 + i as u64)))
        .collect();
    let want =
        ops::eval(&Op::Concat(axis), &ts.iter().collect::<Vec<_>>()).unwrap()[0].to_f32_vec();
    let outer: usize = shapes[0][..axis].iter().product();
    let parts = ts
        .iter()
        .enumerate()
        .map(|(i, t)| CopyPart {
            row_bytes: t.shape[axis..].iter().product::<usize>() * 4,
            constant: (Some(i) == const_at).then(|| t.to_bytes()),
        })
        .collect();
    let inputs = ts
        .iter()
        .enumerate()
        .filter(|(i, _)| Some(*i) != const_at)
        .map(|(_, t)| t.to_bytes())
        .collect();
    Case {
        op: NpuOp::Copy(CopyOp { outer, parts }),
        inputs,
        want: Want::F32(want),
        elem: Elem::F32,
    }
}

npu_case! {
    conv_3x3_pad1_tails => conv_f32([1, 5, 9, 7], 6, conv_attrs(3, 1, [1, 1, 1, 1], 1, 1, false, Activation::None));
    conv_7x7_s2_asym_pads => conv_f32([1, 3, 23, 21], 10, conv_attrs(7, 2, [3, 2, 1, 3], 1, 1, false, Activation::Relu));
    conv_1x1_many_channels_chunks => conv_f32([1, 300, 5, 6], 70, conv_attrs(1, 1, [0; 4], 1, 1, false, Activation::None));
    conv_3x3_dilation2_residual_clip => conv_f32([1, 8, 12, 11], 9, conv_attrs(3, 1, [2, 2, 2, 2], 2, 1, true, Activation::Clip(-0.5, 0.7)));
    conv_grouped => conv_f32([1, 12, 8, 8], 18, conv_attrs(3, 2, [1, 0, 0, 1], 1, 3, false, Activation::Relu));
    conv_depthwise_s1 => conv_f32([1, 32, 14, 13], 32, conv_attrs(3, 1, [1, 1, 1, 1], 1, 32, false, Activation::Clip(0.0, 6.0)));
    conv_depthwise_s2_batch2 => conv_f32([2, 24, 15, 15], 24, conv_attrs(3, 2, [1, 1, 1, 1], 1, 24, true, Activation::None));
    conv_wide_rows_tiled => conv_f32([1, 64, 20, 56], 64, conv_attrs(3, 1, [1, 1, 1, 1], 1, 1, true, Activation::Relu));
    conv_u8 => conv_int8(Elem::U8, [1, 7, 9, 10], 5, conv_attrs(3, 1, [1, 1, 1, 1], 1, 1, false, Activation::None), false);
    conv_i8_s2_relu => conv_int8(Elem::I8, [1, 6, 11, 9], 12, conv_attrs(3, 2, [1, 0, 1, 2], 1, 1, false, Activation::None), true);
    conv_u8_depthwise => conv_int8(Elem::U8, [1, 16, 10, 10], 16, conv_attrs(3, 1, [1, 1, 1, 1], 1, 16, false, Activation::None), true);
    conv_i8_1x1_chunks => conv_int8(Elem::I8, [1, 600, 4, 4], 40, conv_attrs(1, 1, [0; 4], 1, 1, false, Activation::None), false);
    gemm_tails => gemm_f32(7, 13, 9, false, Activation::None);
    gemm_big_k_chunks_relu => gemm_f32(33, 3000, 65, false, Activation::Relu);
    gemm_residual => gemm_f32(32, 128, 128, true, Activation::None);
    gemm_u8 => gemm_int8(Elem::U8, 9, 40, 17);
    gemm_i8_big => gemm_int8(Elem::I8, 20, 5000, 30);
    add_same => elt_f32(EltOp::Add, &[2, 3, 50, 70], None, Activation::Relu);
    mul_scalar_const => elt_f32(EltOp::Mul, &[1, 4, 7, 9], Some(&[1]), Activation::None);
    add_per_channel_const => elt_f32(EltOp::Add, &[2, 16, 9, 9], Some(&[16, 1, 1]), Activation::None);
    add_bias_last_axis => elt_f32(EltOp::Add, &[2, 16, 128], Some(&[128]), Activation::None);
    mul_per_channel_big_rows => elt_f32(EltOp::Mul, &[1, 3, 130, 130], Some(&[1, 3, 1, 1]), Activation::None);
    relu_big => elt_f32(EltOp::Unary, &[1, 1, 200, 200], None, Activation::Relu);
    clip => elt_f32(EltOp::Unary, &[3, 333], None, Activation::Clip(-0.25, 0.5));
    add_u8 => elt_int8(Elem::U8, false, 1000);
    mul_i8 => elt_int8(Elem::I8, true, 70000);
    maxpool_3x3_s2_pads => pool(Elem::F32, PoolMode::Max, [1, 5, 17, 16], 3, 2, [1, 1, 1, 1]);
    avgpool_include_pad => pool(Elem::F32, PoolMode::AvgIncludePad, [2, 3, 9, 9], 3, 1, [1, 0, 1, 2]);
    avgpool_exclude_pad => pool(Elem::F32, PoolMode::AvgExcludePad, [1, 4, 8, 10], 2, 2, [1, 1, 1, 1]);
    maxpool_u8 => pool(Elem::U8, PoolMode::Max, [1, 6, 12, 12], 2, 2, [0; 4]);
    avgpool_i8 => pool(Elem::I8, PoolMode::AvgExcludePad, [1, 6, 12, 12], 3, 1, [1, 1, 1, 1]);
    gap_f32 => gap(Elem::F32, 130, 49);
    gap_big_plane => gap(Elem::F32, 3, 112 * 112);
    gap_u8 => gap(Elem::U8, 64, 49);
    gap_i8 => gap(Elem::I8, 10, 300);
    concat_channels_with_constant => concat(&[vec![1, 3, 4, 5], vec![1, 2, 4, 5], vec![1, 4, 4, 5]], 1, Some(1));
    concat_last_axis_rows => concat(&[vec![6, 7], vec![6, 1], vec![6, 20000]], 1, None);
}

/// An int8 conv whose every tiling stores odd-length rows at odd offsets (99-byte rows of 9801-byte planes) has
/// no transfer shape AIE-ML's BDs can move: it stays on the CPU with the `dma` constraint, naming the transfer.
/// The same shapes in f32 (4-byte elements) compile and run.
#[test]
fn int8_odd_planes_are_refused_with_the_dma_constraint() {
    let t = NpuTarget::vnpu();
    let attrs = || conv_attrs(1, 1, [0; 4], 1, 1, false, Activation::None);
    let q = conv_int8(Elem::U8, [1, 3, 99, 99], 3, attrs(), false);
    let r =
        q.op.program(&t)
            .expect_err("odd int8 planes must not compile");
    assert_eq!(r.constraint.id, "dma", "{r}");
    assert!(r.detail.contains("B apart"), "{r}");
    check(conv_f32([1, 3, 99, 99], 3, attrs()));
}

/// A broadcast load reads DDR once and lands in every member core: 64 words to the 4 cores of column 1, stored
/// back by each to its own quarter of `out`; the emulated DDR traffic counts the load once.
#[test]
fn broadcast_load_reaches_every_core_of_a_column_from_one_ddr_read() {
    let t = NpuTarget::vnpu();
    let mut body = txn::TxnBody::for_target(&t);
    let cores: Vec<(usize, u8, u8)> = (0..4u8).map(|k| (k as usize * 4 + 1, 1, 2 + k)).collect();
    let run = |buf, offset| txn::Transfer {
        buf,
        offset,
        local: 0x400,
        row_bytes: 256,
        rows: 1,
        ddr_stride: 256,
        local_stride: 256,
    };
    body.broadcast(&cores, &run(txn::Xrt::In, 0)).unwrap();
    for (i, &c) in cores.iter().enumerate() {
        body.dma(c, true, &run(txn::Xrt::Out, 256 * i as u64))
            .unwrap();
    }
    body.drain_all();
    let input: Vec<u8> = (0..256u32).map(|i| (i * 7 % 251) as u8).collect();
    let mut out = vec![0u8; 1024];
    let (mut scratch, consts, params) = (vec![0u8; 64], vec![0u8; 64], vec![0u8; 64]);
    let cycles = Emulator::vnpu()
        .run(
            &txn::container(&t, &body),
            NpuBuffers {
                input: &input,
                output: &mut out,
                scratch: &mut scratch,
                constants: &consts,
                params: &params,
            },
        )
        .unwrap_or_else(|e| panic!("emulator: {e}"));
    for q in out.chunks(256) {
        assert_eq!(q, &input[..]);
    }
    // 256 bytes in once, 1024 out, at 64 bytes per cycle.
    assert_eq!(cycles.data, (256 + 1024) / 64);
}
