//! Machine-code kernels, assembled at compile time for the target's ISA and placed in the bundle's object beside
//! the Cranelift functions. `gemm_x86.rs`: the AVX2 and AVX-512 GEMM micro-kernels that the Cranelift GEMM kernel
//! calls for every full tile; `qgemm_x86.rs`: the AVX2 and AVX-512 VNNI micro-kernels of the integer GEMM;
//! `quant_x86.rs`: the AVX-512 QAdd and int8 depthwise row kernels; `depthwise_x86.rs`: the AVX-512 f32 depthwise
//! row kernel;
//! `cpu_check.rs`: the exported `NAME_cpu_supported`. Every other target keeps the
//! Cranelift kernels.

pub mod cpu_check;
pub mod depthwise_x86;
pub mod gemm_x86;
pub mod qgemm_x86;
pub mod quant_x86;
