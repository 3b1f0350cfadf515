//! Int8 conversion kernels: QuantizeLinear (`f32 → u8/i8`) and DequantizeLinear (`u8/i8/i32 → f32`) per tensor
//! or per slice, in 4-lane vectors with a scalar tail, and the shared helpers the integer GEMM's epilogue uses:
//! widening byte loads, the requantising clamp-round-convert of `ir/ops/quant.rs` (clamp to the output range
//! minus the zero point, round half to even by the 1.5·2^23 trick, add the zero point — exact, because clamping
//! and rounding commute with adding an integer) and narrowing byte stores; and QAdd, the quantised residual add.

use crate::codegen::builder::{Kb, LANES};
use crate::ir::ops::quant::range_of;
use crate::ir::DType;
use crate::kernel::quant::QuantSpec;
use crate::kernel::Role;
use cranelift_codegen::ir::types::{F32, F32X4, I32, I32X4, I8, I8X16};
use cranelift_codegen::ir::{Endianness, FuncRef, InstBuilder, MemFlagsData, Type, Value};

/// Lane-count-preserving reinterpretation (little-endian).
pub fn bitcast(kb: &mut Kb, to: Type, x: Value) -> Value {
    kb.b.ins().bitcast(
        to,
        MemFlagsData::new().with_endianness(Endianness::Little),
        x,
    )
}

/// Loads 4 integers of `dtype` (u8, i8 or i32) at `ptr` as i32x4.
pub fn load4(kb: &mut Kb, ptr: Value, dtype: DType) -> Value {
    if dtype == DType::I32 {
        return kb.load(I32X4, ptr, 0);
    }
    let w = kb.load(I32, ptr, 0);
    let v = kb.b.ins().scalar_to_vector(I32X4, w);
    let v = bitcast(kb, I8X16, v);
    if dtype == DType::I8 {
        let v = kb.b.ins().swiden_low(v);
        kb.b.ins().swiden_low(v)
    } else {
        let v = kb.b.ins().uwiden_low(v);
        kb.b.ins().uwiden_low(v)
    }
}

/// Loads one integer of `dtype` at `ptr + off` as i32.
pub fn load1(kb: &mut Kb, ptr: Value, off: i64, dtype: DType) -> Value {
    let f = crate::codegen::builder::flags();
    match dtype {
        DType::I32 => kb.load(I32, ptr, off),
        DType::I8 => kb.b.ins().sload8(I32, f, ptr, off as i32),
        _ => kb.b.ins().uload8(I32, f, ptr, off as i32),
    }
}

/// `clamp(rhe(v), lo - zp, hi - zp) + zp` as integers for f32 (or f32x4) `v`; NaN gives `zp`.
pub fn round_to_int(kb: &mut Kb, ty: Type, v: Value, zp: i32, lo: i32, hi: i32) -> Value {
    let (ity, fty) = if ty == F32 {
        (I32, F32)
    } else {
        (I32X4, F32X4)
    };
    let lo_f = kb.fconst(fty, (lo as f64 - zp as f64) as f32);
    let hi_f = kb.fconst(fty, (hi as f64 - zp as f64) as f32);
    // fmax/fmin propagate NaN, which the saturating conversion turns into 0 (the zero point).
    let v = kb.b.ins().fmax(v, lo_f);
    let v = kb.b.ins().fmin(v, hi_f);
    let magic = kb.fconst(fty, 12582912.0);
    let t = kb.b.ins().fadd(v, magic);
    let r = kb.b.ins().fsub(t, magic);
    let i = kb.b.ins().fcvt_to_sint_sat(ity, r);
    let z = kb.b.ins().iconst(I32, zp as i64);
    let z = if ty == F32 {
        z
    } else {
        kb.b.ins().splat(I32X4, z)
    };
    kb.b.ins().iadd(i, z)
}

/// Stores the 4 lanes of i32x4 `v` (already in range) as `dtype` at `ptr + off`.
pub fn store4(kb: &mut Kb, v: Value, ptr: Value, off: i64, dtype: DType) {
    if dtype == DType::I32 {
        kb.store(v, ptr, off);
        return;
    }
    let h = kb.b.ins().snarrow(v, v);
    let b = if dtype == DType::I8 {
        kb.b.ins().snarrow(h, h)
    } else {
        kb.b.ins().unarrow(h, h)
    };
    let w = bitcast(kb, I32X4, b);
    let w = kb.b.ins().extractlane(w, 0);
    kb.store(w, ptr, off);
}

