//! The register map of the virtual NPU: a register address `col << 25 | row << 20 | offset` names a
//! [`Tile`] of the target (the shim tile in row 0, memory tiles, core tiles) and, inside it, a
//! [`Reg`] or an aligned data-memory [`Word`]; plus the little-endian readers the decoder and the
//! kernels share.
//!
//! Every tile has AIE-ML's DMA registers (docs/aie-ml-facts.md): its buffer descriptors (shim: 16
//! of 8 words at `0x1D000`, word 1 holding address bits 31:2 and word 2 bits 47:32, the words a
//! real DDR_PATCH patches; memory tile: 48 of 8 words at `0xA0000`; core: 16 of 6 words at
//! `0x1D000`), its DMA channels' control, start-queue and status registers, and its lock values.
//! The shim tile has no data memory.
//!
//! Invariant: a [`Tile`] or [`Addr`] exists only for a tile inside the target's array, and an
//! [`Addr`]'s data word lies wholly inside that tile's data memory. Register offsets win where a
//! memory tile's data memory (512 KiB on the vnpu) overlaps a core tile's register offsets
//! (`0x1D000`..), so those data bytes are reachable by DMA only.

use super::target::NpuTarget;
use crate::aie::bd::BdKind;
use crate::error::{NpuRegion, NpuWhy};

/// The BD word holding address bits 31:2 (what DDR_PATCH's `regaddr` names).
pub(crate) const BD_ADDR_LOW: u8 = 1;
/// The BD word whose low 16 bits hold address bits 47:32.
pub(crate) const BD_ADDR_HIGH: u8 = 2;
/// Bits of a register address below the tile fields.
pub(crate) const TILE_OFFSET_BITS: u32 = 20;

/// What a tile is, from its row.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum TileKind {
    /// Row 0: the shim tile (DMA to DDR; no data memory).
    Shim,
    /// A memory tile (rows 1..=mem-tile rows).
    Mem,
    /// A core tile.
    Core,
}

/// A tile of the array.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Tile {
    /// Column.
    pub col: u8,
    /// Row.
    pub row: u8,
    /// Index into per-tile state: `col * rows + row`.
    pub index: usize,
    /// Its kind.
    pub kind: TileKind,
    /// Bytes of its data memory (0 for the shim tile).
    pub local: u32,
}

impl Tile {
    /// Whether it is a core tile (it computes).
    pub(crate) fn core(&self) -> bool {
        self.kind == TileKind::Core
    }

    /// Its BD layout.
    pub(crate) fn bd_kind(&self) -> BdKind {
        match self.kind {
            TileKind::Shim => BdKind::Shim,
            TileKind::Mem => BdKind::MemTile,
            TileKind::Core => BdKind::Core,
        }
    }
}

/// A register of a tile.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Reg {
    /// Word `word` of buffer descriptor `bd`.
    Bd { bd: u8, word: u8 },
    /// The value of lock `id`.
    Lock(u8),
    /// Control register of DMA channel `ch` (`dir` 0 S2MM, 1 MM2S).
    Ctrl { dir: u8, ch: u8 },
    /// Start (task) queue of DMA channel `ch`.
    Queue { dir: u8, ch: u8 },
    /// Status register of DMA channel `ch`.
    Status { dir: u8, ch: u8 },
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

/// Tiles of the array (the per-tile state's length).
pub(crate) fn tile_count(target: &NpuTarget) -> usize {
    usize::from(target.cols) * usize::from(target.rows)
}

/// The tile named by the upper bits of a register address.
pub(crate) fn tile_of(target: &NpuTarget, addr: u64) -> core::result::Result<Tile, NpuWhy> {
    let col = addr >> 25;
    let row = (addr >> TILE_OFFSET_BITS) & 0x1F;
    if col >= u64::from(target.cols) || row >= u64::from(target.rows) {
        return Err(NpuWhy::BadTile { addr, col, row });
    }
    // Both fit u8: they are below `cols` / `rows`.
    let (col, row) = (col as u8, row as u8);
    let index = usize::from(col) * usize::from(target.rows) + usize::from(row);
    let (kind, local) = if row == 0 {
        (TileKind::Shim, 0)
    } else if row <= target.mem_tile_rows {
        (TileKind::Mem, target.mem_tile_bytes)
    } else {
        (TileKind::Core, target.local_bytes)
    };
    Ok(Tile {
        col,
        row,
        index,
        kind,
        local,
    })
}

/// Tile (`col`, `row`) of the array.
pub(crate) fn tile_at(target: &NpuTarget, col: u8, row: u8) -> core::result::Result<Tile, NpuWhy> {
    tile_of(
        target,
        u64::from(col) << 25 | u64::from(row) << TILE_OFFSET_BITS,
    )
}

/// The register at tile offset `off`, if a tile of this kind has one there.
fn reg_at(off: u32, tile: &Tile) -> Option<Reg> {
    let kind = tile.bd_kind();
    if let Some((bd, word)) = kind.bd_at(off) {
        return Some(Reg::Bd {
            bd: bd as u8,
            word: word as u8,
        });
    }
    if !off.is_multiple_of(4) {
        return None;
    }
    let m = kind.regs();
    let n = m.channels;
    for (dir, base, sbase) in [(0u8, m.ctrl, m.status), (1, m.mm2s_ctrl, m.mm2s_status)] {
        if (base..base + 8 * n).contains(&off) {
            let ch = ((off - base) / 8) as u8;
            return Some(if (off - base).is_multiple_of(8) {
                Reg::Ctrl { dir, ch }
            } else {
                Reg::Queue { dir, ch }
            });
        }
        if (sbase..sbase + 4 * n).contains(&off) {
            let ch = ((off - sbase) / 4) as u8;
            return Some(Reg::Status { dir, ch });
        }
    }
    if (m.locks..m.lock(m.lock_count)).contains(&off) && (off - m.locks).is_multiple_of(0x10) {
        return Some(Reg::Lock(((off - m.locks) / 0x10) as u8));
    }
    None
}

/// Resolves a register address to a register or an aligned data-memory word of a valid tile.
pub(crate) fn word_at(target: &NpuTarget, raw: u64) -> core::result::Result<Addr, NpuWhy> {
    let tile = tile_of(target, raw)?;
    let off = (raw & ((1 << TILE_OFFSET_BITS) - 1)) as u32;
    let word = if let Some(reg) = reg_at(off, &tile) {
        Word::Reg(reg)
    } else if off.is_multiple_of(4) && off.checked_add(4).is_some_and(|e| e <= tile.local) {
        Word::Data(off)
    } else {
        return Err(NpuWhy::BadRegister { addr: raw });
    };
    Ok(Addr { raw, tile, word })
}

/// Resolves the address of word `word` of a shim buffer descriptor: the shim tile and the BD.
pub(crate) fn bd_at(
    target: &NpuTarget,
    raw: u64,
    word: u8,
) -> core::result::Result<(Tile, u8), NpuWhy> {
    match word_at(target, raw)? {
        Addr {
            tile,
            word: Word::Reg(Reg::Bd { bd, word: w }),
            ..
        } if w == word && tile.kind == TileKind::Shim => Ok((tile, bd)),
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
