//! The register map of the virtual NPU: a register address `col << 25 | row << 20 | offset` names a
//! [`Tile`] (a memory or core tile of the target; never the shim row) and, inside it, a [`Reg`]
//! (16 buffer-descriptor address pairs, `DMA_LOAD_DONE`, `DMA_STORE_DONE`, and `CORE_DONE` on core
//! tiles) or an aligned data-memory [`Word`]; plus the little-endian readers the decoder and the
//! kernels share.
//!
//! Invariant: a [`Tile`] or [`Addr`] exists only for a tile inside the target's array, and an
//! [`Addr`]'s data word lies wholly inside that tile's data memory. Register offsets win where a
//! memory tile's data memory (512 KiB on the vnpu, past `0x1D000`) overlaps the register map, so
//! those data bytes are reachable by DMA only; `CORE_DONE`'s offset, not a memory-tile register, is
//! a data word there.

use super::device::NpuTarget;
use crate::error::{NpuRegion, NpuWhy};

/// Buffer descriptors per tile.
pub(crate) const NUM_BDS: u32 = 16;
/// Register offset of `BD[0].ADDR_LO`; BD `i` is `0x20 * i` further.
pub(crate) const BD_BASE: u32 = 0x1D000;
/// Register offset of `DMA_LOAD_DONE`.
pub(crate) const DMA_LOAD_DONE: u32 = 0x1DF00;
/// Register offset of `DMA_STORE_DONE`.
pub(crate) const DMA_STORE_DONE: u32 = 0x1DF04;
/// Register offset of `CORE_DONE` (core tiles only).
pub(crate) const CORE_DONE: u32 = 0x32000;
/// Bits of a register address below the tile fields.
pub(crate) const TILE_OFFSET_BITS: u32 = 20;

/// A memory or core tile of the array.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Tile {
    /// Column.
    pub col: u8,
    /// Row (≥ 1).
    pub row: u8,
    /// Index into per-tile state: `col * (rows - 1) + row - 1`.
    pub index: usize,
    /// Whether it is a core tile (else a memory tile).
    pub core: bool,
    /// Bytes of its data memory.
    pub local: u32,
}

/// A register of a tile.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Reg {
    /// `BD[i].ADDR_LO`.
    BdLo(u8),
    /// `BD[i].ADDR_HI`.
    BdHi(u8),
    /// `DMA_LOAD_DONE`.
    LoadDone,
    /// `DMA_STORE_DONE`.
    StoreDone,
    /// `CORE_DONE`.
    CoreDone,
}

/// What a register address names inside its tile.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Word {
    /// A register.
    Reg(Reg),
    /// The 4 data-memory bytes at this (aligned, in-bounds) offset.
    Data(u32),
}

/// A resolved register address.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Addr {
    /// The address as written in the file.
    pub raw: u64,
    /// Its tile.
    pub tile: Tile,
    /// What it names.
    pub word: Word,
}

/// The little-endian u32 at `at`, if the bytes are there.
pub(crate) fn u32_at(b: &[u8], at: usize) -> Option<u32> {
    let end = at.checked_add(4)?;
    let bytes: [u8; 4] = b.get(at..end)?.try_into().ok()?;
    Some(u32::from_le_bytes(bytes))
}

/// The little-endian u64 at `at`, if the bytes are there.
pub(crate) fn u64_at(b: &[u8], at: usize) -> Option<u64> {
    let end = at.checked_add(8)?;
    let bytes: [u8; 8] = b.get(at..end)?.try_into().ok()?;
    Some(u64::from_le_bytes(bytes))
}

/// The tile named by the upper bits of a register address.
pub(crate) fn tile_of(target: &NpuTarget, addr: u64) -> core::result::Result<Tile, NpuWhy> {
    let col = addr >> 25;
    let row = (addr >> TILE_OFFSET_BITS) & 0x1F;
    let bad = NpuWhy::BadTile { addr, col, row };
    if col >= u64::from(target.cols) || row == 0 || row >= u64::from(target.rows) {
        return Err(bad);
    }
    // Both fit u8: they are below `cols` / `rows`.
    let (col, row) = (col as u8, row as u8);
    let per_col = usize::from(target.rows) - 1;
    let index = usize::from(col) * per_col + usize::from(row) - 1;
    let core = row > target.mem_tile_rows;
    let local = if core {
        target.local_bytes
    } else {
        target.mem_tile_bytes
    };
    Ok(Tile {
        col,
        row,
        index,
        core,
        local,
    })
}

/// The register at tile offset `off`, if the tile has one there.
fn reg_at(off: u32, core: bool) -> Option<Reg> {
    if let Some(rel) = off.checked_sub(BD_BASE) {
        let (i, within) = (rel / 0x20, rel % 0x20);
        if i < NUM_BDS && within == 0 {
            return Some(Reg::BdLo(i as u8));
        }
        if i < NUM_BDS && within == 4 {
            return Some(Reg::BdHi(i as u8));
        }
    }
    match off {
        DMA_LOAD_DONE => Some(Reg::LoadDone),
        DMA_STORE_DONE => Some(Reg::StoreDone),
        CORE_DONE if core => Some(Reg::CoreDone),
        _ => None,
    }
}

/// Resolves a register address to a register or an aligned data-memory word of a valid tile.
pub(crate) fn word_at(target: &NpuTarget, raw: u64) -> core::result::Result<Addr, NpuWhy> {
    let tile = tile_of(target, raw)?;
    let off = (raw & ((1 << TILE_OFFSET_BITS) - 1)) as u32;
    let word = if let Some(reg) = reg_at(off, tile.core) {
        Word::Reg(reg)
    } else if off.is_multiple_of(4) && off.checked_add(4).is_some_and(|e| e <= tile.local) {
        Word::Data(off)
    } else {
        return Err(NpuWhy::BadRegister { addr: raw });
    };
    Ok(Addr { raw, tile, word })
}

/// Resolves the address of a `BD[i].ADDR_LO` register.
pub(crate) fn bd_at(target: &NpuTarget, raw: u64) -> core::result::Result<(Tile, u8), NpuWhy> {
    match word_at(target, raw)? {
        Addr {
            tile,
            word: Word::Reg(Reg::BdLo(i)),
            ..
        } => Ok((tile, i)),
        _ => Err(NpuWhy::BadRegister { addr: raw }),
    }
}

/// Checks that `[start, start + len)` lies in the tile's data memory.
pub(crate) fn check_local(tile: Tile, start: u64, len: u64) -> core::result::Result<(), NpuWhy> {
    let size = u64::from(tile.local);
    if start.checked_add(len).is_none_or(|end| end > size) {
        let region = NpuRegion::Local {
            col: tile.col,
            row: tile.row,
        };
        return Err(NpuWhy::OutOfBounds {
            region,
            start,
            len,
            size,
        });
    }
    Ok(())
}
