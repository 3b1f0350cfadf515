//! NPU lowering of the CNN family's pooling (`ir/ops/cnn.rs`): MaxPool / AveragePool (no ceil mode) as blocks of
//! full-width output rows over the input slab their windows touch, and GlobalAveragePool.

use super::super::{
    a64, best, budget, first_fit, local_memory, outside, sizes, ArgKind, Elem, Gen, OpProgram,
    Reject, PARAM_AREA,
};
use super::Rows;
use crate::npu::target::NpuTarget;
use crate::npu::txn::{Kernel, Xrt};

/// Pooling kind on the NPU.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PoolMode {
    /// Maximum.
    Max,
    /// Average dividing by the full window.
    AvgIncludePad,
    /// Average over valid positions.
    AvgExcludePad,
}

/// MaxPool / AveragePool (no ceil mode). ONNX args: 0 x, output 0 y.
#[derive(Debug, Clone, PartialEq)]
pub struct PoolOp {
    /// Activation type.
    pub elem: Elem,
    /// Kind.
    pub mode: PoolMode,
    /// Input n, c, h, w.
    pub x: [usize; 4],
    /// Window.
    pub kernel: [usize; 2],
    /// Strides.
    pub strides: [usize; 2],
    /// Pads top, left, bottom, right.
    pub pads: [usize; 4],
    /// Dilations.
    pub dilations: [usize; 2],
    /// Output h, w.
    pub out: [usize; 2],
}

impl PoolOp {
    fn rows(&self) -> Rows {
        Rows {
            h: self.x[2],
            kernel: self.kernel[0],
            stride: self.strides[0],
            pad_top: self.pads[0],
            dilation: self.dilations[0],
        }
    }
    fn in_rows(&self, ohb: usize) -> usize {
        self.rows().max_slab(ohb)
    }
    /// Compiles the pool.
    pub fn program(&self, t: &NpuTarget) -> Result<OpProgram, Reject> {
        let e = self.elem.size();
        let [n, c, _, w] = self.x;
        let [oh, ow] = self.out;
        let bytes =
            |cb: usize, ohb: usize| a64(cb * self.in_rows(ohb) * w * e) + a64(cb * ohb * ow * e);
        let mut cands = Vec::new();
        for &cb in &sizes(c, 512) {
            for &ohb in &sizes(oh, 64) {
                let items = c.div_ceil(cb) * oh.div_ceil(ohb);
                let traffic = c * oh.div_ceil(ohb) * self.in_rows(ohb) * w * e;
                let macs = (n * c * oh * ow * self.kernel[0] * self.kernel[1]) as u64;
                let par = n * c.div_ceil(cb) * oh.div_ceil(ohb);
                cands.push((
                    (cb, ohb),
                    bytes(cb, ohb),
                    super::super::est(t, self.elem, traffic, macs, par, items),
                ));
            }
        }
        let none = || {
            format!(
                "working set exceeds the tile's local memory: required {} B, available {} B",
                bytes(1, 1) + PARAM_AREA as usize,
                t.local_memory_bytes
            )
        };
        first_fit(cands, budget(t), none, |b| self.tiled(t, b))
    }

