//! Writing transaction binaries: the aie-rt v0.1 container (16-byte header, ops that carry their size), the ops
//! bundlec uses (WRITE, MASKPOLL, DDR_PATCH and the virtual NPU's custom VNPU_DMA / VNPU_COMPUTE), the register
//! map, and a `TxnBody` that one NPU op appends to while it tracks the counters its MASKPOLLs wait for. Every
//! byte is specified in `docs/npu-transaction-format.md`; `disasm.rs` reads the files back.

use super::dma::{self, Bds, Layout, Plan};
use super::target::NpuTarget;
use bundle_rt::aie::bd::BdKind;

/// Container major version.
pub const MAJOR: u8 = 0;
/// Container minor version.
pub const MINOR: u8 = 1;
/// Header bytes.
pub const HEADER_BYTES: usize = 16;

/// aie-rt WRITE.
pub const OP_WRITE: u8 = 0;
/// aie-rt BLOCKWRITE.
pub const OP_BLOCKWRITE: u8 = 1;
/// aie-rt MASKWRITE.
pub const OP_MASKWRITE: u8 = 3;
/// aie-rt MASKPOLL.
pub const OP_MASKPOLL: u8 = 4;
/// aie-rt custom TCT: wait for a task-completion token.
pub const OP_TCT: u8 = 128;
/// aie-rt custom DDR_PATCH.
pub const OP_DDR_PATCH: u8 = 129;
/// Virtual NPU DMA command.
pub const OP_VNPU_DMA: u8 = 144;
/// Virtual NPU compute command.
pub const OP_VNPU_COMPUTE: u8 = 145;
/// Virtual NPU kernel naming: a core runs the resident super-kernel.
pub const OP_VNPU_KERNEL: u8 = 146;
/// The super-kernel's number in VNPU_KERNEL.
pub const SUPER_KERNEL: u32 = 1;
/// The super-kernel's mailbox in a core's data memory (the end of the parameter area): kernel, parameter
/// block address, its bytes, 0.
pub const MAILBOX: u32 = 0xF0;
/// Value registers of the super-kernel's `GO` (core lock 14) and `DONE` (core lock 15) locks.
pub const GO_LOCK: u32 = BdKind::Core.regs().lock(14);
/// See [`GO_LOCK`].
pub const DONE_LOCK: u32 = BdKind::Core.regs().lock(15);

/// The BD word DDR_PATCH patches: address bits 31:2 (word 2 holds bits 47:32).
pub const BD_ADDR_LOW: u32 = 4;
/// Buffer descriptors per shim tile.
pub const NUM_BDS: u32 = 16;
/// Completed DDR → tile transfers.
pub const DMA_LOAD_DONE: u32 = 0x1DF00;
/// Completed tile → DDR transfers.
pub const DMA_STORE_DONE: u32 = 0x1DF04;
/// Completed compute commands.
pub const CORE_DONE: u32 = 0x32000;

/// Base register address of a tile.
pub const fn tile_base(col: u8, row: u8) -> u32 {
    ((col as u32) << 25) | ((row as u32) << 20)
}

/// Fused buffer indices (DDR_PATCH argidx; XRT kernel arg = 3 + index).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Xrt {
    /// Segment inputs.
    In = 0,
    /// Segment outputs.
    Out = 1,
    /// Tensors internal to the segment.
    Scratch = 2,
    /// NPU-layout constants.
    Const = 3,
    /// Kernel parameter blocks.
    Params = 4,
}

/// Compute kernels of the virtual NPU.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kernel {
    /// Convolution slab into an accumulator.
    Conv = 1,
    /// Matrix product into an accumulator.
    Gemm = 2,
    /// Accumulator to output: bias, residual, activation or requantisation.
    Epilogue = 3,
    /// Elementwise add / mul / activation.
    Eltwise = 4,
    /// Max / average pooling.
    Pool = 5,
    /// Global average pooling.
    Gap = 6,
}

