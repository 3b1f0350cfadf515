//! The AMX bf16 GEMM micro-kernel (AMX-TILE + AMX-BF16), the tile twin of `gemm_bf16.rs` with the same
//! `fn(a, b, c, bias, residual)` contract and operands, up to 32 rows: C as 2 x 2 tiles of 16 x 16 f32
//! (`tmm0..3`), two A tiles of 16 bf16 rows x 32 K values (`tmm4..5`, row stride `a_rs`; K padded to a multiple
//! of 32 with zeros by the row converter and the B packing), two B tiles of 16 K pairs x 16 columns read from
//! the `[kp/2][32][2]` panel (row stride 128 bytes: columns 0..15 at byte 0, 16..31 at byte 64). Per 32 K
//! values four tile loads and four `tdpbf16ps`. The tile shape comes from a configuration after the code
//! (`ldtilecfg` on entry, `tilerelease` before the epilogue); the sums go to a 4 KiB stack buffer and the
//! epilogue of `gemm_bf16.rs` (scale, column bias, residual, clamp, masked column tail) reads them back row by
//! row.

use super::gemm_bf16::Bf16Micro;
use super::ZMM;
use iced_x86::code_asm::*;

/// Most rows (two A tiles).
pub const MR: usize = 32;

/// K values per tile step (a 64-byte A tile row).
pub const K_STEP: usize = 32;

/// Whether the shape fits: 1 to 32 rows and columns, K a multiple of 32, displacements within 32 bits.
pub fn fits(m: &Bf16Micro) -> bool {
    let d = |x: usize| {
        x.checked_mul(MR)
            .and_then(|v| i32::try_from(v).ok())
            .is_some()
    };
    (1..=MR).contains(&m.rows)
        && (1..=32).contains(&m.cols)
        && m.pairs >= 1
        && (2 * m.pairs).is_multiple_of(K_STEP)
        && d(m.a_rs)
        && d(m.c_rs * 4)
        && m.res_rs.is_none_or(|r| d(r * 4))
}

/// The 64-byte tile configuration for `rows` (palette 1), as `qgemm_amx.rs`'s.
fn config(rows: usize) -> [u8; 64] {
    let (r0, r1) = (rows.min(16) as u8, rows.saturating_sub(16) as u8);
    let mut c = [0u8; 64];
    c[0] = 1;
    let tiles = [r0, r0, r1, r1, r0, r1, 16, 16];
    for (t, &r) in tiles.iter().enumerate() {
        if r > 0 {
            c[16 + 2 * t..18 + 2 * t].copy_from_slice(&64u16.to_le_bytes());
            c[48 + t] = r;
        }
    }
    c
}

/// Assembles the micro-kernel; `Err` for a shape out of range (a bundlec bug).
pub fn assemble(m: &Bf16Micro) -> Result<Vec<u8>, String> {
    let e = |x: IcedError| x.to_string();
    if !fits(m) {
        return Err(format!("AMX bf16 micro-kernel shape out of range: {m:?}"));
    }
    let two = m.rows > 16;
    let mut a = CodeAssembler::new(64).map_err(e)?;
    let mut cfg = a.create_label();
    let c_tiles = [tmm0, tmm1, tmm2, tmm3];
    let used = if two { 4 } else { 2 };
    let c_at = |t: usize| ((t / 2) * 16 * 128 + (t % 2) * 64) as i32;
    let go = |a: &mut CodeAssembler| -> Result<(), IcedError> {
        a.ldtilecfg(ptr(cfg))?;
        for &c in c_tiles.iter().take(used) {
            a.tilezero(c)?;
        }
        a.mov(r10, m.a_rs as u64)?;
        a.mov(r11, 128u64)?;
        a.mov(r9, (2 * m.pairs / K_STEP) as u64)?;
        let mut top = a.create_label();
        a.set_label(&mut top)?;
        a.tileloadd(tmm4, ptr(rdi + r10))?;
        if two {
            a.tileloadd(tmm5, ptr(rdi + r10 + (16 * m.a_rs) as i32))?;
        }
        a.tileloadd(tmm6, ptr(rsi + r11))?;
        a.tileloadd(tmm7, ptr(rsi + r11 + 64))?;
        a.tdpbf16ps(tmm0, tmm4, tmm6)?;
        a.tdpbf16ps(tmm1, tmm4, tmm7)?;
        if two {
            a.tdpbf16ps(tmm2, tmm5, tmm6)?;
            a.tdpbf16ps(tmm3, tmm5, tmm7)?;
        }
        a.add(rdi, 64)?;
        a.add(rsi, (K_STEP / 2 * 128) as i32)?;
        a.dec(r9)?;
        a.jne(top)?;
        super::stack_table_begin(a, (MR * 128) as i32, 64)?;
        for (t, &c) in c_tiles.iter().enumerate().take(used) {
            a.tilestored(ptr(rsp + r11 + c_at(t)), c)?;
        }
        a.tilerelease()?;
        epilogue(a, m)?;
        super::stack_table_end(a)?;
        a.vzeroupper()?;
        a.ret()
    };
    go(&mut a).map_err(e)?;
    a.set_label(&mut cfg).map_err(e)?;
    a.db(&config(m.rows)).map_err(e)?;
    a.assemble(0).map_err(e)
}

