//! NPU lowering of the CNN family (`ir/ops/cnn.rs`): Conv (dense, grouped, depthwise; strides, dilations, every
//! padding) here, MaxPool / AveragePool and GlobalAveragePool in `pool.rs`. A conv output block is `mb` channels × `ohb` full-width
//! rows; its input slab is the valid image rows the block's windows touch, loaded `cb` channels at a time into
//! the tile and accumulated by CONV commands, then EPILOGUE adds bias and residual, applies the activation (or
//! requantises) and a DMA stores the block. Block sizes are chosen per layer from the shapes so that every
//! buffer fits the tile's local memory with the least DMA traffic; weights are formatted at compile time into
//! `[group][m-block][c-chunk]` blocks of `[mb][cb][kh][kw]`, so each chunk is one contiguous DMA.

use super::{
    a64, budget, first_fit, outside, sizes, ArgKind, Elem, EpilogueBlock, Gen, OpProgram, Reject,
    Requant, Weights, PARAM_AREA,
};
use crate::ir::Activation;
use crate::npu::target::NpuTarget;
use crate::npu::txn::{Kernel, Xrt};

mod pool;

pub use pool::{GapOp, PoolMode, PoolOp};

/// The vertical geometry of a sliding window (conv or pool) over an image of `h` rows.
struct Rows {
    h: usize,
    kernel: usize,
    stride: usize,
    pad_top: usize,
    dilation: usize,
}

impl Rows {
    /// Most slab rows an `ohb`-row output block reads.
    fn max_slab(&self, ohb: usize) -> usize {
        ((ohb - 1) * self.stride + (self.kernel - 1) * self.dilation + 1).min(self.h)
    }
    /// The valid image rows of output rows `oh0 .. oh0 + ohs`: first row, row count, and the slab row of output
    /// row 0's first tap (CONV/POOL word `row0`, negative inside the top padding).
    fn slab(&self, oh0: usize, ohs: usize) -> Result<(usize, usize, i32), String> {
        let (s, p, d) = (
            self.stride as i64,
            self.pad_top as i64,
            self.dilation as i64,
        );
        let lo = oh0 as i64 * s - p;
        let hi = (oh0 + ohs - 1) as i64 * s - p + (self.kernel as i64 - 1) * d + 1;
        let (ih0, ih1) = (lo.max(0), hi.min(self.h as i64));
        if ih1 <= ih0 {
            return Err(
                "an output row block sees only padding (pads exceed the window extent)".into(),
            );
        }
        Ok((ih0 as usize, (ih1 - ih0) as usize, (lo - ih0) as i32))
    }
}

/// A 2-D convolution. ONNX args: 0 x `[n,c,h,w]`, 1 w `[m,c/g,kh,kw]`, 2 bias `[m]`, 3 residual `[n,m,oh,ow]`.
#[derive(Debug, Clone, PartialEq)]
pub struct ConvOp {
    /// Activation type.
    pub elem: Elem,
    /// Input shape n, c, h, w.
    pub x: [usize; 4],
    /// Output channels.
    pub m: usize,
    /// Kernel size.
    pub kernel: [usize; 2],
    /// Strides.
    pub strides: [usize; 2],
    /// Pads: top, left, bottom, right.
    pub pads: [usize; 4],
    /// Dilations.
    pub dilations: [usize; 2],
    /// Groups.
    pub group: usize,
    /// Output height and width.
    pub out: [usize; 2],
    /// Weights `[m][c/g][kh][kw]`.
    pub weights: Weights,
    /// f32 bias per output channel (f32 ops; zeros when absent).
    pub bias: Vec<f32>,
    /// Residual input added before the activation (f32 only).
    pub residual: bool,
    /// Fused activation (f32; int8 folds it into the requantisation clamp).
    pub act: Activation,
    /// int8 requantisation.
    pub requant: Option<Requant>,
}

