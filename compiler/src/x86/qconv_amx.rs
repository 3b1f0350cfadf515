//! The machine code of the implicit int8 convolution on AMX (`kernel/qconv.rs`): the reorder kernel and the
//! tile micro-kernel.
//!
//! Reorder `fn(x: *const u8, dst: *mut u8)` (System V): one quad of `chans` (1..4) input channels, `x` at the
//! first channel's plane (`H·W` bytes, channels a plane apart), `dst` at the quad's reordered plane. It fills
//! the plane (padding and slack) with the padding byte in every lane, then writes each input row at its padded
//! place: per 16 pixels one `vpmovzxbd` per channel (masked for the row's last block), shifted to the channel's
//! byte and or-ed into the words, flipped by `^ 0x80` for i8 input, one 64-byte store (masked at the row's end).
//!
//! Micro-kernel `fn(a, b, c, bias, scale)`: a block of `rows` (≤ 32) output channels by 32 positions. `a` the
//! block's first weight row (`a_row` bytes a row), `b` the batch entry's reordered planes at the block's first
//! position, `c` the output position block of the first channel (row stride `c_rs` bytes). C is 2 x 2 tiles of
//! 16 x 16 i32 (`x86/amx.rs`); per tap (unrolled) and block of 64 channels (a counted loop) the A tiles are the
//! next 64 weight bytes of 16 rows, the B tiles the 16 channel quads' planes at the tap's offset (row stride one
//! plane; positions 16..31 at byte 64), and four `tdpbsud` add them. The sums are requantised through a stack
//! buffer as the AMX GEMM's are (`qgemm_amx.rs`).

use super::amx::{close_stack_buffer, tiles_to_stack, C_TILES};
use super::qgemm_x86::QEpilogue;
use crate::kernel::qconv::QConvAmx;
use iced_x86::code_asm::*;

/// Assembles the reorder kernel for quads of `chans` channels; `Err` when a displacement does not fit.
pub fn assemble_reorder(s: &QConvAmx, chans: usize) -> Result<Vec<u8>, String> {
    let e = |x: IcedError| x.to_string();
    let [h, w] = s.hw;
    let [_, wp] = s.padded;
    let plane = h * w;
    let words = s.plane_words();
    if !(1..=4).contains(&chans) || w == 0 || h == 0 {
        return Err(format!("reorder: {chans} channels of {h}x{w}"));
    }
    for bytes in [words * 4, 3 * plane + w, (s.pads[0] * wp + s.pads[1]) * 4 + wp * 4] {
        i32::try_from(bytes).map_err(|_| format!("reorder: plane of {bytes} bytes"))?;
    }
    let mut a = CodeAssembler::new(64).map_err(e)?;
    let go = |a: &mut CodeAssembler| -> Result<(), IcedError> {
        // zmm31: the padding byte in every lane; zmm30: the flip.
        a.mov(eax, u32::from(s.fill) * 0x0101_0101)?;
        a.vpbroadcastd(zmm31, eax)?;
        a.mov(eax, 0x8080_8080u32)?;
        a.vpbroadcastd(zmm30, eax)?;
        // Fill the whole plane, 16 words a store.
        a.mov(rax, rsi)?;
        a.mov(rcx, (words / 16) as u64)?;
        let mut fill = a.create_label();
        a.set_label(&mut fill)?;
        a.vmovdqu32(zmmword_ptr(rax), zmm31)?;
        a.add(rax, 64)?;
        a.dec(rcx)?;
        a.jnz(fill)?;
        // The tail mask of a row: its last `w % 16` pixels.
        let tail = w % 16;
        if tail > 0 {
            a.mov(eax, (1u32 << tail) - 1)?;
            a.kmovw(k1, eax)?;
        }
        // rsi at the first interior word, r8 rows left; rdi walks the input rows.
        a.add(rsi, ((s.pads[0] * wp + s.pads[1]) * 4) as i32)?;
        a.mov(r8, h as u64)?;
        let mut row = a.create_label();
        a.set_label(&mut row)?;
        let block = |a: &mut CodeAssembler, x0: usize, masked: bool| -> Result<(), IcedError> {
            for chan in 0..chans {
                let src = xmmword_ptr(rdi + (chan * plane + x0) as i32);
                let v = [zmm0, zmm1, zmm2, zmm3][chan];
                if masked {
                    a.vpmovzxbd(v.k1().z(), src)?;
                } else {
                    a.vpmovzxbd(v, src)?;
                }
                if chan > 0 {
                    a.vpslld(v, v, (8 * chan) as u32)?;
                    a.vpord(zmm0, zmm0, v)?;
                }
            }
            if s.x_dtype == crate::ir::DType::I8 {
                a.vpxord(zmm0, zmm0, zmm30)?;
            }
            if chans < 4 {
                // The absent channels' bytes: the padding byte (they meet zero weights).
                let keep = (1u32 << (8 * chans)) - 1;
                a.mov(eax, !keep)?;
                a.vpbroadcastd(zmm4, eax)?;
                a.vpandd(zmm4, zmm4, zmm31)?;
                a.vpord(zmm0, zmm0, zmm4)?;
            }
            let dst = zmmword_ptr(rsi + (x0 * 4) as i32);
            if masked {
                a.vmovdqu32(dst.k1(), zmm0)
            } else {
                a.vmovdqu32(dst, zmm0)
            }
        };
        for b in 0..w / 16 {
            block(a, b * 16, false)?;
        }
        if tail > 0 {
            block(a, w / 16 * 16, true)?;
        }
        a.add(rdi, w as i32)?;
        a.add(rsi, (wp * 4) as i32)?;
        a.dec(r8)?;
        a.jnz(row)?;
        a.vzeroupper()?;
        a.ret()
    };
    go(&mut a).map_err(e)?;
    a.assemble(0).map_err(e)
}

