//! Decoding a transaction binary: the 16-byte aie-rt v0.1 container header and its ops, into a
//! `Vec<Op>` with every address already resolved to a tile and a register or data-memory word.
//!
//! Everything that can be checked from the file and the target alone is checked here, before any op
//! runs: header fields (version, generation, geometry equal to the target's, pad, total size), each
//! op's opcode and size, that the ops exactly fill `total size` and number `op count`, every
//! register address (tile inside the array and not in the shim row, offset a register of that tile
//! or an aligned data-memory word), DDR_PATCH and VNPU_DMA fields, the local side of every DMA,
//! and each VNPU_COMPUTE's tile, kernel and parameter-block placement. Errors name the op index and
//! its byte offset. Register offsets win over data memory where a memory tile's data memory
//! (larger than `0x1D000`) overlaps the register map.

use alloc::vec::Vec;

use super::device::NpuTarget;
use super::params::Kernel;
use crate::error::{Error, NpuBuffer, NpuRegion, NpuWhy};
use crate::Result;

/// Header bytes.
pub(crate) const HEADER_BYTES: usize = 16;
/// The device generation byte of the virtual NPU (`'V'`).
pub(crate) const GENERATION: u8 = 0x56;
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
const TILE_OFFSET_BITS: u32 = 20;

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

/// One decoded op.
#[derive(Clone, Copy, Debug)]
pub(crate) enum OpKind<'t> {
    /// WRITE (0).
    Write { at: Addr, value: u32 },
    /// BLOCKWRITE (1): `payload` holds the `4n` bytes of words; word `k` goes to `first + 4k`.
    BlockWrite { first: u64, payload: &'t [u8] },
    /// MASKWRITE (3).
    MaskWrite { at: Addr, value: u32, mask: u32 },
    /// MASKPOLL (4).
    MaskPoll { at: Addr, value: u32, mask: u32 },
    /// DDR_PATCH (129): BD `bd` of `tile` gets the address of `buffer` + `argplus`.
    DdrPatch {
        tile: Tile,
        bd: u8,
        buffer: NpuBuffer,
        argplus: u64,
    },
    /// VNPU_DMA (144).
    Dma(Dma),
    /// VNPU_COMPUTE (145).
    Compute {
        tile: Tile,
        kernel: Kernel,
        param_addr: u32,
    },
}

/// A VNPU_DMA command; its local side is checked against the tile's data memory.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Dma {
    /// The tile the transfer serves.
    pub tile: Tile,
    /// Its buffer descriptor.
    pub bd: u8,
    /// Tile → DDR (else DDR → tile).
    pub store: bool,
    /// Local byte offset of row 0.
    pub local: u32,
    /// Bytes per row (≥ 1).
    pub row_bytes: u32,
    /// Rows (≥ 1).
    pub rows: u32,
    /// DDR bytes between row starts.
    pub ddr_stride: u32,
    /// Local bytes between row starts.
    pub local_stride: u32,
}

/// One decoded op with its place in the file.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Op<'t> {
    /// What it does.
    pub kind: OpKind<'t>,
    /// Byte offset in the file.
    pub offset: u32,
}

/// The little-endian u32 at `at`, if the bytes are there.
pub(crate) fn u32_at(b: &[u8], at: usize) -> Option<u32> {
    let end = at.checked_add(4)?;
    let bytes: [u8; 4] = b.get(at..end)?.try_into().ok()?;
    Some(u32::from_le_bytes(bytes))
}

