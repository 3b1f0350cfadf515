//! Direct int8 depthwise convolution (group = C = M), the integer twin of `depthwise.rs`: one unit per
//! (batch, channel) plane, the channel's KH·KW i8 weights in registers. Interior outputs (every tap inside the
//! input, computed at compile time) run eight at a time in i16 lanes — `x - x_zp` fits i16 (|·| ≤ 255) and so
//! does its product with a weight (|·| ≤ 32 640), widened to i32 before summing — reading eight consecutive bytes
//! per tap at stride 1, or sixteen and keeping the even ones (the low byte of each i16 lane) at stride 2, only
//! where all sixteen lie in the row. Borders and other strides run a scalar path whose padding taps contribute 0.
//! With AVX-512 (`row_kernel`) the machine-code row kernel takes every output row instead, over a copy of the
//! plane padded with the zero point (`emit_rows`). The epilogue adds the bias
//! and requantises (or stores the i32 sums), exactly as the reference `qconv` does.

use super::conv::fill_bytes;
use super::data::copy_bytes;
use super::depthwise_plane::interior;
use super::quant::{bitcast, load1, round_to_int, store1, store4};
use crate::codegen::builder::Kb;
use crate::ir::DType;
use crate::kernel::depthwise::{QDepthwiseSpec, Q_MAX_TAPS};
use crate::kernel::Role;
use cranelift_codegen::ir::condcodes::IntCC;
use cranelift_codegen::ir::types::{F32, F32X4, I16, I16X8, I32, I32X4, I64, I64X2, I8X16};
use cranelift_codegen::ir::{InstBuilder, Value};

/// Bytes after the padded plane: a full stride-2 step of the AVX-512 row kernel loads one byte past the last one
/// it reads, the AVX2 kernel's whole last step up to 31 bytes past the last output's, and the VNNI kernel's
/// windows up to [`qdepthwise_vnni::SLACK`](crate::x86::qdepthwise_vnni::SLACK).
const SLACK: usize = crate::x86::qdepthwise_vnni::SLACK;

/// The machine-code row kernel's shape when it takes the whole convolution (requantised output, at most
/// `Q_MAX_TAPS` taps, the input rows of at least one output row within `Q_PLANE_LIMIT` bytes padded, horizontal
/// stride 1 or 2 — or, for the VNNI kernel, what [`QDepthwiseSpec::vnni_fits`] allows): each input plane (or
/// band of it, [`QDepthwiseSpec::band`]) is copied into a zero-point-padded plane on the stack and every
/// output row is one call, borders included.
pub fn row_kernel(s: &QDepthwiseSpec) -> Option<crate::x86::quant_x86::DwRowSpec> {
    let [kh, kw] = s.kernel;
    let (zp, clamp) = s.requant?;
    let [_, cols] = s.padded();
    let stride_ok = s.vnni || matches!(s.strides[1], 1 | 2);
    (stride_ok && kh * kw <= Q_MAX_TAPS && s.band().is_some()).then_some(
        crate::x86::quant_x86::DwRowSpec {
            kernel: s.kernel,
            dilations: s.dilations,
            stride: s.strides[1],
            w: cols,
            x: (s.x.0 == DType::I8, s.x.1),
            y: (zp, clamp, s.y == DType::I8),
        },
    )
}

/// Emits the kernel; with `row` (see [`row_kernel`]) every output row is one call of the machine-code row
/// kernel over a zero-point-padded copy of its plane. `whole_steps`: the kernel (AVX2) writes whole steps of
/// 16 outputs, so each call writes into staging rows that the outputs are copied out of.
pub fn emit_with(
    kb: &mut Kb,
    s: &QDepthwiseSpec,
    tasks: u32,
    row: Option<cranelift_codegen::ir::FuncRef>,
    whole_steps: bool,
) {
    match row {
        Some(f) => emit_rows(kb, s, tasks, f, whole_steps),
        None => emit(kb, s, tasks),
    }
}

