//! What a GEMM kernel computes (`GemmSpec`): its sizes and batch strides, its operands' layouts (strides, packed
//! panels, channel blocks), bias, residual, activation and fused transposing epilogue, with the derived
//! quantities the lowering, the memory planner and the code generator ask of it; the fused epilogue the
//! machine-code micro-kernels apply (`MicroEpi`). `codegen/ops/gemm` emits it.

use super::args::Role;
use crate::ir::Activation;

/// An operand: kernel argument role, element offset, and strides in elements.
#[derive(Debug, Clone, PartialEq)]
pub struct Operand {
    /// The kernel argument holding the tensor.
    pub arg: Role,
    /// Offset of element (0, 0) in elements.
    pub off: usize,
    /// Row stride in elements.
    pub rs: usize,
    /// Column stride in elements (1 for B, C and the residual).
    pub cs: usize,
}

impl Operand {
    /// Channel blocks `[C/16, P, 16]` of planes of `p` pixels as an operand (`GemmSpec::a_k16`, `c_k16`,
    /// `res_k16`): rows (pixels) 16 apart, the element offset of column (channel) `j`, a multiple of 16, `j·p`.
    pub fn blocks(arg: Role, p: usize) -> Operand {
        Operand {
            arg,
            off: 0,
            rs: 16,
            cs: p,
        }
    }
}

/// How the bias broadcasts over C.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BiasKind {
    /// One value per row (conv output channel).
    Row,
    /// One value per column (Gemm with C of shape \[N\]).
    Col,
    /// A full [M, N] matrix with row stride `rs`.
    Full,
}

/// A bias operand scaled by `scale` (Gemm's beta).
#[derive(Debug, Clone, PartialEq)]
pub struct Bias {
    /// Where the bias lives (cs unused; rs used by `Full`).
    pub at: Operand,
    /// Broadcast kind.
    pub kind: BiasKind,
    /// Multiplier (1 when folded at compile time).
    pub scale: f32,
}

/// A full GEMM description with static sizes.
#[derive(Debug, Clone, PartialEq)]
pub struct GemmSpec {
    /// Rows of C.
    pub m: usize,
    /// Columns of C.
    pub n: usize,
    /// Reduction length.
    pub k: usize,
    /// Depth of a K block (a multiple of 16): each block's products are summed from +0.0 and then added to the
    /// earlier blocks' sums, as MLAS does, which bounds the rounding error of a long reduction ([`KC`],
    /// [`CONV_KC`], [`WINOGRAD_KC`]).
    pub kc: usize,
    /// Batch dims, outermost first: (count, A, B, C, bias strides) in elements. The residual uses C's.
    pub batch: Vec<[usize; 5]>,
    /// Left operand (broadcast loads).
    pub a: Operand,
    /// A packed at compile time in panels of this many rows (a multiple of every micro-kernel's `mr`): element
    /// `(r, p)` at `(r / P)·P·K + p·P + r % P` (`K` = `a.rs`, `a.cs` = 1), so a tile's A is one sequential
    /// stream, `P` floats per step of K. `None`: A is read through its strides.
    pub a_panel: Option<usize>,
    /// A `[K/16][M][16]`: the steps of K in blocks of 16 adjacent elements per row (`a.rs` = 16), consecutive
    /// blocks `16·a.cs` apart (`a.cs` = M), K a multiple of 16 — channel blocks (the depthwise kernel's output,
    /// a tensor `lower/cnn/blocked.rs` keeps so), read with no transpose or pack. K blocks start at multiples
    /// of 16, where the element offset `k0·a.cs` is the block's.
    pub a_k16: bool,
    /// C `[N/16][M][16]` (`c.rs` = 16, `c.cs` = M: column block `j0`'s offset is `j0·M`), the channel-blocked
    /// depthwise kernel's input and the transposed GEMMs' A (`lower/cnn/blocked.rs`), N a multiple of the tile
    /// columns. Only the micro-kernels write such a C: lowering sets it only where they take every tile with the
    /// epilogue fused (`x86::gemm_fit::fuses_transpose`, `fused_epilogue`).
    pub c_k16: bool,
    /// The residual `[N/16][M][16]` like a `c_k16` C (`residual.rs` = 16, `residual.cs` = M), added by the
    /// micro-kernels' fused epilogue (`lower/cnn/blocked.rs`): only where they take every tile with it fused.
    pub res_k16: bool,
    /// Right operand (vector loads along columns).
    pub b: Operand,
    /// B packed at compile time in panels of this many columns (a multiple of the micro-kernels' `nr`; the last
    /// panel zero-padded to full width when `n` is not a multiple of it):
    /// element `(p, j)` at `(j / P)·P·K + p·P + j % P` (`K` = `k`, `b.rs` unused), so a column block's B is one
    /// sequential stream and its rows do not alias in the caches the way a power-of-two row stride does.
    /// `None`: B is read through `b.rs`.
    pub b_panel: Option<usize>,
    /// Output.
    pub c: Operand,
    /// Product scale.
    pub alpha: f32,
    /// Optional bias.
    pub bias: Option<Bias>,
    /// Optional residual, laid out like C (same batch strides).
    pub residual: Option<Operand>,
    /// Fused activation.
    pub act: Activation,
    /// The transposing epilogue fused after each unit (`TransposeOut`), if any.
    pub transpose_out: Option<TransposeOut>,
    /// `Some(g)`: the rows split into `g` groups taken outermost (`lower/cnn/mod.rs::splits_channels`; a
    /// transposed GEMM's pixel halves, `lower/cnn/transposed.rs::pixel_halves`), else groups of `ROW_GROUP` rows
    /// ordered by the size of A.
    pub row_groups: Option<usize>,
}

