//! AVX-512 in-register 16x16 transposes, in two kernels.
//!
//! `assemble`: the transposing epilogue of a convolution computed transposed (`lower/cnn/transposed.rs`): the GEMM wrote
//! `Cᵀ [P, M]` (pixels as rows, so narrow planes waste no tile columns, its row count padded to a multiple of
//! 16); this kernel writes 16 output channel rows `out[c0 .. c0 + 16][0..P]` from 16x16 blocks of `Cᵀ`
//! transposed in registers (`vunpck[lh]ps`, `vunpck[lh]pd`, two rounds of `vshuff32x4`), adding the residual
//! rows and applying the clamp of the fused activation (NaN kept) when the GEMM could not — the same operations
//! in the same order as the untransposed epilogue, so results are bitwise equal. (A `vgatherdps` version ran at
//! about 6 cycles per element on this machine's Zen 5: too slow to pay.)
//! `fn(src: *const f32, out: *mut f32, residual: *const f32, pixels: u64)` (System V): `src` is `Cᵀ`'s element
//! (0, c0), `out` and `residual` channel c0's rows.
//!
//! `assemble_block`: a whole 2-D transpose of 32-bit elements, the gathering Transpose nodes' kernel
//! (`ops::data::block_plan`; an attention's `Kᵀ`): `dst[c][r] = src[r][c]` for `r < rows`, `c < cols`, both
//! strided, in 16x16 blocks with masked loads for a column tail and masked stores for a row tail, so nothing
//! outside the two matrices is read or written. `fn(src: *const u32, dst: *mut u32)` (System V).

use super::ZMM;
use iced_x86::code_asm::*;

/// The compile-time shape of a transposing epilogue.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TransposeOut {
    /// `Cᵀ`'s row stride (the channel count `M`).
    pub m: usize,
    /// Output row length (the pixel count `P`).
    pub p: usize,
    /// Add the residual row.
    pub residual: bool,
    /// Lower clamp (f32 bits).
    pub lo: Option<u32>,
    /// Upper clamp (f32 bits).
    pub hi: Option<u32>,
}

/// Assembles the kernel; `Err` when the strides do not fit 32-bit displacements.
pub fn assemble(s: &TransposeOut) -> Result<Vec<u8>, String> {
    let e = |x: IcedError| x.to_string();
    let disp = |floats: usize| super::disp("transposing epilogue", floats);
    let rows: Vec<i32> = (0..16).map(|r| disp(r * s.m)).collect::<Result<_, _>>()?;
    let outs: Vec<i32> = (0..16).map(|c| disp(c * s.p)).collect::<Result<_, _>>()?;
    let block = disp(16 * s.m)?;
    let z = |i: usize| ZMM[i];
    let mut a = CodeAssembler::new(64).map_err(e)?;
    // rdi: Cᵀ at (p0, c0); rsi: out at (c0, p0); rdx: residual at (c0, p0); rcx: pixels (moved to r8).
    // r8: pixels left (rcx is block_mask's scratch).
    a.mov(r8, rcx).map_err(e)?;
    let mut top = a.create_label();
    let mut done = a.create_label();
    a.set_label(&mut top).map_err(e)?;
    a.test(r8, r8).map_err(e)?;
    a.jz(done).map_err(e)?;
    // k1 = the pixels of this block.
    super::block_mask(&mut a, k1, r8).map_err(e)?;
    // 16 pixel rows of 16 channels (rows past the pixels are the scratch's padding: loaded, never stored).
    for (r, &off) in rows.iter().enumerate() {
        a.vmovups(z(r), zmmword_ptr(rdi + off)).map_err(e)?;
    }
    super::transpose16(&mut a).map_err(e)?;
    // zmm27 lo, zmm28 hi, the clamp's bounds (the shuffle temporaries are dead now).
    for (reg, c) in [(zmm27, s.lo), (zmm28, s.hi)] {
        if let Some(bits) = c {
            super::broadcast_bits(&mut a, reg, bits).map_err(e)?;
        }
    }
    for (c, &off) in outs.iter().enumerate() {
        let x = z(c);
        if s.residual {
            a.vaddps(x.k1().z(), x, zmmword_ptr(rdx + off)).map_err(e)?;
        }
        super::clamp_keep_nan(&mut a, x, s.lo.map(|b| (zmm27, b)), s.hi.map(|_| zmm28))
            .map_err(e)?;
        a.vmovups(zmmword_ptr(rsi + off).k1(), x).map_err(e)?;
    }
    a.add(rdi, block).map_err(e)?;
    a.add(rsi, 64).map_err(e)?;
    if s.residual {
        a.add(rdx, 64).map_err(e)?;
    }
    a.sub(r8, 16).map_err(e)?;
    a.jbe(done).map_err(e)?;
    a.jmp(top).map_err(e)?;
    a.set_label(&mut done).map_err(e)?;
    a.vzeroupper().map_err(e)?;
    a.ret().map_err(e)?;
    a.assemble(0).map_err(e)
}

