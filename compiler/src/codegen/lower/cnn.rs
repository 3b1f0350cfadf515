//! Lowering of the convolutional family (`ir/ops/cnn.rs`). A depthwise Conv (one channel per group, no
//! residual) is one direct `Depthwise` kernel; any other Conv is a GEMM per (batch, group) of the weights
//! [M/g, C/g·KH·KW] by the input's columns — the input itself for an unpadded stride-1 1x1, else an `im2col`
//! kernel's scratch (`Ctx::conv_columns`) — with bias, residual and activation fused in its epilogue.
//! MaxPool / AveragePool are one `Pool` kernel, GlobalAveragePool one `GlobalAvg`.

use super::{operand, pack_b_panels, Ctx, A_PANEL, ROW_PANEL};
use crate::codegen::kernel::{Body, Buf, Role};
use crate::codegen::kernels::conv_direct_x86::ConvDirect;
use crate::codegen::kernels::pack16;
use crate::codegen::ops::conv::Im2colSpec;
use crate::codegen::ops::depthwise::{c16, DepthwiseSpec};
use crate::codegen::ops::gemm::{Bias, BiasKind, GemmSpec, Operand, TransposeOut};
use crate::codegen::ops::pool::PoolSpec;
use crate::codegen::ops::winograd::{transform_weights, WinogradSpec};
use crate::error::{Error, Result};
use crate::ir::{numel, Activation, ConvAttrs, Graph, NodeId, Op, Tensor, TensorId};
use crate::passes::{consumers, single_use};

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
            };
            let work = numel(&os) * a.kernel[0] * a.kernel[1];
            cx.push(n, None, &args, Body::Pool(spec), work);
            Ok(())
        }
        Op::GlobalAveragePool => {
            let body = Body::GlobalAvg {
                planes: xs[0] * xs[1],
                size: numel(&xs[2..]),
            };
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
        let spec = DepthwiseSpec {
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
            pack_out: false,
        };
        // Small planes on AVX-512: 16 channels per vector, weights packed per 16-channel group.
        let packed = match (cx.opts.winograd, c16(&spec), cx.g.constant(ins[1])) {
            (true, Some(_), Some(t)) => Some(pack16(&t.to_f32_vec(), c, khw)),
            _ => None,
        };
        let (w, body) = match packed {
            Some(wp) => {
                let name = format!("{}.W_c16", node.name);
                let wt = cx.constant(name, Tensor::f32(vec![c / 16, khw, 16], wp));
                (wt, Body::DepthwiseC16(spec))
            }
            None => (ins[1], Body::Depthwise(spec)),
        };
        let mut args = vec![(Role::X, Buf::Tensor(ins[0])), (Role::W, Buf::Tensor(w))];
        args.extend(bias);
        args.push((Role::Out, out));
        cx.push(n, None, &args, body, nb * m * p * khw);
        return Ok(());
    }
    if let Some(spec) = direct_spec(cx, a, &xs, &os, m) {
        if let Some(w) = cx.g.constant(ins[1]).map(|t| t.to_f32_vec()) {
            return lower_direct(cx, n, spec, (&xs, a.pads), &w);
        }
    }
    if let Some(spec) = winograd_spec(cx, a, &xs, &os, m) {
        if let Some(w) = cx.g.constant(ins[1]).map(|t| t.to_f32_vec()) {
            return lower_winograd(cx, n, spec, &w);
        }
    }
    let (b_buf, b_batch, b_group) = cx.conv_columns(n, a, &xs, &os, cg, None);
    // Channels padded to whole column blocks need the bias padded too: a constant one.
    let bias_pads = m.is_multiple_of(NR) || !a.has_bias || cx.g.constant(ins[2]).is_some();
    if g == 1 && cx.opts.winograd && transposed_wins(m, p) && bias_pads {
        if let Some(w) = cx.g.constant(ins[1]).map(|t| t.to_f32_vec()) {
            if crate::codegen::machine_code::clamp_bits(a.epilogue.act).is_some() {
                return lower_conv_transposed(cx, n, a, &w, [nb, m, p, kk], (b_buf, b_batch));
            }
        }
    }
    // Constant weights are packed in panels for the micro-kernels (each group's rows padded to whole panels)
    // when the output plane is large: there every weight is reused across many column tiles and one
    // sequential stream per tile wins (ResNet-50's 56x56 and 28x28 layers: 5-12 %). On 7x7 and 14x14 planes
    // the weights stream from memory nearly once and the packed layout measured slower (7x7: 40 %).
    let pack = cx.opts.pack_a && p >= PACK_MIN_PIXELS;
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
        batch: vec![
            [nb, 0, b_batch, m * p, 0],
            [g, a_group, b_group, mg * p, mg],
        ],
        a: operand(Role::A, kk),
        a_panel: packed.map(|_| A_PANEL),
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
        row_groups: (g == 1 && splits_channels(cx.g, node.outputs[0], p, [kk, mg], a))
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
/// (`codegen/interleave.rs`); else [`FEED_ROW_GROUPS`] (groups of `m / 8` rounded up to whole tiles).
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
fn splits_channels(g: &Graph, t: TensorId, p: usize, [k, m]: [usize; 2], a: &ConvAttrs) -> bool {
    let widens = !a.epilogue.residual && 4 * k <= m;
    p >= FEED_MIN_PIXELS && (widens || feeds_depthwise(g, t))
}

