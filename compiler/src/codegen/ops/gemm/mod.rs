//! The GEMM kernel every matrix product lowers to (MatMul, Gemm, and Conv after im2col):
//! `C[i, j] = act(alpha * sum_k A[i, k] * B[k, j] + bias + residual)` over static batch dimensions.
//! A is read as broadcast scalars with arbitrary row/column strides (so transposed A and conv weights need no
//! copy); B and C are row-major with contiguous columns. The microkernel keeps an MR x NR tile of accumulators
//! in f32x4 registers over the whole K loop; column tails use narrower vector and scalar variants, row tails
//! fewer rows. Work units are (batch, column block, row group); tasks take contiguous unit ranges, and every
//! element is computed by the same instruction sequence whatever the split, so results do not depend on it.
//! `kernel::gemm` holds the GEMM's description (`GemmSpec`, its operands, bias and transposing epilogue); `micro.rs`
//! a unit's machine-code path (micro-kernels, column strip), `tile.rs` the Cranelift tile, the shared epilogue
//! and operand addressing; here the unit loop (`emit_with`) and the fused transposing epilogue.

mod micro;
mod tile;

pub use micro::Micro;
use micro::{micro_rows, STRIP_PANEL};
use tile::tile;

use crate::codegen::builder::Kb;
use crate::kernel::gemm::{GemmSpec, TransposeOut, NR, ROW_GROUP};
use crate::kernel::Role;
use cranelift_codegen::ir::condcodes::IntCC;
use cranelift_codegen::ir::{FuncRef, InstBuilder, Value};

/// Rows per microkernel tile.
pub const MR: usize = 4;
/// A operand size (bytes) above which a GEMM's units take row groups outermost (`emit_with`).
const ROWS_OUTER_A_BYTES: usize = 1 << 20;
/// The most rows of a GEMM that copies B (one row group: its column-tail buffer is `rows x nr` on the stack).
pub const COPY_MAX_ROWS: usize = 512;
/// GEMMs reading B in place with at least this K copy it for their other tiles (`machine_code::b_copies`).
pub const COPY_MIN_K: usize = 128;

/// Emits the body of a GEMM kernel function.
pub fn emit(kb: &mut Kb, s: &GemmSpec, tasks: u32) {
    emit_with(kb, s, tasks, None, None);
}

