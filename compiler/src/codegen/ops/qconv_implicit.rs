//! The drivers of the implicit int8 convolution (`kernel/qconv.rs`, machine code in `x86/qconv_implicit.rs`):
//! the reorder kernel's units (one channel quad of one batch entry each) and the convolution's (a block of `mr`
//! output channels by up to `BLOCKS_PER_CALL` blocks of 32 positions each), every unit one or two calls.

use crate::codegen::builder::Kb;
use crate::kernel::qconv::{QConvImplicit, BLOCKS_PER_CALL, NQ, TM};
use crate::kernel::Role;
use cranelift_codegen::ir::condcodes::IntCC;
use cranelift_codegen::ir::{FuncRef, InstBuilder, Value};

/// Emits the reorder (`Body::QReorder`): roles X and Out; `full` takes four channels, `last` the last quad's
/// `C % 4` (when C is not a multiple of four).
pub fn emit_reorder(
    kb: &mut Kb,
    s: &QConvImplicit,
    tasks: u32,
    full: FuncRef,
    last: Option<FuncRef>,
) {
    let [h, w] = s.hw;
    let quads = s.quads();
    let (lo, hi) = kb.task_range(s.n * quads, tasks);
    let (px, po) = (kb.arg(Role::X), kb.arg(Role::Out));
    kb.for_range(lo, hi, 1, |kb, u| {
        let (b, q) = kb.divmod(u, quads);
        let xb = kb.addr(px, b, (s.c * h * w) as i64);
        let x = kb.addr(xb, q, (4 * h * w) as i64);
        let ob = kb.addr(po, b, s.reordered_bytes() as i64);
        let dst = kb.addr(ob, q, s.quad_bytes() as i64);
        match last {
            Some(f) => kb.call_at((q, quads - 1), f, Some(full), &[x, dst]),
            None => kb.call_at((q, 0), full, None, &[x, dst]),
        }
    });
}

/// Emits the convolution (`Body::QConvImplicit`): roles A, B, Out, Bias, Scale (and Residual with a fused
/// add); `full` computes a block of `mr`
/// output channels, `last` the last `M % mr`. A unit is [`BLOCKS_PER_CALL`] position blocks of one channel
/// block of one batch entry; where the positions end inside a block (`direct` outputs), the last block starts
/// `NQ` before the end.
pub fn emit_conv(
    kb: &mut Kb,
    s: &QConvImplicit,
    tasks: u32,
    full: Option<FuncRef>,
    last: Option<FuncRef>,
) {
    if s.transposed {
        return emit_conv_t(kb, s, tasks, full, last);
    }
    let mr = s.mr();
    let blocks = s.m.div_ceil(mr);
    let qblocks = s.position_blocks();
    let chunks = qblocks.div_ceil(BLOCKS_PER_CALL);
    let last_n = qblocks - (chunks - 1) * BLOCKS_PER_CALL;
    let ragged = usize::from(!s.positions().is_multiple_of(NQ));
    let (lo, hi) = kb.task_range(s.n * blocks * chunks, tasks);
    let (pa, pb, po) = (kb.arg(Role::A), kb.arg(Role::B), kb.arg(Role::Out));
    let (pbias, pscale) = (kb.arg(Role::Bias), kb.arg(Role::Scale));
    // A fused residual add reads the residual in the output's layout.
    let pres = s.add.as_ref().map(|_| kb.arg(Role::Residual));
    kb.for_range(lo, hi, 1, |kb, u| {
        // Position chunks innermost: a block of weights stays cached while the positions stream.
        let (b, rest) = kb.divmod(u, blocks * chunks);
        let (rb, chunk) = kb.divmod(rest, chunks);
        let a = kb.addr(pa, rb, (mr * s.a_row()) as i64);
        let xb = kb.addr(pb, b, s.reordered_bytes() as i64);
        let row = |kb: &mut Kb, p: Value| {
            let ob = kb.addr(p, b, (s.m * s.positions()) as i64);
            kb.addr(ob, rb, (mr * s.positions()) as i64)
        };
        let orow = row(kb, po);
        let rrow = pres.map(|p| row(kb, p));
        let bias = kb.addr(pbias, rb, (mr * 4) as i64);
        let scale = kb.addr(pscale, rb, (mr * 4) as i64);
        let first = kb.b.ins().imul_imm_s(chunk, (BLOCKS_PER_CALL * NQ) as i64);
        // `count` blocks from position `q0` with the row block's kernel.
        let call = |kb: &mut Kb, q0: Value, count: usize| {
            let x = kb.addr(xb, q0, 4);
            let out = kb.addr(orow, q0, 1);
            let n = kb.iconst(count as i64);
            let mut args = vec![a, x, out, bias, scale, n];
            if let Some(r) = rrow {
                args.push(kb.addr(r, q0, 1));
            }
            match (full, last) {
                (Some(f), None) | (None, Some(f)) => kb.call_at((rb, 0), f, None, &args),
                (Some(f), Some(g)) => kb.call_at((rb, blocks - 1), g, Some(f), &args),
                (None, None) => {}
            }
        };
        let is_last =
            kb.b.ins()
                .icmp_imm_s(IntCC::Equal, chunk, chunks as i64 - 1);
        kb.if_else(
            is_last,
            |kb| {
                if last_n > ragged {
                    call(kb, first, last_n - ragged);
                }
                if ragged == 1 {
                    let end = kb.iconst((s.positions() - NQ) as i64);
                    call(kb, end, 1);
                }
            },
            |kb| call(kb, first, BLOCKS_PER_CALL),
        );
    });
}

