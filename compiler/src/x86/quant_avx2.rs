//! The AVX2 int8 depthwise row kernel (`x86-64-v3`), the twin of `quant_x86.rs::assemble_dw_row`: the same
//! contract and the same arithmetic, 16 outputs per step in `ymm` registers. AVX2 has no byte masks, so every
//! step is whole: the caller gives it room to read past its last output (the padded plane's slack) and a
//! staging row it may fill up to the next multiple of 16 (`ops::qdepthwise::emit_rows` copies the outputs
//! out). The first 9 taps live in registers, further ones in a stack table of broadcast words.

use super::quant_x86::DwRowSpec;
use super::YMM;
use iced_x86::code_asm::*;

/// The taps the AVX2 kernel keeps in registers (`ymm7..ymm15`).
const REG_TAPS: usize = 9;

/// Assembles the AVX2 depthwise row kernel `fn(x, y, n, w, bias, scale)`: `n.div_ceil(16)` steps of 16
/// outputs. Per step and tap: 16 input bytes widened to words (`vpmov[sz]xbw`; at stride 2, 32 bytes whose
/// even ones are the low halves of 16 words, masked or shifted up and back), minus the zero point, times the tap
/// (`vpmullw`, exact), widened to dwords and summed; then bias, `f32 · scale`, clamp to `[lo - zp, hi - zp]`,
/// round half to even (`vcvtps2dq`), plus the zero point, and a narrowing store of 16 bytes.
pub fn assemble_dw_row(s: &DwRowSpec) -> Result<Vec<u8>, String> {
    let e = |x: IcedError| x.to_string();
    s.check(super::quant_x86::MAX_TAPS, 2, "AVX2 depthwise row kernel")?;
    let spilled = (s.kernel[0] * s.kernel[1]).saturating_sub(REG_TAPS);
    let [kh, kw] = s.kernel;
    let taps = kh * kw;
    let mut a = CodeAssembler::new(64).map_err(e)?;
    let (zp, (lo, hi), y_signed) = s.y;
    let mut consts = [a.create_label(), a.create_label(), a.create_label()];
    let go = |a: &mut CodeAssembler, [lo_c, hi_c, zp_c]: [CodeLabel; 3]| -> Result<(), IcedError> {
        // ymm5 = x zero point (words), ymm6 = 0x00ff words (stride 2, u8), ymm7.. = taps (words).
        a.mov(eax, s.x.1 as u32)?;
        a.vmovd(xmm5, eax)?;
        a.vpbroadcastw(ymm5, xmm5)?;
        a.mov(eax, 0x00ff_00ffu32)?;
        a.vmovd(xmm6, eax)?;
        a.vpbroadcastd(ymm6, xmm6)?;
        if spilled > 0 {
            super::stack_table_begin(a, (spilled * 32) as i32, 32)?;
        }
        for t in 0..taps {
            a.movsx(eax, byte_ptr(rcx + t as i32))?;
            a.vmovd(xmm0, eax)?;
            if t < REG_TAPS {
                a.vpbroadcastw(YMM[7 + t], xmm0)?;
            } else {
                a.vpbroadcastw(ymm0, xmm0)?;
                a.vmovdqa(ymmword_ptr(rsp + ((t - REG_TAPS) * 32) as i32), ymm0)?;
            }
        }
        let mut done = a.create_label();
        let mut top = a.create_label();
        a.test(rdx, rdx)?;
        a.jz(done)?;
        a.set_label(&mut top)?;
        a.vpxor(ymm0, ymm0, ymm0)?;
        a.vpxor(ymm1, ymm1, ymm1)?;
        for ky in 0..kh {
            for kx in 0..kw {
                let off = (ky * s.dilations[0] * s.w + kx * s.dilations[1]) as i32;
                if s.stride == 1 {
                    if s.x.0 {
                        a.vpmovsxbw(ymm2, xmmword_ptr(rdi + off))?;
                    } else {
                        a.vpmovzxbw(ymm2, xmmword_ptr(rdi + off))?;
                    }
                } else {
                    a.vmovdqu(ymm2, ymmword_ptr(rdi + off))?;
                    // The even bytes are the low halves of the 16 words (little-endian).
                    if s.x.0 {
                        a.vpsllw(ymm2, ymm2, 8)?;
                        a.vpsraw(ymm2, ymm2, 8)?;
                    } else {
                        a.vpand(ymm2, ymm2, ymm6)?;
                    }
                }
                a.vpsubw(ymm2, ymm2, ymm5)?;
                let t = ky * kw + kx;
                if t < REG_TAPS {
                    a.vpmullw(ymm2, ymm2, YMM[7 + t])?;
                } else {
                    a.vpmullw(ymm2, ymm2, ymmword_ptr(rsp + ((t - REG_TAPS) * 32) as i32))?;
                }
                a.vpmovsxwd(ymm3, xmm2)?;
                a.vextracti128(xmm4, ymm2, 1)?;
                a.vpmovsxwd(ymm4, xmm4)?;
                a.vpaddd(ymm0, ymm0, ymm3)?;
                a.vpaddd(ymm1, ymm1, ymm4)?;
            }
        }
        a.vpbroadcastd(ymm3, dword_ptr(r8))?;
        a.vbroadcastss(ymm4, dword_ptr(r9))?;
        for x in [ymm0, ymm1] {
            a.vpaddd(x, x, ymm3)?;
            a.vcvtdq2ps(x, x)?;
            a.vmulps(x, x, ymm4)?;
            a.vmaxps(x, x, ymmword_ptr(lo_c))?;
            a.vminps(x, x, ymmword_ptr(hi_c))?;
            a.vcvtps2dq(x, x)?;
            a.vpaddd(x, x, ymmword_ptr(zp_c))?;
        }
        // Outputs 0..7 in ymm0, 8..15 in ymm1, each in its range: in-lane packs, then qword permutes into order.
        a.vpackssdw(ymm0, ymm0, ymm1)?;
        a.vpermq(ymm0, ymm0, 0xd8)?;
        if y_signed {
            a.vpacksswb(ymm0, ymm0, ymm0)?;
        } else {
            a.vpackuswb(ymm0, ymm0, ymm0)?;
        }
        a.vpermq(ymm0, ymm0, 0x08)?;
        a.vmovdqu(xmmword_ptr(rsi), xmm0)?;
        a.add(rdi, 16 * s.stride as i32)?;
        a.add(rsi, 16)?;
        a.sub(rdx, 16)?;
        a.jg(top)?;
        a.set_label(&mut done)?;
        if spilled > 0 {
            super::stack_table_end(a)?;
        }
        a.vzeroupper()?;
        a.ret()
    };
    go(&mut a, consts).map_err(e)?;
    // The epilogue's constants: lo - zp and hi - zp (f32), zp (i32), eight lanes each.
    let bits = [
        ((lo as f64 - zp as f64) as f32).to_bits(),
        ((hi as f64 - zp as f64) as f32).to_bits(),
        zp as u32,
    ];
    for (label, bits) in consts.iter_mut().zip(bits) {
        let lanes: Vec<u8> = (0..8).flat_map(|_| bits.to_le_bytes()).collect();
        a.set_label(label).map_err(e)?;
        a.db(&lanes).map_err(e)?;
    }
    a.assemble(0).map_err(e)
}
