//! Lowering: each live graph node becomes one or more kernels with static geometry. Constant operands are put
//! in the layout the kernels want here (Gemm's transposed B is transposed once at compile time; an unfused
//! BatchNormalization becomes per-channel scale/shift constants), so the weights file holds pre-packed data.

use super::kernel::{Body, Buf, Kernel, Lowering};
use super::ops::conv::Im2colSpec;
use super::ops::elementwise::coalesce;
use super::ops::gemm::{Bias, BiasKind, GemmSpec, Operand};
use super::ops::pool::PoolSpec;
use crate::error::{Error, Result};
use crate::ir::ops::elementwise::broadcast_strides;
use crate::ir::ops::index::gather_geom;
use crate::ir::ops::linalg::{gemm_dims, matmul_geom};
use crate::ir::ops::nn::{batchnorm_affine, softmax_geom};
use crate::ir::ops::shape::transpose_strides;
use crate::ir::types::strides;
use crate::ir::{numel, Graph, NodeId, Op, Tensor, TensorId, UnOp};

/// Most tasks any kernel is split into.
pub const MAX_TASKS: usize = 64;
/// Rough work (multiply-adds or elements) per task below which kernels are not split further.
const WORK_PER_TASK: usize = 1 << 16;

fn op_operand(arg: usize, rs: usize) -> Operand {
    Operand {
        arg,
        off: 0,
        rs,
        cs: 1,
    }
}

pub(super) struct Ctx<'g> {
    pub(super) g: &'g mut Graph,
    out: Lowering,
    /// Integer GEMMs use the AVX-512 VNNI layout (`Target::vnni`).
    pub(super) vnni: bool,
}

impl Ctx<'_> {
    pub(super) fn push(
        &mut self,
        node: NodeId,
        step: Option<&str>,
        args: Vec<Buf>,
        writes: Vec<usize>,
        body: Body,
        work: usize,
    ) {
        let base = &self.g.nodes[node].name;
        let name = match step {
            Some(s) => format!("{base}.{s}"),
            None => base.clone(),
        };
        let mut k = Kernel {
            name,
            node,
            args,
            writes,
            tasks: 1,
            body,
        };
        k.tasks = k.units().min(MAX_TASKS).min((work / WORK_PER_TASK).max(1)) as u32;
        self.out.kernels.push(k);
    }
    /// `push` with `out` appended as the last argument, the one the kernel writes.
    pub(super) fn push_to(
        &mut self,
        node: NodeId,
        step: Option<&str>,
        mut args: Vec<Buf>,
        out: Buf,
        body: Body,
        work: usize,
    ) {
        args.push(out);
        let w = args.len() - 1;
        self.push(node, step, args, vec![w], body, work);
    }
    pub(super) fn scratch(&mut self, bytes: usize) -> Buf {
        self.out.scratch.push(bytes);
        Buf::Scratch(self.out.scratch.len() - 1)
    }
    pub(super) fn shape(&self, t: TensorId) -> Vec<usize> {
        self.g.tensors[t].shape.clone()
    }
    /// The B operand of a convolution's GEMM for input shape `xs` and output `os` (`cg` input channels per
    /// group): the input itself for a 1x1, stride-1, unpadded conv, else the columns of an im2col kernel pushed
    /// here (f32, or bytes padded with `bytes`). Returns the buffer and its batch and group strides (elements).
    pub(super) fn conv_columns(
        &mut self,
        n: NodeId,
        a: &crate::ir::ConvAttrs,
        xs: &[usize],
        os: &[usize],
        cg: usize,
        bytes: Option<u8>,
    ) -> (Buf, usize, usize) {
        let x = self.g.nodes[n].inputs[0];
        let (c, h, w) = (xs[1], xs[2], xs[3]);
        let khw = a.kernel[0] * a.kernel[1];
        if khw == 1 && a.strides == [1, 1] && a.pads == [0; 4] {
            return (Buf::Tensor(x), c * h * w, cg * h * w);
        }
        let spec = Im2colSpec {
            n: xs[0],
            c,
            hw: [h, w],
            kernel: a.kernel,
            strides: a.strides,
            dilations: a.dilations,
            pads: [a.pads[0], a.pads[1]],
            out: [os[2], os[3]],
            bytes,
        };
        let s = self.scratch(spec.col_bytes());
        let work = spec.col_bytes() / spec.elem();
        self.push(
            n,
            Some("im2col"),
            vec![Buf::Tensor(x), s],
            vec![1],
            Body::Im2col(spec),
            work,
        );
        let p = os[2] * os[3];
        (s, c * khw * p, cg * khw * p)
    }
    pub(super) fn constant(&mut self, name: String, t: Tensor) -> TensorId {
        self.g.add_constant(name, t)
    }
}

