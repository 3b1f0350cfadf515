//! The AVX2 channel-blocked f32 depthwise kernel of small planes: the contract of the AVX-512 kernel in
//! `depthwise_c16_x86.rs` (one call per 16 channels, weights packed `[taps][16]`, 16 biases, the scratch of
//! `DwC16::scratch_bytes`, every input and output layout: planes or a transposed GEMM's block in, planes, row
//! panels or the block out), the 16 channels taken as two halves of eight, each half in the lanes of a `ymm`.
//! The block layouts come from a fat bundle's AVX-512 lowering, which its AVX2 set shares. Per half, all offsets
//! compile-time immediates:
//! 1. zero the border of the padded input block `X[Hp][Wp][8]` in the scratch;
//! 2. transpose the eight input planes into it, eight pixels at a time (eight loads, `transpose8_ymm`, a store
//!    per pixel; a partial last block's load of the half's last plane masked, so nothing past it is read), or
//!    (`in_blocked`) copy the half's lanes of the input block `[H·W][16]`;
//! 3. per output row (a counted loop), groups of up to twelve outputs in accumulators that start at the bias (or
//!    +0.0) and take one `vfmadd231ps` per tap in (ky, kx) order — the tap's eight weights loaded once per group,
//!    the inputs as memory operands — into `O[P][8]`;
//! 4. transpose `O` back into the eight output planes, eight pixels at a time, clamped (NaN kept), the last
//!    block's stores exact (`store_head_ymm`); or (`Panels`) store each channel's eight pixels into a row panel
//!    of a transposed GEMM's packed A, the pixels past P zero; or (`Blocked`) copy `O` clamped into the half's
//!    lanes of the output block `[P][16]`.
//!
//! A 7x7 or 14x14 plane then costs one FMA per tap and output for eight channels, where the row kernel made a
//! call per output row and channel of one or two vectors. Every output is the fma chain from the bias of the
//! row kernels and the Cranelift path (a tap in the padding multiplies a zero there too): bitwise the same.
//!
//! `fn(x: *const f32, w: *const f32, bias: *const f32, out: *mut f32, scratch: *mut f32)` (System V), as the
//! AVX-512 kernel's.

use crate::kernel::depthwise::C16Out;

use super::depthwise_c16_x86::DwC16;
use super::{disp, YMM};
use iced_x86::code_asm::*;

/// Outputs computed together: twelve accumulators, a register for the tap's weights.
const GROUP: usize = 12;

