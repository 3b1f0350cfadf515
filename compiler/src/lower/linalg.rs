//! Lowering of the matrix products (`ir/ops/linalg.rs`). MatMul is one batched `Gemm` kernel whose batch
//! dimensions carry numpy broadcasting as zero strides. Gemm reads A through its operand strides (so `transA`
//! costs nothing), takes B in [K, N] layout (a constant transposed once at compile time, a run-time one by a
//! `Transpose` kernel into scratch) and folds beta and C's broadcast into a packed constant bias when C is
//! constant. Both fuse the residual add and activation the passes attached.

use super::ctx::{operand, pack_b_panels, Ctx};
use crate::error::{Error, Result};
use crate::ir::ops::elementwise::broadcast_strides;
use crate::ir::ops::linalg::{gemm_dims, matmul_geom};
use crate::ir::ops::shape::transpose_strides;
use crate::ir::types::strides;
use crate::ir::{GemmAttrs, NodeId, Op, Tensor};
use crate::kernel::gemm::{Bias, BiasKind, GemmSpec, Operand};
use crate::kernel::{Body, Buf, Role};

pub(super) fn lower(cx: &mut Ctx, n: NodeId, op: &Op) -> Result<()> {
    match op {
        Op::MatMul(e) => {
            let node = cx.g.nodes[n].clone();
            let ins = &node.inputs;
            let geo = matmul_geom(&cx.shape(ins[0]), &cx.shape(ins[1]))
                .map_err(|m| Error::node(&node.name, "MatMul", m))?;
            let nb = geo.batch.len();
            // Operands that are copy-free transposes (`Ctx::views`) are read through their strides.
            let (a_t, a_rs, a_bs) = view_operand(cx, ins[0], nb, geo.k, &geo.a_batch_strides);
            let (b_t, b_rs, b_bs) = view_operand(cx, ins[1], nb, geo.n, &geo.b_batch_strides);
            // A Transpose keeping rows whole as the result's only reader: written in its layout.
            let into = (!e.residual && !cx.opts.keep_tensors)
                .then(|| transposed_reader(cx, node.outputs[0], nb))
                .flatten();
            let (out_t, c_rs, c_bs) = match into {
                Some((tn, t, c_strides)) => {
                    cx.written.insert(tn);
                    (t, c_strides[nb], c_strides[..nb].to_vec())
                }
                None => {
                    let bst = strides(&geo.batch);
                    let dense = bst.iter().map(|s| s * geo.m * geo.n).collect();
                    (node.outputs[0], geo.n, dense)
                }
            };
            let batch: Vec<[usize; 5]> = (0..nb)
                .map(|d| [geo.batch[d], a_bs[d], b_bs[d], c_bs[d], 0])
                .collect();
            // Batch dims over which B is shared and A's and C's rows run on are more rows of one product (a
            // sequence-first projection [S, 1, K] x [K, N] is one GEMM of S rows, not S GEMVs).
            // (With a residual C is dense, so its row stride stays N, the residual's.)
            let (m, batch, a_rs, c_rs) = fold_rows(geo.m, batch, a_rs, c_rs);
            // A constant B shared by every batch is packed in column panels (`b_panel`), as a Gemm's.
            let shared = geo.b_batch_strides.iter().all(|&s| s == 0);
            // Batch dims of one entry are no batch at all.
            let single = batch.iter().all(|d| d[0] == 1);
            if cx.opts.bf16 && shared && single && cx.g.constant(ins[1]).is_some() {
                let (k, nn) = (geo.k, geo.n);
                let b =
                    cx.g.constant(ins[1])
                        .map(|t| t.to_f32_vec())
                        .unwrap_or_default();
                let spec = crate::kernel::gemm_bf16::GemmBf16Spec {
                    m,
                    n: nn,
                    k,
                    c_rs,
                    alpha: e.scale,
                    bias: e.bias,
                    bias_row: false,
                    residual: e.residual,
                    act: e.act,
                    amx: cx.opts.amx,
                    batch: 1,
                    a_panels: false,
                    c_blocks: false,
                    c_bs: 0,
                };
                return lower_bf16(cx, n, spec, [a_t, out_t], a_rs, &b);
            }
            let panel = cx.opts.gemv_panel.filter(|&p| shared && geo.n >= p);
            // The constant is copied out of the graph only when it is packed.
            let b_const = panel.and_then(|p| Some((p, cx.g.constant(ins[1])?.clone())));
            let b_panels = b_const
                .map(|(p, c)| (gemv_panels(cx, &node.name, &c, false, [geo.k, geo.n], p), p));
            let mut args = vec![
                (Role::A, Buf::Tensor(a_t)),
                (Role::B, b_panels.map_or(Buf::Tensor(b_t), |(b, _)| b)),
                (Role::Out, Buf::Tensor(out_t)),
            ];
            let bias = e.bias.then(|| {
                args.push((Role::Bias, Buf::Tensor(ins[2])));
                Bias {
                    at: operand(Role::Bias, 0),
                    kind: BiasKind::Col,
                    scale: 1.0,
                }
            });
            let residual = e.residual.then(|| {
                args.push((Role::Residual, Buf::Tensor(ins[ins.len() - 1])));
                operand(Role::Residual, geo.n)
            });
            let spec = GemmSpec {
                m,
                n: geo.n,
                k: geo.k,
                kc: crate::kernel::gemm::KC,
                batch,
                a: operand(Role::A, a_rs),
                b: operand(Role::B, b_rs),
                c: operand(Role::Out, c_rs),
                alpha: e.scale,
                a_panel: None,
                a_k16: false,
                c_k16: false,
                res_k16: false,
                b_panel: b_panels.map(|(_, p)| p),
                bias,
                residual,
                act: e.act,
                transpose_out: None,
                row_groups: None,
            };
            let work = spec.macs();
            cx.push(n, None, &args, Body::Gemm(spec), work);
            Ok(())
        }
        Op::Gemm(a) => lower_gemm(cx, n, a),
        _ => Err(Error::internal("lower", "linalg lowering of another op")),
    }
}

