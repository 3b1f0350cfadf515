//! The NPU op library, following DynamicDispatch's operator interface (seed 001): every op gives its buffer
//! requirements as an arg map (INPUT, OUTPUT, SCRATCH_PAD, CONST_INPUT, CONST_KERNEL_PARAM_INPUT entries with XRT
//! arg index, ONNX arg index, offset and size), its transaction binary for its shapes, its runtime ("super
//! kernel") parameter blocks, and its constants formatted into the NPU's layout. One file per op family, named as
//! in `ir/ops/` and `codegen/ops/`: `cnn.rs` (Conv, MaxPool, AveragePool, GlobalAveragePool), `linalg.rs`
//! (MatMul, Gemm), `elementwise.rs` (Add, Mul, Relu, Clip), `shape.rs` (Concat, Reshape).
//!
//! `gen.rs` is the program generator the families drive (`Gen`). `capability.rs` turns an IR node into an
//! [`NpuOp`] or a rejection naming the one [`Constraint`] it breaks; the same constraint table prints `bundlec ops
//! --npu`. Ops are described independently of the IR (shapes, dtype, constants, quantisation), so the int8
//! variants are built and tested directly until the int8 importer produces them.

pub mod capability;
pub mod cnn;
pub mod elementwise;
mod gen;
pub mod linalg;
pub mod shape;

use super::target::NpuTarget;
use super::txn::{TxnBody, Xrt};
use crate::ir::Activation;

pub use capability::{npu_op_for_node, Constraint, Reject, CONSTRAINTS};
pub(crate) use gen::{EpilogueBlock, Gen};

/// ONNX ops the library implements (a target may list a subset).
pub const KNOWN_OPS: &[&str] = &[
    "Conv",
    "MatMul",
    "Gemm",
    "Add",
    "Mul",
    "Relu",
    "Clip",
    "MaxPool",
    "AveragePool",
    "GlobalAveragePool",
    "Concat",
    "Reshape",
];

/// Bytes of the parameter area at the start of every tile's local memory: blocks at 0 and [`PARAM_SLOT2`], the
/// super-kernel's mailbox in the last 16 bytes ([`super::txn::MAILBOX`]).
pub const PARAM_AREA: u32 = 256;
/// Offset of the second parameter block in the parameter area.
pub const PARAM_SLOT2: u32 = 128;
const _: () =
    assert!(PARAM_SLOT2 + 80 <= super::txn::MAILBOX && super::txn::MAILBOX + 16 == PARAM_AREA);

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
    /// The op's transaction body as programmed ([`super::clock::Clock`]): its fetch, the transfers and
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

/// An NPU op with static shapes.
#[derive(Debug, Clone, PartialEq)]
pub enum NpuOp {
    /// Convolution (incl. depthwise and grouped) with bias, residual and activation.
    Conv(cnn::ConvOp),
    /// Max / average pooling.
    Pool(cnn::PoolOp),
    /// Global average pooling.
    Gap(cnn::GapOp),
    /// Matrix product with constant right operand.
    Gemm(linalg::GemmOp),
    /// Elementwise add / mul / activation.
    Eltwise(elementwise::EltwiseOp),
    /// Concat / Reshape: DMA copies.
    Copy(shape::CopyOp),
}

impl NpuOp {
    /// Compiles the op for a target: arg map, transaction body, params, NPU-layout constants, cost.
    pub fn program(&self, t: &NpuTarget) -> Result<OpProgram, Reject> {
        match self {
            NpuOp::Conv(o) => o.program(t),
            NpuOp::Pool(o) => o.program(t),
            NpuOp::Gap(o) => o.program(t),
            NpuOp::Gemm(o) => o.program(t),
            NpuOp::Eltwise(o) => o.program(t),
            NpuOp::Copy(o) => o.program(t),
        }
    }
    /// The element type its multiply-accumulates run in (`None` for a copy, which has none): the MAC rate
    /// utilisation is measured against.
    pub fn elem(&self) -> Option<Elem> {
        match self {
            NpuOp::Conv(o) => Some(o.elem),
            NpuOp::Pool(o) => Some(o.elem),
            NpuOp::Gap(o) => Some(o.elem),
            NpuOp::Gemm(o) => Some(o.elem),
            NpuOp::Eltwise(o) => Some(o.elem),
            NpuOp::Copy(_) => None,
        }
    }
    /// Short kernel name for tables.
    pub fn kind(&self) -> &'static str {
        match self {
            NpuOp::Conv(c) if c.depthwise() => "dwconv",
            NpuOp::Conv(_) => "conv",
            NpuOp::Pool(_) => "pool",
            NpuOp::Gap(_) => "gap",
            NpuOp::Gemm(_) => "gemm",
            NpuOp::Eltwise(_) => "eltwise",
            NpuOp::Copy(_) => "copy",
        }
    }
}

