//! Whole programs: a convolution tiled over two core tiles (output channels) and two input-channel
//! chunks (accumulate flag), finished by EPILOGUE, moved by AIE-ML transfers and computed by the
//! super-kernel, in f32 and u8; data-memory WRITE/BLOCKWRITE/MASKWRITE/MASKPOLL; a round trip
//! through `scratch`; strided transfers; the cycle estimate; state reset between runs.

use std::vec;
use std::vec::Vec;

use super::*;
use crate::npu::NpuCycles;

const CB: usize = 4;
const H: usize = 5;
const W: usize = 6;
const MB: usize = 4;
const HW: usize = H * W;
const K: usize = 9;

/// Input, weights, bias, scales of the tiled test conv, as f32 or as ints.
struct ConvData {
    xf: Vec<f32>,
    wf: Vec<f32>,
    bf: Vec<f32>,
    xq: Vec<i32>,
    wq: Vec<i32>,
    bq: Vec<i32>,
    scale: Vec<f32>,
}

const X_ZP: i32 = 7;
const Y_ZP: i32 = 3;

fn data(seed: u64) -> ConvData {
    let mut r = Rng(seed);
    ConvData {
        xf: r.fs(CB * HW),
        wf: r.fs(MB * CB * K),
        bf: r.fs(MB),
        xq: r.ints(CB * HW, 0, 255),
        wq: r.ints(MB * CB * K, -128, 127),
        bq: r.ints(MB, -2000, 2000),
        scale: (0..MB).map(|_| 0.0005 + r.f().abs() * 0.002).collect(),
    }
}

/// The reference: 3x3 conv with padding 1, + bias, relu (f32) or requantised with relu (u8).
fn reference(d: &ConvData, f32: bool) -> (Vec<f32>, Vec<i32>) {
    let (mut of, mut oq) = (vec![], vec![]);
    for m in 0..MB {
        for oh in 0..H {
            for ow in 0..W {
                let (mut vf, mut vq) = (0.0f32, 0i32);
                for c in 0..CB {
                    for ky in 0..3 {
                        for kx in 0..3 {
                            let (r, q) = (oh as i64 + ky as i64 - 1, ow as i64 + kx as i64 - 1);
                            if r < 0 || q < 0 || r >= H as i64 || q >= W as i64 {
                                continue;
                            }
                            let xi = c * HW + r as usize * W + q as usize;
                            let wi = (m * CB + c) * K + ky * 3 + kx;
                            vf += d.xf[xi] * d.wf[wi];
                            vq += (d.xq[xi] - X_ZP) * d.wq[wi];
                        }
                    }
                }
                if f32 {
                    of.push((vf + d.bf[m]).max(0.0));
                } else {
                    let r = (vq + d.bq[m]) as f32 * d.scale[m];
                    oq.push((r.round_ties_even() as i32 + Y_ZP).clamp(0, 255).max(Y_ZP));
                }
            }
        }
    }
    (of, oq)
}

/// Local layout of each tile.
const L_IN: u32 = 0;
const L_W: u32 = 256;
const L_ACC: u32 = 512;
const L_BIAS: u32 = 768;
const L_SCALE: u32 = 800;
const L_OUT: u32 = 1024;
const L_PAR: u32 = 2048;

