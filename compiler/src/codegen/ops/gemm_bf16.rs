//! The bf16 GEMM (`--precision bf16`, `kernel/gemm_bf16.rs`) on AVX-512 BF16: the conversion of A's rows to
//! bf16 (`Body::ToBf16`, one call of the machine-code row converter per row) and the GEMM over units of (batch
//! entry, 32-column panel, 64 rows), each 8-row tile one call of the micro-kernel (`x86/gemm_bf16.rs`), which
//! applies the whole epilogue. Both are machine code only.

use crate::codegen::builder::Kb;
use crate::kernel::gemm_bf16::{panel_bytes, GemmBf16Spec, NR, ROWS_PER_UNIT};
use crate::kernel::Role;
use cranelift_codegen::ir::condcodes::IntCC;
use cranelift_codegen::ir::{FuncRef, InstBuilder, Value};

/// Rows per unit of the conversion kernel.
pub const CONVERT_ROWS: usize = 16;

/// The micro-kernels a bf16 GEMM calls, `[full rows | tail rows][full columns | tail columns]`; `None` where
/// the GEMM has no such tile.
pub type Bf16Micro = [[Option<FuncRef>; 2]; 2];

/// Emits the conversion of `rows` rows of `k` floats (X, row stride `src_rs` floats) into bf16 rows of `kp`
/// (Out, scratch), K padded with a zero.
pub fn emit_to_bf16(kb: &mut Kb, [rows, k, src_rs, kp]: [usize; 4], tasks: u32, f: FuncRef) {
    let units = kb.task_range(rows.div_ceil(CONVERT_ROWS), tasks);
    let (px, po) = (kb.arg(Role::X), kb.arg(Role::Out));
    let n = kb.iconst(k as i64);
    let pad = kb.iconst((kp - k) as i64);
    kb.for_unit_items(units, CONVERT_ROWS, rows, |kb, r| {
        let src = kb.addr(px, r, (src_rs * 4) as i64);
        let dst = kb.addr(po, r, (kp * 2) as i64);
        kb.b.ins().call(f, &[src, dst, n, pad]);
    });
}

/// Emits the conversion of `c` channels of `p` pixels in f32 channel blocks (X) into bf16 rows of `c` (Out):
/// one call of the machine-code converter per 16-channel block, `f(block's first pixel, its 16 columns)`.
pub fn emit_blocks_to_bf16(kb: &mut Kb, [c, p]: [usize; 2], tasks: u32, f: FuncRef) {
    let (lo, hi) = kb.task_range(c / 16, tasks);
    let (px, po) = (kb.arg(Role::X), kb.arg(Role::Out));
    kb.for_range(lo, hi, 1, |kb, b| {
        let src = kb.addr(px, b, (p * 64) as i64);
        let dst = kb.addr(po, b, 32);
        kb.b.ins().call(f, &[src, dst]);
    });
}

