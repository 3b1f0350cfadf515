//! Machine-code GEMM micro-kernels for x86-64, assembled with `iced-x86`'s code assembler and placed in the
//! bundle's object next to the Cranelift code (`define_function_bytes`). Cranelift 0.135 emits only 128-bit
//! vectors; these kernels use the full register width: AVX2+FMA computes a 4 x 24 tile in twelve `ymm`
//! accumulators, AVX-512F a tile of up to 14 x 32 (8 x 32 standard) in up to 28 `zmm` accumulators.
//!
//! A kernel is specialised for one GEMM: the reduction length `k` and the strides of A (broadcast loads), B and C
//! (row-major, contiguous columns) are immediates, so the function is `fn(a: *const f32, b: *const f32,
//! c: *mut f32, bias: *const f32, residual: *const f32)` in the System V ABI (arguments in `rdi`, `rsi`, `rdx`,
//! `rcx`, `r8`; only caller-saved registers used). It computes `C[r][j] = Σ_p A[r][p] · B[p][j]` for the whole
//! tile and stores it; the variant for a GEMM's last K block may also apply the epilogue in registers
//! ([`MicroEpi`]: `+ bias[r]`, `+ residual[r][j]`, then the clamp, each rounded exactly as the Cranelift
//! epilogue's `fadd`/`fmax`/`fmin` round, NaN propagated), else the caller applies it.
//! Every accumulator starts at +0.0 and takes one `vfmadd231ps` per `p` in ascending order; a later block of K
//! (`accumulate`) then adds the sums the earlier blocks stored in C. Summing K in blocks of `KC` from zero,
//! as MLAS does, keeps the rounding error of a long reduction close to that of one block (a sequential chain
//! over all of K grows about as √K: 3-4x onnxruntime's error at K = 2304). The Cranelift kernel computes the
//! same blocked `fma` chains, so results are bitwise identical to it. The GEMM kernel calls it one K block at a time,
//! on B in place (`b_rs` = B's row stride) for full column blocks, or on a zero-padded panel it packed
//! (`b_rs` = the tile width) for the column tail.

use super::{YMM, ZMM};
use crate::kernel::gemm::MicroEpi;
use iced_x86::code_asm::*;

/// Which register file a micro-kernel uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Simd {
    /// 256-bit AVX2 + FMA (`x86-64-v3`).
    Avx2,
    /// 512-bit AVX-512F (`x86-64-v4`).
    Avx512,
}

impl Simd {
    /// Tile rows and columns of this variant's micro-kernel.
    pub fn tile(self) -> (usize, usize) {
        match self {
            Simd::Avx2 => (4, 24),
            Simd::Avx512 => (8, 32),
        }
    }
    /// f32 lanes of one vector register.
    pub fn lanes(self) -> usize {
        match self {
            Simd::Avx2 => 8,
            Simd::Avx512 => 16,
        }
    }
    /// Vector registers in the file (`ymm0..15`, `zmm0..31`).
    pub fn registers(self) -> usize {
        match self {
            Simd::Avx2 => 16,
            Simd::Avx512 => 32,
        }
    }
    /// The most tile rows its micro-kernel takes: AVX2 six at 16 columns (twelve of sixteen `ymm` accumulate,
    /// two hold B, one the broadcast; four at 24 columns, which `fits` checks), AVX-512 fourteen (28 `zmm`
    /// accumulators at 32 columns, two for B and two for the broadcasts).
    pub fn max_rows(self) -> usize {
        match self {
            Simd::Avx2 => 6,
            Simd::Avx512 => 14,
        }
    }
    /// The tile widths (columns) its micro-kernels take: the full `tile`, 16 for GEMMs narrower than it, and
    /// the narrower column tails (`machine_code::tail_cols`), narrowest first.
    pub fn widths(self) -> &'static [usize] {
        match self {
            Simd::Avx2 => &[8, 16, 24],
            Simd::Avx512 => &[16, 32],
        }
    }
    /// Whether a tile of `rows` x `cols` keeps its accumulators, its B vectors and at least one broadcast
    /// register within the register file.
    pub fn tile_fits(self, rows: usize, cols: usize) -> bool {
        let vecs = cols / self.lanes();
        rows * vecs + vecs < self.registers()
    }
    /// Name used in reports.
    pub fn name(self) -> &'static str {
        match self {
            Simd::Avx2 => "avx2",
            Simd::Avx512 => "avx512",
        }
    }
}