/// Builds the tiled program and its buffers; returns (txn, buffers, total DMA bytes).
fn tiled(d: &ConvData, f32: bool) -> (Vec<u8>, Bufs, u64) {
    let es = if f32 { 4 } else { 1 };
    let dt = if f32 { 0 } else { 1 };
    let input = if f32 {
        words_bytes(&d.xf.iter().map(|x| x.to_bits()).collect::<Vec<_>>())
    } else {
        d.xq.iter().map(|&x| x as u8).collect()
    };
    let mut b = Bufs {
        input,
        ..Bufs::default()
    };
    // Weights in blocks of [2 m][2 c][3][3], one per (tile, chunk), as the compiler lays them out:
    // each block is one contiguous transfer of whole words (36 u8 or 144 f32 bytes).
    let mut consts = Vec::new();
    let mut w_blocks = [[0usize; 2]; 2];
    for (ti, blocks) in w_blocks.iter_mut().enumerate() {
        for (chunk, at) in blocks.iter_mut().enumerate() {
            *at = consts.len();
            for m in 2 * ti..2 * ti + 2 {
                for c in 2 * chunk..2 * chunk + 2 {
                    for k in 0..K {
                        let i = (m * CB + c) * K + k;
                        if f32 {
                            consts.extend_from_slice(&d.wf[i].to_le_bytes());
                        } else {
                            consts.push(d.wq[i] as u8);
                        }
                    }
                }
            }
        }
    }
    let bias_off = consts.len();
    consts.extend(if f32 {
        words_bytes(&d.bf.iter().map(|x| x.to_bits()).collect::<Vec<_>>())
    } else {
        words_bytes(&d.bq.iter().map(|&x| x as u32).collect::<Vec<_>>())
    });
    let scale_off = consts.len();
    consts.extend(words_bytes(
        &d.scale.iter().map(|x| x.to_bits()).collect::<Vec<_>>(),
    ));
    b.constants = consts;
    b.output = vec![0xCC; MB * HW * es];
    // Parameter blocks: conv (zero), conv (accumulate), epilogue; same for both tiles.
    let conv = |flags: u32| {
        [
            dt,
            flags,
            L_IN,
            L_W,
            L_ACC,
            2,
            H as u32,
            W as u32,
            2,
            H as u32,
            W as u32,
            3,
            3,
            1,
            1,
            1,
            1,
            -1i32 as u32,
            -1i32 as u32,
            X_ZP as u32,
        ]
    };
    let (lo, hi) = if f32 { (0, 0) } else { (Y_ZP as u32, 255) };
    let epi = [
        dt,
        1,
        L_ACC,
        L_BIAS,
        0,
        L_OUT,
        2,
        HW as u32,
        1,
        lo,
        hi,
        L_SCALE,
        Y_ZP as u32,
    ];
    let mut params = words_bytes(&conv(1));
    params.extend(words_bytes(&conv(0)));
    params.extend(words_bytes(&epi));
    let (conv_b, epi_b) = (80u32, 52u32);
    let plen = params.len() as u32;
    b.params = params;

    let mut t = Txn::default();
    let mut moved = 0u64;
    let mut next_bd = [0u32; 2];
    let tiles = [tile(0, 2), tile(1, 3)];
    let mut dma = |t: &mut Txn, ti: usize, store: bool, argidx: u64, off: usize, rows: [u32; 5]| {
        let bdi = next_bd[ti];
        next_bd[ti] = (bdi + 1) % 16;
        t.transfer(tiles[ti], bdi, store, (argidx, off as u64), rows);
        moved += u64::from(rows[1]) * u64::from(rows[2]);
    };
    for ti in 0..2 {
        dma(&mut t, ti, false, 4, 0, [L_PAR, plen, 1, 0, 0]);
        dma(
            &mut t,
            ti,
            false,
            3,
            bias_off + 2 * ti * 4,
            [L_BIAS, 8, 1, 0, 0],
        );
        if !f32 {
            dma(
                &mut t,
                ti,
                false,
                3,
                scale_off + 2 * ti * 4,
                [L_SCALE, 8, 1, 0, 0],
            );
        }
    }
    for chunk in 0..2 {
        for (ti, (&tl, blocks)) in tiles.iter().zip(&w_blocks).enumerate() {
            let in_off = 2 * chunk * HW * es;
            dma(
                &mut t,
                ti,
                false,
                0,
                in_off,
                [L_IN, (2 * HW * es) as u32, 1, 0, 0],
            );
            // This tile's two m and this chunk's two c.
            let block = (4 * K * es) as u32;
            dma(
                &mut t,
                ti,
                false,
                3,
                blocks[chunk],
                [L_W, block, 1, block, block],
            );
            // The compute waits for its DONE before the next chunk's loads overwrite its inputs.
            t.compute(tl, CONV, L_PAR + chunk as u32 * conv_b, conv_b);
        }
    }
    for (ti, &tl) in tiles.iter().enumerate() {
        t.compute(tl, EPILOGUE, L_PAR + 2 * conv_b, epi_b);
        let out_off = 2 * ti * HW * es;
        dma(
            &mut t,
            ti,
            true,
            1,
            out_off,
            [L_OUT, (2 * HW * es) as u32, 1, 0, 0],
        );
    }
    (t.finish(), b, moved)
}

/// The tiled programs, for other tests.
pub(super) fn tiled_program(f32: bool) -> (Vec<u8>, Bufs) {
    let (txn, b, _) = tiled(&data(11), f32);
    (txn, b)
}

#[test]
fn tiled_conv_f32_equals_reference_and_counts_cycles() {
    let d = data(11);
    let (txn, mut b, moved) = tiled(&d, true);
    let cycles = b.run(&txn).unwrap();
    let (want, _) = reference(&d, true);
    assert_close(&rd_f32(&b.output, 0, MB * HW), &want, "tiled conv f32");
    // Per tile: two conv chunks of 2*30*2*9 = 1080 MACs (34 cycles each at 32/cycle), one
    // epilogue of 60 elements (2 cycles).
    let want = NpuCycles {
        instruction: (txn.len() as u64).div_ceil(16) + 2000,
        data: moved.div_ceil(64),
        compute: 34 + 34 + 2,
        elapsed: cycles.elapsed,
    };
    assert_eq!(cycles, want);
    assert_eq!(
        cycles.bound(),
        want.instruction + want.data.max(want.compute)
    );
    // The program waits for every transfer (TCT) and every computation (DONE) before it goes on, so
    // nothing overlaps but the fetch of each of the 22 waiting ops (1 or 2 cycles) with the work it
    // waits for: the fetch, every DDR transfer and both tiles' computations follow one another
    // (each wait also rounds the fetch before it up to a cycle).
    let serial = want.instruction + want.data + 2 * want.compute;
    assert!(
        (serial - 40..=serial + 22).contains(&cycles.elapsed),
        "elapsed {} vs serial {serial}",
        cycles.elapsed
    );
}