/// Lowers every live node of `g` to kernels, in graph order.
pub fn lower(g: &mut Graph) -> Result<Lowering> {
    lower_with(g, false)
}

/// `lower` for a target whose integer GEMMs use AVX-512 VNNI (`vnni`), which changes the packed weights.
pub fn lower_with(g: &mut Graph, vnni: bool) -> Result<Lowering> {
    let order = g.order.clone();
    let mut cx = Ctx {
        g,
        out: Lowering::default(),
        vnni,
    };
    for n in order {
        lower_node(&mut cx, n)?;
    }
    Ok(cx.out)
}

fn lower_node(cx: &mut Ctx, n: NodeId) -> Result<()> {
    let node = cx.g.nodes[n].clone();
    let ins = &node.inputs;
    let out = node.outputs[0];
    if !node.op.any_output_dtype() && cx.g.tensors[out].dtype != crate::ir::DType::F32 {
        return Err(Error::unsupported(
            &node.name,
            &node.onnx_op,
            format!(
                "{} arithmetic at run time (only f32 is computed at run time; integer ops are folded when their inputs are constant)",
                cx.g.tensors[out].dtype
            ),
        ));
    }
    let out_shape = cx.shape(out);
    let elems = numel(&out_shape);
    let t = |i: usize| Buf::Tensor(ins[i]);
    match &node.op {
        Op::Binary(b) => {
            let (sa, sb) = (
                broadcast_strides(&cx.shape(ins[0]), &out_shape),
                broadcast_strides(&cx.shape(ins[1]), &out_shape),
            );
            let spec = coalesce(*b, &out_shape, &sa, &sb);
            cx.push(
                n,
                None,
                vec![t(0), t(1), Buf::Tensor(out)],
                vec![2],
                Body::Binary(spec),
                elems,
            );
        }
        Op::Unary(UnOp::Identity) | Op::Reshape(_) => {
            let bytes = cx.g.tensors[out].size_bytes();
            cx.push(
                n,
                None,
                vec![t(0), Buf::Tensor(out)],
                vec![1],
                Body::Copy(bytes),
                elems,
            );
        }
        Op::Unary(u) => cx.push(
            n,
            None,
            vec![t(0), Buf::Tensor(out)],
            vec![1],
            Body::Unary(*u, elems),
            elems,
        ),
        Op::MatMul(e) => {
            let geo = matmul_geom(&cx.shape(ins[0]), &cx.shape(ins[1]))
                .map_err(|m| Error::node(&node.name, "MatMul", m))?;
            let bst = strides(&geo.batch);
            let batch = (0..geo.batch.len())
                .map(|d| {
                    [
                        geo.batch[d],
                        geo.a_batch_strides[d],
                        geo.b_batch_strides[d],
                        bst[d] * geo.m * geo.n,
                        0,
                    ]
                })
                .collect();
            let mut args = vec![t(0), t(1), Buf::Tensor(out)];
            let residual = e.residual.then(|| {
                args.push(t(ins.len() - 1));
                op_operand(3, geo.n)
            });
            let spec = GemmSpec {
                m: geo.m,
                n: geo.n,
                k: geo.k,
                batch,
                a: Operand {
                    arg: 0,
                    off: 0,
                    rs: geo.k,
                    cs: 1,
                },
                b: op_operand(1, geo.n),
                c: op_operand(2, geo.n),
                alpha: 1.0,
                bias: None,
                residual,
                act: e.act,
            };
            let work = spec.macs();
            cx.push(n, None, args, vec![2], Body::Gemm(spec), work);
        }
        Op::Gemm(a) => lower_gemm(cx, n, a)?,
        Op::Conv(_) => lower_conv(cx, n)?,
        Op::ConvTranspose(a) => super::lower_data::lower_conv_transpose(cx, n, a)?,
        Op::BatchNorm { epsilon } => {
            let p: Vec<Vec<f32>> = ins[1..]
                .iter()
                .map(|&i| cx.g.constant(i).map(|c| c.to_f32_vec()))
                .collect::<Option<_>>()
                .ok_or_else(|| {
                    Error::unsupported(
                        &node.name,
                        "BatchNormalization",
                        "scale, bias, mean and var must be constants",
                    )
                })?;
            let (s, sh) = batchnorm_affine(&p[0], &p[1], &p[2], &p[3], *epsilon);
            let c = s.len();
            let sc = cx.constant(format!("{}.scale", node.name), Tensor::f32(vec![c], s));
            let st = cx.constant(format!("{}.shift", node.name), Tensor::f32(vec![c], sh));
            let planes = out_shape[0] * c;
            let body = Body::Affine {
                planes,
                c,
                inner: elems / planes.max(1),
            };
            cx.push(
                n,
                None,
                vec![t(0), Buf::Tensor(sc), Buf::Tensor(st), Buf::Tensor(out)],
                vec![3],
                body,
                elems,
            );
        }
        Op::Pool(kind, a) => {
            let xs = cx.shape(ins[0]);
            let spec = PoolSpec {
                kind: *kind,
                attrs: a.clone(),
                planes: xs[0] * xs[1],
                hw: [xs[2], xs[3]],
                out: [out_shape[2], out_shape[3]],
            };
            let work = elems * a.kernel[0] * a.kernel[1];
            cx.push(
                n,
                None,
                vec![t(0), Buf::Tensor(out)],
                vec![1],
                Body::Pool(spec),
                work,
            );
        }
        Op::GlobalAveragePool => {
            let xs = cx.shape(ins[0]);
            let planes = xs[0] * xs[1];
            let body = Body::GlobalAvg {
                planes,
                size: numel(&xs[2..]),
            };
            cx.push(
                n,
                None,
                vec![t(0), Buf::Tensor(out)],
                vec![1],
                body,
                numel(&xs),
            );
        }
        Op::Softmax {
            axis,
            flatten_tail,
            log,
        } => {
            let (outer, len, inner) = softmax_geom(&out_shape, *axis, *flatten_tail);
            let body = Body::Softmax {
                outer,
                len,
                inner,
                log: *log,
            };
            cx.push(
                n,
                None,
                vec![t(0), Buf::Tensor(out)],
                vec![1],
                body,
                elems * 8,
            );
        }
        Op::Cast(to) => {
            let from = cx.g.tensors[ins[0]].dtype;
            let body = if from == *to {
                Body::Copy(cx.g.tensors[out].size_bytes())
            } else {
                Body::Convert {
                    from,
                    to: *to,
                    len: elems,
                }
            };
            cx.push(n, None, vec![t(0), Buf::Tensor(out)], vec![1], body, elems);
        }
        Op::Slice { .. } | Op::Pad { .. } | Op::Expand(_) | Op::Tile(_) => {
            super::lower_data::lower_index_map(cx, n)?
        }
        Op::Gather { axis } => {
            let ((outer, nn, k, inner), _) =
                gather_geom(&cx.shape(ins[0]), &cx.shape(ins[1]), *axis)
                    .map_err(|m| Error::node(&node.name, &node.onnx_op, m))?;
            let body = Body::Gather {
                outer,
                n: nn,
                k,
                inner,
                elem: cx.g.tensors[out].dtype.size(),
                idx_elem: cx.g.tensors[ins[1]].dtype.size(),
            };
            cx.push(
                n,
                None,
                vec![t(0), t(1), Buf::Tensor(out)],
                vec![2],
                body,
                elems,
            );
        }
        Op::Reduce { kind, axes, .. } => {
            let (src, (outer, len, inner)) = super::lower_data::reduce_source(cx, n, axes);
            let body = Body::Reduce {
                kind: *kind,
                outer,
                len,
                inner,
            };
            let work = outer * len * inner;
            cx.push(n, None, vec![src, Buf::Tensor(out)], vec![1], body, work);
        }
        Op::ArgReduce {
            max,
            axis,
            select_last,
            ..
        } => {
            let (src, (outer, len, inner)) = super::lower_data::reduce_source(cx, n, &[*axis]);
            let body = Body::ArgReduce {
                max: *max,
                last: *select_last,
                outer,
                len,
                inner,
            };
            let work = outer * len * inner;
            cx.push(n, None, vec![src, Buf::Tensor(out)], vec![1], body, work);
        }
        Op::LayerNorm { .. } | Op::InstanceNorm { .. } => super::lower_data::lower_norm(cx, n)?,
        Op::Lrn(a) => {
            let xs = cx.shape(ins[0]);
            let body = Body::Lrn {
                n: xs[0],
                c: xs[1],
                inner: numel(&xs[2..]),
                attrs: *a,
            };
            cx.push(
                n,
                None,
                vec![t(0), Buf::Tensor(out)],
                vec![1],
                body,
                elems * a.size,
            );
        }
        Op::Resize(a) => super::lower_data::lower_resize(cx, n, a)?,
        Op::Quantize(_) | Op::Dequantize(_) | Op::QConv(..) | Op::QMatMul(_) | Op::QAdd(_) => {
            super::lower_quant::lower_quant(cx, n)?
        }
        Op::Compare(_) | Op::Logic(_) | Op::Not | Op::Where => {
            use super::ops::logic::LogicKind;
            let shapes: Vec<Vec<usize>> = ins.iter().map(|&i| cx.shape(i)).collect();
            let refs: Vec<&[usize]> = shapes.iter().map(|s| s.as_slice()).collect();
            let (mut oshape, mut strides) = crate::ir::ops::logic::broadcast_all(&refs)
                .map_err(|m| Error::node(&node.name, &node.onnx_op, m))?;
            if oshape.is_empty() {
                oshape = vec![1];
                strides = strides.iter().map(|_| vec![0]).collect();
            }
            let kind = match &node.op {
                Op::Compare(c) => LogicKind::Cmp(*c, cx.g.tensors[ins[0]].dtype),
                Op::Logic(l) => LogicKind::Logic(*l),
                Op::Not => LogicKind::Not,
                _ => LogicKind::Where(cx.g.tensors[out].dtype.size()),
            };
            let args: Vec<Buf> = ins.iter().map(|&i| Buf::Tensor(i)).collect();
            let body = Body::Logic {
                kind,
                out_shape: oshape,
                strides,
            };
            cx.push_to(n, None, args, Buf::Tensor(out), body, elems);
        }
        Op::Transpose(perm) => {
            let in_strides = transpose_strides(&cx.shape(ins[0]), perm);
            let elem = cx.g.tensors[out].dtype.size();
            let body = Body::Transpose {
                out_shape: out_shape.clone(),
                in_strides,
                elem,
            };
            cx.push(n, None, vec![t(0), Buf::Tensor(out)], vec![1], body, elems);
        }
        Op::Concat(axis) => {
            let elem = cx.g.tensors[out].dtype.size();
            let blocks = ins
                .iter()
                .map(|&i| numel(&cx.shape(i)[*axis..]) * elem)
                .collect();
            let args: Vec<Buf> = ins.iter().map(|&i| Buf::Tensor(i)).collect();
            cx.push_to(
                n,
                None,
                args,
                Buf::Tensor(out),
                Body::Concat {
                    outer: numel(&out_shape[..*axis]),
                    blocks,
                },
                elems,
            );
        }
    }
    Ok(())
}

