//! The GEMM kernel every matrix product lowers to (MatMul, Gemm, and Conv after im2col):
//! `C[i, j] = act(alpha * sum_k A[i, k] * B[k, j] + bias + residual)` over static batch dimensions.
//! A is read as broadcast scalars with arbitrary row/column strides (so transposed A and conv weights need no
//! copy); B and C are row-major with contiguous columns. The microkernel keeps an MR x NR tile of accumulators
//! in f32x4 registers over the whole K loop; column tails use narrower vector and scalar variants, row tails
//! fewer rows. Work units are (batch, column block, row group); tasks take contiguous unit ranges, and every
//! element is computed by the same instruction sequence whatever the split, so results do not depend on it.
//! `spec.rs` holds the GEMM's description (`GemmSpec`, its operands, bias and transposing epilogue).

mod spec;

pub use spec::{Bias, BiasKind, GemmSpec, Operand, TransposeOut};

use crate::codegen::builder::{Kb, LANES, VEC};
use crate::codegen::kernel::Role;
use crate::codegen::math::activation;
use crate::ir::Activation;
use cranelift_codegen::ir::condcodes::IntCC;
use cranelift_codegen::ir::types::F32;
use cranelift_codegen::ir::{FuncRef, InstBuilder, Type, Value};
use cranelift_frontend::Variable;

/// Rows per microkernel tile.
pub const MR: usize = 4;
/// Columns per microkernel tile (two f32x4).
pub const NR: usize = 8;
/// A operand size (bytes) above which a GEMM's units take row groups outermost (`emit_with`).
const ROWS_OUTER_A_BYTES: usize = 1 << 20;
/// Rows per work unit.
pub(super) const ROW_GROUP: usize = 64;
/// The most rows of a GEMM that copies B (one row group: its column-tail buffer is `rows x nr` on the stack).
pub const COPY_MAX_ROWS: usize = 512;
/// GEMMs reading B in place with at least this K copy it for their other tiles (`machine_code::b_copies`).
pub const COPY_MIN_K: usize = 128;

/// Emits the body of a GEMM kernel function.
pub fn emit(kb: &mut Kb, s: &GemmSpec, tasks: u32) {
    emit_with(kb, s, tasks, None, None);
}

/// The machine-code micro-kernels of one GEMM (`kernels/gemm_x86.rs`): tile shape, K block depth, and the
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
    /// The column strip (`kernels/gemm_strip_avx2.rs`): the column tail of a whole row group in one call
    /// `f(a, b, c, panels)`, in place of set 1.
    pub strip: Option<FuncRef>,
}