#[test]
fn tiled_conv_u8_equals_reference() {
    let d = data(12);
    let (txn, mut b, _) = tiled(&d, false);
    let cycles = b.run(&txn).unwrap();
    let (_, want) = reference(&d, false);
    assert_eq!(rd_q(&b.output, 0, MB * HW, true), want);
    // int8 rate 256/cycle: 1080 MACs → 5 cycles per chunk, 60 elements → 1.
    assert_eq!(cycles.compute, 5 + 5 + 1);
}

#[test]
fn data_memory_words_and_memory_tile_round_trip() {
    // The input goes DDR → core tile → scratch → core tile, each way staged in the memory tile
    // (area 3 or 7 of core row 5, above 0x1D000 where only DMA reaches); the core tile's GAP
    // parameter block is written by BLOCKWRITE; a WRITE and a MASKWRITE patch data words,
    // MASKPOLL checks them.
    let core = tile(3, 5);
    let x: Vec<f32> = (0..12).map(|i| i as f32 * 0.5 - 1.0).collect();
    let mut b = Bufs {
        input: words_bytes(&x.iter().map(|v| v.to_bits()).collect::<Vec<_>>()),
        output: vec![0; 16],
        scratch: vec![0; 64],
        ..Bufs::default()
    };
    let mut t = Txn::default();
    t.move_bytes(core, 0, false, 0, 0, 0x100, 48)
        .move_bytes(core, 1, true, 2, 8, 0x100, 48)
        .move_bytes(core, 2, false, 2, 8, 0x100, 48)
        .blockwrite(core | 0x200, &[0, 0, 0x100, 0x300, 3, 4])
        // Word 5 (n) is first written as 9, then fixed: WRITE, then MASKWRITE of the low byte.
        .write((core | 0x214).into(), 0x0000_0109)
        .maskwrite((core | 0x214).into(), 0x04, 0xFF)
        .maskwrite((core | 0x214).into(), 0, 0xFF00)
        .maskpoll((core | 0x214).into(), 4, u32::MAX)
        .compute(core, GAP, 0x200, 24)
        .move_bytes(core, 3, true, 1, 0, 0x300, 12);
    let txn = t.finish();
    b.run(&txn).unwrap();
    let want: Vec<f32> = (0..3)
        .map(|c| x[4 * c..4 * c + 4].iter().fold(0.0f32, |s, v| s + v) / 4.0)
        .collect();
    assert_close(&rd_f32(&b.output, 0, 3), &want, "gap via memory tile");
    assert_eq!(&b.scratch[8..56], &b.input[..]);
    // A MASKPOLL on a data word that does not hold is a timeout too.
    let mut t2 = t.clone();
    t2.maskpoll((core | 0x300).into(), 1, 0);
    let e = b.run(&t2.finish()).unwrap_err();
    assert!(
        matches!(
            e,
            crate::Error::Npu {
                why: crate::error::NpuWhy::PollTimeout {
                    mask: 0,
                    expected: 1,
                    ..
                },
                ..
            }
        ),
        "{e:?}"
    );
}

#[test]
fn runs_start_from_zeroed_state() {
    let mut e = Emulator::vnpu();
    let mut b = Bufs {
        input: vec![7; 32],
        output: vec![1; 32],
        ..Bufs::default()
    };
    let mut t = Txn::default();
    t.move_bytes(CORE, 0, false, 0, 0, 64, 32)
        .move_bytes(CORE, 1, true, 1, 0, 64, 32);
    let txn = t.finish();
    e.run(&txn, b.bind()).unwrap();
    assert_eq!(b.output, vec![7; 32]);
    // Same emulator, no load: memory starts at zero again.
    let mut t = Txn::default();
    t.move_bytes(CORE, 1, true, 1, 0, 64, 32);
    e.run(&t.finish(), b.bind()).unwrap();
    assert_eq!(b.output, vec![0; 32]);
}

#[test]
fn strided_dma_rows_both_ways() {
    // Load a 3x4 window out of an 8-wide image of words (DDR stride 8 words), pack it (local
    // stride 4), store it back spread out (DDR stride 5 words, local stride 4).
    let img: Vec<u32> = (0..64).collect();
    let mut b = Bufs {
        input: words_bytes(&img),
        output: vec![0xFF; 80],
        ..Bufs::default()
    };
    let mut t = Txn::default();
    t.transfer(CORE, 3, false, (0, 4 * (8 * 2 + 1)), [16, 16, 3, 32, 16])
        .transfer(CORE, 4, true, (1, 4), [16, 16, 3, 20, 16]);
    let c = b.run(&t.finish()).unwrap();
    let mut want = vec![0xFFFF_FFFF; 20];
    for r in 0..3 {
        for q in 0..4 {
            want[1 + 5 * r + q] = img[17 + 8 * r + q];
        }
    }
    assert_eq!(b.output, words_bytes(&want));
    assert_eq!(c.data, 2); // 96 DDR bytes at 64 per cycle.
    assert_eq!(c.compute, 0);
}
