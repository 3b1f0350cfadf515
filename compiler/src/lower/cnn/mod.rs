//! Lowering of the convolutional family (`ir/ops/cnn.rs`). A depthwise Conv (one channel per group, no
//! residual) is one direct `Depthwise` kernel; any other Conv is a GEMM per (batch, group) of the weights
//! [M/g, C/g·KH·KW] by the input's columns — the input itself for an unpadded stride-1 1x1, else an `im2col`
//! kernel's scratch (`Ctx::conv_columns`) — with bias, residual and activation fused in its epilogue.
//! MaxPool / AveragePool are one `Pool` kernel, GlobalAveragePool one `GlobalAvg`. Where the target and the
//! shapes allow, a Conv takes the direct kernel instead (`direct.rs`), Winograd (`winograd.rs`), or its GEMM
//! computed transposed (`transposed.rs`).

mod bf16;
mod blocked;
mod direct;
mod rules;
mod transposed;
mod winograd;

use super::ctx::{operand, Ctx, A_PANEL};
use crate::error::{Error, Result};
use crate::ir::{numel, ConvAttrs, Graph, NodeId, Op, Tensor, TensorId};
use crate::kernel::gemm::{Bias, BiasKind, GemmSpec};
use crate::kernel::pool::PoolSpec;
use crate::kernel::{Body, Buf, Role};
use crate::x86::depthwise_c16_x86::c16;
use crate::x86::pack16;
use direct::{direct_spec, lower_direct};
use rules::{c16_pays, depthwise_spec, transposed_wins, NR};
use transposed::lower_conv_transposed;
use winograd::{lower_winograd, winograd_spec};

pub(super) fn lower(cx: &mut Ctx, n: NodeId, op: &Op) -> Result<()> {
    let (x, out) = (cx.g.nodes[n].inputs[0], cx.g.nodes[n].outputs[0]);
    let (xs, os) = (cx.shape(x), cx.shape(out));
    let args = [(Role::X, Buf::Tensor(x)), (Role::Out, Buf::Tensor(out))];
    match op {
        Op::Conv(a) => lower_conv(cx, n, a),
        Op::Pool(kind, a) => {
            let spec = PoolSpec {
                kind: *kind,
                attrs: a.clone(),
                planes: xs[0] * xs[1],
                hw: [xs[2], xs[3]],
                out: [os[2], os[3]],
                dtype: cx.g.tensors[x].dtype,
            };
            let work = numel(&os) * a.kernel[0] * a.kernel[1];
            cx.push(n, None, &args, Body::Pool(spec), work);
            Ok(())
        }
        Op::GlobalAveragePool => {
            let size = numel(&xs[2..]);
            // A head kept in channel blocks (`blocked.rs`) is averaged as it is.
            let blocks = (xs.len() == 4 && xs[0] == 1 && xs[1].is_multiple_of(16))
                .then(|| blocked::blocks(cx, x, xs[1], size))
                .flatten();
            let body = Body::GlobalAvg {
                planes: xs[0] * xs[1],
                size,
                blocked: blocks.is_some(),
            };
            let x = blocks.map_or(Buf::Tensor(x), |b| b.0);
            let args = [(Role::X, x), (Role::Out, Buf::Tensor(out))];
            cx.push(n, None, &args, body, numel(&xs));
            Ok(())
        }
        _ => Err(Error::internal("lower", "cnn lowering of another op")),
    }
}

