//! The transposing epilogue of a convolution computed transposed (`lower/cnn/transposed.rs`): the GEMM wrote
//! `Cᵀ [P, M]` (pixels as rows, so narrow planes waste no tile columns, its row count padded to a multiple of the
//! lanes); one call writes `LANES` output channel rows `out[c0 ..][0..P]` from lanes x lanes blocks of `Cᵀ`
//! transposed in registers (`Isa::transpose`), adding the residual rows and applying the clamp of the fused
//! activation (NaN kept) when the GEMM could not — the same operations in the same order as the untransposed
//! epilogue, so results are bitwise equal. (A `vgatherdps` version ran at about 6 cycles per element on a Zen 5:
//! too slow to pay.) One family over the `Isa` trait: the loop and the block are written once here; the pixel
//! tail is each ISA's (`Pixels`: a `k1` lane mask on AVX-512 in `avx512.rs`, `vmaskmovps` under a mask read from
//! a sliding window of ones and zeros placed after the code on AVX2 in `avx2.rs`).
//!
//! `fn(src: *const f32, out: *mut f32, residual: *const f32, pixels: u64)` (System V): `src` is `Cᵀ`'s element
//! (0, c0), `out` and `residual` channel c0's rows. Rows of `Cᵀ` past the pixels are the scratch's padding:
//! loaded, never stored. The block transpose of the gathering Transpose nodes is `block_transpose/`.

pub mod avx2;
pub mod avx512;

use super::isa::{Bounds, Isa, R};
use iced_x86::code_asm::*;

/// The compile-time shape of a transposing epilogue.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TransposeOut {
    /// `Cᵀ`'s row stride (the channel count `M`).
    pub m: usize,
    /// Output row length (the pixel count `P`).
    pub p: usize,
    /// Add the residual row.
    pub residual: bool,
    /// Lower clamp (f32 bits).
    pub lo: Option<u32>,
    /// Upper clamp (f32 bits).
    pub hi: Option<u32>,
}

/// An ISA's handling of the epilogue's pixel tail: which register counts the pixels left, the lane mask of a
/// block, the masked residual load and store.
pub trait Pixels: Isa {
    /// What the kernel sets up once and the blocks use.
    type State: Copy;
    /// The register that counts the pixels left.
    const COUNT: AsmRegister64;
    /// Before the loop (the count is in `rcx`).
    fn setup(a: &mut CodeAssembler) -> Result<Self::State, IcedError>;
    /// At the start of a block, before its rows are loaded.
    fn block_mask(a: &mut CodeAssembler) -> R;
    /// After the transpose: the clamp's bounds in registers and the block's pixel mask where the ISA keeps it in
    /// a vector.
    fn bounds(
        a: &mut CodeAssembler,
        s: &TransposeOut,
        st: Self::State,
    ) -> Result<Bounds<Self::V>, IcedError>;
    /// `x += residual[disp]` on the block's pixels.
    fn add_residual(a: &mut CodeAssembler, x: Self::V, disp: i32) -> R;
    /// `out[disp] = x` on the block's pixels.
    fn store_out(a: &mut CodeAssembler, x: Self::V, disp: i32) -> R;
    /// Whether the residual pointer advances with the blocks of an epilogue without a residual.
    const ALWAYS_STEP_RESIDUAL: bool;
    /// After the code.
    fn finish(a: &mut CodeAssembler, st: &mut Self::State) -> R;
}

