//! The VNNI integer GEMM's geometry: micro-kernel tile, rows per unit, K blocks of quads, A's row stride.

use crate::kernel::qgemm::QGemmSpec;

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
    s.k.div_ceil(4) * 4
}
