//! Which GEMMs the f32 micro-kernels of `gemm_x86.rs` take whole: the shape conditions of the micro-kernel
//! path, and whether a transposed GEMM's transposing epilogue fuses (`fuses_transpose`, which the lowering asks
//! before it fuses, so that the code generator always finds the micro-kernels a fused GEMM needs).

use super::gemm_x86::{self, MicroSpec, Simd};
use crate::kernel::gemm::GemmSpec;

/// How many steps of K ahead the micro-kernels prefetch a panel-packed B (8 KiB at 32 columns): measured on
/// ResNet-50 (AMD EPYC, AVX-512), whose 7x7 layers stream 4–9 MiB of packed weights each, 3–5 % faster than
/// without (24 and 48 gained less, 128 and 256 about as much or less).
pub const B_PREFETCH: usize = 64;

/// `MicroSpec::c_block` of a GEMM's C: the distance between its blocks of 16 columns with `c_k16`, else 0.
pub fn c_block(s: &GemmSpec) -> usize {
    if s.c_k16 {
        16 * s.c.cs
    } else {
        0
    }
}

/// The shape conditions of the micro-kernel path for tiles `nr` columns wide: a full column block, contiguous
/// columns of B and C, a reduction, and panels of B (if packed) in whole tile widths.
pub fn micro_shape_ok(s: &GemmSpec, nr: usize) -> bool {
    let c_ok = s.c.cs == 1 || (s.c_k16 && s.c.rs == 16 && s.n.is_multiple_of(nr));
    s.n >= nr && s.b.cs == 1 && c_ok && s.k > 0 && s.b_panel.is_none_or(|p| p % nr == 0)
}

/// Whether a transposed convolution's GEMM takes its transposing epilogue fused (`gemm::TransposeOut`): the
/// AVX-512 micro-kernels cover it (the shape conditions and encodings of `codegen::machine_code::define_micro`, checked at the
/// tallest tile) and its column blocks hold whole blocks of 16 channels (`Cᵀ` padded to whole blocks,
/// `TransposeOut::ld`). Lowering asks before it fuses, so the codegen always finds the micro-kernels a fused GEMM
/// needs.
pub fn fuses_transpose(s: &GemmSpec) -> bool {
    let simd = Simd::Avx512;
    let (mr, nr) = simd.tile();
    let usable =
        micro_shape_ok(s, nr) && s.n.is_multiple_of(nr) && s.m >= mr && s.b_panel.is_some();
    // Checked at the tallest tile `tile_rows` may choose (the largest displacements).
    let rows = simd.max_rows();
    let spec = MicroSpec {
        simd,
        rows,
        cols: nr,
        k: s.kc.min(s.k),
        a_rs: s.a_steps().0,
        a_cs: s.a_steps().1,
        b_rs: s.b_k_step(),
        c_rs: s.c.rs,
        accumulate: false,
        epi: None,
        b_prefetch: B_PREFETCH,
        prefetch_next: false,
        a_prefetch: 2 * rows,
        b_next_cols: false,
        b_copy: false,
        c_prefetch: false,
        a_k16: s.a_k16,
        c_block: c_block(s),
    };
    usable && gemm_x86::fits(&spec)
}
