//! Winograd F(2x2, 3x3) and F(4x4, 3x3) convolution (Lavin and Gray) for 3x3, stride-1, undilated, one-group
//! convolutions on AVX-512 targets. With output tiles of side `tile` (2 or 4) and input patches of side
//! `α = tile + 2`, three kernels replace im2col + GEMM:
//!
//! 1. `WinogradIn`: per input plane, a copy into a zero-padded stack plane, then per tile row one call to the
//!    machine-code input transform (`x86/winograd_x86.rs`, `x86/winograd4_x86.rs`):
//!    `V[ξ][c][t] = (Bᵀ d B)[ξ]` for every α x α input patch `d` of output tile `t` (tiles numbered over the
//!    batch, then rows, then columns).
//! 2. A batched GEMM (the micro-kernels): `M[ξ] = U[ξ] · V[ξ]`, `U[ξ] = (G g Gᵀ)[ξ]` the weights transformed
//!    at compile time (`transform_weights`), `[M, C] x [C, T]` for each of the α² ξ.
//! 3. `WinogradOut`: per output plane and tile row, the output transform `Y = Aᵀ M A`, the bias and the clamp
//!    of the fused activation, written as `tile` output rows.
//!
//! F(2x2) does 16 multiply-adds per 2x2 outputs and input channel instead of 36 (2.25 times fewer); its
//! transforms only add and subtract and `G`'s entries 0, ±½, 1 are exact, so the error against direct
//! convolution is rounding only, bounded by about `(9 + 9 + 16 + 6)·ε·Σ|w|·max|x|` (ε = 2⁻²⁴). F(4x4) does 36
//! per 4x4 outputs (4 times fewer) with `Bᵀ` entries up to 5, `G` entries ±1/6 and ±1/24 (rounded once, from
//! f64) and `Aᵀ` entries up to 8, which amplify rounding about tenfold: measured against onnxruntime (SPEC
//! §11's scaled error) both stay far inside the tolerance (docs/design.md).

use super::plane::StackPlane;
use crate::codegen::builder::Kb;
use crate::kernel::conv::WinogradSpec;
use crate::kernel::Role;
use cranelift_codegen::ir::{FuncRef, InstBuilder};

/// Emits the input transform kernel: roles X (input) and Out (`V`), one unit per (batch, channel) plane. `f` is
/// the machine-code transform of one tile row, `copy` the AVX-512 row copy.
pub fn emit_in(kb: &mut Kb, s: &WinogradSpec, tasks: u32, f: FuncRef, copy: FuncRef) {
    let [h, w] = s.hw;
    let [pt, pl] = s.pads;
    let [th, tw] = s.tiles();
    let t_all = s.tiles_all();
    let plane = StackPlane::new(kb, s.plane(), 0.0);
    let (lo, hi) = kb.task_range(s.n * s.c, tasks);
    let (px, pv) = (kb.arg(Role::X), kb.arg(Role::Out));
    kb.for_range(lo, hi, 1, |kb, u| {
        let (b, ch) = kb.divmod(u, s.c);
        let xin = kb.addr(px, u, (h * w * 4) as i64);
        plane.load(kb, xin, [h, w], [pt, pl], Some(copy));
        let n = kb.iconst(tw as i64);
        // Tile t = (b·th + ty)·tw of channel ch at V + ((t / rows)·C + ch)·rows + t % rows: row panels of
        // `rows` tiles, or without them one panel of all T (V + ch·T + t).
        let rows = s.v_panel.unwrap_or(t_all);
        let vc = kb.addr(pv, ch, (rows * 4) as i64);
        let row0 = kb.b.ins().imul_imm_s(b, th as i64);
        kb.for_const(0, th, 1, |kb, ty| {
            let p = plane.row(kb, ty, s.tile);
            let r = kb.b.ins().iadd(row0, ty);
            let t = kb.b.ins().imul_imm_s(r, tw as i64);
            let (q, o) = kb.divmod(t, rows);
            let vq = kb.addr(vc, q, (s.c * rows * 4) as i64);
            let v = kb.addr(vq, o, 4);
            kb.b.ins().call(f, &[p, v, n]);
        });
    });
}

/// Emits the output transform kernel: roles X (`M`), \[Bias\] and Out, one unit per (batch, channel) output
/// plane. `full` writes `tile` output rows per tile row, `last` the rest (the last tile row of a height that is
/// not a multiple of `tile`).
pub fn emit_out(kb: &mut Kb, s: &WinogradSpec, tasks: u32, full: FuncRef, last: Option<FuncRef>) {
    let [oh, ow] = s.out;
    let [th, tw] = s.tiles();
    let t_all = s.tiles_all();
    let (lo, hi) = kb.task_range(s.n * s.m, tasks);
    let (pm, py) = (kb.arg(Role::X), kb.arg(Role::Out));
    let pb = s.has_bias.then(|| kb.arg(Role::Bias));
    kb.for_range(lo, hi, 1, |kb, u| {
        let (b, co) = kb.divmod(u, s.m);
        let mc = kb.addr(pm, co, (t_all * 4) as i64);
        let mb = kb.addr(mc, b, (th * tw * 4) as i64);
        let y = kb.addr(py, u, (oh * ow * 4) as i64);
        let bias = match pb {
            Some(p) => kb.addr(p, co, 4),
            None => kb.iconst(0),
        };
        let n = kb.iconst(tw as i64);
        let call = |kb: &mut Kb, f: FuncRef, ty| {
            let m = kb.addr(mb, ty, (tw * 4) as i64);
            let yr = kb.addr(y, ty, (s.tile * ow * 4) as i64);
            kb.b.ins().call(f, &[m, yr, bias, n]);
        };
        kb.for_const(0, oh / s.tile, 1, |kb, ty| call(kb, full, ty));
        if let Some(f) = last {
            let ty = kb.iconst((oh / s.tile) as i64);
            call(kb, f, ty);
        }
    });
}
