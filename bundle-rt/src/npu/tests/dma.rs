//! AIE-ML data movement in the emulator (`dma.rs`): a round trip DDR → shim → memory tile → core →
//! memory tile → shim → DDR through buffer descriptors, locks, start queues and the vnpu's stream
//! routes (transposing on the way), completed by a TCT; and each way it can fail named: a TCT with
//! no token, a MASKPOLL on a channel stuck on a lock, a full start queue, a lock released past 63,
//! an invalid BD, a store into a read-only buffer.

use std::vec::Vec;

use super::*;
use crate::error::{DmaStall, Error, NpuWhy};

const MEM: u32 = tile(0, 1);
const SHIM: u32 = 0;

/// Shim BD words: `len` words, the address left for a DDR_PATCH, valid.
fn shim_bd(len: u32) -> [u32; 8] {
    [len, 0, 0, 0, 0, 0, 0, 1 << 25]
}

/// Memory-tile BD words: `len` words at byte `addr` of its window, D0 and D1 `(wrap, step)`,
/// acquire `(id, value)`, release `(id, value)`.
fn mem_bd(
    len: u32,
    addr: u32,
    dims: [(u32, u32); 2],
    acq: Option<(u32, i8)>,
    rel: Option<(u32, i8)>,
) -> [u32; 8] {
    let dim = |(wrap, step): (u32, u32)| wrap << 17 | step.saturating_sub(1);
    let mut locks = 1 << 31;
    if let Some((id, v)) = acq {
        locks |= 1 << 15 | u32::from(v as u8 & 0x7F) << 8 | id;
    }
    if let Some((id, v)) = rel {
        locks |= u32::from(v as u8 & 0x7F) << 24 | id << 16;
    }
    [len, addr / 4, dim(dims[0]), dim(dims[1]), 0, 0, 0, locks]
}

/// Core BD words: `len` words at byte `addr`, linear, acquire / release on its own locks.
fn core_bd(len: u32, addr: u32, acq: Option<(u32, i8)>, rel: Option<(u32, i8)>) -> [u32; 6] {
    let mut locks = 1 << 25;
    if let Some((id, v)) = acq {
        locks |= 1 << 12 | u32::from(v as u8 & 0x7F) << 5 | id;
    }
    if let Some((id, v)) = rel {
        locks |= u32::from(v as u8 & 0x7F) << 18 | id << 13;
    }
    [(addr / 4) << 14 | len, 0, 0, 0, 0, locks]
}

/// The start-queue word: BD `bd`, one run, token when `token`.
fn task(bd: u32, token: bool) -> u32 {
    bd | u32::from(token) << 31
}

/// Queue registers: shim S2MM/MM2S, memory tile S2MM/MM2S, core S2MM/MM2S, channel `n`.
const fn shim_q(mm2s: bool, n: u32) -> u32 {
    SHIM | (0x1D204 + 8 * n + if mm2s { 0x10 } else { 0 })
}
const fn mem_q(mm2s: bool, n: u32) -> u32 {
    MEM | (0xA0604 + 8 * n + if mm2s { 0x30 } else { 0 })
}
/// Word 0 of memory-tile BD `i`.
const fn mem_bd_reg(i: u32) -> u32 {
    MEM | (0xA0000 + 0x20 * i)
}
const fn core_q(mm2s: bool, n: u32) -> u32 {
    CORE | (0x1DE04 + 8 * n + if mm2s { 0x10 } else { 0 })
}

