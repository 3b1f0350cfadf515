//! The AVX-512 channel-blocked f32 depthwise kernel for small planes (`ops/depthwise.rs` picks it): one call
//! computes 16 channels' whole output planes with the 16 channels in the lanes of a `zmm`, so a 7x7 or 14x14
//! plane costs one FMA per tap and output for all 16 channels instead of a row-kernel call per output row and
//! channel (EfficientNet's 5x5 layers on 7x7 planes ran at ~27 GFLOP/s that way).
//!
//! Phases, all offsets compile-time immediates:
//! 1. zero the border of the padded input block `X[Hp][Wp][16]` in the scratch (`Hp = (oh−1)·sh + kh`,
//!    `Wp = (ow−1)·sw + kw`: exactly what the outputs read);
//! 2. transpose the 16 NCHW input planes into it, 16 pixels at a time (16 loads, `transpose16`, a store per
//!    pixel; the last block's loads masked so nothing past a plane is read), or (`in_blocked`) copy the pixels
//!    of an input block `[H·W][16]` that a transposed GEMM wrote (`GemmSpec::c_k16`) into it;
//! 3. per output row (a counted loop), groups of up to 8 outputs in accumulators that start at the bias (or
//!    +0.0) and take one `vfmadd231ps` per tap in (ky, kx) order — the taps' 16-channel weights held in
//!    registers, the inputs as memory operands — into `O[P][16]`; with a `Blocked` output and registers to
//!    spare (3x3), clamped (NaN kept) and stored straight into `out` as `[P][16]`, which ends the kernel;
//! 4. transpose `O` back into the 16 output planes, 16 pixels at a time, clamping (NaN kept) before masked stores;
//!    or (`Panels`) store each channel's 8-pixel halves into the two row panels of a transposed GEMM's packed A;
//!    or (`Blocked`, 5x5) copy `O` to `out` clamped.
//!
//! The `Blocked` output is for a transposed GEMM that reads it as A `[K/16][P][16]` (`MicroSpec::a_k16`): its
//! transpose was half the kernel's time on MobileNetV2's 14x14 planes (Intel Xeon, Emerald Rapids: 37 -> 22 µs
//! per 14x14x384 layer at 1 thread).
//!
//! Every output is the same fma chain from the bias as the row kernels and the Cranelift path compute (a tap in
//! the padding multiplies a zero there too), so results are bitwise identical to them.
//!
//! `fn(x: *const f32, w: *const f32, bias: *const f32, out: *mut f32, scratch: *mut f32)` (System V): `x` and
//! `out` are channel c0's planes, `w` the group's `[kh·kw][16]` packed weights, `bias` 16 floats (unused
//! without a bias), `scratch` [`DwC16::scratch_bytes`] bytes, 64-byte aligned.

use super::{disp, transpose16, ZMM};
use crate::kernel::conv::reach;
use crate::kernel::depthwise::{C16Out, DepthwiseSpec};
use iced_x86::code_asm::*;

/// Most taps: each tap's weights live in a register, leaving at least 7 for accumulators.
pub const MAX_TAPS: usize = 25;
/// Most outputs computed together (accumulators).
const GROUP: usize = 8;

/// The compile-time shape of a channel-blocked depthwise kernel (dilation 1).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DwC16 {
    /// Input height and width.
    pub hw: [usize; 2],
    /// Kernel (KH, KW).
    pub kernel: [usize; 2],
    /// Strides.
    pub strides: [usize; 2],
    /// Pads top, left.
    pub pads: [usize; 2],
    /// Output height and width.
    pub out: [usize; 2],
    /// Whether `bias` points to the 16 channels' biases (else the chains start at +0.0).
    pub bias: bool,
    /// Lower clamp (f32 bits).
    pub lo: Option<u32>,
    /// Upper clamp (f32 bits).
    pub hi: Option<u32>,
    /// How the output is laid out.
    pub layout: C16Out,
    /// The input is the block `[H·W][16]` (a transposed GEMM's `c_k16` output), not 16 planes.
    pub in_blocked: bool,
}

