//! Kernel body generators, one file per op family (mirroring `ir/ops`): `gemm` (all f32 matrix products;
//! `gemm_bf16` those `--precision bf16` runs in bf16),
//! `conv` (im2col), `elementwise`, `pool`, `nn` (softmax, normalisations, LRN, resampling), `reduce` and `data`
//! (copies, transpose, concat, index maps, gather, cast), `logic` (comparisons, logical ops, Where), and the int8
//! family: `quant` (QuantizeLinear / DequantizeLinear) and `qgemm` (QConv, QMatMul; `qgemm_vnni` on AVX-512 VNNI), `qdepthwise`
//! and `qpool` (integer max pooling);
//! `winograd`: the F(2x2, 3x3) and F(4x4, 3x3) convolutions' transforms (AVX-512); `plane`: the padded stack
//! planes the row-kernel paths (depthwise, max pooling, Winograd) share.

pub mod conv;
pub mod data;
pub mod depthwise;
pub mod depthwise_plane;
pub mod elementwise;
pub mod gemm;
pub mod gemm_bf16;
pub mod logic;
pub mod nn;
pub mod plane;
pub mod pool;
pub mod qconv_implicit;
pub mod qdepthwise;
pub mod qgemm;
pub mod qgemm_vnni;
pub mod qpool;
pub mod quant;
pub mod reduce;
pub mod winograd;
