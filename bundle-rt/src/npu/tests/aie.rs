//! AIE-ML buffer descriptors and locks ([`crate::aie::bd`], [`crate::aie::lock`]):
//! the memory-tile BD that mlir-aie's `npu_blockwrite_instgen.mlir` test publishes decodes to its
//! fields, the address walk of every layout matches a direct count, and lock acquires and releases
//! follow AIE-ML's semaphore rules.

use std::vec::Vec;

use crate::aie::bd::{Bd, BdKind, Dim, LockOp};
use crate::aie::lock::{Acquire, LockFault, Locks};

/// Memory-tile BD 6 (tile (3, 1), offset 0xA00C0) as published in mlir-aie's
/// test/Targets/NPU/npu_blockwrite_instgen.mlir.
const PUBLISHED_MEM_BD: [u32; 8] = [
    0x0000_0001,
    0x0058_0002,
    0x000C_0005,
    0x0010_0007,
    0x0000_0009,
    0x0000_0000,
    0x059A_000C,
    0x8403_8201,
];

#[test]
fn published_memory_tile_bd_decodes() {
    assert_eq!(BdKind::MemTile.bd_at(0xA00C0), Some((6, 0)));
    assert_eq!(BdKind::MemTile.bd_at(0xA00DC), Some((6, 7)));
    assert_eq!(BdKind::Core.bd_at(0x1D018), None, "a core BD has 6 words");
    let bd = Bd::decode(BdKind::MemTile, &PUBLISHED_MEM_BD);
    assert_eq!((bd.len, bd.addr), (1, 8));
    assert_eq!(bd.next, Some(5));
    assert_eq!(
        bd.dims,
        [
            Dim { wrap: 6, step: 6 },
            Dim { wrap: 8, step: 8 },
            Dim { wrap: 0, step: 10 },
            Dim { wrap: 0, step: 1 },
        ]
    );
    assert_eq!(bd.iteration, (11, 14, 13));
    assert!(bd.valid);
    assert_eq!(bd.acquire, Some(LockOp { id: 1, value: 2 }));
    assert_eq!(bd.release, Some(LockOp { id: 3, value: 4 }));
    assert_eq!(bd.packet, None);
}

/// A shim BD as mlir-aie writes a linear transfer: length, offset, no dimensions, valid only.
#[test]
fn linear_shim_transfer() {
    let words = [64, 0x1_0000, 0x0002, 0, 0, 2 << 24, 0, 1 << 25];
    let bd = Bd::decode(BdKind::Shim, &words);
    assert_eq!(bd.addr, 0x2_0001_0000);
    assert_eq!(bd.len, 64);
    assert!(bd.valid && bd.acquire.is_none() && bd.release.is_none() && bd.next.is_none());
    let offsets: Vec<u64> = (0..64).map(|k| bd.offset_of(k, 0).unwrap()).collect();
    assert_eq!(offsets, (0..64).map(|k| 4 * k).collect::<Vec<u64>>());
    assert_eq!(bd.extent(0), Some(256));
}

/// A core BD: acquire-greater-equal 1 on lock 2, release 1 on lock 3, a 4 x 3 window of an
/// 8-word-wide image, chaining to BD 9.
#[test]
fn core_window_with_locks() {
    let acq = (-1i8 as u8 & 0x7F) as u32;
    let words = [
        (0x100 / 4) << 14 | 12, // address 0x100, 12 words
        0,                      // no packet
        7 << 13,                // D0 step 1 (stored 0), D1 step 8 (stored 7)
        3 << 21 | 4 << 13,      // D1 wrap 3, D0 wrap 4, D2 step 1
        0,                      // no iteration
        9 << 27 | 1 << 26 | 1 << 25 | 1 << 18 | 3 << 13 | 1 << 12 | acq << 5 | 2,
    ];
    let bd = Bd::decode(BdKind::Core, &words);
    assert_eq!((bd.addr, bd.len, bd.next), (0x100, 12, Some(9)));
    assert_eq!(bd.acquire, Some(LockOp { id: 2, value: -1 }));
    assert_eq!(bd.release, Some(LockOp { id: 3, value: 1 }));
    let words_walked: Vec<u64> = (0..12).map(|k| bd.offset_of(k, 0).unwrap() / 4).collect();
    assert_eq!(words_walked, [0, 1, 2, 3, 8, 9, 10, 11, 16, 17, 18, 19]);
    assert_eq!(bd.extent(0), Some(80));
}

/// `extent` is the largest `offset_of + 4` over the transfer, for BDs of every layout with
/// pseudo-random dimensions, lengths and iterations (including partial outer blocks).
#[test]
fn extent_matches_the_walk() {
    let mut seed = 0x2545_F491_4F6C_DD1Du64;
    let mut next = |m: u32| {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        (seed % u64::from(m)) as u32
    };
    for _ in 0..400 {
        let kind = [BdKind::Shim, BdKind::MemTile, BdKind::Core][next(3) as usize];
        let mut bd = Bd::decode(kind, &[]);
        bd.len = next(200);
        // The outermost dimension has no wrap: D2 on the shim and core, D3 on the memory tile.
        let outer = if kind == BdKind::MemTile { 3 } else { 2 };
        for (i, d) in bd.dims.iter_mut().enumerate().take(outer + 1) {
            let wrap = if i == outer { 0 } else { next(6) };
            *d = Dim {
                wrap,
                step: 1 + next(20),
            };
        }
        bd.iteration = (0, 1 + next(3), 1 + next(50));
        let iteration = next(5);
        let walked = (0..bd.len)
            .map(|k| bd.offset_of(k, iteration).unwrap() + 4)
            .max();
        let want = walked.unwrap_or(0);
        assert_eq!(
            bd.extent(iteration),
            Some(want),
            "{bd:?} iteration {iteration}"
        );
    }
}

#[test]
fn locks_follow_the_semaphore_rules() {
    let mut l = Locks::<16>::default();
    assert_eq!(l.get(5), Some(0));
    // Acquire >= 1 blocks on 0; a release of 2 lets two such acquires through.
    assert_eq!(l.acquire(5, -1), Some(Acquire::Blocked));
    assert_eq!(l.release(5, 2), Some(Ok(())));
    assert_eq!(l.acquire(5, -1), Some(Acquire::Done));
    assert_eq!(l.acquire(5, -1), Some(Acquire::Done));
    assert_eq!(l.acquire(5, -1), Some(Acquire::Blocked));
    // Acquire == v waits for exactly v and leaves the lock.
    assert!(l.set(6, 3));
    assert_eq!(l.acquire(6, 2), Some(Acquire::Blocked));
    assert_eq!(l.acquire(6, 3), Some(Acquire::Done));
    assert_eq!(l.get(6), Some(3));
    // The value register keeps 6 bits; releases leaving 0..=63 are faults.
    assert!(l.set(7, 0xFFFF_FF3F));
    assert_eq!(l.get(7), Some(63));
    assert_eq!(
        l.release(7, 1),
        Some(Err(LockFault {
            value: 63,
            delta: 1
        }))
    );
    assert_eq!(
        l.release(8, -1),
        Some(Err(LockFault {
            value: 0,
            delta: -1
        }))
    );
    assert_eq!(l.get(7), Some(63), "a faulting release changes nothing");
    // Past the tile's locks.
    assert_eq!(l.acquire(16, -1), None);
    assert_eq!(l.release(16, 1), None);
    assert!(!l.set(16, 0));
}
