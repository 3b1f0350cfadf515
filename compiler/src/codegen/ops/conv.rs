//! Convolution support kernels: `im2col`, which lays out, for each (channel, ky, kx) row, the input pixels that
//! row of the weights multiplies, so that a convolution becomes one GEMM per (batch, group). The valid output
//! range of every (ky, kx) is computed at compile time, so rows split into zero runs and copy runs with no
//! per-pixel bounds test; stride-1 copy runs are vectorised. `col2im` is the reverse for ConvTranspose: the
//! GEMM's columns are added into the output windows, again with compile-time valid ranges. `emit_direct` drives
//! the direct convolution kernel of few-channel inputs (`x86/conv_direct/`), which needs no columns.

use crate::codegen::builder::{Kb, LANES, VEC};
use crate::kernel::conv::{pack_rows_units, Col2imSpec, Im2colSpec};
use crate::kernel::Role;
use cranelift_codegen::ir::condcodes::IntCC;
use cranelift_codegen::ir::types::{F32, I64};
use cranelift_codegen::ir::{FuncRef, InstBuilder, Value};

/// Valid output range [lo, hi) along one axis for kernel offset `kk`.
fn valid(out: usize, input: usize, k_off: usize, stride: usize, pad: usize) -> (usize, usize) {
    // in = o*stride + k_off - pad must lie in [0, input).
    let lo = if pad > k_off {
        (pad - k_off).div_ceil(stride)
    } else {
        0
    };
    let hi = if input + pad > k_off {
        (input + pad - k_off - 1) / stride + 1
    } else {
        0
    };
    (lo.min(out), hi.min(out).max(lo.min(out)))
}

/// Emits `Body::SubsampleBlocks`: per 16 channels (a unit), output pixel `(oy, ox)` ← the 16 floats of input
/// pixel `(oy·sh, ox·sw)`, as four `f32x4` copies.
pub fn emit_subsample_blocks(kb: &mut Kb, c: usize, [hw, st, out]: [[usize; 2]; 3], tasks: u32) {
    let (lo, hi) = kb.task_range(c / 16, tasks);
    let (px, po) = (kb.arg(Role::X), kb.arg(Role::Out));
    kb.for_range(lo, hi, 1, |kb, g| {
        let src = kb.addr(px, g, (hw[0] * hw[1] * 64) as i64);
        let dst = kb.addr(po, g, (out[0] * out[1] * 64) as i64);
        kb.for_const(0, out[0], 1, |kb, oy| {
            let row = kb.addr(src, oy, (st[0] * hw[1] * 64) as i64);
            let orow = kb.addr(dst, oy, (out[1] * 64) as i64);
            for ox in 0..out[1] {
                for j in 0..4 {
                    let v = kb.load(VEC, row, ((ox * st[1]) * 64 + j * 16) as i64);
                    kb.store(v, orow, (ox * 64 + j * 16) as i64);
                }
            }
        });
    });
}

/// Emits the body of an im2col kernel: roles X (input) and Out (columns). With `copy` (the AVX-512 strided row
/// copy of `x86/copy_x86.rs` for this kernel's column stride), f32 copy runs are calls to it.
pub fn emit_im2col(kb: &mut Kb, s: &Im2colSpec, tasks: u32, copy: Option<FuncRef>) {
    let [h, w] = s.hw;
    let [kh, kw] = s.kernel;
    let plane = s.out[0] * s.out[1];
    let e = s.elem();
    let parts = s.row_parts();
    let (lo, hi) = kb.task_range(s.units(), tasks);
    let (x_base, col_base) = (kb.arg(Role::X), kb.arg(Role::Out));
    kb.for_range(lo, hi, 1, |kb, u| {
        // Unit u = ((b * C + ci) * KH + ky) * parts + part: input plane b * C + ci and output rows `part` of
        // the column rows of its kernel row ky.
        let (p, local) = kb.divmod(u, kh * parts);
        let src_plane = kb.addr(x_base, p, (h * w * e) as i64);
        let row0 = kb.addr(col_base, p, (kh * kw * plane * e) as i64);
        for ky in 0..kh {
            for part in 0..parts {
                let this =
                    kb.b.ins()
                        .icmp_imm_s(IntCC::Equal, local, (ky * parts + part) as i64);
                let rows = (part * s.out[0] / parts, (part + 1) * s.out[0] / parts);
                kb.if_else(
                    this,
                    |kb| im2col_row(kb, s, copy, (src_plane, row0), ky, rows),
                    |_| {},
                );
            }
        }
    });
}

