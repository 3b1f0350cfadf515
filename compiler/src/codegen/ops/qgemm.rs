//! The integer GEMM every QConv / QMatMul lowers to: `C[i, j] = requant(Σ_k A[i, k] · (B[k, j] - zb) + bias[i])`
//! with exact i32 sums. Rows are output channels: A is the constant weight matrix, pre-packed at compile time
//! as i32 words holding the i16 pair `(A[i, 2p], A[i, 2p + 1])`; B is the u8 / i8 activation side (im2col
//! columns, or a transposed matmul input) with any strides. Per unit — (batch, column block of `NR`, row group)
//! — each K block of B is packed into a stack panel of i16 pairs `(B[2p, j] - zb, B[2p + 1, j] - zb)`, four
//! columns per 128-bit vector, and an `MR x NR` tile accumulates `pmaddwd`-style pair products
//! (`iadd_pairwise` of widened products, which Cranelift lowers to one instruction on x86 and two on aarch64).
//! Both factors fit in i16 (|B - zb| ≤ 255, |A| ≤ 128), so each pair sum is exact and the i32 sums equal the
//! reference's. The epilogue adds the bias and either stores the i32 (ConvInteger / MatMulInteger) or
//! requantises: `f32(acc) * scale[i]`, clamp, round half to even, add the zero point, narrow.

use super::quant::{bitcast, load1, round_to_int, store1, store4};
use crate::codegen::builder::Kb;
use crate::ir::DType;
use crate::kernel::qgemm::{QGemmSpec, NR, ROWS};
use crate::kernel::Role;
use cranelift_codegen::ir::condcodes::IntCC;
use cranelift_codegen::ir::types::{F32, F32X4, I16, I16X8, I32, I32X4, I64, I64X2, I8X16};
use cranelift_codegen::ir::{ConstantData, InstBuilder, Value};
use cranelift_frontend::Variable;

/// Rows per tile.
pub const MR: usize = 4;
/// K depth of one packed panel (even).
pub const KC: usize = 2048;

pub(super) fn slot(kb: &mut Kb, bytes: usize) -> Value {
    kb.stack(bytes, 4)
}

/// The AVX2 pair micro-kernels one GEMM calls (`x86/qgemm_x86.rs::assemble_avx2`), indexed `[full rows |
/// tail rows][full block | last block][zeroing | accumulating]`.
#[derive(Debug, Clone, Copy)]
pub struct PairMicro {
    /// Function refs; `None` where unused.
    pub funcs: [[[Option<cranelift_codegen::ir::FuncRef>; 2]; 2]; 2],
    /// The requantising variant of full-row tiles ([`pair_direct`]), `fn(a, b, c, bias, scale)`.
    pub direct: Option<cranelift_codegen::ir::FuncRef>,
}

/// The requantising store of the AVX2 pair micro-kernel when the GEMM can use it: K in one block, a requantised
/// u8 / i8 output with contiguous rows (full 8 x 8 tiles then go straight from the accumulators to C; the
/// Cranelift epilogue cost more than the sums at small K: MobileNetV2's 16-channel expansion 1.3 ms for 19 M
/// multiply-adds).
pub fn pair_direct(s: &QGemmSpec) -> Option<crate::x86::qgemm_x86::QEpilogue> {
    let q = s.requant.as_ref()?;
    let byte_out = matches!(s.c_dtype, DType::U8 | DType::I8);
    (pair_blocks(s).0 == 1 && s.c.cs == 1 && byte_out).then_some(crate::x86::qgemm_x86::QEpilogue {
        c_rs: s.c.rs * s.c_dtype.size(),
        zero_point: q.zero_point,
        clamp: q.clamp,
        signed: s.c_dtype == DType::I8,
    })
}

/// Emits the body of an integer GEMM kernel with the Cranelift tile.
pub fn emit(kb: &mut Kb, s: &QGemmSpec, tasks: u32) {
    emit_with(kb, s, tasks, None);
}

