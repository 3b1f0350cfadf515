//! Data-movement kernels that copy bits without arithmetic, for any dtype: flat copies (Reshape, Identity, model
//! outputs), Transpose (a strided gather in output order, or on AVX-512 a 32-bit one's 2-D blocks transposed
//! in registers by machine code: `block_plan`), Concat (interleaved block copies), the offset-table gather
//! behind Slice / Pad / Expand / Tile, Gather by run-time indices, and dtype conversion (Cast).

use crate::codegen::builder::Kb;
use crate::ir::DType;
use crate::kernel::data::BlockTranspose;
use crate::kernel::data::{coalesce_transpose, COPY_CHUNK};
use crate::kernel::Role;
use cranelift_codegen::ir::condcodes::{FloatCC, IntCC};
use cranelift_codegen::ir::types::{F32, F32X4, I16, I32, I64, I8};
use cranelift_codegen::ir::{FuncRef, InstBuilder, Type, Value};

/// The integer type of an element of `elem` bytes (bit copies of any dtype).
pub(crate) fn int_ty(elem: usize) -> Type {
    match elem {
        1 => I8,
        2 => I16,
        4 => I32,
        _ => I64,
    }
}

/// Copies `len` bytes from `src` to `dst` (both i64 pointers): 16-byte blocks (unrolled up to 256 bytes), then
/// words and bytes.
pub fn copy_bytes(kb: &mut Kb, dst: Value, src: Value, len: usize) {
    let blocks = len / 16 * 16;
    if blocks <= 256 {
        for o in (0..blocks).step_by(16) {
            let v = kb.load(F32X4, src, o as i64);
            kb.store(v, dst, o as i64);
        }
    } else {
        kb.for_const(0, blocks, 16, |kb, i| {
            let s = kb.b.ins().iadd(src, i);
            let v = kb.load(F32X4, s, 0);
            let d = kb.b.ins().iadd(dst, i);
            kb.store(v, d, 0);
        });
    }
    let mut o = blocks;
    for (w, ty) in [(8, I64), (4, I32), (2, I16), (1, I8)] {
        while o + w <= len {
            let v = kb.load(ty, src, o as i64);
            kb.store(v, dst, o as i64);
            o += w;
        }
    }
}

/// Emits a flat copy of `len` bytes: args src, dst.
pub fn emit_copy(kb: &mut Kb, len: usize, tasks: u32) {
    let units = len.div_ceil(COPY_CHUNK);
    let (src, dst) = (kb.arg(Role::X), kb.arg(Role::Out));
    if tasks <= 1 || units <= 1 {
        copy_bytes(kb, dst, src, len);
        return;
    }
    // Every task but the last copies whole chunks; the tail chunk is copied by the task that owns it.
    let (lo, hi) = kb.task_range(units, tasks);
    kb.for_range(lo, hi, 1, |kb, u| {
        let last = kb.b.ins().icmp_imm_s(
            cranelift_codegen::ir::condcodes::IntCC::Equal,
            u,
            (units - 1) as i64,
        );
        let s = kb.addr(src, u, COPY_CHUNK as i64);
        let d = kb.addr(dst, u, COPY_CHUNK as i64);
        let tail = len - (units - 1) * COPY_CHUNK;
        kb.if_else(
            last,
            |kb| copy_bytes(kb, d, s, tail),
            |kb| copy_bytes(kb, d, s, COPY_CHUNK),
        );
    });
}

/// Emits a transpose: args src, dst. `out_shape` is the output shape, `in_strides` the input stride (elements)
/// walked by each output dim, `elem` the element size in bytes. Dims are coalesced first; rows the input holds
/// contiguously are copied with vector moves, others gathered an element at a time.
pub fn emit_transpose(
    kb: &mut Kb,
    out_shape: &[usize],
    in_strides: &[usize],
    elem: usize,
    tasks: u32,
) {
    let (out_shape, in_strides) = coalesce_transpose(out_shape, in_strides);
    let r = out_shape.len();
    let inner = out_shape[r - 1];
    let inner_stride = in_strides[r - 1];
    let outer: usize = out_shape[..r - 1].iter().product();
    let ty = int_ty(elem);
    let (lo, hi) = kb.task_range(outer, tasks);
    let (src, dst) = (kb.arg(Role::X), kb.arg(Role::Out));
    kb.for_range(lo, hi, 1, |kb, u| {
        let mut off = kb.iconst(0);
        for (d, q) in kb.unravel(u, &out_shape[..r - 1]).into_iter().enumerate() {
            let t = kb.b.ins().imul_imm_s(q, in_strides[d] as i64);
            off = kb.b.ins().iadd(off, t);
        }
        let s = kb.addr(src, off, elem as i64);
        let d = kb.addr(dst, u, (inner * elem) as i64);
        if inner_stride == 1 {
            copy_bytes(kb, d, s, inner * elem);
            return;
        }
        kb.for_const(0, inner, 1, |kb, i| {
            let sp = kb.addr(s, i, (inner_stride * elem) as i64);
            let v = kb.load(ty, sp, 0);
            let dp = kb.addr(d, i, elem as i64);
            kb.store(v, dp, 0);
        });
    });
}

