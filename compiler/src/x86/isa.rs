//! The vector ISA a machine-code family is written over (`Isa`), so that a family whose algorithm is the same on
//! AVX-512 and AVX2 is written once: lanes, registers, whole-vector loads and stores, a multiply-add with a
//! broadcast operand, clamps, the in-register transpose of a lanes x lanes block, and stores of a vector's first
//! lanes. `Avx512` works on `zmm` with mask registers and embedded broadcasts, `Avx2` on `ymm` with explicit
//! broadcasts and partial stores. Every method emits what the hand-written kernels emitted, so a family moved
//! onto the trait assembles to the same bytes.

use super::regs::{clamp_bounds, clamp_bounds_ymm, clamp_keep_nan};
use super::shuffle::{store_head_ymm, transpose16, transpose8_ymm};
use super::{YMM, ZMM};
use iced_x86::code_asm::*;

/// What one emitting step returns.
pub type R = Result<(), IcedError>;

/// A clamp's bounds in registers: the lower one with its f32 bits (`clamp_keep_nan` adds +0 after a +0 bound),
/// the upper one.
pub type Bounds<V> = (Option<(V, u32)>, Option<V>);

/// A vector ISA for machine-code families.
pub trait Isa {
    /// f32 lanes per vector register.
    const LANES: usize;
    /// A vector register.
    type V: Copy;
    /// Vector register `i`.
    fn v(i: usize) -> Self::V;
    /// `v = +0.0` in every lane.
    fn zero(a: &mut CodeAssembler, v: Self::V) -> R;
    /// `v = [base + disp]`, a whole vector.
    fn load(a: &mut CodeAssembler, v: Self::V, base: AsmRegister64, disp: i32) -> R;
    /// `v += [base + disp]`, a whole vector.
    fn add_mem(a: &mut CodeAssembler, v: Self::V, base: AsmRegister64, disp: i32) -> R;
    /// `acc += w · broadcast([base + disp])`; `t` is clobbered where the ISA broadcasts into a register.
    fn fma_bcast(
        a: &mut CodeAssembler,
        acc: Self::V,
        w: Self::V,
        base: AsmRegister64,
        disp: i32,
        t: Self::V,
    ) -> R;
    /// Broadcasts the clamp bounds a kernel has (f32 bits) into `regs` and returns them for [`Isa::clamp`].
    fn clamp_bounds(
        a: &mut CodeAssembler,
        bounds: (Option<u32>, Option<u32>),
        regs: [Self::V; 2],
    ) -> Result<Bounds<Self::V>, IcedError>;
    /// Clamps `x` to `bounds`, keeping NaN (`clamp_keep_nan`).
    fn clamp(a: &mut CodeAssembler, x: Self::V, bounds: Bounds<Self::V>) -> R;
    /// Transposes the `LANES x LANES` block in registers `0..LANES` (row r in register r); returns the first of
    /// the `LANES` registers that then hold its columns.
    fn transpose(a: &mut CodeAssembler) -> Result<usize, IcedError>;
    /// Prepares stores of a vector's first `n` lanes ([`Isa::store_head`]): the lane mask where the ISA has
    /// mask registers.
    fn head_mask(a: &mut CodeAssembler, n: usize) -> R;
    /// Stores the first `n` lanes of `v` at `[base + disp]` and nothing after them (`scratch` may be clobbered);
    /// after [`Isa::head_mask`] for the same `n`.
    fn store_head(
        a: &mut CodeAssembler,
        base: AsmRegister64,
        disp: i32,
        v: Self::V,
        n: usize,
        scratch: Self::V,
    ) -> R;
}

/// AVX-512F on `zmm0..31`, `k1` for partial stores.
pub struct Avx512;

/// AVX2 and FMA on `ymm0..15`.
pub struct Avx2;

