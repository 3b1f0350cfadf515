//! Pooling kernels: 2-D max and average pooling over NCHW planes (window positions unrolled at compile time,
//! bounds handled branch-free with selects so no load ever leaves the input), and global average pooling.

use super::depthwise_plane::interior;
use super::plane::StackPlane;
use crate::codegen::builder::{Kb, VEC};
use crate::ir::PoolKind;
use crate::kernel::pool::PoolSpec;
use crate::kernel::Role;
use cranelift_codegen::ir::condcodes::IntCC;
use cranelift_codegen::ir::types::F32;
use cranelift_codegen::ir::{FuncRef, InstBuilder, Value};

/// Emits a pooling kernel: roles X and Out, one unit per plane. With `row` the separable 3x3 stride-2 kernel
/// ([`PoolSpec::max3s2`]), one call to it per plane. With `row` (the AVX-512 max-pool row kernel,
/// `x86/depthwise_x86.rs` in max mode) and `copy` (the AVX-512 row copy) for a padded max pooling
/// ([`PoolSpec::padded_plane`]), each plane is copied into a −∞-padded stack plane and one call to the row
/// kernel runs every output row; with `row` alone, the interior columns of every interior row are one call to it and
/// the border keeps the branch-free path.
pub fn emit_pool(
    kb: &mut Kb,
    s: &PoolSpec,
    tasks: u32,
    row: Option<FuncRef>,
    copy: Option<FuncRef>,
) {
    if s.dtype != crate::ir::DType::F32 {
        return super::qpool::emit_int_max(kb, s, tasks);
    }
    if let (Some(f), Some(_)) = (row, s.max3s2()) {
        // One call per plane (`x86/maxpool_x86.rs`).
        let [h, w] = s.hw;
        let [oh, ow] = s.out;
        let (lo, hi) = kb.task_range(s.planes, tasks);
        let (px, po) = (kb.arg(Role::X), kb.arg(Role::Out));
        kb.for_range(lo, hi, 1, |kb, p| {
            let src = kb.addr(px, p, (h * w * 4) as i64);
            let dst = kb.addr(po, p, (oh * ow * 4) as i64);
            kb.b.ins().call(f, &[src, dst]);
        });
        return;
    }
    if let (Some(f), Some(copy), Some(plane)) = (row, copy, s.padded_plane()) {
        emit_padded_max(kb, s, tasks, f, copy, plane);
        return;
    }
    let [h, w] = s.hw;
    let [oh, ow] = s.out;
    let a = &s.attrs;
    let (lo, hi) = kb.task_range(s.planes, tasks);
    let (px, po) = (kb.arg(Role::X), kb.arg(Role::Out));
    kb.for_range(lo, hi, 1, |kb, p| {
        let src = kb.addr(px, p, (h * w * 4) as i64);
        let dst = kb.addr(po, p, (oh * ow * 4) as i64);
        // One output at (oy, ox), every tap bounds-checked.
        let generic = |kb: &mut Kb, oy: Value, ox: Value| {
            let y0 = kb.b.ins().imul_imm_s(oy, a.strides[0] as i64);
            let y0 = kb.b.ins().iadd_imm_s(y0, -(a.pads[0] as i64));
            let x0 = kb.b.ins().imul_imm_s(ox, a.strides[1] as i64);
            let x0 = kb.b.ins().iadd_imm_s(x0, -(a.pads[1] as i64));
            let init = if s.kind == PoolKind::Max {
                f32::NEG_INFINITY
            } else {
                0.0
            };
            let mut acc = kb.fconst(F32, init);
            let mut count = kb.fconst(F32, 0.0);
            let zero_f = kb.fconst(F32, 0.0);
            let one_f = kb.fconst(F32, 1.0);
            let zero_i = kb.iconst(0);
            for ky in 0..a.kernel[0] {
                let iy = kb.b.ins().iadd_imm_s(y0, (ky * a.dilations[0]) as i64);
                let vy = kb.b.ins().icmp_imm_s(IntCC::UnsignedLessThan, iy, h as i64);
                for kx in 0..a.kernel[1] {
                    let ix = kb.b.ins().iadd_imm_s(x0, (kx * a.dilations[1]) as i64);
                    let vx = kb.b.ins().icmp_imm_s(IntCC::UnsignedLessThan, ix, w as i64);
                    let ok = kb.b.ins().band(vy, vx);
                    let row = kb.b.ins().imul_imm_s(iy, w as i64);
                    let idx = kb.b.ins().iadd(row, ix);
                    let idx = kb.b.ins().select(ok, idx, zero_i);
                    let ptr = kb.addr(src, idx, 4);
                    let v = kb.load(F32, ptr, 0);
                    match s.kind {
                        PoolKind::Max => {
                            let m = kb.b.ins().fmax(acc, v);
                            acc = kb.b.ins().select(ok, m, acc);
                        }
                        PoolKind::Average => {
                            let v = kb.b.ins().select(ok, v, zero_f);
                            acc = kb.b.ins().fadd(acc, v);
                            let c = kb.b.ins().select(ok, one_f, zero_f);
                            count = kb.b.ins().fadd(count, c);
                        }
                    }
                }
            }
            if s.kind == PoolKind::Average {
                if a.count_include_pad {
                    // The taps inside the padded extent (never the ceil_mode overhang): those before
                    // size + pad_end.
                    let span = |kb: &mut Kb, start, axis: usize, size: usize| {
                        let (k, d) = (a.kernel[axis], a.dilations[axis]);
                        let lim = (size + a.pads[axis + 2]) as i64;
                        let mut n = kb.iconst(0);
                        for t in 0..k {
                            let at = kb.b.ins().iadd_imm_s(start, (t * d) as i64);
                            let inside = kb.b.ins().icmp_imm_s(IntCC::SignedLessThan, at, lim);
                            let inside =
                                kb.b.ins()
                                    .uextend(cranelift_codegen::ir::types::I64, inside);
                            n = kb.b.ins().iadd(n, inside);
                        }
                        n
                    };
                    let sy = span(kb, y0, 0, h);
                    let sx = span(kb, x0, 1, w);
                    let n = kb.b.ins().imul(sy, sx);
                    count = kb.b.ins().fcvt_from_sint(F32, n);
                } else {
                    count = kb.b.ins().fmax(count, one_f);
                }
                acc = kb.b.ins().fdiv(acc, count);
            }
            let row = kb.b.ins().imul_imm_s(oy, ow as i64);
            let idx = kb.b.ins().iadd(row, ox);
            let q = kb.addr(dst, idx, 4);
            kb.store(acc, q, 0);
        };
        let Some(f) = row else {
            kb.for_const(0, oh, 1, |kb, oy| {
                kb.for_const(0, ow, 1, |kb, ox| generic(kb, oy, ox));
            });
            return;
        };
        let (y0, y1) = interior(h, oh, a.kernel[0], a.strides[0], a.dilations[0], a.pads[0]);
        let (x0, x1) = interior(w, ow, a.kernel[1], a.strides[1], a.dilations[1], a.pads[1]);
        let border_row = |kb: &mut Kb, oy: Value| {
            kb.for_const(0, ow, 1, |kb, ox| generic(kb, oy, ox));
        };
        kb.for_const(0, y0, 1, |kb, oy| border_row(kb, oy));
        kb.for_const(y1, oh, 1, |kb, oy| border_row(kb, oy));
        kb.for_const(y0, y1, 1, |kb, oy| {
            kb.for_const(0, x0, 1, |kb, ox| generic(kb, oy, ox));
            kb.for_const(x1, ow, 1, |kb, ox| generic(kb, oy, ox));
            // Input under tap (0, 0) of output (oy, x0): row oy·sh − pt, column x0·sw − pl.
            let iy = kb.b.ins().imul_imm_s(oy, a.strides[0] as i64);
            let iy = kb.b.ins().iadd_imm_s(iy, -(a.pads[0] as i64));
            let xrow = kb.addr(src, iy, (w * 4) as i64);
            let xp =
                kb.b.ins()
                    .iadd_imm_s(xrow, ((x0 * a.strides[1]) as i64 - a.pads[1] as i64) * 4);
            let orow = kb.addr(dst, oy, (ow * 4) as i64);
            let op = kb.b.ins().iadd_imm_s(orow, (x0 * 4) as i64);
            let (z, n) = (kb.iconst(0), kb.iconst((x1 - x0) as i64));
            kb.b.ins().call(f, &[xp, op, z, z, n]);
        });
    });
}

