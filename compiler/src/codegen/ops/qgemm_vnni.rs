//! The integer GEMM on AVX-512 VNNI targets: the same spec, units of (batch, 32 columns, 64 rows), with the
//! machine-code micro-kernel of `x86/qgemm_x86.rs` doing the sums. Per unit and K block of 1024, B's
//! columns are packed into a stack panel `[k/4][32][4]` of u8 (i8 activations flipped with `^ 0x80`, which the
//! lowering compensates in the bias together with the zero point: `bias - zp' · Σ_k A`), four rows at a time by
//! byte- and word-interleaving shuffles when the block is full and contiguous, element by element otherwise;
//! rows beyond K are zero (A is zero there too). Each 8-row tile (and the `m % 8` tail) calls the micro-kernel
//! into a stack i32 buffer, accumulating across K blocks; the shared epilogue of `qgemm.rs` then requantises
//! each buffered row.

use super::qgemm::{
    decode_unit, direct_args, epilogue, epilogue_buffered, for_row_tiles, slot, Unit,
};

use crate::codegen::builder::Kb;
use crate::ir::DType;
use crate::kernel::qgemm::vnni::{
    a_rs, blocks, direct, mr, panel_quads, rows_per_unit, units, KQB, NR, ROWS,
};
use crate::kernel::qgemm::QGemmSpec;
use crate::kernel::qgemv::QGemvSpec;
use crate::kernel::Role;
use cranelift_codegen::ir::condcodes::IntCC;
use cranelift_codegen::ir::types::{F32, I32, I32X4, I8, I8X16};
use cranelift_codegen::ir::{ConstantData, FuncRef, Immediate, InstBuilder, Value};

/// The micro-kernels one VNNI GEMM calls: `funcs[full rows | tail rows][full block | last block][zeroing |
/// accumulating]` store i32 sums; `direct[full rows | tail rows]` (K in one block, requantised, contiguous C)
/// requantise and store full 32-column tiles themselves.
#[derive(Debug, Clone, Copy)]
pub struct QMicro {
    /// Function refs; `None` where the GEMM does not need the variant.
    pub funcs: [[[Option<FuncRef>; 2]; 2]; 2],
    /// The requantising variants.
    pub direct: [Option<FuncRef>; 2],
}

/// Emits the body of a VNNI integer GEMM kernel.
pub fn emit(kb: &mut Kb, s: &QGemmSpec, tasks: u32, mk: &QMicro) {
    let (kq, _, _) = blocks(s);
    let panel = slot(kb, panel_quads(s, KQB.min(kq)) * NR * 4);
    let one_block = blocks(s).1 == 1;
    // One block: a tile-sized buffer (tiles are finished one at a time); else the unit's partial sums.
    let ibuf = slot(kb, if one_block { mr(s) } else { ROWS } * NR * 4);
    let ncb = s.n.div_ceil(NR);
    let (lo, hi) = kb.task_range(units(s), tasks);
    kb.for_range(lo, hi, 1, |kb, u| {
        let (offs, j0, i_lo, i_hi, cb) = decode_unit(kb, s, u, NR, rows_per_unit(s));
        let g = Unit {
            offs,
            j0,
            i_lo,
            i_hi,
            panel,
            ibuf: Some(ibuf),
        };
        let tail_cols = s.n % NR;
        if tail_cols == 0 {
            unit(kb, s, &g, NR, mk);
        } else {
            let last = kb.b.ins().icmp_imm_s(IntCC::Equal, cb, (ncb - 1) as i64);
            kb.if_else(
                last,
                |kb| unit(kb, s, &g, tail_cols, mk),
                |kb| unit(kb, s, &g, NR, mk),
            );
        }
    });
}