/// The epilogue over the sums at `rsp` (32 floats a row): scale, column bias (`rcx`), residual (`r8`), clamp,
/// store to `rdx`, the columns past `cols` masked.
fn epilogue(a: &mut CodeAssembler, m: &Bf16Micro) -> Result<(), IcedError> {
    let vecs = if m.cols > 16 { 2 } else { 1 };
    let masked = m.cols < 32;
    if masked {
        let bits = (1u64 << m.cols) - 1;
        a.mov(eax, (bits & 0xffff) as u32)?;
        a.kmovw(k1, eax)?;
        a.mov(eax, (bits >> 16) as u32)?;
        a.kmovw(k2, eax)?;
    }
    if let Some(s) = m.scale {
        super::broadcast_bits(a, zmm30, s)?;
    }
    if let Some(lo) = m.clamp.0 {
        super::broadcast_bits(a, zmm26, lo)?;
    }
    if let Some(hi) = m.clamp.1 {
        super::broadcast_bits(a, zmm27, hi)?;
    }
    for v in 0..vecs {
        if m.bias {
            let src = zmmword_ptr(rcx + 64 * v as i32);
            if masked {
                let reg = if v == 0 { ZMM[24].k1() } else { ZMM[25].k2() };
                a.vmovups(reg.z(), src)?;
            } else {
                a.vmovups(ZMM[24 + v], src)?;
            }
        }
    }
    for r in 0..m.rows {
        for v in 0..vecs {
            let x = ZMM[v];
            a.vmovups(x, zmmword_ptr(rsp + (r * 128 + 64 * v) as i32))?;
            if m.scale.is_some() {
                a.vmulps(x, x, zmm30)?;
            }
            if m.bias {
                a.vaddps(x, x, ZMM[24 + v])?;
            }
            if let Some(rs) = m.res_rs {
                let src = zmmword_ptr(r8 + ((r * rs + 16 * v) * 4) as i32);
                if masked {
                    let reg = if v == 0 { zmm31.k1() } else { zmm31.k2() };
                    a.vmovups(reg.z(), src)?;
                    a.vaddps(x, x, zmm31)?;
                } else {
                    a.vaddps(x, x, src)?;
                }
            }
            if m.clamp.0.is_some() {
                a.vmaxps(x, x, zmm26)?;
            }
            if m.clamp.1.is_some() {
                a.vminps(x, x, zmm27)?;
            }
            let dst = zmmword_ptr(rdx + ((r * m.c_rs + 16 * v) * 4) as i32);
            if masked {
                a.vmovups(if v == 0 { dst.k1() } else { dst.k2() }, x)?;
            } else {
                a.vmovups(dst, x)?;
            }
        }
    }
    Ok(())
}