/// Assembles the micro-kernel of a block of `rows` output channels; `Err` when the shape is out of range.
pub fn assemble(s: &QConvAmx, rows: usize) -> Result<Vec<u8>, String> {
    let a_rs = s.a_row();
    let plane = s.plane_words() * 4;
    let fits = |x: usize| i32::try_from(x).is_ok();
    if !(1..=32).contains(&rows)
        || !fits(a_rs * 32)
        || !fits(plane * 16)
        || !fits(s.positions() * 32)
        || !fits(s.tap_offset(s.taps() - 1) + 64)
    {
        return Err(format!("AMX convolution out of range: {s:?}"));
    }
    let q = QEpilogue {
        c_rs: s.positions(),
        zero_point: s.zero_point,
        clamp: s.clamp,
        signed: s.y_dtype == crate::ir::DType::I8,
    };
    let two = rows > 16;
    let used = super::amx::used(rows);
    super::amx::assemble(rows, |a| {
        for &c in C_TILES.iter().take(used) {
            a.tilezero(c)?;
        }
        // r10 A's row stride, r11 B's (one plane); rax walks B per tap, r9 counts the channel blocks.
        a.mov(r10, a_rs as u64)?;
        a.mov(r11, plane as u64)?;
        for t in 0..s.taps() {
            a.lea(rax, ptr(rsi + s.tap_offset(t) as i32))?;
            a.mov(r9, s.blocks() as u64)?;
            let mut top = a.create_label();
            a.set_label(&mut top)?;
            a.tileloadd(tmm4, ptr(rdi + r10))?;
            if two {
                a.tileloadd(tmm5, ptr(rdi + r10 + (16 * a_rs) as i32))?;
            }
            a.tileloadd(tmm6, ptr(rax + r11))?;
            a.tileloadd(tmm7, ptr(rax + r11 + 64))?;
            a.tdpbsud(tmm0, tmm4, tmm6)?;
            a.tdpbsud(tmm1, tmm4, tmm7)?;
            if two {
                a.tdpbsud(tmm2, tmm5, tmm6)?;
                a.tdpbsud(tmm3, tmm5, tmm7)?;
            }
            a.add(rdi, 64)?;
            a.add(rax, (16 * plane) as i32)?;
            a.dec(r9)?;
            a.jne(top)?;
        }
        tiles_to_stack(a, rows)?;
        super::qgemm_amx::requantise(a, rows, &q)?;
        close_stack_buffer(a)
    })
}