/// A transposing epilogue fused into a transposed convolution's GEMM (`lower/cnn/transposed.rs` `push_transposed`): C is
/// `Cᵀ [batch, P16, M]` (role Scratch, 16 rows of slack after the last batch) and after a unit's tiles the
/// machine-code transposer (`x86/transpose_out/`, 16 channels per call) writes the unit's rows and
/// columns of `Cᵀ`, still in this core's cache, back as pixels `[i_lo, i_hi)` of channel rows `[j0, j0 + nr)`
/// of `[batch, M, P]` (role Out), adding the residual (role Residual, same layout) and applying its clamp.
/// A separate transposing kernel after the GEMM read `Cᵀ` back from memory one barrier later, written by
/// whichever core computed it.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct TransposeOut {
    /// Pixels per output row (`P`).
    pub p: usize,
    /// Channels (`M`, a multiple of 16: whole blocks of the transposer).
    pub m: usize,
    /// `Cᵀ`'s row stride: `M` rounded up to the GEMM's 32-column tiles. The GEMM computes whole column blocks
    /// over weights (and a bias) zero-padded to it, and the padding columns are never transposed.
    pub ld: usize,
    /// Whether the residual is added.
    pub residual: bool,
    /// The clamp applied after the residual.
    pub act: Activation,
}

impl GemmSpec {
    /// A's element step between consecutive rows of a tile and between consecutive steps of K.
    pub(crate) fn a_steps(&self) -> (usize, usize) {
        match self.a_panel {
            Some(p) => (1, p),
            None => (self.a.rs, self.a.cs),
        }
    }
    /// `G` when `row_groups` splits the M rows into G equal groups of whole 8-row blocks (the tile heights of
    /// every kernel set divide them; `kernel/interleave.rs` runs such a GEMM group by group).
    pub fn whole_row_groups(&self) -> Option<usize> {
        let g = self.row_groups.filter(|&g| g > 0)?;
        (self.m.is_multiple_of(g) && (self.m / g).is_multiple_of(8)).then_some(g)
    }
    /// Whether every element of the residual is read only by the epilogue that writes the same element of C, with
    /// nothing written to C before (so C may take the residual's buffer, `plan/in_place.rs`): the transposing
    /// epilogue; or a residual laid out as C, one K block (no running sums kept in C between blocks), and an
    /// epilogue the micro-kernels fuse when they take the GEMM (`kernel::gemm::fused_epilogue`; the Cranelift
    /// tiles and column tails apply it on values held outside C).
    pub fn residual_in_place(&self) -> bool {
        match (&self.transpose_out, &self.residual) {
            (Some(t), _) => t.residual,
            (None, Some(r)) => {
                (r.off, r.rs, r.cs) == (self.c.off, self.c.rs, self.c.cs)
                    && self.res_k16 == self.c_k16
                    && self.k <= self.kc
                    && super::gemm::fused_epilogue(self).is_some()
            }
            (None, None) => false,
        }
    }
    /// B's element step between consecutive steps of K.
    pub(crate) fn b_k_step(&self) -> usize {
        self.b_panel.unwrap_or(self.b.rs)
    }
    /// Batch count (the product of the batch dims).
    pub fn batches(&self) -> usize {
        self.batch.iter().map(|b| b[0]).product()
    }
    /// Number of independent work units.
    pub fn units(&self) -> usize {
        self.batches() * self.n.div_ceil(NR) * self.m.div_ceil(ROW_GROUP)
    }
    /// Multiply-adds, for the cost model and reports.
    pub fn macs(&self) -> usize {
        self.batches() * self.m * self.n * self.k
    }
}

/// Columns per microkernel tile (two f32x4).
pub const NR: usize = 8;