/// Emits global average pooling: args x, out; `planes` planes of `size` elements each.
pub fn emit_global_avg(kb: &mut Kb, planes: usize, size: usize, tasks: u32) {
    let (lo, hi) = kb.task_range(planes, tasks);
    let (px, po) = (kb.arg(Role::X), kb.arg(Role::Out));
    kb.for_range(lo, hi, 1, |kb, p| {
        let src = kb.addr(px, p, (size * 4) as i64);
        let sum = kb.row_sum(src, size, |_, _, v| v);
        let d = kb.fconst(F32, size as f32);
        let r = kb.b.ins().fdiv(sum, d);
        let q = kb.addr(po, p, 4);
        kb.store(r, q, 0);
    });
}

/// Global average pooling of channel blocks `[C/16, size, 16]` (`Body::GlobalAvg::blocked`): one unit per 16
/// channels, four `f32x4` sums over the pixels in order, each divided by `size`.
pub fn emit_global_avg_blocked(kb: &mut Kb, planes: usize, size: usize, tasks: u32) {
    let (lo, hi) = kb.task_range(planes / 16, tasks);
    let (px, po) = (kb.arg(Role::X), kb.arg(Role::Out));
    kb.for_range(lo, hi, 1, |kb, g| {
        let src = kb.addr(px, g, (size * 64) as i64);
        let zero = kb.fconst(VEC, 0.0);
        let acc: Vec<_> = (0..4).map(|_| kb.var(VEC, zero)).collect();
        kb.for_const(0, size, 1, |kb, p| {
            let at = kb.addr(src, p, 64);
            for (j, &a) in acc.iter().enumerate() {
                let v = kb.load(VEC, at, (j * 16) as i64);
                let cur = kb.b.use_var(a);
                let sum = kb.b.ins().fadd(cur, v);
                kb.b.def_var(a, sum);
            }
        });
        let d = kb.fconst(VEC, size as f32);
        let dst = kb.addr(po, g, 64);
        for (j, &a) in acc.iter().enumerate() {
            let sum = kb.b.use_var(a);
            let r = kb.b.ins().fdiv(sum, d);
            kb.store(r, dst, (j * 16) as i64);
        }
    });
}

