//! Depthwise convolution kernels' geometry: f32 (row kernels and the 16-channel block kernel, with its output
//! layouts) and int8.

use super::conv::reach;
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

/// Geometry and quantisation of an int8 depthwise convolution: args x, w (i8 `[C][KH·KW]`, or with `vnni` the
/// quads of [`pack_vnni`]), bias (i32 `[C]`), [scale (f32 `[C]`)], out.
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
    /// The AVX-512 set runs the VNNI row kernel (`x86/qdepthwise_vnni.rs`): weights and bias packed by
    /// [`pack_vnni`]. Set by the lowering where [`QDepthwiseSpec::vnni_fits`] holds.
    pub vnni: bool,
}

/// Largest zero-point-padded plane (bytes) the int8 row kernels' path keeps on a task's stack.
pub const Q_PLANE_LIMIT: usize = 64 << 10;

/// Outputs per group of the VNNI row kernel (one zmm of i32 sums).
pub const VNNI_GROUP: usize = 16;

impl QDepthwiseSpec {
    /// The `[rows, cols]` of the zero-point-padded plane the row-kernel path copies each input plane into: every
    /// tap of every output inside it, and room for the whole input at `[top, left]`.
    pub fn padded(&self) -> [usize; 2] {
        let ([h, w], [kh, kw], [oh, ow]) = (self.hw, self.kernel, self.out);
        [
            reach(oh, kh, self.strides[0], self.dilations[0]).max(self.pads[0] + h),
            reach(ow, kw, self.strides[1], self.dilations[1]).max(self.pads[1] + w),
        ]
    }

    /// Whether the padded plane fits [`Q_PLANE_LIMIT`].
    pub fn plane_fits(&self) -> bool {
        let [rows, cols] = self.padded();
        rows.checked_mul(cols).is_some_and(|b| b <= Q_PLANE_LIMIT)
    }

    /// Output rows per band of the row-kernel path: all of them when the padded plane fits
    /// [`Q_PLANE_LIMIT`], else the most whose input rows (`reach` of them) fit it as one band; `None` when not
    /// even one output row's do.
    pub fn band(&self) -> Option<usize> {
        if self.plane_fits() {
            return Some(self.out[0]);
        }
        let [_, cols] = self.padded();
        let fits = |bo: usize| {
            reach(bo, self.kernel[0], self.strides[0], self.dilations[0])
                .checked_mul(cols)
                .is_some_and(|b| b <= Q_PLANE_LIMIT)
        };
        (fits(1)).then(|| {
            let (mut lo, mut hi) = (1, self.out[0]);
            while lo < hi {
                let mid = (lo + hi).div_ceil(2);
                if fits(mid) {
                    lo = mid;
                } else {
                    hi = mid - 1;
                }
            }
            lo
        })
    }

    /// Whether the VNNI row kernel takes this convolution: requantised output, at most `MAX_TAPS` taps, a plane
    /// that fits in bands ([`QDepthwiseSpec::band`]), and a horizontal stride and dilation whose 16 outputs' four-tap windows lie in one 64-byte
    /// load (`15·s + 3·d < 64`, stride 1 to 4).
    pub fn vnni_fits(&self) -> bool {
        let (s, d) = (self.strides[1], self.dilations[1]);
        let window = (VNNI_GROUP - 1)
            .checked_mul(s)
            .and_then(|v| v.checked_add(d.checked_mul(3)?))
            .is_some_and(|v| v < 64);
        self.requant.is_some()
            && (1..=4).contains(&s)
            && d >= 1
            && window
            && self.kernel[0] * self.kernel[1] <= crate::kernel::depthwise::Q_MAX_TAPS
            && self.band().is_some()
    }

    /// Bytes of one channel's weights: `KH·KW` taps, or with `vnni` `KH` rows of quads.
    pub fn w_stride(&self) -> usize {
        let [kh, kw] = self.kernel;
        if self.vnni {
            kh * vnni_quads(kw) * 4
        } else {
            kh * kw
        }
    }
}

/// Most taps of the int8 depthwise row kernels (15x15).
pub const Q_MAX_TAPS: usize = 225;

/// Quads of taps per kernel row of the VNNI row kernel.
pub fn vnni_quads(kw: usize) -> usize {
    kw.div_ceil(4)
}