/// Pushes a bf16 MatMul (`--precision bf16`): A's rows converted to bf16 into scratch, then the bf16 GEMM over
/// B packed at compile time in bf16 panels (`kernel/gemm_bf16.rs`).
fn lower_bf16(
    cx: &mut Ctx,
    n: NodeId,
    spec: crate::kernel::gemm_bf16::GemmBf16Spec,
    [a, out]: [crate::ir::TensorId; 2],
    a_rs: usize,
    b: &[f32],
) -> Result<()> {
    use crate::kernel::gemm_bf16::pack_b;
    let node = cx.g.nodes[n].clone();
    let rows = cx.scratch(spec.m * spec.kp() * 2);
    let dims = [spec.m, spec.k, a_rs, spec.kp()];
    let args = [(Role::X, Buf::Tensor(a)), (Role::Out, rows)];
    cx.push(
        n,
        Some("tobf16"),
        &args,
        Body::ToBf16 { dims },
        spec.m * spec.k,
    );
    let packed = pack_b(b, spec.k, spec.n, spec.kp());
    let len = packed.len();
    let t = Tensor::ints(crate::ir::DType::I32, vec![len], packed);
    let bt = cx.constant(format!("{}::b_bf16", node.name), t);
    let mut args = vec![
        (Role::A, rows),
        (Role::B, Buf::Tensor(bt)),
        (Role::Out, Buf::Tensor(out)),
    ];
    if spec.bias {
        args.push((Role::Bias, Buf::Tensor(node.inputs[2])));
    }
    if spec.residual {
        args.push((
            Role::Residual,
            Buf::Tensor(node.inputs[node.inputs.len() - 1]),
        ));
    }
    let work = spec.macs();
    cx.push(n, None, &args, Body::GemmBf16(spec), work);
    Ok(())
}

/// Folds the innermost batch dims into the rows: while the innermost dim shares B (stride 0) and the bias, and
/// steps A and C by exactly `m` rows (`a_rs`, `c_rs` their row strides) — or `m` is 1, whose row strides are
/// then the dim's (a transposed `[1, S, K]` read as `[S, 1, K]`) — it multiplies `m`. Returns the rows, the batch
/// dims left and A's and C's row strides.
fn fold_rows(
    mut m: usize,
    mut batch: Vec<[usize; 5]>,
    mut a_rs: usize,
    mut c_rs: usize,
) -> (usize, Vec<[usize; 5]>, usize, usize) {
    while let Some(&[count, sa, sb, sc, sbias]) = batch.last() {
        if sb != 0 || sbias != 0 {
            break;
        }
        if m == 1 && sa > 0 && sc > 0 {
            (a_rs, c_rs) = (sa, sc);
        } else if sa != m * a_rs || sc != m * c_rs {
            break;
        }
        m *= count;
        batch.pop();
    }
    (m, batch, a_rs, c_rs)
}

