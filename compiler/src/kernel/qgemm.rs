//! The integer GEMM's description (`QGemmSpec`, requantisation `QOut`) and its work units on the i16-pair
//! kernels; the VNNI kernels' geometry is in `qgemm_vnni.rs`.

use super::gemm::Operand;
use crate::ir::DType;

/// Requantisation of the integer GEMM's output; the f32 scale per row is argument `Role::Scale`.
#[derive(Debug, Clone, PartialEq)]
pub struct QOut {
    /// Output zero point.
    pub zero_point: i32,
    /// Output clamp.
    pub clamp: (i32, i32),
}

/// A full integer GEMM description with static sizes. Argument `Role::A` is the packed A: row `i` is
/// `k.div_ceil(2)` i32 words (i16 pairs), or with `vnni` `k.next_multiple_of(4)` s8 bytes; `Role::Bias` the i32
/// bias per row.
#[derive(Debug, Clone, PartialEq)]
pub struct QGemmSpec {
    /// Rows (output channels per batch entry).
    pub m: usize,
    /// Columns.
    pub n: usize,
    /// Reduction length.
    pub k: usize,
    /// Batch dims, outermost first: (count, A words, B elements, C elements, channel) strides.
    pub batch: Vec<[usize; 5]>,
    /// The AVX-512 VNNI layout and micro-kernel (`qgemm_vnni.rs`): B is read as u8 (i8 activations flipped by
    /// `^ 0x80`) and the bias already holds `-zp · Σ_k A[i, k]`.
    pub vnni: bool,
    /// The activation operand (element strides).
    pub b: Operand,
    /// B's dtype (u8 or i8).
    pub b_dtype: DType,
    /// B's zero point.
    pub b_zero_point: i32,
    /// The output (element strides).
    pub c: Operand,
    /// C's dtype (u8, i8, or i32 for raw sums).
    pub c_dtype: DType,
    /// Requantisation (None for i32 output).
    pub requant: Option<QOut>,
}

impl QGemmSpec {
    /// Batch count (the product of the batch dims).
    pub fn batches(&self) -> usize {
        self.batch.iter().map(|b| b[0]).product()
    }
    /// Work units.
    pub fn units(&self) -> usize {
        if self.vnni {
            return crate::kernel::qgemm_vnni::units(self);
        }
        self.batches() * self.n.div_ceil(NR) * self.m.div_ceil(ROWS)
    }
    /// Multiply-adds.
    pub fn macs(&self) -> usize {
        self.batches() * self.m * self.n * self.k
    }
    /// i32 words per packed A row.
    pub fn kp(&self) -> usize {
        self.k.div_ceil(2)
    }
}

/// Columns per tile (two i32x4 accumulators per row).
pub const NR: usize = 8;

/// Rows per work unit (the i32 partial-sum buffer between K blocks is `ROWS x NR`).
pub const ROWS: usize = 128;

/// Packs constant weights `w` (`rows x k`, row-major, i8 values as i64) into the i32 pair words A reads.
pub fn pack_a(w: &[i64], rows: usize, k: usize) -> Vec<i64> {
    let kp = k.div_ceil(2);
    let mut out = Vec::with_capacity(rows * kp);
    for i in 0..rows {
        for p in 0..kp {
            let lo = w[i * k + 2 * p] as i16 as u16 as u32;
            let hi = if 2 * p + 1 < k {
                w[i * k + 2 * p + 1] as i16 as u16 as u32
            } else {
                0
            };
            out.push((lo | hi << 16) as i32 as i64);
        }
    }
    out
}