/// Emits the body of an integer GEMM kernel; with `micro` (x86 with AVX2), 8-row tiles run the machine-code
/// pair micro-kernel into the unit's i32 buffer and the epilogue reads it back.
pub fn emit_with(kb: &mut Kb, s: &QGemmSpec, tasks: u32, micro: Option<PairMicro>) {
    let kp_total = s.kp();
    let panel = slot(kb, KC.min(kp_total * 2).div_ceil(2) * NR * 4);
    let nblocks = s.k.div_ceil(KC);
    let ibuf = if nblocks > 1 || micro.is_some() {
        Some(slot(kb, ROWS * NR * 4))
    } else {
        None
    };
    let ncb = s.n.div_ceil(NR);
    let (lo, hi) = kb.task_range(s.units(), tasks);
    kb.for_range(lo, hi, 1, |kb, u| {
        let (offs, j0, i_lo, i_hi, cb) = decode_unit(kb, s, u, NR, ROWS);
        let g = Unit {
            offs,
            j0,
            i_lo,
            i_hi,
            panel,
            ibuf,
        };
        let tail_cols = s.n % NR;
        let run = |kb: &mut Kb, cols: usize| match &micro {
            Some(mk) => unit_micro(kb, s, &g, cols, mk),
            None => unit(kb, s, &g, cols),
        };
        if tail_cols == 0 {
            run(kb, NR);
        } else {
            let last = kb.b.ins().icmp_imm_s(IntCC::Equal, cb, (ncb - 1) as i64);
            kb.if_else(last, |kb| run(kb, tail_cols), |kb| run(kb, NR));
        }
    });
}

/// Unit `u` of a GEMM split into (batch, column block of `nr`, row group of `rows`): the batch offsets, first
/// column, row range and column block index.
pub(super) fn decode_unit(
    kb: &mut Kb,
    s: &QGemmSpec,
    u: Value,
    nr: usize,
    rows: usize,
) -> ([Value; 4], Value, Value, Value, Value) {
    let (ncb, nrg) = (s.n.div_ceil(nr), s.m.div_ceil(rows));
    let (bi, rest) = kb.divmod(u, ncb * nrg);
    let (cb, rg) = kb.divmod(rest, nrg);
    let (offs, j0, i_lo, i_hi) =
        super::gemm::unit_place(kb, (&s.batch, s.m), (bi, cb, rg), (nr, rows));
    (offs, j0, i_lo, i_hi, cb)
}

/// Runs `tile(kb, i, rows)` over the unit's rows in full `mr`-row tiles, then (only in the last row group,
/// whose end is `m`) one tile of the remaining `m % mr` rows. Row groups are multiples of `mr`.
pub(super) fn for_row_tiles(
    kb: &mut Kb,
    g: &Unit,
    mr: usize,
    m: usize,
    mut tile: impl FnMut(&mut Kb, Value, usize),
) {
    let next = kb.var(I64, g.i_lo);
    kb.for_range(g.i_lo, g.i_hi, mr as i64, |kb, i| {
        let end = kb.b.ins().iadd_imm_s(i, mr as i64);
        let full = kb.b.ins().icmp(IntCC::SignedLessThanOrEqual, end, g.i_hi);
        kb.if_else(
            full,
            |kb| {
                tile(kb, i, mr);
                kb.b.def_var(next, end);
            },
            |_| {},
        );
    });
    if !m.is_multiple_of(mr) {
        let i = kb.b.use_var(next);
        let c = kb.b.ins().icmp(IntCC::SignedLessThan, i, g.i_hi);
        kb.if_else(c, |kb| tile(kb, i, m % mr), |_| {});
    }
}

/// One work unit's run-time coordinates.
pub(super) struct Unit {
    /// Batch offsets: A elements, B elements, C elements, channel.
    pub(super) offs: [Value; 4],
    /// First column.
    pub(super) j0: Value,
    /// Row range.
    pub(super) i_lo: Value,
    pub(super) i_hi: Value,
    /// The packed B panel (stack).
    pub(super) panel: Value,
    /// The i32 partial sums between K blocks (stack).
    pub(super) ibuf: Option<Value>,
}

fn unit(kb: &mut Kb, s: &QGemmSpec, g: &Unit, cols: usize) {
    let nblocks = s.k.div_ceil(KC);
    for blk in 0..nblocks {
        let k0 = blk * KC;
        let klen = KC.min(s.k - k0);
        pack(kb, s, g, cols, k0, klen);
        let stage = Stage {
            first: blk == 0,
            last: blk + 1 == nblocks,
            kp0: k0 / 2,
            kpl: klen.div_ceil(2),
        };
        for_row_tiles(kb, g, MR, s.m, |kb, i, rows| {
            tile(kb, s, g, &stage, i, rows, cols)
        });
    }
}

