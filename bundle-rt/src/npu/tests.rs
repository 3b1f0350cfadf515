//! Tests of the virtual NPU: a transaction builder that writes ops byte by byte from the format
//! page (independent of `decode.rs`), a harness that runs one kernel on a tile image, and
//! independent reference implementations. `tests/kernels.rs` checks every kernel against them,
//! `tests/program.rs` whole tiled programs and the cycle count, `tests/hostile.rs` malformed
//! files and runs (which must fail with a typed error, never panic).

use std::vec;
use std::vec::Vec;

use super::{Device, Emulator, NpuBuffers, NpuTarget};
use crate::Result;

mod aie;
mod containers;
mod dma;
mod hostile;
mod hostile_dma;
mod kernels;
mod kernels_map;
mod program;
mod superkernel;

/// Offset of word 0 of shim buffer descriptor `i` (word 1, 4 bytes on, holds address bits 31:2;
/// word 2 bits 47:32 in its low half).
pub(super) const fn bd(i: u32) -> u32 {
    0x1D000 + 0x20 * i
}
/// Register base of the shim tile of tile `t`'s column.
pub(super) const fn shim(t: u32) -> u32 {
    t & (0x7F << 25)
}
pub(super) const LOAD_DONE: u32 = 0x1DF00;
pub(super) const STORE_DONE: u32 = 0x1DF04;
pub(super) const CORE_DONE: u32 = 0x32000;

/// Register address base of tile (col, row).
pub(super) const fn tile(col: u32, row: u32) -> u32 {
    col << 25 | row << 20
}

/// The first core tile of the vnpu (row 2; row 1 is the memory-tile row).
pub(super) const CORE: u32 = tile(0, 2);
/// Kernel numbers.
pub(super) const CONV: u32 = 1;
pub(super) const GEMM: u32 = 2;
pub(super) const EPILOGUE: u32 = 3;
pub(super) const ELTWISE: u32 = 4;
pub(super) const POOL: u32 = 5;
pub(super) const GAP: u32 = 6;

/// Builds a transaction op by op, as the format page lays them out.
#[derive(Default, Clone)]
pub(super) struct Txn {
    pub body: Vec<u8>,
    pub ops: u32,
}