fn lower_conv(cx: &mut Ctx, n: NodeId, a: &ConvAttrs) -> Result<()> {
    let node = cx.g.nodes[n].clone();
    let ins = &node.inputs;
    let out = Buf::Tensor(node.outputs[0]);
    let (xs, ws, os) = (
        cx.shape(ins[0]),
        cx.shape(ins[1]),
        cx.shape(node.outputs[0]),
    );
    let (nb, c, h, w) = (xs[0], xs[1], xs[2], xs[3]);
    let (m, cg) = (ws[0], ws[1]);
    let g = a.group;
    let mg = m / g;
    let khw = a.kernel[0] * a.kernel[1];
    let kk = cg * khw;
    let p = os[2] * os[3];
    let bias = a.has_bias.then(|| (Role::Bias, Buf::Tensor(ins[2])));
    if g == c && m == c && !a.epilogue.residual {
        let spec = depthwise_spec(a, &xs, &os);
        // Small planes with machine-code kernels: 16 channels per call (one `zmm`, two halves of a `ymm` on
        // AVX2), weights packed per 16-channel group.
        let packed = match (c16_pays(&cx.opts, &spec), c16(&spec), cx.g.constant(ins[1])) {
            (true, Some(_), Some(t)) => Some(pack16(&t.to_f32_vec(), c, khw)),
            _ => None,
        };
        let mut x = Buf::Tensor(ins[0]);
        let (w, body) = match packed {
            Some(wp) => {
                let name = format!("{}.W_c16", node.name);
                let wt = cx.constant(name, Tensor::f32(vec![c / 16, khw, 16], wp));
                let mut spec = spec;
                // The transposed GEMM before it may keep its input in channel blocks (`blocked.rs`).
                if let Some((blocks, _)) = blocked::blocks(cx, ins[0], c, h * w) {
                    (x, spec.in_blocked) = (blocks, true);
                }
                (wt, Body::DepthwiseC16(spec))
            }
            None if cx.blocked.contains_key(&ins[0]) => {
                let what = format!(
                    "{}: input kept in channel blocks but not read so",
                    node.name
                );
                return Err(Error::internal("lower", what));
            }
            None => (ins[1], Body::Depthwise(spec)),
        };
        let mut args = vec![(Role::X, x), (Role::W, Buf::Tensor(w))];
        args.extend(bias);
        args.push((Role::Out, out));
        cx.push(n, None, &args, body, nb * m * p * khw);
        return Ok(());
    }
    if bf16::applies(cx, n, a, nb) {
        if let Some(w) = cx.g.constant(ins[1]).map(|t| t.to_f32_vec()) {
            // Without AMX (`vdpbf16ps`: twice an f32 FMA's multiply-adds) the 3x3 convolutions Winograd takes
            // run its GEMMs in bf16 (`bf16::winograd_pays`): the direct bf16 GEMM does 2.25x F(2x2)'s
            // multiply-adds and was slower than f32 Winograd. AMX tiles run the direct GEMM faster still.
            if let Some(spec) = winograd_spec(cx, a, &xs, &os, m).filter(|_| !cx.opts.amx) {
                let bf16 = bf16::winograd_pays(&spec);
                return lower_winograd(cx, n, spec, &w, bf16);
            }
            return bf16::lower(cx, n, a, (&xs, &os), m, &w);
        }
    }
    if let Some(spec) = direct_spec(cx, a, &xs, &os, m) {
        if let Some(w) = cx.g.constant(ins[1]).map(|t| t.to_f32_vec()) {
            return lower_direct(cx, n, spec, (&xs, a.pads), &w);
        }
    }
    if let Some(spec) = winograd_spec(cx, a, &xs, &os, m) {
        if let Some(w) = cx.g.constant(ins[1]).map(|t| t.to_f32_vec()) {
            return lower_winograd(cx, n, spec, &w, false);
        }
    }
    // A downsample of channel blocks takes its columns as blocks (`blocked.rs`).
    let blocked_cols = blocked::strided_columns(cx, n, a, &xs, &os);
    let (b_buf, b_batch, b_group) = match blocked_cols {
        Some((cols, per_image)) => (cols, per_image, per_image),
        None => cx.conv_columns(n, a, &xs, &os, cg, None),
    };
    // Channels padded to whole column blocks need the bias padded too: a constant one.
    let bias_pads = m.is_multiple_of(NR) || !a.has_bias || cx.g.constant(ins[2]).is_some();
    if g == 1 && cx.opts.avx512 && transposed_wins(m, p) && bias_pads {
        if let Some(w) = cx.g.constant(ins[1]).map(|t| t.to_f32_vec()) {
            if crate::kernel::gemm::clamp_bits(a.epilogue.act).is_some() {
                let cols = (b_buf, b_batch, blocked_cols.is_some());
                return lower_conv_transposed(cx, n, a, &w, [nb, m, p, kk], cols);
            }
        }
    }
    if blocked_cols.is_some() {
        let what = format!(
            "{}: columns in channel blocks but not computed transposed",
            node.name
        );
        return Err(Error::internal("lower", what));
    }
    // Constant weights are packed in panels for the micro-kernels (each group's rows padded to whole panels)
    // when the output plane is large: there every weight is reused across many column tiles and one
    // sequential stream per tile wins (ResNet-50's 56x56 and 28x28 layers: 5-12 %). On 7x7 and 14x14 planes
    // the weights stream from memory nearly once and the packed layout measured slower (7x7: 40 %).
    let pack = cx.opts.micro_kernels && p >= PACK_MIN_PIXELS;
    let packed = match cx.g.constant(ins[1]).filter(|_| pack) {
        Some(w) => {
            let wp = pack_panels(&w.to_f32_vec(), g, mg, kk);
            let name = format!("{}.W_packed", node.name);
            Some(cx.constant(name, Tensor::f32(vec![wp.len()], wp)))
        }
        None => None,
    };
    let a_group = match packed {
        Some(_) => mg.next_multiple_of(A_PANEL) * kk,
        None => mg * kk,
    };
    let a_buf = Buf::Tensor(packed.unwrap_or(ins[1]));
    let mut args = vec![(Role::A, a_buf), (Role::B, b_buf), (Role::Out, out)];
    args.extend(bias);
    let residual = a.epilogue.residual.then(|| {
        args.push((Role::Residual, Buf::Tensor(ins[ins.len() - 1])));
        operand(Role::Residual, p)
    });
    let spec = GemmSpec {
        m: mg,
        n: p,
        k: kk,
        kc: crate::kernel::gemm::CONV_KC,
        batch: vec![
            [nb, 0, b_batch, m * p, 0],
            [g, a_group, b_group, mg * p, mg],
        ],
        a: operand(Role::A, kk),
        a_panel: packed.map(|_| A_PANEL),
        a_k16: false,
        c_k16: false,
        res_k16: false,
        b_panel: None,
        b: operand(Role::B, p),
        c: operand(Role::Out, p),
        alpha: 1.0,
        bias: a.has_bias.then(|| Bias {
            at: operand(Role::Bias, 0),
            kind: BiasKind::Row,
            scale: 1.0,
        }),
        residual,
        act: a.epilogue.act,
        transpose_out: None,
        row_groups: (g == 1 && splits_channels(cx, node.outputs[0], p, [kk, mg], a))
            .then(|| feed_groups(mg)),
    };
    let work = spec.macs();
    cx.push(n, None, &args, Body::Gemm(spec), work);
    Ok(())
}