/// MatMul operand `t` (its dense row stride `rs`, batch strides `dense` over the `nb` batch dims of the
/// product): itself, or through a copy-free transpose (`Ctx::views`), the tensor holding its elements, the
/// view's row stride and its strides for the batch dims (0 where the operand broadcasts).
fn view_operand(
    cx: &Ctx,
    t: crate::ir::TensorId,
    nb: usize,
    rs: usize,
    dense: &[usize],
) -> (crate::ir::TensorId, usize, Vec<usize>) {
    let Some((src, vs)) = cx.views.get(&t) else {
        return (t, rs, dense.to_vec());
    };
    let shape = &cx.g.tensors[t].shape;
    let lead = shape.len() - 2;
    let batch = (0..nb)
        .map(|d| match (d + lead).checked_sub(nb) {
            Some(od) if shape[od] > 1 => vs[od],
            _ => 0,
        })
        .collect();
    (*src, vs[lead], batch)
}

/// The Transpose that is the only reader of MatMul result `out` (rank `nb + 2`), when it keeps rows whole:
/// the node, its output, and the output's stride for each dim of `out`.
fn transposed_reader(
    cx: &Ctx,
    out: crate::ir::TensorId,
    nb: usize,
) -> Option<(NodeId, crate::ir::TensorId, Vec<usize>)> {
    let tn = cx.uses.single_use(out)?;
    let Op::Transpose(perm) = &cx.g.nodes[tn].op else {
        return None;
    };
    let r = perm.len();
    if r != nb + 2 || perm[r - 1] != r - 1 {
        return None;
    }
    let t = cx.g.nodes[tn].outputs[0];
    let ts = strides(&cx.g.tensors[t].shape);
    // Output dim i of the transpose is dim perm[i] of `out`.
    let mut per_dim = vec![0; r];
    for (i, &p) in perm.iter().enumerate() {
        per_dim[p] = ts[i];
    }
    Some((tn, t, per_dim))
}

fn lower_gemm(cx: &mut Ctx, n: NodeId, a: &GemmAttrs) -> Result<()> {
    let node = cx.g.nodes[n].clone();
    let ins = &node.inputs;
    let (sa, sb) = (cx.shape(ins[0]), cx.shape(ins[1]));
    let (m, k, nn) = gemm_dims(&sa, &sb, a).map_err(|e| Error::node(&node.name, "Gemm", e))?;
    let a_op = if a.trans_a {
        Operand {
            arg: Role::A,
            off: 0,
            rs: 1,
            cs: m,
        }
    } else {
        operand(Role::A, k)
    };
    // B in [K, N] layout: transposed once at compile time when constant, by a kernel otherwise; a constant B is
    // packed in column panels instead (`gemv_panels`) on micro-kernel targets.
    let gemv = cx.opts.gemv_panel.filter(|&p| nn >= p);
    // The constant B is copied out of the graph only when it is repacked.
    let b_const = (gemv.is_some() || a.trans_b)
        .then(|| cx.g.constant(ins[1]).cloned())
        .flatten();
    let panels = match (&b_const, gemv) {
        (Some(c), Some(p)) => Some((gemv_panels(cx, &node.name, c, a.trans_b, [k, nn], p), p)),
        _ => None,
    };
    let b_buf = match (panels, a.trans_b, b_const) {
        (Some((buf, _)), _, _) => buf,
        (None, false, _) => Buf::Tensor(ins[1]),
        (None, true, Some(c)) => {
            let v = crate::ir::ops::eval(&Op::Transpose(vec![1, 0]), &[&c])
                .map_err(|e| Error::node(&node.name, "Gemm", e))?;
            let name = format!("{}.B_packed", node.name);
            Buf::Tensor(cx.constant(name, v.into_iter().next().unwrap_or(c)))
        }
        (None, true, None) => {
            let s = cx.scratch(k * nn * 4);
            let body = Body::Transpose {
                out_shape: vec![k, nn],
                in_strides: transpose_strides(&sb, &[1, 0]),
                elem: 4,
            };
            let args = [(Role::X, Buf::Tensor(ins[1])), (Role::Out, s)];
            cx.push(n, Some("transpose_b"), &args, body, k * nn);
            s
        }
    };
    let mut args = vec![
        (Role::A, Buf::Tensor(ins[0])),
        (Role::B, b_buf),
        (Role::Out, Buf::Tensor(node.outputs[0])),
    ];
    let bias = if a.has_c && a.beta != 0.0 {
        let (kind, scale, buf) = gemm_bias(cx, &node.name, ins[2], a.beta, m, nn)?;
        args.push((Role::Bias, buf));
        Some(Bias {
            at: operand(Role::Bias, nn),
            kind,
            scale,
        })
    } else {
        None
    };
    let residual = a.epilogue.residual.then(|| {
        args.push((Role::Residual, Buf::Tensor(ins[ins.len() - 1])));
        operand(Role::Residual, nn)
    });
    let spec = GemmSpec {
        m,
        n: nn,
        k,
        kc: crate::kernel::gemm::KC,
        batch: vec![],
        a: a_op,
        b: operand(Role::B, nn),
        c: operand(Role::Out, nn),
        alpha: a.alpha,
        a_panel: None,
        a_k16: false,
        c_k16: false,
        res_k16: false,
        b_panel: panels.map(|(_, p)| p),
        bias,
        residual,
        act: a.epilogue.act,
        transpose_out: None,
        row_groups: None,
    };
    let work = spec.macs();
    cx.push(n, None, &args, Body::Gemm(spec), work);
    Ok(())
}

