//! Hostile transactions that reach the registers and the data path: addresses of no register or
//! outside the array, DDR_PATCH and VNPU_DMA fields, and DMA faults (bounds on both sides, read-only
//! buffers, unpatched BDs). Each must be a typed error at the right op and byte offset.

use std::vec;

use super::hostile::{fails, op_err, second_op};
use super::*;
use crate::error::{NpuBuffer, NpuRegion, NpuWhy};

#[test]
fn bad_registers_and_tiles() {
    let cases: [(u64, &str); 12] = [
        ((CORE | 0x1D018).into(), "a core BD has 6 words"),
        ((shim(CORE) | 0x1D002).into(), "between shim BD words"),
        (
            (shim(CORE) | 0x1D230).into(),
            "past the shim's channel registers",
        ),
        (
            (shim(CORE) | LOAD_DONE).into(),
            "the shim tile has no counters",
        ),
        (shim(CORE).into(), "the shim tile has no data memory"),
        ((CORE | 0x1DF08).into(), "past the counters"),
        ((CORE | 0x1D200).into(), "BD 16"),
        ((CORE | 0x10000).into(), "just past core data memory"),
        ((CORE | 0x0002).into(), "misaligned data word"),
        (
            (tile(0, 1) | 0x80000).into(),
            "past memory-tile data memory",
        ),
        ((CORE | 0x32004).into(), "after CORE_DONE"),
        (u64::from(CORE) | 0xFFFFF, "last offset"),
    ];
    for (addr, what) in cases {
        let (_, why) = second_op(|t| {
            t.write(addr, 1);
        });
        assert_eq!(why, NpuWhy::BadRegister { addr }, "{what}");
    }
    for (addr, col, row) in [
        (u64::from(tile(4, 0) | bd(0)), 4, 0),
        (u64::from(tile(4, 2) | LOAD_DONE), 4, 2),
        (u64::from(tile(1, 6) | LOAD_DONE), 1, 6),
        (1u64 << 40 | u64::from(CORE), 1 << 15, 2),
    ] {
        let (_, why) = second_op(|t| {
            t.maskpoll(addr, 0, 0);
        });
        assert_eq!(why, NpuWhy::BadTile { addr, col, row });
    }
    // A memory tile's data memory (512 KiB) covers the CORE_DONE offset, which only core tiles
    // have as a register: there it is a data word.
    let mut t = Txn::default();
    let mem_word = u64::from(tile(0, 1) | CORE_DONE);
    t.write(mem_word, 5).maskpoll(mem_word, 5, u32::MAX);
    Bufs::default().run(&t.finish()).unwrap();
    // BLOCKWRITE: every word must be valid; a run past a core BD's 6 words into nothing fails.
    let (_, why) = second_op(|t| {
        t.blockwrite(CORE | (bd(15) + 16), &[1, 2, 3]);
    });
    assert_eq!(
        why,
        NpuWhy::BadRegister {
            addr: (CORE | (bd(15) + 24)).into()
        }
    );
    // DDR_PATCH must target word 1 of a shim BD, VNPU_DMA word 0 of one.
    for regaddr in [
        shim(CORE) | bd(0),
        shim(CORE) | (bd(0) + 8),
        CORE | (bd(0) + 4),
    ] {
        let (_, why) = second_op(|t| {
            t.ddr_patch(regaddr.into(), 0, 0);
        });
        let addr = regaddr.into();
        assert_eq!(why, NpuWhy::BadRegister { addr });
    }
    for bd_reg in [CORE | LOAD_DONE, shim(CORE) | (bd(0) + 4), CORE | bd(0)] {
        let (_, why) = second_op(|t| {
            t.dma_raw(bd_reg, CORE, 0, false, [0, 4, 1, 0, 0]);
        });
        let addr = bd_reg.into();
        assert_eq!(why, NpuWhy::BadRegister { addr });
    }
    // The tile a DMA serves has data memory: not the shim tile, no offset bits.
    for served in [shim(CORE), CORE | 4] {
        let (_, why) = second_op(|t| {
            t.dma_raw(shim(CORE) | bd(0), served, 0, false, [0, 4, 1, 0, 0]);
        });
        let value = served.into();
        assert_eq!(
            why,
            NpuWhy::BadField {
                field: "tile",
                value
            }
        );
    }
}

