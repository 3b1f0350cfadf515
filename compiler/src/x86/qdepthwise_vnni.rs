//! The VNNI int8 depthwise row kernel (AVX-512 VNNI + VBMI), the fast twin of `quant_x86.rs::assemble_dw_row`
//! with the same `fn(x, y, n, w, bias, scale)` contract over a zero-point-padded plane. Per 16 outputs and four
//! taps of one kernel row it does two instructions: a `vpermb` that gathers, from a 64-byte window at the taps'
//! first byte, the dword `(x[s·i], x[s·i + d], x[s·i + 2d], x[s·i + 3d])` for each output `i` (horizontal stride
//! `s`, dilation `d`; any `s`, `d` with `15·s + 3·d < 64`), and a `vpdpbusd` with the four taps broadcast, which
//! sums the four u8 × s8 products exactly into the output's i32. The weights come packed at compile time
//! (`kernel::depthwise::pack_vnni`): per channel and kernel row `kw.div_ceil(4)` quads of taps, zero past `kw`; and the bias with the
//! input zero point folded in (`bias - zp · Σw`, so the window's raw bytes are multiplied, and padding bytes,
//! which are the zero point, still add `zp · w - zp · w = 0`). i8 inputs are flipped to u8 (`^ 0x80`) after the
//! gather, with `zp + 128` folded instead. The epilogue is the reference requantisation, as in the other kernels.

use super::quant_x86::DwRowSpec;
use super::ZMM;
use crate::kernel::depthwise::{vnni_quads as quads, VNNI_GROUP as GROUP};
use iced_x86::code_asm::*;

/// Quads kept in registers (`zmm10..zmm25`); further ones are broadcast from the packed weights.
const REG_QUADS: usize = 16;

/// Bytes the kernel may read past the last byte a computed output's taps read in the plane (the second group's
/// window of a step whose outputs all lie in the first: up to 16 outputs at stride 4, then 64 bytes): the
/// padded plane's slack.
pub const SLACK: usize = 2 * GROUP * 4;

/// Assembles the kernel; `Err` naming it for a shape it does not take.
pub fn assemble(s: &DwRowSpec) -> Result<Vec<u8>, String> {
    let e = |x: IcedError| x.to_string();
    s.check(super::quant_x86::MAX_TAPS, 4, "VNNI depthwise row kernel")?;
    if !(1..=4).contains(&s.stride) || (GROUP - 1) * s.stride + 3 * s.dilations[1] >= 64 {
        return Err(format!(
            "VNNI depthwise row kernel: stride / dilation out of range: {s:?}"
        ));
    }
    let [kh, kw] = s.kernel;
    let nq = quads(kw);
    let mut a = CodeAssembler::new(64).map_err(e)?;
    let mut index = a.create_label();
    let go = |a: &mut CodeAssembler| -> Result<(), IcedError> {
        // zmm6 = the window permutation, zmm7/8 = lo - zp / hi - zp (f32), zmm9 = zp (dwords), zmm10.. = quads,
        // zmm26 = bias, zmm27 = scale, zmm28 = 0x80 bytes (i8 input).
        a.vmovdqu64(zmm6, zmmword_ptr(index))?;
        let (zp, (lo, hi), y_signed) = s.y;
        for (reg, bits) in [
            (zmm7, ((lo as f64 - zp as f64) as f32).to_bits()),
            (zmm8, ((hi as f64 - zp as f64) as f32).to_bits()),
            (zmm9, zp as u32),
            (zmm28, 0x8080_8080),
        ] {
            super::broadcast_bits(a, reg, bits)?;
        }
        for q in 0..(kh * nq).min(REG_QUADS) {
            a.vpbroadcastd(ZMM[10 + q], dword_ptr(rcx + 4 * q as i32))?;
        }
        a.vpbroadcastd(zmm26, dword_ptr(r8))?;
        a.vpbroadcastd(zmm27, dword_ptr(r9))?;
        // One step of two groups, two accumulators each (zmm0/1 and zmm2/3); `masked`: k2 / k3 select the
        // groups' outputs to store.
        let step = |a: &mut CodeAssembler, masked: bool| -> Result<(), IcedError> {
            for acc in [zmm0, zmm1, zmm2, zmm3] {
                a.vpxord(acc, acc, acc)?;
            }
            for ky in 0..kh {
                for q in 0..nq {
                    let t = ky * nq + q;
                    let off = ky * s.dilations[0] * s.w + 4 * q * s.dilations[1];
                    for g in 0..2 {
                        let win = ZMM[4 + g];
                        let at = (off + g * GROUP * s.stride) as i32;
                        a.vpermb(win, zmm6, zmmword_ptr(rdi + at))?;
                        if s.x.0 {
                            a.vpxord(win, win, zmm28)?;
                        }
                        let acc = ZMM[2 * g + t % 2];
                        if t < REG_QUADS {
                            a.vpdpbusd(acc, win, ZMM[10 + t])?;
                        } else {
                            a.vpdpbusd(acc, win, dword_bcst(rcx + 4 * t as i32))?;
                        }
                    }
                }
            }
            for g in 0..2 {
                let (x, other) = (ZMM[2 * g], ZMM[2 * g + 1]);
                a.vpaddd(x, x, other)?;
                let dst = xmmword_ptr(rsi + (g * GROUP) as i32);
                let dst = match (masked, g) {
                    (false, _) => dst,
                    (true, 0) => dst.k2(),
                    (true, _) => dst.k3(),
                };
                super::quant_x86::requant_store(
                    a,
                    x,
                    &super::quant_x86::DW_REQUANT,
                    dst,
                    y_signed,
                )?;
            }
            Ok(())
        };
        let (mut top, mut tail, mut done) = (a.create_label(), a.create_label(), a.create_label());
        a.set_label(&mut top)?;
        a.cmp(rdx, 2 * GROUP as i32)?;
        a.jb(tail)?;
        step(a, false)?;
        a.add(rdi, (2 * GROUP * s.stride) as i32)?;
        a.add(rsi, 2 * GROUP as i32)?;
        a.sub(rdx, 2 * GROUP as i32)?;
        a.jmp(top)?;
        a.set_label(&mut tail)?;
        a.test(rdx, rdx)?;
        a.jz(done)?;
        // k2 / k3: the first n (< 32) outputs, split in halves.
        a.mov(r11d, u32::MAX)?;
        a.bzhi(eax, r11d, edx)?;
        a.kmovd(k2, eax)?;
        a.kshiftrd(k3, k2, GROUP as u32)?;
        step(a, true)?;
        a.set_label(&mut done)?;
        a.vzeroupper()?;
        a.ret()
    };
    go(&mut a).map_err(e)?;
    // The permutation: dword i of the window is bytes (s·i + d·j), j = 0..3.
    let idx: Vec<u8> = (0..GROUP)
        .flat_map(|i| (0..4).map(move |j| (s.stride * i + s.dilations[1] * j) as u8))
        .collect();
    a.set_label(&mut index).map_err(e)?;
    a.db(&idx).map_err(e)?;
    a.assemble(0).map_err(e)
}
