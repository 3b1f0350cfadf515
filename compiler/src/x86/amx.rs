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

/// Assembles an AMX kernel of a tile block of `rows`: `ldtilecfg` of [`config`] (placed after the code), then
/// `body`, then `vzeroupper` and `ret`. `Err` only for an assembler failure (a bundlec bug).
pub fn assemble(
    rows: usize,
    body: impl FnOnce(&mut CodeAssembler) -> Result<(), IcedError>,
) -> Result<Vec<u8>, String> {
    let e = |x: IcedError| x.to_string();
    let mut a = CodeAssembler::new(64).map_err(e)?;
    let mut cfg = a.create_label();
    let go = |a: &mut CodeAssembler| -> Result<(), IcedError> {
        a.ldtilecfg(ptr(cfg))?;
        body(a)?;
        a.vzeroupper()?;
        a.ret()?;
        a.set_label(&mut cfg)?;
        a.db(&config(rows))
    };
    go(&mut a).map_err(e)?;
    a.assemble(0).map_err(e)
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

/// The tile dot product of a kernel: `tdpbsud` (int8) or `tdpbf16ps` (bf16), `C += A · B`.
pub type Dot =
    fn(&mut CodeAssembler, AsmRegisterTmm, AsmRegisterTmm, AsmRegisterTmm) -> Result<(), IcedError>;

/// The K loop of a block of `rows`: `steps` times, the A tiles (`rdi`, row stride `a_rs` in `r10`), the B tiles
/// (`rsi`, row stride 128 in `r11`, columns 16..31 at byte 64) and two or four `dot`s; `rdi` moves 64 bytes and
/// `rsi` 16 B rows a step. `r9` counts.
pub fn k_loop(
    a: &mut CodeAssembler,
    rows: usize,
    a_rs: usize,
    steps: usize,
    dot: Dot,
) -> Result<(), IcedError> {
    k_loop_over(a, rows, a_rs, (rsi, 128), steps, dot)
}

/// [`k_loop`] with the B tiles at register `b`, row stride `b_rs` bytes (in `r11`), `b` moving 16 B rows a
/// step: a panel (`rsi`, 128) or the implicit convolution's reordered planes (one channel quad's planes a row).
pub fn k_loop_over(
    a: &mut CodeAssembler,
    rows: usize,
    a_rs: usize,
    (b, b_rs): (AsmRegister64, usize),
    steps: usize,
    dot: Dot,
) -> Result<(), IcedError> {
    let two = rows > 16;
    a.mov(r10, a_rs as u64)?;
    a.mov(r11, b_rs as u64)?;
    a.mov(r9, steps as u64)?;
    let mut top = a.create_label();
    a.set_label(&mut top)?;
    a.tileloadd(tmm4, ptr(rdi + r10))?;
    if two {
        a.tileloadd(tmm5, ptr(rdi + r10 + (16 * a_rs) as i32))?;
    }
    a.tileloadd(tmm6, ptr(b + r11))?;
    a.tileloadd(tmm7, ptr(b + r11 + 64))?;
    dot(a, tmm0, tmm4, tmm6)?;
    dot(a, tmm1, tmm4, tmm7)?;
    if two {
        dot(a, tmm2, tmm5, tmm6)?;
        dot(a, tmm3, tmm5, tmm7)?;
    }
    a.add(rdi, 64)?;
    a.add(b, (16 * b_rs) as i32)?;
    a.dec(r9)?;
    a.jne(top)
}

/// Opens a 64-byte-aligned 4 KiB stack buffer, stores the `rows`' C tiles into it and releases the tiles;
/// [`close_stack_buffer`] closes it.
pub fn tiles_to_stack(a: &mut CodeAssembler, rows: usize) -> Result<(), IcedError> {
    open_stack_buffer(a)?;
    store_tiles(a, rows)?;
    a.tilerelease()
}

/// Opens the 64-byte-aligned 4 KiB stack buffer of the C tiles.
pub fn open_stack_buffer(a: &mut CodeAssembler) -> Result<(), IcedError> {
    super::stack_table_begin(a, (MR * 128) as i32, 64)
}

/// Stores the `rows`' C tiles into the open stack buffer (row stride 128 bytes, `r11` left holding 128).
pub fn store_tiles(a: &mut CodeAssembler, rows: usize) -> Result<(), IcedError> {
    a.mov(r11, 128u64)?;
    for (t, &c) in C_TILES.iter().enumerate().take(used(rows)) {
        a.tilestored(ptr(rsp + r11 + c_at(t)), c)?;
    }
    Ok(())
}

/// Closes the stack buffer of [`tiles_to_stack`].
pub fn close_stack_buffer(a: &mut CodeAssembler) -> Result<(), IcedError> {
    super::stack_table_end(a)
}