/// Row groups of a convolution GEMM that splits its output channels (`splits_channels`): at most this many.
const FEED_ROW_GROUPS: usize = 8;

/// The row groups of a channel-splitting GEMM of `m` rows: the most, up to [`FEED_ROW_GROUPS`], that split the
/// rows into equal groups of whole 8-row blocks (96 rows: 6 of 16), so that each group's channels are whole tile
/// rows on every kernel set and the entry function can run the depthwise layer after it group by group
/// (`kernel/interleave.rs`); else [`FEED_ROW_GROUPS`] (groups of `m / 8` rounded up to whole tiles).
fn feed_groups(m: usize) -> usize {
    let whole = m.is_multiple_of(8).then(|| {
        (2..=FEED_ROW_GROUPS)
            .rev()
            .find(|&g| (m / 8).is_multiple_of(g))
    });
    whole.flatten().unwrap_or(FEED_ROW_GROUPS)
}
/// Least output pixels for `splits_channels` (56x56 and larger planes; 28x28 measured neutral).
const FEED_MIN_PIXELS: usize = 1024;

/// Whether a convolution GEMM (`[k, m]`: depth and output channels) on `p` output pixels takes its output channels
/// in [`FEED_ROW_GROUPS`] groups outermost (`GemmSpec::row_groups`): when only depthwise convolutions read its
/// output (`feeds_depthwise`), or when it widens a thin input at least fourfold without a residual epilogue (the
/// many planes it writes are its cost: ResNet-50's first 64 → 256 downsample, with the 64 → 64 conv1 in its layer,
/// 1165 → 910 µs at 1 thread and 620 → 520 at 2, paired, session 15). Its 64 → 256 conv3 layers, read by the next
/// block's pixel-split convolutions, ran slower at 2 threads that way; the residual epilogue marks them.
fn splits_channels(cx: &Ctx, t: TensorId, p: usize, [k, m]: [usize; 2], a: &ConvAttrs) -> bool {
    let widens = !a.epilogue.residual && 4 * k <= m;
    p >= FEED_MIN_PIXELS && (widens || feeds_depthwise(cx.g, &cx.uses, t))
}

