//! Machine-code kernels, assembled at compile time for the target's ISA and placed in the bundle's object beside the
//! Cranelift functions. `gemm_x86.rs`: the AVX2 and AVX-512 GEMM micro-kernels that the Cranelift GEMM kernel calls for
//! every full tile, `gemm_strip_avx2.rs` the AVX2 column strip of a GEMM's last few columns, `gemm_bf16.rs` the AVX-512 BF16
//! GEMM micro-kernel and row converter (`--precision bf16`), `gemm_bf16_amx.rs` its AMX twin; `qgemm_x86.rs`: the AVX2
//! and AVX-512 VNNI micro-kernels of the integer GEMM, `qgemm_amx.rs` the AMX one (`amx.rs`: the tile configuration and
//! stack buffer both AMX kernels share), `qgemv_vnni.rs` the one-row VNNI GEMV; `quant_x86.rs`: the AVX-512 QAdd, int8 depthwise and QuantizeLinear row kernels, `quant_avx2.rs` the
//! AVX2 int8 depthwise row kernel, `qdepthwise_vnni.rs` the VNNI one;
//! `depthwise_x86.rs` and `depthwise_avx2.rs`: the AVX-512 and AVX2 f32 depthwise row kernels (the AVX-512 one also max
//! pooling); `depthwise_c16_x86.rs` and `depthwise_c16_avx2.rs`: the AVX-512 and AVX2 channel-blocked depthwise kernels
//! of small planes; `conv_direct/`: the direct convolution of
//! few-channel inputs; `maxpool_x86.rs` and `maxpool_avx2.rs`: the AVX-512 and AVX2 separable 3x3 stride-2 max pooling;
//! `norm/`: the LayerNorm / RMSNorm rows; `copy_x86.rs`: the strided row copies of
//! im2col; `transpose_out/`: the transposing epilogue of the transposed GEMMs; `block_transpose/`:
//! the gathering Transpose nodes' 2-D block transpose; `winograd_x86.rs` and
//! `winograd4_x86.rs`: the AVX-512 Winograd F(2x2, 3x3) and F(4x4, 3x3) transforms, `winograd_avx2.rs` the AVX2 ones;
//! `cpu_check.rs`: the exported `NAME_cpu_supported`. The pieces several kernels share: `regs.rs` (the register
//! tables, displacements, a broadcast constant, the NaN-keeping clamp, `fmax`), `masks.rs` (tail and column masks),
//! `rows.rs` (the row loop and its multi-row wrappers) and `shuffle.rs` (the 16x16 and 8x8 transposes, the AVX2
//! partial store, the 16-lane weight packing), re-exported here. Every other target keeps the Cranelift kernels.

pub mod amx;
pub mod block_transpose;
pub mod conv_direct;
pub mod copy_x86;
pub mod cpu_check;
pub mod depthwise_avx2;
pub mod depthwise_avx2_edge;
pub mod depthwise_c16_avx2;
pub mod depthwise_c16_x86;
pub mod depthwise_x86;
pub mod gemm_bf16;
pub mod gemm_bf16_amx;
pub mod gemm_fit;
pub mod gemm_strip_avx2;
pub mod gemm_x86;
pub mod isa;
mod masks;
pub mod maxpool_avx2;
pub mod maxpool_x86;
pub mod norm;
pub mod qconv_implicit;
pub mod qconv_transposed;
pub mod qdepthwise_vnni;
pub mod qgemm_amx;
pub mod qgemm_x86;
pub mod qgemv_vnni;
pub mod quant_avx2;
pub mod quant_x86;
mod regs;
mod rows;
mod shuffle;
pub mod softmax_avx2;
pub mod softmax_x86;
#[cfg(all(test, target_arch = "x86_64", target_os = "linux"))]
pub(crate) mod test_exec;
pub mod transpose_out;
pub mod vmath_avx2;
pub mod vmath_x86;
pub mod winograd4_x86;
pub mod winograd_avx2;
pub mod winograd_x86;

pub(crate) use masks::{
    block_mask, column_masks, lane_table, low_mask, tail_masks_ymm, tail_masks_zmm,
};
pub(crate) use regs::{
    broadcast_bits, broadcast_bits_ymm, clamp_bounds, clamp_bounds_ymm, clamp_keep_nan, disp,
    max_into, stack_table_begin, stack_table_end, xmm_of, BoundsYmm, XMM, YMM, ZMM,
};
pub(crate) use rows::{row_groups, row_loop, rows_begin, rows_end};
pub use shuffle::pack16;
pub(crate) use shuffle::{store_head_ymm, transpose16, transpose8_ymm};
