//! Hostile transactions and runs: every prefix, every single-bit flip, each header field, and one
//! test per failure the emulator names (those of registers and the data path are in
//! `hostile_dma.rs`). Each must be a typed error at the right op and byte offset (or, for harmless
//! flips, a successful run), never a panic.

use std::string::ToString;
use std::vec;
use std::vec::Vec;

use super::program::tiled_program;
use super::*;
use crate::error::{NpuWhy, ParamWhy};
use crate::Error;

/// The error of a run expected to fail.
pub(super) fn fails(txn: &[u8], b: &mut Bufs) -> Error {
    match b.run(txn) {
        Ok(c) => panic!("run succeeded ({c:?})"),
        Err(e) => e,
    }
}

/// `(op, offset, why)` of an op error.
pub(super) fn op_err(e: Error) -> (u32, u32, NpuWhy) {
    match e {
        Error::Npu { op, offset, why } => (op, offset, why),
        e => panic!("not an op error: {e:?}"),
    }
}

/// `(offset, why)` of a header error.
fn header_err(e: Error) -> (u32, NpuWhy) {
    match e {
        Error::NpuHeader { offset, why } => (offset, why),
        e => panic!("not a header error: {e:?}"),
    }
}

/// Byte offset of op `i` in a container built from `t` (ops of known sizes).
fn op_offset(txn: &[u8], i: usize) -> u32 {
    let mut at = 16usize;
    for _ in 0..i {
        let size = match txn[at] {
            0 => 24,
            1 => u32::from_le_bytes(txn[at + 12..at + 16].try_into().unwrap()) as usize,
            3 | 4 => 32,
            _ => u32::from_le_bytes(txn[at + 4..at + 8].try_into().unwrap()) as usize,
        };
        at += size;
    }
    at as u32
}

/// Op-boundary offsets of a container.
fn boundaries(txn: &[u8]) -> Vec<usize> {
    let n = u32::from_le_bytes(txn[8..12].try_into().unwrap()) as usize;
    (0..=n).map(|i| op_offset(txn, i) as usize).collect()
}

#[test]
fn every_prefix_is_an_error() {
    for f32 in [true, false] {
        let (txn, bufs) = tiled_program(f32);
        let cuts = boundaries(&txn);
        for len in 0..txn.len() {
            let mut b = bufs.clone();
            let (_, why) = header_err(fails(&txn[..len], &mut b));
            assert!(
                matches!(why, NpuWhy::Truncated { .. }),
                "len {len}: {why:?}"
            );
            assert_eq!(b, bufs, "a failed decode touched the buffers");
            if len < 16 {
                continue;
            }
            // The same prefix with a consistent total size: an op is cut, or ops are missing.
            let mut cut = txn[..len].to_vec();
            cut[12..16].copy_from_slice(&(len as u32).to_le_bytes());
            let e = fails(&cut, &mut b);
            if cuts.contains(&len) {
                assert!(
                    matches!(header_err(e), (8, NpuWhy::OpCount { .. })),
                    "len {len}"
                );
            } else {
                let (_, offset, why) = op_err(e);
                assert!(
                    matches!(why, NpuWhy::Truncated { .. }),
                    "len {len}: {why:?}"
                );
                assert!(
                    cuts.contains(&(offset as usize)),
                    "len {len}: offset {offset}"
                );
            }
        }
    }
}

