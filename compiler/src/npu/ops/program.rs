//! What an op program is: its element types, quantisation, weights and requantisation, the entries of its arg
//! map, its cost, and the compiled program itself (transaction body, constants, parameter blocks).

use crate::npu::target::NpuTarget;
use crate::npu::txn::{TxnBody, Xrt};

/// Bytes of the parameter area at the start of every tile's local memory: blocks at 0 and [`PARAM_SLOT2`], the
/// super-kernel's mailbox in the last 16 bytes ([`crate::npu::txn::MAILBOX`]).
pub const PARAM_AREA: u32 = 256;

/// Offset of the second parameter block in the parameter area.
pub const PARAM_SLOT2: u32 = 128;

/// Element type of an NPU op's activations.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Elem {
    /// f32 activations and weights.
    F32,
    /// u8 activations, i8 weights, i32 accumulation.
    U8,
    /// i8 activations, i8 weights, i32 accumulation.
    I8,
}

impl Elem {
    /// The kernels' dtype code.
    pub fn code(self) -> u32 {
        match self {
            Elem::F32 => 0,
            Elem::U8 => 1,
            Elem::I8 => 2,
        }
    }
    /// Bytes per activation element.
    pub fn size(self) -> usize {
        match self {
            Elem::F32 => 4,
            _ => 1,
        }
    }
    /// Name in tables.
    pub fn name(self) -> &'static str {
        match self {
            Elem::F32 => "f32",
            Elem::U8 => "u8",
            Elem::I8 => "i8",
        }
    }
    /// MACs per cycle of one core tile for this type.
    pub fn macs_per_cycle(self, t: &NpuTarget) -> u64 {
        match self {
            Elem::F32 => t.macs_per_cycle.f32 as u64,
            _ => t.macs_per_cycle.i8 as u64,
        }
    }
    /// Output range of an int8 type.
    pub fn range(self) -> (i32, i32) {
        match self {
            Elem::U8 => (0, 255),
            Elem::I8 => (-128, 127),
            Elem::F32 => (i32::MIN, i32::MAX),
        }
    }
}

/// A per-tensor quantisation: real = scale * (q - zero_point).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Quant {
    /// Scale.
    pub scale: f32,
    /// Zero point.
    pub zero_point: i32,
}

/// Weights of a conv or gemm in their ONNX layout.
#[derive(Debug, Clone, PartialEq)]
pub enum Weights {
    /// f32 values.
    F32(Vec<f32>),
    /// Symmetric int8 values (per-channel scales live in the op's requantisation).
    I8(Vec<i8>),
}

impl Weights {
    /// Appends element `i` in little-endian bytes.
    pub(crate) fn push(&self, i: usize, out: &mut Vec<u8>) {
        match self {
            Weights::F32(v) => out.extend_from_slice(&v[i].to_le_bytes()),
            Weights::I8(v) => out.push(v[i] as u8),
        }
    }
}

/// How an int8 conv/gemm turns its i32 accumulator into the output: `clamp(sat(rhe(f32(acc + bias) * scale[c]) +
/// zero_point), lo, hi)`.
#[derive(Debug, Clone, PartialEq)]
pub struct Requant {
    /// Input zero point (subtracted from every activation).
    pub x_zero_point: i32,
    /// i32 bias per output channel.
    pub bias: Vec<i32>,
    /// x_scale * w_scale\[c\] / y_scale per output channel.
    pub scale: Vec<f32>,
    /// Output zero point.
    pub y_zero_point: i32,
    /// Output clamp (includes the fused activation).
    pub clamp: (i32, i32),
}

/// Kind of an arg map entry (seed 001's `OpArgType`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ArgKind {
    /// An activation input.
    Input,
    /// An output.
    Output,
    /// Per-op scratch in DDR.
    ScratchPad,
    /// Constants formatted for the NPU.
    ConstInput,
    /// Kernel parameter blocks.
    ConstKernelParamInput,
}

/// One entry of an op's arg map.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ArgEntry {
    /// What the entry holds.
    pub kind: ArgKind,
    /// XRT buffer (fused-buffer index; XRT kernel arg = 3 + index).
    pub xrt: Xrt,
    /// ONNX input index (inputs), output index (outputs) or 0.
    pub onnx: usize,
    /// Byte offset in the op-local buffer.
    pub offset: u64,
    /// Bytes.
    pub size: u64,
}

/// Cost figures of one op's program.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct OpCost {
    /// Multiply-accumulates (or elements for non-MAC ops).
    pub macs: u64,
    /// Compute cycles of the busiest tile.
    pub compute_cycles: u64,
    /// Bytes moved by DMA.
    pub dma_bytes: u64,
    /// DMA cycles.
    pub dma_cycles: u64,
    /// Tiles used.
    pub tiles: usize,
    /// The op's transaction body as programmed ([`crate::npu::clock::Clock`]): its fetch, the transfers and
    /// computations the host waits for, and what overlaps.
    pub elapsed: u64,
}

impl OpCost {
    /// Double-buffered DMA overlaps compute: the op takes the longer of the two.
    pub fn cycles(&self) -> u64 {
        self.compute_cycles.max(self.dma_cycles)
    }
}

/// An op compiled for the NPU: the four things of the operator interface plus its cost.
#[derive(Debug, Clone, Default)]
pub struct OpProgram {
    /// Transaction ops; DDR_PATCHes address the op-local buffers of `arg_map`.
    pub body: TxnBody,
    /// Constants in NPU layout (op-local `const`).
    pub consts: Vec<u8>,
    /// Parameter blocks (op-local `super_instr`).
    pub params: Vec<u8>,
    /// Buffer requirements.
    pub arg_map: Vec<ArgEntry>,
    /// Cost.
    pub cost: OpCost,
}

const _: () = assert!(
    PARAM_SLOT2 + 80 <= crate::npu::txn::MAILBOX && crate::npu::txn::MAILBOX + 16 == PARAM_AREA
);
