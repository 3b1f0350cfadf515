//! AVX-512 machine code for the transcendental unary maps (Exp, Sigmoid, Tanh, Erf and both GELUs): sixteen
//! floats per `zmm` where Cranelift's f32x4 maps do four. An encoder's exact GELU ran ~3 ns per element in
//! Cranelift, a third of the model's time (it has its own erfc form now: `math::gelu_erf`).
//!
//! Each map is the same sequence of IEEE operations as `codegen::math` (the same constants, the same fused
//! multiply-adds in the same order, the same selects), so a bundle's outputs are bitwise those of its
//! Cranelift kernels wherever those use FMA; both are checked against `ir::ops::elementwise`. Steps of three
//! vectors run as independent chains (`row_loop`: 3, 2, 1, then a masked tail, so no load or store passes the
//! run). Constants come from a table after the code, broadcast from memory (`{1to16}`), except the exp clamp
//! bounds, which stay in `zmm30`/`zmm31` so that `vmaxps`/`vminps` take the input second and keep a NaN.
//!
//! `fn(src: *const f32, dst: *mut f32, count: u64)` (System V).

use super::ZMM;
use crate::ir::UnOp;
use crate::kernel::math::{
    erf_series, erfc_coeffs, gelu_erf_half, EXP_BIAS, EXP_HI, EXP_LN2, EXP_LO, EXP_TAYLOR,
    GELU_ERF_P, GELU_TANH, ROUND_MAGIC,
};
use iced_x86::code_asm::*;

/// Vectors per unrolled step.
pub(super) const NV: usize = 3;

/// The unary maps this file assembles.
pub fn supported(op: UnOp) -> bool {
    matches!(
        op,
        UnOp::Exp | UnOp::Sigmoid | UnOp::Tanh | UnOp::Erf | UnOp::Gelu { .. }
    )
}

/// Register slots of one vector: slot `s` of vector `v` is `zmm(s·NV + v)` (eight slots, `zmm0..23`).
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

pub(super) fn z(s: S, v: usize) -> AsmRegisterZmm {
    ZMM[s as usize * NV + v]
}

/// The constant table being built (f32 bit patterns, addressed from `r8`) and the vectors of the step.
pub(super) struct Em {
    pub(super) consts: Vec<u32>,
    pub(super) n: usize,
}

type Asm = CodeAssembler;
type R = Result<(), IcedError>;

impl Em {
    /// The byte offset of constant `bits` in the table (interned).
    pub(super) fn off(&mut self, bits: u32) -> i32 {
        let i = match self.consts.iter().position(|&b| b == bits) {
            Some(i) => i,
            None => {
                self.consts.push(bits);
                self.consts.len() - 1
            }
        };
        (4 * i) as i32
    }
    /// The broadcast memory operand (`{1to16}`) of the float `x`.
    pub(super) fn f(&mut self, x: f32) -> AsmMemoryOperand {
        self.bits(x.to_bits())
    }
    pub(super) fn bits(&mut self, bits: u32) -> AsmMemoryOperand {
        dword_bcst(r8 + self.off(bits))
    }
    /// Runs `f` once per vector of the step.
    pub(super) fn each(
        &mut self,
        a: &mut Asm,
        mut f: impl FnMut(&mut Asm, &mut Self, usize) -> R,
    ) -> R {
        for v in 0..self.n {
            f(a, self, v)?;
        }
        Ok(())
    }
    /// `d = splat(x)`.
    fn splat(&mut self, a: &mut Asm, d: S, x: f32) -> R {
        self.each(a, |a, m, v| {
            let o = m.off(x.to_bits());
            a.vbroadcastss(z(d, v), dword_ptr(r8 + o))
        })
    }
    /// Horner from `d` (holding the leading coefficient): `d = d·x + c` for each of `coeffs`.
    fn horner(&mut self, a: &mut Asm, d: S, x: S, coeffs: &[f32]) -> R {
        for &c in coeffs {
            self.each(a, |a, m, v| a.vfmadd213ps(z(d, v), z(x, v), m.f(c)))?;
        }
        Ok(())
    }
    /// `d = |s|` (`d` may be `s`).
    fn abs(&mut self, a: &mut Asm, d: S, s: S) -> R {
        self.each(a, |a, m, v| a.vpandd(z(d, v), z(s, v), m.bits(0x7fff_ffff)))
    }
    /// `d` (≥ 0) takes the sign bit of `s`: `d | (s & sign)` (`math::with_sign_of`).
    fn with_sign_of(&mut self, a: &mut Asm, d: S, s: S) -> R {
        self.each(a, |a, m, v| {
            a.vpternlogd(z(d, v), z(s, v), m.bits(0x8000_0000), 0xF8)
        })
    }