/// Output rows `r0..r1` of the column rows of kernel row `ky` for one input plane (`src_plane`; `row0` its
/// first column row).
fn im2col_row(
    kb: &mut Kb,
    s: &Im2colSpec,
    copy: Option<FuncRef>,
    (src_plane, row0): (Value, Value),
    ky: usize,
    (r0, r1): (usize, usize),
) {
    let [h, w] = s.hw;
    let [_, kw] = s.kernel;
    let [oh, ow] = s.out;
    let plane = oh * ow;
    let e = s.elem();
    let zero = |kb: &mut Kb, ptr: Value, from: usize, to: usize| match s.bytes {
        None => zero(kb, ptr, from, to),
        Some(z) => fill_bytes(kb, ptr, from, to, z),
    };
    for kx in 0..kw {
        let row =
            kb.b.ins()
                .iadd_imm_s(row0, (((ky * kw + kx) * plane) * e) as i64);
        let ky_off = ky * s.dilations[0];
        let kx_off = kx * s.dilations[1];
        let (y_lo, y_hi) = valid(oh, h, ky_off, s.strides[0], s.pads[0]);
        let (x_lo, x_hi) = valid(ow, w, kx_off, s.strides[1], s.pads[1]);
        let (y_lo, y_hi) = (y_lo.clamp(r0, r1), y_hi.clamp(r0, r1));
        if x_lo >= x_hi || y_lo >= y_hi {
            zero(kb, row, r0 * ow, r1 * ow);
            continue;
        }
        zero(kb, row, r0 * ow, y_lo * ow);
        zero(kb, row, y_hi * ow, r1 * ow);
        kb.for_const(y_lo, y_hi, 1, |kb, oy| {
            let dst = kb.addr(row, oy, (ow * e) as i64);
            // Input row iy = oy*sy + ky_off - pad_top (>= 0 inside the valid range).
            let iy = kb.b.ins().imul_imm_s(oy, s.strides[0] as i64);
            let iy = kb.b.ins().iadd_imm_s(iy, ky_off as i64 - s.pads[0] as i64);
            let src_row = kb.addr(src_plane, iy, (w * e) as i64);
            zero(kb, dst, 0, x_lo);
            zero(kb, dst, x_hi, ow);
            // ix = ox*sx + kx_off - pad_left.
            let src0 = x_lo as i64 * s.strides[1] as i64 + kx_off as i64 - s.pads[1] as i64;
            if let (Some(f), 4) = (copy, e) {
                let d = kb.b.ins().iadd_imm_s(dst, (x_lo * 4) as i64);
                let s = kb.b.ins().iadd_imm_s(src_row, src0 * 4);
                let n = kb.iconst((x_hi - x_lo) as i64);
                kb.b.ins().call(f, &[s, d, n]);
            } else if e == 1 {
                let avail = (w as i64 - src0).max(0) as usize;
                copy_bytes(
                    kb,
                    dst,
                    x_lo,
                    src_row,
                    src0,
                    x_hi - x_lo,
                    s.strides[1],
                    avail,
                );
            } else {
                copy_run(kb, dst, x_lo, src_row, src0, x_hi - x_lo, s.strides[1]);
            }
        });
    }
}

/// Copies `n` f32 elements from `src` to `dst`, unrolled: vectors, then scalars.
pub fn copy_f32(kb: &mut Kb, src: Value, dst: Value, n: usize) {
    for v in 0..n / LANES {
        let x = kb.load(VEC, src, (v * LANES * 4) as i64);
        kb.store(x, dst, (v * LANES * 4) as i64);
    }
    for c in n / LANES * LANES..n {
        let x = kb.load(F32, src, (c * 4) as i64);
        kb.store(x, dst, (c * 4) as i64);
    }
}