/// Op bytes with the per-tile counters the MASKPOLLs expect.
#[derive(Debug, Clone, Default)]
pub struct TxnBody {
    /// Ops, back to back.
    pub bytes: Vec<u8>,
    /// Number of ops.
    pub ops: u32,
    /// Expected (load, store, core) counters per tile index.
    counters: Vec<[u32; 3]>,
    /// Next shim BD per column.
    next_bd: Vec<u32>,
    /// The array's routes, when its geometry has them (then aligned transfers use AIE-ML DMA).
    aie: Option<Layout>,
    /// Per column: next memory-tile BD of the even (0..24) and odd (24..48) halves, whether its staging
    /// locks are set, and the completion tokens (row, direction, channel) not yet taken.
    mem_bds: Vec<[u32; 2]>,
    locks_set: Vec<bool>,
    pending: Vec<Vec<(u8, u8, u8)>>,
    /// Next BD per core tile index.
    core_bds: Vec<u32>,
    /// Per core tile index: whether this body has made the super-kernel resident.
    resident: Vec<bool>,
}

impl TxnBody {
    /// An empty body for `t`: transfers that fit AIE-ML's BDs use its DMA when `t` has the routes.
    pub fn for_target(t: &NpuTarget) -> TxnBody {
        TxnBody {
            aie: Layout::of(t),
            ..TxnBody::default()
        }
    }

