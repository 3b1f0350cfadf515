//! Channel-blocked activations between transposed convolution GEMMs: a tensor whose producer is a transposed GEMM
//! (`transposed.rs`) and whose every reader is a 1x1 convolution computed transposed — as its A (an inverted
//! residual's expansion, a bottleneck's first 1x1 layer) or as the residual its epilogue adds (the next
//! projection, the next bottleneck's last 1x1 layer) — or a channel-blocked depthwise convolution (an
//! expansion's reader, `DwC16::in_blocked`) is kept as the blocks `[N, ld/16, P, 16]` the GEMM
//! computes (`GemmSpec::c_k16`): the producer skips its transposing epilogue, the readers their pack of A
//! (`GemmSpec::a_k16`) and the residual is added in the micro-kernels' epilogue (`GemmSpec::res_k16`): each
//! element of those layers takes the same operations in the same order, bitwise the same. A strided 1x1
//! convolution (a downsample, through `strided_columns`) and a GlobalAveragePool (a network's head,
//! `Body::GlobalAvg::blocked`, summing each channel in pixel order, within rounding of the planes path's
//! sums) read blocks too.
//!
//! Under `--precision bf16` a convolution computed transposed by the bf16 GEMM (`bf16.rs`) stores the blocks
//! itself, decided when it is lowered ([`keeps_blocks`]); its readers are then depthwise kernels or a
//! GlobalAveragePool (the bf16 GEMMs read planes).
//!
//! The decision is made when the first reader is lowered (the producer then already is): [`accepts`] checks,
//! from the graph, that every reader will be lowered that way, with the same conditions `lower_conv` and
//! `push_transposed` apply; a reader that then cannot take the blocks fails with an internal error rather than
//! read them as planes.

use super::super::ctx::Ctx;
use super::rules::{transposed_wins, NR};
use crate::ir::{numel, Activation, ConvAttrs, NodeId, Op, TensorId};
use crate::kernel::gemm::{clamp_bits, Operand};
use crate::kernel::{Body, Buf, Role};
use crate::x86::gemm_fit::fuses_transpose;

/// Fewest pixels of a plane kept in blocks: the tallest micro-kernel tile, so that the GEMMs' micro-kernels
/// cover every row (`x86::gemm_fit::fuses_transpose`).
const MIN_PIXELS: usize = 14;

/// Whether a convolution is 1x1, unpadded, undilated and of one group (any stride).
fn pointwise(a: &ConvAttrs) -> bool {
    a.kernel == [1, 1] && a.dilations == [1, 1] && a.pads == [0; 4] && a.group == 1
}

/// Whether node `n` reads `x` (of `c` channels on planes of `p` pixels) in a way that takes blocks: a
/// GlobalAveragePool; a depthwise convolution the channel-blocked kernel computes; at batch 1, a [`pointwise`]
/// convolution with constant weights and a clamp that `lower_conv` computes transposed, reading `x` once as its
/// input (a strided one through [`strided_columns`]) or, stride 1, as its residual.
fn reads_blocks(cx: &Ctx, n: NodeId, x: TensorId, c: usize, p: usize) -> bool {
    let node = &cx.g.nodes[n];
    if node.op == Op::GlobalAveragePool {
        // Averaged as blocks (`Body::GlobalAvg::blocked`).
        return node.inputs == [x];
    }
    let Op::Conv(a) = &node.op else {
        return false;
    };
    let ins = &node.inputs;
    let xs = cx.shape(x);
    if a.group == c && a.group > 1 {
        // A depthwise convolution computed by the channel-blocked kernel (`lower_conv`), which copies the
        // blocks into its padded block (`DwC16::in_blocked`).
        let os = cx.shape(node.outputs[0]);
        let m = cx.g.constant(ins[1]).map_or(0, |w| w.shape[0]);
        let spec = super::rules::depthwise_spec(a, &xs, &os);
        return ins[0] == x
            && m == c
            && !a.epilogue.residual
            && cx.opts.avx512
            && super::rules::c16_pays(&cx.opts, &spec)
            && crate::x86::depthwise_c16_x86::c16(&spec).is_some();
    }
    // The GEMMs read blocks at batch 1 only.
    if xs[0] != 1 {
        return false;
    }
    // A strided one (a downsample) takes its columns from the blocks (`strided_columns`) and computes on its
    // output's pixels.
    let strided = a.strides != [1, 1];
    let os = cx.shape(node.outputs[0]);
    let p = if strided { numel(&os[2..]) } else { p };
    let Some(w) = cx.g.constant(ins[1]) else {
        return false;
    };
    let m = w.shape.first().copied().unwrap_or(0);
    let bias_pads = m.is_multiple_of(NR) || !a.has_bias || cx.g.constant(ins[2]).is_some();
    let once = ins.iter().filter(|&&i| i == x).count() == 1;
    let as_input = ins[0] == x;
    let as_residual = a.epilogue.residual && ins.last() == Some(&x) && m == c && !strided;
    // Under `--precision bf16` such a convolution is the bf16 GEMM (`bf16.rs`), which reads planes.
    pointwise(a)
        && !cx.opts.bf16
        && p >= MIN_PIXELS
        && once
        && (as_input || as_residual)
        && cx.opts.avx512
        && transposed_wins(m, p)
        && bias_pads
        && clamp_bits(a.epilogue.act).is_some()
}

