//! Direct depthwise convolution (group = C = M): one task unit per (batch, channel) plane, the KH·KW weights of
//! the channel held in registers. Rows and columns whose every tap is inside the input (computed at compile
//! time) run without bounds tests — f32x4 along the output row when the stride is 1 — and the border runs a
//! branchless path that reads a clamped, in-bounds address and zeroes the taps that fall in the padding. The
//! fused activation is applied last. Replaces im2col + a one-row GEMM per channel. With a row kernel
//! (`x86/depthwise_x86.rs` / `depthwise_avx2.rs`, stride 1 or 2) the plane mode (`depthwise_plane.rs`)
//! decides: AVX-512 edge rows run every row whole from the input (rows-mode calls, the padding masked in the
//! kernel, stack buffers for the rows above and below), a padded plane is copied into a zero-padded stack plane
//! (split at stride 2) and run whole, otherwise the interior of each row is one call and the border scalar.

use super::depthwise_plane::interior;
pub use super::depthwise_plane::{plane_mode, EdgeRows, PlaneMode};
use super::plane::StackPlane;
use crate::codegen::builder::{Kb, LANES, VEC};
use crate::codegen::math;
pub use crate::kernel::depthwise::C16Out;
use crate::kernel::depthwise::DepthwiseSpec;
use crate::kernel::Role;
use cranelift_codegen::ir::condcodes::IntCC;
use cranelift_codegen::ir::types::F32;
use cranelift_codegen::ir::{FuncRef, InstBuilder, Type, Value};

/// Emits the driver of the channel-blocked kernel (`Body::DepthwiseC16`, `spec` = `x86::depthwise_c16_x86::c16` of `s`): roles X, W
/// (packed `[C/16, KH·KW, 16]`), \[Bias\], Out; one unit per (batch, 16 channels), each one call to `f` with a
/// stack scratch of the kernel's size.
pub fn emit_c16(
    kb: &mut Kb,
    s: &DepthwiseSpec,
    spec: &crate::x86::depthwise_c16_x86::DwC16,
    tasks: u32,
    f: FuncRef,
) {
    use cranelift_codegen::ir::types::I64;
    let groups = s.c / 16;
    let taps = s.kernel[0] * s.kernel[1];
    let (plane, p) = (s.hw[0] * s.hw[1], s.out[0] * s.out[1]);
    let slot =
        kb.b.create_sized_stack_slot(cranelift_codegen::ir::StackSlotData::new(
            cranelift_codegen::ir::StackSlotKind::ExplicitSlot,
            spec.scratch_bytes() as u32,
            6,
        ));
    let (lo, hi) = kb.task_range(s.n * groups, tasks);
    let (px, pw, po) = (kb.arg(Role::X), kb.arg(Role::W), kb.arg(Role::Out));
    let pb = kb.arg_opt(Role::Bias);
    kb.for_range(lo, hi, 1, |kb, u| {
        // Unit u: channels 16·u .. 16·u + 16 of the flattened [N·C] planes; g = u mod C/16 their group.
        let (b, g) = kb.divmod(u, groups);
        let x = kb.addr(px, u, (16 * plane * 4) as i64);
        let out = if matches!(s.out_layout, C16Out::Panels(_)) {
            // Row panels [N, P8/8, C, 8]: the group's 16 channels start 16·8 floats into each panel.
            let batch = kb.addr(po, b, (p.next_multiple_of(8) * s.c * 4) as i64);
            kb.addr(batch, g, (16 * 8 * 4) as i64)
        } else {
            // 16 planes [16][P], or the block [P][16]: 16·P floats per unit either way.
            kb.addr(po, u, (16 * p * 4) as i64)
        };
        let w = kb.addr(pw, g, (16 * taps * 4) as i64);
        let b = match pb {
            Some(pb) => kb.addr(pb, g, 64),
            None => kb.iconst(0),
        };
        let scratch = kb.b.ins().stack_addr(I64, slot, 0);
        kb.b.ins().call(f, &[x, w, b, out, scratch]);
    });
}