#[test]
fn every_bit_flip_is_ok_or_a_typed_error() {
    for f32 in [true, false] {
        let (txn, bufs) = tiled_program(f32);
        let (mut oks, mut errs) = (0, 0);
        for bit in 0..txn.len() * 8 {
            let mut bad = txn.clone();
            bad[bit / 8] ^= 1 << (bit % 8);
            let mut b = bufs.clone();
            match b.run(&bad) {
                Ok(_) => oks += 1,
                Err(e @ (Error::Npu { .. } | Error::NpuHeader { .. })) => {
                    assert!(!e.to_string().is_empty());
                    errs += 1;
                }
                Err(e) => panic!("bit {bit}: unexpected error {e:?}"),
            }
        }
        // Informative col/row bytes and aie-rt pads are not checked, and a flip in many BD fields
        // (iteration, packet, wraps of a linear walk, lock values) leaves a legal transfer: about
        // half the bits matter.
        assert!(oks > 0 && errs * 10 > oks * 8, "oks {oks} errs {errs}");
        // Flips in the parameter blocks: checked before each kernel runs.
        for bit in 0..bufs.params.len() * 8 {
            let mut b = bufs.clone();
            b.params[bit / 8] ^= 1 << (bit % 8);
            match b.run(&txn) {
                Ok(_) | Err(Error::Npu { .. }) => {}
                Err(e) => panic!("param bit {bit}: unexpected error {e:?}"),
            }
        }
    }
}

#[test]
fn header_fields() {
    let (txn, bufs) = tiled_program(true);
    let total = txn.len() as u64;
    let cases: [(usize, u8, &str, u64); 6] = [
        (0, 2, "major", 0),
        (1, 2, "minor", 1),
        (2, 0x22, "device generation", 3),
        (3, 5, "rows", 6),
        (4, 8, "cols", 4),
        (5, 2, "mem-tile rows", 1),
    ];
    for (at, v, field, expected) in cases {
        let mut bad = txn.clone();
        bad[at] = v;
        let (offset, why) = header_err(fails(&bad, &mut bufs.clone()));
        assert_eq!(offset, at as u32);
        match why {
            NpuWhy::BadHeader {
                field: f,
                expected: e,
                ..
            } => {
                assert_eq!((f, e), (field, expected));
            }
            w => panic!("{field}: {w:?}"),
        }
    }
    // A file for a 5-row array is rejected by this one, and accepted by a 5-row emulator.
    let mut t5 = NpuTarget::vnpu();
    t5.rows = 5;
    let mut t = Txn::default();
    t.write((tile(3, 4) | 0x100).into(), 1)
        .maskpoll((tile(3, 4) | 0x100).into(), 1, 1);
    let mut b = bufs.clone();
    Emulator::new(t5).run(&t.finish_for(&t5), b.bind()).unwrap();
    let e = Emulator::vnpu()
        .run(&t.finish_for(&t5), b.bind())
        .unwrap_err();
    assert!(matches!(
        header_err(e),
        (
            3,
            NpuWhy::BadHeader {
                field: "rows",
                value: 5,
                expected: 6
            }
        )
    ));
    // Total size too large (truncated) or too small (trailing bytes).
    let mut bad = txn.clone();
    bad[12..16].copy_from_slice(&(total as u32 + 4).to_le_bytes());
    let (offset, why) = header_err(fails(&bad, &mut bufs.clone()));
    assert_eq!(
        (offset, why),
        (
            12,
            NpuWhy::Truncated {
                needed: total + 4,
                len: total
            }
        )
    );
    let mut bad = txn.clone();
    bad.extend_from_slice(&[0; 4]);
    let (_, why) = header_err(fails(&bad, &mut bufs.clone()));
    assert_eq!(
        why,
        NpuWhy::BadHeader {
            field: "total size",
            value: total,
            expected: total + 4
        }
    );
    // Op count one too many or one too few.
    let n = u32::from_le_bytes(txn[8..12].try_into().unwrap());
    let mut bad = txn.clone();
    bad[8..12].copy_from_slice(&(n + 1).to_le_bytes());
    let (offset, why) = header_err(fails(&bad, &mut bufs.clone()));
    assert_eq!(
        (offset, why),
        (
            8,
            NpuWhy::OpCount {
                declared: n + 1,
                found: n
            }
        )
    );
    let mut bad = txn.clone();
    bad[8..12].copy_from_slice(&(n - 1).to_le_bytes());
    let (op, offset, why) = op_err(fails(&bad, &mut bufs.clone()));
    assert_eq!((op, offset), (n - 1, op_offset(&txn, n as usize - 1)));
    assert_eq!(
        why,
        NpuWhy::OpCount {
            declared: n - 1,
            found: n
        }
    );
    // Empty and header-only files.
    assert!(matches!(
        header_err(fails(&[], &mut bufs.clone())).1,
        NpuWhy::Truncated { needed: 16, len: 0 }
    ));
    Bufs::default().run(&Txn::default().finish()).unwrap();
}