/// The round trip of 64 words: the memory tile reads its copy back as the transpose of an 8 x 8
/// matrix (D0 wrap 8 step 8, D1 wrap 8 step 1), so `out` is `in` transposed.
fn round_trip() -> Txn {
    let mut t = Txn::default();
    // Own locks of the memory tile are ids 64..128 in its BDs; lock 0 / 1 of the core.
    t.blockwrite(SHIM | bd(0), &shim_bd(64))
        .patch(CORE, 0, 0, 0);
    t.blockwrite(SHIM | bd(1), &shim_bd(64))
        .patch(CORE, 1, 1, 0);
    t.blockwrite(
        mem_bd_reg(0),
        &mem_bd(64, 0x80000, [(0, 1), (0, 1)], None, Some((64, 1))),
    );
    t.blockwrite(
        mem_bd_reg(1),
        &mem_bd(64, 0x80000, [(8, 8), (8, 1)], Some((64, -1)), None),
    );
    t.blockwrite(
        mem_bd_reg(2),
        &mem_bd(64, 0x81000, [(0, 1), (0, 1)], None, Some((65, 1))),
    );
    t.blockwrite(
        mem_bd_reg(3),
        &mem_bd(64, 0x81000, [(0, 1), (0, 1)], Some((65, -1)), None),
    );
    t.blockwrite(CORE | bd(0), &core_bd(64, 0x100, None, Some((0, 1))));
    t.blockwrite(CORE | bd(1), &core_bd(64, 0x100, Some((0, -1)), None));
    // Consumers first: each waits on its lock or its stream until the shim's MM2S starts the flow.
    t.write(mem_q(true, 0).into(), task(1, false))
        .write(core_q(true, 0).into(), task(1, false))
        .write(shim_q(false, 0).into(), task(1, true))
        .write(mem_q(false, 2).into(), task(2, false))
        .write(mem_q(true, 4).into(), task(3, false))
        .write(core_q(false, 0).into(), task(0, false))
        .write(mem_q(false, 0).into(), task(0, false))
        .write(shim_q(true, 0).into(), task(0, false));
    t.tct(0, 0, 0, 0);
    t
}

fn words(v: &[u32]) -> Vec<u8> {
    v.iter().flat_map(|w| w.to_le_bytes()).collect()
}

#[test]
fn round_trip_through_memory_and_core_tiles() {
    let input: Vec<u32> = (0..64).map(|i| 1000 + i).collect();
    let mut b = Bufs {
        input: words(&input),
        output: vec![0; 256],
        ..Bufs::default()
    };
    let c = b.run(&round_trip().finish()).unwrap();
    let want: Vec<u32> = (0..64).map(|i| 1000 + (i % 8) * 8 + i / 8).collect();
    assert_eq!(b.output, words(&want));
    assert_eq!(c.data, 8, "512 DDR bytes at 64 per cycle");
    // The statuses read idle, the locks are back at 0.
    let mut t = round_trip();
    for (reg, value) in [
        (MEM | 0xA0680, 0),  // MM2S0 status
        (SHIM | 0x1D220, 0), // S2MM0 status
        (MEM | 0xC0000, 0),  // own lock 0
        (CORE | 0x1F000, 0), // core lock 0
    ] {
        t.maskpoll(reg.into(), value, u32::MAX);
    }
    Bufs {
        input: words(&input),
        output: vec![0; 256],
        ..Bufs::default()
    }
    .run(&t.finish())
    .unwrap();
}

/// The op error of a run of `t` with 256-byte `in` and `out`.
fn fails(t: &Txn) -> (u32, NpuWhy) {
    let mut b = Bufs {
        input: vec![0; 256],
        output: vec![0; 256],
        ..Bufs::default()
    };
    match b.run(&t.finish()) {
        Err(Error::Npu { op, why, .. }) => (op, why),
        r => panic!("expected an op error, got {r:?}"),
    }
}

