//! Integer max pooling (u8 / i8 planes, `PoolSpec::dtype`): what a quantised model's DequantizeLinear →
//! MaxPool → QuantizeLinear becomes (`fold_qdq`), the integer max of `ir/ops/cnn.rs`. One unit per plane.
//! Outputs whose every tap lies inside the input (computed at compile time) run sixteen at a time in byte
//! vectors: at horizontal stride 1 one 16-byte load per tap; at stride 2 two loads (at the taps' first byte and
//! fifteen bytes on, so that nothing past the last byte read is touched) whose even and odd bytes, masked and
//! shifted into the low halves of words, one `packuswb` (SSE2) packs; a row's last chunk overlaps the one before it (max is idempotent). Other strides, border outputs and
//! rows narrower than 16 outputs run one output at a time, padding taps skipped by selects.

use super::depthwise_plane::interior;
use crate::codegen::builder::Kb;
use crate::ir::DType;
use crate::kernel::pool::PoolSpec;
use crate::kernel::Role;
use cranelift_codegen::ir::condcodes::IntCC;
use cranelift_codegen::ir::types::{I16, I16X8, I32, I8X16};
use cranelift_codegen::ir::{InstBuilder, Value};

/// Emits the kernel: roles X and Out.
pub fn emit_int_max(kb: &mut Kb, s: &PoolSpec, tasks: u32) {
    let [h, w] = s.hw;
    let [oh, ow] = s.out;
    let a = &s.attrs;
    let signed = s.dtype == DType::I8;
    let (lo, hi) = kb.task_range(s.planes, tasks);
    let (px, po) = (kb.arg(Role::X), kb.arg(Role::Out));
    let (y0, y1) = interior(h, oh, a.kernel[0], a.strides[0], a.dilations[0], a.pads[0]);
    let (x0, x1) = interior(w, ow, a.kernel[1], a.strides[1], a.dilations[1], a.pads[1]);
    // Vector chunks: stride 1 or 2 and at least 16 interior outputs in a row.
    let vector = matches!(a.strides[1], 1 | 2) && x1 >= x0 + 16 && y1 > y0;
    let low_bytes = {
        let c = kb.b.ins().iconst(I16, 0xff);
        kb.b.ins().splat(I16X8, c)
    };
    let lowest = if signed { -128 } else { 0 };
    let f = crate::codegen::builder::flags();
    kb.for_range(lo, hi, 1, |kb, p| {
        let src = kb.addr(px, p, (h * w) as i64);
        let dst = kb.addr(po, p, (oh * ow) as i64);
        // One output at (oy, ox), every tap bounds-checked.
        let one = |kb: &mut Kb, oy: Value, ox: Value| {
            let ty = kb.b.ins().imul_imm_s(oy, a.strides[0] as i64);
            let ty = kb.b.ins().iadd_imm_s(ty, -(a.pads[0] as i64));
            let tx = kb.b.ins().imul_imm_s(ox, a.strides[1] as i64);
            let tx = kb.b.ins().iadd_imm_s(tx, -(a.pads[1] as i64));
            let mut acc = kb.b.ins().iconst(I32, lowest);
            let zero = kb.iconst(0);
            for ky in 0..a.kernel[0] {
                let iy = kb.b.ins().iadd_imm_s(ty, (ky * a.dilations[0]) as i64);
                let vy = kb.b.ins().icmp_imm_s(IntCC::UnsignedLessThan, iy, h as i64);
                for kx in 0..a.kernel[1] {
                    let ix = kb.b.ins().iadd_imm_s(tx, (kx * a.dilations[1]) as i64);
                    let vx = kb.b.ins().icmp_imm_s(IntCC::UnsignedLessThan, ix, w as i64);
                    let ok = kb.b.ins().band(vy, vx);
                    let row = kb.b.ins().imul_imm_s(iy, w as i64);
                    let idx = kb.b.ins().iadd(row, ix);
                    let idx = kb.b.ins().select(ok, idx, zero);
                    let at = kb.b.ins().iadd(src, idx);
                    let v = if signed {
                        kb.b.ins().sload8(I32, f, at, 0)
                    } else {
                        kb.b.ins().uload8(I32, f, at, 0)
                    };
                    let m = if signed {
                        kb.b.ins().smax(acc, v)
                    } else {
                        kb.b.ins().umax(acc, v)
                    };
                    acc = kb.b.ins().select(ok, m, acc);
                }
            }
            let row = kb.b.ins().imul_imm_s(oy, ow as i64);
            let idx = kb.b.ins().iadd(row, ox);
            let at = kb.b.ins().iadd(dst, idx);
            kb.b.ins().istore8(f, acc, at, 0);
        };
        let scalar_row = |kb: &mut Kb, oy: Value, from: usize, to: usize| {
            kb.for_const(from, to, 1, |kb, ox| one(kb, oy, ox));
        };
        if !vector {
            kb.for_const(0, oh, 1, |kb, oy| scalar_row(kb, oy, 0, ow));
            return;
        }
        kb.for_const(0, y0, 1, |kb, oy| scalar_row(kb, oy, 0, ow));
        kb.for_const(y1, oh, 1, |kb, oy| scalar_row(kb, oy, 0, ow));
        // Chunk starts: every 16 outputs from x0, the last one ending at x1.
        let mut starts: Vec<usize> = (x0..x1 - 15).step_by(16).collect();
        if starts.last() != Some(&(x1 - 16)) {
            starts.push(x1 - 16);
        }
        kb.for_const(y0, y1, 1, |kb, oy| {
            scalar_row(kb, oy, 0, x0);
            scalar_row(kb, oy, x1, ow);
            let ty = kb.b.ins().imul_imm_s(oy, a.strides[0] as i64);
            let ty = kb.b.ins().iadd_imm_s(ty, -(a.pads[0] as i64));
            let orow = kb.addr(dst, oy, ow as i64);
            for &xs in &starts {
                let mut acc: Option<Value> = None;
                for ky in 0..a.kernel[0] {
                    let iy = kb.b.ins().iadd_imm_s(ty, (ky * a.dilations[0]) as i64);
                    let row = kb.addr(src, iy, w as i64);
                    for kx in 0..a.kernel[1] {
                        let off =
                            (xs * a.strides[1] + kx * a.dilations[1]) as i64 - a.pads[1] as i64;
                        let v = if a.strides[1] == 1 {
                            kb.load(I8X16, row, off)
                        } else {
                            // Even bytes of the first load (low halves of its words), then bytes 16..30
                            // of the window, the high halves of the second load's words; packuswb.
                            let v0 = kb.load(I16X8, row, off);
                            let v1 = kb.load(I16X8, row, off + 15);
                            let lo = kb.b.ins().band(v0, low_bytes);
                            let hi = kb.b.ins().ushr_imm_u(v1, 8);
                            kb.b.ins().unarrow(lo, hi)
                        };
                        acc = Some(match (acc, signed) {
                            (None, _) => v,
                            (Some(m), true) => kb.b.ins().smax(m, v),
                            (Some(m), false) => kb.b.ins().umax(m, v),
                        });
                    }
                }
                if let Some(m) = acc {
                    kb.store(m, orow, xs as i64);
                }
            }
        });
    });
}
