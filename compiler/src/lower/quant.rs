//! Lowering of the int8 family (`ir/ops/quant.rs`). QAdd is one elementwise kernel; Quantize / Dequantize become one conversion kernel with their scales and zero
//! points as constants. QConv becomes an optional byte im2col (padded with the input zero point) and an integer
//! GEMM per (batch, group) whose A is the weights packed into i16 pairs at compile time; QMatMul is the same
//! GEMM with the weights as A and the input read transposed (`C^T = W^T · X^T`), so rows are always output
//! channels and the bias / scale are per row.

use super::ctx::{operand, Ctx};
use crate::error::{Error, Result};
use crate::ir::ops::quant::slices;
use crate::ir::{numel, DType, IntProduct, NodeId, Op, Tensor};
use crate::kernel::depthwise::pack_vnni;
use crate::kernel::gemm::Operand;
use crate::kernel::qgemm::pack_a;
use crate::kernel::qgemm::{QGemmSpec, QOut};
use crate::kernel::quant::QuantSpec;
use crate::kernel::{Body, Buf, Role};

/// Lowers a Quantize, Dequantize, QConv or QMatMul node.
pub(super) fn lower(cx: &mut Ctx, n: NodeId) -> Result<()> {
    let node = cx.g.nodes[n].clone();
    let (x, out) = (node.inputs[0], node.outputs[0]);
    let name = node.name.clone();
    match &node.op {
        Op::Quantize(q) | Op::Dequantize(q) => {
            let shape = cx.shape(x);
            let (outer, c, inner) = slices(&shape, q);
            let sc = cx.constant(
                format!("{name}::scale"),
                Tensor::f32(vec![c], q.scale.clone()),
            );
            let zp = cx.constant(
                format!("{name}::zero_point"),
                Tensor::ints(
                    DType::I32,
                    vec![c],
                    q.zero_point.iter().map(|&z| z as i64).collect(),
                ),
            );
            // Per tensor, the planes split into runs (a tensor's quantisation was one task: MobileNetV2's
            // 150 528 input floats took 170 µs on one core while the other waited).
            let parts = if c == 1 { runs(inner) } else { 1 };
            let spec = QuantSpec {
                planes: outer * c * parts,
                n: c,
                inner: inner / parts,
                dequantize: matches!(node.op, Op::Dequantize(_)),
                dtype: q.dtype,
            };
            let args = [
                (Role::X, Buf::Tensor(x)),
                (Role::Scale, Buf::Tensor(sc)),
                (Role::ZeroPoint, Buf::Tensor(zp)),
                (Role::Out, Buf::Tensor(out)),
            ];
            cx.push(n, None, &args, Body::Quantize(spec), numel(&shape));
            Ok(())
        }
        Op::QConv(a, p) => {
            let w = node.inputs[1];
            let wv =
                cx.g.constant(w)
                    .ok_or_else(|| Error::node(&name, &node.onnx_op, "weights must be constant"))?
                    .to_i64_vec();
            let (xs, ws, os) = (cx.shape(x), cx.shape(w), cx.shape(out));
            let (nb, c, h, wd) = (xs[0], xs[1], xs[2], xs[3]);
            let (m, cg) = (ws[0], ws[1]);
            let g = a.group;
            let mg = m / g;
            let khw = a.kernel[0] * a.kernel[1];
            let kk = cg * khw;
            let pix = os[2] * os[3];
            let xdt = cx.g.tensors[x].dtype;
            // Wide (i32) weights overflow the depthwise kernel's i16 products: they take the GEMM path.
            let wide = cx.g.tensors[w].dtype != DType::I8;
            if g == c && m == c && cg == 1 && !wide {
                return depthwise(cx, n, a, p, [nb, c, h, wd], [os[2], os[3]]);
            }
            if let Some(s) = super::qconv_implicit::spec(cx, n, a, p, &wv) {
                return super::qconv_implicit::lower(cx, n, s, p, &wv);
            }
            let (b_buf, b_batch, b_group) =
                cx.conv_columns(n, a, &xs, &os, cg, Some(p.x_zero_point as u8));
            let spec = |requant, a_row: usize, vnni| QGemmSpec {
                m: mg,
                n: pix,
                k: kk,
                batch: vec![
                    [nb, 0, b_batch, m * pix, 0],
                    [g, mg * a_row, b_group, mg * pix, mg],
                ],
                vnni,
                amx: false,
                b: operand(Role::B, pix),
                b_dtype: xdt,
                b_zero_point: p.x_zero_point,
                c: operand(Role::Out, pix),
                c_dtype: p.out_dtype(),
                requant,
            };
            gemm(cx, n, &name, &wv, m, kk, b_buf, p, spec)
        }
        Op::QMatMul(p) => {
            let w = node.inputs[1];
            let wt =
                cx.g.constant(w)
                    .ok_or_else(|| Error::node(&name, &node.onnx_op, "weights must be constant"))?
                    .clone();
            let (k, nn) = (wt.shape[0], wt.shape[1]);
            // A = W^T: row j is column j of W.
            let wv = wt.to_i64_vec();
            let wtr: Vec<i64> = (0..nn)
                .flat_map(|j| (0..k).map(move |q| (j, q)))
                .map(|(j, q)| wv[q * nn + j])
                .collect();
            let rows = numel(&cx.shape(x)) / k.max(1);
            let xdt = cx.g.tensors[x].dtype;
            let spec = |requant, _a_row: usize, vnni| QGemmSpec {
                m: nn,
                n: rows,
                k,
                batch: vec![],
                vnni,
                amx: false,
                b: Operand {
                    arg: Role::B,
                    off: 0,
                    rs: 1,
                    cs: k,
                },
                b_dtype: xdt,
                b_zero_point: p.x_zero_point,
                c: Operand {
                    arg: Role::Out,
                    off: 0,
                    rs: 1,
                    cs: nn,
                },
                c_dtype: p.out_dtype(),
                requant,
            };
            gemm(cx, n, &name, &wtr, nn, k, Buf::Tensor(x), p, spec)
        }
        // Absorbed by the convolution before it (`qconv_implicit.rs`).
        Op::QAdd(_) if cx.written.contains(&n) => Ok(()),
        Op::QAdd(params) => {
            let b = node.inputs[1];
            let len = numel(&cx.shape(out));
            let dtypes = [cx.g.tensors[x].dtype, cx.g.tensors[b].dtype];
            let args = [
                (Role::A, Buf::Tensor(x)),
                (Role::B, Buf::Tensor(b)),
                (Role::Out, Buf::Tensor(out)),
            ];
            let body = Body::QAdd {
                params: params.clone(),
                dtypes,
                len,
            };
            cx.push(n, None, &args, body, len);
            Ok(())
        }
        Op::QGlobalAvgPool(params) => {
            let xs = cx.shape(x);
            let planes = xs[0] * xs[1];
            let size = numel(&xs[2..]);
            let args = [(Role::X, Buf::Tensor(x)), (Role::Out, Buf::Tensor(out))];
            let body = Body::QGlobalAvg {
                params: params.clone(),
                dtype: cx.g.tensors[x].dtype,
                planes,
                size,
            };
            cx.push(n, None, &args, body, planes * size);
            Ok(())
        }
        _ => Err(Error::internal("lower", "quant lowering of a float op")),
    }
}

