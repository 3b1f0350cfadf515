//! NPU lowering of the shape family (`ir/ops/shape.rs`): Concat and Reshape are pure data movement, DMA loads
//! into a tile and strided DMA stores to the output, with no compute command. Concat along any axis is `outer`
//! rows per input, each input's row landing at its byte offset inside the output row; Reshape is one input row.

use super::{ArgKind, Gen, OpProgram, Reject};
use crate::npu::target::NpuTarget;
use crate::npu::txn::Xrt;

/// One input of a copy.
#[derive(Debug, Clone, PartialEq)]
pub struct CopyPart {
    /// Bytes of this input per output row.
    pub row_bytes: usize,
    /// The input's bytes when it is a constant.
    pub constant: Option<Vec<u8>>,
}

/// Concatenation of `parts` along rows: output row `r` is the parts' row `r` side by side.
#[derive(Debug, Clone, PartialEq)]
pub struct CopyOp {
    /// Rows (product of the dims before the axis).
    pub outer: usize,
    /// Inputs in order.
    pub parts: Vec<CopyPart>,
}

impl CopyOp {
    /// Compiles the copy.
    pub fn program(&self, t: &NpuTarget) -> Result<OpProgram, Reject> {
        let mut g = Gen::new(t);
        let budget = g.budget();
        let row_out: usize = self.parts.iter().map(|p| p.row_bytes).sum();
        let mut in_at = 0usize;
        let mut srcs = Vec::new();
        for (i, p) in self.parts.iter().enumerate() {
            let bytes = p.row_bytes * self.outer;
            match &p.constant {
                Some(c) => {
                    let at = g.p.consts.len();
                    g.p.consts.extend_from_slice(c);
                    g.p.consts.resize(super::a64(g.p.consts.len()), 0);
                    g.arg(ArgKind::ConstInput, Xrt::Const, i, at as u64, bytes as u64);
                    srcs.push((Xrt::Const, at));
                }
                None => {
                    g.arg(ArgKind::Input, Xrt::In, i, in_at as u64, bytes as u64);
                    srcs.push((Xrt::In, in_at));
                    in_at += super::a64(bytes);
                }
            }
        }
        g.arg(
            ArgKind::Output,
            Xrt::Out,
            0,
            0,
            (row_out * self.outer) as u64,
        );
        let local = super::PARAM_AREA as usize;
        let mut prefix = 0;
        for (p, &(buf, at)) in self.parts.iter().zip(&srcs) {
            let rb = p.row_bytes;
            if rb == 0 {
                continue;
            }
            if rb <= budget {
                let per = (budget / rb).clamp(1, self.outer.max(1));
                for r0 in (0..self.outer).step_by(per) {
                    let rows = per.min(self.outer - r0);
                    let tile = g.tile();
                    g.dma(tile, false, buf, at + r0 * rb, local, rb, rows, rb, rb);
                    g.dma(
                        tile,
                        true,
                        Xrt::Out,
                        r0 * row_out + prefix,
                        local,
                        rb,
                        rows,
                        row_out,
                        rb,
                    );
                    g.sync(tile);
                }
            } else {
                for r in 0..self.outer {
                    for s in (0..rb).step_by(budget) {
                        let len = budget.min(rb - s);
                        let tile = g.tile();
                        g.dma(tile, false, buf, at + r * rb + s, local, len, 1, len, len);
                        g.dma(
                            tile,
                            true,
                            Xrt::Out,
                            r * row_out + prefix + s,
                            local,
                            len,
                            1,
                            len,
                            len,
                        );
                        g.sync(tile);
                    }
                }
            }
            prefix += rb;
        }
        g.finish()
    }
}