/// Emits the body of a GEMM kernel function. With `micro`, a unit runs the machine-code micro-kernels on every
/// `mr`-row tile of its row group and then on its last `m % mr` rows, one K block at a time (C holds the running
/// sums between blocks), reading B in place — or, for the column tail, a zero-padded `kc x nr` panel packed on
/// the stack — and applies the epilogue in the last block's registers where it can (else over C afterwards); the
/// Cranelift tile takes what the micro-kernels do not cover. Both compute each element with the same fma chain in
/// the same order, so the output is bitwise the same either way.
///
/// With `s.transpose_out`, `transpose` is its machine-code transposer with the channels it writes per call (16
/// on AVX-512, 8 on AVX2), and each unit ends with its calls.
pub fn emit_with(
    kb: &mut Kb,
    s: &GemmSpec,
    tasks: u32,
    micro: Option<Micro>,
    transpose: Option<(FuncRef, usize)>,
) {
    let (mr, nr) = micro.map_or((MR, NR), |m| (m.mr, m.nr));
    let mut slot = |bytes: usize| {
        kb.b.create_sized_stack_slot(cranelift_codegen::ir::StackSlotData::new(
            cranelift_codegen::ir::StackSlotKind::ExplicitSlot,
            bytes as u32,
            6,
        ))
    };
    // A GEMM that copies B (`Micro::funcs[3]`) takes all its rows in one group, so a column block's B is copied
    // once, not once per group — unless `row_groups` splits them (an expansion read only by a depthwise layer,
    // which the entry function interleaves with it group by group, `kernel/interleave.rs`): then each group's
    // unit copies the block again.
    let copies = micro.is_some_and(|m| m.funcs[3].iter().any(Option::is_some));
    let row_group = match s.row_groups {
        Some(g) => s.m.div_ceil(g.max(1)).next_multiple_of(mr),
        None if copies => s.m.next_multiple_of(mr),
        // Whole tiles, and whole 8-row panels where the column strip takes the tail.
        None => {
            let strip = micro.is_some_and(|m| m.strip.is_some());
            let unit = if strip { lcm(mr, STRIP_PANEL) } else { mr };
            unit * (ROW_GROUP / unit).max(1)
        }
    };
    let panel = micro.map(|m| (slot(m.kc * m.nr * 4), slot(row_group * m.nr * 4)));
    let ncb = s.n.div_ceil(nr);
    let nrg = s.m.div_ceil(row_group);
    let units = s.batches() * ncb * nrg;
    let (lo, hi) = kb.task_range(units, tasks);
    kb.for_range(lo, hi, 1, |kb, u| {
        let (bi, rest) = kb.divmod(u, ncb * nrg);
        // Units walk column blocks within a row group when A is too large to stay cached while every column
        // block streams it again (ResNet-50's 14x14 and 7x7 layers: 1-9 MiB of weights; 8-15 % faster there),
        // else row groups within a column block, so a B block stays cached (small-weight nets: 2-3 % faster);
        // `row_groups` (a depthwise layer's feeder) takes its groups outermost too.
        let (cb, rg) = if s.m * s.k * 4 > ROWS_OUTER_A_BYTES || s.row_groups.is_some() {
            let (rg, cb) = kb.divmod(rest, ncb);
            (cb, rg)
        } else {
            kb.divmod(rest, nrg)
        };
        let (offs, j0, i_lo, i_hi) = unit_place(kb, (&s.batch, s.m), (bi, cb, rg), (nr, row_group));
        let tail_cols = s.n % nr;
        let emit_cols = |kb: &mut Kb, cols: usize| {
            // Full mr-row tiles, then the remaining rows one tile of `m % mr` rows (only in the last group).
            let next = kb.var(cranelift_codegen::ir::types::I64, i_lo);
            match (micro, panel) {
                (Some(mk), Some(slots))
                    if cols == nr
                        || mk.strip.is_some()
                        || mk.funcs[1].iter().any(Option::is_some) =>
                {
                    micro_rows(kb, s, &offs, (i_lo, i_hi), j0, cols, &mk, slots);
                    let full = kb.b.ins().isub(i_hi, i_lo);
                    let full = kb.b.ins().udiv_imm_u(full, mr as i64);
                    let full = kb.b.ins().imul_imm_s(full, mr as i64);
                    let end = kb.b.ins().iadd(i_lo, full);
                    kb.b.def_var(next, end);
                }
                _ => kb.for_range(i_lo, i_hi, mr as i64, |kb, i| {
                    tile(kb, s, &offs, i, j0, mr, cols);
                    let n = kb.b.ins().iadd_imm_s(i, mr as i64);
                    kb.b.def_var(next, n);
                }),
            }
            let rows_tail = s.m % mr;
            if rows_tail > 0 {
                let i = kb.b.use_var(next);
                let c = kb.b.ins().icmp(IntCC::SignedLessThan, i, i_hi);
                let row_micro = match (micro, panel) {
                    (Some(mk), Some(slots))
                        if cols == nr && mk.funcs[2][0..4].iter().any(Option::is_some) =>
                    {
                        Some((mk, slots))
                    }
                    _ => None,
                };
                kb.if_else(
                    c,
                    |kb| match row_micro {
                        // The row-tail variants, as one `rows_tail`-row tile of micro_rows.
                        Some((mk, slots)) => {
                            let tail_mk = Micro {
                                mr: rows_tail,
                                funcs: [mk.funcs[2], [None; 5], [None; 5], [None; 5]],
                                strip: None,
                                ..mk
                            };
                            let end = kb.b.ins().iadd_imm_s(i, rows_tail as i64);
                            micro_rows(kb, s, &offs, (i, end), j0, cols, &tail_mk, slots);
                        }
                        None => tile(kb, s, &offs, i, j0, rows_tail, cols),
                    },
                    |_| {},
                );
            }
        };
        // The unit's tiles over `cols` columns, then its fused transposition of `t_cols` channels.
        let unit = |kb: &mut Kb, cols: usize, t_cols: usize| {
            emit_cols(kb, cols);
            if let (Some(t), Some(f)) = (&s.transpose_out, transpose) {
                transpose_unit(kb, s, t, f, (bi, offs[2]), (i_lo, i_hi), j0, t_cols);
            }
        };
        // The last column block: a column tail, or (a padded `Cᵀ`) fewer channels to transpose than columns.
        let last_cols = if tail_cols == 0 { nr } else { tail_cols };
        let t_last = s.transpose_out.map_or(last_cols, |t| {
            t.m.saturating_sub((ncb - 1) * nr).min(last_cols)
        });
        kb.with_last(cb, ncb, ((nr, nr), (last_cols, t_last)), |kb, (c, t)| {
            unit(kb, c, t)
        });
    });
}

