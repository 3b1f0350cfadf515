//! NPU lowering of the linalg family (`ir/ops/linalg.rs`): MatMul and Gemm whose right operand is a constant
//! (`[m, k] x [k, n]`, leading batch dims of the left operand folded into `m`), with bias per column, residual and
//! activation. Output blocks of `mt x nt` accumulate over `kc`-deep chunks: the left block is a strided 2-D DMA of
//! the activation, the right block a contiguous DMA of weights formatted at compile time into
//! `[n-block][k-chunk]` blocks of `[kc][nt]`.

use super::{
    a64, budget, first_fit, sizes, ArgKind, Elem, EpilogueBlock, Gen, OpProgram, Reject, Requant,
    Weights, PARAM_AREA,
};
use crate::ir::Activation;
use crate::npu::target::NpuTarget;
use crate::npu::txn::{Kernel, Xrt};

/// `y[m, n] = act(x[m, k] · w[k, n] + bias[n] + residual[m, n])`. ONNX args: 0 x, 1 w, 2 bias, then residual.
#[derive(Debug, Clone, PartialEq)]
pub struct GemmOp {
    /// Activation type.
    pub elem: Elem,
    /// Rows of x (all batch dims).
    pub m: usize,
    /// Inner dimension.
    pub k: usize,
    /// Columns of w.
    pub n: usize,
    /// Weights `[k][n]` row-major.
    pub weights: Weights,
    /// f32 bias per column (zeros when absent).
    pub bias: Vec<f32>,
    /// Residual `[m, n]` added before the activation (f32 only).
    pub residual: bool,
    /// Fused activation.
    pub act: Activation,
    /// int8 requantisation (per column).
    pub requant: Option<Requant>,
}

impl GemmOp {
    fn layout(&self, mt: usize, kc: usize, nt: usize) -> [usize; 6] {
        let e = self.elem.size();
        let int8 = self.elem != Elem::F32;
        [
            a64(mt * kc * e),
            a64(kc * nt * e),
            a64(mt * nt * 4),
            a64(nt * 4) * (1 + int8 as usize),
            if self.residual { a64(mt * nt * 4) } else { 0 },
            if int8 { a64(mt * nt) } else { 0 },
        ]
    }
    /// Multiply-accumulates.
    pub fn macs(&self) -> u64 {
        (self.m * self.k * self.n) as u64
    }
    /// Compiles the matrix product.
    pub fn program(&self, t: &NpuTarget) -> Result<OpProgram, Reject> {
        let e = self.elem.size();
        let (m, k, n) = (self.m, self.k, self.n);
        let mut cands = Vec::new();
        for &mt in &sizes(m, 256) {
            for &nt in &sizes(n, 512) {
                for &kc in &sizes(k, 2048) {
                    let bytes: usize = self.layout(mt, kc, nt).iter().sum();
                    let (nm, nn) = (m.div_ceil(mt), n.div_ceil(nt));
                    let traffic = nm * nn * (mt * k + k * nt) * e;
                    let items = nm * nn * k.div_ceil(kc);
                    cands.push((
                        (mt, kc, nt),
                        bytes,
                        super::est(t, self.elem, traffic, self.macs(), nm * nn, items),
                    ));
                }
            }
        }
        let none = || {
            let need: usize = self.layout(1, 1, 1).iter().sum::<usize>() + PARAM_AREA as usize;
            format!(
                "working set exceeds the tile's local memory: required {need} B, available {} B",
                t.local_memory_bytes
            )
        };
        first_fit(cands, budget(t), none, |b| self.tiled(t, b))
    }

