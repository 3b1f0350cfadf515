//! The int8 GEMV's description: a one-row QMatMul on AVX-512 VNNI targets (`x86/qgemv_vnni.rs`), with its
//! weights packed in blocks of 16 rows ([`pack`]) and its work units of [`ROWS_PER_UNIT`] rows.

use super::qgemm::QOut;
use crate::ir::DType;

/// Rows per block (one zmm of i32 sums).
pub const BLOCK: usize = 16;

/// Rows per work unit.
pub const ROWS_PER_UNIT: usize = 128;

/// A GEMV `y[r] = Σ_k A[r][k] · x[k]` of `m` rows: args A (packed weights), B (x, `k` u8 / i8), Out, Bias
/// (i32 per row, the activation zero point folded in), \[Scale\].
#[derive(Debug, Clone, PartialEq)]
pub struct QGemvSpec {
    /// Output rows.
    pub m: usize,
    /// Reduction length.
    pub k: usize,
    /// The activation's dtype (i8 ones are flipped to u8 by `^ 0x80`, the bias compensating).
    pub x_dtype: DType,
    /// Output dtype (u8, i8, or i32 for raw sums).
    pub y_dtype: DType,
    /// Requantisation (None for i32 output).
    pub requant: Option<QOut>,
}

impl QGemvSpec {
    /// K padded to the kernel's step of 16 bytes.
    pub fn kp(&self) -> usize {
        self.k.next_multiple_of(16)
    }
    /// Work units.
    pub fn units(&self) -> usize {
        self.m.div_ceil(ROWS_PER_UNIT)
    }
}

/// Packs `w` (`m x k` row-major i8 values) as `[m/16][kp/4][16][4]` bytes, rows past `m` and K past `k` zero.
pub fn pack(w: &[i64], m: usize, k: usize) -> Vec<i64> {
    let kp = k.next_multiple_of(16);
    let blocks = m.div_ceil(BLOCK);
    let mut out = vec![0i64; blocks * BLOCK * kp];
    for r in 0..m {
        let (b, lane) = (r / BLOCK, r % BLOCK);
        for (q, &v) in w[r * k..(r + 1) * k].iter().enumerate() {
            out[b * BLOCK * kp + (q / 4) * BLOCK * 4 + lane * 4 + q % 4] = v;
        }
    }
    out
}
