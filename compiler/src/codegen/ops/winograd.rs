//! Winograd F(2x2, 3x3) and F(4x4, 3x3) convolution (Lavin and Gray) for 3x3, stride-1, undilated, one-group
//! convolutions on AVX-512 targets. With output tiles of side `tile` (2 or 4) and input patches of side
//! `α = tile + 2`, three kernels replace im2col + GEMM:
//!
//! 1. `WinogradIn`: per input plane, a copy into a zero-padded stack plane, then per tile row one call to the
//!    machine-code input transform (`kernels/winograd_x86.rs`, `kernels/winograd4_x86.rs`):
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
//! §11's scaled error) both stay far inside the tolerance (docs/architecture.md).

use super::plane::StackPlane;
use crate::codegen::builder::Kb;
use crate::codegen::kernel::Role;
use crate::ir::Activation;
use cranelift_codegen::ir::{FuncRef, InstBuilder};

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
    /// Output tile side: 2 for F(2x2, 3x3), 4 for F(4x4, 3x3).
    pub tile: usize,
    /// `Some(rows)`: the input transform writes `V` as the row panels of `rows` tiles that a transposed GEMM
    /// reads (`Body::PackRows`' layout `[α², T/rows, C, rows]`, the last panel's rows past T left unwritten:
    /// the GEMM's row tail never reads them), so no pack runs between them; `rows` is a multiple of the tiles
    /// per tile row, so a tile row never spans two panels.
    pub v_panel: Option<usize>,
    /// `V` and `M` planes may be padded (`v_stride`, `m_stride`): the GEMM per ξ reads and writes them with
    /// any batch stride; not where a transposed GEMM's epilogue writes `M` (`[α², M, T]`).
    pub pad_planes: bool,
}

impl WinogradSpec {
    /// Input patch side α.
    pub fn alpha(&self) -> usize {
        self.tile + 2
    }
    /// Transformed elements ξ per tile (α²): the GEMMs' batch.
    pub fn xis(&self) -> usize {
        self.alpha() * self.alpha()
    }
    /// Tile rows and columns per image.
    pub fn tiles(&self) -> [usize; 2] {
        [
            self.out[0].div_ceil(self.tile),
            self.out[1].div_ceil(self.tile),
        ]
    }
    /// Tiles over the batch.
    pub fn tiles_all(&self) -> usize {
        let [th, tw] = self.tiles();
        self.n * th * tw
    }
    /// The padded input plane `[rows, cols]` the input transform reads: every patch row, and columns for whole
    /// 16-tile blocks of loads (F(4x4) loads 80 floats per block).
    pub fn plane(&self) -> [usize; 2] {
        let [th, tw] = self.tiles();
        [self.tile * th + 2, 16 * self.tile * tw.div_ceil(16) + 16]
    }
    /// Bytes of the transformed input `V` (α² x C x T floats, T rounded up to whole panels with `v_panel`).
    pub fn v_bytes(&self) -> usize {
        self.xis() * self.v_stride() * 4
    }
    /// Tiles per channel in `V`: T, or T rounded up to whole panels (`v_panel`).
    pub fn v_rows(&self) -> usize {
        match self.v_panel {
            Some(rows) => self.tiles_all().next_multiple_of(rows.max(1)),
            None => self.tiles_all(),
        }
    }
    /// Floats between the α² planes of `V` (the transform's `v_stride`): a cache line more where the planes
    /// would be a multiple of 2 KiB apart and may be padded (`pad_planes`, or row panels). The transforms load
    /// or store the α² elements of a tile at once, and planes 4 KiB apart all fall in one set of the L1 cache:
    /// ResNet-50's 7x7 Winograd input transforms (512 channels x 16 tiles, 32 KiB apart) ran 3.5x slower.
    pub fn v_stride(&self) -> usize {
        padded(
            self.c * self.v_rows(),
            self.pad_planes || self.v_panel.is_some(),
        )
    }
    /// Floats between the α² planes of the products `M` (the output transform's `m_stride`), padded like
    /// `v_stride` where `pad_planes`.
    pub fn m_stride(&self) -> usize {
        padded(self.m * self.tiles_all(), self.pad_planes)
    }
    /// Bytes of the products `M` (α² x M x T floats).
    pub fn m_bytes(&self) -> usize {
        self.xis() * self.m_stride() * 4
    }
}

/// `floats`, plus a cache line of floats when `pad` and `floats` is a multiple of 2 KiB (`v_stride`).
fn padded(floats: usize, pad: bool) -> usize {
    if pad && floats.is_multiple_of(512) {
        floats + 16
    } else {
        floats
    }
}

/// F(2x2, 3x3)'s weight transform.
const G2: [[f64; 3]; 4] = [
    [1.0, 0.0, 0.0],
    [0.5, 0.5, 0.5],
    [0.5, -0.5, 0.5],
    [0.0, 0.0, 1.0],
];

/// F(4x4, 3x3)'s weight transform (points 0, ±1, ±2 and ∞, matching `kernels/winograd4_x86.rs`' `Bᵀ`, `Aᵀ`).
const G4: [[f64; 3]; 6] = [
    [0.25, 0.0, 0.0],
    [-1.0 / 6.0, -1.0 / 6.0, -1.0 / 6.0],
    [-1.0 / 6.0, 1.0 / 6.0, -1.0 / 6.0],
    [1.0 / 24.0, 1.0 / 12.0, 1.0 / 6.0],
    [1.0 / 24.0, -1.0 / 12.0, 1.0 / 6.0],
    [0.0, 0.0, 1.0],
];

/// `U[ξ][m][c] = (G g Gᵀ)[ξ]` (ξ = α·a + b) for weights `[M, C, 3, 3]` and output tiles of side `tile`
/// (`G2` or `G4`; computed in f64, rounded once).
pub fn transform_weights(w: &[f32], m: usize, c: usize, tile: usize) -> Vec<f32> {
    let g_rows: &[[f64; 3]] = if tile == 4 { &G4 } else { &G2 };
    let alpha = g_rows.len();
    let mut u = vec![0f32; alpha * alpha * m * c];
    for o in 0..m {
        for i in 0..c {
            let g = |k: usize, l: usize| w[((o * c + i) * 3 + k) * 3 + l] as f64;
            for (a, ga) in g_rows.iter().enumerate() {
                for (b, gb) in g_rows.iter().enumerate() {
                    let mut s = 0f64;
                    for (k, gak) in ga.iter().enumerate() {
                        for (l, gbl) in gb.iter().enumerate() {
                            s += gak * g(k, l) * gbl;
                        }
                    }
                    u[((alpha * a + b) * m + o) * c + i] = s as f32;
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
