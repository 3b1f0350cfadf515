//! Normalisation kernels. Softmax / LogSoftmax over the `[outer, len, inner]` geometry of
//! `ir::ops::nn::softmax_geom` (max, exp and sum, then division, in a fixed order; contiguous rows vectorised,
//! strided rows scalar; contiguous rows on x86 one call of the row kernel per task, `x86/softmax_x86.rs` or on
//! AVX2 `softmax_avx2.rs`); row
//! normalisation for LayerNorm / RMSNorm / InstanceNorm (reference: `ir::ops::nn::normalize_row`); LRN across
//! channels; and one axis of a separable resample (Resize), reading the taps of `ir::ops::resize::axis_taps`.

use crate::codegen::builder::{Kb, LANES, VEC};
use crate::codegen::math::{exp, log};
use crate::ir::LrnAttrs;
use crate::kernel::Role;
use cranelift_codegen::ir::types::{F32, I64};
use cranelift_codegen::ir::{FuncRef, InstBuilder, Type, Value};

/// Emits a Softmax over contiguous rows of `len` through the machine-code row kernel `f`
/// (`x86/softmax_x86.rs`): args x, y; each task one call over its rows.
pub fn emit_softmax_rows(kb: &mut Kb, outer: usize, len: usize, tasks: u32, f: FuncRef) {
    let (lo, hi) = kb.task_range(outer, tasks);
    let (px, po) = (kb.arg(Role::X), kb.arg(Role::Out));
    let x = kb.addr(px, lo, (len * 4) as i64);
    let y = kb.addr(po, lo, (len * 4) as i64);
    let rows = kb.b.ins().isub(hi, lo);
    kb.b.ins().call(f, &[x, y, rows]);
}

/// Emits a LayerNorm / RMSNorm over contiguous rows of `len` through the machine-code row kernel `f`
/// (`x86/norm/`): args x, scale, \[bias\], out; each task one call over its rows (without a bias the
/// kernel is handed the scale's pointer, which it does not read as a bias).
pub fn emit_norm_rows(
    kb: &mut Kb,
    rows: usize,
    len: usize,
    has_bias: bool,
    tasks: u32,
    f: FuncRef,
) {
    let (lo, hi) = kb.task_range(rows, tasks);
    let (px, ps, po) = (kb.arg(Role::X), kb.arg(Role::Scale), kb.arg(Role::Out));
    let pb = if has_bias { kb.arg(Role::Bias) } else { ps };
    let x = kb.addr(px, lo, (len * 4) as i64);
    let y = kb.addr(po, lo, (len * 4) as i64);
    let n = kb.b.ins().isub(hi, lo);
    kb.b.ins().call(f, &[x, ps, pb, y, n]);
}

/// Emits a softmax kernel: args x, out.
pub fn emit_softmax(
    kb: &mut Kb,
    outer: usize,
    len: usize,
    inner: usize,
    log_out: bool,
    tasks: u32,
) {
    let (lo, hi) = kb.task_range(outer * inner, tasks);
    let (px, po) = (kb.arg(Role::X), kb.arg(Role::Out));
    kb.for_range(lo, hi, 1, |kb, u| {
        let start = kb.strided_row_start(u, len, inner);
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
            let mx = kb.pin(mx);
            // Exp and sum.
            let mxv = kb.pinned_splat(VEC, mx);
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
            let sum = kb.pin(sum);
            if log_out {
                log_rows(kb, x, y, len, 4, mx, sum);
                return;
            }
            // Normalise.
            let sumv = kb.pinned_splat(VEC, sum);
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
            let mx = kb.pin(mx);
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
            let sum = kb.pin(sum);
            if log_out {
                log_rows(kb, x, y, len, step, mx, sum);
                return;
            }
            kb.for_const(0, len, 1, |kb, j| {
                let q = kb.addr(y, j, step);
                let v = kb.load(F32, q, 0);
                let r = kb.b.ins().fdiv(v, sum);
                kb.store(r, q, 0);
            });
        }
    });
}

/// LogSoftmax's last pass: y = (x - max) - ln(sum).
fn log_rows(kb: &mut Kb, x: Value, y: Value, len: usize, step: i64, mx: Value, sum: Value) {
    let ls = log(kb, F32, sum);
    kb.for_const(0, len, 1, |kb, j| {
        let p = kb.addr(x, j, step);
        let v = kb.load(F32, p, 0);
        let d = kb.b.ins().fsub(v, mx);
        let r = kb.b.ins().fsub(d, ls);
        let q = kb.addr(y, j, step);
        kb.store(r, q, 0);
    });
}