    /// Compiles the matrix product with tiling (mt, kc, nt).
    fn tiled(
        &self,
        t: &NpuTarget,
        (mt, kc, nt): (usize, usize, usize),
    ) -> Result<OpProgram, Reject> {
        let mut g = Gen::new(t);
        let e = self.elem.size();
        let (m, k, n) = (self.m, self.k, self.n);
        let int8 = self.elem != Elem::F32;
        // Constants: [n-block][k-chunk] blocks of [kcs][nts], then bias, then scales.
        let mut wtab = Vec::new();
        for n0 in (0..n).step_by(nt) {
            let nts = nt.min(n - n0);
            for k0 in (0..k).step_by(kc) {
                wtab.push(g.p.consts.len());
                for p in k0..(k0 + kc).min(k) {
                    for j in n0..n0 + nts {
                        self.weights.push(p * n + j, &mut g.p.consts);
                    }
                }
                let pad = a64(g.p.consts.len()) - g.p.consts.len();
                g.p.consts.extend(std::iter::repeat_n(0, pad));
            }
        }
        let (bias_at, scale_at) = g.push_bias_scales(n, &self.bias, self.requant.as_ref());
        let res_at = a64(m * k * e);
        g.arg(ArgKind::Input, Xrt::In, 0, 0, (m * k * e) as u64);
        if self.residual {
            g.arg(
                ArgKind::Input,
                Xrt::In,
                3,
                res_at as u64,
                (m * n * 4) as u64,
            );
        }
        g.arg(
            ArgKind::ConstInput,
            Xrt::Const,
            1,
            0,
            g.p.consts.len() as u64,
        );
        g.arg(ArgKind::Output, Xrt::Out, 0, 0, (m * n * e) as u64);
        let lay = self.layout(mt, kc, nt);
        let al = PARAM_AREA as usize;
        let bl = al + lay[0];
        let acc = bl + lay[1];
        let bias = acc + lay[2];
        let res = bias + lay[3];
        let outl = res + lay[4];
        let xzp = self.requant.as_ref().map_or(0, |q| q.x_zero_point);
        let nk = k.div_ceil(kc);
        for (nb, n0) in (0..n).step_by(nt).enumerate() {
            let nts = nt.min(n - n0);
            for m0 in (0..m).step_by(mt) {
                let mts = mt.min(m - m0);
                let tile = g.tile();
                for (ki, k0) in (0..k).step_by(kc).enumerate() {
                    let kcs = kc.min(k - k0);
                    g.dma(
                        tile,
                        false,
                        Xrt::In,
                        (m0 * k + k0) * e,
                        al,
                        kcs * e,
                        mts,
                        k * e,
                        kcs * e,
                    );
                    let wb = kcs * nts * e;
                    g.dma(
                        tile,
                        false,
                        Xrt::Const,
                        wtab[nb * nk + ki],
                        bl,
                        wb,
                        1,
                        wb,
                        wb,
                    );
                    let words = [
                        self.elem.code(),
                        (ki == 0) as u32,
                        al as u32,
                        bl as u32,
                        acc as u32,
                        mts as u32,
                        kcs as u32,
                        nts as u32,
                        xzp as u32,
                    ];
                    g.compute(
                        tile,
                        Kernel::Gemm,
                        0,
                        &words,
                        (mts * kcs * nts) as u64,
                        self.elem,
                    );
                }
                let bb = nts * 4;
                g.dma(
                    tile,
                    false,
                    Xrt::Const,
                    bias_at + n0 * 4,
                    bias,
                    bb,
                    1,
                    bb,
                    bb,
                );
                if int8 {
                    g.dma(
                        tile,
                        false,
                        Xrt::Const,
                        scale_at + n0 * 4,
                        bias + a64(nt * 4),
                        bb,
                        1,
                        bb,
                        bb,
                    );
                }
                if self.residual {
                    g.dma(
                        tile,
                        false,
                        Xrt::In,
                        res_at + (m0 * n + n0) * 4,
                        res,
                        nts * 4,
                        mts,
                        n * 4,
                        nts * 4,
                    );
                }
                let out_l = if int8 { outl } else { acc };
                let blkd = EpilogueBlock {
                    acc,
                    bias,
                    scale: bias + a64(nt * 4),
                    res,
                    out: out_l,
                    rows: mts,
                    cols: nts,
                    per_col: true,
                };
                g.epilogue(
                    tile,
                    self.elem,
                    self.act,
                    self.requant.as_ref(),
                    self.residual,
                    &blkd,
                );
                g.dma(
                    tile,
                    true,
                    Xrt::Out,
                    (m0 * n + n0) * e,
                    out_l,
                    nts * e,
                    mts,
                    n * e,
                    nts * e,
                );
                g.sync(tile);
            }
        }
        g.finish()
    }
}
