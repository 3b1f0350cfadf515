//! Elementwise kernels' geometry: flat maps in chunks, broadcast binary ops, comparisons and logic.

use crate::ir::{BinOp, CmpOp, DType, LogicOp};

/// Elements per work unit of a flat elementwise kernel.
pub const CHUNK: usize = 1024;

/// Binary op over a coalesced broadcast: `out[o, i] = a[o·sa + i·ia] op b[o·sb + i·ib]`.
#[derive(Debug, Clone, PartialEq)]
pub struct BinarySpec {
    /// The operator.
    pub op: BinOp,
    /// Outer dims (coalesced), with per-dim strides of a and b in elements.
    pub outer: Vec<(usize, usize, usize)>,
    /// Inner run length.
    pub inner: usize,
    /// Inner stride of a (0 or 1).
    pub ia: usize,
    /// Inner stride of b (0 or 1).
    pub ib: usize,
}

impl BinarySpec {
    fn outer_count(&self) -> usize {
        self.outer.iter().map(|d| d.0).product()
    }
    /// Work units: inner chunks when there is no outer dim, else outer rows.
    pub fn units(&self) -> usize {
        if self.outer.is_empty() {
            self.inner.div_ceil(CHUNK)
        } else {
            self.outer_count()
        }
    }
}

/// What a logic kernel computes.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum LogicKind {
    /// Comparison of two inputs of a dtype.
    Cmp(CmpOp, DType),
    /// And / Or / Xor of two bools.
    Logic(LogicOp),
    /// Not of a bool.
    Not,
    /// Where(cond, x, y) with elements of `elem` bytes.
    Where(usize),
}
