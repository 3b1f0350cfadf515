//! NPU segments for the fixture: a real transaction for the virtual NPU that computes layer 0
//! (`t1 = x + c`, `t2 = x * k` with ELTWISE on one core tile, written byte by byte from
//! `docs/npu-transaction-format.md`), the fixtures that use it, and [`Mock`], a [`Device`] that
//! records its calls and computes the segment's outputs with a Rust function.

use std::sync::{Arc, Mutex};
use std::vec;
use std::vec::Vec;

use crate::fixture::{Fixture, SegmentSpec};
use crate::npu::{Device, NpuBuffers, NpuCycles};
use crate::Result;

/// Builds a transaction op by op (the container header is added by [`Txn::finish`]).
#[derive(Default)]
struct Txn {
    body: Vec<u8>,
    ops: u32,
}

/// The first core tile of the vnpu: column 0, row 2.
const CORE: u32 = 2 << 20;
/// Word 0 of `BD[0]` of the shim tile of [`CORE`]'s column (column 0, row 0); word 1 holds the
/// address.
const BD0: u32 = 0x1D000;

impl Txn {
    fn u32(&mut self, v: u32) {
        self.body.extend_from_slice(&v.to_le_bytes());
    }

    fn u64(&mut self, v: u64) {
        self.body.extend_from_slice(&v.to_le_bytes());
    }

    /// Custom op header: opcode, 3 pad bytes, size.
    fn custom(&mut self, opcode: u8, size: u32) {
        self.body.extend_from_slice(&[opcode, 0, 0, 0]);
        self.u32(size);
        self.ops += 1;
    }

    /// DDR_PATCH of shim `BD[0]` to fused buffer `argidx` at `argplus` (4-aligned), then a one-row
    /// VNPU_DMA of `len` bytes between it and `local` of [`CORE`].
    fn transfer(&mut self, store: bool, argidx: u64, argplus: u64, local: u32, len: u32) {
        self.custom(129, 48);
        for v in [0, 40, 0, 0] {
            self.u32(v);
        }
        self.u64((BD0 + 4).into());
        self.u64(argidx);
        self.u64(argplus);
        self.custom(144, 44);
        for v in [BD0, store.into(), local, len, 1, 0, 0, CORE, 0] {
            self.u32(v);
        }
    }

    /// VNPU_COMPUTE of `kernel` on [`CORE`] with the parameter block at `local`.
    fn compute(&mut self, kernel: u32, local: u32, bytes: u32) {
        self.custom(145, 24);
        for v in [CORE, kernel, local, bytes] {
            self.u32(v);
        }
    }

    /// The container for the vnpu (6 rows, 4 columns, 1 memory-tile row).
    fn finish(&self) -> Vec<u8> {
        let total = 16 + self.body.len() as u32;
        let mut v = vec![0, 1, crate::TXN_GEN_AIE2IPU, 6, 4, 1, 0, 0];
        v.extend_from_slice(&self.ops.to_le_bytes());
        v.extend_from_slice(&total.to_le_bytes());
        v.extend_from_slice(&self.body);
        v
    }
}

/// Little-endian bytes of words.
fn words(w: &[u32]) -> Vec<u8> {
    w.iter().flat_map(|v| v.to_le_bytes()).collect()
}

/// An f32 ELTWISE parameter block: `out = a (op) b` over `n` elements, `b` scalar when `scalar`.
fn eltwise(op: u32, a: u32, b: u32, out: u32, n: u32, scalar: bool) -> [u32; 17] {
    let one = 1.0f32.to_bits();
    [
        0,
        op,
        a,
        b,
        out,
        n,
        scalar.into(),
        1,
        0,
        0,
        0,
        one,
        0,
        one,
        0,
        one,
        0,
    ]
}

/// Local addresses in the core tile.
const L_X: u32 = 0;
const L_C: u32 = 1024;
const L_K: u32 = 2048;
const L_T1: u32 = 3072;
const L_T2: u32 = 4096;
const L_PARAMS: u32 = 8192;

/// Segment `npu0` replacing layer 0 of the small fixture: `in` = x then c, `out` = t1 then t2, no
/// scratch; constants `[k]` (f32), parameters two ELTWISE blocks. With `k == 2` it computes
/// exactly the fallback ops `add_c` and `double`.
pub fn layer0_spec(fx: &Fixture, k: f32) -> SegmentSpec {
    let bytes = fx.n * 4;
    let n = fx.n as u32;
    let block = 17 * 4;
    let mut params = words(&eltwise(0, L_X, L_C, L_T1, n, false));
    params.extend(words(&eltwise(1, L_X, L_K, L_T2, n, true)));
    let b = bytes as u32;
    let mut t = Txn::default();
    t.transfer(false, 0, 0, L_X, b);
    t.transfer(false, 0, bytes as u64, L_C, b);
    t.transfer(false, 3, 0, L_K, 4);
    t.transfer(false, 4, 0, L_PARAMS, 2 * block);
    t.compute(4, L_PARAMS, block);
    t.compute(4, L_PARAMS + block, block);
    t.transfer(true, 1, 0, L_T1, b);
    t.transfer(true, 1, bytes as u64, L_T2, b);
    SegmentSpec {
        name: "npu0",
        first_layer: 0,
        num_layers: 1,
        copy_in: vec![(1, 0, bytes), (0, 0, bytes)],
        copy_out: vec![(2, 0, bytes), (2, bytes, bytes)],
        scratch: 0,
        consts: k.to_le_bytes().to_vec(),
        params,
        txn: t.finish(),
    }
}

