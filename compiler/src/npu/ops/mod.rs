//! The NPU op library, following DynamicDispatch's operator interface (seed 001): every op gives its buffer
//! requirements as an arg map (INPUT, OUTPUT, SCRATCH_PAD, CONST_INPUT, CONST_KERNEL_PARAM_INPUT entries with XRT
//! arg index, ONNX arg index, offset and size), its transaction binary for its shapes, its runtime ("super
//! kernel") parameter blocks, and its constants formatted into the NPU's layout. One file per op family, named as
//! in `ir/ops/` and `codegen/ops/`: `cnn.rs` (Conv, MaxPool, AveragePool, GlobalAveragePool), `linalg.rs`
//! (MatMul, Gemm), `elementwise.rs` (Add, Mul, Relu, Clip), `shape.rs` (Concat, Reshape).
//!
//! `capability.rs` turns an IR node into an [`NpuOp`] or a rejection naming the one [`Constraint`] it breaks;
//! the same constraint table prints `bundlec ops --npu`. Ops are described independently of the IR (shapes,
//! dtype, constants, quantisation), so the int8 variants are built and tested directly until the int8 importer
//! produces them.

pub mod capability;
pub mod cnn;
pub mod elementwise;
pub mod linalg;
pub mod shape;

use super::target::NpuTarget;
use super::txn::{Kernel, TxnBody, Xrt};
use crate::ir::Activation;

pub use capability::{npu_op_for_node, Constraint, Reject, CONSTRAINTS};

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

/// Shared state of an op's program generator: tiles round-robin, parameter dedup, per-tile cycle sums.
pub(crate) struct Gen<'t> {
    pub t: &'t NpuTarget,
    pub p: OpProgram,
    tiles: Vec<(u8, u8)>,
    next: usize,
    tile_cycles: Vec<u64>,
    param_index: std::collections::HashMap<Vec<u8>, u64>,
    /// Why the first transfer that does not fit AIE-ML's BDs does not.
    unfit: Option<String>,
    /// Per tile index: its work, not yet written ([`Gen::emit`]).
    queues: Vec<Vec<(Tile, Action)>>,
    /// Loads shared by several tiles of a column ([`Gen::broadcast`]), and their keys.
    bcasts: Vec<Bcast>,
    bcast_keys: std::collections::HashMap<[usize; 5], usize>,
}

/// A load broadcast to several tiles: its members, its transfer, which members' queues have reached it, and
/// whether it is written.
#[derive(Debug, Clone)]
struct Bcast {
    tiles: Vec<Tile>,
    args: DmaArgs,
    arrived: Vec<usize>,
    done: bool,
}

/// A core tile: (index, col, row).
type Tile = (usize, u8, u8);

/// A transfer's buffer, DDR offset, local offset, row bytes, rows, DDR stride and local stride.
type DmaArgs = (Xrt, usize, usize, usize, usize, usize, usize);

/// Queued work of a tile.
#[derive(Debug, Clone, Copy)]
enum Action {
    /// A transfer (`true`: a store).
    Dma(bool, DmaArgs),
    /// Wait for the column's transfers.
    Sync,
    /// A computation: kernel, parameter block address and bytes, cycles.
    Compute(Kernel, u32, u32, u64),
    /// Broadcast `Gen::bcasts[i]`.
    Bcast(usize),
}

