//! NPU segments for the tests: the fixture's segments (`crate::fixture::segments`) and [`Mock`], a
//! [`Device`] that records its calls and computes the segment's outputs with a Rust function.

use std::sync::{Arc, Mutex};
use std::vec::Vec;

pub use crate::fixture::segments::{both_layers_spec, layer0, layer0_spec};
use crate::npu::{Device, NpuBuffers, NpuCycles};
use crate::Result;

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
            elapsed: 40,
        })
    }
}