/// The padded max pooling of [`emit_pool`]: the plane's border is −∞ (written once per task; the copies never
/// touch it), so the maximum over a window is the maximum over its in-bounds elements.
fn emit_padded_max(
    kb: &mut Kb,
    s: &PoolSpec,
    tasks: u32,
    f: FuncRef,
    copy: FuncRef,
    dims: [usize; 2],
) {
    let [h, w] = s.hw;
    let [oh, ow] = s.out;
    let a = &s.attrs;
    let plane = StackPlane::new(kb, dims, f32::NEG_INFINITY);
    let (lo, hi) = kb.task_range(s.planes, tasks);
    let (px, po) = (kb.arg(Role::X), kb.arg(Role::Out));
    kb.for_range(lo, hi, 1, |kb, p| {
        let src = kb.addr(px, p, (h * w * 4) as i64);
        let dst = kb.addr(po, p, (oh * ow * 4) as i64);
        plane.load(kb, src, [h, w], [a.pads[0], a.pads[1]], Some(copy));
        // Every output row in one call (`DwRowF32::rows`).
        let (z, n, rows) = (kb.iconst(0), kb.iconst(ow as i64), kb.iconst(oh as i64));
        kb.b.ins().call(f, &[plane.addr, dst, z, z, n, rows]);
    });
}