/// A two-op program (a WRITE, then `t`'s ops) and the error of its op 1.
pub(super) fn second_op(f: impl FnOnce(&mut Txn)) -> (u32, NpuWhy) {
    let mut t = Txn::default();
    t.write((CORE | 0x100).into(), 0);
    f(&mut t);
    let txn = t.finish();
    let mut b = Bufs {
        input: vec![1; 64],
        output: vec![0; 64],
        scratch: vec![0; 64],
        constants: vec![0; 64],
        params: vec![0; 64],
    };
    let before = b.clone();
    let (op, offset, why) = op_err(fails(&txn, &mut b));
    assert_eq!((op, offset), (1, 40), "{why:?}");
    let msg = Error::Npu { op, offset, why }.to_string();
    assert!(msg.contains("op 1") && msg.contains("byte 40"), "{msg}");
    assert_eq!(
        b, before,
        "a run that fails its checks wrote to the buffers"
    );
    (offset, why)
}

#[test]
fn unknown_opcodes_and_wrong_sizes() {
    // 144 and 145 were the virtual NPU's own DMA and compute commands: data moves through AIE-ML
    // buffer descriptors and cores compute through the super-kernel.
    for opcode in [2u8, 9, 10, 14, 15, 130, 133, 144, 145, 147, 255] {
        let (_, why) = second_op(|t| {
            t.body.extend_from_slice(&[opcode, 0, 0, 0, 8, 0, 0, 0]);
            t.ops += 1;
        });
        assert_eq!(why, NpuWhy::UnknownOpcode { opcode });
    }
    // A WRITE claiming 28 bytes; a BLOCKWRITE of 18; a VNPU_KERNEL of 20.
    let (_, why) = second_op(|t| {
        t.write(CORE.into(), 0);
        let n = t.body.len();
        t.body[n - 4] = 28;
    });
    assert_eq!(
        why,
        NpuWhy::OpSize {
            opcode: 0,
            size: 28,
            expected: Some(24)
        }
    );
    let (_, why) = second_op(|t| {
        t.blockwrite(CORE, &[1]);
        let n = t.body.len();
        t.body[n - 8] = 18;
    });
    assert_eq!(
        why,
        NpuWhy::OpSize {
            opcode: 1,
            size: 18,
            expected: None
        }
    );
    let (_, why) = second_op(|t| {
        t.load_kernel(CORE, 1);
        let n = t.body.len();
        t.body[n - 12] = 20;
    });
    assert!(matches!(
        why,
        NpuWhy::OpSize {
            opcode: 146,
            size: 20,
            ..
        } | NpuWhy::Truncated { .. }
    ));
}

#[test]
fn poll_timeouts() {
    let reg = u64::from(CORE | 0x200);
    let (_, why) = second_op(|t| {
        t.maskpoll(reg, 1, u32::MAX);
    });
    assert_eq!(
        why,
        NpuWhy::PollTimeout {
            reg,
            mask: u32::MAX,
            expected: 1,
            actual: 0
        }
    );
    // A MASKWRITE sets bits, the poll sees them through its mask.
    let mut t = Txn::default();
    t.maskwrite(reg, 0xF0F0, 0x0FF0)
        .maskpoll(reg, 0x00F0, 0x00FF)
        .maskpoll(reg, 0x0100, 0x0F00);
    let e = Bufs::default().run(&t.finish()).unwrap_err();
    assert!(matches!(
        op_err(e),
        (
            2,
            80,
            NpuWhy::PollTimeout {
                mask: 0x0F00,
                expected: 0x0100,
                actual: 0x0F0,
                ..
            }
        )
    ));
    let msg = Bufs::default().run(&t.finish()).unwrap_err().to_string();
    assert!(
        msg.contains("op 2") && msg.contains("byte 80") && msg.contains("MASKPOLL"),
        "{msg}"
    );
}