impl DwC16 {
    /// The padded input block `[Hp, Wp]`: the rows and columns the outputs read.
    pub fn padded(&self) -> [usize; 2] {
        [0, 1].map(|i| reach(self.out[i], self.kernel[i].max(1), self.strides[i], 1))
    }
    /// Scratch bytes: the padded input block and, unless the outputs go straight to `out`
    /// ([`DwC16::stores_direct`]), the output block (pixels rounded up to 16), 64 per pixel.
    pub fn scratch_bytes(&self) -> usize {
        let [hp, wp] = self.padded();
        let o = match self.stores_direct() {
            true => 0,
            false => (self.out[0] * self.out[1]).next_multiple_of(16),
        };
        (hp * wp + o) * 64
    }
    /// Outputs computed together (accumulators): eight, fewer where the taps' registers leave less room.
    fn group(&self) -> usize {
        let taps = self.kernel[0] * self.kernel[1];
        GROUP.min(32usize.saturating_sub(taps)).min(self.out[1])
    }
    /// Whether the fma chains store their clamped results straight into a `Blocked` output: when the taps, the
    /// accumulators and three registers above them (the clamp bounds in zmm29–30, zmm31 spare) fit the register file (3x3 kernels; a
    /// 5x5 one keeps seven accumulators and copies the block out after).
    pub fn stores_direct(&self) -> bool {
        let taps = self.kernel[0] * self.kernel[1];
        self.layout == C16Out::Blocked && taps + self.group() + 3 <= 32
    }
    /// `Err` naming `kernel` for a shape no channel-blocked kernel takes: no taps or more than [`MAX_TAPS`], an
    /// empty plane, a zero stride.
    pub(super) fn check(&self, kernel: &str) -> Result<(), String> {
        let taps = self.kernel[0] * self.kernel[1];
        let [h, w] = self.hw;
        let [oh, ow] = self.out;
        let ok =
            (1..=MAX_TAPS).contains(&taps) && h * w * oh * ow > 0 && !self.strides.contains(&0);
        ok.then_some(())
            .ok_or_else(|| format!("{kernel}: unsupported shape {self:?}"))
    }
    /// The positions `py·Wp + px` of the padded block that no input pixel lands on (its border, zeroed).
    pub(super) fn border(&self) -> impl Iterator<Item = usize> + '_ {
        let [hp, wp] = self.padded();
        let ([h, w], [pt, pl]) = (self.hw, self.pads);
        (0..hp * wp).filter(move |&q| {
            let (py, px) = (q / wp, q % wp);
            !((pt..pt + h).contains(&py) && (pl..pl + w).contains(&px))
        })
    }
    /// The padded block's position of input pixel `q`, if the outputs read it.
    pub(super) fn slot(&self, q: usize) -> Option<usize> {
        let [hp, wp] = self.padded();
        let (py, px) = (q / self.hw[1] + self.pads[0], q % self.hw[1] + self.pads[1]);
        (py < hp && px < wp).then_some(py * wp + px)
    }
}

