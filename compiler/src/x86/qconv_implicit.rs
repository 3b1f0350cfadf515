//! The machine code of the implicit int8 convolution (`kernel/qconv.rs`): the reorder kernel and the AMX and
//! AVX-512 VNNI micro-kernels, and the range checks the lowering asks before choosing it.
//!
//! Reorder `fn(x: *const u8, dst: *mut u8)` (System V): one quad of `chans` (1..4) input channels, `x` at the
//! first channel's plane (`H·W` bytes, channels a plane apart), `dst` at the quad's reordered (phase) planes. It
//! fills them (padding and slack) with the padding byte in every lane, then writes each input row at its padded
//! place: per 16 pixels (of one phase column at stride `s` > 1: 64 bytes loaded and every `s`-th picked by
//! `vpermb`) one `vpmovzxbd` per channel (masked at the row's end), shifted to the channel's byte and or-ed into
//! the words — at stride 1, four channels and 16 whole bytes, the four loads into the lanes of one register and
//! one `vpermb` instead — flipped by `^ 0x80` for i8 input, one 64-byte store (masked at the row's end).
//!
//! Micro-kernels `fn(a, b, c, bias, scale, count)` (VNNI with a fused residual add: a seventh argument, the
//! residual at `c`'s place in its own buffer): `count` consecutive blocks of `rows` (≤ 32 on AMX, 12 on
//! VNNI) output channels by 32 positions. `a` the block's first weight row (`a_row` bytes a row), `b` the batch
//! entry's reordered planes at the first block's first position, `c` the output position block of the first
//! channel (row stride `c_rs` bytes). On AMX C is 2 x 2 tiles of 16 x 16 i32 (`x86/amx.rs`); per tap (unrolled) and block of 64 channels (a counted loop) the A tiles are the
//! next 64 weight bytes of 16 rows, the B tiles the 16 channel quads' planes at the tap's offset (its phase
//! plane and position; row stride one quad's planes; positions 16..31 at byte 64), and four `tdpbsud` add them.
//! The sums are requantised through a stack buffer as the AMX GEMM's are (`qgemm_amx.rs`); the tile
//! configuration and the buffer are set up once per call.

use super::amx::C_TILES;
use super::qgemm_x86::QEpilogue;
use super::quant_x86::ResidualConsts;
use super::ZMM;
use crate::kernel::qconv::{QConvImplicit, NQ};
use iced_x86::code_asm::*;