/// Runs `kernel` with `words` on a small image; returns the op error of the write that releases
/// `GO` (the super-kernel runs the block then).
fn kernel_fails(kernel: u32, words: &[u32]) -> NpuWhy {
    let e = run_kernel(kernel, words, &[0; 256]).unwrap_err();
    let (op, _, why) = op_err(e);
    let mut before_go = Txn::default();
    before_go
        .move_bytes(CORE, 0, false, 3, 0, 0, 256)
        .move_bytes(CORE, 1, false, 4, 0, PARAM_ADDR, 4 * words.len() as u32)
        .load_kernel(CORE, 1)
        .blockwrite(
            CORE | 0xF0,
            &[kernel, PARAM_ADDR, 4 * words.len() as u32, 0],
        );
    assert_eq!(op, before_go.ops, "{why:?}");
    why
}

#[test]
fn bad_kernel_parameters() {
    let conv = [0, 1, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 0, 0, 0];
    run_kernel(CONV, &conv, &[0; 256]).unwrap();
    let bad = |kernel: u32, block: &[u32], word: usize, value: u32, why: ParamWhy| {
        let mut w = block.to_vec();
        w[word] = value;
        let got = kernel_fails(kernel, &w);
        assert_eq!(
            got,
            NpuWhy::BadParam {
                kernel,
                word: word as u32,
                value,
                why
            },
            "word {word}"
        );
    };
    bad(CONV, &conv, 0, 3, ParamWhy::UnknownCode);
    bad(CONV, &conv, 1, 4, ParamWhy::UnknownCode);
    for word in [5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16] {
        bad(CONV, &conv, word, 0, ParamWhy::Zero);
    }
    // Regions past the tile's 64 KiB, and products that overflow 64 bits.
    bad(
        CONV,
        &conv,
        2,
        0xFFFF,
        ParamWhy::OutOfBounds {
            end: 0x10003,
            size: 0x10000,
        },
    );
    let mut huge = conv;
    huge[9] = u32::MAX;
    huge[10] = u32::MAX;
    huge[8] = 4;
    let why = kernel_fails(CONV, &huge);
    assert!(
        matches!(
            why,
            NpuWhy::BadParam {
                kernel: 1,
                word: 3 | 4,
                ..
            }
        ),
        "{why:?}"
    );
    let mut huge = conv;
    for w in [5, 6, 7, 8] {
        huge[w] = u32::MAX;
    }
    let why = kernel_fails(CONV, &huge);
    assert_eq!(
        why,
        NpuWhy::BadParam {
            kernel: 1,
            word: 2,
            value: 0,
            why: ParamWhy::Overflow
        }
    );
    // Depthwise needs cb == mb.
    let mut dw = conv;
    dw[1] = 2;
    dw[8] = 2;
    assert_eq!(
        kernel_fails(CONV, &dw),
        NpuWhy::BadParam {
            kernel: 1,
            word: 5,
            value: 1,
            why: ParamWhy::Mismatch { expected: 2 }
        }
    );

    let gemm = [1, 1, 0, 16, 32, 1, 1, 1, 0];
    run_kernel(GEMM, &gemm, &[0; 256]).unwrap();
    bad(GEMM, &gemm, 1, 2, ParamWhy::UnknownCode);
    for word in [5, 6, 7] {
        bad(GEMM, &gemm, word, 0, ParamWhy::Zero);
    }
    let epi = [1, 0, 0, 0, 0, 64, 1, 1, 0, 0, 255, 128, 0];
    run_kernel(EPILOGUE, &epi, &[0; 256]).unwrap();
    bad(EPILOGUE, &epi, 1, 4, ParamWhy::F32Only);
    bad(EPILOGUE, &epi, 1, 8, ParamWhy::UnknownCode);
    bad(EPILOGUE, &epi, 8, 3, ParamWhy::UnknownCode);
    bad(
        EPILOGUE,
        &epi,
        11,
        0x10000,
        ParamWhy::OutOfBounds {
            end: 0x10004,
            size: 0x10000,
        },
    );
    let elt = [0, 0, 0, 16, 32, 1, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0];
    run_kernel(ELTWISE, &elt, &[0; 256]).unwrap();
    bad(ELTWISE, &elt, 1, 3, ParamWhy::UnknownCode);
    bad(ELTWISE, &elt, 6, 3, ParamWhy::UnknownCode);
    bad(ELTWISE, &elt, 7, 0, ParamWhy::Zero);
    // n = 0x4000 f32: `a` (at 0) just fits, `b` (at 16) runs 16 bytes past: the error names the
    // address word of the first region that does not fit.
    let mut w = elt;
    w[5] = 0x4000;
    let why = ParamWhy::OutOfBounds {
        end: 0x10010,
        size: 0x10000,
    };
    assert_eq!(
        kernel_fails(ELTWISE, &w),
        NpuWhy::BadParam {
            kernel: ELTWISE,
            word: 3,
            value: 16,
            why
        }
    );
    let pool = [0, 0, 0, 16, 1, 1, 1, 1, 1, 1, 1, 1, 1, 0, 0, 1, 1];
    run_kernel(POOL, &pool, &[0; 256]).unwrap();
    bad(POOL, &pool, 1, 3, ParamWhy::UnknownCode);
    for word in [4, 5, 6, 7, 8, 9, 10, 11, 12, 15, 16] {
        bad(POOL, &pool, word, 0, ParamWhy::Zero);
    }
    // A huge kernel and dilation are fine (the loops only visit valid taps).
    let mut big = pool;
    big[1] = 2;
    big[9] = u32::MAX;
    big[10] = u32::MAX;
    big[15] = u32::MAX;
    run_kernel(POOL, &big, &[0; 256]).unwrap();
    let gap = [2, 0, 0, 16, 1, 1];
    run_kernel(GAP, &gap, &[0; 256]).unwrap();
    bad(GAP, &gap, 1, 1, ParamWhy::Mismatch { expected: 0 });
    bad(GAP, &gap, 5, 0, ParamWhy::Zero);
}

