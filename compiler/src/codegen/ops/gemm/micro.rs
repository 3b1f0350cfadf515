//! The machine-code path of a GEMM unit (`emit_with`): the micro-kernels over a unit's full `mr`-row tiles, one
//! K block at a time on B in place or a column tail's zero-padded panel, or the AVX2 column strip over the whole
//! tail; then the Cranelift epilogue over C where the micro-kernels did not fuse it.

use super::tile::{a_row_el, b_col_el, elem, epilogue, epilogue_ptrs, slot_of};
use crate::codegen::builder::{Kb, LANES};
use crate::ir::Activation;
use crate::kernel::gemm::GemmSpec;
use cranelift_codegen::ir::condcodes::IntCC;
use cranelift_codegen::ir::types::F32;
use cranelift_codegen::ir::{FuncRef, InstBuilder, Value};

/// The full `mr`-row tiles of rows `[i_lo, i_hi)` at column block `j0` by the micro-kernels: per K block one
/// call per tile on B in place (C accumulates across blocks), the last block with the fused epilogue when there
/// is one; else the epilogue over C afterwards (skipped when there is nothing to apply).
/// A column-tail block (`cols < nr`) packs zeros beyond its columns up to the tail tile's `nt` and lets the
/// micro-kernels store into the stack buffer `slots.1` (row stride `nt`), whose valid columns the epilogue then
/// writes to C.
#[allow(clippy::too_many_arguments)] // the row range, column block, kernels and buffers
pub(super) fn micro_rows(
    kb: &mut Kb,
    s: &GemmSpec,
    offs: &[Value; 4],
    (i_lo, i_hi): (Value, Value),
    j0: Value,
    cols: usize,
    mk: &Micro,
    slots: (
        cranelift_codegen::ir::StackSlot,
        cranelift_codegen::ir::StackSlot,
    ),
) {
    use cranelift_codegen::ir::types::I64;
    let (mr, nr, kc) = (mk.mr, mk.nr, mk.kc);
    let tail = cols < nr;
    // The column tail's panel and buffer width.
    let nt = mk.nt;
    let slot = slots.0;
    let ctemp = kb.b.ins().stack_addr(I64, slots.1, 0);
    let (c_stride, funcs, copies) = if tail {
        (nt, mk.funcs[1], [None; 5])
    } else {
        (s.c.rs, mk.funcs[0], mk.funcs[3])
    };
    let a0 = kb.b.ins().iadd_imm_s(offs[0], s.a.off as i64);
    let b0 = b_col_el(kb, s, j0, offs[1]);
    let c0 = elem(kb, &s.c, i_lo, j0, offs[2]);
    let (a_base, b_base, c_base) = (kb.arg(s.a.arg), kb.arg(s.b.arg), kb.arg(s.c.arg));
    let panel = kb.b.ins().stack_addr(I64, slot, 0);
    // Where the tile `di` rows below `i_lo` is stored: C, or the column-tail buffer (row stride nt).
    let tile_out = |kb: &mut Kb, di: Value| {
        if tail {
            let off = kb.b.ins().imul_imm_s(di, (nt * 4) as i64);
            kb.b.ins().iadd(ctemp, off)
        } else {
            let ci = kb.b.ins().imul_imm_s(di, s.c.rs as i64);
            let ce = kb.b.ins().iadd(c0, ci);
            kb.addr(c_base, ce, 4)
        }
    };
    // One K block starting at element k0 (a Value) of depth `depth` with micro-kernel `f` (slot `slot`).
    // With `fused`, the micro-kernel also applies the epilogue and gets the bias row and residual tile pointers.
    let block = |kb: &mut Kb, k0: Value, depth: usize, slot: usize, fused: bool| {
        let Some(f) = funcs[slot] else { return };
        let copy = copies[slot];
        let kb_el = kb.b.ins().imul_imm_s(k0, s.b_k_step() as i64);
        let src0 = kb.b.ins().iadd(b0, kb_el);
        let src0 = kb.addr(b_base, src0, 4);
        // A full column block's micro-kernels read B in place (row stride s.b.rs); a column tail packs
        // B[k0 .. k0 + depth][j0 .. j0 + cols] into the zero-padded panel, row after row.
        if tail {
            let src = kb.var(I64, src0);
            let dst = kb.var(I64, panel);
            kb.for_const(0, depth, 1, |kb, _| {
                let (sp, dp) = (kb.b.use_var(src), kb.b.use_var(dst));
                crate::codegen::ops::conv::copy_f32(kb, sp, dp, cols);
                let z = kb.fconst(F32, 0.0);
                for c in cols..nt {
                    kb.store(z, dp, (c * 4) as i64);
                }
                let sp2 = kb.b.ins().iadd_imm_s(sp, (s.b_k_step() * 4) as i64);
                kb.b.def_var(src, sp2);
                let dp2 = kb.b.ins().iadd_imm_s(dp, (nt * 4) as i64);
                kb.b.def_var(dst, dp2);
            });
        }
        // With a copying variant the first tile reads B in place and leaves the panel the others read.
        let b_ptr = if tail || copy.is_some() { panel } else { src0 };
        // The next K block of B (the next column block's first after the last): tiles of even index
        // prefetch its first half, odd ones its second (one line per step of K each).
        let next = mk.prefetch_next.then(|| {
            let next =
                kb.b.ins()
                    .iadd_imm_s(src0, (depth * s.b_k_step() * 4) as i64);
            (next, (depth * s.b_k_step() * 2) as i64)
        });
        let ka = kb.b.ins().imul_imm_s(k0, s.a_steps().1 as i64);
        let call = |kb: &mut Kb, i: Value, f: FuncRef, b_ptr: Value, pf: Option<Value>| {
            let di = kb.b.ins().isub(i, i_lo);
            let ai = a_row_el(kb, s, i);
            let ae = kb.b.ins().iadd(a0, ai);
            let ae = kb.b.ins().iadd(ae, ka);
            let ap = kb.addr(a_base, ae, 4);
            let cp = tile_out(kb, di);
            let (bp, rp) = if fused {
                epilogue_ptrs(kb, s, offs, i, j0)
            } else {
                let z = kb.iconst(0);
                (z, z)
            };
            // Without prefetch_next or a copy the sixth argument is unused.
            let pf = match (pf, next) {
                (Some(pf), _) => pf,
                (None, Some((next, half))) => {
                    let parity = kb.b.ins().udiv_imm_u(di, mr as i64);
                    let parity = kb.b.ins().band_imm_u(parity, 1);
                    let off = kb.b.ins().imul_imm_s(parity, half);
                    kb.b.ins().iadd(next, off)
                }
                (None, None) => b_ptr,
            };
            kb.b.ins().call(f, &[ap, b_ptr, cp, bp, rp, pf]);
        };
        let rest = match copy {
            Some(fc) => {
                let first_end = kb.b.ins().iadd_imm_s(i_lo, mr as i64);
                let c =
                    kb.b.ins()
                        .icmp(IntCC::SignedLessThanOrEqual, first_end, i_hi);
                kb.if_else(c, |kb| call(kb, i_lo, fc, src0, Some(panel)), |_| {});
                first_end
            }
            None => i_lo,
        };
        kb.for_range(rest, i_hi, mr as i64, |kb, i| call(kb, i, f, b_ptr, None));
    };
    if let Some(f) = mk.strip.filter(|_| tail) {
        // The column strip: the whole tail of the row group in one call, over all of K.
        let ai = a_row_el(kb, s, i_lo);
        let ae = kb.b.ins().iadd(a0, ai);
        let ap = kb.addr(a_base, ae, 4);
        let bp = kb.addr(b_base, b0, 4);
        // Row groups are whole panels (`emit_with`).
        let rows = kb.b.ins().isub(i_hi, i_lo);
        let panels = kb.b.ins().udiv_imm_u(rows, STRIP_PANEL as i64);
        kb.b.ins().call(f, &[ap, bp, ctemp, panels]);
    } else {
        let (full, k_tail) = (s.k / kc, s.k % kc);
        let [first_full, acc_full, _, _, last] = funcs;
        // The fused variant replaces the last block's call (full column blocks only).
        let last = if tail { None } else { last };
        let n_blocks = full + usize::from(k_tail > 0);
        let blocks_before_last = if last.is_some() {
            n_blocks - 1
        } else {
            n_blocks
        };
        let full_before_last = blocks_before_last.min(full);
        if full_before_last > 0 {
            if first_full.is_some() {
                let k0 = kb.iconst(0);
                block(kb, k0, kc, 0, false);
            }
            if acc_full.is_some() {
                kb.for_const(kc, full_before_last * kc, kc, |kb, k0| {
                    block(kb, k0, kc, 1, false)
                });
            }
        }
        if blocks_before_last > full {
            // The K tail block, without the epilogue.
            let k0 = kb.iconst((full * kc) as i64);
            block(kb, k0, k_tail, if full > 0 { 3 } else { 2 }, false);
        }
        if last.is_some() {
            let k0 = kb.iconst((blocks_before_last * kc) as i64);
            let depth = if k_tail > 0 { k_tail } else { kc };
            block(kb, k0, depth, 4, true);
            return;
        }
    }
    let trivial =
        s.alpha == 1.0 && s.bias.is_none() && s.residual.is_none() && s.act == Activation::None;
    if trivial && !tail {
        return;
    }
    kb.for_range(i_lo, i_hi, mr as i64, |kb, i| {
        let di = kb.b.ins().isub(i, i_lo);
        let c_ptr = tile_out(kb, di);
        let nslots = cols / LANES + cols % LANES;
        let vals: Vec<Vec<Value>> = (0..mr)
            .map(|r| {
                (0..nslots)
                    .map(|c| {
                        let (ty, col) = slot_of(cols, c);
                        kb.load(ty, c_ptr, ((r * c_stride + col) * 4) as i64)
                    })
                    .collect()
            })
            .collect();
        epilogue(kb, s, offs, i, j0, cols, &vals);
    });
}