/// Assembles the reorder kernel for quads of `chans` channels; `Err` when a displacement does not fit.
pub fn assemble_reorder(s: &QConvImplicit, chans: usize) -> Result<Vec<u8>, String> {
    let e = |x: IcedError| x.to_string();
    let [h, w] = s.hw;
    let st = s.stride;
    let [_, ws] = s.phase();
    let plane = h * w;
    let words = s.plane_words();
    if !(1..=4).contains(&chans) {
        return Err(format!("reorder: {chans} channels"));
    }
    check_reorder(s)?;
    let mut a = CodeAssembler::new(64).map_err(e)?;
    let mut table = a.create_label();
    let mut quads = a.create_label();
    let mut go = |a: &mut CodeAssembler| -> Result<(), IcedError> {
        // zmm31: the padding byte in every lane; zmm30: the flip; zmm29: every s-th byte (vpermb); zmm28: the
        // padding byte in the absent channels' bytes of a last quad of fewer than four.
        a.mov(eax, u32::from(s.fill) * 0x0101_0101)?;
        a.vpbroadcastd(zmm31, eax)?;
        a.mov(eax, 0x8080_8080u32)?;
        a.vpbroadcastd(zmm30, eax)?;
        if chans < 4 {
            let absent = !((1u32 << (8 * chans)) - 1);
            a.mov(eax, (u32::from(s.fill) * 0x0101_0101) & absent)?;
            a.vpbroadcastd(zmm28, eax)?;
        }
        if st > 1 {
            a.vmovdqu8(zmm29, zmmword_ptr(table))?;
        } else if chans == 4 {
            a.vmovdqu8(zmm27, zmmword_ptr(quads))?;
        }
        // The padding byte where no input row lands: per phase plane the rows above the first input row's
        // and from below the last one's to the plane's end (slack included), 16 words a store. The first
        // region's last store may reach into a row that is filled and written later; the second region ends
        // at the plane's end (a multiple of 16 words), its first store reaching back into rows written
        // later, never past the quad's planes (another unit's).
        let top_pad = s.pads[0];
        for py in 0..st {
            let top = top_pad.saturating_sub(py).div_ceil(st);
            let bottom = (top_pad + h).saturating_sub(py).div_ceil(st);
            for px in 0..st {
                let base = (py * st + px) * words * 4;
                if top > 0 {
                    fill(a, base, (top * ws).div_ceil(16))?;
                }
                let stores = (words - (bottom * ws).min(words)).div_ceil(16);
                if stores > 0 {
                    fill(a, base + (words - 16 * stores) * 4, stores)?;
                }
            }
        }
        // Row `r` of a group of `st` input rows (rdi at the group's first, rsi at the phase row of the group):
        // each phase row it lands in is filled first (its padding columns; the stores stay in the cache
        // that the row's own stores then hit), then written.
        let row = |a: &mut CodeAssembler, r: usize| -> Result<(), IcedError> {
            let yy = r + s.pads[0];
            let dst_row = (yy % st) * st * words * 4 + (yy / st) * ws * 4;
            for px in 0..st {
                let dst_phase = dst_row + (px * words * 4);
                // The row's padding columns (none where the input row fills the phase row: its own stores
                // cover every word).
                if !(st == 1 && ws == w) {
                    fill(a, dst_phase, ws.div_ceil(16))?;
                }
                // The first input column of phase column `px`, and how many there are.
                let x0 = (px + st - s.pads[1] % st) % st;
                if x0 >= w {
                    continue;
                }
                let n = (w - x0).div_ceil(st);
                let col0 = (x0 + s.pads[1]) / st;
                for j0 in (0..n).step_by(16) {
                    let src = r * w + x0 + st * j0;
                    let avail = (w - (x0 + st * j0)).min(64);
                    let count = (n - j0).min(16);
                    channels(a, s, chans, plane, src, avail, st)?;
                    let dst = zmmword_ptr(rsi + (dst_phase + (col0 + j0) * 4) as i32);
                    if count < 16 {
                        a.mov(eax, (1u32 << count) - 1)?;
                        a.kmovw(k1, eax)?;
                        a.vmovdqu32(dst.k1(), zmm0)?;
                    } else {
                        a.vmovdqu32(dst, zmm0)?;
                    }
                }
            }
            Ok(())
        };
        let (groups, rest) = (h / st, h % st);
        if groups > 0 {
            a.mov(r8, groups as u64)?;
            let mut group = a.create_label();
            a.set_label(&mut group)?;
            for r in 0..st {
                row(a, r)?;
            }
            a.add(rdi, (st * w) as i32)?;
            a.add(rsi, (ws * 4) as i32)?;
            a.dec(r8)?;
            a.jnz(group)?;
        }
        for r in 0..rest {
            row(a, r)?;
        }
        a.vzeroupper()?;
        a.ret()?;
        a.set_label(&mut table)?;
        let bytes: Vec<u8> = (0..64).map(|i| ((i % 16) * st) as u8).collect();
        a.db(&bytes)?;
        // Byte 4p + c of a pixel quad is byte p of lane c.
        a.set_label(&mut quads)?;
        let bytes: Vec<u8> = (0..64).map(|i| (16 * (i % 4) + i / 4) as u8).collect();
        a.db(&bytes)
    };
    go(&mut a).map_err(e)?;
    a.assemble(0).map_err(e)
}

/// `stores` stores of the padding byte's 16 words (zmm31) from `rsi + at`: unrolled up to 8, else a loop over
/// `rax` / `rcx`.
fn fill(a: &mut CodeAssembler, at: usize, stores: usize) -> Result<(), IcedError> {
    if stores <= 8 {
        for k in 0..stores {
            a.vmovdqu32(zmmword_ptr(rsi + (at + 64 * k) as i32), zmm31)?;
        }
        return Ok(());
    }
    a.lea(rax, ptr(rsi + at as i32))?;
    a.mov(rcx, stores as u64)?;
    let mut top = a.create_label();
    a.set_label(&mut top)?;
    a.vmovdqu32(zmmword_ptr(rax), zmm31)?;
    a.add(rax, 64)?;
    a.dec(rcx)?;
    a.jnz(top)
}

/// `Err` unless the reorder kernel's shape is in range: a plane, stride 1 to 4, and every displacement within
/// 32 bits.
pub fn check_reorder(s: &QConvImplicit) -> Result<(), String> {
    let ([h, w], st, [_, ws]) = (s.hw, s.stride, s.phase());
    if w == 0 || h == 0 || !(1..=4).contains(&st) {
        return Err(format!("reorder: {h}x{w}, stride {st}"));
    }
    for bytes in [
        s.quad_bytes(),
        3 * h * w + w + 64,
        4 * ws * 4 + s.quad_bytes(),
    ] {
        i32::try_from(bytes).map_err(|_| format!("reorder: plane of {bytes} bytes"))?;
    }
    Ok(())
}

