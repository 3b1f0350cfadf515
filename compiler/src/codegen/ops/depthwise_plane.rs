//! How the depthwise row kernels meet a plane's border (`plane_mode`): edge rows (whole rows from the input,
//! the padding masked in the kernel, stack buffers for the rows above and below), a zero-padded stack
//! plane where its copy pays (split into even and odd columns at stride 2), or the interior rows and columns
//! with the border on the scalar path. One decision, taken from the shapes alone, that the kernel spec
//! (`machine_code/`), the row copies (`codegen/mod.rs`) and the driver (`depthwise.rs`) all read.

use crate::kernel::conv::reach;
use crate::kernel::depthwise::DepthwiseSpec;

/// The zero-padded plane `[rows, cols]` a row kernel runs whole planes on, when the border (outputs with a tap in
/// the padding) costs more than copying the plane and the plane fits 256 KiB of stack. The border path computes
/// an output per scalar step with clamped loads, about 8 instructions per tap; the copy (the machine-code row
/// copy) reads every input once more. Measured on MobileNetV2 (AMD EPYC, AVX-512): padding wins where
/// border·taps exceeds about an eighth of the input plane (112x112 stride 1: 0.32 of it, 56x56 stride 2: 0.16)
/// and loses below (112x112 stride 2: 0.08, whose copy streams a 4.8 MB input once more).
fn padded_plane(s: &DepthwiseSpec) -> Option<[usize; 2]> {
    let [oh, ow] = s.out;
    let (y0, y1) = interior(
        s.hw[0],
        oh,
        s.kernel[0],
        s.strides[0],
        s.dilations[0],
        s.pads[0],
    );
    let (x0, x1) = interior(
        s.hw[1],
        ow,
        s.kernel[1],
        s.strides[1],
        s.dilations[1],
        s.pads[1],
    );
    let border = oh * ow - (y1 - y0) * (x1 - x0);
    let rows = reach(oh, s.kernel[0], s.strides[0], s.dilations[0]);
    let cols = reach(ow, s.kernel[1], s.strides[1], s.dilations[1]);
    let taps = s.kernel[0] * s.kernel[1];
    let pays = border * taps * 8 > s.hw[0] * s.hw[1];
    (pays && rows * cols * 4 <= 256 << 10).then_some([rows, cols])
}

/// How the row kernel meets a plane's border (`plane_mode`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PlaneMode {
    /// Interior rows and columns only; the border takes the scalar path.
    Interior,
    /// Edge rows: whole rows from the input, the padding masked in the kernel.
    Edge(EdgeRows),
    /// A zero-padded stack plane `[rows, cols]` per input plane.
    Padded([usize; 2]),
    /// A padded plane at stride 2 (dilation 1 along the row) stored split: each row's even columns, then its
    /// odd ones, loaded deinterleaved (`StackPlane::load_split`) so that the row kernel reads each tap as
    /// contiguous vectors (`DwRowF32::split`).
    Split {
        /// The padded plane `[rows, cols]`.
        dims: [usize; 2],
        /// The column its rows' odd columns start at.
        half: usize,
    },
}

/// The plane mode of a row-kernel depthwise convolution: edge rows where the kernel can take them (no copy of
/// the plane; measured on MobileNetV2 and EfficientNet-Lite0 against the padded plane, AVX-512: 3x3 on 112x112
/// and 56x56 at stride 1 and on 56x56 at stride 2 faster — the last 1.73 → 1.28 % of the run — 5x5 on 56x56 at
/// stride 2 and on 28x28 the same; AVX2 (`depthwise_avx2_edge.rs`, Zen 5, 1 thread, bitwise equal): 3x3 on
/// 112x112 at stride 1 189 → 102 µs, at stride 2 213 → 139 (its scalar border gone), on 56x56 169 → 135, 3x3
/// stride 2 on 56x56 77 → 59 and on 28x28 32 → 27, but rows of at most four vectors at stride 1 — which the
/// padded plane runs several rows per step — 15–50 % slower, and 5x5 stride 2 on 56x56 14 %), else a padded
/// plane where its copy pays (split at stride 2), else the interior with a scalar border.
pub fn plane_mode(s: &DepthwiseSpec, avx512: bool) -> PlaneMode {
    if let Some(e) = edge_rows(s, avx512) {
        return PlaneMode::Edge(e);
    }
    match padded_plane(s) {
        // At stride 2 (dilation 1 along the row) the rows' odd columns follow the `ceil(cols / 2)` even ones.
        Some(dims) if s.strides[1] == 2 && s.dilations[1] == 1 => PlaneMode::Split {
            dims,
            half: dims[1].div_ceil(2),
        },
        Some(dims) => PlaneMode::Padded(dims),
        None => PlaneMode::Interior,
    }
}

