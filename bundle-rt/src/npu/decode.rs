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
use super::regs::{
    bd_at, check_local, tile_of, u32_at, u64_at, word_at, Addr, Tile, TILE_OFFSET_BITS,
};
use crate::error::{Error, NpuBuffer, NpuWhy};
use crate::Result;

/// Header bytes.
pub(crate) const HEADER_BYTES: usize = 16;
/// The device generation byte of the virtual NPU (`'V'`).
pub(crate) const GENERATION: u8 = crate::TXN_GEN_VNPU;

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

fn header_err(offset: u32, why: NpuWhy) -> Error {
    Error::NpuHeader { offset, why }
}

/// Checks the container header against the target; returns the op count.
fn header(txn: &[u8], target: &NpuTarget) -> Result<u32> {
    let len = txn.len() as u64;
    let h: Option<[u8; 8]> = txn.get(..8).and_then(|h| h.try_into().ok());
    let (Some(h), Some(count), Some(total)) = (h, u32_at(txn, 8), u32_at(txn, 12)) else {
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
    // Every op is at least 16 bytes, so this is the most ops the loop can push: no reallocation.
    let most = (count as usize).min(len / 16);
    let mut ops = Vec::new();
    ops.try_reserve_exact(most)
        .map_err(|_| Error::OutOfMemory {
            what: crate::error::Name::new("decoded NPU ops"),
            bytes: (most as u64).saturating_mul(core::mem::size_of::<Op<'_>>() as u64),
        })?;
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
            // The start must be valid even when no words follow.
            word_at(target, first)?;
            for k in 1..payload.len() / 4 {
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
    // The destination rows must not overlap (a later row would overwrite an earlier one). This
    // also bounds a transfer by its destination's size, so no DMA copies more than that.
    let (dst_field, dst_stride) = if store {
        ("DDR stride", w32(28))
    } else {
        ("local stride", w32(32))
    };
    if rows > 1 && dst_stride < row_bytes {
        let value = dst_stride.into();
        return Err(NpuWhy::BadField {
            field: dst_field,
            value,
        });
    }
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