/// The little-endian u64 at `at`, if the bytes are there.
fn u64_at(b: &[u8], at: usize) -> Option<u64> {
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
fn bd_at(target: &NpuTarget, raw: u64) -> core::result::Result<(Tile, u8), NpuWhy> {
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

fn header_err(offset: u32, why: NpuWhy) -> Error {
    Error::NpuHeader { offset, why }
}

/// Checks the container header against the target; returns the op count.
fn header(txn: &[u8], target: &NpuTarget) -> Result<u32> {
    let len = txn.len() as u64;
    let (Some(h), Some(count), Some(total)) = (txn.get(..8), u32_at(txn, 8), u32_at(txn, 12))
    else {
        let why = NpuWhy::Truncated {
            needed: HEADER_BYTES as u64,
            len,
        };
        return Err(header_err(0, why));
    };
    let pad = u64::from(u16::from_le_bytes([h[6], h[7]]));
    let fields: [(u32, &str, u64, u64); 7] = [
        (0, "major", h[0].into(), 0),
        (1, "minor", h[1].into(), 1),
        (2, "device generation", h[2].into(), GENERATION.into()),
        (3, "rows", h[3].into(), target.rows.into()),
        (4, "cols", h[4].into(), target.cols.into()),
        (5, "mem-tile rows", h[5].into(), target.mem_tile_rows.into()),
        (6, "pad", pad, 0),
    ];
    for (offset, field, value, expected) in fields {
        if value != expected {
            let why = NpuWhy::BadHeader {
                field,
                value,
                expected,
            };
            return Err(header_err(offset, why));
        }
    }
    let total = u64::from(total);
    if total > len {
        return Err(header_err(12, NpuWhy::Truncated { needed: total, len }));
    }
    if total != len {
        let why = NpuWhy::BadHeader {
            field: "total size",
            value: total,
            expected: len,
        };
        return Err(header_err(12, why));
    }
    Ok(count)
}

/// Where an opcode keeps its size field, and the size it requires (`None`: BLOCKWRITE).
fn size_rule(opcode: u8) -> Option<(usize, Option<u32>)> {
    Some(match opcode {
        0 => (20, Some(24)),
        1 => (12, None),
        3 | 4 => (24, Some(32)),
        129 => (4, Some(48)),
        144 => (4, Some(40)),
        145 => (4, Some(24)),
        _ => return None,
    })
}

/// Decodes and checks the whole transaction against `target`.
pub(crate) fn decode<'t>(txn: &'t [u8], target: &NpuTarget) -> Result<Vec<Op<'t>>> {
    let count = header(txn, target)?;
    let len = txn.len();
    let mut ops = Vec::new();
    let mut at = HEADER_BYTES;
    let mut index: u32 = 0;
    while at < len {
        // `at < len <= u32::MAX` (the header's total size is a u32 equal to `len`).
        let offset = at as u32;
        let err = |why| Error::Npu {
            op: index,
            offset,
            why,
        };
        if index >= count {
            let found = index.saturating_add(1);
            let why = NpuWhy::OpCount {
                declared: count,
                found,
            };
            return Err(err(why));
        }
        let size = op_size(txn, at).map_err(err)?;
        let end = at + size as usize; // `size` ≤ 2^32 and `at` < 2^32: no overflow on 64-bit.
        let body = txn.get(at..end).unwrap_or(&[]);
        let kind = op_kind(body, target).map_err(err)?;
        ops.push(Op { kind, offset });
        at = end;
        index = index.saturating_add(1);
    }
    if index != count {
        let why = NpuWhy::OpCount {
            declared: count,
            found: index,
        };
        return Err(header_err(8, why));
    }
    Ok(ops)
}

/// The size of the op at `at`, checked against its opcode and the end of the file.
fn op_size(txn: &[u8], at: usize) -> core::result::Result<u32, NpuWhy> {
    let len = txn.len() as u64;
    let opcode = txn.get(at).copied().unwrap_or(0);
    let (field, expected) = size_rule(opcode).ok_or(NpuWhy::UnknownOpcode { opcode })?;
    let field_at = at + field;
    let size = u32_at(txn, field_at).ok_or(NpuWhy::Truncated {
        needed: field_at as u64 + 4,
        len,
    })?;
    let ok = match expected {
        Some(e) => size == e,
        None => size >= 16 && size % 4 == 0,
    };
    if !ok {
        return Err(NpuWhy::OpSize {
            opcode,
            size,
            expected,
        });
    }
    let end = at as u64 + u64::from(size);
    if end > len {
        return Err(NpuWhy::Truncated { needed: end, len });
    }
    Ok(size)
}

/// A field that must hold `expected`.
fn expect(
    b: &[u8],
    at: usize,
    field: &'static str,
    expected: u32,
) -> core::result::Result<(), NpuWhy> {
    let value = u32_at(b, at).unwrap_or(0);
    if value != expected {
        return Err(NpuWhy::BadField {
            field,
            value: value.into(),
        });
    }
    Ok(())
}