/// Emits row normalisation: args x, scale, \[bias\], out. `channels` selects per-row parameters (InstanceNorm).
#[allow(clippy::too_many_arguments)]
pub fn emit_norm(
    kb: &mut Kb,
    rows: usize,
    len: usize,
    eps: f32,
    rms: bool,
    channels: Option<usize>,
    has_bias: bool,
    tasks: u32,
) {
    let (lo, hi) = kb.task_range(rows, tasks);
    let px = kb.arg(Role::X);
    let ps = kb.arg(Role::Scale);
    let pb = has_bias.then(|| kb.arg(Role::Bias));
    let po = kb.arg(Role::Out);
    kb.for_range(lo, hi, 1, |kb, r| {
        let x = kb.addr(px, r, (len * 4) as i64);
        let y = kb.addr(po, r, (len * 4) as i64);
        let n = kb.fconst(F32, len as f32);
        let mean = if rms {
            kb.fconst(F32, 0.0)
        } else {
            let s = kb.row_sum(x, len, |_, _, v| v);
            let m = kb.b.ins().fdiv(s, n);
            kb.pin(m)
        };
        let mean_v = kb.pinned_splat(VEC, mean);
        let var = kb.row_sum(x, len, |kb, ty, v| {
            let m = if ty == F32 { mean } else { mean_v };
            let d = kb.b.ins().fsub(v, m);
            kb.b.ins().fmul(d, d)
        });
        let var = kb.b.ins().fdiv(var, n);
        let e = kb.fconst(F32, eps);
        let ve = kb.b.ins().fadd(var, e);
        let sd = kb.b.ins().sqrt(ve);
        let one = kb.fconst(F32, 1.0);
        let inv = kb.b.ins().fdiv(one, sd);
        let inv = kb.pin(inv);
        let inv_v = kb.pinned_splat(VEC, inv);
        // `p[at]` (a per-row or per-element parameter), or 0 for an absent bias.
        let param = |kb: &mut Kb, ty: Type, p: Option<Value>, at: Value| match p {
            Some(p) => {
                let a = kb.addr(p, at, 4);
                kb.load(ty, a, 0)
            }
            None => kb.fconst(ty, 0.0),
        };
        // Per-row parameters (InstanceNorm) are loaded once; per-element ones are read alongside x.
        let row_params = channels.map(|c| {
            let (_, ch) = kb.divmod(r, c);
            (param(kb, F32, Some(ps), ch), param(kb, F32, pb, ch))
        });
        let elem = |kb: &mut Kb, ty: Type, j: Value| {
            let p = kb.addr(x, j, 4);
            let v = kb.load(ty, p, 0);
            let (m, iv) = if ty == F32 {
                (mean, inv)
            } else {
                (mean_v, inv_v)
            };
            let d = kb.b.ins().fsub(v, m);
            let nrm = kb.b.ins().fmul(d, iv);
            let (s, b) = match row_params {
                Some((s, b)) => (kb.splat(ty, s), kb.splat(ty, b)),
                None => (param(kb, ty, Some(ps), j), param(kb, ty, pb, j)),
            };
            let t = kb.b.ins().fmul(nrm, s);
            let out = kb.b.ins().fadd(t, b);
            let q = kb.addr(y, j, 4);
            kb.store(out, q, 0);
        };
        let nvec = len / LANES * LANES;
        kb.for_const(0, nvec, LANES, |kb, j| elem(kb, VEC, j));
        kb.for_const(nvec, len, 1, |kb, j| elem(kb, F32, j));
    });
}

