//! The bf16 GEMM's description (`--precision bf16` on AVX-512 BF16 targets). A MatMul with a constant B: B
//! packed at compile time in bf16 panels of 32 columns ([`pack_b`]), A written as bf16 rows into scratch by a
//! conversion kernel before the GEMM reads it (`Body::ToBf16`). A convolution the other way round: the weights
//! are A, bf16 rows at compile time, and the columns (im2col's, or the input of a 1x1 convolution) are B,
//! packed into the same panels at run time (`Body::PackBf16`), the bias per row. Winograd's GEMMs are a batch
//! of them, one per ξ: `U[ξ]` bf16 rows, `V[ξ]` packed at run time. f32 accumulation, f32 output; the bf16
//! rounding of both operands is the only loss against the f32 GEMM.

use crate::ir::Activation;

/// Columns per panel (two zmm of f32 sums).
pub const NR: usize = 32;

/// Rows per work unit (eight micro-kernel tiles of 8 rows).
pub const ROWS_PER_UNIT: usize = 64;

/// A bf16 GEMM `C[i][j] = act(alpha · Σ_k A[i][k] · B[k][j] + bias[j] + residual[i][j])`: args A (bf16 rows
/// in scratch, `kp` per row), B (packed panels), Out, \[Bias\], \[Residual\].
#[derive(Debug, Clone, PartialEq)]
pub struct GemmBf16Spec {
    /// Rows.
    pub m: usize,
    /// Columns.
    pub n: usize,
    /// Reduction length.
    pub k: usize,
    /// C's (and the residual's) row stride in floats.
    pub c_rs: usize,
    /// Product scale.
    pub alpha: f32,
    /// A column bias (role Bias, `n` floats).
    pub bias: bool,
    /// A row bias instead (role Bias, `m` floats: a convolution's per channel).
    pub bias_row: bool,
    /// A residual laid out like C (role Residual).
    pub residual: bool,
    /// Fused activation (Relu or Clip become the micro-kernel's clamp).
    pub act: Activation,
    /// AMX tiles (`x86/gemm_bf16_amx.rs`): 32-row tiles, K padded to 32.
    pub amx: bool,
    /// GEMMs in the batch (≥ 1): A's and B's follow each other densely (`a_batch_bytes`, `b_batch_bytes`),
    /// C's are `c_bs` floats apart.
    pub batch: usize,
    /// C's batch stride in floats.
    pub c_bs: usize,
    /// A is a run-time pack in B's panel layout read transposed (`Body::PackBf16`'s output: row `i` is panel
    /// `i / 32`'s column `i mod 32`, rows 4 bytes apart, pair steps 128): Winograd's `V` packed once serves as
    /// the A of `Mᵀ = Vᵀ·Uᵀ`.
    pub a_panels: bool,
    /// C stored as channel blocks `[n/16][m][16]` (`lower/cnn/blocked.rs`: a convolution computed transposed,
    /// rows = pixels, whose readers take blocks), `c_rs` = 16; no residual.
    pub c_blocks: bool,
}

impl GemmBf16Spec {
    /// K padded to an even count (a bf16 pair), or with `amx` to a tile row of 32.
    pub fn kp(&self) -> usize {
        self.k.next_multiple_of(if self.amx { 32 } else { 2 })
    }
    /// Rows per micro-kernel tile.
    pub fn mr(&self) -> usize {
        if self.amx {
            32
        } else {
            8
        }
    }
    /// Column panels.
    pub fn panels(&self) -> usize {
        self.n.div_ceil(NR)
    }
    /// Work units: (batch entry, panel, 64-row group), the batch outermost, then panels.
    pub fn units(&self) -> usize {
        self.batch * self.panels() * self.m.div_ceil(ROWS_PER_UNIT)
    }
    /// Bytes from one batch entry's A (bf16 rows, or panels with `a_panels`) to the next.
    pub fn a_batch_bytes(&self) -> usize {
        if self.a_panels {
            self.m.div_ceil(NR) * panel_bytes(self.kp())
        } else {
            self.m * self.kp() * 2
        }
    }
    /// Bytes between A's rows within a tile.
    pub fn a_row_bytes(&self) -> usize {
        if self.a_panels {
            4
        } else {
            self.kp() * 2
        }
    }
    /// Bytes between A's consecutive pair steps.
    pub fn a_pair_bytes(&self) -> usize {
        if self.a_panels {
            NR * 4
        } else {
            4
        }
    }
    /// Bytes from one batch entry's B panels to the next.
    pub fn b_batch_bytes(&self) -> usize {
        self.panels() * panel_bytes(self.kp())
    }
    /// Multiply-adds of the whole batch.
    pub fn macs(&self) -> usize {
        self.batch * self.m * self.n * self.k
    }
}