/// The compile-time shape of one micro-kernel (strides in elements).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct MicroSpec {
    /// Register file.
    pub simd: Simd,
    /// Tile rows: the variant's full `mr`, or fewer for the last rows of a GEMM (1 for a GEMV).
    pub rows: usize,
    /// Tile columns: the variant's `nr` (`Simd::tile`), or 16 for a GEMM narrower than that
    /// (`machine_code::tile_cols`: an attention's scores over 16 keys), or for a column tail the narrowest
    /// width that holds it (`machine_code::tail_cols`: 8 or 16 on AVX2, 16 on AVX-512).
    pub cols: usize,
    /// Reduction length (≥ 1).
    pub k: usize,
    /// A's row and column strides.
    pub a_rs: usize,
    /// A's column stride (step per `p`).
    pub a_cs: usize,
    /// B's row stride (step per `p`).
    pub b_rs: usize,
    /// C's row stride.
    pub c_rs: usize,
    /// Add the block's sums to the values in C (a later K block) before the epilogue and store.
    pub accumulate: bool,
    /// Prefetch (`prefetcht0`) the B row this many steps of K ahead, each step (0: none). For B packed in
    /// panels streamed from memory once per inference (`GemmSpec::b_panel`): there the next K block and the next
    /// column block follow in the same stream, so the first tile of a block no longer waits on memory while the
    /// others run from L1. A prefetch never faults, so running past B's end is harmless.
    pub b_prefetch: usize,
    /// Prefetch (`prefetcht1`, into L2) one cache line per step of K from the pointer in `r9` (the sixth
    /// argument), advancing it: the caller points it at its share of the next K block of a panel-packed B.
    pub prefetch_next: bool,
    /// Prefetch (`prefetcht1`, into L2) A this many elements past the tile's current A pointer, each step of
    /// K (0: none). For A read transposed from activations (rows adjacent, a whole row of pixels per step of K:
    /// the transposed convolution GEMM), where `2·mr` fetches the lines of the tile two tiles further down
    /// while this one runs: lines another core wrote (the previous layer's other half) otherwise stall every
    /// step on a cross-core transfer, which the stride (a row of pixels) hides from the hardware prefetchers.
    /// With `a_k16`, once per block of 16 steps instead, a line per tile row, this many elements past the block
    /// (`machine_code::A_K16_PREFETCH` blocks ahead).
    pub a_prefetch: usize,
    /// Prefetch (`prefetcht1`, into L2) the next column block's part of B's row each step of K: for B read in
    /// place (activations `[K, pixels]`, rows a plane apart), whose block the unit's first tile otherwise
    /// fetches line by line from L3 while the other tiles find it in L2.
    pub b_next_cols: bool,
    /// Store every B vector loaded also at `r9` (the sixth argument), advancing it one tile row (`nr` floats) per
    /// step of K: the first tile of a block reads B in place and leaves a contiguous `[k][nr]` copy that the
    /// block's other tiles read instead (`b_rs = nr`). Not with `prefetch_next`, which uses `r9` too.
    pub b_copy: bool,
    /// Prefetch (`prefetcht1`, into L2) the tile's lines of C, and of the residual when the epilogue adds one,
    /// before the K loop: for C written across rows a plane apart (a convolution reading its activations in
    /// place), which no hardware prefetcher follows, so that the stores and residual loads after the loop find
    /// them in L2 instead of waiting on L3 at the end of every tile.
    pub c_prefetch: bool,
    /// The epilogue applied before the store (the last K block), if any.
    pub epi: Option<MicroEpi>,
    /// A's steps of K come in blocks of 16 adjacent elements, consecutive blocks `16·a_cs` apart (`k` a
    /// multiple of 16): A `[K/16][rows][16]` with `a_rs = 16`, as the channel-blocked depthwise kernel writes it
    /// (`GemmSpec::a_k16`). Otherwise every step of K moves A by `a_cs`.
    pub a_k16: bool,
    /// C's columns in blocks of 16, consecutive blocks this many elements apart (0: contiguous columns): C
    /// `[N/16][rows][16]` with `c_rs = 16`, the channel-blocked depthwise kernel's input (`GemmSpec::c_k16`).
    pub c_block: usize,
}