/// Rounds up to 64.
pub(crate) fn a64(x: usize) -> usize {
    x.div_ceil(64) * 64
}

/// A tile's local bytes after the parameter area.
pub(crate) fn budget(t: &NpuTarget) -> usize {
    t.local_memory_bytes as usize - PARAM_AREA as usize
}

/// A working set that does not fit a tile's local memory.
pub(crate) fn local_memory(why: String) -> Reject {
    Reject::new(&capability::LOCAL_MEMORY, why)
}

/// An output block whose window lies outside the input (it sees only padding).
pub(crate) fn outside(why: String) -> Reject {
    Reject::new(&capability::PADS, why)
}

/// The epilogue's activation words (9, 10) for f32.
pub(crate) fn act_words(act: Activation) -> [u32; 3] {
    match act {
        Activation::None => [0, 0, 0],
        Activation::Relu => [1, 0, 0],
        Activation::Clip(lo, hi) => [2, lo.to_bits(), hi.to_bits()],
    }
}

/// Picks the candidate with the least cost among those whose local bytes fit; `None` if none fits.
pub(crate) fn best<T: Copy>(
    cands: impl Iterator<Item = (T, usize, u64)>,
    budget: usize,
) -> Option<T> {
    cands
        .filter(|c| c.1 <= budget)
        .min_by_key(|c| c.2)
        .map(|c| c.0)
}

/// Tilings tried, best estimate first, before an op whose transfers fit no AIE-ML BD stays on the CPU.
const MAX_TILINGS: usize = 16;

/// The program of the first tiling, best estimate first, among the `(block, local bytes, estimate)`
/// candidates within `budget` whose transfers all fit AIE-ML's BDs (an int8 block of odd rows may not, where
/// another block covers whole words). `none` explains an empty choice (the `local-memory` constraint); after
/// [`MAX_TILINGS`] tilings the first one's `dma` rejection stands.
pub(crate) fn first_fit<T: Copy>(
    mut cands: Vec<(T, usize, u64)>,
    budget: usize,
    none: impl FnOnce() -> String,
    mut build: impl FnMut(T) -> Result<OpProgram, Reject>,
) -> Result<OpProgram, Reject> {
    cands.retain(|c| c.1 <= budget);
    // Stable: equal estimates keep the candidates' order.
    cands.sort_by_key(|c| c.2);
    let mut first = None;
    for &(block, _, _) in cands.iter().take(MAX_TILINGS) {
        match build(block) {
            Err(r) if std::ptr::eq(r.constraint, &capability::DMA) => {
                first.get_or_insert(r);
            }
            done => return done,
        }
    }
    Err(first.unwrap_or_else(|| local_memory(none())))
}

/// Ranking of a block choice: estimated cycles of the op — the longer of its DMA traffic and its compute spread
/// over the tiles its `parallel` independent output blocks can occupy — then fewer work items.
pub(crate) fn est(
    t: &NpuTarget,
    elem: Elem,
    traffic: usize,
    macs: u64,
    parallel: usize,
    items: usize,
) -> u64 {
    let dma = traffic as u64 / t.dma_bytes_per_cycle as u64;
    let tiles = parallel.min(t.core_tiles().len()).max(1) as u64;
    let compute = macs / (elem.macs_per_cycle(t) * tiles);
    dma.max(compute) * 1024 + items as u64
}

/// Block-size candidates up to `n`: n itself and powers of two below it.
pub(crate) fn sizes(n: usize, cap: usize) -> Vec<usize> {
    let mut v = vec![n.min(cap)];
    let mut p = 1;
    while p < n.min(cap) {
        v.push(p);
        p *= 2;
    }
    v
}
