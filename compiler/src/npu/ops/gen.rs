//! The program generator every op's `program` drives ([`Gen`]): tiles handed out round-robin (or a column's
//! cores for a broadcast), each tile's transfers and computations queued in order and written interleaved one
//! step per tile ([`Gen::finish`]), transfers widened to whole words where their padding allows, broadcasts
//! written once every member has reached them, parameter blocks deduplicated, the EPILOGUE block, and the op's
//! cost.

use super::constraint;
use super::{
    a64, act_words, budget, ArgEntry, ArgKind, Elem, OpProgram, Reject, Requant, PARAM_SLOT2,
};
use crate::ir::Activation;
use crate::npu::target::NpuTarget;
use crate::npu::txn::{Kernel, Transfer, TxnBody, Xrt};

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
    args: Transfer,
    arrived: Vec<usize>,
    done: bool,
}

/// A core tile: (index, col, row).
type Tile = (usize, u8, u8);

/// A transfer from `Gen`'s arguments in elements of `usize`: [offset, local, row bytes, rows, DDR stride, local
/// stride], narrowed to the fields of the BD words.
fn transfer(
    buf: Xrt,
    [offset, local, row_bytes, rows, ddr_stride, local_stride]: [usize; 6],
) -> Transfer {
    Transfer {
        buf,
        offset: offset as u64,
        local: local as u32,
        row_bytes: row_bytes as u32,
        rows: rows as u32,
        ddr_stride: ddr_stride as u32,
        local_stride: local_stride as u32,
    }
}

/// Queued work of a tile.
#[derive(Debug, Clone, Copy)]
enum Action {
    /// A transfer (`true`: a store).
    Dma(bool, Transfer),
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
        let args = transfer(
            buf,
            [offset, local, row_bytes, rows, ddr_stride, local_stride],
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
        let args = transfer(
            buf,
            [offset, local, row_bytes, rows, ddr_stride, local_stride],
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
        let Some(t) = self.shaped(false, args) else {
            return;
        };
        let moved = self.p.body.broadcast(&tiles, &t);
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
                        if !self.reach(i, ti, &mut any) {
                            break;
                        }
                    }
                    at[ti] += 1;
                    any = true;
                    match a {
                        Action::Dma(store, args) => self.transfer(tile, store, args),
                        Action::Sync => self.p.body.sync(tile),
                        Action::Bcast(_) => {} // written by `reach` once every member arrived
                        Action::Compute(kernel, slot, bytes, cycles) => {
                            self.p.body.compute(tile, kernel, slot, bytes, cycles);
                            break;
                        }
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
    /// Tile `ti`'s queue has reached broadcast `i`: marks it arrived (setting `any` the first time) and writes
    /// the broadcast when it is the last member. Whether the tile may go on past it.
    fn reach(&mut self, i: usize, ti: usize, any: &mut bool) -> bool {
        let b = &mut self.bcasts[i];
        if b.done {
            return true;
        }
        if !b.arrived.contains(&ti) {
            b.arrived.push(ti);
            *any = true;
        }
        if b.arrived.len() < b.tiles.len() {
            return false;
        }
        self.write_bcast(i);
        true
    }
    /// One transfer, widened to whole words where it may be.
    fn transfer(&mut self, tile: (usize, u8, u8), store: bool, args: Transfer) {
        let Some(t) = self.shaped(store, args) else {
            return;
        };
        let moved = self.p.body.dma(tile, store, &t);
        if let Err(why) = moved {
            self.unfit.get_or_insert(why);
        }
    }
    /// A transfer's arguments with a linear run widened to whole words where [`Gen::widen`] allows (one row:
    /// `Plan::of` takes a single row as linear whatever its strides), its DDR bytes counted; `None` once a
    /// transfer of the op did not fit (the op is refused, so nothing more is written).
    fn shaped(&mut self, store: bool, t: Transfer) -> Option<Transfer> {
        let linear = t.rows == 1 || (t.ddr_stride == t.row_bytes && t.local_stride == t.row_bytes);
        let run = (t.row_bytes as usize).checked_mul(t.rows as usize);
        let wide = linear
            .then(|| self.widen(store, t.buf, t.offset as usize, t.local as usize, run?))
            .flatten();
        let (row_bytes, rows) = wide.map_or((t.row_bytes, t.rows), |run| (run as u32, 1));
        self.p.cost.dma_bytes += u64::from(row_bytes) * u64::from(rows);
        self.unfit.is_none().then_some(Transfer {
            row_bytes,
            rows,
            ..t
        })
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
            return Err(Reject::new(&constraint::DMA, why));
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
