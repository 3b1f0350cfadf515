//! Convolution kernels' geometry: `im2col` and `col2im` (the GEMM formulation and ConvTranspose's fold), the
//! row packing of a transposed GEMM's A, Winograd F(2x2)/F(4x4) transforms, and the direct convolution of
//! few-channel inputs (`x86/conv_direct`).

use crate::ir::Activation;

/// Geometry of one im2col: input [N, C, H, W] → columns [N, C*KH*KW, OH*OW].
#[derive(Debug, Clone, PartialEq)]
pub struct Im2colSpec {
    /// Batch.
    pub n: usize,
    /// Input channels.
    pub c: usize,
    /// Input height and width.
    pub hw: [usize; 2],
    /// Kernel (KH, KW).
    pub kernel: [usize; 2],
    /// Strides.
    pub strides: [usize; 2],
    /// Dilations.
    pub dilations: [usize; 2],
    /// Pads top, left (bottom/right are implied by the output size).
    pub pads: [usize; 2],
    /// Output height and width.
    pub out: [usize; 2],
    /// `None`: f32 elements padded with 0; `Some(z)`: u8 / i8 elements padded with the byte `z` (the int8
    /// path pads with the input zero point, which contributes nothing to the integer sums).
    pub bytes: Option<u8>,
}

impl Im2colSpec {
    /// Work units: one per (batch, channel, kernel row, part of the output rows), so that a first layer (3
    /// channels) still splits over threads (ResNet-50's 7x7 stem: 21 units; the direct stem's 1x1 pad pass, 3
    /// planes, 15 in row parts).
    pub fn units(&self) -> usize {
        self.n * self.c * self.kernel[0] * self.row_parts()
    }
    /// Parts the output rows of a column row are split into: enough for `MIN_UNITS` units when (batch, channel,
    /// kernel row) alone give fewer (at 2 threads the direct stem's 3-plane pad pass took 17-23 µs on one thread
    /// while the other waited); 1 otherwise.
    pub fn row_parts(&self) -> usize {
        let base = (self.n * self.c * self.kernel[0]).max(1);
        if base >= MIN_UNITS {
            1
        } else {
            MIN_UNITS.div_ceil(base).min(self.out[0]).max(1)
        }
    }
    /// Element size in bytes.
    pub fn elem(&self) -> usize {
        if self.bytes.is_some() {
            1
        } else {
            4
        }
    }
    /// Size of the column buffer in bytes.
    pub fn col_bytes(&self) -> usize {
        self.n * self.c * self.kernel[0] * self.kernel[1] * self.out[0] * self.out[1] * self.elem()
    }
}

/// Least work units of an im2col kernel (`Im2colSpec::row_parts`).
const MIN_UNITS: usize = 16;

/// Geometry of one col2im (the second half of ConvTranspose): columns [N, M*KH*KW, H*W] (the GEMM Wᵀ·X) are
/// added into the output [N, M, OH, OW] at `o = i·stride + k·dilation − pad`, after the bias (or zero).
#[derive(Debug, Clone, PartialEq)]
pub struct Col2imSpec {
    /// Batch.
    pub n: usize,
    /// Output channels.
    pub m: usize,
    /// Input (column) height and width.
    pub hw: [usize; 2],
    /// Kernel (KH, KW).
    pub kernel: [usize; 2],
    /// Strides.
    pub strides: [usize; 2],
    /// Dilations.
    pub dilations: [usize; 2],
    /// Pads top, left.
    pub pads: [usize; 2],
    /// Output height and width.
    pub out: [usize; 2],
    /// Whether arg 1 is a bias \[M\] (the output is then arg 2).
    pub has_bias: bool,
}

/// The panels per batch and the parts each panel's K is split into (`emit_pack_rows`): `(panels, parts)`, one
/// unit per batch, panel and part.
pub fn pack_rows_units([n, k, p]: [usize; 3], panel: usize) -> (usize, usize) {
    let panels = p.div_ceil(panel.max(1));
    let parts = PACK_MIN_UNITS
        .div_ceil((n * panels).max(1))
        .clamp(1, k.max(1));
    // Parts of equal depth (the last one shorter), none empty.
    let parts = k.div_ceil(k.div_ceil(parts).max(1)).max(1);
    (panels, parts)
}

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

/// The compile-time shape of a direct convolution (one group).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct ConvDirect {
    /// Input channels.
    pub c: usize,
    /// Output channels, a multiple of 16.
    pub m: usize,
    /// The padded input plane `[Hp, Wp]` (`padded_plane`).
    pub padded: [usize; 2],
    /// Kernel (KH, KW).
    pub kernel: [usize; 2],
    /// Strides.
    pub strides: [usize; 2],
    /// Dilations.
    pub dilations: [usize; 2],
    /// Output height and width.
    pub out: [usize; 2],
    /// Whether `bias` holds the M biases (else the chains end without an add).
    pub bias: bool,
    /// Lower clamp (f32 bits).
    pub lo: Option<u32>,
    /// Upper clamp (f32 bits).
    pub hi: Option<u32>,
}

impl ConvDirect {
    /// The padded input plane a convolution's outputs read (`reach` per axis).
    pub fn padded_plane(
        out: [usize; 2],
        kernel: [usize; 2],
        strides: [usize; 2],
        dilations: [usize; 2],
    ) -> [usize; 2] {
        [0, 1].map(|i| reach(out[i], kernel[i].max(1), strides[i], dilations[i]))
    }
}

/// Units a row-panel packing (`Body::PackRows`) aims for: a 7x7 plane is one 56-row panel, whose K is then
/// split into parts so that both cores (and more) share it.
const PACK_MIN_UNITS: usize = 8;

/// `floats`, plus a cache line of floats when `pad` and `floats` is a multiple of 2 KiB (`v_stride`).
fn padded(floats: usize, pad: bool) -> usize {
    if pad && floats.is_multiple_of(512) {
        floats + 16
    } else {
        floats
    }
}

/// Rows a window of `kernel` taps at `stride` and `dilation` spans for `out` outputs: the padded extent an
/// output row or column reads.
pub fn reach(out: usize, kernel: usize, stride: usize, dilation: usize) -> usize {
    (out.max(1) - 1) * stride + (kernel - 1) * dilation + 1
}

/// F(2x2, 3x3)'s weight transform.
const G2: [[f64; 3]; 4] = [
    [1.0, 0.0, 0.0],
    [0.5, 0.5, 0.5],
    [0.5, -0.5, 0.5],
    [0.0, 0.0, 1.0],
];

/// F(4x4, 3x3)'s weight transform (points 0, ±1, ±2 and ∞, matching `x86/winograd4_x86.rs`' `Bᵀ`, `Aᵀ`).
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