impl ConvOp {
    /// One input channel per output channel.
    pub fn depthwise(&self) -> bool {
        self.group > 1 && self.group == self.x[1] && self.m == self.x[1]
    }
    /// Multiply-accumulates.
    pub fn macs(&self) -> u64 {
        let [n, c, _, _] = self.x;
        (n * self.m
            * self.out[0]
            * self.out[1]
            * (c / self.group)
            * self.kernel[0]
            * self.kernel[1]) as u64
    }
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
    /// Local bytes of a block choice: (slab, weights, acc, bias+scale, residual, int8 out).
    fn layout(&self, mb: usize, cb: usize, ohb: usize) -> [usize; 6] {
        let e = self.elem.size();
        let [_, _, _, w] = self.x;
        let k = self.kernel[0] * self.kernel[1];
        let cbw = if self.depthwise() { 1 } else { cb };
        let int8 = self.elem != Elem::F32;
        let outb = mb * ohb * self.out[1];
        [
            a64(cb * self.in_rows(ohb) * w * e),
            a64(mb * cbw * k * e),
            a64(outb * 4),
            a64(mb * 4) * (1 + int8 as usize),
            if self.residual { a64(outb * 4) } else { 0 },
            if int8 { a64(outb) } else { 0 },
        ]
    }
    /// The (mb, cb, ohb) tilings with their local bytes and estimates.
    fn tilings(&self, t: &NpuTarget) -> Vec<((usize, usize, usize), usize, u64)> {
        let (cg, mg) = (self.x[1] / self.group, self.m / self.group);
        let dw = self.depthwise();
        let mut cands = Vec::new();
        let e = self.elem.size();
        let k = self.kernel[0] * self.kernel[1];
        let mmax = if dw { self.m } else { mg };
        for &mb in &sizes(mmax, 256) {
            let cbs = if dw { vec![mb] } else { sizes(cg, 512) };
            for &cb in &cbs {
                for &ohb in &sizes(self.out[0], 64) {
                    let bytes: usize = self.layout(mb, cb, ohb).iter().sum();
                    let (nm, noh) = (mmax.div_ceil(mb), self.out[0].div_ceil(ohb));
                    let cin = if dw { mb } else { cg };
                    let traffic = nm
                        * noh
                        * (cin * self.in_rows(ohb) * self.x[3] * e
                            + mb * if dw { 1 } else { cg } * k * e);
                    let items = nm * noh * cin.div_ceil(cb);
                    let par = nm * noh * self.x[0] * if dw { 1 } else { self.group };
                    cands.push((
                        (mb, cb, ohb),
                        bytes,
                        super::est(t, self.elem, traffic, self.macs(), par, items),
                    ));
                }
            }
        }
        cands
    }

    /// Compiles the conv with the best tiling whose transfers fit.
    pub fn program(&self, t: &NpuTarget) -> Result<OpProgram, Reject> {
        let budget = budget(t);
        let none = || {
            let need: usize = self.layout(1, 1, 1).iter().sum();
            format!(
                "working set exceeds the tile's local memory even for 1 channel x 1 row: required {} B, available {} B, excess {} B",
                need + PARAM_AREA as usize,
                budget + PARAM_AREA as usize,
                need - budget.min(need)
            )
        };
        // The memory tile's broadcast saves DDR traffic but makes the cores of a column wait for each other: each
        // tiling keeps whichever program the clock says is faster.
        first_fit(self.tilings(t), budget, none, |b| {
            let own = self.tiled(t, b, false)?;
            match self.tiled(t, b, true) {
                Ok(shared) if shared.cost.elapsed < own.cost.elapsed => Ok(shared),
                _ => Ok(own),
            }
        })
    }