/// Pair-micro-kernel rows per tile.
pub const MR_MICRO: usize = crate::x86::qgemm_x86::MR_AVX2;

/// K-block geometry of the pair path: (blocks, pair words per full block, pair words in the last block).
pub fn pair_blocks(s: &QGemmSpec) -> (usize, usize, usize) {
    let nb = s.k.div_ceil(KC);
    let last = (s.k - (nb - 1) * KC).div_ceil(2);
    (nb, KC / 2, last)
}

/// A unit on the pair micro-kernels: per K block, pack, then one call per 8-row tile (and the `m % 8` tail)
/// into the i32 buffer (accumulating after the first block); then the epilogue per buffered row.
fn unit_micro(kb: &mut Kb, s: &QGemmSpec, g: &Unit, cols: usize, mk: &PairMicro) {
    let (nb, _, _) = pair_blocks(s);
    let ibuf = g.ibuf.expect("micro-kernel units buffer their sums");
    if let (Some(f), true) = (mk.direct, cols == NR) {
        return unit_micro_direct(kb, s, g, mk, f);
    }
    let kp_total = s.kp() as i64;
    let a_base = kb.arg(Role::A);
    for blk in 0..nb {
        let k0 = blk * KC;
        pack(kb, s, g, cols, k0, KC.min(s.k - k0));
        let (bk, acc) = (usize::from(blk + 1 == nb), usize::from(blk > 0));
        let call = |kb: &mut Kb, i: Value, rk: usize| {
            let Some(f) = mk.funcs[rk][bk][acc] else {
                return;
            };
            let a_el = kb.b.ins().imul_imm_s(i, kp_total);
            let a_el = kb.b.ins().iadd(a_el, g.offs[0]);
            let a_el = kb.b.ins().iadd_imm_s(a_el, (k0 / 2) as i64);
            let a = kb.addr(a_base, a_el, 4);
            let di = kb.b.ins().isub(i, g.i_lo);
            let c = kb.addr(ibuf, di, (NR * 4) as i64);
            kb.b.ins().call(f, &[a, g.panel, c]);
        };
        for_row_tiles(kb, g, MR_MICRO, s.m, |kb, i, rows| {
            call(kb, i, usize::from(rows < MR_MICRO))
        });
    }
    epilogue_buffered(kb, s, g, ibuf, NR, cols);
}

/// A full-column unit of a one-block GEMM with the requantising pair micro-kernel: pack once, then each full
/// 8-row tile straight to C; the `m % 8` tail rows through the i32 kernel and the Cranelift epilogue.
fn unit_micro_direct(
    kb: &mut Kb,
    s: &QGemmSpec,
    g: &Unit,
    mk: &PairMicro,
    f: cranelift_codegen::ir::FuncRef,
) {
    let ibuf = g.ibuf.expect("micro-kernel units buffer their sums");
    let kp_total = s.kp() as i64;
    let a_base = kb.arg(Role::A);
    pack(kb, s, g, NR, 0, s.k);
    for_row_tiles(kb, g, MR_MICRO, s.m, |kb, i, rows| {
        let a_el = kb.b.ins().imul_imm_s(i, kp_total);
        let a_el = kb.b.ins().iadd(a_el, g.offs[0]);
        let a = kb.addr(a_base, a_el, 4);
        if rows == MR_MICRO {
            let [c, bias, scale] = direct_args(kb, s, g, i);
            kb.b.ins().call(f, &[a, g.panel, c, bias, scale]);
            return;
        }
        let Some(t) = mk.funcs[1][1][0] else {
            return;
        };
        kb.b.ins().call(t, &[a, g.panel, ibuf]);
        for r in 0..rows {
            let vals: Vec<Value> = (0..NR / 4)
                .map(|v| kb.load(I32X4, ibuf, ((r * NR + v * 4) * 4) as i64))
                .collect();
            let ir = kb.b.ins().iadd_imm_s(i, r as i64);
            epilogue(kb, s, g, ir, NR, &[vals]);
        }
    });
}