/// Emits LRN: args x, out. One task unit per (n, c) plane.
pub fn emit_lrn(kb: &mut Kb, n: usize, c: usize, inner: usize, a: &LrnAttrs, tasks: u32) {
    let (lo, hi) = kb.task_range(n * c, tasks);
    let (px, po) = (kb.arg(Role::X), kb.arg(Role::Out));
    let before = ((a.size - 1) / 2) as i64;
    let after = (a.size - 1) as i64 - before;
    let plane = (inner * 4) as i64;
    kb.for_range(lo, hi, 1, |kb, u| {
        let (b, ch) = kb.divmod(u, c);
        let lo_c = kb.b.ins().iadd_imm_s(ch, -before);
        let zero = kb.iconst(0);
        let lo_c = kb.b.ins().smax(lo_c, zero);
        let hi_c = kb.b.ins().iadd_imm_s(ch, after + 1);
        let cmax = kb.iconst(c as i64);
        let hi_c = kb.b.ins().smin(hi_c, cmax);
        let base = kb.b.ins().imul_imm_s(b, c as i64);
        let body = |kb: &mut Kb, ty: Type, p: Value| {
            let z = kb.fconst(ty, 0.0);
            let acc = kb.var(ty, z);
            kb.for_range(lo_c, hi_c, 1, |kb, k| {
                let pl = kb.b.ins().iadd(base, k);
                let row = kb.addr(px, pl, plane);
                let q = kb.addr(row, p, 4);
                let v = kb.load(ty, q, 0);
                let sq = kb.b.ins().fmul(v, v);
                let s = kb.b.use_var(acc);
                let s = kb.b.ins().fadd(s, sq);
                kb.b.def_var(acc, s);
            });
            let s = kb.b.use_var(acc);
            let al = kb.fconst(ty, a.alpha / a.size as f32);
            let bi = kb.fconst(ty, a.bias);
            let d = kb.mul_add(s, al, bi);
            let l = log(kb, ty, d);
            let nb = kb.fconst(ty, -a.beta);
            let l = kb.b.ins().fmul(l, nb);
            let f = exp(kb, ty, l);
            let xp = kb.addr(px, u, plane);
            let xp = kb.addr(xp, p, 4);
            let x = kb.load(ty, xp, 0);
            let r = kb.b.ins().fmul(x, f);
            let op = kb.addr(po, u, plane);
            let op = kb.addr(op, p, 4);
            kb.store(r, op, 0);
        };
        let nvec = inner / LANES * LANES;
        kb.for_const(0, nvec, LANES, |kb, p| body(kb, VEC, p));
        kb.for_const(nvec, inner, 1, |kb, p| body(kb, F32, p));
    });
}

/// Emits one axis of a separable resample: args x, tap indices (i64), tap weights (f32), out.
/// `out[o, q, i] = Σ_t w[q, t] · x[o, idx[q, t], i]`, taps in order.
#[allow(clippy::too_many_arguments)]
pub fn emit_resample(
    kb: &mut Kb,
    outer: usize,
    n_in: usize,
    n_out: usize,
    inner: usize,
    taps: usize,
    tasks: u32,
) {
    let (lo, hi) = kb.task_range(outer * n_out, tasks);
    let (px, pi, pw, po) = (
        kb.arg(Role::X),
        kb.arg(Role::Index),
        kb.arg(Role::W),
        kb.arg(Role::Out),
    );
    let row = (inner * 4) as i64;
    kb.for_range(lo, hi, 1, |kb, u| {
        let (o, q) = kb.divmod(u, n_out);
        let base = kb.b.ins().imul_imm_s(o, n_in as i64);
        let mut srcs = Vec::with_capacity(taps);
        let mut ws = Vec::with_capacity(taps);
        let tq = kb.b.ins().imul_imm_s(q, taps as i64);
        for t in 0..taps {
            let ip = kb.addr(pi, tq, 8);
            let j = kb.load(I64, ip, (t * 8) as i64);
            let at = kb.b.ins().iadd(base, j);
            srcs.push(kb.addr(px, at, row));
            let wp = kb.addr(pw, tq, 4);
            ws.push(kb.load(F32, wp, (t * 4) as i64));
        }
        let dst = kb.addr(po, u, row);
        let body = |kb: &mut Kb, ty: Type, i: Value| {
            let mut acc = kb.fconst(ty, 0.0);
            for t in 0..taps {
                let p = kb.addr(srcs[t], i, 4);
                let v = kb.load(ty, p, 0);
                let w = kb.splat(ty, ws[t]);
                let m = kb.b.ins().fmul(w, v);
                acc = kb.b.ins().fadd(acc, m);
            }
            let p = kb.addr(dst, i, 4);
            kb.store(acc, p, 0);
        };
        let nvec = inner / LANES * LANES;
        kb.for_const(0, nvec, LANES, |kb, i| body(kb, VEC, i));
        kb.for_const(nvec, inner, 1, |kb, i| body(kb, F32, i));
    });
}