/// The compile-time shape of a 2-D block transpose: `dst[c · ld + r] = src[r · ls + c]`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BlockTranspose {
    /// Source rows (the output's row length).
    pub rows: usize,
    /// Source row length (the output's row count).
    pub cols: usize,
    /// Source row stride (elements).
    pub ls: usize,
    /// Output row stride (elements).
    pub ld: usize,
}

/// Assembles a `BlockTranspose`; `Err` when a stride does not fit a 32-bit displacement.
pub fn assemble_block(s: &BlockTranspose) -> Result<Vec<u8>, String> {
    let e = |x: IcedError| x.to_string();
    let mut a = CodeAssembler::new(64).map_err(e)?;
    // k1: the tail column block's columns (loads); k2: the tail row block's rows (stores).
    for (k, n) in [(k1, s.cols % 16), (k2, s.rows % 16)] {
        if n > 0 {
            a.mov(eax, (1u32 << n) - 1).map_err(e)?;
            a.kmovw(k, eax).map_err(e)?;
        }
    }
    block_loops(&mut a, s, 16, block)?;
    a.vzeroupper().map_err(e)?;
    a.ret().map_err(e)?;
    a.assemble(0).map_err(e)
}

/// The loops of a `BlockTranspose` in `w`x`w` blocks (16 with `zmm`, 8 with `ymm`, `transpose_avx2.rs`), each
/// emitted by `block(a, load displacements, store displacements, tail columns, tail rows)`: the full column blocks loop at run time, then the tail column block once; within
/// each, the full row blocks loop, then the tail row block. `r8` / `r9`: the current column block's first
/// source element and output row; `r10` / `r11`: the current block; `rdx` and `rcx` count.
pub(super) fn block_loops(
    a: &mut CodeAssembler,
    s: &BlockTranspose,
    w: usize,
    mut block: impl FnMut(&mut CodeAssembler, &[i32], &[i32], bool, bool) -> Result<(), IcedError>,
) -> Result<(), String> {
    let e = |x: IcedError| x.to_string();
    let disp = |elems: usize| super::disp("block transpose", elems);
    let loads: Vec<i32> = (0..w).map(|r| disp(r * s.ls)).collect::<Result<_, _>>()?;
    let stores: Vec<i32> = (0..w).map(|c| disp(c * s.ld)).collect::<Result<_, _>>()?;
    let (row_step, col_step) = (disp(w * s.ls)?, disp(w * s.ld)?);
    let bytes = (4 * w) as i32;
    let mut col_blocks: Vec<(usize, bool)> = Vec::new();
    if s.cols >= w {
        col_blocks.push((w, false));
    }
    if !s.cols.is_multiple_of(w) {
        col_blocks.push((s.cols % w, true));
    }
    a.mov(r8, rdi).map_err(e)?;
    a.mov(r9, rsi).map_err(e)?;
    for (nc, load_mask) in col_blocks {
        let full = !load_mask;
        let mut col_top = a.create_label();
        if full {
            a.mov(rdx, (s.cols / w) as u64).map_err(e)?;
            a.set_label(&mut col_top).map_err(e)?;
        }
        a.mov(r10, r8).map_err(e)?;
        a.mov(r11, r9).map_err(e)?;
        if s.rows >= w {
            let mut row_top = a.create_label();
            a.mov(rcx, (s.rows / w) as u64).map_err(e)?;
            a.set_label(&mut row_top).map_err(e)?;
            block(a, &loads, &stores[..nc], load_mask, false).map_err(e)?;
            a.add(r10, row_step).map_err(e)?;
            a.add(r11, bytes).map_err(e)?;
            a.dec(rcx).map_err(e)?;
            a.jnz(row_top).map_err(e)?;
        }
        if !s.rows.is_multiple_of(w) {
            block(a, &loads[..s.rows % w], &stores[..nc], load_mask, true).map_err(e)?;
        }
        if full {
            a.add(r8, bytes).map_err(e)?;
            a.add(r9, col_step).map_err(e)?;
            a.dec(rdx).map_err(e)?;
            a.jnz(col_top).map_err(e)?;
        }
    }
    Ok(())
}

/// One block at `r10` (source) / `r11` (output): `loads.len()` source rows (the others are left as they are:
/// they become output columns that are not stored), `stores.len()` output rows; loads under `k1`, stores
/// under `k2` where asked.
fn block(
    a: &mut CodeAssembler,
    loads: &[i32],
    stores: &[i32],
    load_mask: bool,
    store_mask: bool,
) -> Result<(), IcedError> {
    for (r, &off) in loads.iter().enumerate() {
        if load_mask {
            a.vmovups(ZMM[r].k1().z(), zmmword_ptr(r10 + off))?;
        } else {
            a.vmovups(ZMM[r], zmmword_ptr(r10 + off))?;
        }
    }
    super::transpose16(a)?;
    for (c, &off) in stores.iter().enumerate() {
        if store_mask {
            a.vmovups(zmmword_ptr(r11 + off).k2(), ZMM[c])?;
        } else {
            a.vmovups(zmmword_ptr(r11 + off), ZMM[c])?;
        }
    }
    Ok(())
}

