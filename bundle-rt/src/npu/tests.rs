//! Tests of the virtual NPU: transactions built by [`crate::fixture::txn::Txn`] (written from the
//! format pages, independent of `decode.rs`), a harness that runs one kernel on a tile image, and
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

pub(super) use crate::fixture::txn::{bd, shim, tile, Txn, CORE};

/// Kernel numbers.
pub(super) const CONV: u32 = 1;
pub(super) const GEMM: u32 = 2;
pub(super) const EPILOGUE: u32 = 3;
pub(super) const ELTWISE: u32 = 4;
pub(super) const POOL: u32 = 5;
pub(super) const GAP: u32 = 6;

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

/// A tile memory image under construction: regions are placed back to back, 4-aligned, after the
/// 256-byte parameter area (where the super-kernel's mailbox lives).
pub(super) struct Image {
    pub bytes: Vec<u8>,
}

impl Default for Image {
    fn default() -> Image {
        Image {
            bytes: vec![0xEE; 256],
        }
    }
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
/// back to `out`.
pub(super) fn kernel_txn(kernel: u32, nwords: usize, image_len: usize) -> Vec<u8> {
    let len = image_len as u32;
    let mut t = Txn::default();
    t.move_bytes(CORE, 0, false, 3, 0, 0, len)
        .move_bytes(CORE, 1, false, 4, 0, PARAM_ADDR, 4 * nwords as u32)
        .compute(CORE, kernel, PARAM_ADDR, 4 * nwords as u32)
        .move_bytes(CORE, 2, true, 1, 0, 0, len);
    t.finish()
}

/// Runs `kernel` with parameter `words` on a core tile holding `image`; returns the image after.
pub(super) fn run_kernel(kernel: u32, words: &[u32], image: &[u8]) -> Result<Vec<u8>> {
    assert!(!image.is_empty() && image.len() <= PARAM_ADDR as usize);
    let txn = kernel_txn(kernel, words.len(), image.len());
    // Transfers move whole words: the buffers are padded to them, as a bundle's are to 64 bytes.
    let padded = image.len().next_multiple_of(4);
    let mut constants = image.to_vec();
    constants.resize(padded, 0);
    let mut b = Bufs {
        output: vec![0; padded],
        constants,
        params: words_bytes(words),
        ..Bufs::default()
    };
    b.run(&txn)?;
    b.output.truncate(image.len());
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
    use super::kernels::elem::rhe;
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
        elapsed: 30,
    };
    assert_eq!((c.bound(), c.total()), (17, 30));
    let c = super::NpuCycles {
        instruction: 1,
        data: u64::MAX,
        compute: 0,
        elapsed: 0,
    };
    assert_eq!(c.bound(), u64::MAX);
}