/// The pointers a requantising micro-kernel (`fn(a, b, c, bias, scale)`) takes for the tile at row `i` of the
/// unit's columns (contiguous C): C's first element, the row's bias and its scale.
pub(super) fn direct_args(kb: &mut Kb, s: &QGemmSpec, g: &Unit, i: Value) -> [Value; 3] {
    let c_el = kb.b.ins().imul_imm_s(i, s.c.rs as i64);
    let c_el = kb.b.ins().iadd(c_el, g.offs[2]);
    let c_el = kb.b.ins().iadd(c_el, g.j0);
    let c_el = kb.b.ins().iadd_imm_s(c_el, s.c.off as i64);
    let c = kb.addr(kb.arg(s.c.arg), c_el, s.c_dtype.size() as i64);
    let ch = kb.b.ins().iadd(i, g.offs[3]);
    let bias = kb.addr(kb.arg(Role::Bias), ch, 4);
    let scale = kb.addr(kb.arg(Role::Scale), ch, 4);
    [c, bias, scale]
}

/// The epilogue of every row of the unit from a stack buffer of i32 sums, `row_len` per row.
pub(super) fn epilogue_buffered(
    kb: &mut Kb,
    s: &QGemmSpec,
    g: &Unit,
    buf: Value,
    row_len: usize,
    cols: usize,
) {
    kb.for_range(g.i_lo, g.i_hi, 1, |kb, i| {
        let di = kb.b.ins().isub(i, g.i_lo);
        let row = kb.addr(buf, di, (row_len * 4) as i64);
        let vals: Vec<Value> = (0..cols.div_ceil(4))
            .map(|v| kb.load(I32X4, row, (v * 16) as i64))
            .collect();
        epilogue(kb, s, g, i, cols, &[vals]);
    });
}

/// Which K block a tile computes.
struct Stage {
    first: bool,
    last: bool,
    /// First pair word of the block.
    kp0: usize,
    /// Pair words in the block.
    kpl: usize,
}

