//! Reduction kernels over the `[outer, len, inner]` geometry of `ir::ops::reduce::reduce_geom`: one task unit
//! per (outer, inner) pair, a sequential scalar accumulation in index order (the reference order of
//! `ir::ops::reduce::reduce_row`), ArgMax / ArgMin writing i64 indices, and TopK by insertion into the output
//! row.

use crate::codegen::builder::Kb;
use crate::codegen::math::{exp, fsel, log};
use crate::ir::ReduceKind;
use crate::kernel::Role;
use cranelift_codegen::ir::condcodes::{FloatCC, IntCC};
use cranelift_codegen::ir::types::{F32, I64};
use cranelift_codegen::ir::InstBuilder;

/// Emits a reduction: args x, out.
pub fn emit_reduce(
    kb: &mut Kb,
    kind: ReduceKind,
    outer: usize,
    len: usize,
    inner: usize,
    tasks: u32,
) {
    let (lo, hi) = kb.task_range(outer * inner, tasks);
    let (px, po) = (kb.arg(Role::X), kb.arg(Role::Out));
    let step = (inner * 4) as i64;
    kb.for_range(lo, hi, 1, |kb, u| {
        let start = kb.strided_row_start(u, len, inner);
        let x = kb.addr(px, start, 4);
        let init = match kind {
            ReduceKind::Max | ReduceKind::LogSumExp => f32::NEG_INFINITY,
            ReduceKind::Min => f32::INFINITY,
            ReduceKind::Prod => 1.0,
            _ => 0.0,
        };
        let iv = kb.fconst(F32, init);
        let acc = kb.var(F32, iv);
        kb.for_const(0, len, 1, |kb, j| {
            let p = kb.addr(x, j, step);
            let v = kb.load(F32, p, 0);
            let a = kb.b.use_var(acc);
            let r = match kind {
                ReduceKind::Sum | ReduceKind::Mean | ReduceKind::LogSum => kb.b.ins().fadd(a, v),
                ReduceKind::Max | ReduceKind::LogSumExp => kb.b.ins().fmax(a, v),
                ReduceKind::Min => kb.b.ins().fmin(a, v),
                ReduceKind::Prod => kb.b.ins().fmul(a, v),
                ReduceKind::L1 => {
                    let av = kb.b.ins().fabs(v);
                    kb.b.ins().fadd(a, av)
                }
                ReduceKind::L2 | ReduceKind::SumSquare => {
                    let sq = kb.b.ins().fmul(v, v);
                    kb.b.ins().fadd(a, sq)
                }
            };
            kb.b.def_var(acc, r);
        });
        let a = kb.b.use_var(acc);
        let r = match kind {
            ReduceKind::Mean => {
                let n = kb.fconst(F32, len as f32);
                kb.b.ins().fdiv(a, n)
            }
            ReduceKind::L2 => kb.b.ins().sqrt(a),
            ReduceKind::LogSum => log(kb, F32, a),
            ReduceKind::LogSumExp => {
                // m + ln(Σ e^(x - m)); an all -inf row stays -inf.
                let z = kb.fconst(F32, 0.0);
                let s = kb.var(F32, z);
                kb.for_const(0, len, 1, |kb, j| {
                    let p = kb.addr(x, j, step);
                    let v = kb.load(F32, p, 0);
                    let d = kb.b.ins().fsub(v, a);
                    let e = exp(kb, F32, d);
                    let sv = kb.b.use_var(s);
                    let sv = kb.b.ins().fadd(sv, e);
                    kb.b.def_var(s, sv);
                });
                let sv = kb.b.use_var(s);
                let l = log(kb, F32, sv);
                let r = kb.b.ins().fadd(a, l);
                let ninf = kb.fconst(F32, f32::NEG_INFINITY);
                fsel(kb, F32, FloatCC::Equal, a, ninf, ninf, r)
            }
            _ => a,
        };
        let q = kb.addr(po, u, 4);
        kb.store(r, q, 0);
    });
}

/// Emits ArgMax / ArgMin: args x, out (i64). The first extreme wins, or the last with `last`.
pub fn emit_arg(
    kb: &mut Kb,
    max: bool,
    last: bool,
    outer: usize,
    len: usize,
    inner: usize,
    tasks: u32,
) {
    let (lo, hi) = kb.task_range(outer * inner, tasks);
    let (px, po) = (kb.arg(Role::X), kb.arg(Role::Out));
    let step = (inner * 4) as i64;
    kb.for_range(lo, hi, 1, |kb, u| {
        let start = kb.strided_row_start(u, len, inner);
        let x = kb.addr(px, start, 4);
        let first = kb.load(F32, x, 0);
        let best = kb.var(F32, first);
        let zero = kb.iconst(0);
        let at = kb.var(I64, zero);
        kb.for_const(1, len, 1, |kb, j| {
            let p = kb.addr(x, j, step);
            let v = kb.load(F32, p, 0);
            let b = kb.b.use_var(best);
            let cc = match (max, last) {
                (true, false) => FloatCC::GreaterThan,
                (true, true) => FloatCC::GreaterThanOrEqual,
                (false, false) => FloatCC::LessThan,
                (false, true) => FloatCC::LessThanOrEqual,
            };
            let c = kb.b.ins().fcmp(cc, v, b);
            let nb = kb.b.ins().select(c, v, b);
            kb.b.def_var(best, nb);
            let a = kb.b.use_var(at);
            let na = kb.b.ins().select(c, j, a);
            kb.b.def_var(at, na);
        });
        let a = kb.b.use_var(at);
        let q = kb.addr(po, u, 8);
        kb.store(a, q, 0);
    });
}

