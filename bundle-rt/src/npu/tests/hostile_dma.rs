//! Hostile transactions that reach the registers and the data path: addresses of no register or
//! outside the array, DDR_PATCH fields, and DMA faults of whole transfers (bounds on both sides,
//! read-only buffers, unpatched BDs). Each must be a typed error at the right op and byte offset.

use std::vec;

use super::hostile::{fails, op_err, second_op};
use super::*;
use crate::error::{NpuBuffer, NpuRegion, NpuWhy};

#[test]
fn bad_registers_and_tiles() {
    let cases: [(u64, &str); 13] = [
        ((CORE | 0x1D018).into(), "a core BD has 6 words"),
        ((shim(CORE) | 0x1D002).into(), "between shim BD words"),
        (
            (shim(CORE) | 0x1D230).into(),
            "past the shim's channel registers",
        ),
        (
            (shim(CORE) | 0x1DF00).into(),
            "the shim tile has no status register there",
        ),
        (shim(CORE).into(), "the shim tile has no data memory"),
        (
            (CORE | 0x1DF08).into(),
            "between the S2MM and MM2S status registers",
        ),
        ((CORE | 0x1D200).into(), "BD 16"),
        ((CORE | 0x10000).into(), "just past core data memory"),
        ((CORE | 0x0002).into(), "misaligned data word"),
        (
            (tile(0, 1) | 0x80000).into(),
            "past memory-tile data memory",
        ),
        ((CORE | 0x32000).into(), "Core_Control is not the host's"),
        ((CORE | 0x32004).into(), "Core_Status is not modelled"),
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
        (u64::from(tile(4, 2) | 0x100), 4, 2),
        (u64::from(tile(1, 6) | 0x100), 1, 6),
        (1u64 << 40 | u64::from(CORE), 1 << 15, 2),
    ] {
        let (_, why) = second_op(|t| {
            t.maskpoll(addr, 0, 0);
        });
        assert_eq!(why, NpuWhy::BadTile { addr, col, row });
    }
    // A memory tile's data memory (512 KiB) covers a core tile's Core_Control offset: there it is
    // a data word.
    let mut t = Txn::default();
    let mem_word = u64::from(tile(0, 1) | 0x32000);
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
    // DDR_PATCH must target word 1 of a shim BD.
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

/// The op error of `t` run with 64-byte buffers.
fn run_err(t: &Txn) -> (u32, NpuWhy) {
    let mut b = Bufs {
        input: vec![0; 64],
        output: vec![0; 64],
        constants: vec![0; 64],
        params: vec![0; 64],
        ..Bufs::default()
    };
    let (op, _, why) = op_err(fails(&t.finish(), &mut b));
    (op, why)
}

#[test]
fn dma_faults() {
    // Rows with strides against a 64-byte buffer: the last row ends exactly at 64 from offset
    // 8 (8 + 3 * 16 + 8); from 12 it runs 4 bytes past. The fault is the op that starts the
    // shim's task (the last queue push before the TCT).
    let strided = |off: u64| {
        let mut t = Txn::default();
        t.transfer(CORE, 1, false, (0, off), [0, 8, 4, 16, 8]);
        t
    };
    let mut b = Bufs {
        input: vec![0; 64],
        ..Bufs::default()
    };
    b.run(&strided(8).finish()).unwrap();
    let t = strided(12);
    let (op, why) = run_err(&t);
    assert_eq!(op, t.ops - 2, "{why:?}");
    assert!(
        matches!(
            why,
            NpuWhy::OutOfBounds {
                region: NpuRegion::Buffer(NpuBuffer::Input),
                ..
            }
        ),
        "{why:?}"
    );
    // Past local memory: the core BD's walk leaves the 64 KiB data memory.
    let mut t = Txn::default();
    t.move_bytes(CORE, 1, false, 0, 0, 0xFFFC, 8);
    let (_, why) = run_err(&t);
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
    // Stores into read-only buffers.
    for (argidx, buffer) in [
        (0, NpuBuffer::Input),
        (3, NpuBuffer::Constants),
        (4, NpuBuffer::Params),
    ] {
        let mut t = Txn::default();
        t.move_bytes(CORE, 1, true, argidx, 0, 0, 4);
        assert_eq!(run_err(&t).1, NpuWhy::ReadOnlyBuffer { buffer });
    }
    // A shim BD that was never patched (address 0), or patched by hand to a bad address, started
    // on its MM2S channel.
    let start = |t: &mut Txn| {
        t.blockwrite(shim(CORE) | bd(5), &[4, 0, 0, 0, 0, 0, 0, 1 << 25])
            .write((shim(CORE) | 0x1D214).into(), 5);
    };
    let mut t = Txn::default();
    start(&mut t);
    assert_eq!(run_err(&t).1, NpuWhy::BadAddress { addr: 0 });
    // Words 1 and 2 written by hand: address bits 47:32 = 6 << 8 name no buffer.
    let mut t = Txn::default();
    t.blockwrite(shim(CORE) | bd(5), &[4, 0, 6 << 8, 0, 0, 0, 0, 1 << 25])
        .write((shim(CORE) | 0x1D214).into(), 5);
    assert_eq!(run_err(&t).1, NpuWhy::BadAddress { addr: 6 << 40 });
}