/// Whether a convolution's output `t` is read only by depthwise convolutions (an inverted residual's expansion),
/// so that its GEMM splits the output channels into [`FEED_ROW_GROUPS`] groups taken outermost
/// (`GemmSpec::row_groups`) instead of the pixels. At 2 threads each core then writes the channels whose planes
/// its share of the depthwise layer reads (that layer splits by channel), not half of every plane; at 1 thread
/// the work streams into 12–24 planes at a time instead of 64–96. Intel Xeon (session 15, paired 10th
/// percentiles): MobileNetV2's 112x112 expansion 925 → 555 µs at 1 thread, 510 → 280 at 2, the depthwise layers
/// after 56x56 expansions 15–25 % faster at 2 threads; the model 5–6 % at 1 and 6–8 % at 2, bitwise equal.
/// ResNet-50's 56x56 1x1 layers (read by 1x1 convolutions and residual adds) were slower that way at 2 threads.
fn feeds_depthwise(g: &Graph, uses: &crate::ir::Uses, t: TensorId) -> bool {
    if g.outputs.contains(&t) {
        return false;
    }
    let channels = g.tensors[t].shape.get(1).copied();
    let depthwise = |m: NodeId| match &g.nodes[m].op {
        Op::Conv(a) => {
            a.group > 1 && channels == Some(a.group) && g.nodes[m].inputs.first() == Some(&t)
        }
        _ => false,
    };
    let readers = uses.consumers(t);
    !readers.is_empty() && readers.into_iter().all(depthwise)
}

/// Output pixels from which a convolution's weights are packed (`lower_conv`).
const PACK_MIN_PIXELS: usize = 256;

/// Packs `groups` row-major `[rows, k]` matrices in `A_PANEL`-row panels (`GemmSpec::a_panel`): per group,
/// `rows.next_multiple_of(A_PANEL) · k` floats, the rows past `rows` zero.
pub(super) fn pack_panels(w: &[f32], groups: usize, rows: usize, k: usize) -> Vec<f32> {
    let padded = rows.next_multiple_of(A_PANEL);
    let mut out = vec![0.0f32; groups * padded * k];
    for g in 0..groups {
        for r in 0..rows {
            let (panel, lane) = (r / A_PANEL, r % A_PANEL);
            for p in 0..k {
                out[g * padded * k + panel * A_PANEL * k + p * A_PANEL + lane] =
                    w[(g * rows + r) * k + p];
            }
        }
    }
    out
}