impl<'t> Gen<'t> {
    pub fn new(t: &'t NpuTarget) -> Self {
        let tiles = t.core_tiles();
        let n = tiles.len();
        Gen {
            t,
            p: OpProgram {
                body: TxnBody::for_target(t),
                ..OpProgram::default()
            },
            tiles,
            next: 0,
            tile_cycles: vec![0; n],
            param_index: Default::default(),
            unfit: None,
            queues: Vec::new(),
            bcasts: Vec::new(),
            bcast_keys: Default::default(),
        }
    }
    /// Usable local bytes after the parameter area.
    pub fn budget(&self) -> usize {
        budget(self.t)
    }
    /// The next tile, round-robin: (index, col, row).
    pub fn tile(&mut self) -> (usize, u8, u8) {
        let i = self.next % self.tiles.len();
        self.next += 1;
        (i, self.tiles[i].0, self.tiles[i].1)
    }
    /// Adds an arg map entry.
    pub fn arg(&mut self, kind: ArgKind, xrt: Xrt, onnx: usize, offset: u64, size: u64) {
        self.p.arg_map.push(ArgEntry {
            kind,
            xrt,
            onnx,
            offset,
            size,
        });
    }
    /// DMA counting bytes.
    /// Queued on the tile ([`Gen::finish`] interleaves the tiles' queues).
    #[allow(clippy::too_many_arguments)] // mirrors TxnBody::dma
    pub fn dma(
        &mut self,
        tile: (usize, u8, u8),
        store: bool,
        buf: Xrt,
        offset: usize,
        local: usize,
        row_bytes: usize,
        rows: usize,
        ddr_stride: usize,
        local_stride: usize,
    ) {
        let args = (
            buf,
            offset,
            local,
            row_bytes,
            rows,
            ddr_stride,
            local_stride,
        );
        self.queue(tile, Action::Dma(store, args));
    }
    /// Core tile `k` (0-based core row) of column `col`.
    pub fn column_tile(&self, k: usize, col: usize) -> (usize, u8, u8) {
        let i = k * usize::from(self.t.cols) + col;
        (i, self.tiles[i].0, self.tiles[i].1)
    }
    /// A load that every tile of `members` (one column) makes alike, queued on `tile` (one of them): the
    /// first member to record `key` registers the transfer, and it is written once, when every member's queue
    /// has reached it ([`Gen::emit`]), reading DDR once for all.
    #[allow(clippy::too_many_arguments)] // mirrors Gen::dma
    pub fn broadcast(
        &mut self,
        key: [usize; 5],
        members: &[Tile],
        tile: Tile,
        buf: Xrt,
        offset: usize,
        local: usize,
        row_bytes: usize,
        rows: usize,
        ddr_stride: usize,
        local_stride: usize,
    ) {
        if members.len() < 2 {
            self.dma(
                tile,
                false,
                buf,
                offset,
                local,
                row_bytes,
                rows,
                ddr_stride,
                local_stride,
            );
            return;
        }
        let args = (
            buf,
            offset,
            local,
            row_bytes,
            rows,
            ddr_stride,
            local_stride,
        );
        let next = self.bcasts.len();
        let i = *self.bcast_keys.entry(key).or_insert(next);
        if i == next {
            self.bcasts.push(Bcast {
                tiles: members.to_vec(),
                args,
                arrived: Vec::new(),
                done: false,
            });
        }
        self.queue(tile, Action::Bcast(i));
    }
    /// Writes broadcast `i` (the members' cores are awaited by the body).
    fn write_bcast(&mut self, i: usize) {
        let b = &mut self.bcasts[i];
        b.done = true;
        let (tiles, args) = (b.tiles.clone(), b.args);
        let (buf, offset, local, row_bytes, rows, ddr_stride, local_stride) = args;
        let linear = rows == 1 || (ddr_stride == row_bytes && local_stride == row_bytes);
        let wide = linear
            .then(|| self.widen(false, buf, offset, local, row_bytes.checked_mul(rows)?))
            .flatten();
        let (row_bytes, rows) = wide.map_or((row_bytes, rows), |run| (run, 1));
        let (ddr_stride, local_stride) = if rows == 1 {
            (row_bytes, row_bytes)
        } else {
            (ddr_stride, local_stride)
        };
        self.p.cost.dma_bytes += (row_bytes * rows) as u64;
        if self.unfit.is_some() {
            return;
        }
        let moved = self.p.body.broadcast(
            &tiles,
            buf,
            offset as u64,
            local as u32,
            row_bytes as u32,
            rows as u32,
            ddr_stride as u32,
            local_stride as u32,
        );
        if let Err(why) = moved {
            self.unfit.get_or_insert(why);
        }
    }
    /// Waits for the transfers pending in the tile's column (queued like a transfer).
    pub fn sync(&mut self, tile: (usize, u8, u8)) {
        self.queue(tile, Action::Sync);
    }
    fn queue(&mut self, tile: (usize, u8, u8), a: Action) {
        if self.queues.len() <= tile.0 {
            self.queues.resize(tile.0 + 1, Vec::new());
        }
        self.queues[tile.0].push((tile, a));
    }
    /// Writes the tiles' queued work into the body, one step of each tile in turn (a step ends with a
    /// computation), so that a core computes while the host moves the other tiles' data; within a tile the
    /// order is kept. Tiles share no DDR bytes an op writes, so their steps commute.
    fn emit(&mut self) {
        let queues = std::mem::take(&mut self.queues);
        let mut at = vec![0usize; queues.len()];
        loop {
            let mut any = false;
            for (ti, q) in queues.iter().enumerate() {
                while let Some(&(tile, a)) = q.get(at[ti]) {
                    if let Action::Bcast(i) = a {
                        // A broadcast waits until every member has reached it; the last one writes it.
                        if !self.bcasts[i].done {
                            if !self.bcasts[i].arrived.contains(&ti) {
                                self.bcasts[i].arrived.push(ti);
                                any = true;
                            }
                            if self.bcasts[i].arrived.len() < self.bcasts[i].tiles.len() {
                                break;
                            }
                            self.write_bcast(i);
                        }
                        at[ti] += 1;
                        any = true;
                        continue;
                    }
                    at[ti] += 1;
                    any = true;
                    match a {
                        Action::Dma(store, args) => self.transfer(tile, store, args),
                        Action::Sync => self.p.body.sync(tile),
                        Action::Compute(kernel, slot, bytes, cycles) => {
                            self.p.body.compute(tile, kernel, slot, bytes, cycles);
                            break;
                        }
                        Action::Bcast(_) => {}
                    }
                }
            }
            if !any {
                // Members that never all arrive (not made by the op generators): write the first waiting one.
                match self
                    .bcasts
                    .iter()
                    .position(|b| !b.done && !b.arrived.is_empty())
                {
                    Some(i) => self.write_bcast(i),
                    None => return,
                }
            }
        }
    }
    /// One transfer, widened to whole words where it may be.
    fn transfer(&mut self, tile: (usize, u8, u8), store: bool, args: DmaArgs) {
        let (buf, offset, local, row_bytes, rows, ddr_stride, local_stride) = args;
        let linear = rows == 1 || (ddr_stride == row_bytes && local_stride == row_bytes);
        let wide = linear
            .then(|| self.widen(store, buf, offset, local, row_bytes.checked_mul(rows)?))
            .flatten();
        let (row_bytes, rows) = wide.map_or((row_bytes, rows), |run| (run, 1));
        self.p.cost.dma_bytes += (row_bytes * rows) as u64;
        let (ddr_stride, local_stride) = if rows == 1 {
            (row_bytes, row_bytes)
        } else {
            (ddr_stride, local_stride)
        };
        if self.unfit.is_some() {
            return;
        }
        let moved = self.p.body.dma(
            tile,
            store,
            buf,
            offset as u64,
            local as u32,
            row_bytes as u32,
            rows as u32,
            ddr_stride as u32,
            local_stride as u32,
        );
        if let Err(why) = moved {
            self.unfit.get_or_insert(why);
        }
    }
    /// A linear run of bytes (one row, or rows that touch) whose length is not a multiple of 4, widened to the
    /// next word so that the DMA can move it: every tensor sits 64-byte aligned and padded in its buffer and
    /// every local region is 64-byte padded, so a load may read into its tensor's padding, and a store may write
    /// into it when the run ends at the tensor's end (the padding is nobody's data). `None` when the run is not
    /// word-aligned, already is whole words, or is a store that ends inside its tensor.
    fn widen(
        &self,
        store: bool,
        buf: Xrt,
        offset: usize,
        local: usize,
        run: usize,
    ) -> Option<usize> {
        if run.is_multiple_of(4) || !offset.is_multiple_of(4) || !local.is_multiple_of(4) {
            return None;
        }
        let end = offset.checked_add(run)?;
        let wide = run.next_multiple_of(4);
        self.p
            .arg_map
            .iter()
            .filter(|e| e.xrt == buf)
            .filter(|e| (e.offset as usize) <= offset && end <= (e.offset + e.size) as usize)
            .any(|e| {
                let tensor_end = (e.offset + e.size) as usize;
                if store {
                    end == tensor_end
                } else {
                    offset + wide <= a64(tensor_end)
                }
            })
            .then_some(wide)
    }
    /// Loads a parameter block into the tile at `slot` and runs `kernel` on it; `work` MACs (or elements) at
    /// the rate of `dtype`.
    pub fn compute(
        &mut self,
        tile: (usize, u8, u8),
        kernel: Kernel,
        slot: u32,
        words: &[u32],
        work: u64,
        dtype: Elem,
    ) {
        let bytes: Vec<u8> = words.iter().flat_map(|w| w.to_le_bytes()).collect();
        let off = match self.param_index.get(&bytes) {
            Some(&o) => o,
            None => {
                let o = self.p.params.len() as u64;
                self.p.params.extend_from_slice(&bytes);
                self.param_index.insert(bytes.clone(), o);
                o
            }
        };
        self.dma(
            tile,
            false,
            Xrt::Params,
            off as usize,
            slot as usize,
            bytes.len(),
            1,
            bytes.len(),
            bytes.len(),
        );
        self.sync(tile);
        let cycles = work.div_ceil(dtype.macs_per_cycle(self.t));
        self.queue(
            tile,
            Action::Compute(kernel, slot, bytes.len() as u32, cycles),
        );
        self.p.cost.macs += work;
        self.tile_cycles[tile.0] += cycles;
    }
    /// Finishes: cost totals, params area entry; or the first transfer that did not fit.
    pub fn finish(mut self) -> Result<OpProgram, Reject> {
        self.emit();
        if let Some(why) = self.unfit.take() {
            return Err(Reject::new(&capability::DMA, why));
        }
        self.p.body.drain_all();
        self.p.cost.elapsed = self.p.body.elapsed();
        let plen = self.p.params.len() as u64;
        self.arg(ArgKind::ConstKernelParamInput, Xrt::Params, 0, 0, plen);
        self.p.cost.compute_cycles = self.tile_cycles.iter().copied().max().unwrap_or(0);
        self.p.cost.tiles = self.tile_cycles.iter().filter(|&&c| c > 0).count();
        self.p.cost.dma_cycles = self
            .p
            .cost
            .dma_bytes
            .div_ceil(self.t.dma_bytes_per_cycle as u64);
        Ok(self.p)
    }
}

