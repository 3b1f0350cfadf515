//! The resident super-kernel: VNPU_KERNEL makes it resident on a core; each time its `GO` lock is
//! released it runs the kernel its mailbox names on the parameter block the mailbox points at, then
//! releases `DONE`. An f32 ELTWISE add through it equals the reference; a bad mailbox, a kernel
//! that is not resident and a VNPU_KERNEL naming another kernel or tile are named errors.

use std::vec::Vec;

use super::*;
use crate::error::{Error, NpuWhy};

/// Lock value registers of the core's `GO` (14) and `DONE` (15) locks; the mailbox.
const GO: u32 = CORE | (0x1F000 + 0x10 * 14);
const DONE: u32 = CORE | (0x1F000 + 0x10 * 15);
const MAILBOX: u32 = CORE | 0xF0;

/// An f32 ELTWISE add of 16 elements at 0x100 and 0x140 into 0x180; its block at 0x200.
fn add_block() -> Vec<u32> {
    let one = 1.0f32.to_bits();
    std::vec![0, 0, 0x100, 0x140, 0x180, 16, 0, 1, 0, 0, 0, one, 0, one, 0, one, 0]
}

/// The program: data and block written into the core, the super-kernel made resident, `go`
/// super-instructions started with `mailbox`, `DONE` polled, the result stored to `out`.
fn program(mailbox: [u32; 4], go: u32) -> Txn {
    let a: Vec<u32> = (0..16).map(|i| (i as f32 * 0.5).to_bits()).collect();
    let b: Vec<u32> = (0..16).map(|i| (100.0 - i as f32).to_bits()).collect();
    let mut t = Txn::default();
    t.blockwrite(CORE | 0x100, &a)
        .blockwrite(CORE | 0x140, &b)
        .blockwrite(CORE | 0x200, &add_block())
        .blockwrite(MAILBOX, &mailbox)
        .load_kernel(CORE, 1);
    for n in 1..=go {
        t.write(GO.into(), 1).maskpoll(DONE.into(), n, u32::MAX);
    }
    t.move_bytes(CORE, 0, true, 1, 0, 0x180, 64);
    t
}

fn run(t: &Txn) -> Result<Vec<u8>> {
    let mut b = Bufs {
        output: std::vec![0; 64],
        ..Bufs::default()
    };
    b.run(&t.finish())?;
    Ok(b.output)
}

#[test]
fn super_instructions_run_the_named_kernel() {
    let want: Vec<u8> = (0..16)
        .flat_map(|i| (i as f32 * 0.5 + (100.0 - i as f32)).to_le_bytes())
        .collect();
    assert_eq!(run(&program([4, 0x200, 68, 0], 1)).unwrap(), want);
    // Twice: DONE counts both; the result is the same.
    assert_eq!(run(&program([4, 0x200, 68, 0], 2)).unwrap(), want);
}

fn op_why(t: &Txn) -> NpuWhy {
    match run(t) {
        Err(Error::Npu { why, .. }) => why,
        r => panic!("expected an op error, got {r:?}"),
    }
}

#[test]
fn bad_mailboxes_and_kernels_are_named() {
    assert_eq!(
        op_why(&program([9, 0x200, 68, 0], 1)),
        NpuWhy::UnknownKernel { kernel: 9 }
    );
    assert_eq!(
        op_why(&program([4, 0x200, 64, 0], 1)),
        NpuWhy::ParamSize {
            kernel: 4,
            bytes: 64,
            expected: 68
        }
    );
    assert_eq!(
        op_why(&program([4, 0x202, 68, 0], 1)),
        NpuWhy::BadField {
            field: "parameter block address",
            value: 0x202
        }
    );
    assert!(matches!(
        op_why(&program([4, 0xFFF0, 68, 0], 1)),
        NpuWhy::OutOfBounds { .. }
    ));
    // GO released with no resident kernel: DONE never moves.
    let mut t = Txn::default();
    t.write(GO.into(), 1).maskpoll(DONE.into(), 1, u32::MAX);
    assert!(matches!(op_why(&t), NpuWhy::PollTimeout { .. }));
    // VNPU_KERNEL names the super-kernel (1) on a core tile.
    let mut t = Txn::default();
    t.load_kernel(CORE, 2);
    assert_eq!(
        op_why(&t),
        NpuWhy::BadField {
            field: "kernel",
            value: 2
        }
    );
    let mut t = Txn::default();
    t.load_kernel(tile(0, 1), 1);
    assert_eq!(op_why(&t), NpuWhy::NotCoreTile { col: 0, row: 1 });
}

/// A core whose DMA and super-kernel keep releasing each other's locks forever (an MM2S BD chained to
/// itself that acquires `DONE` and releases `GO`) is refused as unsettled, not run forever.
#[test]
fn a_kernel_and_a_dma_that_ping_pong_forever_are_refused() {
    let go_done = 1 << 25 | 1 << 26 | 14 << 13 | 1 << 18 | 1 << 12 | (0x7F & 0x7F) << 5 | 15;
    let mut t = Txn::default();
    t.blockwrite(MAILBOX, &[4, 0x200, 68, 0])
        .blockwrite(CORE | 0x200, &add_block())
        .blockwrite(CORE | bd(0), &[0, 0, 0, 0, 0, go_done])
        .load_kernel(CORE, 1)
        .write((CORE | 0x1DE14).into(), 0) // core MM2S 0: BD 0, which chains to itself
        .write(GO.into(), 1);
    assert_eq!(op_why(&t), NpuWhy::DmaUnsettled);
}

/// Cores compute in parallel as programmed: two 4096-element ELTWISE adds (128 cycles each at 32 per
/// cycle) released together and then awaited take one add's time; awaited one by one, two.
#[test]
fn cores_overlap_as_programmed() {
    let one = 1.0f32.to_bits();
    let block = [
        0, 0, 0x1000, 0x5000, 0x9000, 4096, 0, 1, 0, 0, 0, one, 0, one, 0, one, 0,
    ];
    let cores = [CORE, tile(1, 2)];
    let run = |together: bool| {
        let mut t = Txn::default();
        for &c in &cores {
            t.blockwrite(c | 0x200, &block)
                .blockwrite(c | 0xF0, &[4, 0x200, 68, 0])
                .load_kernel(c, 1);
        }
        let go = |t: &mut Txn, c: u32| {
            t.write((c | 0x1F0E0).into(), 1);
        };
        let done = |t: &mut Txn, c: u32| {
            t.maskpoll((c | 0x1F0F0).into(), 1, 0x3F);
        };
        if together {
            go(&mut t, cores[0]);
            go(&mut t, cores[1]);
            done(&mut t, cores[0]);
            done(&mut t, cores[1]);
        } else {
            go(&mut t, cores[0]);
            done(&mut t, cores[0]);
            go(&mut t, cores[1]);
            done(&mut t, cores[1]);
        }
        Bufs::default().run(&t.finish()).unwrap()
    };
    let (par, ser) = (run(true), run(false));
    assert_eq!((par.compute, ser.compute), (128, 128));
    let gain = ser.elapsed - par.elapsed;
    assert!((126..=130).contains(&gain), "{par:?} {ser:?}");
}