fn lower_gemm(cx: &mut Ctx, n: NodeId, a: &crate::ir::GemmAttrs) -> Result<()> {
    let node = cx.g.nodes[n].clone();
    let ins = &node.inputs;
    let out = node.outputs[0];
    let (sa, sb) = (cx.shape(ins[0]), cx.shape(ins[1]));
    let (m, k, nn) = gemm_dims(&sa, &sb, a).map_err(|e| Error::node(&node.name, "Gemm", e))?;
    let mut args = vec![Buf::Tensor(ins[0])];
    let a_op = if a.trans_a {
        Operand {
            arg: 0,
            off: 0,
            rs: 1,
            cs: m,
        }
    } else {
        Operand {
            arg: 0,
            off: 0,
            rs: k,
            cs: 1,
        }
    };
    // B in [K, N] layout: transposed once at compile time when constant, by a kernel otherwise.
    let b_buf = match (a.trans_b, cx.g.constant(ins[1]).cloned()) {
        (false, _) => Buf::Tensor(ins[1]),
        (true, Some(c)) => {
            let v = crate::ir::ops::eval(&Op::Transpose(vec![1, 0]), &[&c])
                .map_err(|e| Error::node(&node.name, "Gemm", e))?;
            let name = format!("{}.B_packed", node.name);
            Buf::Tensor(cx.constant(name, v.into_iter().next().unwrap_or(c)))
        }
        (true, None) => {
            let s = cx.scratch(k * nn * 4);
            let body = Body::Transpose {
                out_shape: vec![k, nn],
                in_strides: transpose_strides(&sb, &[1, 0]),
                elem: 4,
            };
            cx.push(
                n,
                Some("transpose_b"),
                vec![Buf::Tensor(ins[1]), s],
                vec![1],
                body,
                k * nn,
            );
            s
        }
    };
    args.push(b_buf);
    args.push(Buf::Tensor(out));
    let bias = if a.has_c && a.beta != 0.0 {
        let cs = cx.shape(ins[2]);
        let idx = args.len();
        let (kind, scale, buf) = match cx.g.constant(ins[2]).cloned() {
            Some(c) => {
                // Fold beta and the broadcast at compile time.
                let cv = c.to_f32_vec();
                let st = broadcast_strides(&cs, &[m, nn]);
                let (kind, vals) = if st[0] == 0 {
                    (
                        BiasKind::Col,
                        (0..nn).map(|j| a.beta * cv[j * st[1]]).collect::<Vec<_>>(),
                    )
                } else {
                    (
                        BiasKind::Full,
                        (0..m * nn)
                            .map(|e| a.beta * cv[(e / nn) * st[0] + (e % nn) * st[1]])
                            .collect(),
                    )
                };
                let shape = if kind == BiasKind::Col {
                    vec![nn]
                } else {
                    vec![m, nn]
                };
                let id = cx.constant(format!("{}.C_packed", node.name), Tensor::f32(shape, vals));
                (kind, 1.0, Buf::Tensor(id))
            }
            None => {
                let kind = match cs.as_slice() {
                    [x] if *x == nn => BiasKind::Col,
                    [1, x] if *x == nn => BiasKind::Col,
                    [x, 1] if *x == m => BiasKind::Row,
                    [x, y] if *x == m && *y == nn => BiasKind::Full,
                    _ => {
                        return Err(Error::unsupported(
                            &node.name,
                            "Gemm",
                            format!(
                            "a run-time C of shape {cs:?} (supported: [N], [1,N], [M,1], [M,N])"
                        ),
                        ))
                    }
                };
                (kind, a.beta, Buf::Tensor(ins[2]))
            }
        };
        args.push(buf);
        Some(Bias {
            at: op_operand(idx, nn),
            kind,
            scale,
        })
    } else {
        None
    };
    let residual = a.epilogue.residual.then(|| {
        args.push(Buf::Tensor(ins[ins.len() - 1]));
        op_operand(args.len() - 1, nn)
    });
    let spec = GemmSpec {
        m,
        n: nn,
        k,
        batch: vec![],
        a: a_op,
        b: op_operand(1, nn),
        c: op_operand(2, nn),
        alpha: a.alpha,
        bias,
        residual,
        act: a.epilogue.act,
    };
    let work = spec.macs();
    cx.push(n, None, args, vec![2], Body::Gemm(spec), work);
    Ok(())
}