fn unit(kb: &mut Kb, s: &QGemmSpec, g: &Unit, cols: usize, mk: &QMicro) {
    let (_, nb, _) = blocks(s);
    if nb == 1 {
        return unit_one_block(kb, s, g, cols, mk);
    }
    let ibuf = g.ibuf.expect("VNNI units buffer their sums");
    let a_rs = a_rs(s);
    let a_base = kb.arg(Role::A);
    for blk in 0..nb {
        pack(kb, s, g, cols, blk);
        let kind = usize::from(blk + 1 == nb);
        let acc = usize::from(blk > 0);
        let call = |kb: &mut Kb, i: Value, rows_kind: usize| {
            let Some(f) = mk.funcs[rows_kind][kind][acc] else {
                return;
            };
            let a_el = kb.b.ins().imul_imm_s(i, a_rs as i64);
            let a_el = kb.b.ins().iadd(a_el, g.offs[0]);
            let a_el = kb.b.ins().iadd_imm_s(a_el, (blk * KQB * 4) as i64);
            let a = kb.b.ins().iadd(a_base, a_el);
            let di = kb.b.ins().isub(i, g.i_lo);
            let c = kb.addr(ibuf, di, (NR * 4) as i64);
            kb.b.ins().call(f, &[a, g.panel, c]);
        };
        let mr = mr(s);
        for_row_tiles(kb, g, mr, s.m, |kb, i, rows| {
            call(kb, i, usize::from(rows < mr))
        });
    }
    epilogue_buffered(kb, s, g, ibuf, NR, cols);
}

/// A unit whose K fits one block: pack once, then finish each tile — the requantising micro-kernel for full,
/// contiguous tiles; otherwise the i32 micro-kernel into the tile buffer and the Cranelift epilogue.
fn unit_one_block(kb: &mut Kb, s: &QGemmSpec, g: &Unit, cols: usize, mk: &QMicro) {
    let tbuf = g.ibuf.expect("VNNI units have a tile buffer");
    let a_rs = a_rs(s);
    let a_base = kb.arg(Role::A);
    pack(kb, s, g, cols, 0);
    let tile = |kb: &mut Kb, i: Value, rk: usize, rows: usize| {
        let a_el = kb.b.ins().imul_imm_s(i, a_rs as i64);
        let a_el = kb.b.ins().iadd(a_el, g.offs[0]);
        let a = kb.b.ins().iadd(a_base, a_el);
        match (mk.direct[rk], &s.requant) {
            (Some(f), Some(_)) if cols == NR && direct(s) => {
                let [c, bias, scale] = direct_args(kb, s, g, i);
                kb.b.ins().call(f, &[a, g.panel, c, bias, scale]);
            }
            _ => {
                let Some(f) = mk.funcs[rk][1][0] else {
                    return;
                };
                kb.b.ins().call(f, &[a, g.panel, tbuf]);
                for r in 0..rows {
                    let vals: Vec<Value> = (0..cols.div_ceil(4))
                        .map(|v| kb.load(I32X4, tbuf, ((r * NR + v * 4) * 4) as i64))
                        .collect();
                    let ir = kb.b.ins().iadd_imm_s(i, r as i64);
                    epilogue(kb, s, g, ir, cols, &[vals]);
                }
            }
        }
    };
    let mr = mr(s);
    for_row_tiles(kb, g, mr, s.m, |kb, i, rows| {
        tile(kb, i, usize::from(rows < mr), rows)
    });
}

fn shuffle_mask(kb: &mut Kb, bytes: [u8; 16]) -> Immediate {
    kb.b.func
        .dfg
        .immediates
        .push(ConstantData::from(bytes.as_slice()))
}