    /// `d = e^s` as `math::exp` (clamp, then 2^(n−1)·p(r)·2 with a degree-7 Taylor p); clobbers `s`, `T1`, `T2`.
    pub(super) fn exp(&mut self, a: &mut Asm, d: S, s: S) -> R {
        self.each(a, |a, m, v| {
            let (x, t, n) = (z(s, v), z(S::T1, v), z(S::T2, v));
            a.vmaxps(x, zmm31, x)?;
            a.vminps(x, zmm30, x)?;
            a.vbroadcastss(t, dword_ptr(r8 + m.off(ROUND_MAGIC.to_bits())))?;
            a.vfmadd231ps(t, x, m.f(std::f32::consts::LOG2_E))?;
            a.vsubps(n, t, m.f(ROUND_MAGIC))?;
            a.vfmadd231ps(x, n, m.f(EXP_LN2[0]))?;
            a.vfmadd231ps(x, n, m.f(EXP_LN2[1]))
        })?;
        // p(r) in T2 (n is no longer needed), then 2^n from the low mantissa bits of t.
        self.splat(a, S::T2, EXP_TAYLOR[0])?;
        self.horner(a, S::T2, s, &EXP_TAYLOR[1..])?;
        self.each(a, |a, m, v| {
            let t = z(S::T1, v);
            a.vpaddd(t, t, m.bits(EXP_BIAS as u32))?;
            a.vpslld(t, t, 23)?;
            a.vmulps(z(d, v), z(S::T2, v), t)?;
            a.vmulps(z(d, v), z(d, v), m.f(2.0))
        })
    }

    /// `d = erf(s)` with the sign of `sign` (which `s` shares) as `math::erf`. `s` may be `A` (overwritten by
    /// |s|); `d` may not be `A`..`D`; clobbers `A`..`E`, `T1`, `T2` other than `d`.
    fn erf(&mut self, a: &mut Asm, d: S, s: S, sign: S) -> R {
        self.abs(a, S::A, s)?;
        self.each(a, |a, _, v| a.vmulps(z(S::B, v), z(S::A, v), z(S::A, v)))?;
        // Series in C: 2/√π · a · Σ (-a²)^n / (n! (2n+1)), n < 7, Horner from n = 6.
        let series = erf_series();
        self.splat(a, S::C, series[0])?;
        self.horner(a, S::C, S::B, &series[1..])?;
        self.each(a, |a, m, v| {
            let c = z(S::C, v);
            a.vmulps(c, c, z(S::A, v))?;
            a.vmulps(c, c, m.f(std::f32::consts::FRAC_2_SQRT_PI))
        })?;
        // erfc(a) = t·exp(-a² + P(t)), t = 1 / (1 + a/2): t in D, the exponent in E, its exp in B.
        self.splat(a, S::T1, 1.0)?;
        self.splat(a, S::D, 1.0)?;
        self.each(a, |a, m, v| {
            a.vfmadd231ps(z(S::T1, v), z(S::A, v), m.f(0.5))?;
            a.vdivps(z(S::D, v), z(S::D, v), z(S::T1, v))
        })?;
        let c = erfc_coeffs();
        self.splat(a, S::E, c[0])?;
        self.horner(a, S::E, S::D, &c[1..])?;
        self.each(a, |a, _, v| a.vsubps(z(S::E, v), z(S::E, v), z(S::B, v)))?;
        self.exp(a, S::B, S::E)?;
        self.splat(a, d, 1.0)?;
        self.each(a, |a, m, v| {
            let b = z(S::B, v);
            a.vmulps(b, z(S::D, v), b)?;
            a.vsubps(z(d, v), z(d, v), b)?;
            // |x| < 0.5 (ordered: a NaN keeps the erfc form): the series.
            a.vcmpps(k2, z(S::A, v), m.f(0.5), 1)?;
            a.vblendmps(z(d, v).k2(), z(d, v), z(S::C, v))
        })?;
        self.with_sign_of(a, d, sign)
    }