/// Whether a convolution's output `t` is read only by depthwise convolutions (an inverted residual's expansion),
/// so that its GEMM splits the output channels into [`FEED_ROW_GROUPS`] groups taken outermost
/// (`GemmSpec::row_groups`) instead of the pixels. At 2 threads each core then writes the channels whose planes
/// its share of the depthwise layer reads (that layer splits by channel), not half of every plane; at 1 thread
/// the work streams into 12–24 planes at a time instead of 64–96. Intel Xeon (session 15, paired 10th
/// percentiles): MobileNetV2's 112x112 expansion 925 → 555 µs at 1 thread, 510 → 280 at 2, the depthwise layers
/// after 56x56 expansions 15–25 % faster at 2 threads; the model 5–6 % at 1 and 6–8 % at 2, bitwise equal.
/// ResNet-50's 56x56 1x1 layers (read by 1x1 convolutions and residual adds) were slower that way at 2 threads.
fn feeds_depthwise(g: &Graph, t: TensorId) -> bool {
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
    let readers = consumers(g, t);
    !readers.is_empty() && readers.into_iter().all(depthwise)
}

/// Most input channels of a convolution the direct kernel takes (`direct_spec`): image inputs.
const DIRECT_MAX_CHANNELS: usize = 4;

/// Whether the direct kernel takes a convolution of any number of input channels: strided (im2col's column
/// matrix is then no smaller than the input, and no Winograd), a window of at least 3x3 (one tap per channel
/// leaves the kernel bound by its weight loads), and output rows that fill at least 7/8 of the kernel's
/// 16-pixel blocks. ResNet-50's 3x3 stride-2 layers (paired, Intel Xeon Emerald Rapids): 28x28 outputs 7.5 %,
/// 14x14 4 % faster with their im2col gone; 7x7 outputs (7 of 16 lanes) 24 % slower, 1x1 stride-2 ones 2.7x.
fn strided_direct(a: &ConvAttrs, ow: usize) -> bool {
    let blocks = ow.div_ceil(16);
    a.strides.iter().all(|&s| s >= 2)
        && a.kernel.iter().all(|&k| k >= 3)
        && ow * 8 >= 7 * 16 * blocks
}

/// The direct kernel's shape (`kernels/conv_direct_x86.rs`) for a one-group convolution of an input with at most
/// `DIRECT_MAX_CHANNELS` channels (a stem), or a strided one that fills its pixel blocks (`strided_direct`), on
/// AVX-512 targets, M a multiple of 16, no residual, a clamp for an activation. There im2col writes a column matrix C·KH·KW / (stride²) times the input (ResNet-50's 7x7
/// stride-2 stem: 7.4 MB) that the GEMM streams back; the direct kernel reads the zero-padded input instead.
fn direct_spec(
    cx: &Ctx,
    a: &ConvAttrs,
    xs: &[usize],
    os: &[usize],
    m: usize,
) -> Option<ConvDirect> {
    let (lo, hi) = crate::codegen::machine_code::clamp_bits(a.epilogue.act)?;
    let pointwise = a.kernel == [1, 1] && a.strides == [1, 1] && a.pads == [0; 4];
    let ok = cx.opts.winograd
        && a.group == 1
        && !pointwise
        && !a.epilogue.residual
        && m.is_multiple_of(16)
        && ((1..=DIRECT_MAX_CHANNELS).contains(&xs[1]) || strided_direct(a, os[3]))
        && numel(&os[2..]) > 0
        && xs[2] * xs[3] > 0;
    let out = [os[2], os[3]];
    let read = ConvDirect::padded_plane(out, a.kernel, a.strides, a.dilations);
    // Unpadded inputs are read in place when the outputs read no more than the plane.
    let in_place = a.pads == [0; 4] && read[0] <= xs[2] && read[1] <= xs[3];
    let spec = ConvDirect {
        c: xs[1],
        m,
        padded: if in_place { [xs[2], xs[3]] } else { read },
        kernel: a.kernel,
        strides: a.strides,
        dilations: a.dilations,
        out,
        bias: a.has_bias,
        lo,
        hi,
    };
    (ok && crate::codegen::kernels::conv_direct_x86::check(&spec).is_ok()).then_some(spec)
}