fn lower_conv(cx: &mut Ctx, n: NodeId) -> Result<()> {
    let node = cx.g.nodes[n].clone();
    let Op::Conv(a) = &node.op else {
        return Err(Error::internal("lower", "lower_conv on a non-conv node"));
    };
    let ins = &node.inputs;
    let out = node.outputs[0];
    let (xs, ws, os) = (cx.shape(ins[0]), cx.shape(ins[1]), cx.shape(out));
    let (nb, c, h, w) = (xs[0], xs[1], xs[2], xs[3]);
    let (m, cg) = (ws[0], ws[1]);
    let g = a.group;
    let mg = m / g;
    let khw = a.kernel[0] * a.kernel[1];
    let kk = cg * khw;
    let p = os[2] * os[3];
    if g == c && m == c && !a.epilogue.residual {
        let spec = super::ops::depthwise::DepthwiseSpec {
            n: nb,
            c,
            hw: [h, w],
            kernel: a.kernel,
            strides: a.strides,
            dilations: a.dilations,
            pads: [a.pads[0], a.pads[1]],
            out: [os[2], os[3]],
            has_bias: a.has_bias,
            act: a.epilogue.act,
        };
        let mut args = vec![Buf::Tensor(ins[0]), Buf::Tensor(ins[1])];
        if a.has_bias {
            args.push(Buf::Tensor(ins[2]));
        }
        cx.push_to(
            n,
            None,
            args,
            Buf::Tensor(out),
            Body::Depthwise(spec),
            nb * m * p * khw,
        );
        return Ok(());
    }
    let (b_buf, b_batch, b_group) = cx.conv_columns(n, a, &xs, &os, cg, None);
    let mut args = vec![Buf::Tensor(ins[1]), b_buf, Buf::Tensor(out)];
    let bias = a.has_bias.then(|| {
        args.push(Buf::Tensor(ins[2]));
        Bias {
            at: op_operand(args.len() - 1, 0),
            kind: BiasKind::Row,
            scale: 1.0,
        }
    });
    let residual = a.epilogue.residual.then(|| {
        args.push(Buf::Tensor(ins[ins.len() - 1]));
        op_operand(args.len() - 1, p)
    });
    let spec = GemmSpec {
        m: mg,
        n: p,
        k: kk,
        batch: vec![
            [nb, 0, b_batch, m * p, 0],
            [g, mg * kk, b_group, mg * p, mg],
        ],
        a: Operand {
            arg: 0,
            off: 0,
            rs: kk,
            cs: 1,
        },
        b: op_operand(1, p),
        c: op_operand(2, p),
        alpha: 1.0,
        bias,
        residual,
        act: a.epilogue.act,
    };
    let work = spec.macs();
    cx.push(n, None, args, vec![2], Body::Gemm(spec), work);
    Ok(())
}