#[test]
fn deadlocks_are_named() {
    // A second TCT: the only token was taken.
    let mut t = round_trip();
    t.tct(0, 0, 0, 0);
    let (_, why) = fails(&t);
    let stall = DmaStall::NoToken;
    assert_eq!(
        why,
        NpuWhy::DmaDeadlock {
            col: 0,
            row: 0,
            dir: 0,
            channel: 0,
            stall
        }
    );
    // A memory-tile MM2S whose lock is never released: its status never reads idle.
    let mut t = Txn::default();
    t.blockwrite(
        MEM | 0xA0020,
        &mem_bd(8, 0x80000, [(0, 1), (0, 1)], Some((70, -2)), None),
    );
    t.write(mem_q(true, 0).into(), task(1, false));
    t.maskpoll((MEM | 0xA0680).into(), 0, 0x00F8_003F);
    let (op, why) = fails(&t);
    let stall = DmaStall::Lock {
        bd: 1,
        lock: 70,
        value: 0,
        wants: -2,
    };
    assert_eq!(
        (op, why),
        (
            2,
            NpuWhy::DmaDeadlock {
                col: 0,
                row: 1,
                dir: 1,
                channel: 0,
                stall
            }
        )
    );
    assert!(std::format!("{why}").contains("lock 70 >= 2"), "{why}");
    // A core S2MM with no producer: stuck on its stream.
    let mut t = Txn::default();
    t.blockwrite(CORE | bd(0), &core_bd(4, 0, None, None));
    t.write(core_q(false, 0).into(), task(0, true))
        .tct(0, 2, 0, 0);
    let (_, why) = fails(&t);
    let stall = DmaStall::Stream {
        bd: 0,
        done: 0,
        len: 4,
    };
    assert_eq!(
        why,
        NpuWhy::DmaDeadlock {
            col: 0,
            row: 2,
            dir: 0,
            channel: 0,
            stall
        }
    );
}

#[test]
fn bad_tasks_and_locks() {
    // Six tasks on a channel whose first cannot move (no stream feeds core S2MM 1): one active,
    // four queued, the sixth overflows.
    let mut t = Txn::default();
    t.blockwrite(CORE | bd(0), &core_bd(4, 0, None, None));
    for _ in 0..6 {
        t.write(core_q(false, 1).into(), task(0, false));
    }
    let (op, why) = fails(&t);
    assert_eq!((op, why), (6, NpuWhy::QueueOverflow { dir: 0, channel: 1 }));
    // A release past 63.
    let mut t = Txn::default();
    t.write((CORE | 0x1F030).into(), 63);
    t.blockwrite(CORE | bd(2), &core_bd(0, 0, None, Some((3, 1))));
    t.write(core_q(true, 0).into(), task(2, false));
    let (_, why) = fails(&t);
    assert_eq!(
        why,
        NpuWhy::LockFault {
            col: 0,
            row: 2,
            lock: 3,
            value: 63,
            delta: 1
        }
    );
    // A BD that is not valid; a memory-tile BD on a channel of the wrong parity.
    let mut t = Txn::default();
    t.write(core_q(true, 0).into(), task(4, false));
    let (_, why) = fails(&t);
    assert_eq!(
        why,
        NpuWhy::BadBd {
            col: 0,
            row: 2,
            bd: 4,
            why: "not valid"
        }
    );
    let mut t = Txn::default();
    t.blockwrite(
        MEM | 0xA0000,
        &mem_bd(8, 0x80000, [(0, 1), (0, 1)], None, None),
    );
    t.write(mem_q(true, 1).into(), task(0, false));
    let (_, why) = fails(&t);
    assert!(matches!(why, NpuWhy::BadBd { bd: 0, .. }), "{why:?}");
    // A shim S2MM into `in`, which is read-only.
    let mut t = Txn::default();
    t.blockwrite(SHIM | bd(3), &shim_bd(4)).patch(CORE, 3, 0, 0);
    t.write(shim_q(false, 0).into(), task(3, false));
    let (_, why) = fails(&t);
    assert_eq!(
        why,
        NpuWhy::ReadOnlyBuffer {
            buffer: crate::error::NpuBuffer::Input
        }
    );
    // A memory-tile BD in column 0 reaching into a west neighbour that does not exist.
    let mut t = Txn::default();
    t.blockwrite(
        MEM | 0xA0000,
        &mem_bd(8, 0x100, [(0, 1), (0, 1)], None, None),
    );
    t.write(mem_q(false, 0).into(), task(0, false));
    let (_, why) = fails(&t);
    assert!(matches!(why, NpuWhy::OutOfBounds { .. }), "{why:?}");
}
