//! The AVX2+FMA variant of the vector math maps (`x86-64-v3`, the default `--cpu`): Exp, Sigmoid, Tanh, Erf
//! and both GELUs, eight floats per `ymm` where Cranelift's maps do four, with the same contract and the same
//! IEEE operation sequence as `vmath_x86.rs` and `codegen::math` (so outputs are bitwise those of the Cranelift
//! maps compiled with FMA). AVX2 has no mask registers, embedded broadcasts or `vpternlogd`: constants are
//! whole 32-byte vectors in a table after the code (memory operands), the erf select is `vcmpps` +
//! `vblendvps`, the sign copy an and-or through `ymm11`, and the tail uses `vmaskmovps` with lane masks built
//! from the count. Sixteen registers hold one vector's eight slots (`ymm0..7`), so a step is one vector; the
//! loop carries no dependency, and out-of-order execution overlaps consecutive vectors.
//!
//! `fn(src: *const f32, dst: *mut f32, count: u64)` (System V).

use super::vmath_x86::supported;
use crate::ir::UnOp;
use crate::kernel::math::{
    erf_series, erfc_coeffs, gelu_erf_half, EXP_BIAS, EXP_HI, EXP_LN2, EXP_LO, EXP_TAYLOR,
    GELU_ERF_P, GELU_TANH, ROUND_MAGIC,
};
use iced_x86::code_asm::*;

/// Register slots of the step's vector (as `vmath_x86`'s, one vector).
#[derive(Clone, Copy)]
pub(super) enum S {
    /// The input, kept to the end (sign, GELU's x).
    X = 0,
    A,
    B,
    C,
    D,
    E,
    T1,
    T2,
}

const YMM: [AsmRegisterYmm; 8] = [ymm0, ymm1, ymm2, ymm3, ymm4, ymm5, ymm6, ymm7];

pub(super) fn y(s: S) -> AsmRegisterYmm {
    YMM[s as usize]
}

type Asm = CodeAssembler;
type R = Result<(), IcedError>;

/// The constant table being built: one 32-byte vector per constant, addressed from `r8`.
pub(super) struct Em {
    consts: Vec<u32>,
}

impl Em {
    /// The memory operand of the vector of constant `bits` (interned).
    pub(super) fn bits(&mut self, bits: u32) -> AsmMemoryOperand {
        let i = match self.consts.iter().position(|&b| b == bits) {
            Some(i) => i,
            None => {
                self.consts.push(bits);
                self.consts.len() - 1
            }
        };
        ymmword_ptr(r8 + (32 * i) as i32)
    }
    pub(super) fn f(&mut self, x: f32) -> AsmMemoryOperand {
        self.bits(x.to_bits())
    }
    fn horner(&mut self, a: &mut Asm, d: S, x: S, coeffs: &[f32]) -> R {
        for &c in coeffs {
            a.vfmadd213ps(y(d), y(x), self.f(c))?;
        }
        Ok(())
    }
    /// `d` (≥ 0) takes the sign bit of `s`; clobbers `ymm11`.
    fn with_sign_of(&mut self, a: &mut Asm, d: S, s: S) -> R {
        a.vandps(ymm11, y(s), self.bits(0x8000_0000))?;
        a.vorps(y(d), y(d), ymm11)
    }

    /// `d = e^s` as `math::exp`; clobbers `s`, `T1`, `T2`.
    pub(super) fn exp(&mut self, a: &mut Asm, d: S, s: S) -> R {
        let (x, t, n) = (y(s), y(S::T1), y(S::T2));
        a.vmaxps(x, ymm12, x)?;
        a.vminps(x, ymm13, x)?;
        a.vmovups(t, self.f(ROUND_MAGIC))?;
        a.vfmadd231ps(t, x, self.f(std::f32::consts::LOG2_E))?;
        a.vsubps(n, t, self.f(ROUND_MAGIC))?;
        a.vfmadd231ps(x, n, self.f(EXP_LN2[0]))?;
        a.vfmadd231ps(x, n, self.f(EXP_LN2[1]))?;
        a.vmovups(n, self.f(EXP_TAYLOR[0]))?;
        self.horner(a, S::T2, s, &EXP_TAYLOR[1..])?;
        a.vpaddd(t, t, self.bits(EXP_BIAS as u32))?;
        a.vpslld(t, t, 23)?;
        a.vmulps(y(d), n, t)?;
        a.vmulps(y(d), y(d), self.f(2.0))
    }