/// Stores i32 `v` as `dtype` at `ptr + off`.
pub fn store1(kb: &mut Kb, v: Value, ptr: Value, off: i64, dtype: DType) {
    match dtype {
        DType::I32 => kb.store(v, ptr, off),
        _ => {
            let b = kb.b.ins().ireduce(I8, v);
            kb.store(b, ptr, off);
        }
    }
}

/// Emits a quantize / dequantize kernel.
pub fn emit_quantize(kb: &mut Kb, s: &QuantSpec, tasks: u32) {
    emit_quantize_with(kb, s, tasks, None);
}

/// Emits a quantize / dequantize kernel; a quantize with `row` (the AVX-512 row kernel,
/// `kernels::quant_x86::assemble_quantize`) calls it once per plane, `(x, y, inner, &scale[c], &zp[c])`.
pub fn emit_quantize_with(kb: &mut Kb, s: &QuantSpec, tasks: u32, row: Option<FuncRef>) {
    let (lo, hi) = kb.task_range(s.planes, tasks);
    let (x, sc, zp, y) = (
        kb.arg(Role::X),
        kb.arg(Role::Scale),
        kb.arg(Role::ZeroPoint),
        kb.arg(Role::Out),
    );
    let (in_sz, out_sz) = if s.dequantize {
        (s.dtype.size() as i64, 4)
    } else {
        (4, s.dtype.size() as i64)
    };
    let (qlo, qhi) = range_of(s.dtype).unwrap_or((0, 255));
    if let (Some(f), false) = (row, s.dequantize) {
        let n = kb.iconst(s.inner as i64);
        kb.for_range(lo, hi, 1, |kb, u| {
            let (_, c) = kb.divmod(u, s.n);
            let xp = kb.addr(x, u, s.inner as i64 * in_sz);
            let yp = kb.addr(y, u, s.inner as i64 * out_sz);
            let (scp, zpp) = (kb.addr(sc, c, 4), kb.addr(zp, c, 4));
            kb.b.ins().call(f, &[xp, yp, n, scp, zpp]);
        });
        return;
    }
    kb.for_range(lo, hi, 1, |kb, u| {
        let (_, c) = kb.divmod(u, s.n);
        let scale = {
            let p = kb.addr(sc, c, 4);
            kb.load(F32, p, 0)
        };
        let z = {
            let p = kb.addr(zp, c, 4);
            kb.load(I32, p, 0)
        };
        let xp = kb.addr(x, u, s.inner as i64 * in_sz);
        let yp = kb.addr(y, u, s.inner as i64 * out_sz);
        let nvec = s.inner / LANES * LANES;
        let (sv, zv) = (kb.b.ins().splat(F32X4, scale), kb.b.ins().splat(I32X4, z));
        let one = |kb: &mut Kb, xp: Value, yp: Value, ty: Type| {
            let vec = ty == F32X4;
            if s.dequantize {
                let q = if vec {
                    load4(kb, xp, s.dtype)
                } else {
                    load1(kb, xp, 0, s.dtype)
                };
                let d = kb.b.ins().isub(q, if vec { zv } else { z });
                let f = kb.b.ins().fcvt_from_sint(ty, d);
                let r = kb.b.ins().fmul(f, if vec { sv } else { scale });
                kb.store(r, yp, 0);
            } else {
                let v = kb.load(ty, xp, 0);
                let q = kb.b.ins().fdiv(v, if vec { sv } else { scale });
                // Per-slice zero points are run-time values here: clamp around 0, add the zero point, clamp again.
                let r = round_to_int(kb, ty, q, 0, qlo - 255, qhi + 255);
                let r = kb.b.ins().iadd(r, if vec { zv } else { z });
                let (l, h) = if vec {
                    let l = kb.b.ins().iconst(I32, qlo as i64);
                    let h = kb.b.ins().iconst(I32, qhi as i64);
                    (kb.b.ins().splat(I32X4, l), kb.b.ins().splat(I32X4, h))
                } else {
                    (
                        kb.b.ins().iconst(I32, qlo as i64),
                        kb.b.ins().iconst(I32, qhi as i64),
                    )
                };
                let r = kb.b.ins().smax(r, l);
                let r = kb.b.ins().smin(r, h);
                if vec {
                    store4(kb, r, yp, 0, s.dtype);
                } else {
                    store1(kb, r, yp, 0, s.dtype);
                }
            }
        };
        kb.for_const(0, nvec, LANES, |kb, j| {
            let xe = kb.addr(xp, j, in_sz);
            let ye = kb.addr(yp, j, out_sz);
            one(kb, xe, ye, F32X4);
        });
        for j in nvec..s.inner {
            let xe = kb.b.ins().iadd_imm_s(xp, j as i64 * in_sz);
            let ye = kb.b.ins().iadd_imm_s(yp, j as i64 * out_sz);
            one(kb, xe, ye, F32);
        }
    });
}