/// Decodes one op whose size was checked (`b` is exactly its bytes).
fn op_kind<'t>(b: &'t [u8], target: &NpuTarget) -> core::result::Result<OpKind<'t>, NpuWhy> {
    // The op's size was checked against its opcode, so every fixed-offset read below is inside `b`.
    let w32 = |at: usize| u32_at(b, at).unwrap_or(0);
    let w64 = |at: usize| u64_at(b, at).unwrap_or(0);
    Ok(match b.first().copied().unwrap_or(0) {
        0 => OpKind::Write {
            at: word_at(target, w64(8))?,
            value: w32(16),
        },
        1 => {
            let first = u64::from(w32(8));
            let payload = b.get(16..).unwrap_or(&[]);
            for k in 0..payload.len() / 4 {
                word_at(target, first + 4 * k as u64)?;
            }
            OpKind::BlockWrite { first, payload }
        }
        opcode @ (3 | 4) => {
            let (at, value, mask) = (word_at(target, w64(8))?, w32(16), w32(20));
            if opcode == 3 {
                OpKind::MaskWrite { at, value, mask }
            } else {
                OpKind::MaskPoll { at, value, mask }
            }
        }
        129 => {
            expect(b, 8, "type", 0)?;
            expect(b, 12, "size_in_bytes", 40)?;
            expect(b, 16, "action", 0)?;
            let (tile, bd) = bd_at(target, w64(24))?;
            let argidx = w64(32);
            let buffer = NpuBuffer::from_argidx(argidx).ok_or(NpuWhy::BadField {
                field: "argidx",
                value: argidx,
            })?;
            OpKind::DdrPatch {
                tile,
                bd,
                buffer,
                argplus: w64(40),
            }
        }
        144 => OpKind::Dma(dma(b, target)?),
        145 => compute(b, target)?,
        opcode => return Err(NpuWhy::UnknownOpcode { opcode }),
    })
}

/// Decodes a VNPU_DMA and checks its local side.
fn dma(b: &[u8], target: &NpuTarget) -> core::result::Result<Dma, NpuWhy> {
    let w32 = |at: usize| u32_at(b, at).unwrap_or(0);
    let (tile, bd) = bd_at(target, w32(8).into())?;
    let store = match w32(12) {
        0 => false,
        1 => true,
        value => {
            let field = "direction";
            return Err(NpuWhy::BadField {
                field,
                value: value.into(),
            });
        }
    };
    let (local, row_bytes, rows) = (w32(16), w32(20), w32(24));
    for (field, value) in [("row bytes", row_bytes), ("rows", rows)] {
        if value == 0 {
            return Err(NpuWhy::BadField { field, value: 0 });
        }
    }
    expect(b, 36, "reserved", 0)?;
    let d = Dma {
        tile,
        bd,
        store,
        local,
        row_bytes,
        rows,
        ddr_stride: w32(28),
        local_stride: w32(32),
    };
    // Row starts grow with `r`, so the last row has the highest end (all in u64: no overflow).
    let last = u64::from(rows - 1) * u64::from(d.local_stride);
    let span = last + u64::from(row_bytes);
    check_local(tile, local.into(), span)?;
    Ok(d)
}

/// Decodes a VNPU_COMPUTE: a core tile, a known kernel, its parameter block inside data memory.
fn compute<'t>(b: &[u8], target: &NpuTarget) -> core::result::Result<OpKind<'t>, NpuWhy> {
    let w32 = |at: usize| u32_at(b, at).unwrap_or(0);
    let raw = w32(8);
    if raw & ((1 << TILE_OFFSET_BITS) - 1) != 0 {
        let value = raw.into();
        return Err(NpuWhy::BadField {
            field: "tile",
            value,
        });
    }
    let tile = tile_of(target, raw.into())?;
    if !tile.core {
        let (col, row) = (tile.col, tile.row);
        return Err(NpuWhy::NotCoreTile { col, row });
    }
    let code = w32(12);
    let kernel = Kernel::from_code(code).ok_or(NpuWhy::UnknownKernel { kernel: code })?;
    let (param_addr, bytes) = (w32(16), w32(20));
    if param_addr % 4 != 0 {
        let value = param_addr.into();
        let field = "parameter block address";
        return Err(NpuWhy::BadField { field, value });
    }
    let expected = kernel.block_bytes();
    if bytes != expected {
        return Err(NpuWhy::ParamSize {
            kernel: code,
            bytes,
            expected,
        });
    }
    check_local(tile, param_addr.into(), bytes.into())?;
    Ok(OpKind::Compute {
        tile,
        kernel,
        param_addr,
    })
}