/// Emits the row-panel packing of a transposed GEMM's A (`Body::PackRows`): args X `[n, K, P]`, Out
/// `[n, Pp/panel, K, panel]`. Unit (batch, panel q, part of K) writes, for each k of its part, the `panel`
/// floats `X[k][panel·q ..][..panel]` (the rows past P zero) contiguously, so that the GEMM's tiles read A as
/// one sequential stream (`GemmSpec::a_panel`) instead of a row of pixels apart per step of K.
pub fn emit_pack_rows(kb: &mut Kb, [n, k, p]: [usize; 3], panel: usize, tasks: u32) {
    let (panels, parts) = pack_rows_units([n, k, p], panel);
    let depth = k.div_ceil(parts);
    let (lo, hi) = kb.task_range(n * panels * parts, tasks);
    let (px, po) = (kb.arg(Role::X), kb.arg(Role::Out));
    kb.for_range(lo, hi, 1, |kb, u| {
        let (bq, part) = kb.divmod(u, parts);
        let (b, q) = kb.divmod(bq, panels);
        let b_in = kb.b.ins().imul_imm_s(b, (k * p) as i64);
        let col = kb.b.ins().imul_imm_s(q, panel as i64);
        let k_in = kb.b.ins().imul_imm_s(part, (depth * p) as i64);
        let first = kb.b.ins().iadd(b_in, col);
        let first = kb.b.ins().iadd(first, k_in);
        let src0 = kb.addr(px, first, 4);
        let dst0 = kb.addr(po, bq, (k * panel * 4) as i64);
        let k_out = kb.b.ins().imul_imm_s(part, (depth * panel * 4) as i64);
        let dst0 = kb.b.ins().iadd(dst0, k_out);
        // `steps` steps of K of `r` rows (every panel but the last holds `panel` rows).
        let rows = |kb: &mut Kb, r: usize, steps: usize| {
            let (src, dst) = (kb.var(I64, src0), kb.var(I64, dst0));
            kb.for_const(0, steps, 1, |kb, _| {
                let (sp, dp) = (kb.b.use_var(src), kb.b.use_var(dst));
                copy_f32(kb, sp, dp, r);
                zero(kb, dp, r, panel);
                let sp2 = kb.b.ins().iadd_imm_s(sp, (p * 4) as i64);
                kb.b.def_var(src, sp2);
                let dp2 = kb.b.ins().iadd_imm_s(dp, (panel * 4) as i64);
                kb.b.def_var(dst, dp2);
            });
        };
        // The last part's depth, then the last panel's rows, each when it differs.
        let last_steps = k - depth * (parts - 1);
        let last_rows = p - panel * (panels - 1);
        kb.with_last(part, parts, (depth, last_steps), |kb, steps| {
            kb.with_last(q, panels, (panel, last_rows), |kb, r| rows(kb, r, steps));
        });
    });
}

/// Zeroes f32 elements [from, to) at `ptr`.
pub fn zero(kb: &mut Kb, ptr: Value, from: usize, to: usize) {
    fill(kb, ptr, from, to, 0.0);
}

/// Stores `value` into f32 elements `[from, to)` of `ptr`.
pub fn fill(kb: &mut Kb, ptr: Value, from: usize, to: usize, value: f32) {
    if from >= to {
        return;
    }
    let zv = kb.fconst(VEC, value);
    let zs = kb.fconst(F32, value);
    let nvec = (to - from) / LANES;
    if nvec <= 4 {
        for v in 0..nvec {
            kb.store(zv, ptr, ((from + v * LANES) * 4) as i64);
        }
    } else {
        let base = kb.b.ins().iadd_imm_s(ptr, (from * 4) as i64);
        kb.for_const(0, nvec * LANES, LANES, |kb, i| {
            let p = kb.addr(base, i, 4);
            kb.store(zv, p, 0);
        });
    }
    for e in from + nvec * LANES..to {
        kb.store(zs, ptr, (e * 4) as i64);
    }
}

/// dst[d0 + t] = src[s0 + t*stride] for t in 0..len (elements).
fn copy_run(kb: &mut Kb, dst: Value, d0: usize, src: Value, s0: i64, len: usize, stride: usize) {
    let dst = kb.b.ins().iadd_imm_s(dst, (d0 * 4) as i64);
    let src = kb.b.ins().iadd_imm_s(src, s0 * 4);
    if stride == 1 {
        let nvec = len / LANES * LANES;
        kb.for_const(0, nvec, LANES, |kb, t| {
            let s = kb.addr(src, t, 4);
            let v = kb.load(VEC, s, 0);
            let d = kb.addr(dst, t, 4);
            kb.store(v, d, 0);
        });
        for t in nvec..len {
            let v = kb.load(F32, src, (t * 4) as i64);
            kb.store(v, dst, (t * 4) as i64);
        }
    } else {
        kb.for_const(0, len, 1, |kb, t| {
            let s = kb.addr(src, t, (stride * 4) as i64);
            let v = kb.load(F32, s, 0);
            let d = kb.addr(dst, t, 4);
            kb.store(v, d, 0);
        });
    }
}

