//! The 2-D block transpose of 32-bit elements, the gathering Transpose nodes' kernel (`ops::data::block_plan`;
//! an attention's `Kᵀ`): `dst[c][r] = src[r][c]` for `r < rows`, `c < cols`, both strided, in lanes x lanes
//! blocks transposed in registers (`Isa::transpose`). A column tail is loaded and a row tail stored so that
//! nothing outside the two matrices is read or written: that tail handling is each ISA's (`Tails`: mask
//! registers on AVX-512, `vmaskmovps` under a mask after the code and `store_head_ymm` on AVX2, in `avx512.rs`
//! and `avx2.rs`); the loops and the block are written once here. `fn(src: *const u32, dst: *mut u32)`
//! (System V). The Cranelift transpose took 25.8 µs for a 128-token attention's `Kᵀ` (4 heads of 64), ten times
//! the AVX-512 kernel's 2.6.

pub mod avx2;
pub mod avx512;

use super::isa::{Isa, R};
use crate::kernel::data::BlockTranspose;
use iced_x86::code_asm::*;

/// An ISA's handling of a block transpose's tails.
pub trait Tails: Isa {
    /// What the kernel sets up once and the blocks use.
    type State: Copy;
    /// Before the loops.
    fn setup(a: &mut CodeAssembler, s: &BlockTranspose) -> Result<Self::State, IcedError>;
    /// At the start of a block whose column count is the tail.
    fn prep(a: &mut CodeAssembler, st: Self::State) -> R;
    /// Loads a source row's tail columns into `v`.
    fn load_tail(a: &mut CodeAssembler, v: Self::V, disp: i32, st: Self::State) -> R;
    /// Stores output row `v`'s first `lanes` (all of them, or the row tail).
    fn store_row(a: &mut CodeAssembler, disp: i32, v: Self::V, lanes: usize, st: Self::State) -> R;
    /// After the code.
    fn finish(a: &mut CodeAssembler, st: &mut Self::State, s: &BlockTranspose) -> R;
}

/// Assembles a `BlockTranspose` on ISA `I`; `Err` when a stride does not fit a 32-bit displacement.
fn assemble<I: Tails>(s: &BlockTranspose) -> Result<Vec<u8>, String> {
    let e = |x: IcedError| x.to_string();
    let mut a = CodeAssembler::new(64).map_err(e)?;
    let mut st = I::setup(&mut a, s).map_err(e)?;
    let tail_rows = s.rows % I::LANES;
    block_loops(
        &mut a,
        s,
        I::LANES,
        |a, loads, stores, tail_cols, tail_row| {
            if tail_cols {
                I::prep(a, st)?;
            }
            for (r, &off) in loads.iter().enumerate() {
                if tail_cols {
                    I::load_tail(a, I::v(r), off, st)?;
                } else {
                    I::load(a, I::v(r), r10 + off)?;
                }
            }
            let cols = I::transpose(a)?;
            let lanes = if tail_row { tail_rows } else { I::LANES };
            for (c, &off) in stores.iter().enumerate() {
                I::store_row(a, off, I::v(cols + c), lanes, st)?;
            }
            Ok(())
        },
    )?;
    a.vzeroupper().map_err(e)?;
    a.ret().map_err(e)?;
    I::finish(&mut a, &mut st, s).map_err(e)?;
    a.assemble(0).map_err(e)
}

/// The loops of a `BlockTranspose` in `w`x`w` blocks (`w` = the ISA's lanes), each
/// emitted by `block(a, load displacements, store displacements, tail columns, tail rows)`: the full column blocks loop at run time, then the tail column block once; within
/// each, the full row blocks loop, then the tail row block. `r8` / `r9`: the current column block's first
/// source element and output row; `r10` / `r11`: the current block; `rdx` and `rcx` count.
fn block_loops(
    a: &mut CodeAssembler,
    s: &BlockTranspose,
    w: usize,
    mut block: impl FnMut(&mut CodeAssembler, &[i32], &[i32], bool, bool) -> Result<(), IcedError>,
) -> Result<(), String> {
    let e = |x: IcedError| x.to_string();
    let disp = |elems: usize| crate::x86::disp("block transpose", elems);
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

#[cfg(all(test, target_arch = "x86_64", target_os = "linux"))]
pub(super) mod tests {
    use super::*;
    use crate::x86::test_exec::exec;

    /// Checks a block transpose `build(spec)` over row and column counts in every class of 8 and 16: every output
    /// element is its source's bits, and nothing else in the output is written.
    pub(super) fn check_block_transposes(build: impl Fn(&BlockTranspose) -> Vec<u8>) {
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