/// Assembles the kernel; `Err` for a shape it does not take (more than `MAX_TAPS` taps, a zero size) or
/// displacements that do not fit.
pub fn assemble(s: &DwC16) -> Result<Vec<u8>, String> {
    let e = |x: IcedError| x.to_string();
    let name = "AVX2 channel-blocked depthwise";
    let [h, w] = s.hw;
    let [kh, kw] = s.kernel;
    let [sh, sw] = s.strides;
    let [oh, ow] = s.out;
    let taps = kh * kw;
    s.check(name)?;
    let [hp, wp] = s.padded();
    let (hw, p) = (h * w, oh * ow);
    // O after X, in floats.
    let o_base = hp * wp * 8;
    let y = |i: usize| YMM[i];
    let mut a = CodeAssembler::new(64).map_err(e)?;
    let mut lanes = a.create_label();
    // rdi x, rsi w, rdx bias, rcx out, r8 scratch; r9 row counter, r10 the X row, r11 the O row.
    for half in 0..2 {
        // 1. Zero the padded block's positions no input pixel lands on.
        a.vxorps(ymm0, ymm0, ymm0).map_err(e)?;
        for q in s.border() {
            a.vmovups(ptr(r8 + disp(name, q * 8)?), ymm0).map_err(e)?;
        }
        // 2. The half's eight input planes, transposed eight pixels at a time; or its lanes of the input block.
        for q in (0..hw).filter(|_| s.in_blocked) {
            if let Some(at) = s.slot(q) {
                let x = y(q % 2);
                a.vmovups(x, ptr(rdi + disp(name, q * 16 + 8 * half)?))
                    .map_err(e)?;
                a.vmovups(ptr(r8 + disp(name, at * 8)?), x).map_err(e)?;
            }
        }
        for p0 in (0..hw).step_by(8).filter(|_| !s.in_blocked) {
            let n = (hw - p0).min(8);
            if n < 8 {
                // ymm15: the lanes below n (lane index < n).
                a.vmovups(ymm15, ptr(lanes)).map_err(e)?;
                a.mov(eax, n as u32).map_err(e)?;
                a.vmovd(xmm14, eax).map_err(e)?;
                a.vpbroadcastd(ymm14, xmm14).map_err(e)?;
                a.vpcmpgtd(ymm15, ymm14, ymm15).map_err(e)?;
            }
            for c in 0..8 {
                let src = ptr(rdi + disp(name, (8 * half + c) * hw + p0)?);
                // Past a plane's last pixel lies the next plane, except after the half's last one.
                if n < 8 && c == 7 {
                    a.vmaskmovps(y(c), ymm15, src).map_err(e)?;
                } else {
                    a.vmovups(y(c), src).map_err(e)?;
                }
            }
            super::transpose8_ymm(&mut a).map_err(e)?;
            for j in 0..n {
                if let Some(at) = s.slot(p0 + j) {
                    a.vmovups(ptr(r8 + disp(name, at * 8)?), y(8 + j))
                        .map_err(e)?;
                }
            }
        }
        // 3. The fma chains, a row of outputs per iteration.
        a.mov(r10, r8).map_err(e)?;
        a.lea(r11, ptr(r8 + disp(name, o_base)?)).map_err(e)?;
        a.mov(r9, oh as u64).map_err(e)?;
        let mut row = a.create_label();
        a.set_label(&mut row).map_err(e)?;
        for ox0 in (0..ow).step_by(GROUP) {
            let n = (ow - ox0).min(GROUP);
            for j in 0..n {
                if s.bias {
                    a.vmovups(y(j), ptr(rdx + disp(name, 8 * half)?))
                        .map_err(e)?;
                } else {
                    a.vxorps(y(j), y(j), y(j)).map_err(e)?;
                }
            }
            for t in 0..taps {
                let (ky, kx) = (t / kw, t % kw);
                let wreg = y(12 + t % 2);
                a.vmovups(wreg, ptr(rsi + disp(name, 16 * t + 8 * half)?))
                    .map_err(e)?;
                for j in 0..n {
                    let off = disp(name, (ky * wp + (ox0 + j) * sw + kx) * 8)?;
                    a.vfmadd231ps(y(j), wreg, ptr(r10 + off)).map_err(e)?;
                }
            }
            for j in 0..n {
                let off = disp(name, (ox0 + j) * 8)?;
                a.vmovups(ptr(r11 + off), y(j)).map_err(e)?;
            }
        }
        a.add(r10, disp(name, sh * wp * 8)?).map_err(e)?;
        a.add(r11, disp(name, ow * 8)?).map_err(e)?;
        a.dec(r9).map_err(e)?;
        a.jnz(row).map_err(e)?;
        // 4. The output block, transposed back eight pixels at a time, clamped, stored; or, `Blocked`, copied
        // out clamped.
        if s.layout == C16Out::Blocked {
            let (lo, hi) =
                super::clamp_bounds_ymm(&mut a, (s.lo, s.hi), [ymm1, ymm2]).map_err(e)?;
            for q in 0..p {
                a.vmovups(ymm0, ptr(r8 + disp(name, o_base + q * 8)?))
                    .map_err(e)?;
                super::clamp_keep_nan(&mut a, ymm0, lo, hi).map_err(e)?;
                a.vmovups(ptr(rcx + disp(name, q * 16 + 8 * half)?), ymm0)
                    .map_err(e)?;
            }
        }
        for q0 in (0..p).step_by(8).filter(|_| s.layout != C16Out::Blocked) {
            let n = (p - q0).min(8);
            for j in 0..8 {
                // Rows past `p` are loaded from the scratch (never stored).
                let off = disp(name, o_base + (q0 + j.min(n - 1)) * 8)?;
                a.vmovups(y(j), ptr(r8 + off)).map_err(e)?;
            }
            super::transpose8_ymm(&mut a).map_err(e)?;
            let (lo, hi) =
                super::clamp_bounds_ymm(&mut a, (s.lo, s.hi), [ymm0, ymm1]).map_err(e)?;
            if let (C16Out::Panels(_), true) = (s.layout, n < 8) {
                // ymm3: the lanes below n, the pixels that exist.
                a.vmovups(ymm3, ptr(lanes)).map_err(e)?;
                a.mov(eax, n as u32).map_err(e)?;
                a.vmovd(xmm4, eax).map_err(e)?;
                a.vpbroadcastd(ymm4, xmm4).map_err(e)?;
                a.vpcmpgtd(ymm3, ymm4, ymm3).map_err(e)?;
            }
            for c in 0..8 {
                let x = y(8 + c);
                super::clamp_keep_nan(&mut a, x, lo, hi).map_err(e)?;
                if let C16Out::Panels(k) = s.layout {
                    // Panel q0/8 holds pixel q0 + j of channel c at float `(q0/8)·8k + 8c + j`; the pixels past
                    // p are zeroed, so the panel's padding rows are +0.0.
                    if n < 8 {
                        a.vandps(x, x, ymm3).map_err(e)?;
                    }
                    let dst = ptr(rcx + disp(name, q0 / 8 * 8 * k + 8 * (8 * half + c))?);
                    a.vmovups(dst, x).map_err(e)?;
                    continue;
                }
                let dst = ptr(rcx + disp(name, (8 * half + c) * p + q0)?);
                super::store_head_ymm(&mut a, dst, x, n, ymm2).map_err(e)?;
            }
        }
    }
    a.vzeroupper().map_err(e)?;
    a.ret().map_err(e)?;
    super::lane_table(&mut a, &mut lanes).map_err(e)?;
    a.assemble(0).map_err(e)
}

#[cfg(all(test, target_arch = "x86_64", target_os = "linux"))]
mod tests {
    use super::super::depthwise_c16_x86::tests::check_planes;
    use super::super::test_exec::skip_without_avx2;
    use super::*;

    /// The AVX-512 kernel's cases in every layout, bitwise against the fma chain (NaN, clamps, guard pages).
    #[test]
    fn planes_match_the_fma_chain() {
        if skip_without_avx2("AVX2 channel-blocked depthwise kernel") {
            return;
        }
        check_planes(
            assemble,
            &[C16Out::Planes, C16Out::Panels(48), C16Out::Blocked],
        );
    }
}
