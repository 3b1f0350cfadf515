//! Convolution cases of the kernel test macro (`bundlec_tests::kernel_case::case`): every padding side,
//! strides, dilations and groups, depthwise planes in each of their modes (edge rows, padded, split, interior),
//! the channel-blocked and direct kernels and Winograd, each compiled, linked and run once per kernel variant
//! against `bundlec::ir::ops::eval`.

use bundlec::ir::ops;
use bundlec_tests::kernel_case::{case, ints};
use bundlec_tests::onnx::Attr;

/// (name, x, w, pads t l b r, strides, dilations, group)
type ConvCase = (
    &'static str,
    [usize; 4],
    [usize; 4],
    [usize; 4],
    [usize; 2],
    [usize; 2],
    usize,
);

#[test]
fn conv_shapes_pads_strides_groups() {
    use bundlec::ir::{ConvAttrs, Epilogue, Op};
    // (name, x, w, pads t l b r, strides, dilations, group)
    let cases: &[ConvCase] = &[
        (
            "c1",
            [1, 3, 5, 7],
            [5, 3, 3, 3],
            [1, 1, 1, 1],
            [1, 1],
            [1, 1],
            1,
        ),
        (
            "c2",
            [2, 2, 9, 6],
            [9, 2, 3, 2],
            [0, 2, 1, 0],
            [2, 1],
            [1, 2],
            1,
        ),
        (
            "c3",
            [1, 6, 8, 8],
            [6, 1, 3, 3],
            [1, 1, 1, 1],
            [2, 2],
            [1, 1],
            6,
        ),
        // Atrous 3x3s past the plane (`passes/trim_taps.rs`): dilation 7 over 6x6 reads only the centre tap (a
        // 1x1 remains); dilation (2, 5) over 5x9 keeps the 3 rows and drops the left and right columns of one
        // row of taps with uneven pads.
        (
            "atrous_centre",
            [1, 5, 6, 6],
            [4, 5, 3, 3],
            [7, 7, 7, 7],
            [1, 1],
            [7, 7],
            1,
        ),
        (
            "atrous_rows",
            [1, 3, 5, 9],
            [4, 3, 3, 3],
            [2, 9, 2, 10],
            [1, 1],
            [2, 9],
            1,
        ),
        // Wide rows through im2col's AVX-512 strided row copy: stride 2 (two-vector steps and a masked tail of
        // 6), stride 1 (pair, single, tail of 2), and a first-layer 7x7 at stride 2 with pads 3.
        (
            "im2col_s2",
            [1, 3, 9, 75],
            [4, 3, 3, 3],
            [1, 1, 1, 1],
            [2, 2],
            [1, 1],
            1,
        ),
        (
            "im2col_s1",
            [1, 2, 5, 50],
            [3, 2, 3, 3],
            [1, 1, 1, 1],
            [1, 1],
            [1, 1],
            1,
        ),
        (
            "im2col_7x7",
            [1, 3, 20, 37],
            [8, 3, 7, 7],
            [3, 3, 3, 3],
            [2, 2],
            [1, 1],
            1,
        ),
        // At least 256 output pixels: weights packed in 8-row panels on micro-kernel targets, with a padded last
        // panel (13 rows) and per-group padding (two groups of 5 rows).
        (
            "packed",
            [1, 4, 18, 20],
            [13, 4, 3, 3],
            [1, 1, 1, 1],
            [1, 1],
            [1, 1],
            1,
        ),
        (
            "packed_groups",
            [1, 6, 16, 16],
            [10, 3, 3, 3],
            [1, 1, 1, 1],
            [1, 1],
            [1, 1],
            2,
        ),
        // Winograd F(2x2, 3x3) on AVX-512 (3x3, stride 1, >= 16 channels in and out, 16 to 31 4x4 tiles): even and odd
        // output sizes (a one-row last tile row, masked columns), batch 2, pads 0 and asymmetric pads up to 2.
        (
            "wino_even",
            [1, 16, 16, 16],
            [16, 16, 3, 3],
            [1, 1, 1, 1],
            [1, 1],
            [1, 1],
            1,
        ),
        (
            "wino_odd",
            [1, 17, 13, 15],
            [20, 17, 3, 3],
            [1, 1, 1, 1],
            [1, 1],
            [1, 1],
            1,
        ),
        (
            "wino_batch_nopad",
            [2, 16, 14, 18],
            [16, 16, 3, 3],
            [0, 0, 0, 0],
            [1, 1],
            [1, 1],
            1,
        ),
        (
            "wino_asym",
            [1, 24, 9, 37],
            [32, 24, 3, 3],
            [2, 1, 0, 2],
            [1, 1],
            [1, 1],
            1,
        ),
        // F(4x4, 3x3) (>= 32 tiles of 4x4, at most 3/4 of F(2x2)'s multiply-adds): a multiple of 4, heights
        // leaving 3 and 1 rows and widths 2 and 3 columns in the last tile, asymmetric pads, batch 2 with the
        // GEMM per ξ transposed (98 tiles, 64 output channels).
        (
            "wino4_even",
            [1, 16, 24, 24],
            [16, 16, 3, 3],
            [1, 1, 1, 1],
            [1, 1],
            [1, 1],
            1,
        ),
        (
            "wino4_odd",
            [1, 17, 27, 30],
            [20, 17, 3, 3],
            [1, 1, 1, 1],
            [1, 1],
            [1, 1],
            1,
        ),
        (
            "wino4_asym",
            [1, 24, 21, 37],
            [32, 24, 3, 3],
            [2, 1, 0, 2],
            [1, 1],
            [1, 1],
            1,
        ),
        (
            "wino4_transposed_batch",
            [2, 16, 28, 27],
            [64, 16, 3, 3],
            [1, 1, 1, 1],
            [1, 1],
            [1, 1],
            1,
        ),
        // Tile counts that fill 32-column blocks badly (49; 16, a 7x7 plane; 2 x 49 = 98) with a multiple of 32
        // output channels; with K >= 128 (`TRANSPOSED_MIN_K`) the GEMM per ξ is computed transposed and the
        // block-transposing kernel writes M back, and the input transform writes V in the GEMM's row panels
        // (56 tiles: two panels over the batch of 2; 8 tiles for a 7x7 plane's 16).
        (
            "wino_transposed",
            [1, 32, 14, 14],
            [32, 32, 3, 3],
            [1, 1, 1, 1],
            [1, 1],
            [1, 1],
            1,
        ),
        (
            "wino_panels_batch",
            [2, 128, 14, 14],
            [64, 128, 3, 3],
            [1, 1, 1, 1],
            [1, 1],
            [1, 1],
            1,
        ),
        (
            "wino_panels_7x7",
            [1, 128, 7, 7],
            [64, 128, 3, 3],
            [1, 1, 1, 1],
            [1, 1],
            [1, 1],
            1,
        ),
        (
            "wino_16_tiles",
            [1, 32, 7, 7],
            [64, 32, 3, 3],
            [1, 1, 1, 1],
            [1, 1],
            [1, 1],
            1,
        ),
        (
            "wino_transposed_batch",
            [2, 16, 13, 13],
            [64, 16, 3, 3],
            [1, 1, 1, 1],
            [1, 1],
            [1, 1],
            1,
        ),
        // Convs on narrow planes with a multiple of 32 output channels: computed transposed on AVX-512 (pixels
        // as GEMM rows) and written back by the 16x16 block-transposing epilogue; batch 2, 196 pixels.
        (
            "transposed_7x7",
            [1, 40, 7, 7],
            [64, 40, 1, 1],
            [0, 0, 0, 0],
            [1, 1],
            [1, 1],
            1,
        ),
        (
            "transposed_batch",
            [2, 24, 14, 14],
            [32, 24, 1, 1],
            [0, 0, 0, 0],
            [1, 1],
            [1, 1],
            1,
        ),
        // Two column blocks or more: A packed in row panels first (`Body::PackRows`; 196 pixels, the last panel
        // of 4 rows zero-padded, two batches); transposed_7x7 and transposed_3x3 pack too.
        (
            "transposed_packed_batch",
            [2, 24, 14, 14],
            [64, 24, 1, 1],
            [0, 0, 0, 0],
            [1, 1],
            [1, 1],
            1,
        ),
        // 3x3 ones transposed too (im2col columns read transposed, weights in 32-column panels): stride 1 with
        // K = 360 (a full and a tail K block; no pads, so 3x3 tiles, too few for Winograd), stride 2 from 14x14
        // with asymmetric pads.
        (
            "transposed_3x3",
            [1, 40, 7, 7],
            [64, 40, 3, 3],
            [0, 0, 0, 0],
            [1, 1],
            [1, 1],
            1,
        ),
        (
            "transposed_3x3_s2",
            [1, 24, 14, 14],
            [32, 24, 3, 3],
            [1, 0, 0, 1],
            [2, 2],
            [1, 1],
            1,
        ),
        // Depthwise (direct kernel): vector interior, asymmetric pads, dilation, 5x5, no interior at all.
        (
            "dw1",
            [2, 5, 9, 23],
            [5, 1, 3, 3],
            [1, 1, 1, 1],
            [1, 1],
            [1, 1],
            5,
        ),
        (
            "dw2",
            [1, 3, 10, 17],
            [3, 1, 3, 3],
            [0, 2, 1, 0],
            [1, 1],
            [2, 2],
            3,
        ),
        (
            "dw3",
            [1, 4, 12, 13],
            [4, 1, 5, 5],
            [2, 2, 2, 2],
            [2, 2],
            [1, 1],
            4,
        ),
        (
            "dw4",
            [1, 2, 3, 2],
            [2, 1, 3, 3],
            [2, 2, 2, 2],
            [1, 1],
            [1, 1],
            2,
        ),
        // Wide stride-1 rows: the AVX-512 row kernel's four-vector steps, single vectors and masked tails.
        (
            "dw6",
            [1, 3, 6, 70],
            [3, 1, 5, 5],
            [2, 2, 2, 2],
            [1, 1],
            [1, 1],
            3,
        ),
        (
            "dw7",
            [1, 2, 7, 101],
            [2, 1, 3, 3],
            [2, 1, 2, 3],
            [1, 1],
            [2, 2],
            2,
        ),
        (
            "dw8",
            [1, 3, 9, 80],
            [3, 1, 3, 3],
            [1, 1, 1, 1],
            [2, 2],
            [1, 1],
            3,
        ),
        (
            "dw9",
            [1, 2, 8, 75],
            [2, 1, 5, 5],
            [1, 2, 2, 1],
            [2, 2],
            [1, 1],
            2,
        ),
        (
            "dw5",
            [1, 7, 8, 9],
            [7, 1, 3, 3],
            [0, 0, 0, 0],
            [1, 2],
            [1, 1],
            7,
        ),
        // A padded plane at stride 2 (5x5 on 28x28): one row-kernel call runs every output row.
        (
            "dw_padded_s2",
            [1, 3, 28, 28],
            [3, 1, 5, 5],
            [2, 2, 2, 2],
            [2, 2],
            [1, 1],
            3,
        ),
        // Bordered on every side, 5x5 at stride 1 with 37 outputs a row: edge rows on AVX2 too (more than 32
        // outputs; `depthwise_avx2_edge.rs`, the last vector's five outputs masked and reaching past the row).
        (
            "dw_edge_s1",
            [1, 3, 37, 37],
            [3, 1, 5, 5],
            [2, 2, 2, 2],
            [1, 1],
            [1, 1],
            3,
        ),
        // Bordered only on top and left (the bottom and right pads are never reached) with a small border:
        // on AVX-512 and AVX2 whole rows with the left padding masked in the row kernel (`depthwise::edge_rows`).
        (
            "dw_left_s2",
            [1, 2, 96, 96],
            [2, 1, 3, 3],
            [1, 1, 1, 1],
            [2, 2],
            [1, 1],
            2,
        ),
        // Bordered only at the bottom and right (TensorFlow's SAME at stride 2): the last rows from a zeroed
        // buffer, the last column masked in the row kernel's tail (45 outputs: 13 in the tail).
        (
            "dw_right_s2",
            [1, 2, 90, 90],
            [2, 1, 3, 3],
            [0, 0, 1, 1],
            [2, 2],
            [1, 1],
            2,
        ),
        // Channel-blocked depthwise (AVX-512, planes up to 14x14, 16 channels per vector): 5x5, stride 2 with
        // asymmetric pads and a batch, a rectangular kernel with mixed strides, a plane past one 16-pixel block.
        // The `small` ones (outputs of at most 64 pixels) take the AVX2 kernel too.
        (
            "dwc16_small_5x5",
            [1, 32, 7, 7],
            [32, 1, 5, 5],
            [2, 2, 2, 2],
            [1, 1],
            [1, 1],
            32,
        ),
        (
            "dwc16_small_s2",
            [2, 16, 14, 14],
            [16, 1, 3, 3],
            [0, 0, 1, 1],
            [2, 2],
            [1, 1],
            16,
        ),
        (
            "dwc16_small_rect",
            [1, 48, 9, 13],
            [48, 1, 3, 5],
            [1, 2, 1, 2],
            [1, 2],
            [1, 1],
            48,
        ),
        (
            "dwc16_14",
            [1, 16, 14, 14],
            [16, 1, 3, 3],
            [1, 1, 1, 1],
            [1, 1],
            [1, 1],
            16,
        ),
        (
            "c4",
            [1, 4, 6, 5],
            [6, 2, 1, 1],
            [0, 0, 0, 0],
            [1, 1],
            [1, 1],
            2,
        ),
        (
            "c5",
            [1, 13, 4, 3],
            [17, 13, 1, 1],
            [0, 0, 0, 0],
            [1, 1],
            [1, 1],
            1,
        ),
        (
            "c6",
            [1, 1, 11, 11],
            [3, 1, 7, 7],
            [3, 3, 3, 3],
            [2, 2],
            [1, 1],
            1,
        ),
        // Direct convolution of few-channel inputs (AVX2 and AVX-512, M a multiple of 16): a 7x7 stride-2 stem with
        // asymmetric pads and a batch (rows past one 16-pixel block and a tail), dilation 2 at stride 1, and an
        // unpadded input read in place with mixed strides.
        (
            "direct_stem",
            [2, 3, 23, 37],
            [32, 3, 7, 7],
            [3, 3, 2, 3],
            [2, 2],
            [1, 1],
            1,
        ),
        (
            "direct_dilated",
            [1, 2, 9, 20],
            [16, 2, 3, 3],
            [1, 0, 1, 2],
            [1, 1],
            [2, 2],
            1,
        ),
        (
            "direct_in_place",
            [1, 4, 10, 19],
            [16, 4, 3, 3],
            [0, 0, 0, 0],
            [1, 2],
            [1, 1],
            1,
        ),
        // Direct convolution of a strided 3x3 with many channels (`strided_direct`): 30 output pixels per row,
        // one full 16-pixel block and a masked one, asymmetric pads, a batch.
        (
            "direct_strided",
            [2, 20, 13, 59],
            [32, 20, 3, 3],
            [1, 0, 1, 1],
            [2, 2],
            [1, 1],
            1,
        ),
        // The AVX2 column strip (a GEMM's last 1-4 columns, A read in place): 49 pixels (one past two 24-column
        // tiles) with K = 19 (four-block steps, a K tail of 3) and 5 panels (a whole chunk and one more), a 3x3
        // im2col onto 7x7, two, three and four columns past the tiles, and a GEMM narrower than one tile.
        (
            "strip_7x7",
            [1, 19, 7, 7],
            [40, 19, 1, 1],
            [0, 0, 0, 0],
            [1, 1],
            [1, 1],
            1,
        ),
        (
            "strip_3x3",
            [1, 8, 9, 9],
            [16, 8, 3, 3],
            [0, 0, 0, 0],
            [1, 1],
            [1, 1],
            1,
        ),
        (
            "strip_c2",
            [1, 12, 5, 10],
            [8, 12, 1, 1],
            [0, 0, 0, 0],
            [1, 1],
            [1, 1],
            1,
        ),
        (
            "strip_c3",
            [1, 20, 3, 9],
            [32, 20, 1, 1],
            [0, 0, 0, 0],
            [1, 1],
            [1, 1],
            1,
        ),
        (
            "strip_14x14",
            [1, 37, 14, 14],
            [24, 37, 1, 1],
            [0, 0, 0, 0],
            [1, 1],
            [1, 1],
            1,
        ),
        (
            "strip_narrow",
            [1, 16, 2, 2],
            [16, 16, 1, 1],
            [0, 0, 0, 0],
            [1, 1],
            [1, 1],
            1,
        ),
        (
            "micro_tiles_and_tails",
            [1, 16, 19, 21],
            [27, 16, 3, 3],
            [1, 1, 1, 1],
            [1, 1],
            [1, 1],
            1,
        ),
    ];
    for (name, x, w, p, s, d, g) in cases {
        let attrs = ConvAttrs {
            kernel: [w[2], w[3]],
            strides: *s,
            pads: *p,
            dilations: *d,
            group: *g,
            has_bias: true,
            epilogue: Epilogue::default(),
        };
        let shapes = [
            (bundlec::ir::DType::F32, &x[..]),
            (bundlec::ir::DType::F32, &w[..]),
            (bundlec::ir::DType::F32, &[w[0]][..]),
        ];
        let out = ops::infer(&Op::Conv(attrs.clone()), &shapes).expect("infer")[0]
            .1
            .clone();
        let onnx_attrs = vec![
            ("pads", ints(&p.map(|v| v as i64))),
            ("strides", ints(&s.map(|v| v as i64))),
            ("dilations", ints(&d.map(|v| v as i64))),
            ("group", Attr::Int(*g as i64)),
        ];
        case(
            &format!("conv_{name}"),
            "Conv",
            onnx_attrs,
            &[("x", x.to_vec())],
            &[("w", w.to_vec()), ("b", vec![w[0]])],
            &Op::Conv(attrs),
            &out,
        );
    }
}