/// Packs K quads `[blk * KQB, ..)` of the unit's columns into the panel.
fn pack(kb: &mut Kb, s: &QGemmSpec, g: &Unit, cols: usize, blk: usize) {
    let (_, nb, last) = blocks(s);
    let quads = if blk + 1 == nb { last } else { KQB };
    let k0 = blk * KQB * 4;
    let flip = s.b_dtype == DType::I8;
    let b_base = kb.arg(s.b.arg);
    let col = kb.b.ins().imul_imm_s(g.j0, s.b.cs as i64);
    let b_el = kb.b.ins().iadd(g.offs[1], col);
    let b_el = kb.b.ins().iadd_imm_s(b_el, (s.b.off + k0 * s.b.rs) as i64);
    let b0 = kb.b.ins().iadd(b_base, b_el);
    let x80 = {
        let c = kb.b.ins().iconst(I8, 0x80);
        kb.b.ins().splat(I8X16, c)
    };
    let mut lo8 = [0u8; 16];
    let mut hi8 = [0u8; 16];
    let mut lo16 = [0u8; 16];
    let mut hi16 = [0u8; 16];
    for i in 0..8 {
        lo8[2 * i] = i as u8;
        lo8[2 * i + 1] = 16 + i as u8;
        hi8[2 * i] = 8 + i as u8;
        hi8[2 * i + 1] = 24 + i as u8;
    }
    for i in 0..4 {
        for (m, base) in [(&mut lo16, 0u8), (&mut hi16, 8u8)] {
            m[4 * i] = base + 2 * i as u8;
            m[4 * i + 1] = base + 2 * i as u8 + 1;
            m[4 * i + 2] = 16 + base + 2 * i as u8;
            m[4 * i + 3] = 16 + base + 2 * i as u8 + 1;
        }
    }
    let (m_lo8, m_hi8, m_lo16, m_hi16) = (
        shuffle_mask(kb, lo8),
        shuffle_mask(kb, hi8),
        shuffle_mask(kb, lo16),
        shuffle_mask(kb, hi16),
    );
    // Quads whose four rows all lie inside K (the last quad of the last block may not).
    let whole = if blk + 1 == nb && !s.k.is_multiple_of(4) {
        quads - 1
    } else {
        quads
    };
    let rs = s.b.rs as i64;
    if cols == NR && s.b.cs == 1 {
        kb.for_const(0, whole, 1, |kb, q| {
            let src = kb.addr(b0, q, 4 * rs);
            let dst = kb.addr(g.panel, q, (NR * 4) as i64);
            for h in 0..2 {
                let rows: Vec<Value> = (0..4)
                    .map(|r| {
                        let v = kb.load(I8X16, src, r * rs + 16 * h);
                        if flip {
                            kb.b.ins().bxor(v, x80)
                        } else {
                            v
                        }
                    })
                    .collect();
                let t0 = kb.b.ins().shuffle(rows[0], rows[1], m_lo8);
                let t1 = kb.b.ins().shuffle(rows[2], rows[3], m_lo8);
                let t2 = kb.b.ins().shuffle(rows[0], rows[1], m_hi8);
                let t3 = kb.b.ins().shuffle(rows[2], rows[3], m_hi8);
                let outs = [
                    kb.b.ins().shuffle(t0, t1, m_lo16),
                    kb.b.ins().shuffle(t0, t1, m_hi16),
                    kb.b.ins().shuffle(t2, t3, m_lo16),
                    kb.b.ins().shuffle(t2, t3, m_hi16),
                ];
                for (o, v) in outs.into_iter().enumerate() {
                    kb.store(v, dst, h * 64 + o as i64 * 16);
                }
            }
        });
    } else {
        kb.for_const(0, whole, 1, |kb, q| {
            let src = kb.addr(b0, q, 4 * rs);
            let dst = kb.addr(g.panel, q, (NR * 4) as i64);
            scalar_quad(kb, s, src, dst, cols, 4, flip);
        });
    }
    if whole < quads {
        let src = kb.b.ins().iadd_imm_s(b0, whole as i64 * 4 * rs);
        let dst = kb.b.ins().iadd_imm_s(g.panel, (whole * NR * 4) as i64);
        scalar_quad(kb, s, src, dst, cols, s.k % 4, flip);
    }
}

/// One quad of the panel element by element: `valid` of its four rows exist; missing rows and columns are 0.
fn scalar_quad(
    kb: &mut Kb,
    s: &QGemmSpec,
    src: Value,
    dst: Value,
    cols: usize,
    valid: usize,
    flip: bool,
) {
    let f = crate::codegen::builder::flags();
    for j in 0..NR {
        if j >= cols {
            let z = kb.b.ins().iconst(I32, 0);
            kb.store(z, dst, (j * 4) as i64);
            continue;
        }
        for r in 0..4 {
            let v = if r < valid {
                let off = (r * s.b.rs + j * s.b.cs) as i32;
                let v = kb.b.ins().load(I8, f, src, off);
                if flip {
                    kb.b.ins().bxor_imm_u(v, 0x80)
                } else {
                    v
                }
            } else {
                kb.b.ins().iconst(I8, 0)
            };
            kb.store(v, dst, (j * 4 + r) as i64);
        }
    }
}

