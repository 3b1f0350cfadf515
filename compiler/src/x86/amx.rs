//! What the AMX micro-kernels share (`qgemm_amx.rs`, int8; `gemm_bf16_amx.rs`, bf16): the tile configuration
//! of a 2 x 2 tile block and the store of its sums to a stack buffer. Both use `tmm0..3` for C (rows 0..15 and
//! 16..31, columns 0..15 and 16..31), `tmm4..5` for A and `tmm6..7` for B, every tile 64 bytes wide.

use iced_x86::code_asm::*;

/// Most rows of a tile block (two A tiles).
pub const MR: usize = 32;

/// The C tiles.
pub const C_TILES: [AsmRegisterTmm; 4] = [tmm0, tmm1, tmm2, tmm3];

/// The 64-byte tile configuration (palette 1) for a block of `rows`: C and A tiles of the first 16 rows and,
/// beyond 16, of the rest; B tiles of 16 rows; every tile 64 bytes wide.
pub fn config(rows: usize) -> [u8; 64] {
    let (r0, r1) = (rows.min(16) as u8, rows.saturating_sub(16) as u8);
    let mut c = [0u8; 64];
    c[0] = 1;
    // tmm0/1: C rows 0..15, tmm2/3: C rows 16..31, tmm4/5: A, tmm6/7: B.
    let tiles = [r0, r0, r1, r1, r0, r1, 16, 16];
    for (t, &r) in tiles.iter().enumerate() {
        if r > 0 {
            c[16 + 2 * t..18 + 2 * t].copy_from_slice(&64u16.to_le_bytes());
            c[48 + t] = r;
        }
    }
    c
}

/// Byte offset of C tile `t` in a buffer of 32 sums (128 bytes) a row.
pub fn c_at(t: usize) -> i32 {
    ((t / 2) * 16 * 128 + (t % 2) * 64) as i32
}

/// C tiles in use for `rows`.
pub fn used(rows: usize) -> usize {
    if rows > 16 {
        4
    } else {
        2
    }
}

/// Opens a 64-byte-aligned 4 KiB stack buffer, stores the `rows`' C tiles into it (row stride 128 bytes, `r11`
/// holding 128) and releases the tiles; [`close_stack_buffer`] closes it.
pub fn tiles_to_stack(a: &mut CodeAssembler, rows: usize) -> Result<(), IcedError> {
    super::stack_table_begin(a, (MR * 128) as i32, 64)?;
    a.mov(r11, 128u64)?;
    for (t, &c) in C_TILES.iter().enumerate().take(used(rows)) {
        a.tilestored(ptr(rsp + r11 + c_at(t)), c)?;
    }
    a.tilerelease()
}

/// Closes the stack buffer of [`tiles_to_stack`].
pub fn close_stack_buffer(a: &mut CodeAssembler) -> Result<(), IcedError> {
    super::stack_table_end(a)
}