impl Txn {
    pub(super) fn u32(&mut self, v: u32) {
        self.body.extend_from_slice(&v.to_le_bytes());
    }
    fn u64(&mut self, v: u64) {
        self.body.extend_from_slice(&v.to_le_bytes());
    }
    /// aie-rt op header: opcode, col, row (informative), 5 pad bytes.
    fn aie(&mut self, opcode: u8, addr: u64) {
        let (col, row) = ((addr >> 25) as u8, ((addr >> 20) & 31) as u8);
        self.body
            .extend_from_slice(&[opcode, col, row, 0, 0, 0, 0, 0]);
        self.ops += 1;
    }
    pub(super) fn custom(&mut self, opcode: u8, size: u32) {
        self.body.extend_from_slice(&[opcode, 0, 0, 0]);
        self.u32(size);
        self.ops += 1;
    }
    pub fn write(&mut self, addr: u64, value: u32) -> &mut Txn {
        self.aie(0, addr);
        self.u64(addr);
        self.u32(value);
        self.u32(24);
        self
    }
    pub fn blockwrite(&mut self, addr: u32, words: &[u32]) -> &mut Txn {
        self.aie(1, addr.into());
        self.u32(addr);
        self.u32(16 + 4 * words.len() as u32);
        for &w in words {
            self.u32(w);
        }
        self
    }
    fn mask(&mut self, opcode: u8, addr: u64, value: u32, mask: u32) -> &mut Txn {
        self.aie(opcode, addr);
        self.u64(addr);
        self.u32(value);
        self.u32(mask);
        self.u32(32);
        self.u32(0);
        self
    }
    pub fn maskwrite(&mut self, addr: u64, value: u32, mask: u32) -> &mut Txn {
        self.mask(3, addr, value, mask)
    }
    pub fn maskpoll(&mut self, addr: u64, value: u32, mask: u32) -> &mut Txn {
        self.mask(4, addr, value, mask)
    }
    pub fn ddr_patch(&mut self, regaddr: u64, argidx: u64, argplus: u64) -> &mut Txn {
        self.custom(129, 48);
        self.u32(0);
        self.u32(40);
        self.u32(0);
        self.u32(0);
        self.u64(regaddr);
        self.u64(argidx);
        self.u64(argplus);
        self
    }
    /// VNPU_DMA through the shim BD at `bd_reg` for tile `t`, starting `skip` bytes past the BD's
    /// address: `[local, row bytes, rows, ddr stride, local stride]`.
    pub fn dma_raw(
        &mut self,
        bd_reg: u32,
        t: u32,
        skip: u32,
        store: bool,
        rows: [u32; 5],
    ) -> &mut Txn {
        self.custom(144, 44);
        self.u32(bd_reg);
        self.u32(store.into());
        for v in rows {
            self.u32(v);
        }
        self.u32(t);
        self.u32(skip);
        self
    }
    /// VNPU_DMA for tile `t` through BD `i` of its column's shim tile.
    pub fn dma(&mut self, t: u32, i: u32, store: bool, rows: [u32; 5]) -> &mut Txn {
        self.dma_raw(shim(t) | bd(i), t, 0, store, rows)
    }
    /// DDR_PATCH of BD `i` of tile `t`'s shim tile (word 1).
    pub fn patch(&mut self, t: u32, i: u32, argidx: u64, argplus: u64) -> &mut Txn {
        self.ddr_patch((shim(t) | (bd(i) + 4)).into(), argidx, argplus)
    }
    /// Patch BD `i` of `t`'s shim tile with `off` rounded down to 4, then a VNPU_DMA from `off`.
    pub fn transfer(
        &mut self,
        t: u32,
        i: u32,
        store: bool,
        (argidx, off): (u64, u64),
        rows: [u32; 5],
    ) -> &mut Txn {
        self.patch(t, i, argidx, off & !3);
        self.dma_raw(shim(t) | bd(i), t, (off & 3) as u32, store, rows)
    }
    /// Patch BD `i` of tile `t`'s shim tile to `argidx` + `argplus`, then a one-row DMA of `len` bytes
    /// at `local`.
    #[allow(clippy::too_many_arguments)] // one per field of the two ops
    pub fn move_bytes(
        &mut self,
        t: u32,
        i: u32,
        store: bool,
        argidx: u64,
        argplus: u64,
        local: u32,
        len: u32,
    ) -> &mut Txn {
        self.transfer(t, i, store, (argidx, argplus), [local, len, 1, 0, 0])
    }
    pub fn compute(&mut self, t: u32, kernel: u32, param_addr: u32, param_bytes: u32) -> &mut Txn {
        self.custom(145, 24);
        self.u32(t);
        self.u32(kernel);
        self.u32(param_addr);
        self.u32(param_bytes);
        self
    }
    /// The container for `t`.
    pub fn finish_for(&self, t: &NpuTarget) -> Vec<u8> {
        let total = 16 + self.body.len() as u32;
        let mut v = vec![
            0,
            1,
            crate::TXN_GEN_AIE2IPU,
            t.rows,
            t.cols,
            t.mem_tile_rows,
            0,
            0,
        ];
        v.extend_from_slice(&self.ops.to_le_bytes());
        v.extend_from_slice(&total.to_le_bytes());
        v.extend_from_slice(&self.body);
        v
    }
    pub fn finish(&self) -> Vec<u8> {
        self.finish_for(&NpuTarget::vnpu())
    }
}

/// Owned buffers for a run.
#[derive(Clone, Default, Debug, PartialEq)]
pub(super) struct Bufs {
    pub input: Vec<u8>,
    pub output: Vec<u8>,
    pub scratch: Vec<u8>,
    pub constants: Vec<u8>,
    pub params: Vec<u8>,
}

