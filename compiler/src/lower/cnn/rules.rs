//! The shape rules the convolution lowerings share: a convolution's depthwise spec, when the channel-blocked
//! depthwise kernel pays, and when a GEMM is computed transposed (pixels as rows) because its 32-column tiles
//! would waste too much of the last column block.

use super::super::ctx::LowerOpts;
use crate::ir::ConvAttrs;
use crate::kernel::depthwise::{C16Out, DepthwiseSpec};

/// The AVX-512 micro-kernel's tile columns: the transposed GEMM's column blocks and B panels.
pub const NR: usize = 32;

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
pub fn transposed_wins(m: usize, p: usize) -> bool {
    let ld = m.next_multiple_of(NR);
    m.is_multiple_of(16) && 5 * ld <= 6 * m && p.next_multiple_of(NR) * 10 > p * 11
}

/// The geometry of a depthwise convolution (group = C = M) of input shape `xs` and output shape `os`, its
/// output as planes.
pub fn depthwise_spec(a: &ConvAttrs, xs: &[usize], os: &[usize]) -> DepthwiseSpec {
    DepthwiseSpec {
        n: xs[0],
        c: xs[1],
        hw: [xs[2], xs[3]],
        kernel: a.kernel,
        strides: a.strides,
        dilations: a.dilations,
        pads: [a.pads[0], a.pads[1]],
        out: [os[2], os[3]],
        has_bias: a.has_bias,
        act: a.epilogue.act,
        out_layout: C16Out::Planes,
        in_blocked: false,
    }
}

/// Whether the channel-blocked depthwise kernel pays for `s` (which it takes, `c16`): on targets with machine-code
/// kernels, everywhere on AVX-512; on AVX2 (eight channels per `ymm`, two halves per call, each tap's weights
/// loaded per group of outputs) for output planes of at most [`AVX2_C16_MAX_OUT`] pixels. EfficientNet-Lite0
/// at `x86-64-v3` (AMD EPYC Zen 5, paired, bitwise equal): its 7x7 5x5 layers 77 → 44 µs at 1 thread (41 → 28 at 2), the 14x14 → 7x7 one 67 →
/// 40, the 7x7 3x3 one 36 → 22; MobileNetV2's 7x7 layers 29 → 15–19, its 14x14 → 7x7 one 37 → 14. Its 14x14
/// layers ran no faster than the row kernel at 1 thread and slower at 2.
pub fn c16_pays(opts: &LowerOpts, s: &DepthwiseSpec) -> bool {
    opts.micro_kernels && (opts.avx512 || s.out[0] * s.out[1] <= AVX2_C16_MAX_OUT)
}

/// The most output pixels of a depthwise convolution the AVX2 channel-blocked kernel takes (`c16_pays`).
const AVX2_C16_MAX_OUT: usize = 64;