    /// Compiles the pool with tiling (cb, ohb).
    fn tiled(&self, t: &NpuTarget, (cb, ohb): (usize, usize)) -> Result<OpProgram, Reject> {
        let mut g = Gen::new(t);
        let e = self.elem.size();
        let [n, c, h, w] = self.x;
        let [oh, ow] = self.out;
        g.arg(ArgKind::Input, Xrt::In, 0, 0, (n * c * h * w * e) as u64);
        g.arg(
            ArgKind::Output,
            Xrt::Out,
            0,
            0,
            (n * c * oh * ow * e) as u64,
        );
        let slab = PARAM_AREA as usize;
        let outl = slab + a64(cb * self.in_rows(ohb) * w * e);
        let rows = self.rows();
        let kind = match self.mode {
            PoolMode::Max => 0,
            PoolMode::AvgIncludePad => 1,
            PoolMode::AvgExcludePad => 2,
        };
        for ni in 0..n {
            for c0 in (0..c).step_by(cb) {
                let cbs = cb.min(c - c0);
                for oh0 in (0..oh).step_by(ohb) {
                    let ohs = ohb.min(oh - oh0);
                    let (ih0, in_rows, row0) = rows.slab(oh0, ohs).map_err(outside)?;
                    let tile = g.tile();
                    let row = in_rows * w * e;
                    g.dma(
                        tile,
                        false,
                        Xrt::In,
                        ((ni * c + c0) * h + ih0) * w * e,
                        slab,
                        row,
                        cbs,
                        h * w * e,
                        row,
                    );
                    let words = [
                        self.elem.code(),
                        kind,
                        slab as u32,
                        outl as u32,
                        cbs as u32,
                        in_rows as u32,
                        w as u32,
                        ohs as u32,
                        ow as u32,
                        self.kernel[0] as u32,
                        self.kernel[1] as u32,
                        self.strides[0] as u32,
                        self.strides[1] as u32,
                        row0 as u32,
                        (self.pads[1] as i32).wrapping_neg() as u32,
                        self.dilations[0] as u32,
                        self.dilations[1] as u32,
                    ];
                    let work = (cbs * ohs * ow * self.kernel[0] * self.kernel[1]) as u64;
                    g.compute(tile, Kernel::Pool, 0, &words, work, self.elem);
                    let blk = ohs * ow * e;
                    g.dma(
                        tile,
                        true,
                        Xrt::Out,
                        ((ni * c + c0) * oh + oh0) * ow * e,
                        outl,
                        blk,
                        cbs,
                        oh * ow * e,
                        blk,
                    );
                    g.sync(tile);
                }
            }
        }
        g.finish()
    }
}

/// GlobalAveragePool: `[n, c, h, w]` → `[n, c, 1, 1]`.
#[derive(Debug, Clone, PartialEq)]
pub struct GapOp {
    /// Activation type.
    pub elem: Elem,
    /// Planes (n * c).
    pub planes: usize,
    /// Elements per plane.
    pub size: usize,
}

impl GapOp {
    /// Compiles the global pool.
    pub fn program(&self, t: &NpuTarget) -> Result<OpProgram, Reject> {
        let mut g = Gen::new(t);
        let e = self.elem.size();
        let bytes = |cb: usize| a64(cb * self.size * e) + a64(cb * e);
        let cands = sizes(self.planes, 4096)
            .into_iter()
            .map(|cb| (cb, bytes(cb), self.planes.div_ceil(cb) as u64));
        let cb = best(cands, g.budget()).ok_or_else(|| {
            format!(
                "one channel plane exceeds the tile's local memory: required {} B, available {} B, excess {} B",
                bytes(1) + PARAM_AREA as usize,
                t.local_memory_bytes,
                (bytes(1) + PARAM_AREA as usize).saturating_sub(t.local_memory_bytes as usize)
            )
        })
        .map_err(local_memory)?;
        g.arg(
            ArgKind::Input,
            Xrt::In,
            0,
            0,
            (self.planes * self.size * e) as u64,
        );
        g.arg(ArgKind::Output, Xrt::Out, 0, 0, (self.planes * e) as u64);
        let inl = PARAM_AREA as usize;
        let outl = inl + a64(cb * self.size * e);
        for p0 in (0..self.planes).step_by(cb) {
            let cbs = cb.min(self.planes - p0);
            let tile = g.tile();
            let b = cbs * self.size * e;
            g.dma(tile, false, Xrt::In, p0 * self.size * e, inl, b, 1, b, b);
            let words = [
                self.elem.code(),
                0,
                inl as u32,
                outl as u32,
                cbs as u32,
                self.size as u32,
            ];
            g.compute(
                tile,
                Kernel::Gap,
                0,
                &words,
                (cbs * self.size) as u64,
                self.elem,
            );
            g.dma(
                tile,
                true,
                Xrt::Out,
                p0 * e,
                outl,
                cbs * e,
                1,
                cbs * e,
                cbs * e,
            );
            g.sync(tile);
        }
        g.finish()
    }
}