/// The row-kernel path: per task a stack plane filled once with the input zero point (so padding taps
/// contribute `(zp - zp) · w = 0`, as the reference's skipped taps do); per (batch, channel) the input rows
/// copied into its interior, then one row-kernel call per output row, or one over the whole plane ([`flat`]).
fn emit_rows(
    kb: &mut Kb,
    s: &QDepthwiseSpec,
    tasks: u32,
    f: cranelift_codegen::ir::FuncRef,
    whole_steps: bool,
) {
    let ([h, w], [oh, ow], [pt, pl]) = (s.hw, s.out, s.pads);
    if let Some(bo) = s.band().filter(|&b| b < oh) {
        return emit_banded(kb, s, tasks, f, whole_steps, bo);
    }
    let [rows, cols] = s.padded();
    let xsz = s.x.0.size();
    let (lo, hi) = kb.task_range(s.n * s.c, tasks);
    let (px, pw, pb) = (kb.arg(Role::X), kb.arg(Role::W), kb.arg(Role::Bias));
    let psc = kb.arg(Role::Scale);
    let po = kb.arg(Role::Out);
    let bytes = rows * cols + SLACK;
    let plane = kb.stack(bytes, 6);
    fill_border(kb, s, plane, bytes);
    let first = kb.b.ins().iadd_imm_s(plane, (pt * cols + pl) as i64);
    let flat = flat(s);
    let n = kb.iconst(flat.unwrap_or(ow) as i64);
    // Staging: the flattened call's rows, or (whole steps) one output row rounded up to the step.
    let stage_bytes = match (flat, whole_steps) {
        (Some(nf), _) => Some(nf.next_multiple_of(16)),
        (None, true) => Some(ow.next_multiple_of(16)),
        (None, false) => None,
    };
    let staged = stage_bytes.map(|b| kb.stack(b, 6));
    kb.for_range(lo, hi, 1, |kb, u| {
        let (_, ch) = kb.divmod(u, s.c);
        let xin = kb.addr(px, u, (h * w * xsz) as i64);
        kb.for_const(0, h, 1, |kb, iy| {
            let from = kb.addr(xin, iy, (w * xsz) as i64);
            let to = kb.addr(first, iy, cols as i64);
            copy_bytes(kb, to, from, w * xsz);
        });
        let wp = kb.addr(pw, ch, s.w_stride() as i64);
        let bp = kb.addr(pb, ch, 4);
        let sp = kb.addr(psc, ch, 4);
        let out = kb.addr(po, u, (oh * ow) as i64);
        match (staged, flat) {
            // One call over the flattened plane into the staging rows, then each row's outputs out of them.
            (Some(rows_at), Some(_)) => {
                kb.b.ins().call(f, &[plane, rows_at, n, wp, bp, sp]);
                kb.for_const(0, oh, 1, |kb, oy| {
                    let from = kb.addr(rows_at, oy, cols as i64);
                    let to = kb.addr(out, oy, ow as i64);
                    copy_bytes(kb, to, from, ow);
                });
            }
            (Some(row_at), None) => kb.for_const(0, oh, 1, |kb, oy| {
                let xp = kb.addr(plane, oy, (s.strides[0] * cols) as i64);
                kb.b.ins().call(f, &[xp, row_at, n, wp, bp, sp]);
                let yp = kb.addr(out, oy, ow as i64);
                copy_bytes(kb, yp, row_at, ow);
            }),
            (None, _) => kb.for_const(0, oh, 1, |kb, oy| {
                let xp = kb.addr(plane, oy, (s.strides[0] * cols) as i64);
                let yp = kb.addr(out, oy, ow as i64);
                kb.b.ins().call(f, &[xp, yp, n, wp, bp, sp]);
            }),
        }
    });
}