#[cfg(all(test, target_arch = "x86_64", target_os = "linux"))]
pub(crate) mod tests {
    use super::super::test_exec::exec;
    use super::*;

    /// Every pixel count class up to 40 (full blocks, tails), with and without the residual and the clamp,
    /// bitwise against `clamp(Cᵀ[p][c] + R[c][p])` (NaN kept) for 16 channels; nothing stored past the rows.
    #[test]
    fn blocks_match_the_transpose() {
        if !std::arch::is_x86_feature_detected!("avx512f") {
            eprintln!("SKIPPED: AVX-512 transposing epilogue (this CPU or OS cannot run it)");
            return;
        }
        check_transposing_epilogue(|s| assemble(s).unwrap(), 16);
    }

    /// [`blocks_match_the_transpose`]'s cases for a transposing epilogue `build` that writes `channels` rows per
    /// call.
    pub(crate) fn check_transposing_epilogue(
        build: impl Fn(&TransposeOut) -> Vec<u8>,
        channels: usize,
    ) {
        let m = 48;
        for (residual, clamp) in [(false, false), (true, true), (true, false)] {
            for p in [0usize, 1, 15, 16, 17, 33, 40] {
                let spec = TransposeOut {
                    m,
                    p,
                    residual,
                    lo: clamp.then(|| 0.0f32.to_bits()),
                    hi: clamp.then(|| 6.0f32.to_bits()),
                };
                type F = extern "sysv64" fn(*const f32, *mut f32, *const f32, u64);
                // SAFETY: the assembled kernel's System V signature.
                let f: F = unsafe { std::mem::transmute(exec(&build(&spec))) };
                let rows = p.next_multiple_of(16).max(16);
                let mut ct: Vec<f32> = (0..rows * m)
                    .map(|i| ((i * 37 % 101) as f32 - 50.0) * 0.13)
                    .collect();
                if p > 3 {
                    ct[3 * m + 21] = f32::NAN;
                }
                let r: Vec<f32> = (0..16 * p + 16).map(|i| (i as f32 - 7.0) * 0.25).collect();
                for c0 in (0..m).step_by(channels) {
                    let mut out = vec![-1.0f32; channels * p + 16];
                    let res = if residual {
                        r.as_ptr()
                    } else {
                        std::ptr::null()
                    };
                    f(ct[c0..].as_ptr(), out.as_mut_ptr(), res, p as u64);
                    for c in 0..channels {
                        for q in 0..p {
                            let mut want = ct[q * m + c0 + c];
                            if residual {
                                want += r[c * p + q];
                            }
                            if clamp && !want.is_nan() {
                                want = want.clamp(0.0, 6.0);
                            }
                            let got = out[c * p + q];
                            assert!(
                                got.to_bits() == want.to_bits() || (got.is_nan() && want.is_nan()),
                                "p {p} c {} q {q}: {got} vs {want}",
                                c0 + c
                            );
                        }
                    }
                    assert!(
                        out[channels * p..].iter().all(|&v| v == -1.0),
                        "wrote past the rows"
                    );
                }
            }
        }
    }

    /// Row and column counts in every class (under a block, whole blocks, tails, both), with strides wider
    /// than the rows: every output element is its source's bits, and nothing else in the output is written.
    #[test]
    fn block_transposes_match_the_reference() {
        if !std::arch::is_x86_feature_detected!("avx512f") {
            eprintln!("SKIPPED: AVX-512 block transpose (this CPU or OS cannot run it)");
            return;
        }
        check_block_transposes(|s| assemble_block(s).unwrap());
    }

    /// Checks the block transposes `build(spec)` (this file's and `transpose_avx2.rs`'s) over row and column
    /// counts in every class of 8 and 16.
    pub(crate) fn check_block_transposes(build: impl Fn(&BlockTranspose) -> Vec<u8>) {
        for (rows, cols) in [
            (1, 1),
            (5, 16),
            (16, 5),
            (16, 32),
            (32, 16),
            (17, 33),
            (40, 3),
            (3, 40),
            (8, 8),
            (9, 7),
            (7, 9),
            (24, 13),
        ] {
            let (ls, ld) = (cols + 3, rows + 5);
            let spec = BlockTranspose { rows, cols, ls, ld };
            type F = extern "sysv64" fn(*const u32, *mut u32);
            // SAFETY: the assembled kernel's System V signature.
            let f: F = unsafe { std::mem::transmute(exec(&build(&spec))) };
            // The source ends right after its last element, so that a read past it would be one past the
            // rows (caught by the wrong-element check, not a fault).
            let src: Vec<u32> = (0..(rows - 1) * ls + cols)
                .map(|i| i as u32 * 7 + 1)
                .collect();
            let mut dst = vec![u32::MAX; (cols - 1) * ld + rows + 8];
            f(src.as_ptr(), dst.as_mut_ptr());
            for (i, &v) in dst.iter().enumerate() {
                let (c, r) = (i / ld, i % ld);
                let want = if c < cols && r < rows {
                    src[r * ls + c]
                } else {
                    u32::MAX
                };
                assert_eq!(v, want, "rows {rows} cols {cols}: output ({c}, {r})");
            }
        }
    }
}