/// A gathering transpose as 2-D block transposes (`x86::block_transpose`): the output dim
/// that the input walks contiguously (`t.cols` of them, output stride `t.ld`) against the innermost output dim
/// (`t.rows`, input stride `t.ls`), once per combination of the other dims.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BlockPlan {
    /// The 2-D transpose each unit makes.
    pub t: BlockTranspose,
    /// The other (coalesced) output dims, outermost first: (count, input stride, output stride).
    pub outer: Vec<(usize, usize, usize)>,
}

impl BlockPlan {
    /// Work units (one 2-D transpose each).
    pub fn units(&self) -> usize {
        self.outer.iter().map(|o| o.0).product()
    }
}

/// The block plan of a transpose of `elem`-byte elements, where it has one: 32-bit elements whose innermost
/// output dim is not contiguous in the input.
pub fn block_plan(out_shape: &[usize], in_strides: &[usize], elem: usize) -> Option<BlockPlan> {
    let (shape, strides) = coalesce_transpose(out_shape, in_strides);
    let r = shape.len();
    if elem != 4 || r < 2 || strides[r - 1] == 1 {
        return None;
    }
    let j = strides.iter().position(|&s| s == 1)?;
    let mut out_strides = vec![1; r];
    for d in (0..r - 1).rev() {
        out_strides[d] = out_strides[d + 1] * shape[d + 1];
    }
    let t = BlockTranspose {
        rows: shape[r - 1],
        cols: shape[j],
        ls: strides[r - 1],
        ld: out_strides[j],
    };
    let outer = (0..r - 1)
        .filter(|&d| d != j)
        .map(|d| (shape[d], strides[d], out_strides[d]))
        .collect();
    Some(BlockPlan { t, outer })
}

/// Emits a transpose by blocks (`block_plan`): args src, dst; one call of `f(src, dst)` per unit.
pub fn emit_transpose_blocks(kb: &mut Kb, plan: &BlockPlan, tasks: u32, f: FuncRef) {
    let (lo, hi) = kb.task_range(plan.units(), tasks);
    let (src, dst) = (kb.arg(Role::X), kb.arg(Role::Out));
    kb.for_range(lo, hi, 1, |kb, u| {
        let (so, d_o) = kb.strided_offsets(u, &plan.outer);
        let s = kb.addr(src, so, 4);
        let d = kb.addr(dst, d_o, 4);
        kb.b.ins().call(f, &[s, d]);
    });
}

/// Emits a concat: args in_0..in_{k-1}, out. `blocks[i]` is input i's bytes per outer index.
pub fn emit_concat(kb: &mut Kb, outer: usize, blocks: &[usize], tasks: u32) {
    let total: usize = blocks.iter().sum();
    let (lo, hi) = kb.task_range(outer, tasks);
    let out = kb.arg(Role::Out);
    let ins: Vec<Value> = kb.inputs();
    kb.for_range(lo, hi, 1, |kb, o| {
        let mut at = 0;
        let dst_row = kb.addr(out, o, total as i64);
        for (i, &blk) in blocks.iter().enumerate() {
            let s = kb.addr(ins[i], o, blk as i64);
            let d = kb.b.ins().iadd_imm_s(dst_row, at as i64);
            copy_bytes(kb, d, s, blk);
            at += blk;
        }
    });
}

