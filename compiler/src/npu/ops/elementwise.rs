//! NPU lowering of the elementwise family (`ir/ops/elementwise.rs`): Add and Mul (both operands activations of
//! one shape, or a constant right operand that is a scalar or broadcasts along one axis), and Relu / Clip as the
//! unary form of the ELTWISE kernel. Work is cut into chunks of whole rows that fit the tile next to their `b`
//! slice; the result overwrites `a` in local memory before it is stored.

use super::constraint::BROADCAST;
use super::{
    a64, act_words, local_memory, ArgKind, Elem, Gen, OpProgram, Quant, Reject, PARAM_AREA,
};
use crate::ir::Activation;
use crate::npu::target::NpuTarget;
use crate::npu::txn::{Kernel, Xrt};

/// The binary operation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EltOp {
    /// a + b
    Add,
    /// a * b
    Mul,
    /// a (only the activation)
    Unary,
}

/// How `b` maps onto `a`'s elements.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Broadcast {
    /// `b[i]`.
    Same,
    /// `b[0]`.
    Scalar,
    /// `b[(i / inner) % period]`.
    PerRow {
        /// Elements per row.
        inner: usize,
        /// Rows before `b` repeats.
        period: usize,
    },
}

/// `y = act(a op b)`. ONNX args: 0 a, 1 b (activation, or constant in `b_const`).
#[derive(Debug, Clone, PartialEq)]
pub struct EltwiseOp {
    /// Element type of a, b and y.
    pub elem: Elem,
    /// Operation.
    pub op: EltOp,
    /// Elements of a and y.
    pub n: usize,
    /// Constant b as raw elements (f32 LE or bytes), `None` when b is an activation (or unary).
    pub b_const: Option<Vec<u8>>,
    /// Broadcast of b.
    pub broadcast: Broadcast,
    /// Activation (f32).
    pub act: Activation,
    /// int8: a, b, y quantisation and the output clamp.
    pub quant: Option<([Quant; 3], (i32, i32))>,
}

impl EltwiseOp {
    /// Compiles the elementwise op.
    pub fn program(&self, t: &NpuTarget) -> Result<OpProgram, Reject> {
        let mut g = Gen::new(t);
        let e = self.elem.size();
        let n = self.n;
        let has_b = self.op != EltOp::Unary;
        let b_act = has_b && self.b_const.is_none();
        if b_act && self.broadcast != Broadcast::Same {
            return Err(Reject::new(
                &BROADCAST,
                "a broadcast right operand must be a constant",
            ));
        }
        g.arg(ArgKind::Input, Xrt::In, 0, 0, (n * e) as u64);
        let b_at = a64(n * e);
        if b_act {
            g.arg(ArgKind::Input, Xrt::In, 1, b_at as u64, (n * e) as u64);
        }
        if let Some(b) = &self.b_const {
            g.p.consts.extend_from_slice(b);
            g.arg(ArgKind::ConstInput, Xrt::Const, 1, 0, b.len() as u64);
        }
        g.arg(ArgKind::Output, Xrt::Out, 0, 0, (n * e) as u64);
        let budget = g.budget();
        // Row geometry: rows of `inner` elements; a chunk is whole rows inside one period, or a piece of a row.
        let (inner, period) = match self.broadcast {
            Broadcast::PerRow { inner, period } => (inner, period),
            _ => (n, 1),
        };
        let two = if has_b { 2 } else { 1 };
        let max_elems = (budget / two).saturating_sub(64) / e;
        if max_elems == 0 {
            return Err(local_memory(format!(
                "local memory of {} B is too small for one element",
                t.local_memory_bytes
            )));
        }
        let al = PARAM_AREA as usize;
        let (qa, qb, qy, clamp) = match &self.quant {
            Some((q, c)) => (q[0], q[1], q[2], *c),
            None => {
                let z = Quant {
                    scale: 1.0,
                    zero_point: 0,
                };
                (z, z, z, (0, 0))
            }
        };
        let [act, lo, hi] = act_words(self.act);
        let (lo, hi) = if self.quant.is_some() {
            (clamp.0 as u32, clamp.1 as u32)
        } else {
            (lo, hi)
        };
        let op = match self.op {
            EltOp::Add => 0,
            EltOp::Mul => 1,
            EltOp::Unary => 2,
        };
        // Chunks: (first element, elements, mode, b offset, b elements).
        let mut chunks = Vec::new();
        match self.broadcast {
            Broadcast::PerRow { .. } if inner <= max_elems => {
                let rows_per = (max_elems / inner).max(1);
                let total_rows = n / inner;
                let mut r = 0;
                while r < total_rows {
                    let c = r % period;
                    let take = rows_per.min(period - c).min(total_rows - r);
                    chunks.push((r * inner, take * inner, 2u32, c, take));
                    r += take;
                }
            }
            Broadcast::PerRow { .. } => {
                for r in 0..n / inner {
                    for s in (0..inner).step_by(max_elems) {
                        chunks.push((r * inner + s, max_elems.min(inner - s), 1, r % period, 1));
                    }
                }
            }
            Broadcast::Scalar => {
                for s in (0..n).step_by(max_elems) {
                    chunks.push((s, max_elems.min(n - s), 1, 0, 1));
                }
            }
            Broadcast::Same => {
                for s in (0..n).step_by(max_elems) {
                    let len = max_elems.min(n - s);
                    chunks.push((s, len, 0, s, len));
                }
            }
        }
        for (s, len, mode, boff, blen) in chunks {
            let tile = g.tile();
            let bl = al + a64(len * e);
            g.dma(
                tile,
                false,
                Xrt::In,
                s * e,
                al,
                len * e,
                1,
                len * e,
                len * e,
            );
            if b_act {
                g.dma(
                    tile,
                    false,
                    Xrt::In,
                    b_at + boff * e,
                    bl,
                    blen * e,
                    1,
                    blen * e,
                    blen * e,
                );
            } else if has_b {
                g.dma(
                    tile,
                    false,
                    Xrt::Const,
                    boff * e,
                    bl,
                    blen * e,
                    1,
                    blen * e,
                    blen * e,
                );
            }
            let words = [
                self.elem.code(),
                op,
                al as u32,
                bl as u32,
                al as u32,
                len as u32,
                if has_b { mode } else { 0 },
                if mode == 2 { inner as u32 } else { 1 },
                if self.quant.is_some() { 0 } else { act },
                lo,
                hi,
                qa.scale.to_bits(),
                qa.zero_point as u32,
                qb.scale.to_bits(),
                qb.zero_point as u32,
                qy.scale.to_bits(),
                qy.zero_point as u32,
            ];
            g.compute(tile, Kernel::Eltwise, 0, &words, len as u64, self.elem);
            g.dma(
                tile,
                true,
                Xrt::Out,
                s * e,
                al,
                len * e,
                1,
                len * e,
                len * e,
            );
            g.sync(tile);
        }
        g.finish()
    }
}
