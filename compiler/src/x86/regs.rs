//! The register tables and scalar helpers the machine-code kernels share: the `zmm`/`ymm` registers by number,
//! a `ymm`'s `xmm` half, f32 displacements that must fit an `i32`, a broadcast constant, the clamp bounds and the
//! NaN-keeping clamp, and `fmax` as Cranelift rounds it.

use iced_x86::code_asm::asm_traits::{CodeAsmVaddps, CodeAsmVmaxps, CodeAsmVminps};
use iced_x86::code_asm::{eax, k6, k7, zmm10, zmm9, AsmRegisterYmm, AsmRegisterZmm, CodeAssembler};
use iced_x86::IcedError;

/// The 32 AVX-512 vector registers by number, for kernels that allocate them by index.
pub(crate) const ZMM: [iced_x86::code_asm::AsmRegisterZmm; 32] = {
    use iced_x86::code_asm::*;
    [
        zmm0, zmm1, zmm2, zmm3, zmm4, zmm5, zmm6, zmm7, zmm8, zmm9, zmm10, zmm11, zmm12, zmm13,
        zmm14, zmm15, zmm16, zmm17, zmm18, zmm19, zmm20, zmm21, zmm22, zmm23, zmm24, zmm25, zmm26,
        zmm27, zmm28, zmm29, zmm30, zmm31,
    ]
};

/// The 16 AVX2 vector registers by number.
pub(crate) const YMM: [AsmRegisterYmm; 16] = {
    use iced_x86::code_asm::*;
    [
        ymm0, ymm1, ymm2, ymm3, ymm4, ymm5, ymm6, ymm7, ymm8, ymm9, ymm10, ymm11, ymm12, ymm13,
        ymm14, ymm15,
    ]
};

/// `xmm0..16` (VEX-encodable), the low lanes of the vector registers of the same number.
pub(crate) const XMM: [iced_x86::code_asm::AsmRegisterXmm; 16] = {
    use iced_x86::code_asm::*;
    [
        xmm0, xmm1, xmm2, xmm3, xmm4, xmm5, xmm6, xmm7, xmm8, xmm9, xmm10, xmm11, xmm12, xmm13,
        xmm14, xmm15,
    ]
};

/// The `xmm` half of a `ymm` register.
pub(crate) fn xmm_of(r: AsmRegisterYmm) -> iced_x86::code_asm::AsmRegisterXmm {
    XMM[YMM.iter().position(|&y| y == r).unwrap_or(15)]
}

/// A displacement of `floats` f32 elements in bytes, as an `i32`; an error naming the kernel when it does
/// not fit.
pub(crate) fn disp(kernel: &str, floats: usize) -> Result<i32, String> {
    floats
        .checked_mul(4)
        .and_then(|b| i32::try_from(b).ok())
        .ok_or_else(|| format!("{kernel} displacement out of range: {floats} floats"))
}

/// Broadcasts the 32-bit pattern `bits` (an f32's bits or an integer) into every lane of `reg`, through `eax`.
pub(crate) fn broadcast_bits(
    a: &mut CodeAssembler,
    reg: AsmRegisterZmm,
    bits: u32,
) -> Result<(), IcedError> {
    a.mov(eax, bits)?;
    a.vpbroadcastd(reg, eax)
}

/// [`broadcast_bits`] into a `ymm` (AVX2 has no broadcast from a general register: through the register's own
/// `xmm` half).
pub(crate) fn broadcast_bits_ymm(
    a: &mut CodeAssembler,
    reg: AsmRegisterYmm,
    bits: u32,
) -> Result<(), IcedError> {
    a.mov(eax, bits)?;
    a.vmovd(xmm_of(reg), eax)?;
    a.vbroadcastss(reg, xmm_of(reg))
}

/// A clamp's lower bound for [`clamp_keep_nan`]: its broadcast register and its f32 bits.
pub(crate) type LowerBound = (AsmRegisterZmm, u32);

/// Broadcasts the clamp bounds a kernel has (`lo`, `hi`: f32 bits) into `regs` and returns what
/// [`clamp_keep_nan`] then takes (`None` for a missing bound).
pub(crate) fn clamp_bounds(
    a: &mut CodeAssembler,
    (lo, hi): (Option<u32>, Option<u32>),
    regs: [AsmRegisterZmm; 2],
) -> Result<(Option<LowerBound>, Option<AsmRegisterZmm>), IcedError> {
    for (reg, bound) in regs.into_iter().zip([lo, hi]) {
        if let Some(bits) = bound {
            broadcast_bits(a, reg, bits)?;
        }
    }
    Ok((lo.map(|b| (regs[0], b)), hi.map(|_| regs[1])))
}

/// The `ymm` clamp bounds [`clamp_keep_nan`] takes: the lower bound's register with its f32 bits, the upper's.
pub(crate) type BoundsYmm = (Option<(AsmRegisterYmm, u32)>, Option<AsmRegisterYmm>);

/// [`clamp_bounds`] into `ymm` registers.
pub(crate) fn clamp_bounds_ymm(
    a: &mut CodeAssembler,
    (lo, hi): (Option<u32>, Option<u32>),
    regs: [AsmRegisterYmm; 2],
) -> Result<BoundsYmm, IcedError> {
    for (reg, bound) in regs.into_iter().zip([lo, hi]) {
        if let Some(bits) = bound {
            broadcast_bits_ymm(a, reg, bits)?;
        }
    }
    Ok((lo.map(|b| (regs[0], b)), hi.map(|_| regs[1])))
}

