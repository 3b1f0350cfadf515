//! Elementwise kernels: unary maps, binary ops with broadcasting (dimensions coalesced at compile time so the
//! innermost run is contiguous or a splat), and the per-channel affine map `y = x * scale[c] + shift[c]` that an
//! unfused BatchNormalization lowers to. Inner runs are f32x4 with a scalar tail; the
//! transcendental unary maps call machine code where the kernel set has it (`kernels::vmath_x86`, `vmath_avx2`).

use crate::codegen::builder::{Kb, LANES, VEC};
use crate::codegen::math;
use crate::ir::UnOp;
use crate::kernel::elementwise::{BinarySpec, CHUNK};
use crate::kernel::Role;
use cranelift_codegen::ir::types::F32;
use cranelift_codegen::ir::{FuncRef, InstBuilder, Type, Value};

/// Emits a binary kernel: args a, b, out.
pub fn emit_binary(kb: &mut Kb, s: &BinarySpec, tasks: u32) {
    let (lo, hi) = kb.task_range(s.units(), tasks);
    let (pa, pb, po) = (kb.arg(Role::A), kb.arg(Role::B), kb.arg(Role::Out));
    kb.for_range(lo, hi, 1, |kb, u| {
        if s.outer.is_empty() {
            let start = kb.b.ins().imul_imm_s(u, CHUNK as i64);
            let end = kb.b.ins().iadd_imm_s(start, CHUNK as i64);
            let n = kb.iconst(s.inner as i64);
            let end = kb.b.ins().umin(end, n);
            let (a, b, o) = (
                offset(kb, pa, start, s.ia),
                offset(kb, pb, start, s.ib),
                kb.addr(po, start, 4),
            );
            let len = kb.b.ins().isub(end, start);
            inner_run(kb, s, a, b, o, len);
        } else {
            let (oa, ob) = kb.strided_offsets(u, &s.outer);
            let a = kb.addr(pa, oa, 4);
            let b = kb.addr(pb, ob, 4);
            let o = kb.addr(po, u, (s.inner * 4) as i64);
            let len = kb.iconst(s.inner as i64);
            inner_run(kb, s, a, b, o, len);
        }
    });
}

fn offset(kb: &mut Kb, p: Value, start: Value, stride: usize) -> Value {
    if stride == 0 {
        p
    } else {
        kb.addr(p, start, 4)
    }
}

/// `out[i] = a[i*ia] op b[i*ib]` for `i` in `0..len` (`len` an i64 value).
fn inner_run(kb: &mut Kb, s: &BinarySpec, a: Value, b: Value, o: Value, len: Value) {
    let zero = kb.iconst(0);
    let load = |kb: &mut Kb, ty: Type, p: Value, i: Value, stride: usize| -> Value {
        if stride == 0 {
            let v = kb.load(F32, p, 0);
            kb.splat(ty, v)
        } else {
            let q = kb.addr(p, i, 4);
            kb.load(ty, q, 0)
        }
    };
    let vec_end = kb.b.ins().band_imm_s(len, !(LANES as i64 - 1));
    kb.for_range(zero, vec_end, LANES as i64, |kb, i| {
        let x = load(kb, VEC, a, i, s.ia);
        let y = load(kb, VEC, b, i, s.ib);
        let r = math::binary(kb, s.op, x, y);
        let q = kb.addr(o, i, 4);
        kb.store(r, q, 0);
    });
    kb.for_range(vec_end, len, 1, |kb, i| {
        let x = load(kb, F32, a, i, s.ia);
        let y = load(kb, F32, b, i, s.ib);
        let r = math::binary(kb, s.op, x, y);
        let q = kb.addr(o, i, 4);
        kb.store(r, q, 0);
    });
}

/// Emits a unary kernel over `len` elements: args in, out. With `code` (the machine-code map of
/// `kernels::vmath_x86` / `vmath_avx2`) each task makes one call over its run; without, f32x4 Cranelift code.
pub fn emit_unary_with(kb: &mut Kb, op: UnOp, len: usize, tasks: u32, code: Option<FuncRef>) {
    let (lo, hi) = kb.task_range(len.div_ceil(CHUNK), tasks);
    let (pi, po) = (kb.arg(Role::X), kb.arg(Role::Out));
    let start = kb.b.ins().imul_imm_s(lo, CHUNK as i64);
    let end = kb.b.ins().imul_imm_s(hi, CHUNK as i64);
    let n = kb.iconst(len as i64);
    let end = kb.b.ins().umin(end, n);
    if let Some(f) = code {
        // The task's whole run in one call (an empty run when the task has no chunk).
        let end = kb.b.ins().umax(end, start);
        let count = kb.b.ins().isub(end, start);
        let (src, dst) = (kb.addr(pi, start, 4), kb.addr(po, start, 4));
        kb.b.ins().call(f, &[src, dst, count]);
        return;
    }
    let vec_end = kb.b.ins().isub(end, start);
    let vec_end = kb.b.ins().band_imm_s(vec_end, !(LANES as i64 - 1));
    let vec_end = kb.b.ins().iadd(start, vec_end);
    let body = |kb: &mut Kb, ty: Type, i: Value| {
        let p = kb.addr(pi, i, 4);
        let x = kb.load(ty, p, 0);
        let r = math::unary(kb, ty, op, x);
        let q = kb.addr(po, i, 4);
        kb.store(r, q, 0);
    };
    kb.for_range(start, vec_end, LANES as i64, |kb, i| body(kb, VEC, i));
    kb.for_range(vec_end, end, 1, |kb, i| body(kb, F32, i));
}

/// Emits `out[p, i] = x[p, i] * scale[p % c] + shift[p % c]` over `planes` planes of `inner` elements:
/// args x, scale, shift, out.
pub fn emit_affine(kb: &mut Kb, planes: usize, c: usize, inner: usize, tasks: u32) {
    let (lo, hi) = kb.task_range(planes, tasks);
    let (px, ps, pt, po) = (
        kb.arg(Role::X),
        kb.arg(Role::Scale),
        kb.arg(Role::Shift),
        kb.arg(Role::Out),
    );
    kb.for_range(lo, hi, 1, |kb, p| {
        let (_, ch) = kb.divmod(p, c);
        let sp = kb.addr(ps, ch, 4);
        let sc = kb.load(F32, sp, 0);
        let tp = kb.addr(pt, ch, 4);
        let sh = kb.load(F32, tp, 0);
        let (sv, tv) = (kb.splat(VEC, sc), kb.splat(VEC, sh));
        let x = kb.addr(px, p, (inner * 4) as i64);
        let o = kb.addr(po, p, (inner * 4) as i64);
        let nvec = inner / LANES * LANES;
        kb.for_const(0, nvec, LANES, |kb, i| {
            let a = kb.addr(x, i, 4);
            let v = kb.load(VEC, a, 0);
            let m = kb.b.ins().fmul(v, sv);
            let r = kb.b.ins().fadd(m, tv);
            let q = kb.addr(o, i, 4);
            kb.store(r, q, 0);
        });
        for e in nvec..inner {
            let v = kb.load(F32, x, (e * 4) as i64);
            let m = kb.b.ins().fmul(v, sc);
            let r = kb.b.ins().fadd(m, sh);
            kb.store(r, o, (e * 4) as i64);
        }
    });
}
