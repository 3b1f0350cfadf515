//! Depthwise convolution kernels' geometry: f32 (row kernels and the 16-channel block kernel, with its output
//! layouts) and int8.

use crate::ir::{Activation, DType};

/// Geometry of a depthwise convolution: x [N, C, H, W], w [C, 1, KH, KW], optional bias \[C\].
#[derive(Debug, Clone, PartialEq)]
pub struct DepthwiseSpec {
    /// Batch.
    pub n: usize,
    /// Channels.
    pub c: usize,
    /// Input height and width.
    pub hw: [usize; 2],
    /// Kernel (KH, KW).
    pub kernel: [usize; 2],
    /// Strides.
    pub strides: [usize; 2],
    /// Dilations.
    pub dilations: [usize; 2],
    /// Pads top, left.
    pub pads: [usize; 2],
    /// Output height and width.
    pub out: [usize; 2],
    /// Whether arg 2 is a bias (the output is then arg 3, else arg 2).
    pub has_bias: bool,
    /// Fused activation.
    pub act: Activation,
    /// How the channel-blocked kernel (`Body::DepthwiseC16`) lays out its output: planes, or for the transposed
    /// GEMM that is its only reader the row panels `Body::PackRows` would pack (`[N, P8/8, C, 8]`,
    /// `C16Out::Panels(C)`) or the blocks it computes (`[N, C/16, P, 16]`, `C16Out::Blocked`, read with
    /// `GemmSpec::a_k16`).
    pub out_layout: C16Out,
    /// The channel-blocked kernel reads its input as the blocks `[N, C/16, H·W, 16]` that the transposed GEMM
    /// before it wrote (`GemmSpec::c_k16`), not as planes.
    pub in_blocked: bool,
}

/// Geometry and quantisation of an int8 depthwise convolution: args x, w (i8 `[C][KH·KW]`), bias (i32 `[C]`),
/// [scale (f32 `[C]`)], out.
#[derive(Debug, Clone, PartialEq)]
pub struct QDepthwiseSpec {
    /// Batch.
    pub n: usize,
    /// Channels.
    pub c: usize,
    /// Input height and width.
    pub hw: [usize; 2],
    /// Kernel (KH, KW).
    pub kernel: [usize; 2],
    /// Strides.
    pub strides: [usize; 2],
    /// Dilations.
    pub dilations: [usize; 2],
    /// Pads top, left.
    pub pads: [usize; 2],
    /// Output height and width.
    pub out: [usize; 2],
    /// Input dtype (u8 or i8) and zero point.
    pub x: (DType, i32),
    /// Output dtype (u8, i8, or i32 for raw sums).
    pub y: DType,
    /// Requantisation: output zero point and clamp (scale is arg 3); None for raw sums.
    pub requant: Option<(i32, (i32, i32))>,
}

/// Where the channel-blocked kernel writes its 16 channels' outputs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum C16Out {
    /// 16 planes `[16][P]` (NCHW).
    Planes,
    /// The group's first channel in row panels `[P8/8][C][8]` of `C` channels (a transposed GEMM's packed A,
    /// `Body::PackRows`' layout, the pixels past P zero).
    Panels(usize),
    /// The block `[P][16]` as computed (the GEMM reads it with `MicroSpec::a_k16`): no transpose.
    Blocked,
}