/// Emits TopK: args x, out. Per row, each element in index order is inserted into the output row, which holds
/// the best so far in order (`k` slots): taken while the row is not full, or when it beats the last slot; slots
/// it beats move one down. Strict comparisons keep equal values in index order, as a stable sort would; a number
/// beats NaN, which sorts last (`ir::ops::reduce::eval_topk`). With `indices` the row holds positions (i64) and
/// compares through the input at them.
pub fn emit_topk(
    kb: &mut Kb,
    (dtype, largest, indices): (crate::ir::DType, bool, bool),
    k: usize,
    (outer, len, inner): (usize, usize, usize),
    tasks: u32,
) {
    let (lo, hi) = kb.task_range(outer * inner, tasks);
    let (px, po) = (kb.arg(Role::X), kb.arg(Role::Out));
    // The element type and bytes of the input (and of the values written).
    let (ety, esize) = match dtype {
        crate::ir::DType::I64 => (I64, 8),
        crate::ir::DType::I32 => (cranelift_codegen::ir::types::I32, 4),
        _ => (F32, 4),
    };
    let float = ety == F32;
    let xstep = (inner * esize) as i64;
    let (slot_ty, oscale) = if indices {
        (I64, 8)
    } else {
        (ety, esize as i64)
    };
    let ostep = inner as i64 * oscale;
    let (cc, icc) = if largest {
        (FloatCC::GreaterThan, IntCC::SignedGreaterThan)
    } else {
        (FloatCC::LessThan, IntCC::SignedLessThan)
    };
    kb.for_range(lo, hi, 1, |kb, u| {
        let start = kb.strided_row_start(u, len, inner);
        let x = kb.addr(px, start, esize as i64);
        let ostart = kb.strided_row_start(u, k, inner);
        let o = kb.addr(po, ostart, oscale);
        // The value in slot `i` of the output row.
        let at = |kb: &mut Kb, i| {
            let p = kb.addr(o, i, ostep);
            if indices {
                let j = kb.load(I64, p, 0);
                let q = kb.addr(x, j, xstep);
                kb.load(ety, q, 0)
            } else {
                kb.load(ety, p, 0)
            }
        };
        // v beats w: better, or (floats) a number against NaN.
        let beats = |kb: &mut Kb, v, w| {
            if !float {
                return kb.b.ins().icmp(icc, v, w);
            }
            let better = kb.b.ins().fcmp(cc, v, w);
            let w_nan = kb.b.ins().fcmp(FloatCC::Unordered, w, w);
            let v_num = kb.b.ins().fcmp(FloatCC::Ordered, v, v);
            let over_nan = kb.b.ins().band(w_nan, v_num);
            kb.b.ins().bor(better, over_nan)
        };
        kb.for_const(0, len, 1, |kb, j| {
            let q = kb.addr(x, j, xstep);
            let v = kb.load(ety, q, 0);
            let last = kb.iconst(k as i64 - 1);
            let full =
                kb.b.ins()
                    .icmp_imm_s(IntCC::SignedGreaterThanOrEqual, j, k as i64);
            let yes = kb.b.ins().iconst(cranelift_codegen::ir::types::I8, 1);
            let take = kb.var(cranelift_codegen::ir::types::I8, yes);
            kb.if_else(
                full,
                |kb| {
                    let w = at(kb, last);
                    let b = beats(kb, v, w);
                    kb.b.def_var(take, b);
                },
                |_| {},
            );
            let take = kb.b.use_var(take);
            kb.if_else(
                take,
                |kb| {
                    let first = kb.b.ins().select(full, last, j);
                    let iv = kb.var(I64, first);
                    // while i > 0 && v beats slot i - 1: slot i = slot i - 1, i -= 1.
                    let (head, cmp, shift, done) = (
                        kb.b.create_block(),
                        kb.b.create_block(),
                        kb.b.create_block(),
                        kb.b.create_block(),
                    );
                    kb.b.ins().jump(head, &[]);
                    kb.b.switch_to_block(head);
                    let i = kb.b.use_var(iv);
                    let more = kb.b.ins().icmp_imm_s(IntCC::SignedGreaterThan, i, 0);
                    kb.b.ins().brif(more, cmp, &[], done, &[]);
                    kb.b.seal_block(cmp);
                    kb.b.switch_to_block(cmp);
                    let prev = kb.b.ins().iadd_imm_s(i, -1);
                    let w = at(kb, prev);
                    let b = beats(kb, v, w);
                    kb.b.ins().brif(b, shift, &[], done, &[]);
                    kb.b.seal_block(shift);
                    kb.b.switch_to_block(shift);
                    let src = kb.addr(o, prev, ostep);
                    let moved = kb.load(slot_ty, src, 0);
                    let dst = kb.addr(o, i, ostep);
                    kb.store(moved, dst, 0);
                    kb.b.def_var(iv, prev);
                    kb.b.ins().jump(head, &[]);
                    kb.b.seal_block(head);
                    kb.b.switch_to_block(done);
                    kb.b.seal_block(done);
                    let i = kb.b.use_var(iv);
                    let dst = kb.addr(o, i, ostep);
                    kb.store(if indices { j } else { v }, dst, 0);
                },
                |_| {},
            );
        });
    });
}
