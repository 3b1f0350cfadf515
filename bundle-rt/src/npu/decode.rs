//! Decoding a transaction binary: the 16-byte aie-rt container header and its ops, in the plain v0.1
//! layout or the "optimized" v1.0 one (4-byte op headers, 12-byte writes, 24-byte DDR_PATCH records),
//! into a `Vec<Op>` with every address already resolved to a tile and a register or data-memory word.
//! Real producers' quirks are read as they come: zeroed DDR_PATCH `op_base` and size, 28-byte
//! MASKWRITEs, junk in pad bytes, and the NOOP, PREEMPT, TCT, MERGE_SYNC and RECORD_TIMER ops (no-ops for
//! an emulator that completes every command before the next); LOADPDI is refused as not modelled.
//!
//! Everything that can be checked from the file and the target alone is checked here, before any op
//! runs: header fields (version, generation, geometry equal to the target's, total size), each
//! op's opcode and size, that the ops exactly fill `total size` and number `op count`, every
//! register address (tile inside the array, offset a register of that tile or an aligned
//! data-memory word), DDR_PATCH fields (`regaddr` word 1 of a shim buffer descriptor, `argplus`
//! 4-byte aligned), and the tile and kernel of each VNPU_KERNEL. Errors name the op index and its
//! byte offset. Register offsets win over data memory where a memory tile's data memory
//! (larger than `0x1D000`) overlaps the register map.

use alloc::vec::Vec;

use super::regs::{
    bd_at, tile_of, u32_at, u64_at, word_at, Addr, Tile, BD_ADDR_LOW, TILE_OFFSET_BITS,
};
use super::target::NpuTarget;
use crate::error::{Error, NpuBuffer, NpuWhy};
use crate::Result;

/// Header bytes.
pub(crate) const HEADER_BYTES: usize = 16;

/// The container layout, from the header's version bytes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Layout {
    /// Major 0, minor 1: aie-rt's plain serialisation.
    V01,
    /// Major 1, minor 0: aie-rt's "optimized" serialisation.
    V10,
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
    /// MASKPOLL (4) and MASKPOLL_BUSY (7).
    MaskPoll { at: Addr, value: u32, mask: u32 },
    /// NOOP (5), PREEMPT (6), RECORD_TIMER (131), MERGE_SYNC (132): nothing to do when every
    /// command completes before the next.
    Nop,
    /// TCT (128): wait for a task-completion token from channel `channel` (`dir` 0 S2MM, 1 MM2S)
    /// of each tile of the `cols` x `rows` block at (`col`, `row`).
    Tct {
        col: u8,
        row: u8,
        cols: u8,
        rows: u8,
        dir: u8,
        channel: u8,
    },
    /// DDR_PATCH (129): BD `bd` of shim tile `shim` gets the address of `buffer` + `argplus`.
    DdrPatch {
        shim: Tile,
        bd: u8,
        buffer: NpuBuffer,
        argplus: u64,
    },
    /// VNPU_KERNEL (146): core `tile` runs the resident super-kernel from now on.
    LoadKernel { tile: Tile },
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