/// Clamps `x` to the registers `lo` / `hi` (broadcast bounds; `lo` with its f32 bits) with `vmaxps` /
/// `vminps`, keeping NaN: each takes the bound first, so a NaN `x` (the second source) is what it returns,
/// unchanged. A lower bound of +0 then takes a `vaddps` of it, which turns a −0 that `vmaxps` kept into +0 and
/// changes nothing else (`x + 0 = x`, NaN included: no kernel clamps a signaling NaN). Two or three
/// instructions where a compare, a save and a blend around the pair took five, with the same results. With
/// bounds that are not signed zeros this rounds as Cranelift's `fmax`/`fmin` (see `kernel::gemm::clamp_bits`,
/// which refuses a lower bound of −0 and an upper one of ±0).
/// The same on `zmm` (AVX-512) and `ymm` (AVX2) registers.
pub(crate) fn clamp_keep_nan<R: Copy>(
    a: &mut CodeAssembler,
    x: R,
    lo: Option<(R, u32)>,
    hi: Option<R>,
) -> Result<(), IcedError>
where
    CodeAssembler: CodeAsmVmaxps<R, R, R> + CodeAsmVminps<R, R, R> + CodeAsmVaddps<R, R, R>,
{
    if let Some((lo, _)) = lo {
        a.vmaxps(x, lo, x)?;
    }
    if let Some(hi) = hi {
        a.vminps(x, hi, x)?;
    }
    if let Some((lo, 0)) = lo {
        a.vaddps(x, x, lo)?;
    }
    Ok(())
}

/// `acc = fmax(acc, x)` as Cranelift's `fmax`: `vmaxps`, then lanes where the operands compare equal take
/// `acc & x` (so +0 beats −0 in either order) and unordered lanes `acc + x` (a NaN). Clobbers zmm9, zmm10, k6,
/// k7 (the depthwise row kernel's max mode and the separable max pooling keep them free).
pub(crate) fn max_into(
    a: &mut CodeAssembler,
    acc: AsmRegisterZmm,
    x: AsmRegisterZmm,
) -> Result<(), IcedError> {
    a.vcmpps(k6, acc, x, 3)?;
    a.vcmpps(k7, acc, x, 0)?;
    a.vaddps(zmm10, acc, x)?;
    a.vpandd(zmm9, acc, x)?;
    a.vmaxps(acc, acc, x)?;
    a.vmovaps(acc.k7(), zmm9)?;
    a.vmovaps(acc.k6(), zmm10)
}

#[cfg(all(test, target_arch = "x86_64", target_os = "linux"))]
mod tests {
    use super::super::test_exec::{clamp, exec, skip_without_avx512};
    use super::*;
    use iced_x86::code_asm::{rdi, rsi, zmm0, zmm1, zmm2, zmmword_ptr};

    /// `clamp_keep_nan` against the kernels' reference clamp, bitwise: NaNs (payloads kept), both zeros, the
    /// infinities, denormals and values at the bounds, under every kind of bound `clamp_bits` lets through.
    #[test]
    fn clamp_keeps_nan_and_the_bounds_zero() {
        if skip_without_avx512("NaN-keeping clamp") {
            return;
        }
        type F = extern "sysv64" fn(*const f32, *mut f32);
        let xs: [f32; 16] = [
            f32::NAN,
            -0.0,
            0.0,
            -1.0,
            3.0,
            7.0,
            6.0,
            f32::INFINITY,
            f32::NEG_INFINITY,
            1e-40,
            -1e-40,
            0.5,
            -f32::NAN,
            f32::from_bits(0x7fc1_2345),
            -0.75,
            1.0,
        ];
        let bounds = [
            (Some(0.0f32), Some(6.0f32)),
            (Some(0.0), None),
            (Some(-1.0), Some(1.0)),
            (Some(0.5), None),
            (None, Some(6.0)),
            (Some(-0.75), Some(0.5)),
        ];
        for (lo, hi) in bounds {
            let mut a = CodeAssembler::new(64).unwrap();
            let regs = clamp_bounds(
                &mut a,
                (lo.map(f32::to_bits), hi.map(f32::to_bits)),
                [zmm1, zmm2],
            );
            let (l, h) = regs.unwrap();
            a.vmovups(zmm0, zmmword_ptr(rdi)).unwrap();
            clamp_keep_nan(&mut a, zmm0, l, h).unwrap();
            a.vmovups(zmmword_ptr(rsi), zmm0).unwrap();
            a.vzeroupper().unwrap();
            a.ret().unwrap();
            let code = a.assemble(0).unwrap();
            // SAFETY: the assembled function's System V signature.
            let f: F = unsafe { std::mem::transmute(exec(&code)) };
            let mut out = [0.0f32; 16];
            f(xs.as_ptr(), out.as_mut_ptr());
            for (x, got) in xs.iter().zip(out) {
                let want = clamp(*x, lo, hi);
                assert_eq!(got.to_bits(), want.to_bits(), "{x} in {lo:?}..{hi:?}");
            }
        }
    }
}

/// Opens a frame for a table of `bytes` on the stack, aligned to `align` (a power of two) at `rsp`: `push rbp`,
/// `mov rbp, rsp`, `sub rsp, bytes`, `and rsp, -align`. [`stack_table_end`] closes it.
pub(crate) fn stack_table_begin(
    a: &mut CodeAssembler,
    bytes: i32,
    align: i32,
) -> Result<(), IcedError> {
    use iced_x86::code_asm::{rbp, rsp};
    a.push(rbp)?;
    a.mov(rbp, rsp)?;
    a.sub(rsp, bytes)?;
    a.and(rsp, -align)
}

/// Closes the frame [`stack_table_begin`] opened: `mov rsp, rbp`, `pop rbp`.
pub(crate) fn stack_table_end(a: &mut CodeAssembler) -> Result<(), IcedError> {
    use iced_x86::code_asm::{rbp, rsp};
    a.mov(rsp, rbp)?;
    a.pop(rbp)
}