impl Bufs {
    pub fn bind(&mut self) -> NpuBuffers<'_> {
        NpuBuffers {
            input: &self.input,
            output: &mut self.output,
            scratch: &mut self.scratch,
            constants: &self.constants,
            params: &self.params,
        }
    }
    pub fn run(&mut self, txn: &[u8]) -> Result<super::NpuCycles> {
        Emulator::vnpu().run(txn, self.bind())
    }
}

/// Little-endian bytes of words.
pub(super) fn words_bytes(words: &[u32]) -> Vec<u8> {
    words.iter().flat_map(|w| w.to_le_bytes()).collect()
}

/// A tile memory image under construction: regions are placed back to back, 4-aligned.
#[derive(Default)]
pub(super) struct Image {
    pub bytes: Vec<u8>,
}

impl Image {
    pub fn raw(&mut self, b: &[u8]) -> u32 {
        while !self.bytes.len().is_multiple_of(4) {
            self.bytes.push(0xEE);
        }
        let at = self.bytes.len() as u32;
        self.bytes.extend_from_slice(b);
        at
    }
    pub fn f32s(&mut self, v: &[f32]) -> u32 {
        self.raw(&words_bytes(
            &v.iter().map(|x| x.to_bits()).collect::<Vec<_>>(),
        ))
    }
    pub fn i32s(&mut self, v: &[i32]) -> u32 {
        self.raw(&words_bytes(
            &v.iter().map(|&x| x as u32).collect::<Vec<_>>(),
        ))
    }
    pub fn q(&mut self, v: &[i32]) -> u32 {
        self.raw(&v.iter().map(|&x| x as u8).collect::<Vec<_>>())
    }
    /// `n` bytes of a recognisable filler (outputs that the kernel must overwrite).
    pub fn junk(&mut self, n: usize) -> u32 {
        self.raw(&vec![0xA5; n])
    }
}

pub(super) fn rd_f32(m: &[u8], at: u32, n: usize) -> Vec<f32> {
    (0..n)
        .map(|i| {
            let a = at as usize + 4 * i;
            f32::from_le_bytes(m[a..a + 4].try_into().unwrap())
        })
        .collect()
}
pub(super) fn rd_i32(m: &[u8], at: u32, n: usize) -> Vec<i32> {
    rd_f32(m, at, n)
        .iter()
        .map(|x| x.to_bits() as i32)
        .collect()
}
/// `n` int8 elements (u8 when `unsigned`).
pub(super) fn rd_q(m: &[u8], at: u32, n: usize, unsigned: bool) -> Vec<i32> {
    m[at as usize..at as usize + n]
        .iter()
        .map(|&b| if unsigned { b.into() } else { (b as i8).into() })
        .collect()
}

/// Where `run_kernel` puts the parameter block.
pub(super) const PARAM_ADDR: u32 = 0xF000;

/// The txn `run_kernel` runs: image from `const`, parameters from `super_instr`, compute, image
/// back to `out`, MASKPOLLs on the three counters.
pub(super) fn kernel_txn(kernel: u32, nwords: usize, image_len: usize) -> Vec<u8> {
    let len = image_len as u32;
    let mut t = Txn::default();
    t.move_bytes(CORE, 0, false, 3, 0, 0, len)
        .move_bytes(CORE, 1, false, 4, 0, PARAM_ADDR, 4 * nwords as u32)
        .compute(CORE, kernel, PARAM_ADDR, 4 * nwords as u32)
        .move_bytes(CORE, 2, true, 1, 0, 0, len)
        .maskpoll((CORE | LOAD_DONE).into(), 2, u32::MAX)
        .maskpoll((CORE | CORE_DONE).into(), 1, u32::MAX)
        .maskpoll((CORE | STORE_DONE).into(), 1, u32::MAX);
    t.finish()
}

