//! The Cranelift path of a GEMM unit: the `MR x NR` tile (K loop over 128-bit vectors, epilogue, store), the
//! epilogue every path shares (alpha, bias, residual, activation; `epilogue`) and the operand addressing it
//! needs.

use crate::codegen::builder::{Kb, LANES, VEC};
use crate::codegen::math::activation;
use crate::kernel::gemm::{Bias, BiasKind, GemmSpec, Operand};
use cranelift_codegen::ir::condcodes::IntCC;
use cranelift_codegen::ir::types::F32;
use cranelift_codegen::ir::{InstBuilder, Type, Value};
use cranelift_frontend::Variable;

/// One `rows x cols` tile at (i, j0): K loop, epilogue, store.
pub(super) fn tile(
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
    // The totals, and the running sums of the current K block (`kc` steps from +0.0, then added to the
    // totals: the micro-kernels' blocked chains, `x86/gemm_x86.rs`).
    let zeros = |kb: &mut Kb| -> Vec<Vec<Variable>> {
        (0..rows)
            .map(|_| {
                (0..ncols_slots)
                    .map(|c| {
                        let ty = lane_ty(c);
                        let z = kb.fconst(ty, 0.0);
                        kb.var(ty, z)
                    })
                    .collect()
            })
            .collect()
    };
    let acc = zeros(kb);
    let blk = zeros(kb);
    let a_ptr = kb.var(cranelift_codegen::ir::types::I64, a_ptr0);
    let b_ptr = kb.var(cranelift_codegen::ir::types::I64, b_ptr0);
    let step = |kb: &mut Kb, p: Value| {
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
        for (r, row) in blk.iter().enumerate() {
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
            // One element on within a block of 16; from its last to the next block's first (K blocks start at
            // multiples of 16, so `p` within the block has the same position in its block of 16).
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
    };
    // One K block of `depth` steps: its sums from +0.0, then onto the totals.
    let block = |kb: &mut Kb, depth: usize| {
        for row in &blk {
            for (c, &v) in row.iter().enumerate() {
                let z = kb.fconst(lane_ty(c), 0.0);
                kb.b.def_var(v, z);
            }
        }
        kb.for_const(0, depth, 1, &step);
        for (row, trow) in blk.iter().zip(&acc) {
            for (&v, &t) in row.iter().zip(trow) {
                let (x, y) = (kb.b.use_var(t), kb.b.use_var(v));
                let sum = kb.b.ins().fadd(x, y);
                kb.b.def_var(t, sum);
            }
        }
    };
    let (full, tail) = (s.k / s.kc, s.k % s.kc);
    kb.for_const(0, full, 1, |kb, _| block(kb, s.kc));
    if tail > 0 {
        block(kb, tail);
    }
    let vals: Vec<Vec<Value>> = acc
        .iter()
        .map(|row| row.iter().map(|&v| kb.b.use_var(v)).collect())
        .collect();
    epilogue(kb, s, offs, i, j0, cols, &vals);
}

/// Column slot `c` of a `cols`-wide tile: (element type, first column).
pub(super) fn slot_of(cols: usize, c: usize) -> (Type, usize) {
    let nv = cols / LANES;
    if c < nv {
        (VEC, c * LANES)
    } else {
        (F32, nv * LANES + (c - nv))
    }
}

/// The element index of `(row, col)` of an operand with contiguous columns (or, `GemmSpec::c_k16`, `col` a
/// multiple of 16 and blocks of 16 columns `16·cs` apart), at the batch offset `off`.
pub(super) fn elem(kb: &mut Kb, op: &Operand, row: Value, col: Value, off: Value) -> Value {
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
pub(super) fn tile_addr(kb: &mut Kb, op: &Operand, off: Value, i: Value, j0: Value) -> Value {
    let el = elem(kb, op, i, j0, off);
    let base = kb.arg(op.arg);
    kb.addr(base, el, 4)
}

/// The address of the bias for the tile at `(i, j0)`: element `i` (per row), `j0` (per column) or `(i, j0)`.
pub(super) fn bias_addr(kb: &mut Kb, b: &Bias, off: Value, i: Value, j0: Value) -> Value {
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
pub(super) fn epilogue_ptrs(
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
pub(super) fn epilogue(
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

pub(super) fn scale(kb: &mut Kb, v: Value, f: f32) -> Value {
    if f == 1.0 {
        return v;
    }
    let ty = kb.b.func.dfg.value_type(v);
    let c = kb.fconst(ty, f);
    kb.b.ins().fmul(v, c)
}

/// The element index in A of row `i`'s first element (`i` a multiple of the tile rows): `i·rs`, or in packed
/// panels `(i / P)·P·K + i % P`.
pub(super) fn a_row_el(kb: &mut Kb, s: &GemmSpec, i: Value) -> Value {
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
pub(super) fn b_col_el(kb: &mut Kb, s: &GemmSpec, j0: Value, off: Value) -> Value {
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