/// Emits the one-row GEMV (`Body::QGemv`): per task the activation row copied into a stack buffer of `kp` bytes
/// (flipped to u8 for i8 activations, zero past K), then one call of the machine-code kernel
/// (`x86/qgemv_vnni.rs`) per unit of 128 rows; without it (`f` None), the same sums one row at a time.
pub fn emit_gemv(kb: &mut Kb, s: &QGemvSpec, tasks: u32, f: Option<FuncRef>) {
    use crate::kernel::qgemv::{BLOCK, ROWS_PER_UNIT};
    let kp = s.kp();
    let xbuf = slot(kb, kp);
    let (px, pa, po, pb) = (
        kb.arg(Role::B),
        kb.arg(Role::A),
        kb.arg(Role::Out),
        kb.arg(Role::Bias),
    );
    let ps = s.requant.as_ref().map(|_| kb.arg(Role::Scale));
    let (lo, hi) = kb.task_range(s.units(), tasks);
    // The row, flipped where i8, then zeros to kp.
    let flip = s.x_dtype == DType::I8;
    let x80 = {
        let c = kb.b.ins().iconst(I8, 0x80);
        kb.b.ins().splat(I8X16, c)
    };
    kb.for_const(0, s.k / 16, 1, |kb, i| {
        let from = kb.addr(px, i, 16);
        let v = kb.load(I8X16, from, 0);
        let v = if flip { kb.b.ins().bxor(v, x80) } else { v };
        let to = kb.addr(xbuf, i, 16);
        kb.store(v, to, 0);
    });
    for i in s.k / 16 * 16..s.k {
        let v =
            kb.b.ins()
                .load(I8, crate::codegen::builder::flags(), px, i as i32);
        let v = if flip {
            kb.b.ins().bxor_imm_u(v, 0x80)
        } else {
            v
        };
        kb.store(v, xbuf, i as i64);
    }
    for i in s.k..kp {
        let z = kb.b.ins().iconst(I8, 0);
        kb.store(z, xbuf, i as i64);
    }
    let ysz = s.y_dtype.size() as i64;
    kb.for_range(lo, hi, 1, |kb, u| {
        let r0 = kb.b.ins().imul_imm_s(u, ROWS_PER_UNIT as i64);
        let w = kb.addr(pa, u, (ROWS_PER_UNIT * kp) as i64);
        let y = kb.addr(po, r0, ysz);
        let bias = kb.addr(pb, r0, 4);
        let scale = ps.map_or(bias, |p| kb.addr(p, r0, 4));
        let m = kb.iconst(s.m as i64);
        let left = kb.b.ins().isub(m, r0);
        let cap = kb.iconst(ROWS_PER_UNIT as i64);
        let rows = kb.b.ins().umin(left, cap);
        match f {
            Some(f) => {
                kb.b.ins().call(f, &[w, xbuf, y, rows, bias, scale]);
            }
            None => gemv_rows(kb, s, [w, y, bias, scale], rows, xbuf, BLOCK),
        }
    });
}

/// The GEMV's rows without machine code: per row the sum over the blocked weights, the bias, then the
/// requantisation (or the i32 store).
fn gemv_rows(
    kb: &mut Kb,
    s: &QGemvSpec,
    [w, y, bias, scale]: [Value; 4],
    rows: Value,
    x: Value,
    block: usize,
) {
    let kp = s.kp();
    let zero = kb.iconst(0);
    let f = crate::codegen::builder::flags();
    kb.for_range(zero, rows, 1, |kb, r| {
        let (b, lane) = kb.divmod(r, block);
        let wb = kb.addr(w, b, (block * kp) as i64);
        let wl = kb.addr(wb, lane, 4);
        let acc0 = kb.b.ins().iconst(I32, 0);
        let acc = kb.var(I32, acc0);
        kb.for_const(0, kp / 4, 1, |kb, q| {
            let wq = kb.addr(wl, q, (block * 4) as i64);
            let xq = kb.addr(x, q, 4);
            let mut a = kb.b.use_var(acc);
            for j in 0..4 {
                let wv = kb.b.ins().sload8(I32, f, wq, j);
                let xv = kb.b.ins().uload8(I32, f, xq, j);
                let p = kb.b.ins().imul(wv, xv);
                a = kb.b.ins().iadd(a, p);
            }
            kb.b.def_var(acc, a);
        });
        let sum = kb.b.use_var(acc);
        let bp = kb.addr(bias, r, 4);
        let bv = kb.load(I32, bp, 0);
        let sum = kb.b.ins().iadd(sum, bv);
        match &s.requant {
            Some(q) => {
                let sp = kb.addr(scale, r, 4);
                let sv = kb.load(F32, sp, 0);
                let v = kb.b.ins().fcvt_from_sint(F32, sum);
                let v = kb.b.ins().fmul(v, sv);
                let r8 = super::quant::round_to_int(kb, F32, v, q.zero_point, q.clamp.0, q.clamp.1);
                let dst = kb.b.ins().iadd(y, r);
                super::quant::store1(kb, r8, dst, 0, s.y_dtype);
            }
            None => {
                let dst = kb.addr(y, r, 4);
                kb.store(sum, dst, 0);
            }
        }
    });
}
