//! Kernel body generators, one file per op family (mirroring `ir/ops`): `gemm` (all matrix products),
//! `conv` (im2col), `elementwise`, `pool`, `nn` (softmax) and `data` (copies, transpose, concat).

pub mod conv;
pub mod data;
pub mod elementwise;
pub mod gemm;
pub mod nn;
pub mod pool;