/// Element offset of column `col` within a row whose columns are contiguous (`block` 0) or in blocks of 16
/// `block` elements apart (`MicroSpec::c_block`, `MicroEpi::res_block`).
fn block_col(col: usize, block: usize) -> usize {
    match block {
        0 => col,
        b => col / 16 * b + col % 16,
    }
}

impl MicroEpi {
    /// Element offset of the residual's row `r`, column `col`, when the epilogue adds one.
    fn res_at(&self, r: usize, col: usize) -> Option<usize> {
        self.res_rs
            .map(|rs| r * rs + block_col(col, self.res_block))
    }
}

impl MicroSpec {
    /// Element offset of column `col` within a row of C.
    fn c_col(&self, col: usize) -> usize {
        block_col(col, self.c_block)
    }
}

/// Byte displacement that fits a 32-bit signed immediate.
fn disp(elems: usize) -> Option<i32> {
    i32::try_from(elems.checked_mul(4)?).ok()
}

/// Whether the strides fit the instruction encodings (32-bit displacements).
pub fn fits(m: &MicroSpec) -> bool {
    let (mr, nr) = (m.rows, m.cols);
    m.k >= 1
        && (1..=m.simd.max_rows()).contains(&mr)
        && m.simd.widths().contains(&nr)
        && m.simd.tile_fits(mr, nr)
        && !(m.b_copy && m.prefetch_next)
        && disp(m.a_rs * mr).is_some()
        && disp(m.a_cs).is_some()
        && (!m.a_k16 || (m.k.is_multiple_of(16) && m.a_cs.checked_mul(16).and_then(disp).is_some()))
        && disp(m.a_prefetch + 16 * mr).is_some()
        && disp(m.b_rs).is_some()
        && m.b_rs
            .checked_mul(m.b_prefetch)
            .and_then(|x| disp(x + nr))
            .is_some()
        && disp(m.c_rs * mr + m.c_col(nr - 1) + 1).is_some()
        && m.epi
            .and_then(|e| e.res_at(mr, nr - 1))
            .is_none_or(|at| disp(at + 1).is_some())
}