/// Emits the depthwise kernel: args x, w, \[bias\], out. With `row` (the AVX-512 row kernel of
/// `x86/depthwise_x86.rs`, row stride 1 or 2), each interior row's interior columns are one call to it.
pub fn emit_depthwise(
    kb: &mut Kb,
    s: &DepthwiseSpec,
    tasks: u32,
    row: Option<FuncRef>,
    copy: Option<FuncRef>,
    avx512: bool,
) {
    let [h, w] = s.hw;
    let [kh, kw] = s.kernel;
    let [oh, ow] = s.out;
    let [sh, sw] = s.strides;
    let [dh, dw] = s.dilations;
    let [pt, pl] = s.pads;
    let (y0, y1) = interior(h, oh, kh, sh, dh, pt);
    let (x0, x1) = interior(w, ow, kw, sw, dw, pl);
    let (lo, hi) = kb.task_range(s.n * s.c, tasks);
    let (px, pw) = (kb.arg(Role::X), kb.arg(Role::W));
    let pb = s.has_bias.then(|| kb.arg(Role::Bias));
    let po = kb.arg(Role::Out);
    let mode = plane_mode(s, avx512);
    // A whole-plane path's pointers for unit u: the channel's weights, the input plane, the output plane and
    // the channel's bias (0 without one).
    let plane_ptrs = |kb: &mut Kb, u: Value| {
        let (_, ch) = kb.divmod(u, s.c);
        let wts = kb.addr(pw, ch, (kh * kw * 4) as i64);
        let xin = kb.addr(px, u, (h * w * 4) as i64);
        let out = kb.addr(po, u, (oh * ow * 4) as i64);
        let bp = match pb {
            Some(b) => kb.addr(b, ch, 4),
            None => kb.iconst(0),
        };
        (wts, xin, out, bp)
    };
    if let (Some(f), PlaneMode::Edge(e)) = (row, mode) {
        // Output rows [0, y0) from a zeroed stack buffer of the top input rows, [y1, oh) from one of the bottom
        // ones, the rest straight from the input; x points `pl` columns before the row (the kernel masks them).
        let [top_rows, bottom_rows] = e.buffers;
        let top = (top_rows > 0).then(|| StackPlane::new(kb, [top_rows, w], 0.0));
        let bottom = (bottom_rows > 0).then(|| StackPlane::new(kb, [bottom_rows, w], 0.0));
        kb.for_range(lo, hi, 1, |kb, u| {
            let (wts, xin, out, bp) = plane_ptrs(kb, u);
            // One rows-mode call: output rows [from, to) with `row0` the input (or buffer) row of the first,
            // x `pl` columns before it.
            let call = |kb: &mut Kb, row0: Value, [from, to]: [usize; 2]| {
                let xp = kb.b.ins().iadd_imm_s(row0, -((pl * 4) as i64));
                let op = kb.b.ins().iadd_imm_s(out, (from * ow * 4) as i64);
                let (n, rows) = (kb.iconst(ow as i64), kb.iconst((to - from) as i64));
                kb.b.ins().call(f, &[xp, op, wts, bp, n, rows]);
            };
            if let Some(top) = &top {
                top.load(kb, xin, [h, w], [pt, 0], copy);
                call(kb, top.addr, [0, y0]);
            }
            let first = kb.b.ins().iadd_imm_s(xin, ((y0 * sh - pt) * w * 4) as i64);
            call(kb, first, [y0, y1]);
            if let Some(bottom) = &bottom {
                // Input rows from y1·sh − pt to the end, then the zero rows below the input.
                let fb = y1 * sh - pt;
                let src = kb.b.ins().iadd_imm_s(xin, (fb * w * 4) as i64);
                bottom.load(kb, src, [h - fb, w], [0, 0], copy);
                call(kb, bottom.addr, [y1, oh]);
            }
        });
        return;
    }
    let padded = match mode {
        PlaneMode::Padded(dims) => Some((dims, None)),
        PlaneMode::Split { dims, half } => Some((dims, Some(half))),
        _ => None,
    };
    if let (Some(f), Some((dims, split))) = (row, padded) {
        // Copy each plane into a zero-padded stack plane (padded row r = input row r − pt), then one row-kernel
        // call runs all `oh` output rows of `ow` outputs (`DwRowF32::rows`).
        let plane = StackPlane::new(kb, dims, 0.0);
        kb.for_range(lo, hi, 1, |kb, u| {
            let (wts, xin, out, bp) = plane_ptrs(kb, u);
            match split {
                Some(half) => plane.load_split(kb, xin, [h, w], [pt, pl], half, copy, avx512),
                None => plane.load(kb, xin, [h, w], [pt, pl], copy),
            }
            let n = kb.iconst(ow as i64);
            let rows = kb.iconst(oh as i64);
            let zero = kb.iconst(0);
            let xp = plane.row(kb, zero, sh);
            kb.b.ins().call(f, &[xp, out, wts, bp, n, rows]);
        });
        return;
    }
    kb.for_range(lo, hi, 1, |kb, u| {
        let (_, ch) = kb.divmod(u, s.c);
        let wp = kb.addr(pw, ch, (kh * kw * 4) as i64);
        let wts: Vec<Value> = (0..kh * kw)
            .map(|t| kb.load(F32, wp, (t * 4) as i64))
            .collect();
        let bias = match pb {
            Some(b) => {
                let bp = kb.addr(b, ch, 4);
                kb.load(F32, bp, 0)
            }
            None => kb.fconst(F32, 0.0),
        };
        let xin = kb.addr(px, u, (h * w * 4) as i64);
        let out = kb.addr(po, u, (oh * ow * 4) as i64);
        let store = |kb: &mut Kb, ty: Type, acc: Value, oy: Value, ox: Value| {
            let r = math::activation(kb, ty, s.act, acc);
            let row = kb.addr(out, oy, (ow * 4) as i64);
            let p = kb.addr(row, ox, 4);
            kb.store(r, p, 0);
        };
        // Generic output (any position): clamped loads, padding taps zeroed.
        let generic = |kb: &mut Kb, oy: Value, ox: Value| {
            let mut acc = bias;
            let zero = kb.fconst(F32, 0.0);
            let izero = kb.iconst(0);
            // Column of each kx (clamped) and whether it is inside the input, shared by every ky.
            let cols: Vec<(Value, Value)> = (0..kw)
                .map(|kx| {
                    let ix = kb.b.ins().imul_imm_s(ox, sw as i64);
                    let ix = kb.b.ins().iadd_imm_s(ix, (kx * dw) as i64 - pl as i64);
                    let vx = kb.b.ins().icmp_imm_u(IntCC::UnsignedLessThan, ix, w as i64);
                    (kb.b.ins().select(vx, ix, izero), vx)
                })
                .collect();
            for ky in 0..kh {
                let iy = kb.b.ins().imul_imm_s(oy, sh as i64);
                let iy = kb.b.ins().iadd_imm_s(iy, (ky * dh) as i64 - pt as i64);
                let vy = kb.b.ins().icmp_imm_u(IntCC::UnsignedLessThan, iy, h as i64);
                let iy = kb.b.ins().select(vy, iy, izero);
                let row = kb.addr(xin, iy, (w * 4) as i64);
                for (kx, &(ix, vx)) in cols.iter().enumerate() {
                    let p = kb.addr(row, ix, 4);
                    let v = kb.load(F32, p, 0);
                    let ok = kb.b.ins().band(vy, vx);
                    let v = kb.b.ins().select(ok, v, zero);
                    acc = kb.mul_add(v, wts[ky * kw + kx], acc);
                }
            }
            store(kb, F32, acc, oy, ox);
        };
        let generic_row = |kb: &mut Kb, oy: Value| {
            kb.for_const(0, ow, 1, |kb, ox| generic(kb, oy, ox));
        };
        kb.for_const(0, y0, 1, |kb, oy| generic_row(kb, oy));
        kb.for_const(y1, oh, 1, |kb, oy| generic_row(kb, oy));
        kb.for_const(y0, y1, 1, |kb, oy| {
            kb.for_const(0, x0, 1, |kb, ox| generic(kb, oy, ox));
            kb.for_const(x1, ow, 1, |kb, ox| generic(kb, oy, ox));
            // Interior: every tap in bounds. Input row of tap ky: oy·sh + ky·dh − pt.
            let base = kb.b.ins().imul_imm_s(oy, sh as i64);
            let rows: Vec<Value> = (0..kh)
                .map(|ky| {
                    let iy = kb.b.ins().iadd_imm_s(base, (ky * dh) as i64 - pt as i64);
                    kb.addr(xin, iy, (w * 4) as i64)
                })
                .collect();
            let interior_at = |kb: &mut Kb, ty: Type, ox: Value| {
                let mut acc = kb.splat(ty, bias);
                let ix0 = kb.b.ins().imul_imm_s(ox, sw as i64);
                for (ky, &row) in rows.iter().enumerate() {
                    let r0 = kb.addr(row, ix0, 4);
                    for kx in 0..kw {
                        let off = ((kx * dw) as i64 - pl as i64) * 4;
                        let v = kb.load(ty, r0, off);
                        let wv = kb.splat(ty, wts[ky * kw + kx]);
                        acc = kb.mul_add(v, wv, acc);
                    }
                }
                store(kb, ty, acc, oy, ox);
            };
            if let Some(f) = row {
                // x under tap (0, 0) of output x0: input column x0·sw − pl of row oy·sh − pt.
                let xp =
                    kb.b.ins()
                        .iadd_imm_s(rows[0], ((x0 * sw) as i64 - pl as i64) * 4);
                let orow = kb.addr(out, oy, (ow * 4) as i64);
                let op = kb.b.ins().iadd_imm_s(orow, (x0 * 4) as i64);
                let bp = match pb {
                    Some(b) => kb.addr(b, ch, 4),
                    None => kb.iconst(0),
                };
                let n = kb.iconst((x1 - x0) as i64);
                kb.b.ins().call(f, &[xp, op, wp, bp, n]);
            } else if sw == 1 && x1 - x0 >= LANES {
                let vend = x0 + (x1 - x0) / LANES * LANES;
                kb.for_const(x0, vend, LANES, |kb, ox| interior_at(kb, VEC, ox));
                kb.for_const(vend, x1, 1, |kb, ox| interior_at(kb, F32, ox));
            } else {
                kb.for_const(x0, x1, 1, |kb, ox| interior_at(kb, F32, ox));
            }
        });
    });
}
