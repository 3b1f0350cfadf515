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

use super::amx::{c_at, close_stack_buffer, tiles_to_stack, C_TILES};
use super::qgemm_x86::{QEpilogue, QMicroSpec};
use super::quant_x86::{requant_add_store, requant_store, RequantRegs, ResidualConsts};
use iced_x86::code_asm::*;

pub use super::amx::MR;

/// K quads per tile step (64 K bytes per A tile row).
pub const STEP_QUADS: usize = 16;

/// Whether the shape fits: 1 to 32 rows, A rows whole tile rows, and displacements within 32 bits.
pub fn fits(m: &QMicroSpec) -> bool {
    super::qgemm_x86::fits_rows(m, MR) && m.a_rs.is_multiple_of(64)
}

/// Assembles the micro-kernel; `Err` only for a shape out of range (a bundlec bug).
pub fn assemble(m: &QMicroSpec) -> Result<Vec<u8>, String> {
    if !fits(m) {
        return Err(format!("AMX micro-kernel shape out of range: {m:?}"));
    }
    let used = super::amx::used(m.rows);
    super::amx::assemble(m.rows, |a| {
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
                a.tilerelease()
            }
            Some(q) => {
                // The sums to a 64-byte-aligned 4 KiB stack buffer, then the VNNI kernel's requantisation.
                tiles_to_stack(a, m.rows)?;
                requantise(a, m.rows, &q, true, None)?;
                close_stack_buffer(a)
            }
        }
    })
}

/// Requantises `rows` rows of 32 sums at `rsp` (`from_stack`: row stride 128 bytes; the bias at `rcx` is added
/// here) or in the accumulators `zmm(2r + v)` (the VNNI kernels', which start from the bias) to `rdx` (row
/// stride `c_rs`), with the scale at `r8` per row; with `add`, a fused residual QAdd (`quant_x86::requant_add_store`) of the residual at `r10` (row
/// stride `c_rs` too).
pub(super) fn requantise(
    a: &mut CodeAssembler,
    rows: usize,
    q: &QEpilogue,
    from_stack: bool,
    add: Option<&ResidualConsts>,
) -> Result<(), IcedError> {
    q.broadcast_bounds(a)?;
    for r in 0..rows {
        if from_stack {
            a.vpbroadcastd(zmm27, dword_ptr(rcx + (r * 4) as i32))?;
        }
        a.vbroadcastss(zmm28, dword_ptr(r8 + (r * 4) as i32))?;
        let regs = RequantRegs {
            bias: from_stack.then_some(zmm27),
            scale: zmm28,
            lo: zmm24,
            hi: zmm25,
            zp: zmm26,
        };
        for v in 0..2 {
            let x = if from_stack {
                let x = [zmm0, zmm1][v];
                a.vmovdqu32(x, zmmword_ptr(rsp + (r * 128 + v * 64) as i32))?;
                x
            } else {
                super::ZMM[2 * r + v]
            };
            let at = (r * q.c_rs + v * 16) as i32;
            let dst = xmmword_ptr(rdx + at);
            match add {
                Some(c) => requant_add_store(a, x, &regs, c, (xmmword_ptr(r10 + at), zmm29), dst)?,
                None => requant_store(a, x, &regs, dst, q.signed)?,
            }
        }
    }
    Ok(())
}