/// Pushes the direct depthwise kernel: roles X, W, Bias, \[Scale\], Out.
fn depthwise(
    cx: &mut Ctx,
    n: NodeId,
    a: &crate::ir::ConvAttrs,
    p: &IntProduct,
    [nb, c, h, w]: [usize; 4],
    out_hw: [usize; 2],
) -> Result<()> {
    let node = cx.g.nodes[n].clone();
    let (x, wt, out) = (node.inputs[0], node.inputs[1], node.outputs[0]);
    let mut spec = crate::kernel::depthwise::QDepthwiseSpec {
        n: nb,
        c,
        hw: [h, w],
        kernel: a.kernel,
        strides: a.strides,
        dilations: a.dilations,
        pads: [a.pads[0], a.pads[1]],
        out: out_hw,
        x: (cx.g.tensors[x].dtype, p.x_zero_point),
        y: p.out_dtype(),
        requant: p.requant.as_ref().map(|r| (r.zero_point, r.clamp)),
        vnni: false,
    };
    spec.vnni = cx.opts.vnni_depthwise && spec.vnni_fits();
    let mut bias: Vec<i64> = p.bias.iter().map(|&b| b as i64).collect();
    let wt = match (spec.vnni, cx.g.constant(wt)) {
        (true, Some(t)) => {
            let flip = if spec.x.0 == DType::I8 { 128 } else { 0 };
            let zp = p.x_zero_point as i64 + flip;
            let (packed, folded) = pack_vnni(&t.to_i64_vec(), &bias, a.kernel, zp);
            bias = folded;
            let len = packed.len();
            cx.constant(
                format!("{}::vnni_taps", node.name),
                Tensor::ints(DType::I8, vec![len], packed),
            )
        }
        _ => {
            spec.vnni = false;
            wt
        }
    };
    let bias = cx.constant(
        format!("{}::bias", node.name),
        Tensor::ints(DType::I32, vec![c], bias),
    );
    let mut args = vec![
        (Role::X, Buf::Tensor(x)),
        (Role::W, Buf::Tensor(wt)),
        (Role::Bias, Buf::Tensor(bias)),
    ];
    if let Some(r) = &p.requant {
        let sc = cx.constant(
            format!("{}::requant_scale", node.name),
            Tensor::f32(vec![c], r.scale.clone()),
        );
        args.push((Role::Scale, Buf::Tensor(sc)));
    }
    args.push((Role::Out, Buf::Tensor(out)));
    let work = nb * c * out_hw[0] * out_hw[1] * a.kernel[0] * a.kernel[1];
    cx.push(n, None, &args, Body::QDepthwise(spec), work);
    Ok(())
}