/// Emits a QAdd kernel over `len` elements: args a, b, y (the f32 chain of `ir/ops/quant.rs::qadd_one` in
/// 4-lane vectors, then a scalar tail).
pub fn emit_qadd(
    kb: &mut Kb,
    p: &crate::ir::QAddParams,
    dtypes: [DType; 2],
    len: usize,
    tasks: u32,
) {
    emit_qadd_with(kb, p, dtypes, len, tasks, None);
}

/// `emit_qadd`; with `zmm` (AVX-512) each chunk's multiple of 16 runs the machine-code kernel
/// (`x86/qgemm_x86.rs::assemble_qadd`) and only the tail the Cranelift code.
pub fn emit_qadd_with(
    kb: &mut Kb,
    p: &crate::ir::QAddParams,
    dtypes: [DType; 2],
    len: usize,
    tasks: u32,
    zmm: Option<cranelift_codegen::ir::FuncRef>,
) {
    const CHUNK: usize = 1024;
    let (lo, hi) = kb.task_range(len.div_ceil(CHUNK), tasks);
    let (a, b, y) = (kb.arg(Role::A), kb.arg(Role::B), kb.arg(Role::Out));
    let one = |kb: &mut Kb, i: Value, ty: Type| {
        let vec = ty == F32X4;
        let side = |kb: &mut Kb, base: Value, dt: DType, (s, z): (f32, i32)| {
            let p = kb.b.ins().iadd(base, i);
            let q = if vec {
                load4(kb, p, dt)
            } else {
                load1(kb, p, 0, dt)
            };
            let zc = kb.b.ins().iconst(I32, z as i64);
            let zc = if vec { kb.b.ins().splat(I32X4, zc) } else { zc };
            let d = kb.b.ins().isub(q, zc);
            let f = kb.b.ins().fcvt_from_sint(ty, d);
            let sc = kb.fconst(ty, s);
            kb.b.ins().fmul(f, sc)
        };
        let va = side(kb, a, dtypes[0], p.a);
        let vb = side(kb, b, dtypes[1], p.b);
        let sum = if p.mul {
            kb.b.ins().fmul(va, vb)
        } else {
            kb.b.ins().fadd(va, vb)
        };
        let sy = kb.fconst(ty, p.y.0);
        let q = kb.b.ins().fdiv(sum, sy);
        let r = round_to_int(kb, ty, q, p.y.1, p.clamp.0, p.clamp.1);
        let dst = kb.b.ins().iadd(y, i);
        if vec {
            store4(kb, r, dst, 0, p.dtype);
        } else {
            store1(kb, r, dst, 0, p.dtype);
        }
    };
    kb.for_range(lo, hi, 1, |kb, c| {
        let start = kb.b.ins().imul_imm_s(c, CHUNK as i64);
        let end = kb.b.ins().iadd_imm_s(start, CHUNK as i64);
        let n = kb.iconst((len / 4 * 4) as i64);
        let vend = kb.b.ins().umin(end, n);
        let vstart = match zmm {
            Some(f) => {
                // Chunks start at multiples of 1024, so 16-element blocks from `start` stay aligned to it.
                let span = kb.b.ins().isub(vend, start);
                let blocks = kb.b.ins().ushr_imm_u(span, 4);
                let (pa, pb, py) = (
                    kb.b.ins().iadd(a, start),
                    kb.b.ins().iadd(b, start),
                    kb.b.ins().iadd(y, start),
                );
                kb.b.ins().call(f, &[pa, pb, py, blocks]);
                let done = kb.b.ins().ishl_imm_u(blocks, 4);
                kb.b.ins().iadd(start, done)
            }
            None => start,
        };
        kb.for_range(vstart, vend, 4, |kb, i| one(kb, i, F32X4));
        if !len.is_multiple_of(4) {
            // The scalar tail lies in the last chunk.
            let tail0 = kb.iconst((len / 4 * 4) as i64);
            let last = kb.b.ins().icmp(
                cranelift_codegen::ir::condcodes::IntCC::UnsignedGreaterThanOrEqual,
                tail0,
                start,
            );
            let in_chunk = kb.b.ins().icmp(
                cranelift_codegen::ir::condcodes::IntCC::UnsignedLessThan,
                tail0,
                end,
            );
            let c = kb.b.ins().band(last, in_chunk);
            kb.if_else(
                c,
                |kb| {
                    for t in len / 4 * 4..len {
                        let i = kb.iconst(t as i64);
                        one(kb, i, F32);
                    }
                },
                |_| {},
            );
        }
    });
}