/// Packs B's rows `[k0, k0 + klen)` of the unit's column block into the panel: `kpl` rows of `NR` i32 words,
/// word `j` of row `p` holding `(B[k0 + 2p, j] - zb, B[k0 + 2p + 1, j] - zb)` (zero beyond K or `cols`).
fn pack(kb: &mut Kb, s: &QGemmSpec, g: &Unit, cols: usize, k0: usize, klen: usize) {
    let esz = s.b_dtype.size() as i64;
    let b_base = kb.arg(s.b.arg);
    let b_el = kb.b.ins().iadd(g.offs[1], g.j0);
    let b_el = if s.b.cs == 1 {
        b_el
    } else {
        let c = kb.b.ins().imul_imm_s(g.j0, s.b.cs as i64);
        kb.b.ins().iadd(g.offs[1], c)
    };
    let b_el = kb.b.ins().iadd_imm_s(b_el, (s.b.off + k0 * s.b.rs) as i64);
    let b0 = kb.addr(b_base, b_el, esz);
    let pairs = klen / 2;
    let zp16 = kb.b.ins().iconst(I16, s.b_zero_point as i64);
    let zv = kb.b.ins().splat(I16X8, zp16);
    let zp = kb.b.ins().iconst(I32, s.b_zero_point as i64);
    let fast = cols == NR && s.b.cs == 1;
    let mask = |kb: &mut Kb, hi: bool| {
        let base = if hi { 8u8 } else { 0 };
        let bytes: Vec<u8> = (0..4u8)
            .flat_map(|c| {
                let l = base + 2 * c;
                [l, l + 1, 16 + l, 17 + l]
            })
            .collect();
        kb.b.func
            .dfg
            .immediates
            .push(ConstantData::from(bytes.as_slice()))
    };
    let (m_lo, m_hi) = (mask(kb, false), mask(kb, true));
    let row = |kb: &mut Kb, rp: Value| -> Value {
        let w = kb.load(I64, rp, 0);
        let v = kb.b.ins().scalar_to_vector(I64X2, w);
        let v = bitcast(kb, I8X16, v);
        let v = if s.b_dtype == DType::I8 {
            kb.b.ins().swiden_low(v)
        } else {
            kb.b.ins().uwiden_low(v)
        };
        kb.b.ins().isub(v, zv)
    };
    let store_pair_rows = |kb: &mut Kb, r0: Value, r1: Value, dst: Value| {
        let (a, b) = (bitcast(kb, I8X16, r0), bitcast(kb, I8X16, r1));
        let lo = kb.b.ins().shuffle(a, b, m_lo);
        let hi = kb.b.ins().shuffle(a, b, m_hi);
        kb.store(lo, dst, 0);
        kb.store(hi, dst, 16);
    };
    let word = |kb: &mut Kb, v0: Value, v1: Value| {
        let lo = kb.b.ins().band_imm_u(v0, 0xffff);
        let hi = kb.b.ins().ishl_imm_u(v1, 16);
        kb.b.ins().bor(lo, hi)
    };
    let elem = |kb: &mut Kb, rp: Value, j: usize| {
        let v = load1(kb, rp, (j * s.b.cs) as i64 * esz, s.b_dtype);
        kb.b.ins().isub(v, zp)
    };
    kb.for_const(0, pairs, 1, |kb, p| {
        let rp = kb.addr(b0, p, 2 * (s.b.rs as i64) * esz);
        let dst = kb.addr(g.panel, p, (NR * 4) as i64);
        let rp1 = kb.b.ins().iadd_imm_s(rp, s.b.rs as i64 * esz);
        if fast {
            let (r0, r1) = (row(kb, rp), row(kb, rp1));
            store_pair_rows(kb, r0, r1, dst);
        } else {
            for j in 0..NR {
                let w = if j < cols {
                    let (v0, v1) = (elem(kb, rp, j), elem(kb, rp1, j));
                    word(kb, v0, v1)
                } else {
                    kb.b.ins().iconst(I32, 0)
                };
                kb.store(w, dst, (j * 4) as i64);
            }
        }
    });
    if klen % 2 == 1 {
        // The last K row pairs with zero.
        let rp = kb.b.ins().iadd_imm_s(b0, (2 * pairs * s.b.rs) as i64 * esz);
        let dst = kb.b.ins().iadd_imm_s(g.panel, (pairs * NR * 4) as i64);
        let z = kb.b.ins().iconst(I32, 0);
        for j in 0..NR {
            let w = if j < cols {
                let v0 = elem(kb, rp, j);
                word(kb, v0, z)
            } else {
                z
            };
            kb.store(w, dst, (j * 4) as i64);
        }
    }
}

/// One `rows x cols` tile at row `i`: the block's pair products, then the partial-sum buffer or the epilogue.
fn tile(kb: &mut Kb, s: &QGemmSpec, g: &Unit, st: &Stage, i: Value, rows: usize, cols: usize) {
    let kp_total = s.kp();
    let di = kb.b.ins().isub(i, g.i_lo);
    let acc: Vec<[Variable; 2]> = (0..rows)
        .map(|r| {
            [0, 1].map(|v| {
                let init = match (st.first, g.ibuf) {
                    (false, Some(buf)) => {
                        let p = kb.addr(buf, di, (NR * 4) as i64);
                        kb.load(I32X4, p, ((r * NR + v * 4) * 4) as i64)
                    }
                    _ => {
                        let z = kb.b.ins().iconst(I32, 0);
                        kb.b.ins().splat(I32X4, z)
                    }
                };
                kb.var(I32X4, init)
            })
        })
        .collect();
    let a_row = kb.b.ins().imul_imm_s(i, kp_total as i64);
    let a_el = kb.b.ins().iadd(a_row, g.offs[0]);
    let a_el = kb.b.ins().iadd_imm_s(a_el, st.kp0 as i64);
    let a0 = kb.addr(kb.arg(Role::A), a_el, 4);
    kb.for_const(0, st.kpl, 1, |kb, p| {
        let pp = kb.addr(g.panel, p, (NR * 4) as i64);
        let bv = [kb.load(I16X8, pp, 0), kb.load(I16X8, pp, 16)];
        let ap = kb.addr(a0, p, 4);
        for (r, row) in acc.iter().enumerate() {
            let w = kb.load(I32, ap, (r * kp_total * 4) as i64);
            let w = kb.b.ins().splat(I32X4, w);
            let w = bitcast(kb, I16X8, w);
            for (v, &var) in row.iter().enumerate() {
                let d = dot(kb, bv[v], w);
                let cur = kb.b.use_var(var);
                let n = kb.b.ins().iadd(cur, d);
                kb.b.def_var(var, n);
            }
        }
    });
    let vals: Vec<Vec<Value>> = acc
        .iter()
        .map(|row| vec![kb.b.use_var(row[0]), kb.b.use_var(row[1])])
        .collect();
    if !st.last {
        if let Some(buf) = g.ibuf {
            let p = kb.addr(buf, di, (NR * 4) as i64);
            for (r, row) in vals.iter().enumerate() {
                for (v, &x) in row.iter().enumerate() {
                    kb.store(x, p, ((r * NR + v * 4) * 4) as i64);
                }
            }
        }
        return;
    }
    epilogue(kb, s, g, i, cols, &vals);
}

