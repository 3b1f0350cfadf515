//! Kernels for comparisons, logical ops and Where (reference: `ir::ops::logic`): a row-wise walk of the
//! broadcast output where each input has its own strides, scalar, for any element type. Bools are bytes 0 / 1;
//! integers compare signed (unsigned for u8 and bool), floats ordered (NaN compares false).

use super::data::{int_ty, load_ty};
use crate::codegen::builder::Kb;
use crate::ir::{CmpOp, DType, LogicOp};
use crate::kernel::elementwise::LogicKind;
use crate::kernel::Role;
use cranelift_codegen::ir::condcodes::{FloatCC, IntCC};
use cranelift_codegen::ir::types::I8;
use cranelift_codegen::ir::{InstBuilder, Value};

/// Emits a logic kernel: args in_0..in_{k-1}, out. `strides[i]` are input i's strides over `out_shape`
/// (rank >= 1).
pub fn emit_logic(
    kb: &mut Kb,
    kind: LogicKind,
    out_shape: &[usize],
    strides: &[Vec<usize>],
    tasks: u32,
) {
    let r = out_shape.len();
    let inner = out_shape[r - 1];
    let rows: usize = out_shape[..r - 1].iter().product();
    let k = strides.len();
    let (in_elem, out_elem) = match kind {
        LogicKind::Cmp(_, dt) => (vec![dt.size(); 2], 1),
        LogicKind::Logic(_) => (vec![1, 1], 1),
        LogicKind::Not => (vec![1], 1),
        LogicKind::Where(e) => (vec![1, e, e], e),
    };
    let (lo, hi) = kb.task_range(rows, tasks);
    let ins: Vec<Value> = kb.inputs();
    let out = kb.arg(Role::Out);
    kb.for_range(lo, hi, 1, |kb, u| {
        let coords = kb.unravel(u, &out_shape[..r - 1]);
        let mut bases = Vec::with_capacity(k);
        for (i, st) in strides.iter().enumerate() {
            let mut off = kb.iconst(0);
            for (d, &q) in coords.iter().enumerate() {
                let t = kb.b.ins().imul_imm_s(q, (st[d] * in_elem[i]) as i64);
                off = kb.b.ins().iadd(off, t);
            }
            bases.push(kb.b.ins().iadd(ins[i], off));
        }
        let row = kb.addr(out, u, (inner * out_elem) as i64);
        kb.for_const(0, inner, 1, |kb, j| {
            let mut vals = Vec::with_capacity(k);
            for i in 0..k {
                let p = kb.addr(bases[i], j, (strides[i][r - 1] * in_elem[i]) as i64);
                let ty = match kind {
                    LogicKind::Cmp(_, dt) => load_ty(dt),
                    LogicKind::Where(e) if i > 0 => int_ty(e),
                    _ => I8,
                };
                vals.push(kb.load(ty, p, 0));
            }
            let v = match kind {
                LogicKind::Cmp(c, dt) => {
                    if dt == DType::F32 {
                        let cc = match c {
                            CmpOp::Eq => FloatCC::Equal,
                            CmpOp::Lt => FloatCC::LessThan,
                            CmpOp::Le => FloatCC::LessThanOrEqual,
                            CmpOp::Gt => FloatCC::GreaterThan,
                            CmpOp::Ge => FloatCC::GreaterThanOrEqual,
                        };
                        kb.b.ins().fcmp(cc, vals[0], vals[1])
                    } else {
                        let unsigned = matches!(dt, DType::U8 | DType::Bool);
                        let cc = match (c, unsigned) {
                            (CmpOp::Eq, _) => IntCC::Equal,
                            (CmpOp::Lt, false) => IntCC::SignedLessThan,
                            (CmpOp::Le, false) => IntCC::SignedLessThanOrEqual,
                            (CmpOp::Gt, false) => IntCC::SignedGreaterThan,
                            (CmpOp::Ge, false) => IntCC::SignedGreaterThanOrEqual,
                            (CmpOp::Lt, true) => IntCC::UnsignedLessThan,
                            (CmpOp::Le, true) => IntCC::UnsignedLessThanOrEqual,
                            (CmpOp::Gt, true) => IntCC::UnsignedGreaterThan,
                            (CmpOp::Ge, true) => IntCC::UnsignedGreaterThanOrEqual,
                        };
                        kb.b.ins().icmp(cc, vals[0], vals[1])
                    }
                }
                LogicKind::Logic(l) => {
                    let a = kb.b.ins().icmp_imm_s(IntCC::NotEqual, vals[0], 0);
                    let b = kb.b.ins().icmp_imm_s(IntCC::NotEqual, vals[1], 0);
                    match l {
                        LogicOp::And => kb.b.ins().band(a, b),
                        LogicOp::Or => kb.b.ins().bor(a, b),
                        LogicOp::Xor => kb.b.ins().bxor(a, b),
                    }
                }
                LogicKind::Not => kb.b.ins().icmp_imm_s(IntCC::Equal, vals[0], 0),
                LogicKind::Where(_) => {
                    let c = kb.b.ins().icmp_imm_s(IntCC::NotEqual, vals[0], 0);
                    kb.b.ins().select(c, vals[1], vals[2])
                }
            };
            let q = kb.addr(row, j, out_elem as i64);
            kb.store(v, q, 0);
        });
    });
}
