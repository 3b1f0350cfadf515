//! Machine-code kernels, assembled at compile time for the target's ISA and placed in the bundle's object beside
//! the Cranelift functions. `gemm_x86.rs`: the AVX2 and AVX-512 GEMM micro-kernels that the Cranelift GEMM kernel
//! calls for every full tile; `qgemm_x86.rs`: the AVX2 and AVX-512 VNNI micro-kernels of the integer GEMM;
//! `quant_x86.rs`: the AVX-512 QAdd and int8 depthwise row kernels; `depthwise_x86.rs` and `depthwise_avx2.rs`: the
//! AVX-512 and AVX2 f32 depthwise row kernels (the AVX-512 one also max pooling); `copy_x86.rs`: the AVX-512 strided row copy of im2col; `cpu_check.rs`: the exported `NAME_cpu_supported`. Here: the AVX-512 pieces several kernels share
//! (a broadcast constant, the NaN-keeping clamp). Every other target keeps the Cranelift kernels.

pub mod copy_x86;
pub mod cpu_check;
pub mod depthwise_avx2;
pub mod depthwise_x86;
pub mod gemm_x86;
pub mod qgemm_x86;
pub mod quant_x86;
pub mod winograd_x86;

use iced_x86::code_asm::{eax, k2, AsmRegisterZmm, CodeAssembler};
use iced_x86::IcedError;

/// Broadcasts the 32-bit pattern `bits` (an f32's bits or an integer) into every lane of `reg`, through `eax`.
pub(crate) fn broadcast_bits(
    a: &mut CodeAssembler,
    reg: AsmRegisterZmm,
    bits: u32,
) -> Result<(), IcedError> {
    a.mov(eax, bits)?;
    a.vpbroadcastd(reg, eax)
}

/// Clamps `x` to the registers `lo` / `hi` (broadcast bounds) with `vmaxps`/`vminps`, keeping NaN: `k2` marks the
/// unordered lanes (clobbered) and `save` holds `x` to blend back there. With bounds that are not signed zeros
/// this rounds as Cranelift's `fmax`/`fmin` (see `machine_code::clamp_bits`).
pub(crate) fn clamp_keep_nan(
    a: &mut CodeAssembler,
    x: AsmRegisterZmm,
    lo: Option<AsmRegisterZmm>,
    hi: Option<AsmRegisterZmm>,
    save: AsmRegisterZmm,
) -> Result<(), IcedError> {
    if lo.is_none() && hi.is_none() {
        return Ok(());
    }
    a.vcmpps(k2, x, x, 3)?;
    a.vmovaps(save, x)?;
    if let Some(lo) = lo {
        a.vmaxps(x, x, lo)?;
    }
    if let Some(hi) = hi {
        a.vminps(x, x, hi)?;
    }
    a.vmovaps(x.k2(), save)
}
