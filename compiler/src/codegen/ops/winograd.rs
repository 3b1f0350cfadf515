//! Winograd F(2x2, 3x3) convolution (Lavin and Gray) for 3x3, stride-1, undilated, one-group convolutions on
//! AVX-512 targets. Three kernels replace im2col + GEMM:
//!
//! 1. `WinogradIn`: per input plane, a copy into a zero-padded stack plane, then per tile row one call to the
//!    machine-code input transform (`kernels/winograd_x86.rs`): `V[ξ][c][t] = (Bᵀ d B)[ξ]` for every 4x4 input
//!    patch `d` of the 2x2 output tile `t` (tiles numbered over the batch, then rows, then columns).
//! 2. A batched GEMM (the micro-kernels): `M[ξ] = U[ξ] · V[ξ]`, `U[ξ] = (G g Gᵀ)[ξ]` the weights transformed
//!    at compile time (`transform_weights`), `[M, C] x [C, T]` for each of the 16 ξ.
//! 3. `WinogradOut`: per output plane and tile row, the output transform `Y = Aᵀ M A`, the bias and the clamp
//!    of the fused activation, written as two output rows.
//!
//! The GEMM does 16 multiply-adds per 2x2 outputs and input channel instead of 36: 2.25 times fewer. The
//! transforms only add and subtract (`Bᵀ`, `Aᵀ` have entries 0 and ±1), and `G`'s entries 0, ±½, 1 are exact,
//! so the error against direct convolution is rounding only: each output sums 16 products of transformed
//! values, each the sum of at most 9 inputs (input side) and 9 weights (weight side), so the error is bounded by
//! about `(9 + 9 + 16 + 6)·ε·Σ|w|·max|x|` (ε = 2⁻²⁴); measured on ResNet-50 against onnxruntime (SPEC §11's
//! scaled error) it stays within the direct convolution's order (docs/architecture.md).

use crate::codegen::builder::Kb;
use crate::codegen::kernel::Role;
use crate::ir::Activation;
use cranelift_codegen::ir::types::I64;
use cranelift_codegen::ir::{FuncRef, InstBuilder, StackSlotData, StackSlotKind};

/// The geometry of one Winograd convolution.
#[derive(Debug, Clone, PartialEq)]
pub struct WinogradSpec {
    /// Batch.
    pub n: usize,
    /// Input channels.
    pub c: usize,
    /// Output channels.
    pub m: usize,
    /// Input (H, W).
    pub hw: [usize; 2],
    /// Pads top, left.
    pub pads: [usize; 2],
    /// Output (OH, OW).
    pub out: [usize; 2],
    /// Whether a bias is present (role `Bias` of the output transform).
    pub has_bias: bool,
    /// Fused activation (a clamp the output transform applies).
    pub act: Activation,
}

impl WinogradSpec {
    /// Tile rows and columns per image.
    pub fn tiles(&self) -> [usize; 2] {
        [self.out[0].div_ceil(2), self.out[1].div_ceil(2)]
    }
    /// Tiles over the batch.
    pub fn tiles_all(&self) -> usize {
        let [th, tw] = self.tiles();
        self.n * th * tw
    }
    /// The padded input plane `[rows, cols]` the input transform reads: every patch row, and columns for whole
    /// 16-tile blocks of loads.
    pub fn plane(&self) -> [usize; 2] {
        let [th, tw] = self.tiles();
        [2 * th + 2, 32 * tw.div_ceil(16) + 16]
    }
    /// Bytes of the transformed input `V` (16 x C x T floats).
    pub fn v_bytes(&self) -> usize {
        16 * self.c * self.tiles_all() * 4
    }
    /// Bytes of the products `M` (16 x M x T floats).
    pub fn m_bytes(&self) -> usize {
        16 * self.m * self.tiles_all() * 4
    }
}