/// The machine-code micro-kernels of one GEMM (`x86/gemm_x86.rs`): tile shape, K block depth, and the
/// functions `f(a, b, c, bias, residual)` for (KC block, zeroing), (KC block, accumulating), (last block,
/// zeroing), (last block, accumulating) and the last block with the epilogue fused; `None` where the GEMM does
/// not need that variant.
#[derive(Debug, Clone, Copy)]
pub struct Micro {
    /// Tile rows.
    pub mr: usize,
    /// Tile columns.
    pub nr: usize,
    /// The column-tail tile's columns (at most `nr`): the width of its zero-padded panel of B and of its stack
    /// buffer of C.
    pub nt: usize,
    /// K block depth.
    pub kc: usize,
    /// The variants take a pointer into the next K block of B to prefetch (`MicroSpec::prefetch_next`).
    pub prefetch_next: bool,
    /// The four variants storing into C (plus, in slot 4, the last K block with the epilogue fused), the four
    /// storing into the column-tail buffer (row stride `nt`), the five of the last `m % mr` rows of full
    /// column blocks, and, where B is copied (`MicroSpec::b_copy`), the five of a block's first tile, which read
    /// B in place and leave the `[k][nr]` panel that the first set then reads. Each takes (A, B, C, bias row,
    /// residual tile, the part of the next K block of B to prefetch into L2 when it was assembled with
    /// `prefetch_next`, or the panel to copy B into).
    pub funcs: [[Option<FuncRef>; 5]; 4],
    /// The column strip (`x86/gemm_strip_avx2.rs`): the column tail of a whole row group in one call
    /// `f(a, b, c, panels)`, in place of set 1.
    pub strip: Option<FuncRef>,
}

/// Rows per panel of a column strip.
pub(super) const STRIP_PANEL: usize = crate::x86::gemm_strip_avx2::PANEL;