/// Checks the container header against the target; returns the op count and the layout.
fn header(txn: &[u8], target: &NpuTarget) -> Result<(u32, Layout)> {
    let len = txn.len() as u64;
    let h: Option<[u8; 8]> = txn.get(..8).and_then(|h| h.try_into().ok());
    let (Some(h), Some(count), Some(total)) = (h, u32_at(txn, 8), u32_at(txn, 12)) else {
        let why = NpuWhy::Truncated {
            needed: HEADER_BYTES as u64,
            len,
        };
        return Err(header_err(0, why));
    };
    let (layout, minor) = match h[0] {
        1 => (Layout::V10, 0),
        _ => (Layout::V01, 1),
    };
    // A generation aie-rt defines that the decoder reads; the message names the first one.
    let generation = if crate::format::TXN_GENERATIONS.contains(&h[2]) {
        h[2]
    } else {
        crate::format::TXN_GEN_AIE2IPU
    };
    let fields: [(u32, &str, u64, u64); 6] = [
        (0, "major", h[0].into(), if h[0] == 1 { 1 } else { 0 }),
        (1, "minor", h[1].into(), minor),
        (2, "device generation", h[2].into(), generation.into()),
        (3, "rows", h[3].into(), target.rows.into()),
        (4, "cols", h[4].into(), target.cols.into()),
        (5, "mem-tile rows", h[5].into(), target.mem_tile_rows.into()),
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
    Ok((count, layout))
}

/// How an op's size is known.
#[derive(Clone, Copy)]
enum SizeRule {
    /// A fixed size, no size field (NOOP, PREEMPT, LOADPDI, and v1.0's WRITE and MASK ops).
    Fixed(u32),
    /// A size field at this offset holding one of these sizes.
    Field(usize, &'static [u32]),
    /// BLOCKWRITE: a size field at this offset, at least `min` and `min + 4n`.
    Block(usize, u32),
}

/// The size rule of `opcode` in `layout`; `None` for an opcode the format does not define.
fn size_rule(layout: Layout, opcode: u8) -> Option<SizeRule> {
    use Layout::{V01, V10};
    use SizeRule::{Block, Field, Fixed};
    Some(match (layout, opcode) {
        (V01, 0) => Field(20, &[24]),
        (V10, 0) => Fixed(12),
        (V01, 1) => Block(12, 16),
        (V10, 1) => Block(8, 12),
        // aie-rt writes 32-byte MASKWRITE/MASKPOLL records, mlir-aie 28-byte ones (no tail pad).
        (V01, 3 | 4 | 7) => Field(24, &[32, 28]),
        (V10, 3 | 4 | 7) => Fixed(16),
        (_, 5 | 6) => Fixed(4),
        (_, 8) => Fixed(16),
        (_, 128 | 132) => Field(4, &[16]),
        (_, 131) => Field(4, &[12]),
        (V01, 129) => Field(4, &[48]),
        (V10, 129) => Field(4, &[24]),
        (_, OP_VNPU_KERNEL) => Field(4, &[16]),
        _ => return None,
    })
}

/// Decodes and checks the whole transaction against `target`.
pub(crate) fn decode<'t>(txn: &'t [u8], target: &NpuTarget) -> Result<Vec<Op<'t>>> {
    let (count, layout) = header(txn, target)?;
    let len = txn.len();
    // Every op is at least 4 bytes, so this is the most ops the loop can push: no reallocation.
    let most = (count as usize).min(len / 4);
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
        let size = op_size(txn, at, layout).map_err(err)?;
        let end = at + size as usize; // `size` ≤ 2^32 and `at` < 2^32: no overflow on 64-bit.
        let body = txn.get(at..end).unwrap_or(&[]);
        let kind = op_kind(body, target, layout).map_err(err)?;
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
fn op_size(txn: &[u8], at: usize, layout: Layout) -> core::result::Result<u32, NpuWhy> {
    let len = txn.len() as u64;
    let opcode = txn.get(at).copied().unwrap_or(0);
    let rule = size_rule(layout, opcode).ok_or(NpuWhy::UnknownOpcode { opcode })?;
    let field = |field: usize| {
        let field_at = at + field;
        u32_at(txn, field_at).ok_or(NpuWhy::Truncated {
            needed: field_at as u64 + 4,
            len,
        })
    };
    let (size, ok, expected) = match rule {
        SizeRule::Fixed(n) => (n, true, Some(n)),
        SizeRule::Field(f, allowed) => {
            let size = field(f)?;
            (size, allowed.contains(&size), allowed.first().copied())
        }
        SizeRule::Block(f, min) => {
            let size = field(f)?;
            (size, size >= min && size % 4 == 0, None)
        }
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
fn op_kind<'t>(
    b: &'t [u8],
    target: &NpuTarget,
    layout: Layout,
) -> core::result::Result<OpKind<'t>, NpuWhy> {
    // The op's size was checked against its opcode, so every fixed-offset read below is inside `b`.
    let w32 = |at: usize| u32_at(b, at).unwrap_or(0);
    let w64 = |at: usize| u64_at(b, at).unwrap_or(0);
    let v10 = layout == Layout::V10;
    // v0.1 ops carry a u64 register offset at 8, v1.0 ops a u32 at 4; the fields after it follow.
    let (reg, after) = if v10 {
        (u64::from(w32(4)), 8)
    } else {
        (w64(8), 16)
    };
    Ok(match b.first().copied().unwrap_or(0) {
        0 => OpKind::Write {
            at: word_at(target, reg)?,
            value: w32(after),
        },
        1 => {
            let (first, payload) = if v10 {
                (u64::from(w32(4)), b.get(12..).unwrap_or(&[]))
            } else {
                (u64::from(w32(8)), b.get(16..).unwrap_or(&[]))
            };
            // The start must be valid even when no words follow.
            word_at(target, first)?;
            for k in 1..payload.len() / 4 {
                word_at(target, first + 4 * k as u64)?;
            }
            OpKind::BlockWrite { first, payload }
        }
        opcode @ (3 | 4 | 7) => {
            let (at, value, mask) = (word_at(target, reg)?, w32(after), w32(after + 4));
            if opcode == 3 {
                OpKind::MaskWrite { at, value, mask }
            } else {
                OpKind::MaskPoll { at, value, mask }
            }
        }
        5 | 131 | 132 => OpKind::Nop,
        6 => {
            // aie-rt's preemption levels: NOOP 0, MEM_TILE 1, AIE_TILE 2, AIE_REGISTERS 3.
            let level = u32::from(b.get(1).copied().unwrap_or(0));
            if level > 3 {
                let value = level.into();
                return Err(NpuWhy::BadField {
                    field: "preempt level",
                    value,
                });
            }
            OpKind::Nop
        }
        8 => return Err(NpuWhy::NotModelled { opcode: 8 }),
        128 => {
            // TCT: word = direction | row << 8 | col << 16, config = rows << 8 | cols << 16 |
            // channel << 24; the tile must be in the array.
            let (word, config) = (w32(8), w32(12));
            let (dir, row, col) = (word & 0xFF, (word >> 8) & 0xFF, (word >> 16) & 0xFF);
            for (field, value, limit) in [
                ("direction", dir, 2),
                ("row", row, u32::from(target.rows)),
                ("column", col, u32::from(target.cols)),
            ] {
                if value >= limit {
                    let value = value.into();
                    return Err(NpuWhy::BadField { field, value });
                }
            }
            OpKind::Tct {
                col: col as u8,
                row: row as u8,
                rows: (config >> 8) as u8,
                cols: (config >> 16) as u8,
                dir: dir as u8,
                channel: (config >> 24) as u8,
            }
        }
        129 => {
            // Real producers zero `op_base` (type and size) and `action`; bundlec writes 40 as the size.
            let (regaddr, argidx, argplus) = if v10 {
                (
                    u64::from(w32(8)),
                    u64::from(b.get(12).copied().unwrap_or(0)),
                    w64(16),
                )
            } else {
                expect(b, 8, "type", 0)?;
                let size = w32(12);
                if size != 0 && size != 40 {
                    let value = size.into();
                    let field = "size_in_bytes";
                    return Err(NpuWhy::BadField { field, value });
                }
                expect(b, 16, "action", 0)?;
                (w64(24), w64(32), w64(40))
            };
            let (shim, bd) = bd_at(target, regaddr, BD_ADDR_LOW)?;
            if argplus % 4 != 0 {
                let field = "argplus";
                return Err(NpuWhy::Misaligned {
                    field,
                    value: argplus,
                });
            }
            let buffer = NpuBuffer::from_argidx(argidx).ok_or(NpuWhy::BadField {
                field: "argidx",
                value: argidx,
            })?;
            OpKind::DdrPatch {
                shim,
                bd,
                buffer,
                argplus,
            }
        }
        OP_VNPU_KERNEL => {
            // VNPU_KERNEL: the core tile and the resident kernel it runs (1: the super-kernel).
            let tile = core_tile(target, w32(8))?;
            let kernel = w32(12);
            if kernel != SUPER_KERNEL {
                let value = kernel.into();
                return Err(NpuWhy::BadField {
                    field: "kernel",
                    value,
                });
            }
            OpKind::LoadKernel { tile }
        }
        opcode => return Err(NpuWhy::UnknownOpcode { opcode }),
    })
}

pub(crate) use crate::superkernel::{OP_VNPU_KERNEL, SUPER_KERNEL};

/// The core tile a `col << 25 | row << 20` word names (low bits zero).
fn core_tile(target: &NpuTarget, raw: u32) -> core::result::Result<Tile, NpuWhy> {
    if raw & ((1 << TILE_OFFSET_BITS) - 1) != 0 {
        let value = raw.into();
        return Err(NpuWhy::BadField {
            field: "tile",
            value,
        });
    }
    let tile = tile_of(target, raw.into())?;
    if !tile.core() {
        let (col, row) = (tile.col, tile.row);
        return Err(NpuWhy::NotCoreTile { col, row });
    }
    Ok(tile)
}
