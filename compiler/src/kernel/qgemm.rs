//! The integer GEMM's description (`QGemmSpec`, requantisation `QOut`) and its work units on the i16-pair
//! kernels; the VNNI kernels' geometry in `vnni`.

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
    /// The AVX-512 VNNI layout and micro-kernel (`codegen/ops/qgemm_vnni.rs`): B is read as u8 (i8 activations flipped by
    /// `^ 0x80`) and the bias already holds `-zp · Σ_k A[i, k]`.
    pub vnni: bool,
    /// With `vnni`: the AMX tile micro-kernel (`x86/qgemm_amx.rs`) instead of the VNNI one, tiles of 32 rows
    /// and A rows padded to a multiple of 64 bytes.
    pub amx: bool,
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

/// The i32 bias per row with the activation zero point `zp` (in the u8 domain of the VNNI and implicit
/// convolution kernels, which multiply unsigned activations) folded in: `bias[i] − zp · Σ_k w[i][k]`, wrapping
/// as i32, for `rows` rows of `w`.
pub fn folded_bias(bias: &[i32], w: &[i64], rows: usize, zp: i64) -> Vec<i64> {
    let k = w.len() / rows.max(1);
    (0..rows)
        .map(|i| {
            let sum: i64 = w[i * k..(i + 1) * k].iter().sum();
            (bias[i] as i64).wrapping_sub(zp * sum) as i32 as i64
        })
        .collect()
}

impl QGemmSpec {
    /// Batch count (the product of the batch dims).
    pub fn batches(&self) -> usize {
        self.batch.iter().map(|b| b[0]).product()
    }
    /// Work units.
    pub fn units(&self) -> usize {
        if self.vnni {
            return vnni::units(self);
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

/// The VNNI integer GEMM's geometry: micro-kernel tile, rows per unit, K blocks of quads, A's row stride.
pub mod vnni {
    use super::QGemmSpec;

    /// Tile columns (two zmm of i32).
    pub const NR: usize = 32;

    /// Most tile rows.
    pub const MR: usize = 8;

    /// Rows per unit when K takes several blocks (the i32 buffer is `ROWS x NR`).
    pub const ROWS: usize = 64;

    /// Rows per unit when K fits one block: tiles go straight to the output, so a larger group repacks B less.
    pub const ROWS_ONE_BLOCK: usize = 256;

    /// K quads (groups of four) per packed block.
    pub const KQB: usize = 256;

    /// Whether full tiles can use the requantising micro-kernels.
    pub fn direct(s: &QGemmSpec) -> bool {
        blocks(s).1 == 1 && s.requant.is_some() && s.c.cs == 1
    }

    /// Rows per micro-kernel tile: 32 with AMX, else [`MR`].
    pub fn mr(s: &QGemmSpec) -> usize {
        if s.amx {
            32
        } else {
            MR
        }
    }

    /// K quads of the panel the unit packs for one block of `quads`: AMX reads whole 16-quad tile steps.
    pub fn panel_quads(s: &QGemmSpec, quads: usize) -> usize {
        if s.amx {
            quads.next_multiple_of(16)
        } else {
            quads
        }
    }

    /// Rows per work unit: more when K fits one block (tiles then go straight to the output).
    pub fn rows_per_unit(s: &QGemmSpec) -> usize {
        if blocks(s).1 == 1 {
            ROWS_ONE_BLOCK
        } else {
            ROWS
        }
    }

    /// Work units of a VNNI GEMM.
    pub fn units(s: &QGemmSpec) -> usize {
        s.batches() * s.n.div_ceil(NR) * s.m.div_ceil(rows_per_unit(s))
    }

    /// K quads, blocks, and quads in the last block.
    pub fn blocks(s: &QGemmSpec) -> (usize, usize, usize) {
        let kq = s.k.div_ceil(4);
        let nb = kq.div_ceil(KQB);
        (kq, nb, kq - (nb - 1) * KQB)
    }

    /// A's row stride in bytes.
    pub fn a_rs(s: &QGemmSpec) -> usize {
        a_row(s.k, s.amx)
    }

    /// A's row stride in bytes for `k`: K padded to a quad, or with `amx` to a tile row of 64.
    pub fn a_row(k: usize, amx: bool) -> usize {
        if amx {
            k.next_multiple_of(64)
        } else {
            k.div_ceil(4) * 4
        }
    }
}
