//! Softmax kernels over the `[outer, len, inner]` geometry of `ir::ops::nn::softmax_geom`: max, exp and sum,
//! then division, all in a fixed order so results are reproducible. Contiguous rows (inner = 1) are
//! vectorised; strided rows run scalar.

use crate::codegen::builder::{Kb, LANES, VEC};
use crate::codegen::math::exp;
use cranelift_codegen::ir::types::F32;
use cranelift_codegen::ir::InstBuilder;

/// Emits a softmax kernel: args x, out.
pub fn emit_softmax(kb: &mut Kb, outer: usize, len: usize, inner: usize, tasks: u32) {
    let (lo, hi) = kb.task_range(outer * inner, tasks);
    let (px, po) = (kb.args[0], kb.args[1]);
    kb.for_range(lo, hi, 1, |kb, u| {
        let (o, i) = kb.divmod(u, inner);
        let row = kb.b.ins().imul_imm_s(o, (len * inner) as i64);
        let start = kb.b.ins().iadd(row, i);
        let x = kb.addr(px, start, 4);
        let y = kb.addr(po, start, 4);
        let step = (inner * 4) as i64;
        if inner == 1 && len >= LANES {
            let nvec = len / LANES * LANES;
            // Max.
            let ninf = kb.fconst(VEC, f32::NEG_INFINITY);
            let mv = kb.var(VEC, ninf);
            kb.for_const(0, nvec, LANES, |kb, j| {
                let p = kb.addr(x, j, 4);
                let v = kb.load(VEC, p, 0);
                let m = kb.b.use_var(mv);
                let m2 = kb.b.ins().fmax(m, v);
                kb.b.def_var(mv, m2);
            });
            let m = kb.b.use_var(mv);
            let mut mx = kb.hmax(m);
            for j in nvec..len {
                let v = kb.load(F32, x, (j * 4) as i64);
                mx = kb.b.ins().fmax(mx, v);
            }
            // Exp and sum.
            let mxv = kb.splat(VEC, mx);
            let z = kb.fconst(VEC, 0.0);
            let sv = kb.var(VEC, z);
            kb.for_const(0, nvec, LANES, |kb, j| {
                let p = kb.addr(x, j, 4);
                let v = kb.load(VEC, p, 0);
                let d = kb.b.ins().fsub(v, mxv);
                let e = exp(kb, VEC, d);
                let q = kb.addr(y, j, 4);
                kb.store(e, q, 0);
                let s = kb.b.use_var(sv);
                let s2 = kb.b.ins().fadd(s, e);
                kb.b.def_var(sv, s2);
            });
            let s = kb.b.use_var(sv);
            let mut sum = kb.hsum(s);
            for j in nvec..len {
                let v = kb.load(F32, x, (j * 4) as i64);
                let d = kb.b.ins().fsub(v, mx);
                let e = exp(kb, F32, d);
                kb.store(e, y, (j * 4) as i64);
                sum = kb.b.ins().fadd(sum, e);
            }
            // Normalise.
            let sumv = kb.splat(VEC, sum);
            kb.for_const(0, nvec, LANES, |kb, j| {
                let q = kb.addr(y, j, 4);
                let v = kb.load(VEC, q, 0);
                let r = kb.b.ins().fdiv(v, sumv);
                kb.store(r, q, 0);
            });
            for j in nvec..len {
                let v = kb.load(F32, y, (j * 4) as i64);
                let r = kb.b.ins().fdiv(v, sum);
                kb.store(r, y, (j * 4) as i64);
            }
        } else {
            let ninf = kb.fconst(F32, f32::NEG_INFINITY);
            let mv = kb.var(F32, ninf);
            kb.for_const(0, len, 1, |kb, j| {
                let p = kb.addr(x, j, step);
                let v = kb.load(F32, p, 0);
                let m = kb.b.use_var(mv);
                let m2 = kb.b.ins().fmax(m, v);
                kb.b.def_var(mv, m2);
            });
            let mx = kb.b.use_var(mv);
            let z = kb.fconst(F32, 0.0);
            let sv = kb.var(F32, z);
            kb.for_const(0, len, 1, |kb, j| {
                let p = kb.addr(x, j, step);
                let v = kb.load(F32, p, 0);
                let d = kb.b.ins().fsub(v, mx);
                let e = exp(kb, F32, d);
                let q = kb.addr(y, j, step);
                kb.store(e, q, 0);
                let s = kb.b.use_var(sv);
                let s2 = kb.b.ins().fadd(s, e);
                kb.b.def_var(sv, s2);
            });
            let sum = kb.b.use_var(sv);
            kb.for_const(0, len, 1, |kb, j| {
                let q = kb.addr(y, j, step);
                let v = kb.load(F32, q, 0);
                let r = kb.b.ins().fdiv(v, sum);
                kb.store(r, q, 0);
            });
        }
    });
}