/// Emits an offset-table gather (Slice, Pad, Expand, Tile; see `ir::ops::index::offset_tables`): args src,
/// tables, dst. A row whose outer offsets include a `FILL` entry is filled; inside a row each element reads
/// `src[row + tab_last[j]]` or the fill value (the load goes to a clamped, in-bounds offset and is discarded).
#[allow(clippy::too_many_arguments)]
pub fn emit_index_map(
    kb: &mut Kb,
    out_shape: &[usize],
    tab_at: &[usize],
    elem: usize,
    fill: u64,
    contig_from: Option<i64>,
    tasks: u32,
) {
    let r = out_shape.len();
    let inner = out_shape[r - 1];
    let rows: usize = out_shape[..r - 1].iter().product();
    let ty = int_ty(elem);
    let (lo, hi) = kb.task_range(rows, tasks);
    let (src, tab, dst) = (kb.arg(Role::X), kb.arg(Role::Table), kb.arg(Role::Out));
    kb.for_range(lo, hi, 1, |kb, u| {
        let mut base = kb.iconst(0);
        for (d, q) in kb.unravel(u, &out_shape[..r - 1]).into_iter().enumerate() {
            let tp = kb.addr(tab, q, 8);
            let t = kb.load(I64, tp, (tab_at[d] * 8) as i64);
            base = kb.b.ins().iadd(base, t);
        }
        let row = kb.addr(dst, u, (inner * elem) as i64);
        let neg = kb.b.ins().icmp_imm_s(IntCC::SignedLessThan, base, 0);
        kb.if_else(
            neg,
            |kb| {
                let f = kb.b.ins().iconst(ty, fill as i64);
                kb.for_const(0, inner, 1, |kb, j| {
                    let p = kb.addr(row, j, elem as i64);
                    kb.store(f, p, 0);
                });
            },
            |kb| match contig_from {
                Some(start) => {
                    let off = kb.b.ins().iadd_imm_s(base, start);
                    let s = kb.addr(src, off, elem as i64);
                    copy_bytes(kb, row, s, inner * elem);
                }
                None => {
                    let f = kb.b.ins().iconst(ty, fill as i64);
                    let last = tab_at[r - 1];
                    kb.for_const(0, inner, 1, |kb, j| {
                        let tp = kb.addr(tab, j, 8);
                        let t = kb.load(I64, tp, (last * 8) as i64);
                        let off = kb.b.ins().iadd(base, t);
                        let zero = kb.iconst(0);
                        let safe = kb.b.ins().smax(off, zero);
                        let sp = kb.addr(src, safe, elem as i64);
                        let v = kb.load(ty, sp, 0);
                        let is_fill = kb.b.ins().icmp_imm_s(IntCC::SignedLessThan, t, 0);
                        let v = kb.b.ins().select(is_fill, f, v);
                        let p = kb.addr(row, j, elem as i64);
                        kb.store(v, p, 0);
                    });
                }
            },
        );
    });
}

/// Emits a gather of rows by run-time indices: args data, indices, out. Negative indices count from the end;
/// indices are clamped into the axis so a bad index can never read outside the data.
#[allow(clippy::too_many_arguments)]
pub fn emit_gather(
    kb: &mut Kb,
    outer: usize,
    n: usize,
    k: usize,
    inner: usize,
    elem: usize,
    idx_elem: usize,
    tasks: u32,
) {
    let (lo, hi) = kb.task_range(outer * k, tasks);
    let (data, idx, out) = (kb.arg(Role::X), kb.arg(Role::Index), kb.arg(Role::Out));
    let row = inner * elem;
    kb.for_range(lo, hi, 1, |kb, u| {
        let (o, j) = kb.divmod(u, k);
        let ip = kb.addr(idx, j, idx_elem as i64);
        let i = if idx_elem == 8 {
            kb.load(I64, ip, 0)
        } else {
            let v = kb.load(I32, ip, 0);
            kb.b.ins().sextend(I64, v)
        };
        let neg = kb.b.ins().icmp_imm_s(IntCC::SignedLessThan, i, 0);
        let wrapped = kb.b.ins().iadd_imm_s(i, n as i64);
        let i = kb.b.ins().select(neg, wrapped, i);
        let zero = kb.iconst(0);
        let top = kb.iconst(n as i64 - 1);
        let i = kb.b.ins().smax(i, zero);
        let i = kb.b.ins().smin(i, top);
        let on = kb.b.ins().imul_imm_s(o, n as i64);
        let at = kb.b.ins().iadd(on, i);
        let s = kb.addr(data, at, row as i64);
        let d = kb.addr(out, u, row as i64);
        copy_bytes(kb, d, s, row);
    });
}