/// The transposed kernel's driver: a unit is one tile, (batch entry, block of [`TM`] channels, output row,
/// chunk), positions innermost so that a block's weights stay cached; `full` takes the row's wider tiles
/// (the first `wide` chunks), `last` the others ([`QConvImplicit::t_tiles`]).
fn emit_conv_t(
    kb: &mut Kb,
    s: &QConvImplicit,
    tasks: u32,
    full: Option<FuncRef>,
    last: Option<FuncRef>,
) {
    let [oh, ow] = s.out;
    let tiles = s.t_tiles();
    let (blocks, chunks, plane) = (s.m / TM, tiles.chunks, oh * ow);
    let ws = s.phase()[1];
    let (lo, hi) = kb.task_range(s.n * blocks * oh * chunks, tasks);
    let (pa, pb, po) = (kb.arg(Role::A), kb.arg(Role::B), kb.arg(Role::Out));
    let (pbias, pscale) = (kb.arg(Role::Bias), kb.arg(Role::Scale));
    kb.for_range(lo, hi, 1, |kb, u| {
        let (b, rest) = kb.divmod(u, blocks * oh * chunks);
        let (ob, rest) = kb.divmod(rest, oh * chunks);
        let (oy, chunk) = kb.divmod(rest, chunks);
        // The chunk's first position: `narrow` per chunk before it, plus one per wider chunk before it.
        let wider = kb.iconst(tiles.wide as i64);
        let wider = kb.b.ins().smin(chunk, wider);
        let ox = kb.b.ins().imul_imm_s(chunk, tiles.narrow as i64);
        let ox = kb.b.ins().iadd(ox, wider);
        let a = kb.addr(pa, ob, s.t_block() as i64);
        let xb = kb.addr(pb, b, s.reordered_bytes() as i64);
        let xr = kb.addr(xb, oy, (4 * ws) as i64);
        let x = kb.addr(xr, ox, 4);
        let ob_ = kb.addr(po, b, (s.m * plane) as i64);
        let oc = kb.addr(ob_, ob, (TM * plane) as i64);
        let or = kb.addr(oc, oy, ow as i64);
        let out = kb.b.ins().iadd(or, ox);
        let bias = kb.addr(pbias, ob, (TM * 4) as i64);
        let scale = kb.addr(pscale, ob, (TM * 4) as i64);
        let args = [a, x, out, bias, scale];
        match (full, last) {
            (Some(f), Some(g)) => {
                let is_wide =
                    kb.b.ins()
                        .icmp_imm_s(IntCC::SignedLessThan, chunk, tiles.wide as i64);
                kb.if_else(
                    is_wide,
                    |kb| {
                        kb.b.ins().call(f, &args);
                    },
                    |kb| {
                        kb.b.ins().call(g, &args);
                    },
                );
            }
            (Some(f), None) | (None, Some(f)) => {
                kb.b.ins().call(f, &args);
            }
            (None, None) => {}
        }
    });
}
