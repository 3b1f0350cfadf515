//! The direct convolution kernel's lowering (`x86/conv_direct/`): stems
//! of a few input channels (AVX2 and AVX-512 targets) and strided convolutions that fill its 16-pixel blocks
//! (AVX-512), instead of im2col and a GEMM.

use super::super::ctx::Ctx;
use crate::error::Result;
use crate::ir::{numel, ConvAttrs, NodeId, Tensor};
use crate::kernel::conv::{ConvDirect, Im2colSpec};
use crate::kernel::{Body, Buf, Role};
use crate::x86::pack16;

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

/// The direct kernel's shape (`x86/conv_direct/`) for a one-group convolution of an input with at most
/// `DIRECT_MAX_CHANNELS` channels (a stem, on targets with micro-kernels), or a strided one that fills its pixel
/// blocks (`strided_direct`, AVX-512 targets), M a multiple of 16, no residual, a clamp for an activation. There im2col writes a column matrix C·KH·KW / (stride²) times the input (ResNet-50's 7x7
/// stride-2 stem: 7.4 MB) that the GEMM streams back; the direct kernel reads the zero-padded input instead.
pub(super) fn direct_spec(
    cx: &Ctx,
    a: &ConvAttrs,
    xs: &[usize],
    os: &[usize],
    m: usize,
) -> Option<ConvDirect> {
    let (lo, hi) = crate::kernel::gemm::clamp_bits(a.epilogue.act)?;
    let pointwise = a.kernel == [1, 1] && a.strides == [1, 1] && a.pads == [0; 4];
    // Stems on either kernel set (`x86/conv_direct/avx2.rs` on AVX2); strided convolutions of more channels on
    // AVX-512 only (measured there, with 16-pixel blocks).
    let stem = cx.opts.micro_kernels && (1..=DIRECT_MAX_CHANNELS).contains(&xs[1]);
    let ok = a.group == 1
        && !pointwise
        && !a.epilogue.residual
        && m.is_multiple_of(16)
        && (stem || (cx.opts.avx512 && strided_direct(a, os[3])))
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
    (ok && crate::x86::conv_direct::check(&spec).is_ok()).then_some(spec)
}

/// A convolution by the direct kernel (`Body::ConvDirect`): the input zero-padded into scratch by an im2col
/// kernel of a 1x1 window (unless it is read in place), the weights packed `[M/16, C·KH·KW, 16]` (`pack16`).
/// `xs` is the input's shape, `pads` the convolution's.
pub(super) fn lower_direct(
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