    /// `d = tanh(s)` as `math::tanh`; `s` not `A`, `B`, `T1` or `T2`, which it clobbers.
    fn tanh(&mut self, a: &mut Asm, d: S, s: S) -> R {
        self.abs(a, S::A, s)?;
        self.each(a, |a, m, v| a.vmulps(z(S::A, v), z(S::A, v), m.f(-2.0)))?;
        self.exp(a, S::B, S::A)?;
        self.splat(a, S::A, 1.0)?;
        self.each(a, |a, m, v| {
            let (one, e) = (z(S::A, v), z(S::B, v));
            a.vsubps(z(d, v), one, e)?;
            a.vaddps(one, e, m.f(1.0))?;
            a.vdivps(z(d, v), z(d, v), one)
        })?;
        self.with_sign_of(a, d, s)
    }

    /// `d = 0.5·x·(1 + d)` (`math::gelu_tail`); clobbers `T1`.
    fn gelu_tail(&mut self, a: &mut Asm, d: S) -> R {
        self.each(a, |a, m, v| {
            a.vaddps(z(d, v), z(d, v), m.f(1.0))?;
            a.vmulps(z(S::T1, v), z(S::X, v), m.f(0.5))?;
            a.vmulps(z(d, v), z(S::T1, v), z(d, v))
        })
    }

    /// One step of `op` on the vectors in `X`, the result in `E`.
    fn map(&mut self, a: &mut Asm, op: UnOp) -> R {
        match op {
            UnOp::Exp => self.exp(a, S::E, S::X),
            UnOp::Sigmoid => {
                self.each(a, |a, m, v| {
                    a.vpxord(z(S::A, v), z(S::X, v), m.bits(0x8000_0000))
                })?;
                self.exp(a, S::B, S::A)?;
                self.splat(a, S::E, 1.0)?;
                self.each(a, |a, m, v| {
                    a.vaddps(z(S::B, v), z(S::B, v), m.f(1.0))?;
                    a.vdivps(z(S::E, v), z(S::E, v), z(S::B, v))
                })
            }
            UnOp::Tanh => self.tanh(a, S::E, S::X),
            UnOp::Erf => self.erf(a, S::E, S::X, S::X),
            UnOp::Gelu { tanh: false } => {
                // a = |x|/√2 in A; t = 1 / (1 + p·a) in B; ½·t·P(t) in C.
                self.abs(a, S::A, S::X)?;
                self.splat(a, S::D, 1.0)?;
                self.splat(a, S::B, 1.0)?;
                self.each(a, |a, m, v| {
                    let (x, d) = (z(S::A, v), z(S::D, v));
                    a.vmulps(x, x, m.f(std::f32::consts::FRAC_1_SQRT_2))?;
                    a.vfmadd231ps(d, x, m.f(GELU_ERF_P))?;
                    a.vdivps(z(S::B, v), z(S::B, v), d)
                })?;
                let half = gelu_erf_half();
                self.splat(a, S::C, half[0])?;
                self.horner(a, S::C, S::B, &half[1..])?;
                // −a² = x·x·(−½) in E, its exp in D; h = ½·erfc(a) in C.
                self.each(a, |a, m, v| {
                    a.vmulps(z(S::C, v), z(S::C, v), z(S::B, v))?;
                    a.vmulps(z(S::E, v), z(S::X, v), z(S::X, v))?;
                    a.vmulps(z(S::E, v), z(S::E, v), m.f(-0.5))
                })?;
                self.exp(a, S::D, S::E)?;
                self.splat(a, S::E, 1.0)?;
                self.each(a, |a, m, v| {
                    let (x, c, e) = (z(S::X, v), z(S::C, v), z(S::E, v));
                    a.vmulps(c, c, z(S::D, v))?;
                    a.vsubps(e, e, c)?;
                    // x < 0 (ordered: NaN keeps 1 − h, itself NaN): h.
                    a.vcmpps(k2, x, m.f(0.0), 1)?;
                    a.vblendmps(e.k2(), e, c)?;
                    a.vmulps(e, e, x)
                })
            }
            UnOp::Gelu { tanh: true } => {
                // tanh(√(2/π) · (x + 0.044715·x³)), the argument in C.
                self.each(a, |a, m, v| {
                    let (x, b, c) = (z(S::X, v), z(S::B, v), z(S::C, v));
                    a.vmulps(b, x, x)?;
                    a.vmulps(b, b, x)?;
                    a.vmovaps(c, x)?;
                    a.vfmadd231ps(c, b, m.f(GELU_TANH[0]))?;
                    a.vmulps(c, c, m.f(GELU_TANH[1]))
                })?;
                self.tanh(a, S::E, S::C)?;
                self.gelu_tail(a, S::E)
            }
            _ => Ok(()),
        }
    }
}

