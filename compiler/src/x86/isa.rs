//! The vector ISA a machine-code family is written over (`Isa`), so that a family whose algorithm is the same on
//! AVX-512 and AVX2 is written once: lanes, registers, whole-vector loads and stores, the arithmetic of whole
//! vectors, a broadcast of a scalar, a multiply-add with a broadcast operand, clamps, the in-register transpose of a lanes x lanes block, and stores of a vector's first
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
    /// `v = [m]`, a whole vector.
    fn load(a: &mut CodeAssembler, v: Self::V, m: AsmMemoryOperand) -> R;
    /// `[m] = v`, a whole vector.
    fn store(a: &mut CodeAssembler, m: AsmMemoryOperand, v: Self::V) -> R;
    /// `v += [m]`, a whole vector.
    fn add_mem(a: &mut CodeAssembler, v: Self::V, m: AsmMemoryOperand) -> R;
    /// `d = x · [m]`, a whole vector.
    fn mul_mem(a: &mut CodeAssembler, d: Self::V, x: Self::V, m: AsmMemoryOperand) -> R;
    /// `d = x + y`.
    fn add(a: &mut CodeAssembler, d: Self::V, x: Self::V, y: Self::V) -> R;
    /// `d = x − y`.
    fn sub(a: &mut CodeAssembler, d: Self::V, x: Self::V, y: Self::V) -> R;
    /// `d = x · y`.
    fn mul(a: &mut CodeAssembler, d: Self::V, x: Self::V, y: Self::V) -> R;
    /// `d = x ^ y` as floats (`vxorps`; `x = y = d` zeroes `d`).
    fn xor(a: &mut CodeAssembler, d: Self::V, x: Self::V, y: Self::V) -> R;
    /// Every lane of `v` = lane 0 of `x`.
    fn broadcast(a: &mut CodeAssembler, v: Self::V, x: AsmRegisterXmm) -> R;
    /// `acc += w · broadcast([m])`; `t` is clobbered where the ISA broadcasts into a register.
    fn fma_bcast(
        a: &mut CodeAssembler,
        acc: Self::V,
        w: Self::V,
        m: AsmMemoryOperand,
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
    /// Stores the first `n` lanes of `v` at `[m]` and nothing after them (`scratch` may be clobbered); after
    /// [`Isa::head_mask`] for the same `n`.
    fn store_head(
        a: &mut CodeAssembler,
        m: AsmMemoryOperand,
        v: Self::V,
        n: usize,
        scratch: Self::V,
    ) -> R;
}

/// The whole-vector loads, stores, arithmetic and broadcast, the same instructions on both register files
/// (`$wide`: the memory operand of one vector).
macro_rules! whole_vector_ops {
    ($v:ty, $wide:ident) => {
        fn load(a: &mut CodeAssembler, v: $v, m: AsmMemoryOperand) -> R {
            a.vmovups(v, $wide(m))
        }
        fn store(a: &mut CodeAssembler, m: AsmMemoryOperand, v: $v) -> R {
            a.vmovups($wide(m), v)
        }
        fn add_mem(a: &mut CodeAssembler, v: $v, m: AsmMemoryOperand) -> R {
            a.vaddps(v, v, $wide(m))
        }
        fn mul_mem(a: &mut CodeAssembler, d: $v, x: $v, m: AsmMemoryOperand) -> R {
            a.vmulps(d, x, $wide(m))
        }
        fn add(a: &mut CodeAssembler, d: $v, x: $v, y: $v) -> R {
            a.vaddps(d, x, y)
        }
        fn sub(a: &mut CodeAssembler, d: $v, x: $v, y: $v) -> R {
            a.vsubps(d, x, y)
        }
        fn mul(a: &mut CodeAssembler, d: $v, x: $v, y: $v) -> R {
            a.vmulps(d, x, y)
        }
        fn xor(a: &mut CodeAssembler, d: $v, x: $v, y: $v) -> R {
            a.vxorps(d, x, y)
        }
        fn broadcast(a: &mut CodeAssembler, v: $v, x: AsmRegisterXmm) -> R {
            a.vbroadcastss(v, x)
        }
    };
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
    whole_vector_ops!(AsmRegisterZmm, zmmword_ptr);
    fn fma_bcast(
        a: &mut CodeAssembler,
        acc: AsmRegisterZmm,
        w: AsmRegisterZmm,
        m: AsmMemoryOperand,
        _: AsmRegisterZmm,
    ) -> R {
        a.vfmadd231ps(acc, w, dword_bcst(m))
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
        m: AsmMemoryOperand,
        v: AsmRegisterZmm,
        n: usize,
        _: AsmRegisterZmm,
    ) -> R {
        let dst = zmmword_ptr(m);
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
    whole_vector_ops!(AsmRegisterYmm, ymmword_ptr);
    fn fma_bcast(
        a: &mut CodeAssembler,
        acc: AsmRegisterYmm,
        w: AsmRegisterYmm,
        m: AsmMemoryOperand,
        t: AsmRegisterYmm,
    ) -> R {
        a.vbroadcastss(t, dword_ptr(m))?;
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
        m: AsmMemoryOperand,
        v: AsmRegisterYmm,
        n: usize,
        scratch: AsmRegisterYmm,
    ) -> R {
        store_head_ymm(a, ptr(m), v, n, scratch)
    }
}