/// Assembles the kernel; `Err` for a shape it does not take (more than [`MAX_TAPS`] taps, a zero size) or
/// displacements that do not fit.
pub fn assemble(s: &DwC16) -> Result<Vec<u8>, String> {
    let e = |x: IcedError| x.to_string();
    let name = "channel-blocked depthwise";
    let [h, w] = s.hw;
    let [kh, kw] = s.kernel;
    let [sh, sw] = s.strides;
    let [oh, ow] = s.out;
    let taps = kh * kw;
    s.check(name)?;
    let [hp, wp] = s.padded();
    let (hw, p) = (h * w, oh * ow);
    let o_base = hp * wp * 16;
    let z = |i: usize| ZMM[i];
    let mut a = CodeAssembler::new(64).map_err(e)?;
    // rdi x, rsi w, rdx bias, rcx out, r8 scratch; r9 row counter, r10 the X row, r11 the O row.
    // 1. Zero the padded block's positions no input pixel lands on.
    a.vpxord(z(0), z(0), z(0)).map_err(e)?;
    for q in s.border() {
        a.vmovups(zmmword_ptr(r8 + disp(name, q * 16)?), z(0))
            .map_err(e)?;
    }
    // 2. The input planes, transposed 16 pixels at a time; or the input block's pixels copied.
    for q in (0..hw).filter(|_| s.in_blocked) {
        if let Some(at) = s.slot(q) {
            let x = z(q % 2);
            a.vmovups(x, zmmword_ptr(rdi + disp(name, q * 16)?))
                .map_err(e)?;
            a.vmovups(zmmword_ptr(r8 + disp(name, at * 16)?), x)
                .map_err(e)?;
        }
    }
    for p0 in (0..hw).step_by(16).filter(|_| !s.in_blocked) {
        let n = (hw - p0).min(16);
        if n < 16 {
            a.mov(eax, (1u32 << n) - 1).map_err(e)?;
            a.kmovw(k1, eax).map_err(e)?;
        }
        for c in 0..16 {
            let src = zmmword_ptr(rdi + disp(name, c * hw + p0)?);
            if n < 16 {
                a.vmovups(z(c).k1().z(), src).map_err(e)?;
            } else {
                a.vmovups(z(c), src).map_err(e)?;
            }
        }
        transpose16(&mut a).map_err(e)?;
        for j in 0..n {
            if let Some(at) = s.slot(p0 + j) {
                a.vmovups(zmmword_ptr(r8 + disp(name, at * 16)?), z(j))
                    .map_err(e)?;
            }
        }
    }
    // 3. The fma chains, a row of outputs per iteration.
    for t in 0..taps {
        a.vmovups(z(t), zmmword_ptr(rsi + disp(name, t * 16)?))
            .map_err(e)?;
    }
    let group = s.group();
    let direct = s.stores_direct();
    a.mov(r10, r8).map_err(e)?;
    // With direct stores, the clamp bounds above the taps and accumulators.
    let mut bounds = (None, None);
    if direct {
        bounds = super::clamp_bounds(&mut a, (s.lo, s.hi), [zmm29, zmm30]).map_err(e)?;
        a.mov(r11, rcx).map_err(e)?;
    } else {
        a.lea(r11, ptr(r8 + disp(name, o_base)?)).map_err(e)?;
    }
    a.mov(r9, oh as u64).map_err(e)?;
    let mut row = a.create_label();
    a.set_label(&mut row).map_err(e)?;
    for ox0 in (0..ow).step_by(group) {
        let n = (ow - ox0).min(group);
        let acc = |j: usize| z(taps + j);
        for j in 0..n {
            if s.bias {
                a.vmovups(acc(j), zmmword_ptr(rdx)).map_err(e)?;
            } else {
                a.vpxord(acc(j), acc(j), acc(j)).map_err(e)?;
            }
        }
        for t in 0..taps {
            let (ky, kx) = (t / kw, t % kw);
            for j in 0..n {
                let off = disp(name, (ky * wp + (ox0 + j) * sw + kx) * 16)?;
                a.vfmadd231ps(acc(j), z(t), zmmword_ptr(r10 + off))
                    .map_err(e)?;
            }
        }
        for j in 0..n {
            if direct {
                super::clamp_keep_nan(&mut a, acc(j), bounds.0, bounds.1).map_err(e)?;
            }
            let off = disp(name, (ox0 + j) * 16)?;
            a.vmovups(zmmword_ptr(r11 + off), acc(j)).map_err(e)?;
        }
    }
    a.add(r10, disp(name, sh * wp * 16)?).map_err(e)?;
    a.add(r11, disp(name, ow * 16)?).map_err(e)?;
    a.dec(r9).map_err(e)?;
    a.jnz(row).map_err(e)?;
    // 4. The output block, transposed back 16 pixels at a time, clamped, stored; or, `Blocked` without direct
    // stores, copied out clamped.
    if s.layout == C16Out::Blocked && !direct {
        let (lo, hi) = super::clamp_bounds(&mut a, (s.lo, s.hi), [zmm27, zmm28]).map_err(e)?;
        for q in 0..p {
            let off = disp(name, q * 16)?;
            a.vmovups(zmm0, zmmword_ptr(r8 + disp(name, o_base + q * 16)?))
                .map_err(e)?;
            super::clamp_keep_nan(&mut a, zmm0, lo, hi).map_err(e)?;
            a.vmovups(zmmword_ptr(rcx + off), zmm0).map_err(e)?;
        }
    }
    let transposes = matches!(s.layout, C16Out::Planes | C16Out::Panels(_));
    for q0 in (0..p).step_by(16).filter(|_| transposes) {
        let n = (p - q0).min(16);
        for j in 0..16 {
            // Rows past `p` are the block's padding: loaded, never stored.
            let off = disp(name, o_base + (q0 + j) * 16)?;
            a.vmovups(z(j), zmmword_ptr(r8 + off)).map_err(e)?;
        }
        transpose16(&mut a).map_err(e)?;
        let (lo, hi) = super::clamp_bounds(&mut a, (s.lo, s.hi), [zmm27, zmm28]).map_err(e)?;
        if n < 16 {
            a.mov(eax, (1u32 << n) - 1).map_err(e)?;
            a.kmovw(k1, eax).map_err(e)?;
        }
        for c in 0..16 {
            let x = z(c);
            super::clamp_keep_nan(&mut a, x, lo, hi).map_err(e)?;
            if let C16Out::Panels(k) = s.layout {
                // Panel q0/8 + h holds pixel q0 + 8h + j of channel c at float `(q0/8 + h)·8k + 8c + j`; the
                // pixels past p are zeroed, so the panel's padding rows are +0.0.
                if n < 16 {
                    a.vmovups(x.k1().z(), x).map_err(e)?;
                }
                for h in 0..n.div_ceil(8) {
                    let dst = ymmword_ptr(rcx + disp(name, (q0 / 8 + h) * 8 * k + 8 * c)?);
                    a.vextractf32x8(dst, x, h as u32).map_err(e)?;
                }
                continue;
            }
            let dst = zmmword_ptr(rcx + disp(name, c * p + q0)?);
            if n < 16 {
                a.vmovups(dst.k1(), x).map_err(e)?;
            } else {
                a.vmovups(dst, x).map_err(e)?;
            }
        }
    }
    a.vzeroupper().map_err(e)?;
    a.ret().map_err(e)?;
    a.assemble(0).map_err(e)
}