/// The small fixture with [`layer0_spec`] (`t2 = x * k`).
pub fn layer0(k: f32) -> Fixture {
    let mut fx = Fixture::small();
    let spec = layer0_spec(&fx, k);
    fx.add_segment(spec);
    fx
}

/// Segment `npu0` replacing both layers of `fx` (mock devices only): `in` = x, c, marks; `out` = y,
/// marks. [`compute_both_layers`] computes it.
pub fn both_layers_spec(fx: &Fixture) -> SegmentSpec {
    let bytes = fx.n * 4;
    let marks = fx.symbols[2].size as usize * 4;
    SegmentSpec {
        name: "npu0",
        first_layer: 0,
        num_layers: 2,
        copy_in: vec![(1, 0, bytes), (0, 0, bytes), (1, 2 * bytes, marks)],
        copy_out: vec![(1, bytes, bytes), (1, 2 * bytes, marks)],
        scratch: 64,
        consts: vec![],
        params: vec![],
        txn: Txn::default().finish(),
    }
}

/// f32 values of little-endian bytes.
fn f32s(b: &[u8]) -> Vec<f32> {
    b.chunks_exact(4)
        .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
        .collect()
}

/// What layer 0 computes, from `in` = x, c into `out` = t1, t2 (as the fallback kernels do).
pub fn compute_layer0(input: &[u8], output: &mut [u8]) {
    let half = input.len() / 2;
    let (x, c) = (f32s(&input[..half]), f32s(&input[half..]));
    let t1 = x.iter().zip(&c).map(|(x, c)| x + c);
    let t2 = x.iter().map(|x| x * 2.0);
    let out: Vec<u8> = t1.chain(t2).flat_map(f32::to_le_bytes).collect();
    output.copy_from_slice(&out);
}

/// What both layers compute, from `in` = x, c, marks into `out` = y, marks + 1.
pub fn compute_both_layers(input: &[u8], output: &mut [u8]) {
    // in = x, c, marks and out = y, marks: the difference is one tensor of `bytes`.
    let bytes = input.len() - output.len();
    let marks_len = output.len() - bytes;
    let (x, c) = (f32s(&input[..bytes]), f32s(&input[bytes..2 * bytes]));
    let y = x
        .iter()
        .zip(&c)
        .map(|(x, c)| ((x + c) + x * 2.0) + 1.0)
        .flat_map(f32::to_le_bytes);
    let m = input[2 * bytes..2 * bytes + marks_len]
        .chunks_exact(4)
        .map(|b| i32::from_le_bytes([b[0], b[1], b[2], b[3]]) + 1)
        .flat_map(i32::to_le_bytes);
    let out: Vec<u8> = y.chain(m).collect();
    output.copy_from_slice(&out);
}

/// One call a [`Mock`] received.
#[derive(Clone, Debug, PartialEq)]
pub struct MockCall {
    pub txn: Vec<u8>,
    pub input: Vec<u8>,
    /// Lengths of in, out, scratch, const, params.
    pub sizes: [usize; 5],
    pub constants: Vec<u8>,
    pub params: Vec<u8>,
}

/// A device that records each call (shared, so a test can read it after handing the device away)
/// and fills `out` with `compute(in, out)`.
pub struct Mock {
    pub calls: Arc<Mutex<Vec<MockCall>>>,
    pub compute: fn(&[u8], &mut [u8]),
}

impl Mock {
    pub fn new(compute: fn(&[u8], &mut [u8])) -> Mock {
        Mock {
            calls: Arc::default(),
            compute,
        }
    }

    pub fn calls(&self) -> Vec<MockCall> {
        self.calls.lock().unwrap().clone()
    }
}

impl Device for Mock {
    fn name(&self) -> &str {
        "mock"
    }

    fn run(&mut self, txn: &[u8], bufs: NpuBuffers<'_>) -> Result<NpuCycles> {
        self.calls.lock().unwrap().push(MockCall {
            txn: txn.to_vec(),
            input: bufs.input.to_vec(),
            sizes: [
                bufs.input.len(),
                bufs.output.len(),
                bufs.scratch.len(),
                bufs.constants.len(),
                bufs.params.len(),
            ],
            constants: bufs.constants.to_vec(),
            params: bufs.params.to_vec(),
        });
        (self.compute)(bufs.input, bufs.output);
        Ok(NpuCycles {
            instruction: 10,
            data: 20,
            compute: 30,
        })
    }
}