/// Σ over lane pairs of `x * y` (i16x8 → i32x4): `pmaddwd` on x86.
fn dot(kb: &mut Kb, x: Value, y: Value) -> Value {
    let xl = kb.b.ins().swiden_low(x);
    let yl = kb.b.ins().swiden_low(y);
    let xh = kb.b.ins().swiden_high(x);
    let yh = kb.b.ins().swiden_high(y);
    let l = kb.b.ins().imul(xl, yl);
    let h = kb.b.ins().imul(xh, yh);
    kb.b.ins().iadd_pairwise(l, h)
}

/// Adds the bias to the i32 sums of rows `i..` (`vals[r]`: i32x4 vectors of consecutive columns from `j0`),
/// requantises or keeps them, and stores the first `cols` columns of each row.
pub(super) fn epilogue(
    kb: &mut Kb,
    s: &QGemmSpec,
    g: &Unit,
    i: Value,
    cols: usize,
    vals: &[Vec<Value>],
) {
    let esz = s.c_dtype.size() as i64;
    let ch0 = kb.b.ins().iadd(i, g.offs[3]);
    let c_row = kb.b.ins().imul_imm_s(i, s.c.rs as i64);
    let c_col = kb.b.ins().imul_imm_s(g.j0, s.c.cs as i64);
    let c_el = kb.b.ins().iadd(c_row, c_col);
    let c_el = kb.b.ins().iadd(c_el, g.offs[2]);
    let c_el = kb.b.ins().iadd_imm_s(c_el, s.c.off as i64);
    let c0 = kb.addr(kb.arg(s.c.arg), c_el, esz);
    let bias0 = kb.addr(kb.arg(Role::Bias), ch0, 4);
    let scale0 = s
        .requant
        .as_ref()
        .map(|_| kb.arg(Role::Scale))
        .map(|p| kb.addr(p, ch0, 4));
    for (r, row) in vals.iter().enumerate() {
        let b = kb.load(I32, bias0, (r * 4) as i64);
        let bv = kb.b.ins().splat(I32X4, b);
        let sc = scale0.map(|p| {
            let x = kb.load(F32, p, (r * 4) as i64);
            kb.b.ins().splat(F32X4, x)
        });
        for (v, &acc) in row.iter().enumerate() {
            let lanes = cols.saturating_sub(v * 4).min(4);
            if lanes == 0 {
                continue;
            }
            let x = kb.b.ins().iadd(acc, bv);
            let y = match (&s.requant, sc) {
                (Some(q), Some(sc)) => {
                    let f = kb.b.ins().fcvt_from_sint(F32X4, x);
                    let f = kb.b.ins().fmul(f, sc);
                    round_to_int(kb, F32X4, f, q.zero_point, q.clamp.0, q.clamp.1)
                }
                _ => x,
            };
            let off = (r * s.c.rs + v * 4 * s.c.cs) as i64 * esz;
            if s.c.cs == 1 && lanes == 4 {
                store4(kb, y, c0, off, s.c_dtype);
            } else {
                for l in 0..lanes {
                    let e = kb.b.ins().extractlane(y, l as u8);
                    store1(kb, e, c0, off + (l * s.c.cs) as i64 * esz, s.c_dtype);
                }
            }
        }
    }
}