/// Sets bytes [from, to) at `ptr` to `z`: 16-byte stores (unrolled up to 256 bytes, else a loop of four per
/// step and the rest unrolled), then the tail in words and bytes.
pub(super) fn fill_bytes(kb: &mut Kb, ptr: Value, from: usize, to: usize, z: u8) {
    use cranelift_codegen::ir::types::{I16, I32, I64, I8, I8X16};
    if from >= to {
        return;
    }
    let len = to - from;
    let base = kb.b.ins().iadd_imm_s(ptr, from as i64);
    let blocks = len / 16 * 16;
    if blocks > 0 {
        let b = kb.b.ins().iconst(I8, z as i64);
        let v = kb.b.ins().splat(I8X16, b);
        let looped = if blocks > 256 { blocks / 64 * 64 } else { 0 };
        if looped > 0 {
            kb.for_const(0, looped, 64, |kb, i| {
                let p = kb.b.ins().iadd(base, i);
                for o in (0..64).step_by(16) {
                    kb.store(v, p, o);
                }
            });
        }
        for o in (looped..blocks).step_by(16) {
            kb.store(v, base, o as i64);
        }
    }
    let mut o = blocks;
    for (w, ty) in [(8, I64), (4, I32), (2, I16), (1, I8)] {
        if o + w <= len {
            let word = u64::from_ne_bytes([z; 8]) >> (64 - 8 * w);
            let c = kb.b.ins().iconst(ty, word as i64);
            while o + w <= len {
                kb.store(c, base, o as i64);
                o += w;
            }
        }
    }
}

/// Byte version of `copy_run`: stride 1 copies eight bytes at a time; stride 2 sixteen, from 32 source bytes
/// whose even ones are the low halves of two `i16x8` (masked, then packed by an unsigned narrow: exact, every
/// value is below 256) while those 32 bytes lie within the `avail` bytes readable from `src + s0`.
#[allow(clippy::too_many_arguments)] // destination, source, count, stride and the readable extent
fn copy_bytes(
    kb: &mut Kb,
    dst: Value,
    d0: usize,
    src: Value,
    s0: i64,
    len: usize,
    stride: usize,
    avail: usize,
) {
    use cranelift_codegen::ir::types::{I16, I16X8, I64, I8};
    let dst = kb.b.ins().iadd_imm_s(dst, d0 as i64);
    let src = kb.b.ins().iadd_imm_s(src, s0);
    let done = match stride {
        1 => {
            let words = len / 8;
            kb.for_const(0, words * 8, 8, |kb, t| {
                let s = kb.b.ins().iadd(src, t);
                let v = kb.load(I64, s, 0);
                let d = kb.b.ins().iadd(dst, t);
                kb.store(v, d, 0);
            });
            words * 8
        }
        2 => {
            let blocks = (len / 16).min(avail / 32);
            let m = kb.b.ins().iconst(I16, 0xff);
            let m = kb.b.ins().splat(I16X8, m);
            kb.for_const(0, blocks * 16, 16, |kb, t| {
                let s = kb.addr(src, t, 2);
                let lo = kb.load(I16X8, s, 0);
                let hi = kb.load(I16X8, s, 16);
                let lo = kb.b.ins().band(lo, m);
                let hi = kb.b.ins().band(hi, m);
                let v = kb.b.ins().unarrow(lo, hi);
                let d = kb.b.ins().iadd(dst, t);
                kb.store(v, d, 0);
            });
            blocks * 16
        }
        _ => 0,
    };
    let rest = len - done;
    if rest > 0 {
        let (s_base, d_base) = (
            kb.b.ins().iadd_imm_s(src, (done * stride) as i64),
            kb.b.ins().iadd_imm_s(dst, done as i64),
        );
        kb.for_const(0, rest, 1, |kb, t| {
            let s = kb.addr(s_base, t, stride as i64);
            let v = kb.load(I8, s, 0);
            let d = kb.b.ins().iadd(d_base, t);
            kb.store(v, d, 0);
        });
    }
}

/// The input positions `[lo, hi)` of one axis whose output `i·s + k·d − p` lands in `[0, out)`.
fn deconv_range(input: usize, out: usize, k_off: usize, s: usize, p: usize) -> (usize, usize) {
    let lo = if p > k_off {
        (p - k_off).div_ceil(s)
    } else {
        0
    };
    let hi = if out + p > k_off {
        ((out - 1 + p - k_off) / s + 1).min(input)
    } else {
        0
    };
    (lo, hi.max(lo))
}