/// The words of 16 pixels of a row (stride `st` apart from `rdi + src`, `avail` bytes readable there) of
/// `chans` channels (a plane apart) in `zmm0`: each channel's bytes zero-extended to words (`vpermb` through
/// `zmm29` first when `st` > 1), shifted to its byte and or-ed; flipped for i8 input; the absent channels' bytes
/// the padding byte (`zmm28`).
fn channels(
    a: &mut CodeAssembler,
    s: &QConvImplicit,
    chans: usize,
    plane: usize,
    src: usize,
    avail: usize,
    st: usize,
) -> Result<(), IcedError> {
    let need = if st == 1 { 16 } else { 64 };
    let masked = avail < need;
    if st == 1 && chans == 4 && !masked {
        // The four channels' 16 bytes in the four lanes (one load, three inserts), then one `vpermb`
        // (`zmm27`) to the pixels' channel quads.
        a.vmovdqu8(xmm0, xmmword_ptr(rdi + src as i32))?;
        for chan in 1..4 {
            let at = xmmword_ptr(rdi + (chan * plane + src) as i32);
            a.vinserti32x4(zmm0, zmm0, at, chan as u32)?;
        }
        a.vpermb(zmm0, zmm27, zmm0)?;
        if s.x_dtype == crate::ir::DType::I8 {
            a.vpxord(zmm0, zmm0, zmm30)?;
        }
        return Ok(());
    }
    if masked {
        a.mov(rax, (1u64 << avail) - 1)?;
        a.kmovq(k2, rax)?;
    }
    for chan in 0..chans {
        let v = [zmm0, zmm1, zmm2, zmm3][chan];
        let at = rdi + (chan * plane + src) as i32;
        if st == 1 {
            if masked {
                a.vpmovzxbd(v.k2().z(), xmmword_ptr(at))?;
            } else {
                a.vpmovzxbd(v, xmmword_ptr(at))?;
            }
        } else {
            if masked {
                a.vmovdqu8(zmm5.k2().z(), zmmword_ptr(at))?;
            } else {
                a.vmovdqu8(zmm5, zmmword_ptr(at))?;
            }
            a.vpermb(zmm5, zmm29, zmm5)?;
            a.vpmovzxbd(v, xmm5)?;
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
        a.vpord(zmm0, zmm0, zmm28)?;
    }
    Ok(())
}

/// `Err` unless `rows` is 1 to `mr` (the kernel set's block, [`QConvImplicit::mr`]) and every displacement of the
/// micro-kernels fits 32 bits.
pub fn check(s: &QConvImplicit, rows: usize, mr: usize) -> Result<(), String> {
    let fits = |x: usize| i32::try_from(x).is_ok();
    let ok = (1..=mr).contains(&rows)
        && fits(s.a_row() * mr)
        && fits(s.quad_bytes() * 16)
        && fits(s.positions() * mr)
        && fits(s.tap_offset(s.taps() - 1) + 64);
    ok.then_some(())
        .ok_or_else(|| format!("implicit convolution of {rows} rows out of range: {s:?}"))
}

/// The requantising store of the convolution's sums: row stride one channel's positions.
pub(super) fn epilogue(s: &QConvImplicit) -> QEpilogue {
    QEpilogue {
        c_rs: s.positions(),
        zero_point: s.zero_point,
        clamp: s.clamp,
        signed: s.y_dtype == crate::ir::DType::I8,
    }
}

/// The end of a position block: A back to the block's first weight row, B, C (and the `residual` at r10) 32
/// positions on, and the loop
/// on `count` (the register counting the blocks) back to `block`.
fn next_block(
    a: &mut CodeAssembler,
    a_rs: usize,
    count: AsmRegister64,
    block: CodeLabel,
    residual: bool,
) -> Result<(), IcedError> {
    a.sub(rdi, a_rs as i32)?;
    a.add(rsi, (NQ * 4) as i32)?;
    a.add(rdx, NQ as i32)?;
    if residual {
        a.add(r10, NQ as i32)?;
    }
    a.dec(count)?;
    a.jnz(block)
}

/// Assembles the AMX micro-kernel of a block of `rows` output channels; `Err` when the shape is out of range.
pub fn assemble(s: &QConvImplicit, rows: usize) -> Result<Vec<u8>, String> {
    let a_rs = s.a_row();
    // B's row stride: one channel quad's planes.
    let plane = s.quad_bytes();
    check(s, rows, crate::kernel::qconv::MR)?;
    if s.add.is_some() {
        return Err("the AMX implicit convolution has no fused residual add".into());
    }
    let q = epilogue(s);
    let used = super::amx::used(rows);
    super::amx::assemble(rows, |a| {
        // r12 counts the position blocks; the stack buffer of the sums stays open across them.
        a.push(r12)?;
        a.mov(r12, r9)?;
        super::amx::open_stack_buffer(a)?;
        let mut block = a.create_label();
        a.set_label(&mut block)?;
        for &c in C_TILES.iter().take(used) {
            a.tilezero(c)?;
        }
        // Per tap, the channel blocks of B from the tap's offset (rax), one quad's planes a tile row.
        for t in 0..s.taps() {
            a.lea(rax, ptr(rsi + s.tap_offset(t) as i32))?;
            let dot: super::amx::Dot = |a, c, x, y| a.tdpbsud(c, x, y);
            super::amx::k_loop_over(a, rows, a_rs, (rax, plane), s.blocks(), dot)?;
        }
        super::amx::store_tiles(a, rows)?;
        super::qgemm_amx::requantise(a, rows, &q, true, None)?;
        next_block(a, a_rs, r12, block, false)?;
        a.tilerelease()?;
        super::amx::close_stack_buffer(a)?;
        a.pop(r12)
    })
}

/// Assembles the AVX-512 VNNI micro-kernel of a block of `rows` (at most `MR_VNNI`) output channels by 32
/// positions, the AMX kernel's contract: per tap (unrolled) and channel quad (a counted loop over the quads
/// holding channels) two 64-byte loads of the quad's plane at the tap's offset (positions 0..15 and 16..31)
/// and per row one `vpdpbusd` each with the row's four weight bytes broadcast; the weights of the padding
/// channels are skipped. The accumulators start from the bias, and the sums are requantised straight from them.
pub fn assemble_vnni(s: &QConvImplicit, rows: usize) -> Result<Vec<u8>, String> {
    let e = |x: IcedError| x.to_string();
    let a_rs = s.a_row();
    let quad = s.quad_bytes();
    let skip = s.tap_bytes() - 4 * s.quads();
    check(s, rows, crate::kernel::qconv::MR_VNNI)?;
    let mut a = CodeAssembler::new(64).map_err(e)?;
    let mut consts = s.add.as_ref().map(|r| ResidualConsts::new(&mut a, r));
    let go = |a: &mut CodeAssembler| -> Result<(), IcedError> {
        if consts.is_some() {
            // The residual: the seventh argument, on the stack above the return address.
            a.mov(r10, qword_ptr(rsp + 8))?;
        }
        // r11 counts the position blocks.
        a.mov(r11, r9)?;
        let mut block = a.create_label();
        a.set_label(&mut block)?;
        // The accumulators start from the row's bias (the epilogue then has no bias to add).
        for r in 0..rows {
            a.vpbroadcastd(ZMM[2 * r], dword_ptr(rcx + (4 * r) as i32))?;
            a.vmovdqa32(ZMM[2 * r + 1], ZMM[2 * r])?;
        }
        for t in 0..s.taps() {
            a.lea(rax, ptr(rsi + s.tap_offset(t) as i32))?;
            a.mov(r9, s.quads() as u64)?;
            let mut top = a.create_label();
            a.set_label(&mut top)?;
            a.vmovdqu32(zmm28, zmmword_ptr(rax))?;
            a.vmovdqu32(zmm29, zmmword_ptr(rax + 64))?;
            for r in 0..rows {
                let w = dword_bcst(rdi + (r * a_rs) as i32);
                a.vpdpbusd(ZMM[2 * r], zmm28, w)?;
                a.vpdpbusd(ZMM[2 * r + 1], zmm29, w)?;
            }
            a.add(rax, quad as i32)?;
            a.add(rdi, 4)?;
            a.dec(r9)?;
            a.jne(top)?;
            if skip > 0 {
                a.add(rdi, skip as i32)?;
            }
        }
        super::qgemm_amx::requantise(a, rows, &epilogue(s), false, consts.as_ref())?;
        next_block(a, a_rs, r11, block, consts.is_some())?;
        a.vzeroupper()?;
        a.ret()
    };
    go(&mut a).map_err(e)?;
    if let Some(c) = consts.as_mut() {
        c.emit(&mut a).map_err(e)?;
    }
    a.assemble(0).map_err(e)
}
