//! Lowering of the nodes that need compile-time tables or a preparatory kernel: the offset-table ops (Slice,
//! Pad, Expand, Tile → one `IndexMap` kernel reading `ir::ops::index::offset_tables`), reductions whose axes are
//! not adjacent (a transpose into scratch first), normalisations (parameters expanded to the row at compile
//! time), Resize (one `Resample` kernel per non-identity axis, chained through scratch), and ConvTranspose (a
//! GEMM Wᵀ·X into scratch columns, then `col2im`).

use super::kernel::{Body, Buf};
use super::lower::Ctx;
use super::ops::conv::Col2imSpec;
use super::ops::gemm::{GemmSpec, Operand};
use crate::error::{Error, Result};
use crate::ir::ops::index::{fill_value, offset_tables};
use crate::ir::ops::nn::{expand_param, layernorm_geom};
use crate::ir::ops::reduce::reduce_geom;
use crate::ir::ops::resize::{axis_is_identity, axis_taps};
use crate::ir::ops::shape::transpose_strides;
use crate::ir::{numel, ConvTransposeAttrs, DType, NodeId, Op, ResizeAttrs, Tensor};

pub(super) fn lower_index_map(cx: &mut Ctx, n: NodeId) -> Result<()> {
    let node = cx.g.nodes[n].clone();
    let (x, out) = (node.inputs[0], node.outputs[0]);
    let (mut out_shape, mut tabs) = offset_tables(&node.op, &cx.shape(x))
        .map_err(|m| Error::node(&node.name, &node.onnx_op, m))?;
    if out_shape.is_empty() {
        out_shape = vec![1];
        tabs = vec![vec![0]];
    }
    let dt = cx.g.tensors[out].dtype;
    let elem = dt.size();
    let fill = match dt {
        DType::F32 => (fill_value(&node.op) as f32).to_bits() as u64,
        _ => {
            let bits = fill_value(&node.op) as i64 as u64;
            if elem == 8 {
                bits
            } else {
                bits & ((1u64 << (elem * 8)) - 1)
            }
        }
    };
    let last = &tabs[tabs.len() - 1];
    let contig_from = (last[0] >= 0
        && last
            .iter()
            .enumerate()
            .all(|(j, &t)| t == last[0] + j as i64))
    .then_some(last[0]);
    let mut tab_at = Vec::with_capacity(tabs.len());
    let mut flat = Vec::new();
    for t in &tabs {
        tab_at.push(flat.len());
        flat.extend_from_slice(t);
    }
    let tn = flat.len();
    let tabs_id = cx.constant(format!("{}.tables", node.name), Tensor::i64(vec![tn], flat));
    let elems = numel(&out_shape);
    let body = Body::IndexMap {
        out_shape,
        tab_at,
        elem,
        fill,
        contig_from,
    };
    cx.push(
        n,
        None,
        vec![Buf::Tensor(x), Buf::Tensor(tabs_id), Buf::Tensor(out)],
        vec![2],
        body,
        elems,
    );
    Ok(())
}

/// The buffer a reduction reads and its row geometry: the input itself when the reduced axes are adjacent,
/// else a scratch copy transposed so they come last.
pub(super) fn reduce_source(
    cx: &mut Ctx,
    n: NodeId,
    axes: &[usize],
) -> (Buf, (usize, usize, usize)) {
    let x = cx.g.nodes[n].inputs[0];
    let xs = cx.shape(x);
    let (perm, geo) = reduce_geom(&xs, axes);
    match perm {
        None => (Buf::Tensor(x), geo),
        Some(p) => {
            let s = cx.scratch(numel(&xs) * 4);
            let body = Body::Transpose {
                out_shape: p.iter().map(|&d| xs[d]).collect(),
                in_strides: transpose_strides(&xs, &p),
                elem: 4,
            };
            cx.push(
                n,
                Some("transpose"),
                vec![Buf::Tensor(x), s],
                vec![1],
                body,
                numel(&xs),
            );
            (s, geo)
        }
    }
}

pub(super) fn lower_norm(cx: &mut Ctx, n: NodeId) -> Result<()> {
    let node = cx.g.nodes[n].clone();
    let ins = &node.inputs;
    let out = node.outputs[0];
    let xs = cx.shape(ins[0]);
    // `param_shape`: what scale and bias cover (the normalised axes, or the channels for InstanceNorm).
    let (rows, len, eps, rms, channels, param_shape) = match node.op {
        Op::LayerNorm { axis, epsilon, rms } => {
            let (rows, len) = layernorm_geom(&xs, axis);
            (rows, len, epsilon, rms, None, xs[axis..].to_vec())
        }
        Op::InstanceNorm { epsilon } => (
            xs[0] * xs[1],
            numel(&xs[2..]),
            epsilon,
            false,
            Some(xs[1]),
            vec![xs[1]],
        ),
        _ => return Err(Error::internal("lower", "lower_norm on a non-norm node")),
    };
    let want = numel(&param_shape);
    let mut args = vec![Buf::Tensor(ins[0])];
    for (i, &p) in ins.iter().enumerate().skip(1) {
        let buf = if numel(&cx.shape(p)) == want {
            Buf::Tensor(p)
        } else {
            // A broadcast parameter: expanded to the row at compile time.
            let c = cx.g.constant(p).cloned().ok_or_else(|| {
                Error::unsupported(
                    &node.name,
                    &node.onnx_op,
                    format!(
                        "a run-time input {i} that broadcasts (shape {:?})",
                        cx.shape(p)
                    ),
                )
            })?;
            let v = expand_param(&c, &param_shape);
            Buf::Tensor(cx.constant(
                format!("{}.param{i}", node.name),
                Tensor::f32(vec![want], v),
            ))
        };
        args.push(buf);
    }
    let has_bias = args.len() == 3;
    let body = Body::Norm {
        rows,
        len,
        eps,
        rms,
        channels,
        has_bias,
    };
    cx.push_to(n, None, args, Buf::Tensor(out), body, rows * len * 4);
    Ok(())
}

