//! Data-movement kernels that copy bits without arithmetic, for any dtype: flat copies (Reshape, Identity, model
//! outputs), Transpose (a strided gather in output order) and Concat (interleaved block copies).

use crate::codegen::builder::Kb;
use cranelift_codegen::ir::types::{F32X4, I16, I32, I64, I8};
use cranelift_codegen::ir::{InstBuilder, Type, Value};

/// Bytes per work unit of a flat copy.
pub const COPY_CHUNK: usize = 16384;

fn int_ty(elem: usize) -> Type {
    match elem {
        1 => I8,
        2 => I16,
        4 => I32,
        _ => I64,
    }
}

/// Copies `len` bytes from `src` to `dst` (both i64 pointers): 16-byte blocks, then bytes.
pub fn copy_bytes(kb: &mut Kb, dst: Value, src: Value, len: usize) {
    let blocks = len / 16 * 16;
    if blocks <= 64 {
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
    let (src, dst) = (kb.args[0], kb.args[1]);
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
/// walked by each output dim, `elem` the element size in bytes.
pub fn emit_transpose(
    kb: &mut Kb,
    out_shape: &[usize],
    in_strides: &[usize],
    elem: usize,
    tasks: u32,
) {
    let r = out_shape.len();
    let inner = out_shape[r - 1];
    let inner_stride = in_strides[r - 1];
    let outer: usize = out_shape[..r - 1].iter().product();
    let ty = int_ty(elem);
    let (lo, hi) = kb.task_range(outer, tasks);
    let (src, dst) = (kb.args[0], kb.args[1]);
    kb.for_range(lo, hi, 1, |kb, u| {
        let mut off = kb.iconst(0);
        let mut rem = u;
        let mut count = outer;
        for d in 0..r - 1 {
            count /= out_shape[d];
            let (q, rr) = kb.divmod(rem, count.max(1));
            rem = rr;
            let t = kb.b.ins().imul_imm_s(q, in_strides[d] as i64);
            off = kb.b.ins().iadd(off, t);
        }
        let s = kb.addr(src, off, elem as i64);
        let d = kb.addr(dst, u, (inner * elem) as i64);
        kb.for_const(0, inner, 1, |kb, i| {
            let sp = kb.addr(s, i, (inner_stride * elem) as i64);
            let v = kb.load(ty, sp, 0);
            let dp = kb.addr(d, i, elem as i64);
            kb.store(v, dp, 0);
        });
    });
}

/// Emits a concat: args in_0..in_{k-1}, out. `blocks[i]` is input i's bytes per outer index.
pub fn emit_concat(kb: &mut Kb, outer: usize, blocks: &[usize], tasks: u32) {
    let total: usize = blocks.iter().sum();
    let (lo, hi) = kb.task_range(outer, tasks);
    let out = kb.args[blocks.len()];
    let ins: Vec<Value> = kb.args[..blocks.len()].to_vec();
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
