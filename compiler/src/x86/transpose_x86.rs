//! The AVX-512 transposing epilogue of a convolution computed transposed (`lower/cnn/transposed.rs`): the GEMM wrote
//! `Cᵀ [P, M]` (pixels as rows, so narrow planes waste no tile columns, its row count padded to a multiple of
//! 16); this kernel writes 16 output channel rows `out[c0 .. c0 + 16][0..P]` from 16x16 blocks of `Cᵀ`
//! transposed in registers (`vunpck[lh]ps`, `vunpck[lh]pd`, two rounds of `vshuff32x4`), adding the residual
//! rows and applying the clamp of the fused activation (NaN kept) when the GEMM could not — the same operations
//! in the same order as the untransposed epilogue, so results are bitwise equal. (A `vgatherdps` version ran at
//! about 6 cycles per element on this machine's Zen 5: too slow to pay.)
//! `fn(src: *const f32, out: *mut f32, residual: *const f32, pixels: u64)` (System V): `src` is `Cᵀ`'s element
//! (0, c0), `out` and `residual` channel c0's rows. The block transpose of the gathering Transpose nodes is
//! `block_transpose/`.

use super::ZMM;
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

/// Assembles the kernel; `Err` when the strides do not fit 32-bit displacements.
pub fn assemble(s: &TransposeOut) -> Result<Vec<u8>, String> {
    let e = |x: IcedError| x.to_string();
    let disp = |floats: usize| super::disp("transposing epilogue", floats);
    let rows: Vec<i32> = (0..16).map(|r| disp(r * s.m)).collect::<Result<_, _>>()?;
    let outs: Vec<i32> = (0..16).map(|c| disp(c * s.p)).collect::<Result<_, _>>()?;
    let block = disp(16 * s.m)?;
    let z = |i: usize| ZMM[i];
    let mut a = CodeAssembler::new(64).map_err(e)?;
    // rdi: Cᵀ at (p0, c0); rsi: out at (c0, p0); rdx: residual at (c0, p0); rcx: pixels (moved to r8).
    // r8: pixels left (rcx is block_mask's scratch).
    a.mov(r8, rcx).map_err(e)?;
    let mut top = a.create_label();
    let mut done = a.create_label();
    a.set_label(&mut top).map_err(e)?;
    a.test(r8, r8).map_err(e)?;
    a.jz(done).map_err(e)?;
    // k1 = the pixels of this block.
    super::block_mask(&mut a, k1, r8).map_err(e)?;
    // 16 pixel rows of 16 channels (rows past the pixels are the scratch's padding: loaded, never stored).
    for (r, &off) in rows.iter().enumerate() {
        a.vmovups(z(r), zmmword_ptr(rdi + off)).map_err(e)?;
    }
    super::transpose16(&mut a).map_err(e)?;
    // zmm27 lo, zmm28 hi, the clamp's bounds (the shuffle temporaries are dead now).
    for (reg, c) in [(zmm27, s.lo), (zmm28, s.hi)] {
        if let Some(bits) = c {
            super::broadcast_bits(&mut a, reg, bits).map_err(e)?;
        }
    }
    for (c, &off) in outs.iter().enumerate() {
        let x = z(c);
        if s.residual {
            a.vaddps(x.k1().z(), x, zmmword_ptr(rdx + off)).map_err(e)?;
        }
        super::clamp_keep_nan(&mut a, x, s.lo.map(|b| (zmm27, b)), s.hi.map(|_| zmm28))
            .map_err(e)?;
        a.vmovups(zmmword_ptr(rsi + off).k1(), x).map_err(e)?;
    }
    a.add(rdi, block).map_err(e)?;
    a.add(rsi, 64).map_err(e)?;
    if s.residual {
        a.add(rdx, 64).map_err(e)?;
    }
    a.sub(r8, 16).map_err(e)?;
    a.jbe(done).map_err(e)?;
    a.jmp(top).map_err(e)?;
    a.set_label(&mut done).map_err(e)?;
    a.vzeroupper().map_err(e)?;
    a.ret().map_err(e)?;
    a.assemble(0).map_err(e)
}

#[cfg(all(test, target_arch = "x86_64", target_os = "linux"))]
pub(crate) mod tests {
    use super::super::test_exec::exec;
    use super::*;

    /// Every pixel count class up to 40 (full blocks, tails), with and without the residual and the clamp,
    /// bitwise against `clamp(Cᵀ[p][c] + R[c][p])` (NaN kept) for 16 channels; nothing stored past the rows.
    #[test]
    fn blocks_match_the_transpose() {
        if !std::arch::is_x86_feature_detected!("avx512f") {
            eprintln!("SKIPPED: AVX-512 transposing epilogue (this CPU or OS cannot run it)");
            return;
        }
        check_transposing_epilogue(|s| assemble(s).unwrap(), 16);
    }

    /// [`blocks_match_the_transpose`]'s cases for a transposing epilogue `build` that writes `channels` rows per
    /// call.
    pub(crate) fn check_transposing_epilogue(
        build: impl Fn(&TransposeOut) -> Vec<u8>,
        channels: usize,
    ) {
        let m = 48;
        for (residual, clamp) in [(false, false), (true, true), (true, false)] {
            for p in [0usize, 1, 15, 16, 17, 33, 40] {
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