/// How an unpadded plane with a border runs whole in the row kernel (`edge_rows`): rows of stack
/// buffers for the output rows with a tap above or below the input (zeroed once, the input rows they need
/// copied in per plane), and the kernel's left padding mask (`DwRowF32::left`) and right one
/// (`DwRowF32::right`) for the columns. No output takes the scalar border path and the plane is not copied
/// (a 112x112 stride-2 plane, whose copy costs more than its border).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EdgeRows {
    /// Rows of the top and bottom buffers (0: none), for the output rows before and after the interior ones
    /// (`interior`).
    pub buffers: [usize; 2],
    /// Whether the row's last outputs reach past its end (`DwRowF32::right`).
    pub right: bool,
}

/// The plan of `EdgeRows` when this convolution can take it: a border, an interior row, buffers within 64 KiB
/// each, and columns the kernel takes — on AVX-512 left padding under 16 columns unless a row has exactly 16
/// outputs (`DwRowF32::right_fits`) and every output reaching past the right end in the row's last step (the
/// masked tail, or the last vector when the row length is a multiple of 16); on AVX2 rows of at most
/// `MAX_COUNT` outputs, more than 32 of them or 3 wide at stride 2.
fn edge_rows(s: &DepthwiseSpec, avx512: bool) -> Option<EdgeRows> {
    let [oh, ow] = s.out;
    let [pt, pl] = s.pads;
    let [kh, kw] = s.kernel;
    let (y0, y1) = interior(s.hw[0], oh, kh, s.strides[0], s.dilations[0], pt);
    let (x0, x1) = interior(s.hw[1], ow, kw, s.strides[1], s.dilations[1], pl);
    let buf = |n: usize| {
        if n == 0 {
            0
        } else {
            reach(n, kh, s.strides[0], s.dilations[0])
        }
    };
    let buffers = [buf(y0), buf(oh - y1)];
    let right = x1 < ow;
    // AVX2 lays every row out at compile time (`depthwise_avx2_edge.rs`), its masks per vector and tap, one
    // row per step: worth it on rows of more than four vectors, and on 3-wide stride-2 rows (see `plane_mode`).
    let columns_fit = if avx512 {
        // The row's last step: the masked tail, or the last vector when ow is a multiple of 16.
        let last = match ow % 16 {
            0 => 16,
            r => r,
        };
        pl < 16 && (pl == 0 || ow != 16) && (!right || (ow >= last && x1 >= ow - last))
    } else {
        ow <= crate::x86::depthwise_avx2_edge::MAX_COUNT
            && (ow > 32 || (s.strides[1] == 2 && kw == 3))
    };
    let ok = (y0 > 0 || y1 < oh || x0 > 0 || right)
        && columns_fit
        && y1 > y0
        && buffers.iter().all(|&r| r * s.hw[1] * 4 <= 64 << 10);
    ok.then_some(EdgeRows { buffers, right })
}

/// Output positions `[lo, hi)` of one axis whose every tap lands inside the input (shared with
/// `qdepthwise.rs`).
pub(crate) fn interior(
    input: usize,
    out: usize,
    k: usize,
    s: usize,
    d: usize,
    p: usize,
) -> (usize, usize) {
    let lo = p.div_ceil(s);
    let span = (k - 1) * d;
    let hi = if input + p > span {
        ((input + p - span - 1) / s + 1).min(out)
    } else {
        0
    };
    (lo.min(out), hi.max(lo.min(out)))
}
