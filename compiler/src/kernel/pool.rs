//! Pooling kernels' geometry, and the 3x3 stride-2 max pooling that has a machine-code kernel.

use super::conv::reach;
use crate::ir::{DType, PoolAttrs, PoolKind};

/// A pooling kernel's geometry.
#[derive(Debug, Clone, PartialEq)]
pub struct PoolSpec {
    /// Max or average.
    pub kind: PoolKind,
    /// Attributes (kernel, strides, pads, dilations, count_include_pad).
    pub attrs: PoolAttrs,
    /// N * C.
    pub planes: usize,
    /// Input (H, W).
    pub hw: [usize; 2],
    /// Output (OH, OW).
    pub out: [usize; 2],
    /// Element type: f32, or u8 / i8 for an integer max pooling (`codegen/ops/qpool.rs`).
    pub dtype: DType,
}

impl PoolSpec {
    /// The separable kernel's shape (`x86/maxpool_x86.rs`) for a 3x3, stride-2, undilated max pooling with
    /// a one-pixel top and left pad (ResNet's), which it runs with no padded copy.
    pub fn max3s2(&self) -> Option<MaxPool3s2> {
        let a = &self.attrs;
        let fits = self.kind == PoolKind::Max
            && self.dtype == DType::F32
            && a.kernel == [3, 3]
            && a.strides == [2, 2]
            && a.dilations == [1, 1]
            && a.pads[0] == 1
            && a.pads[1] == 1
            && self.hw[0] * self.hw[1] * self.out[0] * self.out[1] > 0;
        fits.then_some(MaxPool3s2 {
            hw: self.hw,
            out: self.out,
        })
    }
    /// The `[rows, cols]` of the −∞-padded stack plane a padded max pooling runs its row kernel over, when it
    /// fits on the stack: every window of every output inside it, rows a multiple of 16 floats.
    pub fn padded_plane(&self) -> Option<[usize; 2]> {
        let a = &self.attrs;
        if self.kind != PoolKind::Max || self.dtype != DType::F32 || a.pads.iter().all(|&p| p == 0)
        {
            return None;
        }
        let [h, w] = self.hw;
        let dim = |i: usize, size: usize| {
            let r = reach(self.out[i], a.kernel[i], a.strides[i], a.dilations[i]);
            r.max(a.pads[i] + size + a.pads[i + 2])
        };
        let plane = [dim(0, h), dim(1, w).next_multiple_of(16)];
        (plane[0] * plane[1] * 4 <= MAX_PLANE_BYTES).then_some(plane)
    }
}

/// The compile-time shape of a 3x3, stride-2, top- and left-padded max pooling.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct MaxPool3s2 {
    /// Input height and width.
    pub hw: [usize; 2],
    /// Output height and width.
    pub out: [usize; 2],
}

impl MaxPool3s2 {
    /// The input rows output row `oy` reads (rows `2·oy − 1 .. 2·oy + 1` inside the plane), as offsets in
    /// rows from row `2·oy − 1`.
    pub fn rows(&self, oy: usize) -> Vec<usize> {
        (0..3)
            .filter(|&k| (1..=self.hw[0]).contains(&(2 * oy + k)))
            .collect()
    }
}

/// Largest padded plane (bytes) a padded max pooling keeps on the stack.
const MAX_PLANE_BYTES: usize = 256 << 10;