/// Assembles the map of `op`; `Err` for an op without machine code (`supported` says which have it).
pub fn assemble(op: UnOp) -> Result<Vec<u8>, String> {
    let e = |x: IcedError| x.to_string();
    if !supported(op) {
        return Err(format!("vector math: no AVX-512 code for {op:?}"));
    }
    let mut a = CodeAssembler::new(64).map_err(e)?;
    let (mut m, table) = begin(&mut a).map_err(e)?;
    let step = |a: &mut Asm, n: usize, masked: bool| -> R {
        m.n = n;
        for v in 0..n {
            let at = zmmword_ptr(rdi + (v * 64) as i32);
            if masked {
                a.vmovups(z(S::X, v).k1().z(), at)?;
            } else {
                a.vmovups(z(S::X, v), at)?;
            }
        }
        m.map(a, op)?;
        for v in 0..n {
            let at = zmmword_ptr(rsi + (v * 64) as i32);
            a.vmovups(if masked { at.k5() } else { at }, z(S::E, v))?;
        }
        Ok(())
    };
    super::row_loop(&mut a, (rdx, rdi, rsi), 16, NV, (64, 64), step, |a| {
        super::tail_masks_zmm(a, edx, 1)
    })
    .map_err(e)?;
    finish(a, &m, table)
}

/// The prologue of a kernel using `Em`: `r8` at the constant table (placed by `finish`), exp's clamp bounds in
/// `zmm31` / `zmm30` (registers, so that the input can be the second operand of `vmaxps` / `vminps`).
pub(super) fn begin(a: &mut Asm) -> Result<(Em, CodeLabel), IcedError> {
    let mut m = Em {
        consts: Vec::new(),
        n: NV,
    };
    let table = a.create_label();
    a.lea(r8, ptr(table))?;
    let (lo, hi) = (m.off(EXP_LO.to_bits()), m.off(EXP_HI.to_bits()));
    a.vbroadcastss(zmm31, dword_ptr(r8 + lo))?;
    a.vbroadcastss(zmm30, dword_ptr(r8 + hi))?;
    Ok((m, table))
}

/// The epilogue of a kernel begun with `begin`: return, then the constant table; the assembled bytes.
pub(super) fn finish(mut a: Asm, m: &Em, mut table: CodeLabel) -> Result<Vec<u8>, String> {
    let e = |x: IcedError| x.to_string();
    a.vzeroupper().map_err(e)?;
    a.ret().map_err(e)?;
    a.set_label(&mut table).map_err(e)?;
    let bytes: Vec<u8> = m.consts.iter().flat_map(|c| c.to_le_bytes()).collect();
    a.db(&bytes).map_err(e)?;
    a.assemble(0).map_err(e)
}

#[cfg(test)]
pub(crate) mod tests {
    use super::super::test_exec::{exec, guarded, skip_without_avx512};
    use super::*;
    use crate::ir::ops::elementwise::apply_unary;

    const OPS: [UnOp; 6] = [
        UnOp::Exp,
        UnOp::Sigmoid,
        UnOp::Tanh,
        UnOp::Erf,
        UnOp::Gelu { tanh: false },
        UnOp::Gelu { tanh: true },
    ];

    /// Equal (zeros and infinities with their sign), or within 2e-6 of max(1, |want|): the error the f32
    /// evaluation of `math`'s forms keeps to (exp's +0 below -86.99 included).
    fn close(got: f32, want: f32) -> bool {
        if got.is_nan() || want.is_nan() {
            got.is_nan() && want.is_nan()
        } else if got == want {
            got.is_sign_negative() == want.is_sign_negative() || got != 0.0
        } else {
            (got - want).abs() <= 2e-6 * want.abs().max(1.0)
        }
    }

    /// A variant's assembler (`vmath_x86::assemble`, `vmath_avx2::assemble`).
    pub(crate) type Assemble = fn(UnOp) -> Result<Vec<u8>, String>;