/// Bytes of one 32-column panel of `kp / 2` pair steps (128 bytes a step).
pub fn panel_bytes(kp: usize) -> usize {
    kp / 2 * NR * 4
}

/// Packs A (`m x k` row-major f32, a convolution's weights) as bf16 rows of `kp` values, two a word (low half
/// first), the K pad zero.
pub fn pack_rows(a: &[f32], m: usize, k: usize, kp: usize) -> Vec<i64> {
    let at = |i: usize, p: usize| if p < k { to_bf16(a[i * k + p]) } else { 0 };
    (0..m)
        .flat_map(|i| (0..kp / 2).map(move |p| (i, p)))
        .map(|(i, p)| (at(i, 2 * p) as u32 | (at(i, 2 * p + 1) as u32) << 16) as i32 as i64)
        .collect()
}

/// `x` rounded to bf16 (round to nearest, ties to even, as `vcvtne2ps2bf16`; NaN stays a quiet NaN).
pub fn to_bf16(x: f32) -> u16 {
    let b = x.to_bits();
    if x.is_nan() {
        return ((b >> 16) | 0x40) as u16;
    }
    let round = 0x7fff + ((b >> 16) & 1);
    (b.wrapping_add(round) >> 16) as u16
}

/// The f32 value of bf16 bits.
pub fn from_bf16(h: u16) -> f32 {
    f32::from_bits((h as u32) << 16)
}

/// Packs B (`k x n` row-major f32) as bf16 panels of [`NR`] columns, `[n/32][kp/2][32]` i32 words each
/// holding the pair `(B[2p][j], B[2p+1][j])` (low half first), columns past `n` and the K pad (to `kp`) zero.
pub fn pack_b(b: &[f32], k: usize, n: usize, kp: usize) -> Vec<i64> {
    let pairs = kp.max(k).div_ceil(2);
    let panels = n.div_ceil(NR);
    let mut out = vec![0i64; panels * pairs * NR];
    let at = |p: usize, j: usize| if p < k { to_bf16(b[p * n + j]) } else { 0 };
    for j in 0..n {
        for p in 0..pairs {
            let word = at(2 * p, j) as u32 | (at(2 * p + 1, j) as u32) << 16;
            out[(j / NR) * pairs * NR + p * NR + j % NR] = word as i32 as i64;
        }
    }
    out
}

/// Packs `Aᵀ` (A `m x k` row-major f32, a convolution's weights or Winograd's `U[ξ]`) as B panels
/// ([`pack_b`]): the weights of a GEMM computed transposed, output channels as columns.
pub fn pack_b_transposed(a: &[f32], m: usize, k: usize, kp: usize) -> Vec<i64> {
    let at: Vec<f32> = (0..k * m).map(|i| a[(i % m) * k + i / m]).collect();
    pack_b(&at, k, m, kp)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bf16_rounding() {
        assert_eq!(to_bf16(1.0), 0x3f80);
        // 1 + 2^-8 is halfway between 1 and 1 + 2^-7: ties to even (down); just above rounds up.
        assert_eq!(to_bf16(1.0 + 1.0 / 256.0), 0x3f80);
        assert_eq!(to_bf16(f32::from_bits(0x3f80_8001)), 0x3f81);
        // 1 + 3·2^-8 ties up to the even 1 + 2^-6.
        assert_eq!(to_bf16(1.0 + 3.0 / 256.0), 0x3f82);
        assert_eq!(from_bf16(to_bf16(-2.5)), -2.5);
        assert!(from_bf16(to_bf16(f32::NAN)).is_nan());
        assert_eq!(to_bf16(f32::INFINITY), 0x7f80);
    }

    #[test]
    fn panels_hold_pairs() {
        let (k, n) = (3, 33);
        let b: Vec<f32> = (0..k * n).map(|i| i as f32).collect();
        let p = pack_b(&b, k, n, 4);
        assert_eq!(p.len(), 2 * 2 * NR);
        // Column 32 is the first of panel 1; its pair 0 is (B[0][32], B[1][32]), pair 1 (B[2][32], 0).
        let w = p[2 * NR] as u32;
        assert_eq!(
            (from_bf16(w as u16), from_bf16((w >> 16) as u16)),
            (32.0, 65.0)
        );
        let w = p[2 * NR + NR] as u32;
        assert_eq!((from_bf16(w as u16), w >> 16), (98.0, 0));
        // Column 33 (past n) is zero.
        assert_eq!(p[2 * NR + 1], 0);
    }
}
