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

/// Coalesces an output shape and two broadcast stride vectors into a `BinarySpec`.
pub fn coalesce(op: BinOp, out: &[usize], sa: &[usize], sb: &[usize]) -> BinarySpec {
    // Merge dim d into d+1 when both inputs walk them as one contiguous (or broadcast) run.
    let mut dims: Vec<(usize, usize, usize)> = Vec::new();
    for d in 0..out.len() {
        if out[d] == 1 {
            continue;
        }
        if let Some(last) = dims.last_mut() {
            if last.1 == sa[d] * out[d] && last.2 == sb[d] * out[d] {
                *last = (last.0 * out[d], sa[d], sb[d]);
                continue;
            }
        }
        dims.push((out[d], sa[d], sb[d]));
    }
    let (inner, ia, ib) = match dims.last() {
        Some(&(n, a, b)) if a <= 1 && b <= 1 => {
            dims.pop();
            (n, a, b)
        }
        _ => (1, 0, 0),
    };
    BinarySpec {
        op,
        outer: dims,
        inner,
        ia,
        ib,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn coalesces_channel_broadcast() {
        // [2,3,4,5] + [1,3,1,1]
        let s = coalesce(BinOp::Add, &[2, 3, 4, 5], &[60, 20, 5, 1], &[0, 1, 0, 0]);
        assert_eq!(s.outer, vec![(2, 60, 0), (3, 20, 1)]);
        assert_eq!((s.inner, s.ia, s.ib), (20, 1, 0));
        let flat = coalesce(BinOp::Mul, &[4, 6], &[6, 1], &[6, 1]);
        assert!(flat.outer.is_empty());
        assert_eq!(flat.inner, 24);
    }
}