/// Emits col2im: args col, \[bias\], out. One task unit per (batch, output channel) plane, so tasks never write
/// the same output.
pub fn emit_col2im(kb: &mut Kb, s: &Col2imSpec, tasks: u32) {
    let [h, w] = s.hw;
    let [oh, ow] = s.out;
    let [kh, kw] = s.kernel;
    let khw = kh * kw;
    let (lo, hi) = kb.task_range(s.n * s.m, tasks);
    let col = kb.arg(Role::X);
    let bias = s.has_bias.then(|| kb.arg(Role::Bias));
    let out = kb.arg(Role::Out);
    kb.for_range(lo, hi, 1, |kb, u| {
        let plane = kb.addr(out, u, (oh * ow * 4) as i64);
        let init = match bias {
            Some(b) => {
                let (_, m) = kb.divmod(u, s.m);
                let bp = kb.addr(b, m, 4);
                kb.load(F32, bp, 0)
            }
            None => kb.fconst(F32, 0.0),
        };
        kb.for_const(0, oh * ow, 1, |kb, i| {
            let p = kb.addr(plane, i, 4);
            kb.store(init, p, 0);
        });
        // Rows of this (batch, channel): col + (u * khw) * h * w.
        let rows = kb.addr(col, u, (khw * h * w * 4) as i64);
        for ky in 0..kh {
            let (y0, y1) = deconv_range(h, oh, ky * s.dilations[0], s.strides[0], s.pads[0]);
            for kx in 0..kw {
                let (x0, x1) = deconv_range(w, ow, kx * s.dilations[1], s.strides[1], s.pads[1]);
                if y0 >= y1 || x0 >= x1 {
                    continue;
                }
                let row =
                    kb.b.ins()
                        .iadd_imm_s(rows, (((ky * kw + kx) * h * w) * 4) as i64);
                let oy_off = (ky * s.dilations[0]) as i64 - s.pads[0] as i64;
                let ox_off = (kx * s.dilations[1]) as i64 - s.pads[1] as i64;
                kb.for_const(y0, y1, 1, |kb, iy| {
                    let src = kb.addr(row, iy, (w * 4) as i64);
                    // Output row oy = iy·s + oy_off.
                    let oy = kb.b.ins().imul_imm_s(iy, s.strides[0] as i64);
                    let oy = kb.b.ins().iadd_imm_s(oy, oy_off);
                    let dst = kb.addr(plane, oy, (ow * 4) as i64);
                    let dst = kb.b.ins().iadd_imm_s(dst, ox_off * 4);
                    kb.for_const(x0, x1, 1, |kb, ix| {
                        let sp = kb.addr(src, ix, 4);
                        let v = kb.load(F32, sp, 0);
                        let dp = kb.addr(dst, ix, (s.strides[1] * 4) as i64);
                        let o = kb.load(F32, dp, 0);
                        let r = kb.b.ins().fadd(o, v);
                        kb.store(r, dp, 0);
                    });
                });
            }
        }
    });
}

/// Emits the driver of the direct convolution kernel (`Body::ConvDirect`): roles X (the zero-padded input
/// `[N, C, Hp, Wp]`), W (packed `[M/16, C·KH·KW, 16]`), \[Bias\], Out; one unit per (batch, output row), each one
/// call to `f` for every output channel of that row.
pub fn emit_direct(
    kb: &mut Kb,
    n: usize,
    s: &crate::kernel::conv::ConvDirect,
    tasks: u32,
    f: FuncRef,
) {
    let [hp, wp] = s.padded;
    let [oh, ow] = s.out;
    let (lo, hi) = kb.task_range(n * oh, tasks);
    let (px, pw, po) = (kb.arg(Role::X), kb.arg(Role::W), kb.arg(Role::Out));
    let pb = kb.arg_opt(Role::Bias);
    kb.for_range(lo, hi, 1, |kb, u| {
        let (b, oy) = kb.divmod(u, oh);
        let xb = kb.addr(px, b, (s.c * hp * wp * 4) as i64);
        let x = kb.addr(xb, oy, (s.strides[0] * wp * 4) as i64);
        let ob = kb.addr(po, b, (s.m * oh * ow * 4) as i64);
        let out = kb.addr(ob, oy, (ow * 4) as i64);
        let bias = pb.unwrap_or_else(|| kb.iconst(0));
        kb.b.ins().call(f, &[x, pw, bias, out]);
    });
}

#[cfg(test)]
mod tests {
    use super::valid;

    #[test]
    fn valid_ranges() {
        // 3x3 kernel, pad 1, stride 1, input 5 → output 5.
        assert_eq!(valid(5, 5, 0, 1, 1), (1, 5));
        assert_eq!(valid(5, 5, 1, 1, 1), (0, 5));
        assert_eq!(valid(5, 5, 2, 1, 1), (0, 4));
        // stride 2, pad 3, 7x7 on 224 → 112.
        assert_eq!(valid(112, 224, 0, 2, 3), (2, 112));
        assert_eq!(valid(112, 224, 6, 2, 3), (0, 111));
    }
}