    /// `d = erf(s)` with the sign of `sign`, as `vmath_x86`'s `erf` (same registers and constraints).
    fn erf(&mut self, a: &mut Asm, d: S, s: S, sign: S) -> R {
        a.vandps(y(S::A), y(s), self.bits(0x7fff_ffff))?;
        a.vmulps(y(S::B), y(S::A), y(S::A))?;
        let series = erf_series();
        a.vmovups(y(S::C), self.f(series[0]))?;
        self.horner(a, S::C, S::B, &series[1..])?;
        a.vmulps(y(S::C), y(S::C), y(S::A))?;
        a.vmulps(y(S::C), y(S::C), self.f(std::f32::consts::FRAC_2_SQRT_PI))?;
        a.vmovups(y(S::T1), self.f(1.0))?;
        a.vmovups(y(S::D), self.f(1.0))?;
        a.vfmadd231ps(y(S::T1), y(S::A), self.f(0.5))?;
        a.vdivps(y(S::D), y(S::D), y(S::T1))?;
        let c = erfc_coeffs();
        a.vmovups(y(S::E), self.f(c[0]))?;
        self.horner(a, S::E, S::D, &c[1..])?;
        a.vsubps(y(S::E), y(S::E), y(S::B))?;
        self.exp(a, S::B, S::E)?;
        a.vmulps(y(S::B), y(S::D), y(S::B))?;
        a.vmovups(y(d), self.f(1.0))?;
        a.vsubps(y(d), y(d), y(S::B))?;
        // |x| < 0.5 (ordered: a NaN keeps the erfc form): the series.
        a.vcmpps(ymm11, y(S::A), self.f(0.5), 1)?;
        a.vblendvps(y(d), y(d), y(S::C), ymm11)?;
        self.with_sign_of(a, d, sign)
    }

    /// `d = tanh(s)` as `math::tanh`; `s` not `A`, `B`, `T1` or `T2`.
    fn tanh(&mut self, a: &mut Asm, d: S, s: S) -> R {
        a.vandps(y(S::A), y(s), self.bits(0x7fff_ffff))?;
        a.vmulps(y(S::A), y(S::A), self.f(-2.0))?;
        self.exp(a, S::B, S::A)?;
        a.vmovups(y(S::A), self.f(1.0))?;
        a.vsubps(y(d), y(S::A), y(S::B))?;
        a.vaddps(y(S::A), y(S::B), self.f(1.0))?;
        a.vdivps(y(d), y(d), y(S::A))?;
        self.with_sign_of(a, d, s)
    }

    /// `d = 0.5·x·(1 + d)`; clobbers `T1`.
    fn gelu_tail(&mut self, a: &mut Asm, d: S) -> R {
        a.vaddps(y(d), y(d), self.f(1.0))?;
        a.vmulps(y(S::T1), y(S::X), self.f(0.5))?;
        a.vmulps(y(d), y(S::T1), y(d))
    }

    /// One step of `op` on `X`, the result in `E`.
    fn map(&mut self, a: &mut Asm, op: UnOp) -> R {
        match op {
            UnOp::Exp => self.exp(a, S::E, S::X),
            UnOp::Sigmoid => {
                a.vxorps(y(S::A), y(S::X), self.bits(0x8000_0000))?;
                self.exp(a, S::B, S::A)?;
                a.vmovups(y(S::E), self.f(1.0))?;
                a.vaddps(y(S::B), y(S::B), self.f(1.0))?;
                a.vdivps(y(S::E), y(S::E), y(S::B))
            }
            UnOp::Tanh => self.tanh(a, S::E, S::X),
            UnOp::Erf => self.erf(a, S::E, S::X, S::X),
            UnOp::Gelu { tanh: false } => {
                // As `vmath_x86`: a in A, t in B, ½·t·P(t) in C, e^(−a²) in D, the result in E.
                a.vandps(y(S::A), y(S::X), self.bits(0x7fff_ffff))?;
                a.vmulps(y(S::A), y(S::A), self.f(std::f32::consts::FRAC_1_SQRT_2))?;
                a.vmovups(y(S::D), self.f(1.0))?;
                a.vfmadd231ps(y(S::D), y(S::A), self.f(GELU_ERF_P))?;
                a.vmovups(y(S::B), self.f(1.0))?;
                a.vdivps(y(S::B), y(S::B), y(S::D))?;
                let half = gelu_erf_half();
                a.vmovups(y(S::C), self.f(half[0]))?;
                self.horner(a, S::C, S::B, &half[1..])?;
                a.vmulps(y(S::C), y(S::C), y(S::B))?;
                a.vmulps(y(S::E), y(S::X), y(S::X))?;
                a.vmulps(y(S::E), y(S::E), self.f(-0.5))?;
                self.exp(a, S::D, S::E)?;
                a.vmulps(y(S::C), y(S::C), y(S::D))?;
                a.vmovups(y(S::E), self.f(1.0))?;
                a.vsubps(y(S::E), y(S::E), y(S::C))?;
                a.vcmpps(ymm11, y(S::X), self.f(0.0), 1)?;
                a.vblendvps(y(S::E), y(S::E), y(S::C), ymm11)?;
                a.vmulps(y(S::E), y(S::E), y(S::X))
            }
            UnOp::Gelu { tanh: true } => {
                let (x, b, c) = (y(S::X), y(S::B), y(S::C));
                a.vmulps(b, x, x)?;
                a.vmulps(b, b, x)?;
                a.vmovaps(c, x)?;
                a.vfmadd231ps(c, b, self.f(GELU_TANH[0]))?;
                a.vmulps(c, c, self.f(GELU_TANH[1]))?;
                self.tanh(a, S::E, S::C)?;
                self.gelu_tail(a, S::E)
            }
            _ => Ok(()),
        }
    }
}