    /// Compiles the conv with tiling (mb, cb, ohb); `share`: broadcast input slabs where blocks share them.
    fn tiled(
        &self,
        t: &NpuTarget,
        (mb, cb, ohb): (usize, usize, usize),
        share: bool,
    ) -> Result<OpProgram, Reject> {
        let mut g = Gen::new(t);
        let e = self.elem.size();
        let [n, c, h, w] = self.x;
        let [oh, ow] = self.out;
        let (kh, kw) = (self.kernel[0], self.kernel[1]);
        let k = kh * kw;
        let dw = self.depthwise();
        let (cg, mg) = (c / self.group, self.m / self.group);
        // Depthwise: one "group" covering all channels, m-blocks select channels.
        let (groups, mper) = if dw { (1, self.m) } else { (self.group, mg) };
        let int8 = self.elem != Elem::F32;
        // Constants: weight blocks, then bias (f32 or i32), then scales (int8).
        let mut wtab = Vec::new();
        for gi in 0..groups {
            for m0 in (0..mper).step_by(mb) {
                let mbs = mb.min(mper - m0);
                let chunks: Vec<usize> = if dw {
                    vec![0]
                } else {
                    (0..cg).step_by(cb).collect()
                };
                for c0 in chunks {
                    wtab.push(g.p.consts.len());
                    let cbs = if dw { 1 } else { cb.min(cg - c0) };
                    for i in 0..mbs {
                        let mo = gi * mper + m0 + i;
                        for j in 0..cbs {
                            for kk in 0..k {
                                let idx = (mo * if dw { 1 } else { cg } + c0 + j) * k + kk;
                                self.weights.push(idx, &mut g.p.consts);
                            }
                        }
                    }
                    let pad = a64(g.p.consts.len()) - g.p.consts.len();
                    g.p.consts.extend(std::iter::repeat_n(0, pad));
                }
            }
        }
        let (bias_at, scale_at) = g.push_bias_scales(self.m, &self.bias, self.requant.as_ref());
        let x_bytes = n * c * h * w * e;
        let y_bytes = n * self.m * oh * ow * e;
        g.arg(ArgKind::Input, Xrt::In, 0, 0, x_bytes as u64);
        let res_at = a64(x_bytes);
        if self.residual {
            g.arg(
                ArgKind::Input,
                Xrt::In,
                3,
                res_at as u64,
                (n * self.m * oh * ow * 4) as u64,
            );
        }
        g.arg(
            ArgKind::ConstInput,
            Xrt::Const,
            1,
            0,
            g.p.consts.len() as u64,
        );
        g.arg(ArgKind::Output, Xrt::Out, 0, 0, y_bytes as u64);

        let lay = self.layout(mb, cb, ohb);
        let slab = PARAM_AREA as usize;
        let wl = slab + lay[0];
        let acc = wl + lay[1];
        let bias = acc + lay[2];
        let res = bias + lay[3];
        let outl = res + lay[4];
        let rows = self.rows();
        let xzp = self.requant.as_ref().map_or(0, |q| q.x_zero_point);
        // A dense conv's output-channel blocks of one row block read the same input slab: up to one block per
        // core row of a column share it, read from DDR once and broadcast by the memory tile.
        let nmb = mper.div_ceil(mb);
        let (noh, cols) = (oh.div_ceil(ohb), usize::from(t.cols));
        let gsize = usize::from(t.rows - t.mem_tile_rows - 1).min(4);
        let shared = share && !dw && nmb >= 2 && gsize >= 2;
        let ngrp = nmb.div_ceil(gsize);
        for ni in 0..n {
            let mut wi = 0;
            for gi in 0..groups {
                for m0 in (0..mper).step_by(mb) {
                    let mbs = mb.min(mper - m0);
                    let mo0 = gi * mper + m0;
                    let chunk0 = wi;
                    let mbi = m0 / mb;
                    for oh0 in (0..oh).step_by(ohb) {
                        wi = chunk0;
                        let ohs = ohb.min(oh - oh0);
                        let (ih0, in_rows, row0) = rows.slab(oh0, ohs).map_err(outside)?;
                        let ob = oh0 / ohb;
                        let (grp, slot) = (mbi / gsize, mbi % gsize);
                        let members: Vec<_> = if shared {
                            let col = (((ni * groups + gi) * noh + ob) * ngrp + grp) % cols;
                            (0..gsize.min(nmb - grp * gsize))
                                .map(|k| g.column_tile(k, col))
                                .collect()
                        } else {
                            Vec::new()
                        };
                        let tile = members.get(slot).copied().unwrap_or_else(|| g.tile());
                        let chunks: Vec<usize> = if dw {
                            vec![0]
                        } else {
                            (0..cg).step_by(cb).collect()
                        };
                        for (ci, &c0) in chunks.iter().enumerate() {
                            let (cbase, cbs) = if dw {
                                (mo0, mbs)
                            } else {
                                (gi * cg + c0, cb.min(cg - c0))
                            };
                            let row = in_rows * w * e;
                            g.broadcast(
                                [ni, gi, ob, grp, ci],
                                &members,
                                tile,
                                Xrt::In,
                                ((ni * c + cbase) * h + ih0) * w * e,
                                slab,
                                row,
                                cbs,
                                h * w * e,
                                row,
                            );
                            let wbytes = mbs * if dw { 1 } else { cbs } * k * e;
                            g.dma(
                                tile,
                                false,
                                Xrt::Const,
                                wtab[wi + ci],
                                wl,
                                wbytes,
                                1,
                                wbytes,
                                wbytes,
                            );
                            let words = [
                                self.elem.code(),
                                (ci == 0) as u32 | (dw as u32) << 1,
                                slab as u32,
                                wl as u32,
                                acc as u32,
                                cbs as u32,
                                in_rows as u32,
                                w as u32,
                                mbs as u32,
                                ohs as u32,
                                ow as u32,
                                kh as u32,
                                kw as u32,
                                self.strides[0] as u32,
                                self.strides[1] as u32,
                                self.dilations[0] as u32,
                                self.dilations[1] as u32,
                                row0 as u32,
                                (self.pads[1] as i32).wrapping_neg() as u32,
                                xzp as u32,
                            ];
                            let work = (mbs * ohs * ow * if dw { 1 } else { cbs } * k) as u64;
                            g.compute(tile, Kernel::Conv, 0, &words, work, self.elem);
                        }
                        let bb = mbs * 4;
                        g.dma(
                            tile,
                            false,
                            Xrt::Const,
                            bias_at + mo0 * 4,
                            bias,
                            bb,
                            1,
                            bb,
                            bb,
                        );
                        if int8 {
                            g.dma(
                                tile,
                                false,
                                Xrt::Const,
                                scale_at + mo0 * 4,
                                bias + a64(mb * 4),
                                bb,
                                1,
                                bb,
                                bb,
                            );
                        }
                        let blk = ohs * ow;
                        if self.residual {
                            let off = res_at + ((ni * self.m + mo0) * oh + oh0) * ow * 4;
                            g.dma(
                                tile,
                                false,
                                Xrt::In,
                                off,
                                res,
                                blk * 4,
                                mbs,
                                oh * ow * 4,
                                blk * 4,
                            );
                        }
                        let out_l = if int8 { outl } else { acc };
                        let blkd = EpilogueBlock {
                            acc,
                            bias,
                            scale: bias + a64(mb * 4),
                            res,
                            out: out_l,
                            rows: mbs,
                            cols: blk,
                            per_col: false,
                        };
                        g.epilogue(
                            tile,
                            self.elem,
                            self.act,
                            self.requant.as_ref(),
                            self.residual,
                            &blkd,
                        );
                        let off = ((ni * self.m + mo0) * oh + oh0) * ow * e;
                        g.dma(
                            tile,
                            true,
                            Xrt::Out,
                            off,
                            out_l,
                            blk * e,
                            mbs,
                            oh * ow * e,
                            blk * e,
                        );
                        g.sync(tile);
                    }
                    wi = chunk0 + chunks_len(dw, cg, cb);
                }
            }
        }
        g.finish()
    }
}

fn chunks_len(dw: bool, cg: usize, cb: usize) -> usize {
    if dw {
        1
    } else {
        cg.div_ceil(cb)
    }
}