/// The Cranelift type a dtype's elements are loaded as (bool, u8 and i8 as I8).
pub(crate) fn load_ty(dt: DType) -> Type {
    match dt {
        DType::F32 => F32,
        DType::I64 => I64,
        DType::I32 => I32,
        DType::U8 | DType::I8 | DType::Bool => I8,
    }
}

/// Emits an elementwise dtype conversion (reference: `ir::ops::elementwise::eval_cast`): args src, dst.
pub fn emit_convert(kb: &mut Kb, from: DType, to: DType, len: usize, tasks: u32) {
    let chunk = crate::kernel::elementwise::CHUNK;
    let (lo, hi) = kb.task_range(len.div_ceil(chunk), tasks);
    let (src, dst) = (kb.arg(Role::X), kb.arg(Role::Out));
    let start = kb.b.ins().imul_imm_s(lo, chunk as i64);
    let end = kb.b.ins().imul_imm_s(hi, chunk as i64);
    let n = kb.iconst(len as i64);
    let end = kb.b.ins().umin(end, n);
    kb.for_range(start, end, 1, |kb, i| {
        let p = kb.addr(src, i, from.size() as i64);
        let x = kb.load(load_ty(from), p, 0);
        let y = if from == DType::F32 {
            match to {
                DType::F32 => x,
                DType::Bool => {
                    let z = kb.fconst(F32, 0.0);
                    kb.b.ins().fcmp(FloatCC::NotEqual, x, z)
                }
                DType::I64 => kb.b.ins().fcvt_to_sint_sat(I64, x),
                DType::I32 => kb.b.ins().fcvt_to_sint_sat(I32, x),
                DType::I8 | DType::U8 => {
                    let w = kb.b.ins().fcvt_to_sint_sat(I32, x);
                    kb.b.ins().ireduce(I8, w)
                }
            }
        } else {
            let wide = match from {
                DType::I64 => x,
                DType::I32 | DType::I8 => kb.b.ins().sextend(I64, x),
                _ => kb.b.ins().uextend(I64, x),
            };
            match to {
                DType::F32 => kb.b.ins().fcvt_from_sint(F32, wide),
                DType::Bool => kb.b.ins().icmp_imm_s(IntCC::NotEqual, wide, 0),
                DType::I64 => wide,
                DType::I32 => kb.b.ins().ireduce(I32, wide),
                DType::I8 | DType::U8 => kb.b.ins().ireduce(I8, wide),
            }
        };
        let q = kb.addr(dst, i, to.size() as i64);
        kb.store(y, q, 0);
    });
}

/// Emits the driver of a transposing epilogue (`Body::TransposeOut`): roles X (`Cᵀ [N, P16, LD]`, `LD` =
/// `t.ld`), \[Residual\] and Out (`[N, M, P]`), one unit per (batch, 16 channels), each one call to the
/// machine-code block transpose `f` (`x86/block_transpose/`).
pub fn emit_transpose_out(
    kb: &mut Kb,
    [n, p, m, ld]: [usize; 4],
    tasks: u32,
    (f, per_call): (FuncRef, usize),
) {
    let blocks = m / per_call;
    let p16 = p.next_multiple_of(16);
    let (lo, hi) = kb.task_range(n * blocks, tasks);
    let (src, dst) = (kb.arg(Role::X), kb.arg(Role::Out));
    let res = kb.arg_opt(Role::Residual);
    kb.for_range(lo, hi, 1, |kb, u| {
        // Unit u = b · blocks + blk: Cᵀ at (b, 0, per_call·blk), the output and residual rows at
        // (b, per_call·blk, 0).
        let (b, blk) = kb.divmod(u, blocks);
        let sb = kb.addr(src, b, (p16 * ld * 4) as i64);
        let s = kb.addr(sb, blk, (per_call * 4) as i64);
        let d = kb.addr(dst, u, (per_call * p * 4) as i64);
        let r = match res {
            Some(r) => kb.addr(r, u, (per_call * p * 4) as i64),
            None => kb.iconst(0),
        };
        let count = kb.iconst(p as i64);
        kb.b.ins().call(f, &[s, d, r, count]);
    });
}