/// The columns of a strided 1x1 convolution (`n`, one group, batch 1) whose input is kept in blocks, or may be
/// (`blocks`): a `Body::SubsampleBlocks` kernel copies the pixels it reads, as blocks, into a scratch buffer it
/// returns with its size per image in elements; the transposed GEMM reads them as A (`Transposed::a_blocked`).
pub(super) fn strided_columns(
    cx: &mut Ctx,
    n: NodeId,
    a: &ConvAttrs,
    xs: &[usize],
    os: &[usize],
) -> Option<(Buf, usize)> {
    let shape = pointwise(a)
        && a.strides != [1, 1]
        && xs.len() == 4
        && xs[0] == 1
        && xs[1].is_multiple_of(16);
    if !shape {
        return None;
    }
    let x = cx.g.nodes[n].inputs[0];
    let (xb, _) = blocks(cx, x, xs[1], xs[2] * xs[3])?;
    let (c, p) = (xs[1], os[2] * os[3]);
    let cols = cx.scratch(c * p * 4);
    let body = Body::SubsampleBlocks {
        c,
        hw: [xs[2], xs[3]],
        strides: a.strides,
        out: [os[2], os[3]],
    };
    cx.push(
        n,
        Some("subsample"),
        &[(Role::X, xb), (Role::Out, cols)],
        body,
        c * p,
    );
    Some((cols, c * p))
}

/// Whether `x` (`c` channels on planes of `p` pixels) may be kept as blocks for its readers ([`accepts`]):
/// asked by [`blocks`] and by a bf16 convolution computed transposed, which then stores the blocks itself and
/// records them in `Ctx::blocked`.
pub(super) fn keeps_blocks(cx: &Ctx, x: TensorId, c: usize, p: usize) -> bool {
    !cx.opts.keep_tensors && p >= MIN_PIXELS && accepts(cx, x, c, p)
}

/// Whether every reader of `x` takes it in blocks (`reads_blocks`) and no graph output is `x`.
fn accepts(cx: &Ctx, x: TensorId, c: usize, p: usize) -> bool {
    let readers = cx.uses.consumers(x);
    !cx.g.outputs.contains(&x)
        && !readers.is_empty()
        && readers.iter().all(|&n| reads_blocks(cx, n, x, c, p))
}

/// The blocks `(buffer, ld)` holding tensor `x` (`c` channels on planes of `p` pixels): already made, or made now
/// by turning its producer — a transposed GEMM that transposes into `x` with nothing added there — into one
/// that stores its blocks, when every reader takes them ([`accepts`]). `None`: `x` stays planes.
pub(super) fn blocks(cx: &mut Ctx, x: TensorId, c: usize, p: usize) -> Option<(Buf, usize)> {
    if let Some(&b) = cx.blocked.get(&x) {
        return Some(b);
    }
    if !keeps_blocks(cx, x, c, p) {
        return None;
    }
    let id = (cx.out.kernels.iter())
        .find(|(_, k)| k.out() == Some(Buf::Tensor(x)))?
        .0;
    let Body::Gemm(s) = &cx.out.kernels[id].body else {
        return None;
    };
    let t = s.transpose_out?;
    let geometry = (t.p, t.m, s.batch.len()) == (p, c, 1);
    if t.residual || t.act != Activation::None || !geometry {
        return None;
    }
    // Past batch 1 only depthwise kernels read blocks (`reads_blocks`), images `C·P` floats apart.
    let nb = s.batch[0][0];
    if nb > 1 && t.ld != c {
        return None;
    }
    let mut spec = s.clone();
    spec.transpose_out = None;
    spec.c = Operand::blocks(Role::Out, p);
    spec.c_k16 = true;
    spec.batch[0][3] = t.ld * p;
    let fused = crate::kernel::gemm::fused_epilogue(&spec).is_some();
    let nothing = spec.bias.is_none() && spec.residual.is_none() && spec.act == Activation::None;
    if !fuses_transpose(&spec) || !(fused || nothing) {
        return None;
    }
    let buf = cx.scratch(nb * t.ld * p * 4);
    let k = &mut cx.out.kernels[id];
    k.body = Body::Gemm(spec);
    k.args.retain(|a| a.role != Role::Scratch);
    for a in k.args.iter_mut().filter(|a| a.role == Role::Out) {
        a.buf = buf;
    }
    cx.blocked.insert(x, (buf, t.ld));
    Some((buf, t.ld))
}