/// Most pixels of an input or output plane the channel-blocked kernel takes (14x14).
const C16_MAX_PIXELS: usize = 196;

/// The channel-blocked kernel's shape (this file's, on AVX2 `depthwise_c16_avx2.rs`'s, which
/// lowering gives only outputs of at most 64 pixels: `lower/cnn::c16_pays`) when it takes this convolution: C a
/// multiple of 16, dilation 1, at most `MAX_TAPS` taps, an activation that is a clamp, input and output planes of
/// at most `C16_MAX_PIXELS` and scratch within 256 KiB of stack. On small planes it beats the row kernel by far: a
/// row-kernel call per output row and channel does little work there. A strided layer from a larger plane
/// transposes four input pixels per output into and out of its scratch: 28x28 -> 14x14 3x3 layers took twice as
/// long that way as in the row kernel (EfficientNet-Lite0's 73 -> 37 µs, MobileNetV2's 62 -> 43 µs at 1 thread,
/// Intel Xeon), while 14x14 -> 7x7 ones run 2-3x faster in this kernel (the row kernel's 7-wide rows).
pub fn c16(s: &DepthwiseSpec) -> Option<DwC16> {
    let (lo, hi) = crate::kernel::gemm::clamp_bits(s.act)?;
    let spec = DwC16 {
        hw: s.hw,
        kernel: s.kernel,
        strides: s.strides,
        pads: s.pads,
        out: s.out,
        bias: s.has_bias,
        lo,
        hi,
        layout: s.out_layout,
        in_blocked: s.in_blocked,
    };
    let taps = s.kernel[0] * s.kernel[1];
    let fits = s.c.is_multiple_of(16)
        && s.dilations == [1, 1]
        && (1..=MAX_TAPS).contains(&taps)
        && (1..=C16_MAX_PIXELS).contains(&(s.out[0] * s.out[1]))
        && (1..=C16_MAX_PIXELS).contains(&(s.hw[0] * s.hw[1]))
        && spec.scratch_bytes() <= 256 << 10;
    fits.then_some(spec)
}