/// Runs `kernel` with parameter `words` on a core tile holding `image`; returns the image after.
pub(super) fn run_kernel(kernel: u32, words: &[u32], image: &[u8]) -> Result<Vec<u8>> {
    assert!(!image.is_empty() && image.len() <= PARAM_ADDR as usize);
    let txn = kernel_txn(kernel, words.len(), image.len());
    let mut b = Bufs {
        output: vec![0; image.len()],
        constants: image.to_vec(),
        params: words_bytes(words),
        ..Bufs::default()
    };
    b.run(&txn)?;
    Ok(b.output)
}

/// A small deterministic generator (xorshift64*).
pub(super) struct Rng(pub u64);

impl Rng {
    pub fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
    /// Uniform in [-1, 1), a multiple of 2^-10 plus a tail so sums are not exact.
    pub fn f(&mut self) -> f32 {
        (self.next() >> 40) as f32 / (1u64 << 23) as f32 - 1.0
    }
    pub fn fs(&mut self, n: usize) -> Vec<f32> {
        (0..n).map(|_| self.f()).collect()
    }
    /// Uniform in [lo, hi].
    pub fn int(&mut self, lo: i32, hi: i32) -> i32 {
        lo + (self.next() % (hi - lo + 1) as u64) as i32
    }
    pub fn ints(&mut self, n: usize, lo: i32, hi: i32) -> Vec<i32> {
        (0..n).map(|_| self.int(lo, hi)).collect()
    }
}

/// f32 results equal the reference within 1e-5 relative (they are in fact computed in the same
/// order, so bit-identical except for the sign of zero).
pub(super) fn assert_close(got: &[f32], want: &[f32], what: &str) {
    assert_eq!(got.len(), want.len(), "{what}: length");
    for (i, (g, w)) in got.iter().zip(want).enumerate() {
        let tol = 1e-5 * w.abs().max(1e-30);
        assert!(
            (g - w).abs() <= tol || (g.is_nan() && w.is_nan()),
            "{what}[{i}]: got {g}, want {w}"
        );
        assert!(
            g == w || (g.is_nan() && w.is_nan()),
            "{what}[{i}]: not bit-exact: got {g}, want {w}"
        );
    }
}

#[test]
fn rhe_matches_round_ties_even() {
    use super::kernels::rhe;
    let mut specials = vec![
        0.0f32,
        -0.0,
        0.5,
        -0.5,
        1.5,
        -1.5,
        2.5,
        -2.5,
        0.49999997,
        -0.49999997,
        4194303.5,
        4194304.5,
        -4194304.5,
        8388607.5,
        -8388607.5,
        8388608.0,
        16777215.0,
        1e30,
        -1e30,
        f32::INFINITY,
        f32::NEG_INFINITY,
        f32::MIN_POSITIVE,
        -f32::MIN_POSITIVE,
        1e-45,
    ];
    let mut rng = Rng(7);
    for _ in 0..100_000 {
        specials.push(f32::from_bits(rng.next() as u32));
        specials.push((rng.int(-2000, 2000) as f32) * 0.25);
    }
    for x in specials {
        let (got, want) = (rhe(x), x.round_ties_even());
        assert!(
            got.to_bits() == want.to_bits() || (got.is_nan() && want.is_nan()),
            "rhe({x:e}) = {got:e}, want {want:e}"
        );
    }
}

#[test]
fn device_name_target_and_total() {
    let e = Emulator::vnpu();
    assert_eq!(e.name(), "vnpu-emulator");
    assert_eq!(*e.target(), NpuTarget::vnpu());
    let c = super::NpuCycles {
        instruction: 10,
        data: 5,
        compute: 7,
    };
    assert_eq!(c.total(), 17);
    let c = super::NpuCycles {
        instruction: 1,
        data: u64::MAX,
        compute: 0,
    };
    assert_eq!(c.total(), u64::MAX);
}
