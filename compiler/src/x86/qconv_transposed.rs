//! The transposed AVX-512 VNNI micro-kernel of the implicit int8 convolution (`kernel/qconv.rs`,
//! `QConvImplicit::transposed`): output channels in the lanes, so that a tile is `rows` (≤ [`TQ`]) positions of
//! one output row by [`TM`] channels and no position is computed to be dropped — the position-block kernel
//! (`qconv_implicit.rs`) computes whole phase-width rows in blocks of 32, 64 positions for a 7x7 plane's 49.
//!
//! `fn(a, b, c, bias, scale)` (System V): `a` the channel block's packed weights (`[tap][quad][64][4]`), `b`
//! the reordered planes at the tile's first position (word `oy·WS + ox`), `c` the output at (first channel,
//! `oy`, `ox`), `bias` and `scale` at the block's first channel. The accumulators `zmm(4i + v)` (position `i`,
//! channels `16v..16v+15`) start from the bias; per tap (unrolled) and channel quad (a counted loop) four
//! 64-byte weight loads and, per position, one `vpbroadcastd` of its four input bytes (unsigned, so the
//! register operand of `vpdpbusd`) and four `vpdpbusd`. The epilogue requantises each accumulator as
//! `quant_x86::requant_store` does and narrows it in its register; per 16 channels, positions 0-3 and 4-5 are
//! gathered into two registers, two `vpermi2b` turn them into 8 channels x 8 bytes each, and each channel's
//! `rows` bytes go to its output row with one masked store (the mask shifted to the channel's qword, the
//! address less its offset). No fused residual add: reading the residual the same way backwards (a masked
//! load per channel, two `vpermi2b`, the add's f32 chain per position) cost ResNet-50's 14x14 and 7x7
//! bottleneck ends more than the separate QAdd pass (Zen 4: 345 against 287 + 33 µs).

use super::quant_x86::{requant_store, RequantRegs};
use super::ZMM;
use crate::kernel::qconv::{QConvImplicit, TM, TQ};
use iced_x86::code_asm::*;

/// Weight registers (one per 16 channels) and the two broadcast input registers; in the epilogue the first
/// hold the requantisation's bounds and scale, the others the transposed bytes.
const W: [AsmRegisterZmm; 4] = [zmm24, zmm25, zmm26, zmm27];
const X: [AsmRegisterZmm; 2] = [zmm28, zmm29];

/// The accumulator of position `i`, channels `16v..16v+15`, and its `xmm` half.
fn acc(i: usize, v: usize) -> (AsmRegisterZmm, AsmRegisterXmm) {
    (ZMM[4 * i + v], XACC[4 * i + v])
}

/// `Err` unless `rows` is 1 to [`TQ`], the channels come in whole blocks of [`TM`], and every displacement
/// fits 32 bits.
pub fn check(s: &QConvImplicit, rows: usize) -> Result<(), String> {
    let plane = s.out[0] * s.out[1];
    let fits = |x: usize| i32::try_from(x).is_ok();
    let ok = (1..=TQ).contains(&rows)
        && s.m.is_multiple_of(TM)
        && !s.amx
        && s.add.is_none()
        && fits(s.tap_offset(s.taps() - 1) + 4 * TQ)
        && fits(s.quad_bytes())
        && fits(TM * plane + 64);
    ok.then_some(()).ok_or_else(|| {
        format!("transposed implicit convolution of {rows} positions out of range: {s:?}")
    })
}