/// VNPU_KERNEL names a core tile (the mailbox's checks are in `superkernel.rs`).
#[test]
fn bad_kernel_tiles() {
    let cases = [
        (tile(0, 1), NpuWhy::NotCoreTile { col: 0, row: 1 }),
        (tile(0, 0), NpuWhy::NotCoreTile { col: 0, row: 0 }),
        (
            CORE | 4,
            NpuWhy::BadField {
                field: "tile",
                value: (CORE | 4).into(),
            },
        ),
    ];
    for (tl, want) in cases {
        let (_, why) = second_op(|t| {
            t.compute(tl, 1, 0, 80);
        });
        assert_eq!(why, want);
    }
    let (_, why) = second_op(|t| {
        t.compute(tile(0, 6), 1, 0, 80);
    });
    assert!(matches!(why, NpuWhy::BadTile { .. }));
}

#[test]
fn checks_run_before_any_data_moves() {
    // A store to `out` followed by a DMA past `in`: the store must not happen.
    let mut t = Txn::default();
    t.move_bytes(CORE, 0, true, 1, 0, 0, 16)
        .move_bytes(CORE, 1, false, 0, 60, 0, 8);
    let first = Txn::default().move_bytes(CORE, 0, true, 1, 0, 0, 16).ops;
    let mut b = Bufs {
        input: vec![0; 64],
        output: vec![9; 16],
        ..Bufs::default()
    };
    let (op, _, why) = op_err(fails(&t.finish(), &mut b));
    assert!(op > first, "op {op}: {why:?}");
    assert!(matches!(why, NpuWhy::OutOfBounds { .. }), "{why:?}");
    assert_eq!(b.output, vec![9; 16]);
}