impl Isa for Avx512 {
    const LANES: usize = 16;
    type V = AsmRegisterZmm;
    fn v(i: usize) -> AsmRegisterZmm {
        ZMM[i]
    }
    fn zero(a: &mut CodeAssembler, v: AsmRegisterZmm) -> R {
        a.vpxord(v, v, v)
    }
    fn load(a: &mut CodeAssembler, v: AsmRegisterZmm, base: AsmRegister64, disp: i32) -> R {
        a.vmovups(v, zmmword_ptr(base + disp))
    }
    fn add_mem(a: &mut CodeAssembler, v: AsmRegisterZmm, base: AsmRegister64, disp: i32) -> R {
        a.vaddps(v, v, zmmword_ptr(base + disp))
    }
    fn fma_bcast(
        a: &mut CodeAssembler,
        acc: AsmRegisterZmm,
        w: AsmRegisterZmm,
        base: AsmRegister64,
        disp: i32,
        _: AsmRegisterZmm,
    ) -> R {
        a.vfmadd231ps(acc, w, dword_bcst(base + disp))
    }
    fn clamp_bounds(
        a: &mut CodeAssembler,
        bounds: (Option<u32>, Option<u32>),
        regs: [AsmRegisterZmm; 2],
    ) -> Result<Bounds<AsmRegisterZmm>, IcedError> {
        clamp_bounds(a, bounds, regs)
    }
    fn clamp(a: &mut CodeAssembler, x: AsmRegisterZmm, (lo, hi): Bounds<AsmRegisterZmm>) -> R {
        clamp_keep_nan(a, x, lo, hi)
    }
    fn transpose(a: &mut CodeAssembler) -> Result<usize, IcedError> {
        transpose16(a)?;
        Ok(0)
    }
    fn head_mask(a: &mut CodeAssembler, n: usize) -> R {
        if n < Self::LANES {
            a.mov(eax, (1u32 << n) - 1)?;
            a.kmovw(k1, eax)?;
        }
        Ok(())
    }
    fn store_head(
        a: &mut CodeAssembler,
        base: AsmRegister64,
        disp: i32,
        v: AsmRegisterZmm,
        n: usize,
        _: AsmRegisterZmm,
    ) -> R {
        let dst = zmmword_ptr(base + disp);
        if n < Self::LANES {
            a.vmovups(dst.k1(), v)
        } else {
            a.vmovups(dst, v)
        }
    }
}

impl Isa for Avx2 {
    const LANES: usize = 8;
    type V = AsmRegisterYmm;
    fn v(i: usize) -> AsmRegisterYmm {
        YMM[i]
    }
    fn zero(a: &mut CodeAssembler, v: AsmRegisterYmm) -> R {
        a.vxorps(v, v, v)
    }
    fn load(a: &mut CodeAssembler, v: AsmRegisterYmm, base: AsmRegister64, disp: i32) -> R {
        a.vmovups(v, ptr(base + disp))
    }
    fn add_mem(a: &mut CodeAssembler, v: AsmRegisterYmm, base: AsmRegister64, disp: i32) -> R {
        a.vaddps(v, v, ptr(base + disp))
    }
    fn fma_bcast(
        a: &mut CodeAssembler,
        acc: AsmRegisterYmm,
        w: AsmRegisterYmm,
        base: AsmRegister64,
        disp: i32,
        t: AsmRegisterYmm,
    ) -> R {
        a.vbroadcastss(t, dword_ptr(base + disp))?;
        a.vfmadd231ps(acc, w, t)
    }
    fn clamp_bounds(
        a: &mut CodeAssembler,
        bounds: (Option<u32>, Option<u32>),
        regs: [AsmRegisterYmm; 2],
    ) -> Result<Bounds<AsmRegisterYmm>, IcedError> {
        clamp_bounds_ymm(a, bounds, regs)
    }
    fn clamp(a: &mut CodeAssembler, x: AsmRegisterYmm, (lo, hi): Bounds<AsmRegisterYmm>) -> R {
        clamp_keep_nan(a, x, lo, hi)
    }
    fn transpose(a: &mut CodeAssembler) -> Result<usize, IcedError> {
        transpose8_ymm(a)?;
        Ok(8)
    }
    fn head_mask(_: &mut CodeAssembler, _: usize) -> R {
        Ok(())
    }
    fn store_head(
        a: &mut CodeAssembler,
        base: AsmRegister64,
        disp: i32,
        v: AsmRegisterYmm,
        n: usize,
        scratch: AsmRegisterYmm,
    ) -> R {
        store_head_ymm(a, ptr(base + disp), v, n, scratch)
    }
}
