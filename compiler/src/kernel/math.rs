//! The constants of the vector math every kernel set shares (the Cranelift maps of `codegen/math.rs` and the
//! machine code of `x86/vmath_*`): exp's range reduction, polynomial and limits, the rounding trick, erf's series
//! and the exact GELU's erfc form, the tanh GELU's coefficients. One definition keeps the sets bitwise equal.

/// 1.5·2^23: adding it to a float below 2^22 rounds it to an integer held in the low mantissa bits.
pub const ROUND_MAGIC: f32 = 12582912.0;

/// −ln 2 split in two (Cody–Waite): `r = x + n·hi + n·lo` is exact enough for |r| ≤ 0.35.
pub const EXP_LN2: [f32; 2] = [-0.693_359_4, 2.121_944_4e-4];

/// e^r on |r| ≤ 0.35: the Taylor coefficients to degree 7 (truncation < 1e-8 relative), highest first, for
/// Horner's scheme.
pub const EXP_TAYLOR: [f32; 8] = [
    1.0 / 5040.0,
    1.0 / 720.0,
    1.0 / 120.0,
    1.0 / 24.0,
    1.0 / 6.0,
    0.5,
    1.0,
    1.0,
];

/// `erf`'s Maclaurin coefficients in a² for n = 6 down to 0, `(−1)^n / (n! (2n+1))`, for Horner's scheme.
pub fn erf_series() -> [f32; 7] {
    std::array::from_fn(|i| {
        let n = 6 - i;
        let fact: f64 = (1..=n).map(|k| k as f64).product();
        ((if n % 2 == 1 { -1.0 } else { 1.0 }) / (fact * (2 * n + 1) as f64)) as f32
    })
}

/// The tanh GELU's cubic coefficient and scale: `tanh(√(2/π) · (x + 0.044715·x³))`, the scale as f32
/// arithmetic gives it (`(2 / π).sqrt()` in f32, one ulp below the nearest float to √(2/π)), as the reference.
pub const GELU_TANH: [f32; 2] = [0.044715, 0.797_884_5];

/// The exact GELU's erf, `erf(a) ≈ 1 − t·P(t)·e^(−a²)` with `t = 1 / (1 + p·a)` (Abramowitz and Stegun,
/// Handbook of Mathematical Functions, 7.1.26: absolute error at most 1.5e-7 for a ≥ 0): `p`.
pub const GELU_ERF_P: f32 = 0.327_591_1;

/// P's coefficients (the handbook's a5 .. a1, highest first), f64 as printed there.
const GELU_ERF_COEFFS: [f64; 5] = [
    1.061_405_429,
    -1.453_152_027,
    1.421_413_741,
    -0.284_496_736,
    0.254_829_592,
];

/// P's coefficients halved in f32 (the GELU's factor ½ folded in), highest first.
pub fn gelu_erf_half() -> [f32; 5] {
    GELU_ERF_COEFFS.map(|c| (c / 2.0) as f32)
}

/// `erf`'s erfc polynomial P(t) in f32, highest first (the reference's `ERFC_COEFFS`).
pub fn erfc_coeffs() -> [f32; 10] {
    crate::ir::ops::elementwise::ERFC_COEFFS.map(|c| c as f32)
}

/// `exp`'s input clamp: n = round(x·log2 e) stays in [-126, 128]. For n ≥ -125 the scale 2^(n−1) is a normal
/// float; n = -126 (x below about -86.99, e^x below 1.7e-38) makes its exponent field 0, so the scale and the
/// result are +0: exp never returns a subnormal, whose use costs a microcode assist per instruction on Intel
/// cores (a masked attention's probabilities were 1e-39 and made its P·V GEMM 5x slower).
pub const EXP_LO: f32 = -87.5;

/// See `EXP_LO`: e^89 overflows to +∞ as e^x does above ln(f32::MAX) ≈ 88.72.
pub const EXP_HI: f32 = 89.0;

/// Added to t's bits in `exp`: 126 (the exponent bias less one) less the magic number's bits.
pub const EXP_BIAS: i32 = 126 - 0x4B40_0000;