/// Emits the bf16 GEMM.
pub fn emit_gemm(kb: &mut Kb, s: &GemmBf16Spec, tasks: u32, micro: &Bf16Micro) {
    let groups = s.m.div_ceil(ROWS_PER_UNIT);
    let (lo, hi) = kb.task_range(s.units(), tasks);
    let (a0, b0, c0) = (kb.arg(Role::A), kb.arg(Role::B), kb.arg(Role::Out));
    let bias = (s.bias || s.bias_row).then(|| kb.arg(Role::Bias));
    let res = s.residual.then(|| kb.arg(Role::Residual));
    let panel_size = panel_bytes(s.kp());
    let tail_cols = !s.n.is_multiple_of(NR);
    let mr = s.mr();
    let per_entry = s.units() / s.batch;
    kb.for_range(lo, hi, 1, |kb, u| {
        let (pa, pb, pc, u) = if s.batch > 1 {
            let (e, u) = kb.divmod(u, per_entry);
            let pa = kb.addr(a0, e, s.a_batch_bytes() as i64);
            let pb = kb.addr(b0, e, s.b_batch_bytes() as i64);
            let pc = kb.addr(c0, e, (s.c_bs * 4) as i64);
            (pa, pb, pc, u)
        } else {
            (a0, b0, c0, u)
        };
        let (panel, g) = kb.divmod(u, groups);
        let b = kb.addr(pb, panel, panel_size as i64);
        let j0 = kb.b.ins().imul_imm_s(panel, NR as i64);
        let i0 = kb.b.ins().imul_imm_s(g, ROWS_PER_UNIT as i64);
        let bias_at = bias.filter(|_| s.bias).map(|p| kb.addr(p, j0, 4));
        let run = |kb: &mut Kb, ck: usize| {
            // Full 8-row tiles, then the tail rows of the last group.
            let tile = |kb: &mut Kb, i: Value, rk: usize| {
                let Some(f) = micro[rk][ck] else {
                    return;
                };
                let a = if s.a_panels {
                    // Row i: panel i / 32, its column i mod 32 (tiles never straddle panels).
                    let (q, r) = kb.divmod(i, NR);
                    let at = kb.addr(pa, q, panel_size as i64);
                    kb.addr(at, r, s.a_row_bytes() as i64)
                } else {
                    kb.addr(pa, i, s.a_row_bytes() as i64)
                };
                let row = kb.b.ins().imul_imm_s(i, s.c_rs as i64);
                let el = kb.b.ins().iadd(row, j0);
                // Channel blocks: column j0's block starts j0 / 16 blocks of m·16 floats in.
                let c = if s.c_blocks {
                    let block = kb.b.ins().imul_imm_s(j0, s.m as i64);
                    let at = kb.b.ins().iadd(row, block);
                    kb.addr(pc, at, 4)
                } else {
                    kb.addr(pc, el, 4)
                };
                let zero = kb.iconst(0);
                let bp = match (bias_at, bias) {
                    (Some(p), _) => p,
                    (None, Some(p)) => kb.addr(p, i, 4),
                    (None, None) => zero,
                };
                let rp = res.map_or(zero, |p| kb.addr(p, el, 4));
                kb.b.ins().call(f, &[a, b, c, bp, rp]);
            };
            let full_end = {
                let end = kb.b.ins().iadd_imm_s(i0, ROWS_PER_UNIT as i64);
                let m = kb.iconst(s.m as i64);
                kb.b.ins().umin(end, m)
            };
            // Rows [i0, full_end) in tiles of `mr`; the last group's `m mod mr` rows by the tail kernel.
            let tiles_end = if s.m.is_multiple_of(mr) {
                full_end
            } else {
                let m_full = kb.iconst((s.m / mr * mr) as i64);
                kb.b.ins().umin(full_end, m_full)
            };
            kb.for_range(i0, tiles_end, mr as i64, |kb, i| tile(kb, i, 0));
            if !s.m.is_multiple_of(mr) {
                let has_tail =
                    kb.b.ins()
                        .icmp(IntCC::UnsignedGreaterThan, full_end, tiles_end);
                kb.if_else(has_tail, |kb| tile(kb, tiles_end, 1), |_| {});
            }
        };
        if tail_cols {
            let last =
                kb.b.ins()
                    .icmp_imm_s(IntCC::Equal, panel, (s.panels() - 1) as i64);
            kb.if_else(last, |kb| run(kb, 1), |kb| run(kb, 0));
        } else {
            run(kb, 0);
        }
    });
}

/// Emits the panel packing of a convolution's columns (`Body::PackBf16`): one call of the machine-code packer
/// per 32-column panel of each of `count` matrices (`src_bs` floats apart), `tail` for each last panel's
/// `n mod 32` columns.
pub fn emit_pack(
    kb: &mut Kb,
    [_, n, _, kp]: [usize; 4],
    [count, src_bs]: [usize; 2],
    tasks: u32,
    full: FuncRef,
    tail: Option<FuncRef>,
) {
    let panels = n.div_ceil(NR);
    let (lo, hi) = kb.task_range(count * panels, tasks);
    let (x0, po) = (kb.arg(Role::X), kb.arg(Role::Out));
    kb.for_range(lo, hi, 1, |kb, u| {
        // The matrices' panels follow each other in Out: unit u's is the u-th; its source is (entry, panel).
        let dst = kb.addr(po, u, panel_bytes(kp) as i64);
        let (px, p) = if count > 1 {
            let (e, p) = kb.divmod(u, panels);
            (kb.addr(x0, e, (src_bs * 4) as i64), p)
        } else {
            (x0, u)
        };
        let src = kb.addr(px, p, (NR * 4) as i64);
        match tail {
            Some(t) => kb.call_at((p, panels - 1), t, Some(full), &[src, dst]),
            None => kb.call_at((p, 0), full, None, &[src, dst]),
        }
    });
}