/// Rows per work unit.
pub const ROW_GROUP: usize = 64;

/// A fused epilogue: `act(scale·acc + bias[row] + residual[row][col])`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct MicroEpi {
    /// Multiply the accumulators by this factor (f32 bits) first: a MatMul's `Epilogue::scale`.
    pub scale: Option<u32>,
    /// Add `bias[r]` (pointer in `rcx`).
    pub bias: bool,
    /// Add `bias[j]` instead (per column, pointer in `rcx` at the tile's first column).
    pub bias_col: bool,
    /// Add the residual (pointer in `r8`) with this row stride in elements.
    pub res_rs: Option<usize>,
    /// The residual's columns in blocks of 16 this many elements apart (0: contiguous columns), like a
    /// `c_block` C: `GemmSpec::res_k16`.
    pub res_block: usize,
    /// Lower clamp (f32 bits): `max(x, lo)`.
    pub lo: Option<u32>,
    /// Upper clamp (f32 bits): `min(x, hi)`.
    pub hi: Option<u32>,
}

/// Depth of a K block of a MatMul or Gemm (`GemmSpec::kc`), the deepest there is (a column tail's packed B panel
/// is `kc x nr` floats on the stack). A sequential sum's rounding error grows about as the square root of its
/// length; a block of 256 keeps transformer GEMMs (K = 256 to 3072) within 1.5x onnxruntime's error while
/// costing one add per element and block (a shallower block made an encoder 3 % slower).
pub const KC: usize = 256;

/// Depth of a K block of a convolution's GEMM (im2col, 1x1, transposed): MLAS's 128, so that a 3x3 layer of
/// 64-512 channels (K = 576-4608) is as accurate as onnxruntime's (0.93-0.99x its RMS error against float64,
/// `scripts/winograd_accuracy.py`; 1.2x with 256, 1.9-4.5x with one sequential chain), at no measured cost.
pub const CONV_KC: usize = 128;

/// Depth of a K block of a Winograd GEMM (K = the input channels): F(2x2)'s transforms add their own rounding,
/// so its products need shallower sums than the direct GEMM's to stay within 2x onnxruntime's error: 1.3-1.4x
/// at 64-512 channels (1.4-1.9x with 128).
pub const WINOGRAD_KC: usize = 64;

/// The epilogue a micro-kernel can apply in registers with the Cranelift epilogue's exact rounding: the product's
/// scale (`alpha`, a product then the additions, as there), bias per row or column (unscaled), the residual,
/// and a clamp whose bounds are not signed zeros where `max`/`min` would pick the other zero; `None` when
/// there is nothing to apply or it cannot be fused.
pub(crate) fn fused_epilogue(s: &super::gemm::GemmSpec) -> Option<MicroEpi> {
    let scale = (s.alpha != 1.0).then(|| s.alpha.to_bits());
    let (bias, bias_col) = match &s.bias {
        None => (false, false),
        Some(b) if b.kind == BiasKind::Row && b.scale == 1.0 => (true, false),
        Some(b) if b.kind == BiasKind::Col && b.scale == 1.0 => (false, true),
        Some(_) => return None,
    };
    let (res_rs, res_block) = match &s.residual {
        None => (None, 0),
        Some(r) if s.res_k16 && r.rs == 16 => (Some(r.rs), 16 * r.cs),
        Some(r) if r.cs == 1 => (Some(r.rs), 0),
        Some(_) => return None,
    };
    let (lo, hi) = clamp_bits(s.act)?;
    if scale.is_none() && !bias && !bias_col && res_rs.is_none() && lo.is_none() && hi.is_none() {
        return None;
    }
    Some(MicroEpi {
        scale,
        bias,
        bias_col,
        res_rs,
        res_block,
        lo,
        hi,
    })
}

/// The clamp of an activation as f32 bits for `vmaxps`/`vminps`, which agree with Cranelift's `fmax`/`fmin`
/// (NaN aside, which the kernels blend back) except when a bound is a zero that `max`/`min` would swap for the
/// other zero: `None` then (not fusable).
pub fn clamp_bits(act: crate::ir::Activation) -> Option<(Option<u32>, Option<u32>)> {
    use crate::ir::Activation;
    let (lo, hi) = match act {
        Activation::None => (None, None),
        Activation::Relu => (Some(0.0f32), None),
        Activation::Clip(lo, hi) => ((lo > f32::MIN).then_some(lo), (hi < f32::MAX).then_some(hi)),
    };
    if lo.is_some_and(|l| l.to_bits() == (-0.0f32).to_bits()) || hi.is_some_and(|h| h == 0.0) {
        return None;
    }
    Some((lo.map(f32::to_bits), hi.map(f32::to_bits)))
}