/// The row-kernel path of a plane too large for one stack plane: per (batch, channel) bands of `bo` output
/// rows, each over a stack band filled with the zero point and then the input rows its outputs' taps read, one
/// row-kernel call per output row.
fn emit_banded(
    kb: &mut Kb,
    s: &QDepthwiseSpec,
    tasks: u32,
    f: cranelift_codegen::ir::FuncRef,
    whole_steps: bool,
    bo: usize,
) {
    let ([h, w], [oh, ow], [pt, pl]) = (s.hw, s.out, s.pads);
    let [_, cols] = s.padded();
    let sh = s.strides[0];
    let band_rows = crate::kernel::conv::reach(bo, s.kernel[0], sh, s.dilations[0]);
    let xsz = s.x.0.size();
    let (lo, hi) = kb.task_range(s.n * s.c, tasks);
    let (px, pw, pb) = (kb.arg(Role::X), kb.arg(Role::W), kb.arg(Role::Bias));
    let (psc, po) = (kb.arg(Role::Scale), kb.arg(Role::Out));
    let bytes = band_rows * cols + SLACK;
    let band = kb.stack(bytes, 6);
    fill_bytes(kb, band, 0, bytes, s.x.1 as u8);
    let staged = whole_steps.then(|| kb.stack(ow.next_multiple_of(16), 6));
    let n = kb.iconst(ow as i64);
    let (zero, h_v, oh_v) = (kb.iconst(0), kb.iconst(h as i64), kb.iconst(oh as i64));
    kb.for_range(lo, hi, 1, |kb, u| {
        let (_, ch) = kb.divmod(u, s.c);
        let xin = kb.addr(px, u, (h * w * xsz) as i64);
        let wp = kb.addr(pw, ch, s.w_stride() as i64);
        let bp = kb.addr(pb, ch, 4);
        let sp = kb.addr(psc, ch, 4);
        let out = kb.addr(po, u, (oh * ow) as i64);
        kb.for_const(0, oh.div_ceil(bo), 1, |kb, b| {
            // Padded rows [p0, p0 + band_rows) are input rows p - pt where those exist; the band's rows
            // [0, top) and [bottom, band_rows) are padding, whose image columns an earlier band may have written.
            let p0 = kb.b.ins().imul_imm_s(b, (bo * sh) as i64);
            let iy0 = kb.b.ins().iadd_imm_s(p0, -(pt as i64));
            let iy0 = kb.b.ins().smax(iy0, zero);
            let iy1 = kb.b.ins().iadd_imm_s(p0, (band_rows as i64) - pt as i64);
            let iy1 = kb.b.ins().smin(iy1, h_v);
            let top = kb.b.ins().iadd_imm_s(iy0, pt as i64);
            let top = kb.b.ins().isub(top, p0);
            let bottom = kb.b.ins().iadd_imm_s(iy1, pt as i64);
            let bottom = kb.b.ins().isub(bottom, p0);
            let end = kb.iconst(band_rows as i64);
            for (r0, r1) in [(zero, top), (bottom, end)] {
                kb.for_range(r0, r1, 1, |kb, r| {
                    let row = kb.addr(band, r, cols as i64);
                    fill_bytes(kb, row, pl, pl + w * xsz, s.x.1 as u8);
                });
            }
            kb.for_range(iy0, iy1, 1, |kb, iy| {
                let from = kb.addr(xin, iy, (w * xsz) as i64);
                let r = kb.b.ins().iadd_imm_s(iy, pt as i64);
                let r = kb.b.ins().isub(r, p0);
                let row = kb.addr(band, r, cols as i64);
                let to = kb.b.ins().iadd_imm_s(row, pl as i64);
                copy_bytes(kb, to, from, w * xsz);
            });
            let oy0 = kb.b.ins().imul_imm_s(b, bo as i64);
            let oy1 = kb.b.ins().iadd_imm_s(oy0, bo as i64);
            let oy1 = kb.b.ins().smin(oy1, oh_v);
            kb.for_range(oy0, oy1, 1, |kb, oy| {
                let r = kb.b.ins().isub(oy, oy0);
                let xp = kb.addr(band, r, (sh * cols) as i64);
                let yp = kb.addr(out, oy, ow as i64);
                match staged {
                    Some(row_at) => {
                        kb.b.ins().call(f, &[xp, row_at, n, wp, bp, sp]);
                        copy_bytes(kb, yp, row_at, ow);
                    }
                    None => {
                        kb.b.ins().call(f, &[xp, yp, n, wp, bp, sp]);
                    }
                }
            });
        });
    });
}

/// Fills with the zero point the bytes of the padded plane (and its slack, `bytes` in all) that copying an
/// input plane to its image rows does not write: the padding rows, and the padding columns between one image
/// row's end and the next one's start. Once per task: the copies write only image bytes.
fn fill_border(kb: &mut Kb, s: &QDepthwiseSpec, plane: Value, bytes: usize) {
    let ([h, w], [pt, pl], [_, cols]) = (s.hw, s.pads, s.padded());
    let w = w * s.x.0.size();
    let z = s.x.1 as u8;
    if h == 0 || w == 0 {
        return fill_bytes(kb, plane, 0, bytes, z);
    }
    let first = pt * cols + pl;
    fill_bytes(kb, plane, 0, first, z);
    if cols > w && h > 1 {
        kb.for_const(0, h - 1, 1, |kb, r| {
            let row = kb.addr(plane, r, cols as i64);
            fill_bytes(kb, row, first + w, first + cols, z);
        });
    }
    fill_bytes(kb, plane, first + (h - 1) * cols + w, bytes, z);
}