/// Assembles the micro-kernel; `Err` only on an assembler failure (a bundlec bug).
pub fn assemble(m: &MicroSpec) -> Result<Vec<u8>, String> {
    let e = |x: IcedError| x.to_string();
    if !fits(m) {
        return Err(format!("micro-kernel strides out of range: {m:?}"));
    }
    let (mr, nr) = (m.rows, m.cols);
    let lanes = m.simd.lanes();
    let vecs = nr / lanes;
    // Cache lines of one tile row.
    let lines = (nr * 4).div_ceil(64);
    let d = |x: usize| disp(x).unwrap_or(0);
    let mut a = CodeAssembler::new(64).map_err(e)?;
    // rdi = A, rsi = B, rdx = C, rcx = bias, r8 = residual, r9 = next-block prefetch pointer, r10 = p counter (r11
    // within a block of 16 with `a_k16`). Accumulator (r, v) is register r * vecs + v; B vectors
    // and the broadcast use the registers above the accumulators.
    let at = |r: usize, v: usize| d(r * m.c_rs + m.c_col(v * lanes));
    for r in 0..mr {
        for v in 0..vecs {
            let k = r * vecs + v;
            match m.simd {
                Simd::Avx2 => a.vxorps(YMM[k], YMM[k], YMM[k]).map_err(e)?,
                Simd::Avx512 => a.vpxord(ZMM[k], ZMM[k], ZMM[k]).map_err(e)?,
            }
        }
    }
    if m.c_prefetch {
        for r in 0..mr {
            for line in 0..lines {
                a.prefetcht1(byte_ptr(rdx + d(r * m.c_rs + m.c_col(line * 16))))
                    .map_err(e)?;
                if let Some(at) = m.epi.and_then(|x| x.res_at(r, line * 16)) {
                    a.prefetcht1(byte_ptr(r8 + d(at))).map_err(e)?;
                }
            }
        }
    }
    // r10 counts the steps of K, or with `a_k16` the blocks of 16 (r11 the steps within one).
    let mut outer = a.create_label();
    if m.a_k16 {
        a.mov(r10, (m.k / 16) as u64).map_err(e)?;
        a.set_label(&mut outer).map_err(e)?;
        if m.a_prefetch > 0 {
            // One line per row of the block `a_prefetch` elements ahead.
            for r in 0..mr {
                a.prefetcht1(byte_ptr(rdi + d(m.a_prefetch + r * 16)))
                    .map_err(e)?;
            }
        }
        a.mov(r11, 16u64).map_err(e)?;
    } else {
        a.mov(r10, m.k as u64).map_err(e)?;
    }
    let mut top = a.create_label();
    a.set_label(&mut top).map_err(e)?;
    if m.b_prefetch > 0 {
        for line in 0..lines {
            a.prefetcht0(byte_ptr(rsi + d(m.b_prefetch * m.b_rs + line * 16)))
                .map_err(e)?;
        }
    }
    if m.prefetch_next {
        a.prefetcht1(byte_ptr(r9)).map_err(e)?;
        a.add(r9, 64).map_err(e)?;
    }
    if m.a_prefetch > 0 && !m.a_k16 {
        a.prefetcht1(byte_ptr(rdi + d(m.a_prefetch))).map_err(e)?;
    }
    if m.b_next_cols {
        for line in 0..lines {
            a.prefetcht1(byte_ptr(rsi + d(nr + line * 16))).map_err(e)?;
        }
    }
    let nacc = mr * vecs;
    match m.simd {
        Simd::Avx2 => {
            let x = YMM[nacc + vecs];
            for v in 0..vecs {
                a.vmovups(YMM[nacc + v], ptr(rsi + d(v * lanes)))
                    .map_err(e)?;
                if m.b_copy {
                    a.vmovups(ptr(r9 + d(v * lanes)), YMM[nacc + v])
                        .map_err(e)?;
                }
            }
            for r in 0..mr {
                a.vbroadcastss(x, dword_ptr(rdi + d(r * m.a_rs)))
                    .map_err(e)?;
                for v in 0..vecs {
                    a.vfmadd231ps(YMM[r * vecs + v], x, YMM[nacc + v])
                        .map_err(e)?;
                }
            }
        }
        Simd::Avx512 => {
            // B in the top registers, the broadcasts rotating through up to eight between them and the
            // accumulators (two at 14 rows: register renaming keeps the steps independent).
            let breg = |v: usize| ZMM[32 - vecs + v];
            let nb = (32 - vecs - nacc).min(8);
            for v in 0..vecs {
                a.vmovups(breg(v), zmmword_ptr(rsi + d(v * lanes)))
                    .map_err(e)?;
                if m.b_copy {
                    a.vmovups(zmmword_ptr(r9 + d(v * lanes)), breg(v))
                        .map_err(e)?;
                }
            }
            for r in 0..mr {
                let x = ZMM[nacc + (r % nb)];
                a.vbroadcastss(x, dword_ptr(rdi + d(r * m.a_rs)))
                    .map_err(e)?;
                for v in 0..vecs {
                    a.vfmadd231ps(ZMM[r * vecs + v], x, breg(v)).map_err(e)?;
                }
            }
        }
    }
    let a_step = if m.a_k16 { 1 } else { m.a_cs };
    if a_step > 0 {
        a.add(rdi, d(a_step)).map_err(e)?;
    }
    if m.b_copy {
        a.add(r9, d(nr)).map_err(e)?;
    }
    if m.b_rs > 0 {
        a.add(rsi, d(m.b_rs)).map_err(e)?;
    }
    if m.a_k16 {
        a.dec(r11).map_err(e)?;
        a.jne(top).map_err(e)?;
        // From the block's 17th element to the next block's first.
        let jump = i32::try_from(16 * m.a_cs as i64 * 4 - 64).unwrap_or(0);
        if jump != 0 {
            a.add(rdi, jump).map_err(e)?;
        }
    }
    a.dec(r10).map_err(e)?;
    a.jne(if m.a_k16 { outer } else { top }).map_err(e)?;
    if m.accumulate {
        // The block's sums onto the earlier blocks' in C.
        for r in 0..mr {
            for v in 0..vecs {
                let k = r * vecs + v;
                match m.simd {
                    Simd::Avx2 => a.vaddps(YMM[k], YMM[k], ptr(rdx + at(r, v))).map_err(e)?,
                    Simd::Avx512 => a
                        .vaddps(ZMM[k], ZMM[k], zmmword_ptr(rdx + at(r, v)))
                        .map_err(e)?,
                }
            }
        }
    }
    if let Some(epi) = m.epi {
        epilogue(&mut a, m, &epi).map_err(e)?;
    }
    for r in 0..mr {
        for v in 0..vecs {
            let k = r * vecs + v;
            match m.simd {
                Simd::Avx2 => a.vmovups(ptr(rdx + at(r, v)), YMM[k]).map_err(e)?,
                Simd::Avx512 => a.vmovups(zmmword_ptr(rdx + at(r, v)), ZMM[k]).map_err(e)?,
            }
        }
    }
    a.vzeroupper().map_err(e)?;
    a.ret().map_err(e)?;
    a.assemble(0).map_err(e)
}