#[cfg(all(test, target_arch = "x86_64", target_os = "linux"))]
pub(super) mod tests {
    use super::super::test_exec::{clamp, exec, guarded, pattern, skip_without_avx512};
    use super::*;

    type Kernel = extern "sysv64" fn(*const f32, *const f32, *const f32, *mut f32, *mut f32);

    /// The kernel against the fma chain from the bias over zero-padded taps, bitwise, with the clamp (NaN
    /// kept) — over plane sizes around 16-pixel blocks, strides 1 and 2, asymmetric pads, 3x3 and 5x5; the
    /// output planes end on a guard page. Every case runs a second time writing row panels (`Panels`: the
    /// group as channels 16..32 of 48, so panel rows hold other groups' channels around it, which must stay
    /// untouched), whose padding pixels must be +0.0, and a third reading and writing `[P][16]` blocks
    /// (`in_blocked`, `Blocked`: stored straight from the fma chains for 3x3 kernels, copied out for 5x5).
    #[test]
    fn planes_match_the_fma_chain() {
        if skip_without_avx512("channel-blocked depthwise kernel") {
            return;
        }
        check_planes(
            assemble,
            &[C16Out::Planes, C16Out::Panels(48), C16Out::Blocked],
        );
    }

    /// Runs every case of `planes_match_the_fma_chain` through `assemble` in each of `layouts`.
    pub(in super::super) fn check_planes(
        assemble: impl Fn(&DwC16) -> Result<Vec<u8>, String>,
        layouts: &[C16Out],
    ) {
        let cases = [
            ([7, 7], [5, 5], [1, 1], [2, 2], [7, 7]),
            ([14, 14], [3, 3], [2, 2], [0, 0], [7, 7]),
            ([14, 14], [5, 5], [2, 2], [1, 1], [6, 6]),
            ([5, 9], [3, 3], [1, 1], [1, 0], [4, 8]),
            ([4, 4], [1, 1], [1, 1], [0, 0], [4, 4]),
            ([3, 6], [5, 3], [1, 2], [2, 1], [3, 3]),
        ];
        let nl = layouts.len();
        for (i, &(hw, kernel, strides, pads, out)) in cases
            .iter()
            .flat_map(|c| std::iter::repeat_n(c, nl))
            .enumerate()
        {
            let layout = layouts[i % nl];
            let panels = match layout {
                C16Out::Panels(k) => Some(k),
                _ => None,
            };
            let i = i / nl;
            let s = DwC16 {
                hw,
                kernel,
                strides,
                pads,
                out,
                bias: i.is_multiple_of(2),
                lo: (i % 3 != 2).then(|| 0.0f32.to_bits()),
                hi: i.is_multiple_of(3).then(|| 1.5f32.to_bits()),
                layout,
                in_blocked: layout == C16Out::Blocked,
            };
            let f: Kernel = unsafe { std::mem::transmute(exec(&assemble(&s).unwrap())) };
            let taps = kernel[0] * kernel[1];
            let (np, p) = (hw[0] * hw[1], out[0] * out[1]);
            let x = guarded(16 * np);
            let mut xv: Vec<f32> = (0..16 * np).map(pattern).collect();
            xv[3] = f32::NAN;
            let wv: Vec<f32> = (0..16 * taps).map(|i| pattern(i + 7) * 0.3).collect();
            let bv: Vec<f32> = (0..16).map(|i| pattern(i + 50)).collect();
            let packed = super::super::pack16(&wv, 16, taps);
            let p8 = p.next_multiple_of(8);
            let o_len = if panels.is_some() { p8 * 48 } else { 16 * p };
            let o = guarded(o_len);
            let mut scratch = vec![0u8; s.scratch_bytes() + 64];
            let spad = scratch
                .as_mut_ptr()
                .wrapping_add(scratch.as_ptr().align_offset(64));
            // SAFETY: x holds 16 planes; o 16 output planes; the scratch its size, 64-byte aligned.
            unsafe {
                // The planes, or (`in_blocked`) the same values as the block [np][16].
                let xin: Vec<f32> = match s.in_blocked {
                    true => (0..16 * np).map(|i| xv[i % 16 * np + i / 16]).collect(),
                    false => xv.clone(),
                };
                std::ptr::copy_nonoverlapping(xin.as_ptr(), x, xin.len());
                std::slice::from_raw_parts_mut(o, o_len).fill(7.0);
                let dst = if panels.is_some() { o.add(16 * 8) } else { o };
                f(x, packed.as_ptr(), bv.as_ptr(), dst, spad as *mut f32);
            }
            let got = unsafe { std::slice::from_raw_parts(o, o_len) };
            // Where output (channel c, pixel q) lands.
            let at = |c: usize, q: usize| match layout {
                C16Out::Panels(k) => q / 8 * 8 * k + 8 * (16 + c) + q % 8,
                C16Out::Planes => c * p + q,
                C16Out::Blocked => q * 16 + c,
            };
            if panels.is_some() {
                for q in 0..p8 {
                    for cc in (0..16).chain(32..48) {
                        assert_eq!(
                            got[q / 8 * 8 * 48 + 8 * cc + q % 8],
                            7.0,
                            "case {i}: other groups"
                        );
                    }
                }
                for (c, q) in (p..p8).flat_map(|q| (0..16).map(move |c| (c, q))) {
                    assert_eq!(got[at(c, q)].to_bits(), 0, "case {i}: panel padding");
                }
            }
            for c in 0..16 {
                for oy in 0..out[0] {
                    for ox in 0..out[1] {
                        let mut acc = if s.bias { bv[c] } else { 0.0 };
                        for t in 0..taps {
                            let (y, xx) = (
                                (oy * strides[0] + t / kernel[1]) as isize - pads[0] as isize,
                                (ox * strides[1] + t % kernel[1]) as isize - pads[1] as isize,
                            );
                            let inside = (0..hw[0] as isize).contains(&y)
                                && (0..hw[1] as isize).contains(&xx);
                            let v = if inside {
                                xv[c * np + y as usize * hw[1] + xx as usize]
                            } else {
                                0.0
                            };
                            acc = v.mul_add(wv[c * taps + t], acc);
                        }
                        let want = clamp(acc, s.lo.map(|_| 0.0), s.hi.map(|_| 1.5));
                        let g = got[at(c, oy * out[1] + ox)];
                        assert!(
                            g.to_bits() == want.to_bits() || (g.is_nan() && want.is_nan()),
                            "case {i} c{c} ({oy},{ox}): {g} vs {want}"
                        );
                    }
                }
            }
        }
    }
}