/// A constant Gemm or MatMul B (`[K, N]`, or `[N, K]` with `trans_b`) packed in `panel`-column panels,
/// zero-padded to a whole last panel, as the constant `NODE.B_panels`. Read in place, a column block takes a row
/// of N floats apart per step of K — for a GEMV (a classifier at batch 1) a new page each step (ResNet-50's fc,
/// 8 MB of weights), for a few rows (an encoder's 32 tokens) rows 0.5–2 KiB apart that
/// alias in L1, which the B copy (`machine_code::b_copies`) only half undid: the 2-layer encoder's GEMMs 6–21 %
/// faster with panels (Intel Xeon, session 15, paired), the model 9–10 %.
fn gemv_panels(
    cx: &mut Ctx,
    name: &str,
    b: &Tensor,
    trans_b: bool,
    [k, n]: [usize; 2],
    panel: usize,
) -> Buf {
    let v = b.to_f32_vec();
    let at = |p: usize, j: usize| if trans_b { v[j * k + p] } else { v[p * n + j] };
    let packed = pack_b_panels(k, n, panel, at);
    let t = Tensor::f32(vec![k, n.next_multiple_of(panel)], packed);
    Buf::Tensor(cx.constant(format!("{name}.B_panels"), t))
}

/// Gemm's C as an epilogue bias: a constant C has beta and its broadcast folded into a packed constant (per
/// column, or full [M, N]); a run-time one is read as it is, scaled by beta. Returns (kind, scale, buffer).
fn gemm_bias(
    cx: &mut Ctx,
    name: &str,
    c: crate::ir::TensorId,
    beta: f32,
    m: usize,
    nn: usize,
) -> Result<(BiasKind, f32, Buf)> {
    let cs = cx.shape(c);
    if let Some(cv) = cx.g.constant(c).map(|t| t.to_f32_vec()) {
        let st = broadcast_strides(&cs, &[m, nn]);
        let (kind, shape, vals) = if st[0] == 0 {
            let v = (0..nn).map(|j| beta * cv[j * st[1]]).collect::<Vec<_>>();
            (BiasKind::Col, vec![nn], v)
        } else {
            let v = (0..m * nn)
                .map(|e| beta * cv[(e / nn) * st[0] + (e % nn) * st[1]])
                .collect();
            (BiasKind::Full, vec![m, nn], v)
        };
        let id = cx.constant(format!("{name}.C_packed"), Tensor::f32(shape, vals));
        return Ok((kind, 1.0, Buf::Tensor(id)));
    }
    let kind = match cs.as_slice() {
        [x] if *x == nn => BiasKind::Col,
        [1, x] if *x == nn => BiasKind::Col,
        [x, 1] if *x == m => BiasKind::Row,
        [x, y] if *x == m && *y == nn => BiasKind::Full,
        _ => {
            return Err(Error::unsupported(
                name,
                "Gemm",
                format!("a run-time C of shape {cs:?} (supported: [N], [1,N], [M,1], [M,N])"),
            ))
        }
    };
    Ok((kind, beta, Buf::Tensor(c)))
}