pub(super) fn lower_resize(cx: &mut Ctx, n: NodeId, a: &ResizeAttrs) -> Result<()> {
    let node = cx.g.nodes[n].clone();
    let (x, out) = (node.inputs[0], node.outputs[0]);
    let mut shape = cx.shape(x);
    let axes: Vec<usize> = (0..shape.len())
        .filter(|&d| !axis_is_identity(a, d, shape[d]))
        .collect();
    if axes.is_empty() {
        let bytes = cx.g.tensors[out].size_bytes();
        cx.push(
            n,
            None,
            vec![Buf::Tensor(x), Buf::Tensor(out)],
            vec![1],
            Body::Copy(bytes),
            numel(&shape),
        );
        return Ok(());
    }
    let mut src = Buf::Tensor(x);
    for (k, &d) in axes.iter().enumerate() {
        let taps = axis_taps(a, d, shape[d]);
        let t = taps.iter().map(|t| t.len()).max().unwrap_or(1).max(1);
        let mut idx = Vec::with_capacity(taps.len() * t);
        let mut w = Vec::with_capacity(taps.len() * t);
        for tp in &taps {
            for j in 0..t {
                let (i, wt) = tp.get(j).copied().unwrap_or((0, 0.0));
                idx.push(i as i64);
                w.push(wt);
            }
        }
        let nt = idx.len();
        let idx_id = cx.constant(
            format!("{}.axis{d}.idx", node.name),
            Tensor::i64(vec![nt], idx),
        );
        let w_id = cx.constant(format!("{}.axis{d}.w", node.name), Tensor::f32(vec![nt], w));
        let (outer, n_in, inner) = (numel(&shape[..d]), shape[d], numel(&shape[d + 1..]));
        shape[d] = a.out[d];
        let dst = if k + 1 == axes.len() {
            Buf::Tensor(out)
        } else {
            cx.scratch(numel(&shape) * 4)
        };
        let body = Body::Resample {
            outer,
            n_in,
            n_out: a.out[d],
            inner,
            taps: t,
        };
        let step = format!("axis{d}");
        let work = numel(&shape) * t;
        cx.push(
            n,
            (axes.len() > 1).then_some(step.as_str()),
            vec![src, Buf::Tensor(idx_id), Buf::Tensor(w_id), dst],
            vec![3],
            body,
            work,
        );
        src = dst;
    }
    Ok(())
}

pub(super) fn lower_conv_transpose(cx: &mut Ctx, n: NodeId, a: &ConvTransposeAttrs) -> Result<()> {
    let node = cx.g.nodes[n].clone();
    let ins = &node.inputs;
    let out = node.outputs[0];
    let (xs, os) = (cx.shape(ins[0]), cx.shape(out));
    let (nb, c, h, w) = (xs[0], xs[1], xs[2], xs[3]);
    let m = os[1];
    let g = a.group;
    let (cg, mg) = (c / g, m / g);
    let khw = a.kernel[0] * a.kernel[1];
    let p = h * w;
    // Columns [N, M*KH*KW, H*W]: per (batch, group) a GEMM of Wᵀ [Mg*KH*KW, Cg] (W is [C, Mg, KH, KW], read
    // transposed through the operand strides) by X [Cg, H*W].
    let cols = cx.scratch(nb * m * khw * p * 4);
    let spec = GemmSpec {
        m: mg * khw,
        n: p,
        k: cg,
        batch: vec![
            [nb, 0, c * p, m * khw * p, 0],
            [g, cg * mg * khw, cg * p, mg * khw * p, 0],
        ],
        a: Operand {
            arg: 0,
            off: 0,
            rs: 1,
            cs: mg * khw,
        },
        b: Operand {
            arg: 1,
            off: 0,
            rs: p,
            cs: 1,
        },
        c: Operand {
            arg: 2,
            off: 0,
            rs: p,
            cs: 1,
        },
        alpha: 1.0,
        bias: None,
        residual: None,
        act: crate::ir::Activation::None,
    };
    let work = spec.macs();
    cx.push(
        n,
        Some("gemm"),
        vec![Buf::Tensor(ins[1]), Buf::Tensor(ins[0]), cols],
        vec![2],
        Body::Gemm(spec),
        work,
    );
    let spec = Col2imSpec {
        n: nb,
        m,
        hw: [h, w],
        kernel: a.kernel,
        strides: a.strides,
        dilations: a.dilations,
        pads: [a.pads[0], a.pads[1]],
        out: [os[2], os[3]],
        has_bias: a.has_bias,
    };
    let mut args = vec![cols];
    if a.has_bias {
        args.push(Buf::Tensor(ins[2]));
    }
    cx.push_to(
        n,
        None,
        args,
        Buf::Tensor(out),
        Body::Col2im(spec),
        nb * m * khw * p,
    );
    Ok(())
}