/// Emits the integer GlobalAveragePool (`ir::QGapParams`): per plane the exact i32 sum of `x - zx` (sixteen
/// bytes a step, widened to i32 lanes, then the plane's last `size mod 16` one by one), converted to f32, times
/// the multiplier, rounded half to even, clamped and offset by `zy` as the reference `qgap_one` does. Units of
/// `qgap_planes_per_unit` planes.
pub fn emit_qgap(
    kb: &mut Kb,
    p: &crate::ir::QGapParams,
    dtype: DType,
    [planes, size]: [usize; 2],
    tasks: u32,
) {
    let per = crate::kernel::quant::qgap_planes_per_unit(size);
    let units = kb.task_range(planes.div_ceil(per), tasks);
    let (px, po) = (kb.arg(Role::X), kb.arg(Role::Out));
    let (ylo, yhi) = range_of(p.dtype).unwrap_or((0, 255));
    let signed = dtype == DType::I8;
    kb.for_unit_items(units, per, planes, |kb, pl| {
        let src = kb.addr(px, pl, size as i64);
        let zero = kb.b.ins().iconst(I32, 0);
        let mut acc = kb.b.ins().splat(I32X4, zero);
        // Sixteen bytes a step: widened twice into four i32x4 and added (no overflow: |x| < 2^8 per lane
        // and at most 2^23 steps' worth in a plane the f32 conversion keeps exact).
        let vecs = size / 16;
        if vecs > 0 {
            let v = kb.var(I32X4, acc);
            kb.for_const(0, vecs, 1, |kb, i| {
                let at = kb.addr(src, i, 16);
                let b = kb.load(I8X16, at, 0);
                let halves = if signed {
                    [kb.b.ins().swiden_low(b), kb.b.ins().swiden_high(b)]
                } else {
                    [kb.b.ins().uwiden_low(b), kb.b.ins().uwiden_high(b)]
                };
                let mut a = kb.b.use_var(v);
                for h in halves {
                    let (l, r) = if signed {
                        (kb.b.ins().swiden_low(h), kb.b.ins().swiden_high(h))
                    } else {
                        (kb.b.ins().uwiden_low(h), kb.b.ins().uwiden_high(h))
                    };
                    a = kb.b.ins().iadd(a, l);
                    a = kb.b.ins().iadd(a, r);
                }
                kb.b.def_var(v, a);
            });
            acc = kb.b.use_var(v);
        }
        let mut sum = {
            let l = [0u8, 1, 2, 3].map(|i| kb.b.ins().extractlane(acc, i));
            let s01 = kb.b.ins().iadd(l[0], l[1]);
            let s23 = kb.b.ins().iadd(l[2], l[3]);
            kb.b.ins().iadd(s01, s23)
        };
        for i in vecs * 16..size {
            let v = load1(kb, src, i as i64, dtype);
            sum = kb.b.ins().iadd(sum, v);
        }
        // Σ (x - zx) = Σ x - zx · size (exact in wrapping i32, as the reference's i64 sum truncated).
        let bias = (-(p.x.1 as i64)).wrapping_mul(size as i64) as i32;
        let bias = kb.b.ins().iconst(I32, bias as i64);
        let sum = kb.b.ins().iadd(sum, bias);
        let f = kb.b.ins().fcvt_from_sint(F32, sum);
        let m = kb.fconst(F32, p.multiplier(size));
        let v = kb.b.ins().fmul(f, m);
        let r = round_to_int(kb, F32, v, p.y.1, ylo, yhi);
        let dst = kb.b.ins().iadd(po, pl);
        store1(kb, r, dst, 0, p.dtype);
    });
}
