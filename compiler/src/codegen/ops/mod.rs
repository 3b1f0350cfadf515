//! Kernel body generators, one file per op family (mirroring `ir/ops`): `gemm` (all matrix products),
//! `conv` (im2col), `elementwise`, `pool`, `nn` (softmax, normalisations, LRN, resampling), `reduce` and `data`
//! (copies, transpose, concat, index maps, gather, cast).

pub mod conv;
pub mod data;
pub mod elementwise;
pub mod gemm;
pub mod nn;
pub mod pool;
pub mod reduce;