/// Where a GEMM unit works: the batch offsets (elements of A, B, C and the bias) of batch `bi` through the
/// `batch` dims `[count, strides…]`, the first column of column block `cb` (`nr` wide) and the rows of row group
/// `rg` (`rows` tall, the last one cut at `m`). Shared by the f32 and integer GEMMs.
pub(crate) fn unit_place(
    kb: &mut Kb,
    (batch, m): (&[[usize; 5]], usize),
    (bi, cb, rg): (Value, Value, Value),
    (nr, rows): (usize, usize),
) -> ([Value; 4], Value, Value, Value) {
    let mut offs = [kb.iconst(0), kb.iconst(0), kb.iconst(0), kb.iconst(0)];
    let mut rem = bi;
    let mut inner: usize = batch.iter().map(|d| d[0]).product();
    for d in batch {
        inner /= d[0].max(1);
        let (q, r) = kb.divmod(rem, inner.max(1));
        rem = r;
        for (o, st) in offs.iter_mut().zip(&d[1..]) {
            let add = kb.b.ins().imul_imm_s(q, *st as i64);
            *o = kb.b.ins().iadd(*o, add);
        }
    }
    let j0 = kb.b.ins().imul_imm_s(cb, nr as i64);
    let i_lo = kb.b.ins().imul_imm_s(rg, rows as i64);
    let i_hi = kb.b.ins().iadd_imm_s(i_lo, rows as i64);
    let m = kb.iconst(m as i64);
    let i_hi = kb.b.ins().umin(i_hi, m);
    (offs, j0, i_lo, i_hi)
}

/// The fused transposing epilogue of one unit (`TransposeOut`): channel rows `[j0, j0 + cols)` (whole blocks of
/// the transposer's `per_call` channels; the last column block of a padded `Cᵀ` transposes only its real channels), pixels `[i_lo, i_hi)`, of
/// batch `bi` (`c_off`: its `Cᵀ` offset in elements).
#[allow(clippy::too_many_arguments)]
fn transpose_unit(
    kb: &mut Kb,
    s: &GemmSpec,
    t: &TransposeOut,
    (f, per_call): (FuncRef, usize),
    (bi, c_off): (Value, Value),
    (i_lo, i_hi): (Value, Value),
    j0: Value,
    cols: usize,
) {
    let count = kb.b.ins().isub(i_hi, i_lo);
    let (ct, out) = (kb.arg(s.c.arg), kb.arg(Role::Out));
    let res = t.residual.then(|| kb.arg(Role::Residual));
    // Cᵀ at (i_lo, j0) of this batch; the output (and residual) at (bi, j0, i_lo).
    let row = kb.b.ins().imul_imm_s(i_lo, s.c.rs as i64);
    let c_el = kb.b.ins().iadd(row, j0);
    let c_el = kb.b.ins().iadd(c_el, c_off);
    let o_batch = kb.b.ins().imul_imm_s(bi, (t.m * t.p) as i64);
    let o_row = kb.b.ins().imul_imm_s(j0, t.p as i64);
    let o_el = kb.b.ins().iadd(o_batch, o_row);
    let o_el = kb.b.ins().iadd(o_el, i_lo);
    for blk in 0..cols / per_call {
        let ce = kb.b.ins().iadd_imm_s(c_el, (per_call * blk) as i64);
        let src = kb.addr(ct, ce, 4);
        let oe = kb.b.ins().iadd_imm_s(o_el, (per_call * blk * t.p) as i64);
        let dst = kb.addr(out, oe, 4);
        let r = match res {
            Some(r) => kb.addr(r, oe, 4),
            None => kb.iconst(0),
        };
        kb.b.ins().call(f, &[src, dst, r, count]);
    }
}

/// Least common multiple.
fn lcm(a: usize, b: usize) -> usize {
    let (mut x, mut y) = (a, b);
    while y != 0 {
        (x, y) = (y, x % y);
    }
    a / x * b
}