/// A convolution by the direct kernel (`Body::ConvDirect`): the input zero-padded into scratch by an im2col
/// kernel of a 1x1 window (unless it is read in place), the weights packed `[M/16, C·KH·KW, 16]` (`pack16`).
/// `xs` is the input's shape, `pads` the convolution's.
fn lower_direct(
    cx: &mut Ctx,
    n: NodeId,
    spec: ConvDirect,
    (xs, pads): (&[usize], [usize; 4]),
    w: &[f32],
) -> Result<()> {
    let node = cx.g.nodes[n].clone();
    let ins = &node.inputs;
    let nb = xs[0];
    let k = spec.c * spec.kernel[0] * spec.kernel[1];
    let mut x = Buf::Tensor(ins[0]);
    if spec.padded != [xs[2], xs[3]] {
        let pad = Im2colSpec {
            n: nb,
            c: spec.c,
            hw: [xs[2], xs[3]],
            kernel: [1, 1],
            strides: [1, 1],
            dilations: [1, 1],
            pads: [pads[0], pads[1]],
            out: spec.padded,
            bytes: None,
        };
        let scratch = cx.scratch(pad.col_bytes());
        let work = pad.col_bytes() / 4;
        cx.push(
            n,
            Some("pad"),
            &[(Role::X, x), (Role::Out, scratch)],
            Body::Im2col(pad),
            work,
        );
        x = scratch;
    }
    let packed = pack16(w, spec.m, k);
    let wt = cx.constant(
        format!("{}.W_direct", node.name),
        Tensor::f32(vec![spec.m / 16, k, 16], packed),
    );
    let mut args = vec![(Role::X, x), (Role::W, Buf::Tensor(wt))];
    if spec.bias {
        args.push((Role::Bias, Buf::Tensor(ins[2])));
    }
    args.push((Role::Out, Buf::Tensor(node.outputs[0])));
    let work = nb * spec.m * spec.out[0] * spec.out[1] * k;
    cx.push(n, None, &args, Body::ConvDirect { n: nb, spec }, work);
    Ok(())
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

/// The Winograd geometry of a convolution when the target has the transforms and it pays: a 3x3, stride-1,
/// undilated, one-group convolution without a residual whose activation is a clamp, with at least 16 input and
/// output channels (else the transforms dominate), and whose planes and strides fit the kernels. F(4x4, 3x3)
/// where it has at least 32 tiles per channel and its GEMMs do at most 3/4 of F(2x2)'s multiply-adds
/// (ResNet-50's 56x56 and 28x28 layers); else F(2x2, 3x3) with at least 16 tiles per channel (its 14x14 layers,
/// where F(4x4)'s 16 tiles would stream 2.25 times the weights for 0.73 of the work, and its 7x7 ones: 4x4
/// tiles, computed transposed, 1.15 -> 0.8 ms each on AMD EPYC for 16/9 the direct GEMM's weight bytes).
fn winograd_spec(
    cx: &Ctx,
    a: &ConvAttrs,
    xs: &[usize],
    os: &[usize],
    m: usize,
) -> Option<WinogradSpec> {
    let plain = a.kernel == [3, 3] && a.strides == [1, 1] && a.dilations == [1, 1] && a.group == 1;
    let clamp = crate::codegen::machine_code::clamp_bits(a.epilogue.act).is_some();
    if !cx.opts.winograd || !plain || a.epilogue.residual || !clamp {
        return None;
    }
    let f2 = WinogradSpec {
        n: xs[0],
        c: xs[1],
        m,
        hw: [xs[2], xs[3]],
        pads: [a.pads[0], a.pads[1]],
        out: [os[2], os[3]],
        has_bias: a.has_bias,
        act: a.epilogue.act,
        tile: 2,
    };
    let f4 = WinogradSpec {
        tile: 4,
        ..f2.clone()
    };
    let per_image = |s: &WinogradSpec| s.tiles()[0] * s.tiles()[1];
    let fits = |s: &WinogradSpec| {
        let [ph, pw] = s.plane();
        let bytes = |floats: usize| floats.checked_mul(s.xis() * 4);
        let small = |b: Option<usize>| b.is_some_and(|b| b < i32::MAX as usize);
        ph * pw * 4 <= 256 << 10
            && small(bytes(s.c * s.tiles_all()))
            && small(bytes(s.m * s.tiles_all()))
    };
    let pays4 = per_image(&f4) >= 32 && 4 * f4.xis() * per_image(&f4) <= 3 * 16 * per_image(&f2);
    let s = if pays4 && fits(&f4) { f4 } else { f2 };
    let ok =
        s.c >= 16 && m >= 16 && per_image(&s) >= 16 && fits(&s) && s.pads[0] <= 2 && s.pads[1] <= 2;
    ok.then_some(s)
}

/// A convolution as Winograd F(2x2, 3x3) (`ops/winograd.rs`): the input transform into scratch `V`, a GEMM
/// per ξ of the compile-time transformed weights `U` by `V` into scratch `M`, the output transform with bias
/// and clamp into the output. When the tiles fill the GEMM's 32-column blocks badly (`transposed_wins`:
/// ResNet-50's 14x14 layers, 49 tiles in 64 columns; its 28x28 ones, 196 in 224), each GEMM is computed
/// transposed, `Mᵀ[ξ] = V[ξ]ᵀ · U[ξ]ᵀ` (tiles as rows, `Uᵀ` packed in column panels at compile time), and the
/// block-transposing kernel writes `M` back: the same fma chains, so the output is bitwise the same.
fn lower_winograd(cx: &mut Ctx, n: NodeId, s: WinogradSpec, w: &[f32]) -> Result<()> {
    let node = cx.g.nodes[n].clone();
    let (c, m, t, xis) = (s.c, s.m, s.tiles_all(), s.xis());
    let u = transform_weights(w, m, c, s.tile);
    let transposed = transposed_wins(m, t);
    let (u, u_shape) = if transposed {
        // Per ξ, Uᵀ [C, M] in column panels.
        let packed = (0..xis)
            .flat_map(|xi| pack_b_panels(c, m, NR, |p, j| u[(xi * m + j) * c + p]))
            .collect();
        (packed, vec![xis, c, m.next_multiple_of(NR)])
    } else {
        (u, vec![xis, m, c])
    };
    let u = cx.constant(format!("{}.W_winograd", node.name), Tensor::f32(u_shape, u));
    let v = cx.scratch(s.v_bytes());
    let x = Buf::Tensor(node.inputs[0]);
    cx.push(
        n,
        Some("winograd_in"),
        &[(Role::X, x), (Role::Out, v)],
        Body::WinogradIn(s.clone()),
        xis * c * t,
    );
    let mm = cx.scratch(s.m_bytes());
    if transposed {
        let tr = Transposed {
            nb: xis,
            p: t,
            m,
            k: c,
            a: (v, c * t),
            b: (Buf::Tensor(u), c * m.next_multiple_of(NR)),
            bias: None,
            act: Activation::None,
            residual: None,
            out_act: Activation::None,
            out: mm,
        };
        push_transposed(cx, n, tr, ("winograd_gemm_t", Some("winograd_t")));
    } else {
        let spec = GemmSpec {
            m,
            n: t,
            k: c,
            batch: vec![[xis, m * c, c * t, m * t, 0]],
            a: operand(Role::A, c),
            a_panel: None,
            b_panel: None,
            b: operand(Role::B, t),
            c: operand(Role::Out, t),
            alpha: 1.0,
            bias: None,
            residual: None,
            act: Activation::None,
            transpose_out: None,
            row_groups: None,
        };
        let work = spec.macs();
        let args = [(Role::A, Buf::Tensor(u)), (Role::B, v), (Role::Out, mm)];
        cx.push(n, Some("winograd_gemm"), &args, Body::Gemm(spec), work);
    }
    let ins = &node.inputs;
    let mut args = vec![(Role::X, mm)];
    if s.has_bias {
        args.push((Role::Bias, Buf::Tensor(ins[2])));
    }
    args.push((Role::Out, Buf::Tensor(node.outputs[0])));
    let work = xis * m * t;
    cx.push(n, None, &args, Body::WinogradOut(s), work);
    Ok(())
}

/// The AVX-512 micro-kernel's tile columns: the transposed GEMM's column blocks and B panels.
const NR: usize = 32;

/// Whether an AVX-512 convolution GEMM of `m` output channels by `p` output pixels wastes enough of its
/// 32-column tiles on the last column block that computing it transposed (pixels as rows, which the row-tail
/// micro-kernels cover exactly; channels as columns) wins: 7x7 planes use 49 of 64 columns, 14x14 planes 196 of
/// 224. Measured (AMD EPYC): MobileNetV2 −7 %, EfficientNet-Lite0 −4 %; ResNet-50's 1x1 layers on 14x14 and 7x7
/// planes 15–25 % faster each, its 3x3 ones there (im2col columns, K = 9·C) 12–15 % (they were 15 % slower before
/// the transposed weights were packed in column panels, `GemmSpec::b_panel`). Channels a multiple of 16 but not
/// of 32 are padded to whole column blocks (`TransposeOut::ld`) where that wastes at most a sixth of the columns
/// (80 and more channels): EfficientNet-Lite0's 14x14 projections to 80 and 112 channels (Intel Xeon, paired
/// runs) 3–9 % faster at 1 thread and 13–17 % at 2 (the depthwise layer before writes their packed A, and those
/// layers 5–8 % faster at 2 threads too), the model −1.3 % / −4 %.
fn transposed_wins(m: usize, p: usize) -> bool {
    let ld = m.next_multiple_of(NR);
    m.is_multiple_of(16) && 5 * ld <= 6 * m && p.next_multiple_of(NR) * 10 > p * 11
}

/// A convolution (one group) as `Cᵀ = colsᵀ · Wᵀ` (`push_transposed`), the bias per column, the clamp fused in
/// the GEMM when there is no residual, else added and applied after it by the transposing epilogue. Each element
/// takes the same fma chain over K and the same epilogue operations in the same order as the untransposed GEMM:
/// bitwise equal.
fn lower_conv_transposed(
    cx: &mut Ctx,
    n: NodeId,
    a: &ConvAttrs,
    w: &[f32],
    [nb, m, p, kk]: [usize; 4],
    (cols, cols_batch): (Buf, usize),
) -> Result<()> {
    let node = cx.g.nodes[n].clone();
    let ins = &node.inputs;
    let ld = m.next_multiple_of(NR);
    let wt = pack_b_panels(kk, m, NR, |p, j| w[j * kk + p]);
    let wt = cx.constant(format!("{}.W_t", node.name), Tensor::f32(vec![kk, ld], wt));
    // The GEMM's bias per column, zero-padded like the weights to whole column blocks (`TransposeOut::ld`):
    // a one-row panel packing.
    let bias = match (a.has_bias, m == ld) {
        (false, _) => None,
        (true, true) => Some(Buf::Tensor(ins[2])),
        (true, false) => {
            let b = cx.g.constant(ins[2]).map(|t| t.to_f32_vec());
            let b = b.filter(|b| b.len() >= m).ok_or_else(|| {
                let what = format!(
                    "{}: bias padded to {ld} channels not a constant of {m}",
                    node.name
                );
                Error::internal("lower", what)
            })?;
            let padded = pack_b_panels(1, m, NR, |_, j| b[j]);
            let t = cx.constant(
                format!("{}.bias_t", node.name),
                Tensor::f32(vec![ld], padded),
            );
            Some(Buf::Tensor(t))
        }
    };
    let residual = a.epilogue.residual;
    let (act, out_act) = if residual {
        (Activation::None, a.epilogue.act)
    } else {
        (a.epilogue.act, Activation::None)
    };
    let t = Transposed {
        nb,
        p,
        m,
        k: kk,
        a: (cols, cols_batch),
        b: (Buf::Tensor(wt), 0),
        bias,
        act,
        residual: residual.then(|| Buf::Tensor(ins[ins.len() - 1])),
        out_act,
        out: Buf::Tensor(node.outputs[0]),
    };
    push_transposed(cx, n, t, ("gemm_t", None));
    Ok(())
}

/// A GEMM computed transposed: `nb` products `Cᵀ [P, M] = Aᵀ · B` of K-deep operands, written back as `[M, P]`.
struct Transposed {
    /// Batch count (images, or Winograd's α² ξ) and the rows, columns and depth of each `Cᵀ`.
    nb: usize,
    p: usize,
    m: usize,
    k: usize,
    /// A `[K, P]` per batch, read transposed (row stride 1, column stride P), and its batch stride.
    a: (Buf, usize),
    /// B `[K, M]` packed in `NR`-column panels (`pack_b_panels`), and its batch stride.
    b: (Buf, usize),
    /// Bias per column of `Cᵀ` (per output channel).
    bias: Option<Buf>,
    /// The clamp fused in the GEMM.
    act: Activation,
    /// Residual `[nb, M, P]` the transposing epilogue adds, then applies `out_act`.
    residual: Option<Buf>,
    out_act: Activation,
    /// `[nb, M, P]`.
    out: Buf,
}

/// Whether a transposed GEMM packs A in row panels first (`Body::PackRows`): read transposed, a tile's A is
/// eight pixels (or Winograd tiles) of a row per step of K, a row apart, and every column block (`m / NR` of
/// them) fetches it again; packed, each tile's A is one sequential stream (`GemmSpec::a_panel`). Measured on an
/// Intel Xeon (Emerald Rapids, paired runs): ResNet-50's 14x14 and 7x7 1x1 layers 10–12 % faster at 1 thread and
/// 13–17 % at 2 for packs of 7–56 µs, its transposed Winograd layers 13 % with the pack; the model 4–5.5 %;
/// MobileNetV2 and EfficientNet-Lite0 1–4 % at 1 thread, unchanged at 2. A single column block reads A once:
/// no pack.
fn packs_rows(m: usize) -> bool {
    m / NR >= 2
}

/// The rows per panel of a transposed GEMM's A packed by `Body::PackRows` (K deep, P rows): [`ROW_PANEL`],
/// whose 14-row tiles read B fewer times per row, where B's K block outgrows L1 (K ≥ 128) and P fills more than
/// two such tiles; else 8-row panels, one tile's sequential stream each. Measured on ResNet-50 and
/// MobileNetV2 (Intel Xeon, paired, bitwise equal): 56-row panels made its 56x56 Winograd GEMMs (K = 64)
/// 10 % slower at 1 thread and MobileNetV2's 14x14 expansions (K = 64–96) 15 % slower at 2, and its 7x7
/// Winograd GEMMs (16 rows) packed 3.5x the rows; its other transposed GEMMs (K = 128–4608, P = 49–196)
/// 3–15 % faster.
fn row_panel(k: usize, p: usize) -> usize {
    if k >= 128 && p >= 32 {
        ROW_PANEL
    } else {
        A_PANEL
    }
}

/// Makes the channel-blocked depthwise kernel that wrote `t`'s A write it as the GEMM's row panels into `panels`
/// (`DepthwiseSpec::pack_out`) instead of `Body::PackRows` packing it after: when A is that kernel's output
/// tensor, read by no other node and no graph output, with the GEMM's batch, depth (channels) and rows (pixels).
/// MobileNetV2's projections after its 14x14 and 7x7 depthwise layers: the pack read the planes the other core
/// had written half of (at 2 threads 2-5x its 1-thread time, ~7 % of the run).
fn c16_writes_panels(cx: &mut Ctx, t: &Transposed, panels: Buf) -> bool {
    // The kernel writes 8-pixel panels (`DwC16::panels`).
    const _: () = assert!(A_PANEL == 8);
    let Buf::Tensor(x) = t.a.0 else {
        return false;
    };
    if cx.opts.keep_reshapes || single_use(cx.g, x).is_none() {
        return false;
    }
    let writes_x = |k: &&mut crate::codegen::kernel::Kernel| {
        k.args.iter().any(|a| a.role == Role::Out && a.buf == t.a.0)
    };
    let Some(k) = cx.out.kernels.values_mut().find(writes_x) else {
        return false;
    };
    let Body::DepthwiseC16(s) = &mut k.body else {
        return false;
    };
    if s.pack_out || (s.n, s.c, s.out[0] * s.out[1]) != (t.nb, t.k, t.p) {
        return false;
    }
    s.pack_out = true;
    for a in k.args.iter_mut().filter(|a| a.role == Role::Out) {
        a.buf = panels;
    }
    true
}

/// Pushes a transposed GEMM into scratch `[nb, P16, M]` (P rounded up to 16: the transposer loads whole 16x16
/// blocks of `Cᵀ`) with the transposing epilogue (`kernels/transpose_x86.rs`) into `t.out` fused after each of
/// its units (`gemm::TransposeOut`), named `NODE.names.0`; where the micro-kernels cannot take the GEMM, the
/// epilogue is a kernel of its own after it, `NODE[.names.1]`. Fused, a unit's block of `Cᵀ` is transposed from
/// this core's cache and one barrier goes: measured on this session's Intel Xeon (Emerald Rapids), the
/// separate kernel took 4.5 % of MobileNetV2 at 1 thread and 7.4 % at 2, where it read blocks another core wrote.
fn push_transposed(cx: &mut Ctx, n: NodeId, t: Transposed, names: (&str, Option<&str>)) {
    let p16 = t.p.next_multiple_of(16);
    // `Cᵀ`'s row stride: whole column blocks (B and the bias are padded with zeros to it).
    let ld = t.m.next_multiple_of(NR);
    // A packed in row panels first (`Body::PackRows`) where that pays (`packs_rows`).
    let packed = packs_rows(t.m);
    let (a_buf, a_batch, a, a_panel) = if packed {
        let rows = row_panel(t.k, t.p);
        // Sized for `rows`-row panels; a channel-blocked depthwise kernel writes 8-row ones.
        let s = cx.scratch(t.nb * t.p.next_multiple_of(rows) * t.k * 4);
        let panel = if c16_writes_panels(cx, &t, s) {
            A_PANEL
        } else {
            let body = Body::PackRows {
                n: t.nb,
                k: t.k,
                p: t.p,
                panel: rows,
            };
            let x = &[(Role::X, t.a.0), (Role::Out, s)];
            let work = t.nb * t.p.next_multiple_of(rows) * t.k;
            cx.push(n, Some("pack"), x, body, work);
            rows
        };
        let pp = t.p.next_multiple_of(panel);
        (s, pp * t.k, operand(Role::A, t.k), Some(panel))
    } else {
        let a = Operand {
            arg: Role::A,
            off: 0,
            rs: 1,
            cs: t.p,
        };
        (t.a.0, t.a.1, a, None)
    };
    let mut spec = GemmSpec {
        m: t.p,
        n: ld,
        k: t.k,
        batch: vec![[t.nb, a_batch, t.b.1, p16 * ld, 0]],
        a,
        a_panel,
        b_panel: Some(NR),
        b: operand(Role::B, ld),
        c: operand(Role::Out, ld),
        alpha: 1.0,
        bias: t.bias.map(|_| Bias {
            at: operand(Role::Bias, 0),
            kind: BiasKind::Col,
            scale: 1.0,
        }),
        residual: None,
        act: t.act,
        transpose_out: None,
        row_groups: None,
    };
    let work = spec.macs();
    let epilogue = TransposeOut {
        p: t.p,
        m: t.m,
        ld,
        residual: t.residual.is_some(),
        act: t.out_act,
    };
    let fused = crate::codegen::machine_code::fuses_transpose(&spec);
    // Fused, a unit starting inside a block of 16 rows reads up to 15 rows past the last batch's P16.
    let ct = cx.scratch((t.nb * p16 + if fused { 16 } else { 0 }) * ld * 4);
    let mut args = vec![(Role::A, a_buf), (Role::B, t.b.0)];
    if let Some(bias) = t.bias {
        args.push((Role::Bias, bias));
    }
    if fused {
        spec.c.arg = Role::Scratch;
        spec.transpose_out = Some(epilogue);
        args.push((Role::Scratch, ct));
        if let Some(r) = t.residual {
            args.push((Role::Residual, r));
        }
        args.push((Role::Out, t.out));
        cx.push(n, Some(names.0), &args, Body::Gemm(spec), work);
        return;
    }
    args.push((Role::Out, ct));
    cx.push(n, Some(names.0), &args, Body::Gemm(spec), work);
    let mut args = vec![(Role::X, ct)];
    if let Some(r) = t.residual {
        args.push((Role::Residual, r));
    }
    args.push((Role::Out, t.out));
    let body = Body::TransposeOut {
        n: t.nb,
        t: epilogue,
    };
    cx.push(n, names.1, &args, body, t.nb * t.m * t.p);
}