/// Assembles the AVX2 map of `op`; `Err` for an op without machine code (`vmath_x86::supported`).
pub fn assemble(op: UnOp) -> Result<Vec<u8>, String> {
    let e = |x: IcedError| x.to_string();
    if !supported(op) {
        return Err(format!("vector math: no AVX2 code for {op:?}"));
    }
    let mut a = CodeAssembler::new(64).map_err(e)?;
    let (mut m, labels) = begin(&mut a).map_err(e)?;
    // In the tail ymm8 masks the outputs, ymm9 the inputs (`tail_masks_ymm`, which clobbers xmm15 and r9).
    let step = |a: &mut Asm, _n: usize, masked: bool| -> R {
        if masked {
            a.vmaskmovps(y(S::X), ymm9, ptr(rdi))?;
        } else {
            a.vmovups(y(S::X), ptr(rdi))?;
        }
        m.map(a, op)?;
        if masked {
            a.vmaskmovps(ptr(rsi), ymm8, y(S::E))
        } else {
            a.vmovups(ptr(rsi), y(S::E))
        }
    };
    super::row_loop(&mut a, (rdx, rdi, rsi), 8, 1, (32, 32), step, |a| {
        super::tail_masks_ymm(a, edx, 1, labels.lanes, [ymm8, ymm9, ymm10])
    })
    .map_err(e)?;
    finish(a, &m, labels)
}

/// The labels of a kernel begun with `begin`: its constant table and the lane indices of `tail_masks_ymm`.
#[derive(Clone, Copy)]
pub(super) struct Labels {
    table: CodeLabel,
    pub(super) lanes: CodeLabel,
}

/// The prologue of an AVX2 kernel that uses `Em`: `r8` at the constant table, exp's clamp bounds in
/// `ymm12` / `ymm13` (in registers so that the input can be the second operand).
pub(super) fn begin(a: &mut Asm) -> Result<(Em, Labels), IcedError> {
    let mut m = Em { consts: Vec::new() };
    let labels = Labels {
        table: a.create_label(),
        lanes: a.create_label(),
    };
    a.lea(r8, ptr(labels.table))?;
    let (lo, hi) = (m.f(EXP_LO), m.f(EXP_HI));
    a.vmovups(ymm12, lo)?;
    a.vmovups(ymm13, hi)?;
    Ok((m, labels))
}

/// The epilogue of a kernel begun with `begin`: return, then the lane indices and the constant table (each
/// constant as a whole 32-byte vector); the assembled bytes.
pub(super) fn finish(mut a: Asm, m: &Em, mut labels: Labels) -> Result<Vec<u8>, String> {
    let e = |x: IcedError| x.to_string();
    a.vzeroupper().map_err(e)?;
    a.ret().map_err(e)?;
    super::lane_table(&mut a, &mut labels.lanes).map_err(e)?;
    a.set_label(&mut labels.table).map_err(e)?;
    let bytes: Vec<u8> = (m.consts.iter())
        .flat_map(|c| std::iter::repeat_n(c.to_le_bytes(), 8).flatten())
        .collect();
    a.db(&bytes).map_err(e)?;
    a.assemble(0).map_err(e)
}

#[cfg(test)]
mod tests {
    use super::super::vmath_x86::tests::{check_counts, check_maps, check_special};
    use super::assemble;

    fn skip() -> bool {
        let no = !std::arch::is_x86_feature_detected!("avx2")
            || !std::arch::is_x86_feature_detected!("fma");
        if no {
            eprintln!("SKIPPED: AVX2 vector math maps (this CPU or OS cannot run them)");
        }
        no
    }

    #[test]
    fn maps_match_the_reference() {
        if !skip() {
            check_maps(assemble);
        }
    }

    #[test]
    fn special_values() {
        if !skip() {
            check_special(assemble);
        }
    }

    #[test]
    fn counts_and_bounds() {
        if !skip() {
            check_counts(assemble);
        }
    }
}