    /// The tile's counters; the first touch of a tile in this body clears its three counter registers, so
    /// that the body's MASKPOLL values hold wherever it lands in a fused transaction.
    fn counters(&mut self, tile: (usize, u8, u8)) -> &mut [u32; 3] {
        let (ti, col, row) = tile;
        if self.counters.len() <= ti {
            self.counters.resize(ti + 1, [u32::MAX; 3]);
        }
        if self.counters[ti][0] == u32::MAX {
            self.counters[ti] = [0; 3];
            // With the super-kernel nothing counts in CORE_DONE, which sits on Core_Control: not written.
            let regs: &[u32] = if self.aie.is_some() {
                &[DMA_LOAD_DONE, DMA_STORE_DONE]
            } else {
                &[DMA_LOAD_DONE, DMA_STORE_DONE, CORE_DONE]
            };
            for &reg in regs {
                self.write(col, row, reg, 0);
            }
        }
        &mut self.counters[ti]
    }
    fn u32(&mut self, v: u32) {
        self.bytes.extend_from_slice(&v.to_le_bytes());
    }
    fn u64(&mut self, v: u64) {
        self.bytes.extend_from_slice(&v.to_le_bytes());
    }
    fn custom(&mut self, op: u8, size: u32) {
        self.bytes.extend_from_slice(&[op, 0, 0, 0]);
        self.u32(size);
        self.ops += 1;
    }
    /// WRITE of one register.
    pub fn write(&mut self, col: u8, row: u8, reg: u32, value: u32) {
        self.bytes
            .extend_from_slice(&[OP_WRITE, col, row, 0, 0, 0, 0, 0]);
        self.u64((tile_base(col, row) | reg) as u64);
        self.u32(value);
        self.u32(24);
        self.ops += 1;
    }
    /// MASKPOLL: wait until `(reg & mask) == value`.
    pub fn maskpoll(&mut self, col: u8, row: u8, reg: u32, value: u32, mask: u32) {
        self.bytes
            .extend_from_slice(&[OP_MASKPOLL, col, row, 0, 0, 0, 0, 0]);
        self.u64((tile_base(col, row) | reg) as u64);
        self.u32(value);
        self.u32(mask);
        self.u32(32);
        self.u32(0);
        self.ops += 1;
    }
    /// DDR_PATCH: word 1 of BD `bd` of column `col`'s shim tile gets the address of `buf` + `offset`
    /// (`offset` 4-byte aligned).
    pub fn ddr_patch(&mut self, col: u8, bd: u32, buf: Xrt, offset: u64) {
        self.custom(OP_DDR_PATCH, 48);
        self.u32(0); // type
        self.u32(40); // size_in_bytes
        self.u32(0); // action
        self.u32(0);
        self.u64((tile_base(col, 0) | BdKind::Shim.bd(bd) | BD_ADDR_LOW) as u64);
        self.u64(buf as u64);
        self.u64(offset);
    }
    /// BLOCKWRITE of consecutive registers from `reg`.
    pub fn blockwrite(&mut self, col: u8, row: u8, reg: u32, words: &[u32]) {
        self.bytes
            .extend_from_slice(&[OP_BLOCKWRITE, col, row, 0, 0, 0, 0, 0]);
        self.u32(tile_base(col, row) | reg);
        self.u32(16 + 4 * words.len() as u32);
        for &w in words {
            self.u32(w);
        }
        self.ops += 1;
    }
    /// TCT: wait for a task-completion token of channel `ch` (`dir` 0 S2MM) of tile (`col`, `row`).
    pub fn tct(&mut self, col: u8, row: u8, dir: u8, ch: u8) {
        self.custom(OP_TCT, 16);
        self.u32(u32::from(dir) | u32::from(row) << 8 | u32::from(col) << 16);
        self.u32(1 << 8 | 1 << 16 | u32::from(ch) << 24);
    }
    /// Takes the completion tokens of every transfer of column `col` still pending.
    fn drain(&mut self, col: u8) {
        let c = usize::from(col);
        let pending = self
            .pending
            .get_mut(c)
            .map(std::mem::take)
            .unwrap_or_default();
        for (row, dir, ch) in pending {
            self.tct(col, row, dir, ch);
        }
    }
    /// Takes every pending completion token (the end of an op's program).
    pub fn drain_all(&mut self) {
        for col in 0..self.pending.len() {
            self.drain(col as u8);
        }
    }
    /// Next BD of a round-robin pool of `n` starting at `base`.
    fn next(slot: &mut u32, base: u32, n: u32) -> u32 {
        let bd = base + *slot % n;
        *slot = (*slot + 1) % n;
        bd
    }
    /// An AIE-ML transfer (see `dma.rs`) of plan `p` for core tile `tile`, if the array has the routes;
    /// `false` leaves it to VNPU_DMA.
    fn aie_dma(&mut self, tile: (usize, u8, u8), store: bool, buf: Xrt, p: Plan) -> bool {
        let (ti, col, row) = tile;
        let Some(l) = self.aie else {
            return false;
        };
        let Some(k) = row.checked_sub(l.first_core) else {
            return false;
        };
        let c = usize::from(col);
        if self.pending.len() <= c {
            self.pending.resize(c + 1, Vec::new());
            self.locks_set.resize(c + 1, false);
            self.mem_bds.resize(c + 1, [0, 0]);
            self.next_bd.resize(c + 1, 0);
        }
        if self.core_bds.len() <= ti {
            self.core_bds.resize(ti + 1, 0);
        }
        if !self.locks_set[c] {
            for (reg, value) in dma::lock_init() {
                self.write(col, 1, reg, value);
            }
            self.locks_set[c] = true;
        }
        // At most 4 transfers in flight per column: every start queue on their path has room.
        if self.pending[c].len() >= 4 {
            self.drain(col);
        }
        let k32 = u32::from(k);
        let (in_ch, out_ch) = if store {
            (2 + k32, u32::from(l.cores))
        } else {
            (0, k32)
        };
        // Memory-tile BDs 0..24 serve even channels, 24..48 odd ones.
        let mut mem_bd = |ch: u32| {
            let half = (ch % 2) as usize;
            TxnBody::next(&mut self.mem_bds[c][half], 24 * half as u32, 24)
        };
        let (mem_in, mem_out) = (mem_bd(in_ch), mem_bd(out_ch));
        let bds = Bds {
            shim: TxnBody::next(&mut self.next_bd[c], 0, NUM_BDS),
            mem_in,
            mem_out,
            core: TxnBody::next(&mut self.core_bds[ti], 0, 16),
        };
        let regs = dma::registers(&l, k, store, &p, bds);
        for (r, reg, words) in &regs.blocks {
            self.blockwrite(col, *r, *reg, words);
        }
        self.ddr_patch(col, bds.shim, buf, p.offset);
        for (r, reg, value) in regs.writes {
            self.write(col, r, reg, value);
        }
        self.pending[c].push(dma::completion(&l, k, store));
        true
    }
    /// A DMA between `buf` + `offset` and the tile's local memory. With AIE-ML routes and a transfer the BDs
    /// hold (4-byte aligned, within their field limits), the AIE-ML path of `dma.rs`; otherwise a DDR_PATCH of
    /// the next shim BD of the tile's column with the 4-byte aligned address, then a VNPU_DMA naming that BD,
    /// the tile and the bytes past the aligned address. `store` moves tile → DDR.
    #[allow(clippy::too_many_arguments)] // one field per word of the command
    pub fn dma(
        &mut self,
        tile: (usize, u8, u8),
        store: bool,
        buf: Xrt,
        offset: u64,
        local: u32,
        row_bytes: u32,
        rows: u32,
        ddr_stride: u32,
        local_stride: u32,
    ) {
        let plan = Plan::of(offset, local, row_bytes, rows, ddr_stride, local_stride);
        if plan.is_some_and(|p| self.aie_dma(tile, store, buf, p)) {
            return;
        }
        let (_, col, row) = tile;
        self.counters(tile)[store as usize] += 1;
        let c = usize::from(col);
        if self.next_bd.len() <= c {
            self.next_bd.resize(c + 1, 0);
        }
        let bd = self.next_bd[c];
        self.next_bd[c] = (bd + 1) % NUM_BDS;
        self.ddr_patch(col, bd, buf, offset & !3);
        self.custom(OP_VNPU_DMA, 44);
        self.u32(tile_base(col, 0) | BdKind::Shim.bd(bd));
        self.u32(store as u32);
        for v in [local, row_bytes, rows, ddr_stride, local_stride] {
            self.u32(v);
        }
        self.u32(tile_base(col, row));
        self.u32((offset & 3) as u32);
    }
    /// VNPU_COMPUTE of `kernel` with its parameter block at `param_addr`.
    pub fn compute(
        &mut self,
        tile: (usize, u8, u8),
        kernel: Kernel,
        param_addr: u32,
        param_bytes: u32,
    ) {
        let (ti, col, row) = tile;
        if self.aie.is_some() {
            // The resident super-kernel: made resident on the core's first compute in this body, then per
            // super-instruction the mailbox, GO released, DONE awaited and cleared.
            if self.resident.len() <= ti {
                self.resident.resize(ti + 1, false);
            }
            if !self.resident[ti] {
                self.custom(OP_VNPU_KERNEL, 16);
                self.u32(tile_base(col, row));
                self.u32(SUPER_KERNEL);
                self.resident[ti] = true;
            }
            self.blockwrite(
                col,
                row,
                MAILBOX,
                &[kernel as u32, param_addr, param_bytes, 0],
            );
            self.write(col, row, GO_LOCK, 1);
            self.maskpoll(col, row, DONE_LOCK, 1, 0x3F);
            self.write(col, row, DONE_LOCK, 0);
            return;
        }
        self.counters(tile)[2] += 1;
        self.custom(OP_VNPU_COMPUTE, 24);
        self.u32(tile_base(col, row));
        self.u32(kernel as u32);
        self.u32(param_addr);
        self.u32(param_bytes);
    }
    /// Waits for the tile's loads, computes and stores so far: TCTs for the AIE-ML transfers pending in its
    /// column, MASKPOLLs on its counters.
    pub fn sync(&mut self, tile: (usize, u8, u8)) {
        let (_, col, row) = tile;
        self.drain(col);
        let c = *self.counters(tile);
        for (reg, v) in [
            (DMA_LOAD_DONE, c[0]),
            (CORE_DONE, c[2]),
            (DMA_STORE_DONE, c[1]),
        ] {
            if v > 0 {
                self.maskpoll(col, row, reg, v, u32::MAX);
            }
        }
    }
    /// Appends another body (fusion), keeping its bytes unchanged.
    pub fn append_raw(&mut self, bytes: &[u8], ops: u32) {
        self.bytes.extend_from_slice(bytes);
        self.ops += ops;
    }
}

/// The container: header + body.
pub fn container(t: &NpuTarget, body: &TxnBody) -> Vec<u8> {
    let total = (HEADER_BYTES + body.bytes.len()) as u32;
    let mut v = Vec::with_capacity(total as usize);
    v.extend_from_slice(&[
        MAJOR,
        MINOR,
        t.generation,
        t.rows,
        t.cols,
        t.mem_tile_rows,
        0,
        0,
    ]);
    v.extend_from_slice(&body.ops.to_le_bytes());
    v.extend_from_slice(&total.to_le_bytes());
    v.extend_from_slice(&body.bytes);
    v
}