/// Local addresses and geometry of one accumulator block's EPILOGUE (`docs/npu-transaction-format.md`).
pub(crate) struct EpilogueBlock {
    /// Accumulator.
    pub acc: usize,
    /// Bias (f32 or i32).
    pub bias: usize,
    /// Requantisation scales (int8).
    pub scale: usize,
    /// Residual (f32).
    pub res: usize,
    /// Output (equals `acc` for f32).
    pub out: usize,
    /// Rows and columns of the block.
    pub rows: usize,
    /// Columns.
    pub cols: usize,
    /// Bias and scales are per column (gemm) rather than per row (conv).
    pub per_col: bool,
}

impl Gen<'_> {
    /// Appends `n` biases (f32, or the requantisation's i32) and, for int8, the `n` scales 64 bytes later to the
    /// constants; returns their offsets.
    pub fn push_bias_scales(
        &mut self,
        n: usize,
        bias: &[f32],
        requant: Option<&Requant>,
    ) -> (usize, usize) {
        let bias_at = self.p.consts.len();
        for i in 0..n {
            let b = match requant {
                None => bias.get(i).copied().unwrap_or(0.0).to_le_bytes(),
                Some(q) => q.bias[i].to_le_bytes(),
            };
            self.p.consts.extend_from_slice(&b);
        }
        let scale_at = a64(self.p.consts.len());
        self.p.consts.resize(scale_at, 0);
        if let Some(q) = requant {
            for i in 0..n {
                self.p.consts.extend_from_slice(&q.scale[i].to_le_bytes());
            }
        }
        (bias_at, scale_at)
    }
    /// The EPILOGUE command of a block: bias, residual and activation for f32, requantisation for int8.
    pub fn epilogue(
        &mut self,
        tile: (usize, u8, u8),
        elem: Elem,
        act: Activation,
        requant: Option<&Requant>,
        residual: bool,
        b: &EpilogueBlock,
    ) {
        let [a, lo, hi] = act_words(act);
        let (a, lo, hi, zp) = match requant {
            Some(q) => (0, q.clamp.0 as u32, q.clamp.1 as u32, q.y_zero_point as u32),
            None => (a, lo, hi, 0),
        };
        let words = [
            elem.code(),
            1 | (b.per_col as u32) << 1 | (residual as u32) << 2,
            b.acc as u32,
            b.bias as u32,
            b.res as u32,
            b.out as u32,
            b.rows as u32,
            b.cols as u32,
            a,
            lo,
            hi,
            b.scale as u32,
            zp,
        ];
        self.compute(
            tile,
            Kernel::Epilogue,
            PARAM_SLOT2,
            &words,
            (b.rows * b.cols) as u64,
            elem,
        );
    }
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