/// Applies the fused epilogue to the accumulators (registers above them are free after the K loop).
fn epilogue(a: &mut CodeAssembler, m: &MicroSpec, epi: &MicroEpi) -> Result<(), IcedError> {
    let (mr, nr) = (m.rows, m.cols);
    let lanes = m.simd.lanes();
    let vecs = nr / lanes;
    let d = |x: usize| disp(x).unwrap_or(0);
    match m.simd {
        Simd::Avx2 => {
            // Accumulators use ymm0..mr*vecs (at most 12); ymm12 lo, ymm13 hi, ymm15 the scale.
            let (lo, hi) = super::clamp_bounds_ymm(a, (epi.lo, epi.hi), [ymm12, ymm13])?;
            if let Some(bits) = epi.scale {
                super::broadcast_bits_ymm(a, ymm15, bits)?;
            }
            for r in 0..mr {
                for v in 0..vecs {
                    let x = YMM[r * vecs + v];
                    if epi.scale.is_some() {
                        a.vmulps(x, x, ymm15)?;
                    }
                    if epi.bias {
                        // ymm14 is also the clamp's scratch, so the bias is broadcast again per vector.
                        a.vbroadcastss(ymm14, dword_ptr(rcx + d(r)))?;
                        a.vaddps(x, x, ymm14)?;
                    }
                    if epi.bias_col {
                        a.vaddps(x, x, ptr(rcx + d(v * lanes)))?;
                    }
                    if let Some(at) = epi.res_at(r, v * lanes) {
                        a.vaddps(x, x, ptr(r8 + d(at)))?;
                    }
                    super::clamp_keep_nan(a, x, lo, hi)?;
                }
            }
        }
        Simd::Avx512 => {
            // Accumulators use zmm0..27 at most; zmm28 lo, zmm29 hi, zmm30 bias, zmm31 the scale.
            let (lo, hi) = super::clamp_bounds(a, (epi.lo, epi.hi), [zmm28, zmm29])?;
            if let Some(bits) = epi.scale {
                super::broadcast_bits(a, zmm31, bits)?;
            }
            for r in 0..mr {
                if epi.bias {
                    a.vbroadcastss(zmm30, dword_ptr(rcx + d(r)))?;
                }
                for v in 0..vecs {
                    let x = ZMM[r * vecs + v];
                    if epi.scale.is_some() {
                        a.vmulps(x, x, zmm31)?;
                    }
                    if epi.bias {
                        a.vaddps(x, x, zmm30)?;
                    }
                    if epi.bias_col {
                        a.vaddps(x, x, zmmword_ptr(rcx + d(v * lanes)))?;
                    }
                    if let Some(at) = epi.res_at(r, v * lanes) {
                        a.vaddps(x, x, zmmword_ptr(r8 + d(at)))?;
                    }
                    super::clamp_keep_nan(a, x, lo, hi)?;
                }
            }
        }
    }
    Ok(())
}

#[cfg(all(test, target_arch = "x86_64"))]
mod tests;