/// Assembles the kernel of a tile of `rows` positions.
pub fn assemble(s: &QConvImplicit, rows: usize) -> Result<Vec<u8>, String> {
    let e = |x: IcedError| x.to_string();
    check(s, rows)?;
    let mut a = CodeAssembler::new(64).map_err(e)?;
    let mut index = [a.create_label(), a.create_label()];
    let go = |a: &mut CodeAssembler| -> Result<(), IcedError> {
        for v in 0..4 {
            a.vmovdqu32(acc(0, v).0, zmmword_ptr(rcx + (64 * v) as i32))?;
            for i in 1..rows {
                a.vmovdqa32(acc(i, v).0, acc(0, v).0)?;
            }
        }
        for t in 0..s.taps() {
            a.lea(rax, ptr(rsi + s.tap_offset(t) as i32))?;
            a.mov(r9, s.quads() as u64)?;
            let mut top = a.create_label();
            a.set_label(&mut top)?;
            for (v, &w) in W.iter().enumerate() {
                a.vmovdqu32(w, zmmword_ptr(rdi + (64 * v) as i32))?;
            }
            for i in 0..rows {
                let x = X[i % 2];
                a.vpbroadcastd(x, dword_ptr(rax + (4 * i) as i32))?;
                for (v, &w) in W.iter().enumerate() {
                    a.vpdpbusd(acc(i, v).0, x, w)?;
                }
            }
            a.add(rax, s.quad_bytes() as i32)?;
            a.add(rdi, (TM * 4) as i32)?;
            a.dec(r9)?;
            a.jne(top)?;
        }
        epilogue(a, s, rows, &index)
    };
    go(&mut a).map_err(e)?;
    // vpermi2b indices: byte 8j + i of the result is position i of channel j (+ 8 for the second): position i
    // is lane i of the first table (i < 4) or lane i - 4 of the second (byte 64 on).
    for (h, l) in index.iter_mut().enumerate() {
        let idx: Vec<u8> = (0..64)
            .map(|b| {
                let (j, i) = (b / 8 + 8 * h, b % 8);
                (if i < 4 {
                    16 * i + j
                } else {
                    64 + 16 * (i - 4) + j
                }) as u8
            })
            .collect();
        a.set_label(l).map_err(e)?;
        a.db(&idx).map_err(e)?;
    }
    a.assemble(0).map_err(e)
}

/// Requantises the accumulators, transposes each 16 channels' bytes and stores every channel's `rows` bytes.
fn epilogue(
    a: &mut CodeAssembler,
    s: &QConvImplicit,
    rows: usize,
    index: &[CodeLabel; 2],
) -> Result<(), IcedError> {
    let q = super::qconv_implicit::epilogue(s);
    q.broadcast_bounds(a)?;
    let regs = RequantRegs {
        bias: None,
        scale: zmm27,
        lo: zmm24,
        hi: zmm25,
        zp: zmm26,
    };
    // k1: the low `rows` bytes of a qword; k2: the same shifted to qword j.
    a.mov(eax, (1u32 << rows) - 1)?;
    a.kmovq(k1, rax)?;
    let plane = (s.out[0] * s.out[1]) as i32;
    // Channel `16v + 8h + j`'s output bytes, addressed so that they are qword j of a vector; k1 (j = 0) or
    // k2 (the mask shifted there) selects them.
    let at = |a: &mut CodeAssembler, v: usize, h: usize, j: usize| {
        let chan = (16 * v + 8 * h + j) as i32;
        let m = zmmword_ptr(rdx + chan * plane - (8 * j) as i32);
        if j == 0 {
            return Ok(m.k1());
        }
        a.kshiftlq(k2, k1, (8 * j) as u32)?;
        Ok::<_, IcedError>(m.k2())
    };
    for v in 0..4 {
        a.vmovups(regs.scale, zmmword_ptr(r8 + (64 * v) as i32))?;
        for i in 0..rows {
            let (x, narrow) = acc(i, v);
            requant_store(a, x, &regs, narrow, q.signed)?;
        }
        // Positions 0-3 in the lanes of acc(0, v), 4-5 in those of acc(4, v).
        for i in 1..rows {
            let (to, lane) = (acc(4 * (i / 4), v).0, (i % 4) as u32);
            if lane > 0 {
                a.vinserti32x4(to, to, acc(i, v).1, lane)?;
            }
        }
        let second = acc(if rows > 4 { 4 } else { 0 }, v).0;
        for (h, (&out, label)) in X.iter().zip(index).enumerate() {
            a.vmovdqu64(out, zmmword_ptr(*label))?;
            a.vpermi2b(out, acc(0, v).0, second)?;
            for j in 0..8 {
                let m = at(a, v, h, j)?;
                a.vmovdqu8(m, out)?;
            }
        }
    }
    a.vzeroupper()?;
    a.ret()
}

/// The `xmm` halves of the accumulators `zmm0..23` (EVEX-encoded from 16 on).
const XACC: [AsmRegisterXmm; 24] = [
    xmm0, xmm1, xmm2, xmm3, xmm4, xmm5, xmm6, xmm7, xmm8, xmm9, xmm10, xmm11, xmm12, xmm13, xmm14,
    xmm15, xmm16, xmm17, xmm18, xmm19, xmm20, xmm21, xmm22, xmm23,
];