    fn kernel(assemble: Assemble, op: UnOp) -> extern "sysv64" fn(*const f32, *mut f32, u64) {
        let code = assemble(op).unwrap();
        // SAFETY: the assembled kernel's System V signature.
        unsafe { std::mem::transmute(exec(&code)) }
    }

    /// Every map against the reference semantics (`close`) over [-12, 12], the erf series / erfc switch at
    /// |x| = 0.5 from both sides, exp's clamp bounds and overflow.
    #[test]
    fn maps_match_the_reference() {
        if !skip_without_avx512("vector math maps") {
            check_maps(assemble);
        }
    }

    /// `maps_match_the_reference` for one variant.
    pub(crate) fn check_maps(assemble: Assemble) {
        let mut xs: Vec<f32> = (0..4801).map(|i| (i as f32 - 2400.0) / 200.0).collect();
        for b in [
            0.5f32, -0.5, 88.5, 88.72, 88.73, -86.6, -87.2, -87.5, -88.0, 100.0, -100.0, 1e-30,
            -1e-30, 0.0, -0.0,
        ] {
            xs.extend([
                b,
                f32::from_bits(b.to_bits() + 1),
                f32::from_bits(b.to_bits().max(1) - 1),
            ]);
        }
        for op in OPS {
            let f = kernel(assemble, op);
            let mut y = vec![0f32; xs.len()];
            f(xs.as_ptr(), y.as_mut_ptr(), xs.len() as u64);
            for (&x, &got) in xs.iter().zip(&y) {
                let want = apply_unary(op, x);
                assert!(
                    close(got, want),
                    "{op:?}({x:e}) = {got:e}, reference {want:e}"
                );
                // No subnormal results from exp (`math::EXP_LO`): +0 below the normal range.
                if op == UnOp::Exp {
                    assert!(
                        got.is_nan() || got == 0.0 || got >= f32::MIN_POSITIVE,
                        "Exp({x:e}) = {got:e} is subnormal"
                    );
                }
            }
        }
    }

    /// NaN in gives NaN out, ±∞ the limits, and -0 keeps its sign where the map is odd.
    #[test]
    fn special_values() {
        if !skip_without_avx512("vector math special values") {
            check_special(assemble);
        }
    }

    /// `special_values` for one variant.
    pub(crate) fn check_special(assemble: Assemble) {
        let xs = [f32::NAN, f32::INFINITY, f32::NEG_INFINITY, -0.0];
        for op in OPS {
            let f = kernel(assemble, op);
            let mut y = [0f32; 4];
            f(xs.as_ptr(), y.as_mut_ptr(), 4);
            assert!(y[0].is_nan(), "{op:?}(NaN) = {}", y[0]);
            for i in 1..4 {
                let want = apply_unary(op, xs[i]);
                assert!(
                    close(y[i], want),
                    "{op:?}({}) = {:e}, reference {want:e}",
                    xs[i],
                    y[i]
                );
            }
        }
    }

    /// Every count from 0 to 100 with the source ending on an inaccessible page and a guard float after the
    /// destination: no read or write past the run, each element mapped on its own.
    #[test]
    fn counts_and_bounds() {
        if !skip_without_avx512("vector math tails") {
            check_counts(assemble);
        }
    }

    /// `counts_and_bounds` for one variant.
    pub(crate) fn check_counts(assemble: Assemble) {
        let f = kernel(assemble, UnOp::Gelu { tanh: false });
        let page = guarded(1024);
        for count in 0usize..=100 {
            // SAFETY: the last `count` of the 1024 floats before the guard page.
            let src = unsafe { page.add(1024 - count) };
            for i in 0..count {
                // SAFETY: i < count, inside the mapping.
                unsafe { *src.add(i) = super::super::test_exec::pattern(i) };
            }
            let mut dst = vec![-7.0f32; count + 1];
            f(src, dst.as_mut_ptr(), count as u64);
            for (i, &got) in dst[..count].iter().enumerate() {
                let x = super::super::test_exec::pattern(i);
                let want = apply_unary(UnOp::Gelu { tanh: false }, x);
                assert!(
                    (got - want).abs() <= 2e-6,
                    "count {count}, [{i}] = {got}, want {want}"
                );
            }
            assert_eq!(dst[count], -7.0, "count {count}: write past the run");
        }
    }
}