/// Assembles the epilogue on ISA `I` for `I::LANES` channels per call; `Err` when the strides do not fit 32-bit
/// displacements.
pub fn assemble<I: Pixels>(s: &TransposeOut) -> Result<Vec<u8>, String> {
    let e = |x: IcedError| x.to_string();
    let disp = |floats: usize| super::disp("transposing epilogue", floats);
    let n = I::LANES;
    let rows: Vec<i32> = (0..n).map(|r| disp(r * s.m)).collect::<Result<_, _>>()?;
    let outs: Vec<i32> = (0..n).map(|c| disp(c * s.p)).collect::<Result<_, _>>()?;
    let block = disp(n * s.m)?;
    let step = disp(n)?;
    let mut a = CodeAssembler::new(64).map_err(e)?;
    // rdi: Cᵀ at (p0, c0); rsi: out at (c0, p0); rdx: residual at (c0, p0); I::COUNT: pixels left.
    let mut st = I::setup(&mut a).map_err(e)?;
    let (mut top, mut done) = (a.create_label(), a.create_label());
    a.set_label(&mut top).map_err(e)?;
    a.test(I::COUNT, I::COUNT).map_err(e)?;
    a.jz(done).map_err(e)?;
    I::block_mask(&mut a).map_err(e)?;
    for (r, &off) in rows.iter().enumerate() {
        I::load(&mut a, I::v(r), rdi + off).map_err(e)?;
    }
    let cols = I::transpose(&mut a).map_err(e)?;
    let bounds = I::bounds(&mut a, s, st).map_err(e)?;
    for (c, &off) in outs.iter().enumerate() {
        let x = I::v(cols + c);
        if s.residual {
            I::add_residual(&mut a, x, off).map_err(e)?;
        }
        I::clamp(&mut a, x, bounds).map_err(e)?;
        I::store_out(&mut a, x, off).map_err(e)?;
    }
    a.add(rdi, block).map_err(e)?;
    a.add(rsi, step).map_err(e)?;
    if s.residual || I::ALWAYS_STEP_RESIDUAL {
        a.add(rdx, step).map_err(e)?;
    }
    a.sub(I::COUNT, n as i32).map_err(e)?;
    a.jbe(done).map_err(e)?;
    a.jmp(top).map_err(e)?;
    a.set_label(&mut done).map_err(e)?;
    a.vzeroupper().map_err(e)?;
    a.ret().map_err(e)?;
    I::finish(&mut a, &mut st).map_err(e)?;
    a.assemble(0).map_err(e)
}

#[cfg(all(test, target_arch = "x86_64", target_os = "linux"))]
pub(crate) mod tests {
    use super::super::test_exec::exec;
    use super::*;

    /// Every pixel count class up to 40 (full blocks, tails), with and without the residual and the clamp,
    /// bitwise against `clamp(Cᵀ[p][c] + R[c][p])` (NaN kept) for the `channels` a call of `build` writes;
    /// nothing stored past the rows.
    pub(crate) fn check_transposing_epilogue(
        build: impl Fn(&TransposeOut) -> Vec<u8>,
        channels: usize,
    ) {
        let m = 48;
        for (residual, clamp) in [(false, false), (true, true), (true, false)] {
            for p in [0usize, 1, 7, 8, 9, 15, 16, 17, 33, 40] {
                let spec = TransposeOut {
                    m,
                    p,
                    residual,
                    lo: clamp.then(|| 0.0f32.to_bits()),
                    hi: clamp.then(|| 6.0f32.to_bits()),
                };
                type F = extern "sysv64" fn(*const f32, *mut f32, *const f32, u64);
                // SAFETY: the assembled kernel's System V signature.
                let f: F = unsafe { std::mem::transmute(exec(&build(&spec))) };
                let rows = p.next_multiple_of(16).max(16);
                let mut ct: Vec<f32> = (0..rows * m)
                    .map(|i| ((i * 37 % 101) as f32 - 50.0) * 0.13)
                    .collect();
                if p > 3 {
                    ct[3 * m + 21] = f32::NAN;
                }
                let r: Vec<f32> = (0..16 * p + 16).map(|i| (i as f32 - 7.0) * 0.25).collect();
                for c0 in (0..m).step_by(channels) {
                    let mut out = vec![-1.0f32; channels * p + 16];
                    let res = if residual {
                        r.as_ptr()
                    } else {
                        std::ptr::null()
                    };
                    f(ct[c0..].as_ptr(), out.as_mut_ptr(), res, p as u64);
                    for c in 0..channels {
                        for q in 0..p {
                            let mut want = ct[q * m + c0 + c];
                            if residual {
                                want += r[c * p + q];
                            }
                            if clamp && !want.is_nan() {
                                want = want.clamp(0.0, 6.0);
                            }
                            let got = out[c * p + q];
                            assert!(
                                got.to_bits() == want.to_bits() || (got.is_nan() && want.is_nan()),
                                "p {p} c {} q {q}: {got} vs {want}",
                                c0 + c
                            );
                        }
                    }
                    assert!(
                        out[channels * p..].iter().all(|&v| v == -1.0),
                        "wrote past the rows"
                    );
                }
            }
        }
    }
}