/// The VNNI row kernel's weights and bias: for `c` channels of `kh x kw` taps (`w` in `[c][kh][kw]` order, i8
/// values), `[c][kh][quads][4]` bytes (zero past `kw`), and the bias with the input zero point folded in,
/// `bias - zp · Σw` (`zp` plus 128 for i8 inputs, which the kernel flips to u8), so that the kernel multiplies
/// the raw bytes.
pub fn pack_vnni(w: &[i64], bias: &[i64], [kh, kw]: [usize; 2], zp: i64) -> (Vec<i64>, Vec<i64>) {
    let nq = vnni_quads(kw);
    let taps = kh * kw;
    let mut bytes = Vec::with_capacity(bias.len() * kh * nq * 4);
    let mut folded = Vec::with_capacity(bias.len());
    for (ch, &b) in bias.iter().enumerate() {
        let t = &w[ch * taps..(ch + 1) * taps];
        for ky in 0..kh {
            bytes.extend((0..nq * 4).map(|q| if q < kw { t[ky * kw + q] } else { 0 }));
        }
        folded.push(b - zp * t.iter().sum::<i64>());
    }
    (bytes, folded)
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

/// The compile-time shape of a row kernel.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DwRowF32 {
    /// Kernel (KH, KW).
    pub kernel: [usize; 2],
    /// Dilations.
    pub dilations: [usize; 2],
    /// Input row width in elements.
    pub w: usize,
    /// Stride along the row: 1 or 2.
    pub stride: usize,
    /// Whether `bias` points to the channel's bias (else the chain starts at +0.0).
    pub bias: bool,
    /// Lower clamp (f32 bits).
    pub lo: Option<u32>,
    /// Upper clamp (f32 bits).
    pub hi: Option<u32>,
    /// Max pooling instead: each output is the maximum of its window (`w` and `bias` unused, no clamp),
    /// starting from −∞, with Cranelift's `fmax` semantics (NaN propagates, +0 > −0).
    pub max: bool,
    /// Several output rows per call: a 6th argument `rows` (u64), and `[x, out]`, the floats `x` and `out`
    /// advance by from one output row to the next (the per-call setup — bias, bounds, taps — is done once).
    /// `None`: one row, five arguments.
    pub rows: Option<[usize; 2]>,
    /// Rows mode: the output count every call passes (the 5th argument), known at compile time. Each row is
    /// then a fixed sequence of steps under compile-time masks, its first vector's left padding and last
    /// vector's tail and right padding included, so a row of up to four vectors is one step (eight
    /// accumulators over the rows of `row_group`) instead of a first vector, a loop and a tail, each a few
    /// chains long. Rows longer than 256 outputs still loop.
    pub count: Option<usize>,
    /// Stride 2 on rows stored as their even columns, then their odd ones `split` floats further (a padded
    /// plane loaded that way, `ops/depthwise.rs`): each tap's inputs are then contiguous in the half of its
    /// column's parity, and the kernel loads them as at stride 1 — no `vpermt2ps` (AVX-512) or shuffles (AVX2)
    /// and half the loads. Dilation 1 only; `w` is the whole row (both halves).
    pub split: Option<usize>,
    /// Padding columns left of the row (AVX-512: 0..16; not with `max` or `split`): `x` points that many
    /// columns before the row, and the row's first vector of outputs (its masked tail when `count < 16`) loads
    /// each tap with the lanes left of the row masked to +0, as the border path's zeroed taps — so a row whose
    /// only border is on the left runs whole in the kernel. AVX2 takes left and right padding in rows mode with
    /// a static count (`depthwise_avx2_edge.rs`, every row laid out at compile time).
    pub left: usize,
    /// A row whose last outputs reach past its `w` inputs (not with `max` or `split`): the static
    /// output count of every call. Those outputs must all be in the row's last step — the masked tail, or the
    /// last vector, peeled off the loop, when the count is a multiple of 16 — which loads each tap with its
    /// lanes past the row masked to +0.
    pub right: Option<usize>,
}

impl DwRowF32 {
    /// With `right`: whether every output that reaches past the row is in the tail step (so no unmasked step
    /// reads past it), and the first vector is not the tail when there is left padding.
    pub fn right_fits(&self) -> bool {
        let Some(count) = self.right else {
            return true;
        };
        let rem = Self::last_lanes(count);
        let span = (self.kernel[1] - 1) * self.dilations[1];
        // Output o reads up to column o·st + span − left: inside while that is below w.
        let first_out = (self.w + self.left)
            .saturating_sub(span)
            .div_ceil(self.stride);
        let tail_ok = count >= rem && first_out >= count - rem;
        // A row of exactly 16 with left padding would take its first vector twice (`Part::First`, the peel).
        tail_ok && !(self.left > 0 && count == 16) && !self.max && self.split.is_none()
    }

    /// Outputs in a row's last step: the masked tail's, or a whole last vector when the count is a multiple of
    /// 16 (with `right` such a row's last vector is peeled off the loop).
    pub fn last_lanes(count: usize) -> usize {
        match count % 16 {
            0 => 16,
            r => r,
        }
    }

    /// The tail step's load masks `[first, second]` (the second half at stride 2) for the tap at column offset
    /// `kc`, with `right`'s lanes past the row cleared; `None` without `right`.
    /// `[None, None]` where a half's mask is the step's usual one (the tap does not reach past the row there).
    pub fn right_masks(&self, kc: usize) -> Option<[Option<u32>; 2]> {
        let count = self.right?;
        let (st, rem) = (self.stride, Self::last_lanes(count));
        let first = (count - rem) * st + kc;
        let needed = |j: usize| if st == 2 { j <= (rem - 1) * 2 } else { j < rem };
        let inside = |j: usize| {
            (first + j)
                .checked_sub(self.left)
                .is_some_and(|c| c < self.w)
        };
        let bits = |base: usize, lane: &dyn Fn(usize) -> bool| {
            (0..16)
                .filter(|&j| lane(base + j))
                .fold(0u32, |m, j| m | 1 << j)
        };
        let own = |base: usize| {
            let mask = bits(base, &|j| needed(j) && inside(j));
            Some(mask).filter(|&m| m != bits(base, &needed))
        };
        Some([own(0), own(16)])
    }

    /// The stride the kernel's loads walk the row at: 1 on split rows.
    pub(crate) fn load_stride(&self) -> usize {
        if self.split.is_some() {
            1
        } else {
            self.stride
        }
    }
}
