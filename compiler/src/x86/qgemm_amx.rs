//! The AMX int8 micro-kernel of the integer GEMM (AMX-TILE + AMX-INT8), a drop-in for the VNNI one of
//! `qgemm_x86.rs`: the same `fn(a, b, c)` / `fn(a, b, c, bias, scale)` contract, the same packed operands, up
//! to 32 rows instead of 8. Eight tile registers: C as 2 x 2 tiles of 16 x 16 i32 (`tmm0..3`), two A tiles of 16
//! weight rows x 64 K bytes (`tmm4..5`, row stride `a_rs`, which the lowering pads to a multiple of 64 with
//! zeros), and two B tiles of 16 K quads x 16 columns read straight from the unit's `[kq][32][4]` panel (row
//! stride 128 bytes: columns 0..15 at byte 0, 16..31 at byte 64). Per 64 K values: four tile loads and four
//! `tdpbsud` (signed A bytes times unsigned B bytes, summed exactly into i32, like `vpdpbusd`). K quads past the
//! panel's last are read as they lie on the caller's stack (the panel is padded to 16 quads) and meet zero A
//! bytes, so they add nothing. The tile shape comes from a 64-byte configuration (palette 1) placed after the
//! code and loaded with `ldtilecfg` on entry; `tilerelease` on exit, so no tile state outlives a call. The
//! requantising variant stores the sums to a 4 KiB stack buffer and requantises them row by row exactly as the
//! VNNI kernel does.

use super::amx::{c_at, close_stack_buffer, config, tiles_to_stack, C_TILES};
use super::qgemm_x86::{QEpilogue, QMicroSpec};
use super::ZMM;
use iced_x86::code_asm::*;

pub use super::amx::MR;

/// K quads per tile step (64 K bytes per A tile row).
pub const STEP_QUADS: usize = 16;

/// Whether the shape fits: 1 to 32 rows, and displacements within 32 bits.
pub fn fits(m: &QMicroSpec) -> bool {
    (1..=MR).contains(&m.rows)
        && m.kq >= 1
        && m.a_rs.is_multiple_of(64)
        && m.a_rs
            .checked_mul(MR)
            .is_some_and(|x| i32::try_from(x).is_ok())
        && m.epilogue.is_none_or(|q| {
            q.c_rs
                .checked_mul(MR)
                .is_some_and(|x| i32::try_from(x).is_ok())
        })
}

/// Assembles the micro-kernel; `Err` only for a shape out of range (a bundlec bug).
pub fn assemble(m: &QMicroSpec) -> Result<Vec<u8>, String> {
    let e = |x: IcedError| x.to_string();
    if !fits(m) {
        return Err(format!("AMX micro-kernel shape out of range: {m:?}"));
    }
    let mut a = CodeAssembler::new(64).map_err(e)?;
    let mut cfg = a.create_label();
    let used = super::amx::used(m.rows);
    let go = |a: &mut CodeAssembler| -> Result<(), IcedError> {
        a.ldtilecfg(ptr(cfg))?;
        a.mov(r11, 128u64)?;
        for (t, &c) in C_TILES.iter().enumerate().take(used) {
            if m.accumulate {
                a.tileloadd(c, ptr(rdx + r11 + c_at(t)))?;
            } else {
                a.tilezero(c)?;
            }
        }
        let steps = m.kq.div_ceil(STEP_QUADS);
        super::amx::k_loop(a, m.rows, m.a_rs, steps, |a, c, x, y| a.tdpbsud(c, x, y))?;
        match m.epilogue {
            None => {
                for (t, &c) in C_TILES.iter().enumerate().take(used) {
                    a.tilestored(ptr(rdx + r11 + c_at(t)), c)?;
                }
                a.tilerelease()?;
            }
            Some(q) => {
                // The sums to a 64-byte-aligned 4 KiB stack buffer, then the VNNI kernel's requantisation.
                tiles_to_stack(a, m.rows)?;
                requantise(a, m.rows, &q)?;
                close_stack_buffer(a)?;
            }
        }
        a.vzeroupper()?;
        a.ret()
    };
    go(&mut a).map_err(e)?;
    a.set_label(&mut cfg).map_err(e)?;
    a.db(&config(m.rows)).map_err(e)?;
    a.assemble(0).map_err(e)
}

/// Requantises `rows` rows of 32 sums at `rsp` (row stride 128 bytes) to `rdx` (row stride `c_rs`), with the
/// bias at `rcx` and the scale at `r8` per row.
fn requantise(a: &mut CodeAssembler, rows: usize, q: &QEpilogue) -> Result<(), IcedError> {
    let lo = (q.clamp.0 as f64 - q.zero_point as f64) as f32;
    let hi = (q.clamp.1 as f64 - q.zero_point as f64) as f32;
    for (reg, bits) in [
        (ZMM[24], lo.to_bits()),
        (ZMM[25], hi.to_bits()),
        (ZMM[26], q.zero_point as u32),
    ] {
        super::broadcast_bits(a, reg, bits)?;
    }
    for r in 0..rows {
        a.vpbroadcastd(zmm27, dword_ptr(rcx + (r * 4) as i32))?;
        a.vbroadcastss(zmm28, dword_ptr(r8 + (r * 4) as i32))?;
        for (v, x) in [zmm0, zmm1].into_iter().enumerate() {
            a.vmovdqu32(x, zmmword_ptr(rsp + (r * 128 + v * 64) as i32))?;
            a.vpaddd(x, x, zmm27)?;
            a.vcvtdq2ps(x, x)?;
            a.vmulps(x, x, zmm28)?;
            a.vmaxps(x, x, ZMM[24])?;
            a.vminps(x, x, ZMM[25])?;
            a.vcvtps2dq(x, x)?;
            a.vpaddd(x, x, ZMM[26])?;
            let dst = xmmword_ptr(rdx + (r * q.c_rs + v * 16) as i32);
            if q.signed {
                a.vpmovsdb(dst, x)?;
            } else {
                a.vpmovusdb(dst, x)?;
            }
        }
    }
    Ok(())
}