/// `U[ξ][m][c] = (G g Gᵀ)[ξ]` for weights `[M, C, 3, 3]`, `G = [[1, 0, 0], [½, ½, ½], [½, −½, ½], [0, 0, 1]]`
/// (computed in f64, rounded once).
pub fn transform_weights(w: &[f32], m: usize, c: usize) -> Vec<f32> {
    const G: [[f64; 3]; 4] = [
        [1.0, 0.0, 0.0],
        [0.5, 0.5, 0.5],
        [0.5, -0.5, 0.5],
        [0.0, 0.0, 1.0],
    ];
    let mut u = vec![0f32; 16 * m * c];
    for o in 0..m {
        for i in 0..c {
            let g = |k: usize, l: usize| w[((o * c + i) * 3 + k) * 3 + l] as f64;
            for a in 0..4 {
                for b in 0..4 {
                    let mut s = 0f64;
                    for (k, gak) in G[a].iter().enumerate() {
                        for (l, gbl) in G[b].iter().enumerate() {
                            s += gak * g(k, l) * gbl;
                        }
                    }
                    u[((4 * a + b) * m + o) * c + i] = s as f32;
                }
            }
        }
    }
    u
}

/// Emits the input transform kernel: roles X (input) and Out (`V`), one unit per (batch, channel) plane. `f` is
/// the machine-code transform of one tile row, `copy` the AVX-512 row copy.
pub fn emit_in(kb: &mut Kb, s: &WinogradSpec, tasks: u32, f: FuncRef, copy: FuncRef) {
    let [h, w] = s.hw;
    let [pt, pl] = s.pads;
    let [th, tw] = s.tiles();
    let [ph, pw] = s.plane();
    let t_all = s.tiles_all();
    let slot = kb.b.create_sized_stack_slot(StackSlotData::new(
        StackSlotKind::ExplicitSlot,
        (ph * pw * 4) as u32,
        6,
    ));
    let plane = kb.b.ins().stack_addr(I64, slot, 0);
    // The copies below never write the padding, so the plane is zeroed once per task.
    super::conv::zero(kb, plane, 0, ph * pw);
    let (rows, cols) = (h.min(ph - pt), w.min(pw - pl));
    let (lo, hi) = kb.task_range(s.n * s.c, tasks);
    let (px, pv) = (kb.arg(Role::X), kb.arg(Role::Out));
    kb.for_range(lo, hi, 1, |kb, u| {
        let (b, ch) = kb.divmod(u, s.c);
        let xin = kb.addr(px, u, (h * w * 4) as i64);
        let ncols = kb.iconst(cols as i64);
        let dst0 = kb.b.ins().iadd_imm_s(plane, ((pt * pw + pl) * 4) as i64);
        kb.for_const(0, rows, 1, |kb, iy| {
            let src = kb.addr(xin, iy, (w * 4) as i64);
            let dst = kb.addr(dst0, iy, (pw * 4) as i64);
            kb.b.ins().call(copy, &[src, dst, ncols]);
        });
        // V + (ch·T + b·th·tw + ty·tw) floats for tile row ty.
        let vc = kb.addr(pv, ch, (t_all * 4) as i64);
        let vb = kb.addr(vc, b, (th * tw * 4) as i64);
        let n = kb.iconst(tw as i64);
        kb.for_const(0, th, 1, |kb, ty| {
            let p = kb.addr(plane, ty, (2 * pw * 4) as i64);
            let v = kb.addr(vb, ty, (tw * 4) as i64);
            kb.b.ins().call(f, &[p, v, n]);
        });
    });
}

/// Emits the output transform kernel: roles X (`M`), [Bias] and Out, one unit per (batch, channel) output
/// plane. `f2` writes two output rows per tile row, `f1` one (the last tile row of an odd height).
pub fn emit_out(kb: &mut Kb, s: &WinogradSpec, tasks: u32, f2: FuncRef, f1: Option<FuncRef>) {
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
            let yr = kb.addr(y, ty, (2 * ow * 4) as i64);
            kb.b.ins().call(f, &[m, yr, bias, n]);
        };
        kb.for_const(0, oh / 2, 1, |kb, ty| call(kb, f2, ty));
        if let Some(f) = f1 {
            let ty = kb.iconst((oh / 2) as i64);
            call(kb, f, ty);
        }
    });
}