/// Pushes the integer GEMM kernel: roles A (packed weights), B, Out, Bias, \[Scale\]. `w` is the `rows x k` weight matrix;
/// it is packed for the target (i16 pairs, or VNNI bytes with the activation zero point folded into the bias).
#[allow(clippy::too_many_arguments)] // the node, its weights and the spec builder
fn gemm(
    cx: &mut Ctx,
    n: NodeId,
    name: &str,
    w: &[i64],
    rows: usize,
    k: usize,
    b: Buf,
    p: &IntProduct,
    spec: impl Fn(Option<QOut>, usize, bool) -> QGemmSpec,
) -> Result<()> {
    let out = cx.g.nodes[n].outputs[0];
    let x = cx.g.nodes[n].inputs[0];
    // VNNI multiplies s8 weights: wide ones take the i16-pair kernels.
    let vnni = cx.opts.vnni && w.iter().all(|v| (-128..=127).contains(v));
    let amx = vnni && cx.opts.amx;
    let (a, a_row, bias) = if vnni {
        // u8 activations as they are; i8 ones flipped to u8 by `^ 0x80` (x + 128): the zero point moves with them.
        let zp = p.x_zero_point as i64
            + if cx.g.tensors[x].dtype == DType::I8 {
                128
            } else {
                0
            };
        let a_row = crate::kernel::qgemm::vnni::a_row(k, amx);
        let mut bytes = vec![0i64; rows * a_row];
        for i in 0..rows {
            bytes[i * a_row..i * a_row + k].copy_from_slice(&w[i * k..(i + 1) * k]);
        }
        let bias = crate::kernel::qgemm::folded_bias(&p.bias, w, rows, zp);
        let t = Tensor::ints(DType::I8, vec![rows, a_row], bytes);
        (t, a_row, bias)
    } else {
        let kp = k.div_ceil(2);
        let t = Tensor::ints(DType::I32, vec![rows, kp], pack_a(w, rows, k));
        (t, kp, p.bias.iter().map(|&b| b as i64).collect())
    };
    // One row on VNNI: the GEMV, its weights in blocks of 16 rows.
    let probe = spec(None, a_row, vnni);
    let gemv = vnni && probe.n == 1 && probe.batch.is_empty() && probe.c.rs == 1;
    let a = if gemv {
        let packed = crate::kernel::qgemv::pack(w, rows, k);
        Tensor::ints(DType::I8, vec![packed.len()], packed)
    } else {
        a
    };
    let a = cx.constant(format!("{name}::w_packed"), a);
    let bias = cx.constant(
        format!("{name}::bias"),
        Tensor::ints(DType::I32, vec![rows], bias),
    );
    let mut args = vec![
        (Role::A, Buf::Tensor(a)),
        (Role::B, b),
        (Role::Out, Buf::Tensor(out)),
        (Role::Bias, Buf::Tensor(bias)),
    ];
    let requant = p.requant.as_ref().map(|r| {
        let sc = cx.constant(
            format!("{name}::requant_scale"),
            Tensor::f32(vec![rows], r.scale.clone()),
        );
        args.push((Role::Scale, Buf::Tensor(sc)));
        QOut {
            zero_point: r.zero_point,
            clamp: r.clamp,
        }
    });
    let mut s = spec(requant, a_row, vnni);
    s.amx = amx;
    if gemv {
        let g = crate::kernel::qgemv::QGemvSpec {
            m: rows,
            k,
            x_dtype: s.b_dtype,
            y_dtype: s.c_dtype,
            requant: s.requant,
        };
        cx.push(n, None, &args, Body::QGemv(g), rows * k);
        return Ok(());
    }
    let work = s.macs();
    cx.push(n, None, &args, Body::QGemm(s), work);
    Ok(())
}

/// Equal runs a per-tensor quantisation plane of `inner` elements splits into: the most, up to 64, that divide
/// it and keep at least 2048 elements each (1 for smaller planes).
fn runs(inner: usize) -> usize {
    (1..=64)
        .rev()
        .find(|&p| inner.is_multiple_of(p) && inner / p >= 2048)
        .unwrap_or(1)
}