/// The output count of one row-kernel call over the whole padded plane taken as a single row of pitch `cols`,
/// when the strides are equal (then output `(oy, ox)` at `oy·cols + ox` reads exactly the bytes its taps read in
/// the plane; the `cols - ow` outputs between rows are computed and dropped) and that takes fewer 32-output
/// steps than a call per output row: narrow planes (MobileNetV2's 7x7: 2 steps instead of 7), not stride-2
/// rows that already fill their steps (half of a flattened stride-2 row is dropped outputs).
fn flat(s: &QDepthwiseSpec) -> Option<usize> {
    let [_, cols] = s.padded();
    let [oh, ow] = s.out;
    let n = (oh.max(1) - 1) * cols + ow;
    (s.strides[0] == s.strides[1] && n.div_ceil(32) < oh * ow.div_ceil(32)).then_some(n)
}

/// Emits the kernel without machine code: direct i16-lane vectors inside, scalar borders.
pub fn emit(kb: &mut Kb, s: &QDepthwiseSpec, tasks: u32) {
    let [h, w] = s.hw;
    let [kh, kw] = s.kernel;
    let [oh, ow] = s.out;
    let [sh, sw] = s.strides;
    let [dh, dw] = s.dilations;
    let [pt, pl] = s.pads;
    let taps = kh * kw;
    let (y0, y1) = interior(h, oh, kh, sh, dh, pt);
    let (x0, x1) = interior(w, ow, kw, sw, dw, pl);
    let (xdt, zx) = s.x;
    let ysz = s.y.size() as i64;
    let (lo, hi) = kb.task_range(s.n * s.c, tasks);
    let (px, pw, pb) = (kb.arg(Role::X), kb.arg(Role::W), kb.arg(Role::Bias));
    let psc = s.requant.map(|_| kb.arg(Role::Scale));
    let po = kb.arg(Role::Out);
    let mask_ff = {
        let m = kb.b.ins().iconst(I16, 0xff);
        kb.b.ins().splat(I16X8, m)
    };
    kb.for_range(lo, hi, 1, |kb, u| {
        let (_, ch) = kb.divmod(u, s.c);
        let wp = kb.addr(pw, ch, taps as i64);
        let f = crate::codegen::builder::flags();
        let wts: Vec<Value> = (0..taps)
            .map(|t| kb.b.ins().sload8(I32, f, wp, t as i32))
            .collect();
        let wts16: Vec<Value> = wts
            .iter()
            .map(|&v| {
                let v = kb.b.ins().ireduce(I16, v);
                kb.b.ins().splat(I16X8, v)
            })
            .collect();
        let bias = {
            let p = kb.addr(pb, ch, 4);
            kb.load(I32, p, 0)
        };
        let scale = psc.map(|p| {
            let p = kb.addr(p, ch, 4);
            kb.load(F32, p, 0)
        });
        let xin = kb.addr(px, u, (h * w * xdt.size()) as i64);
        let out = kb.addr(po, u, (oh * ow) as i64 * ysz);
        let zxv = kb.b.ins().iconst(I32, zx as i64);
        // Finishes `lanes` sums (i32x4 vectors, or one i32 scalar) at output (oy, ox).
        let finish = |kb: &mut Kb, accs: &[Value], oy: Value, ox: Value, vector: bool| {
            let row = kb.addr(out, oy, ow as i64 * ysz);
            let p = kb.addr(row, ox, ysz);
            for (i, &acc) in accs.iter().enumerate() {
                let b = if vector {
                    kb.b.ins().splat(I32X4, bias)
                } else {
                    bias
                };
                let v = kb.b.ins().iadd(acc, b);
                let ty = if vector { F32X4 } else { F32 };
                let y = match (s.requant, scale) {
                    (Some((zp, (lo, hi))), Some(sc)) => {
                        let f = kb.b.ins().fcvt_from_sint(ty, v);
                        let sc = if vector {
                            kb.b.ins().splat(F32X4, sc)
                        } else {
                            sc
                        };
                        let f = kb.b.ins().fmul(f, sc);
                        round_to_int(kb, ty, f, zp, lo, hi)
                    }
                    _ => v,
                };
                let off = (i * 4) as i64 * ysz;
                if vector {
                    store4(kb, y, p, off, s.y);
                } else {
                    store1(kb, y, p, off, s.y);
                }
            }
        };
        // Any output: clamped loads, padding taps contribute 0.
        let generic = |kb: &mut Kb, oy: Value, ox: Value| {
            let izero = kb.iconst(0);
            let zero = kb.b.ins().iconst(I32, 0);
            let mut acc = zero;
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
                let row = kb.addr(xin, iy, (w * xdt.size()) as i64);
                for (kx, &(ix, vx)) in cols.iter().enumerate() {
                    let p = kb.addr(row, ix, xdt.size() as i64);
                    let v = load1(kb, p, 0, xdt);
                    let v = kb.b.ins().isub(v, zxv);
                    let ok = kb.b.ins().band(vy, vx);
                    let v = kb.b.ins().select(ok, v, zero);
                    let m = kb.b.ins().imul(v, wts[ky * kw + kx]);
                    acc = kb.b.ins().iadd(acc, m);
                }
            }
            finish(kb, &[acc], oy, ox, false);
        };
        let generic_row = |kb: &mut Kb, oy: Value| {
            kb.for_const(0, ow, 1, |kb, ox| generic(kb, oy, ox));
        };
        kb.for_const(0, y0, 1, |kb, oy| generic_row(kb, oy));
        kb.for_const(y1, oh, 1, |kb, oy| generic_row(kb, oy));
        // Interior columns that run eight at a time: all loaded bytes must lie in the row.
        let vx0 = x0;
        let vec_end = match sw {
            1 => vx0 + (x1 - vx0) / 8 * 8,
            2 => {
                // A 16-byte load at 2·ox + kx·dw − pl for the largest kx must end inside the row.
                let span = (kw - 1) * dw;
                let max_ox = (w + pl).saturating_sub(span + 16) / 2;
                let n = (max_ox + 1).saturating_sub(x0).min(x1 - x0) / 8 * 8;
                x0 + n.min((x1 - x0) / 8 * 8)
            }
            _ => x0,
        };
        let vec_end = if vec_end < vx0 + 8 { vx0 } else { vec_end };
        let zx16 = {
            let z = kb.b.ins().iconst(I16, zx as i64);
            kb.b.ins().splat(I16X8, z)
        };
        kb.for_const(y0, y1, 1, |kb, oy| {
            kb.for_const(0, x0, 1, |kb, ox| generic(kb, oy, ox));
            kb.for_const(vec_end, ow, 1, |kb, ox| generic(kb, oy, ox));
            let base = kb.b.ins().imul_imm_s(oy, sh as i64);
            let rows: Vec<Value> = (0..kh)
                .map(|ky| {
                    let iy = kb.b.ins().iadd_imm_s(base, (ky * dh) as i64 - pt as i64);
                    kb.addr(xin, iy, (w * xdt.size()) as i64)
                })
                .collect();
            kb.for_const(vx0, vec_end, 8, |kb, ox| {
                let z = kb.b.ins().iconst(I32, 0);
                let z = kb.b.ins().splat(I32X4, z);
                let (mut lo_acc, mut hi_acc) = (z, z);
                let ix0 = kb.b.ins().imul_imm_s(ox, sw as i64);
                for (ky, &row) in rows.iter().enumerate() {
                    let r0 = kb.b.ins().iadd(row, ix0);
                    for kx in 0..kw {
                        let off = (kx * dw) as i64 - pl as i64;
                        let x16 = if sw == 1 {
                            let q = kb.load(I64, r0, off);
                            let v = kb.b.ins().scalar_to_vector(I64X2, q);
                            let bytes = bitcast(kb, I8X16, v);
                            if xdt == DType::I8 {
                                kb.b.ins().swiden_low(bytes)
                            } else {
                                kb.b.ins().uwiden_low(bytes)
                            }
                        } else {
                            // The even bytes of 16 are the low halves of eight i16 lanes (little-endian):
                            // mask (u8) or shift up and back (i8) — SSE2 only, no byte shuffle.
                            let v = kb.load(I16X8, r0, off);
                            if xdt == DType::I8 {
                                let t = kb.b.ins().ishl_imm_u(v, 8);
                                kb.b.ins().sshr_imm_u(t, 8)
                            } else {
                                kb.b.ins().band(v, mask_ff)
                            }
                        };
                        let d = kb.b.ins().isub(x16, zx16);
                        let m = kb.b.ins().imul(d, wts16[ky * kw + kx]);
                        let ml = kb.b.ins().swiden_low(m);
                        let mh = kb.b.ins().swiden_high(m);
                        lo_acc = kb.b.ins().iadd(lo_acc, ml);
                        hi_acc = kb.b.ins().iadd(hi_acc, mh);
                    }
                }
                finish(kb, &[lo_acc, hi_acc], oy, ox, true);
            });
        });
    });
}