#[test]
fn ddr_patch_fields() {
    let (_, why) = second_op(|t| {
        t.patch(CORE, 0, 5, 0);
    });
    assert_eq!(
        why,
        NpuWhy::BadField {
            field: "argidx",
            value: 5
        }
    );
    let (_, why) = second_op(|t| {
        t.patch(CORE, 0, 2, 64);
    });
    let region = NpuRegion::Buffer(NpuBuffer::Scratch);
    assert_eq!(
        why,
        NpuWhy::OutOfBounds {
            region,
            start: 64,
            len: 1,
            size: 64
        }
    );
    for (at, field) in [(8, "type"), (12, "size_in_bytes"), (16, "action")] {
        let (_, why) = second_op(|t| {
            t.patch(CORE, 0, 0, 0);
            let n = t.body.len() - 48;
            t.body[n + at] ^= 0x10;
        });
        assert!(
            matches!(why, NpuWhy::BadField { field: f, .. } if f == field),
            "{why:?}"
        );
    }
    // A shim BD holds address bits 31:2: the patched offset must be 4-byte aligned.
    let (_, why) = second_op(|t| {
        t.patch(CORE, 0, 0, 6);
    });
    let field = "argplus";
    assert_eq!(why, NpuWhy::Misaligned { field, value: 6 });
}

#[test]
fn dma_faults() {
    // Rows with strides against a 64-byte buffer: the last row ends exactly at 64 from offset
    // 8 (8 + 3 * 16 + 8), one byte further is out of bounds.
    let strided = |off: u64| {
        let mut t = Txn::default();
        t.write((CORE | LOAD_DONE).into(), 0);
        t.transfer(CORE, 1, false, (0, off), [0, 8, 4, 16, 8]);
        let mut b = Bufs {
            input: vec![0; 64],
            ..Bufs::default()
        };
        b.run(&t.finish())
    };
    strided(8).unwrap();
    let region = NpuRegion::Buffer(NpuBuffer::Input);
    let why = NpuWhy::OutOfBounds {
        region,
        start: 9,
        len: 56,
        size: 64,
    };
    assert_eq!(op_err(strided(9).unwrap_err()), (2, 16 + 24 + 48, why));
    // Past local memory (checked when decoding).
    for (rows, local, stride) in [(1, 0xFFFC, 0), (2, 0x8000, 0x8000), (u32::MAX, 0, u32::MAX)] {
        let (_, why) = second_op(|t| {
            t.dma(CORE, 1, false, [local, 8, rows, 0, stride]);
        });
        assert!(
            matches!(
                why,
                NpuWhy::OutOfBounds {
                    region: NpuRegion::Local { col: 0, row: 2 },
                    ..
                }
            ),
            "{why:?}"
        );
    }
    // Stores into read-only buffers.
    for (argidx, buffer) in [
        (0, NpuBuffer::Input),
        (3, NpuBuffer::Constants),
        (4, NpuBuffer::Params),
    ] {
        let mut t = Txn::default();
        t.patch(CORE, 1, argidx, 0)
            .dma(CORE, 1, true, [0, 4, 1, 0, 0]);
        let mut b = Bufs {
            input: vec![0; 8],
            constants: vec![0; 8],
            params: vec![0; 8],
            ..Bufs::default()
        };
        assert_eq!(
            op_err(fails(&t.finish(), &mut b)),
            (1, 64, NpuWhy::ReadOnlyBuffer { buffer })
        );
    }
    // A BD that was never patched (address 0), or patched by hand to a bad address.
    let (_, why) = second_op(|t| {
        t.dma(CORE, 5, false, [0, 4, 1, 0, 0]);
    });
    assert_eq!(why, NpuWhy::BadAddress { addr: 0 });
    // Words 1 and 2 written by hand: address bits 47:32 = 6 << 8 name no buffer.
    let mut t = Txn::default();
    t.write((shim(CORE) | (bd(5) + 4)).into(), 0)
        .write((shim(CORE) | (bd(5) + 8)).into(), 6 << 8);
    t.dma(CORE, 5, false, [0, 4, 1, 0, 0]);
    let e = Bufs::default().run(&t.finish()).unwrap_err();
    assert_eq!(op_err(e), (2, 64, NpuWhy::BadAddress { addr: 6 << 40 }));
    // Zero rows, zero row bytes, bad direction, a DDR byte offset past 3.
    for (i, v, field) in [
        (5usize, 0u32, "row bytes"),
        (6, 0, "rows"),
        (3, 2, "direction"),
        (10, 4, "DDR byte offset"),
    ] {
        let (_, why) = second_op(|t| {
            t.dma(CORE, 1, false, [0, 4, 1, 0, 0]);
            let n = t.body.len() - 44;
            t.body[n + 4 * i..n + 4 * i + 4].copy_from_slice(&v.to_le_bytes());
        });
        assert_eq!(
            why,
            NpuWhy::BadField {
                field,
                value: v.into()
            }
        );
    }
}