/// Emits the body of a GEMM kernel function. With `micro`, a unit runs the machine-code micro-kernels on every
/// `mr`-row tile of its row group and then on its last `m % mr` rows, one K block at a time (C holds the running
/// sums between blocks), reading B in place — or, for the column tail, a zero-padded `kc x nr` panel packed on
/// the stack — and applies the epilogue in the last block's registers where it can (else over C afterwards); the
/// Cranelift tile takes what the micro-kernels do not cover. Both compute each element with the same fma chain in
/// the same order, so the output is bitwise the same either way.
///
/// With `s.transpose_out`, `transpose` is its machine-code transposer and each unit ends with its calls.
pub fn emit_with(
    kb: &mut Kb,
    s: &GemmSpec,
    tasks: u32,
    micro: Option<Micro>,
    transpose: Option<FuncRef>,
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
    // once, not once per group.
    let copies = micro.is_some_and(|m| m.funcs[3].iter().any(Option::is_some));
    let split = s.row_groups.filter(|_| !copies);
    let row_group = match split {
        _ if copies => s.m.next_multiple_of(mr),
        Some(g) => s.m.div_ceil(g.max(1)).next_multiple_of(mr),
        // Whole panels of the column strip too.
        None if micro.is_some_and(|m| m.strip.is_some()) => {
            let unit = mr * STRIP_PANEL / gcd(mr, STRIP_PANEL);
            unit * (ROW_GROUP / unit).max(1)
        }
        None => mr * (ROW_GROUP / mr).max(1),
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
        let (cb, rg) = if s.m * s.k * 4 > ROWS_OUTER_A_BYTES || split.is_some() {
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
/// 16; the last column block of a padded `Cᵀ` transposes only its real channels), pixels `[i_lo, i_hi)`, of
/// batch `bi` (`c_off`: its `Cᵀ` offset in elements).
#[allow(clippy::too_many_arguments)]
fn transpose_unit(
    kb: &mut Kb,
    s: &GemmSpec,
    t: &TransposeOut,
    f: FuncRef,
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
    for blk in 0..cols / 16 {
        let ce = kb.b.ins().iadd_imm_s(c_el, (16 * blk) as i64);
        let src = kb.addr(ct, ce, 4);
        let oe = kb.b.ins().iadd_imm_s(o_el, (16 * blk * t.p) as i64);
        let dst = kb.addr(out, oe, 4);
        let r = match res {
            Some(r) => kb.addr(r, oe, 4),
            None => kb.iconst(0),
        };
        kb.b.ins().call(f, &[src, dst, r, count]);
    }
}

/// One `rows x cols` tile at (i, j0): K loop, epilogue, store.
fn tile(
    kb: &mut Kb,
    s: &GemmSpec,
    offs: &[Value; 4],
    i: Value,
    j0: Value,
    rows: usize,
    cols: usize,
) {
    let nv = cols / LANES;
    let ns = cols % LANES;
    let lane_ty = |c: usize| -> Type {
        if c < nv {
            VEC
        } else {
            F32
        }
    };
    let ncols_slots = nv + ns;
    // Pointers: a at (i, 0), b at (0, j0), in bytes.
    let (a_row_step, a_k_step) = s.a_steps();
    let a_row = a_row_el(kb, s, i);
    let a_el = kb.b.ins().iadd(a_row, offs[0]);
    let a_el = kb.b.ins().iadd_imm_s(a_el, s.a.off as i64);
    let a_base = kb.arg(s.a.arg);
    let a_ptr0 = kb.addr(a_base, a_el, 4);
    let b_el = b_col_el(kb, s, j0, offs[1]);
    let b_base = kb.arg(s.b.arg);
    let b_ptr0 = kb.addr(b_base, b_el, 4);
    let mut acc: Vec<Vec<Variable>> = Vec::with_capacity(rows);
    for _ in 0..rows {
        let row = (0..ncols_slots)
            .map(|c| {
                let ty = lane_ty(c);
                let z = kb.fconst(ty, 0.0);
                kb.var(ty, z)
            })
            .collect();
        acc.push(row);
    }
    let a_ptr = kb.var(cranelift_codegen::ir::types::I64, a_ptr0);
    let b_ptr = kb.var(cranelift_codegen::ir::types::I64, b_ptr0);
    kb.for_const(0, s.k, 1, |kb, p| {
        let ap = kb.b.use_var(a_ptr);
        let bp = kb.b.use_var(b_ptr);
        let bv: Vec<Value> = (0..ncols_slots)
            .map(|c| {
                let off = if c < nv {
                    c * LANES
                } else {
                    nv * LANES + (c - nv)
                };
                kb.load(lane_ty(c), bp, (off * 4) as i64)
            })
            .collect();
        for (r, row) in acc.iter().enumerate() {
            let a = kb.load(F32, ap, (r * a_row_step * 4) as i64);
            let av = if nv > 0 { kb.splat(VEC, a) } else { a };
            for (c, &v) in row.iter().enumerate() {
                let x = if c < nv { av } else { a };
                let cur = kb.b.use_var(v);
                let nx = kb.mul_add(x, bv[c], cur);
                kb.b.def_var(v, nx);
            }
        }
        let ap2 = if s.a_k16 {
            // One element on within a block of 16; from its last to the next block's first.
            let last = kb.b.ins().band_imm_u(p, 15);
            let last = kb.b.ins().icmp_imm_u(IntCC::Equal, last, 15);
            let step = kb.iconst(4);
            let jump = kb.iconst((16 * a_k_step * 4 - 60) as i64);
            let by = kb.b.ins().select(last, jump, step);
            kb.b.ins().iadd(ap, by)
        } else {
            kb.b.ins().iadd_imm_s(ap, (a_k_step * 4) as i64)
        };
        kb.b.def_var(a_ptr, ap2);
        let bp2 = kb.b.ins().iadd_imm_s(bp, (s.b_k_step() * 4) as i64);
        kb.b.def_var(b_ptr, bp2);
    });
    let vals: Vec<Vec<Value>> = acc
        .iter()
        .map(|row| row.iter().map(|&v| kb.b.use_var(v)).collect())
        .collect();
    epilogue(kb, s, offs, i, j0, cols, &vals);
}

/// Column slot `c` of a `cols`-wide tile: (element type, first column).
fn slot_of(cols: usize, c: usize) -> (Type, usize) {
    let nv = cols / LANES;
    if c < nv {
        (VEC, c * LANES)
    } else {
        (F32, nv * LANES + (c - nv))
    }
}

/// The full `mr`-row tiles of rows `[i_lo, i_hi)` at column block `j0` by the micro-kernels: per K block one
/// call per tile on B in place (C accumulates across blocks), the last block with the fused epilogue when there
/// is one; else the epilogue over C afterwards (skipped when there is nothing to apply).
/// A column-tail block (`cols < nr`) packs zeros beyond its columns up to the tail tile's `nt` and lets the
/// micro-kernels store into the stack buffer `slots.1` (row stride `nt`), whose valid columns the epilogue then
/// writes to C.
#[allow(clippy::too_many_arguments)] // the row range, column block, kernels and buffers
fn micro_rows(
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
                super::conv::copy_f32(kb, sp, dp, cols);
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
        let rows = kb.b.ins().isub(i_hi, i_lo);
        let rows = kb.b.ins().iadd_imm_s(rows, (STRIP_PANEL - 1) as i64);
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

/// Greatest common divisor.
fn gcd(a: usize, b: usize) -> usize {
    if b == 0 {
        a
    } else {
        gcd(b, a % b)
    }
}

/// Rows per panel of a column strip.
const STRIP_PANEL: usize = crate::codegen::kernels::gemm_strip_avx2::PANEL;

/// The element index in A of row `i`'s first element (`i` a multiple of the tile rows): `i·rs`, or in packed
/// panels `(i / P)·P·K + i % P`.
fn a_row_el(kb: &mut Kb, s: &GemmSpec, i: Value) -> Value {
    match s.a_panel {
        Some(p) => {
            let (q, r) = kb.divmod(i, p);
            let base = kb.b.ins().imul_imm_s(q, (p * s.a.rs) as i64);
            kb.b.ins().iadd(base, r)
        }
        None => kb.b.ins().imul_imm_s(i, s.a.rs as i64),
    }
}

/// The element index in B of row 0, column `j0` (a multiple of the tile columns), at the batch offset `off`:
/// `j0`, or in packed panels `(j0 / P)·P·K + j0 % P`.
fn b_col_el(kb: &mut Kb, s: &GemmSpec, j0: Value, off: Value) -> Value {
    let el = match s.b_panel {
        Some(p) => {
            let (q, r) = kb.divmod(j0, p);
            let base = kb.b.ins().imul_imm_s(q, (p * s.k) as i64);
            kb.b.ins().iadd(base, r)
        }
        None => j0,
    };
    let el = kb.b.ins().iadd(el, off);
    kb.b.ins().iadd_imm_s(el, s.b.off as i64)
}

/// The element index of `(row, col)` of an operand with contiguous columns (or, `GemmSpec::c_k16`, `col` a
/// multiple of 16 and blocks of 16 columns `16·cs` apart), at the batch offset `off`.
fn elem(kb: &mut Kb, op: &Operand, row: Value, col: Value, off: Value) -> Value {
    let r = kb.b.ins().imul_imm_s(row, op.rs as i64);
    let el = kb.b.ins().iadd(r, off);
    let col = match op.cs {
        1 => col,
        cs => kb.b.ins().imul_imm_s(col, cs as i64),
    };
    let el = kb.b.ins().iadd(el, col);
    kb.b.ins().iadd_imm_s(el, op.off as i64)
}

/// The address of element `(i, j0)` of a row-major operand laid out like C (C itself, the residual), at the
/// batch offset `off`.
fn tile_addr(kb: &mut Kb, op: &Operand, off: Value, i: Value, j0: Value) -> Value {
    let el = elem(kb, op, i, j0, off);
    let base = kb.arg(op.arg);
    kb.addr(base, el, 4)
}

/// The address of the bias for the tile at `(i, j0)`: element `i` (per row), `j0` (per column) or `(i, j0)`.
fn bias_addr(kb: &mut Kb, b: &Bias, off: Value, i: Value, j0: Value) -> Value {
    let el = match b.kind {
        BiasKind::Row => i,
        BiasKind::Col => j0,
        BiasKind::Full => {
            let row = kb.b.ins().imul_imm_s(i, b.at.rs as i64);
            kb.b.ins().iadd(row, j0)
        }
    };
    let el = kb.b.ins().iadd(el, off);
    let el = kb.b.ins().iadd_imm_s(el, b.at.off as i64);
    let base = kb.arg(b.at.arg);
    kb.addr(base, el, 4)
}

/// The bias and residual tile addresses of the tile at row `i` for a micro-kernel with the epilogue fused; 0 for
/// what the GEMM does not have.
fn epilogue_ptrs(
    kb: &mut Kb,
    s: &GemmSpec,
    offs: &[Value; 4],
    i: Value,
    j0: Value,
) -> (Value, Value) {
    let bias = match &s.bias {
        Some(b) => bias_addr(kb, b, offs[3], i, j0),
        None => kb.iconst(0),
    };
    let res = match &s.residual {
        Some(r) => tile_addr(kb, r, offs[2], i, j0),
        None => kb.iconst(0),
    };
    (bias, res)
}

/// Bias, residual, activation and store of a tile whose accumulated values are `vals[row][slot]`.
#[allow(clippy::too_many_arguments)] // the tile's coordinates and values
fn epilogue(
    kb: &mut Kb,
    s: &GemmSpec,
    offs: &[Value; 4],
    i: Value,
    j0: Value,
    cols: usize,
    vals: &[Vec<Value>],
) {
    let c_ptr = tile_addr(kb, &s.c, offs[2], i, j0);
    let res_ptr = s
        .residual
        .as_ref()
        .map(|r| tile_addr(kb, r, offs[2], i, j0));
    let bias_ptr = s.bias.as_ref().map(|b| bias_addr(kb, b, offs[3], i, j0));
    for (r, row) in vals.iter().enumerate() {
        let row_bias = match (&s.bias, bias_ptr) {
            (Some(b), Some(p)) if b.kind == BiasKind::Row => {
                let v = kb.load(F32, p, (r * 4) as i64);
                Some(scale(kb, v, b.scale))
            }
            _ => None,
        };
        for (c, &v) in row.iter().enumerate() {
            let (ty, col) = slot_of(cols, c);
            let mut x = v;
            if s.alpha != 1.0 {
                let al = kb.fconst(ty, s.alpha);
                x = kb.b.ins().fmul(x, al);
            }
            if let (Some(b), Some(p)) = (&s.bias, bias_ptr) {
                let bv = match b.kind {
                    BiasKind::Row => kb.splat(ty, row_bias.expect("row bias loaded above")),
                    BiasKind::Col => {
                        let v = kb.load(ty, p, (col * 4) as i64);
                        scale(kb, v, b.scale)
                    }
                    BiasKind::Full => {
                        let v = kb.load(ty, p, ((r * b.at.rs + col) * 4) as i64);
                        scale(kb, v, b.scale)
                    }
                };
                x = kb.b.ins().fadd(x, bv);
            }
            if let (Some(res), Some(p)) = (&s.residual, res_ptr) {
                let rv = kb.load(ty, p, ((r * res.rs + col) * 4) as i64);
                x = kb.b.ins().fadd(x, rv);
            }
            x = activation(kb, ty, s.act, x);
            kb.store(x, c_ptr, ((r * s.c.rs + col) * 4) as i64);
        }
    }
}

fn scale(kb: &mut Kb, v: Value, f: f32) -> Value {
    if f == 1.0 {
        return v;
    }
    let ty = kb.b.func.dfg.value_type(v);
    let c = kb.fconst(ty, f);
    kb.b.ins().fmul(v, c)
}
