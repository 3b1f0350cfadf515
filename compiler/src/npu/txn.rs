//! Writing transaction binaries: the aie-rt v0.1 container (16-byte header, ops that carry their size), the ops
//! bundlec uses (WRITE, BLOCKWRITE, MASKPOLL, TCT, DDR_PATCH and the virtual NPU's custom VNPU_KERNEL), and a
//! `TxnBody` that one NPU op appends to while it tracks the BDs, locks and completion tokens of its transfers
//! (`dma.rs`) and the cores whose super-kernel it has made resident. Every byte is specified in
//! `docs/npu-transaction-format.md`; `disasm.rs` reads the files back.

use super::clock::Clock;
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
// The super-kernel's ABI (VNPU_KERNEL, its number, the mailbox, the kernel codes) is bundle-rt's, defined once.
pub use bundle_rt::superkernel::{Kernel, MAILBOX, OP_VNPU_KERNEL, SUPER_KERNEL};
/// The super-kernel's `GO` and `DONE` core locks.
pub const GO: u32 = bundle_rt::superkernel::GO_LOCK;
/// See [`GO`].
pub const DONE: u32 = bundle_rt::superkernel::DONE_LOCK;
/// Value registers of `GO` and `DONE` on AIE-ML.
pub const GO_LOCK: u32 = BdKind::Core.regs().lock(GO);
/// See [`GO_LOCK`].
pub const DONE_LOCK: u32 = BdKind::Core.regs().lock(DONE);

/// The BD word DDR_PATCH patches: address bits 31:2 (word 2 holds bits 47:32).
pub const BD_ADDR_LOW: u32 = 4;
/// Buffer descriptors per shim tile.
pub const NUM_BDS: u32 = 16;

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

/// Op bytes with the state of their transfers.
#[derive(Debug, Clone, Default)]
pub struct TxnBody {
    /// Ops, back to back.
    pub bytes: Vec<u8>,
    /// Number of ops.
    pub ops: u32,
    /// Next shim BD per column.
    next_bd: Vec<u32>,
    /// The array's routes (`None` in a fused body, which only appends op bodies).
    aie: Option<Layout>,
    /// Per column: next memory-tile BD of the even (0..24) and odd (24..48) halves, whether its staging
    /// locks are set, and the completion tokens (row, direction, channel) not yet taken.
    mem_bds: Vec<[u32; 2]>,
    locks_set: Vec<bool>,
    /// Per column: the (row, direction, channel) of each transfer's completion token not yet taken, and
    /// when the clock says it is issued.
    pending: Vec<Vec<(u8, u8, u8, u64)>>,
    /// Next BD per core tile index.
    core_bds: Vec<u32>,
    /// Per core tile index: whether this body has made the super-kernel resident, and whether a
    /// computation was started whose `DONE` it has not yet awaited.
    resident: Vec<bool>,
    busy: Vec<bool>,
    /// (col, row) per core tile index this body computed on.
    tiles: Vec<(u8, u8)>,
    /// The body's timing as programmed.
    clock: Clock,
}

impl TxnBody {
    /// An empty body for `t`'s routes (a validated target has them).
    pub fn for_target(t: &NpuTarget) -> TxnBody {
        TxnBody {
            aie: Layout::of(t),
            clock: Clock::new(t.instr_bytes_per_cycle, t.dma_bytes_per_cycle),
            ..TxnBody::default()
        }
    }

    /// Cycles from the body's first byte until its last op is fetched and everything it waited for has
    /// happened (its estimate as programmed; `drain_all` ends a body with nothing left in flight).
    pub fn elapsed(&self) -> u64 {
        self.clock.host(self.bytes.len())
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
    /// DDR_PATCH: word 1 of the shim BD at register `bd` (word 0) of column `col` gets the address of `buf` +
    /// `offset` (`offset` 4-byte aligned).
    pub fn ddr_patch(&mut self, col: u8, bd: u32, buf: Xrt, offset: u64) {
        self.custom(OP_DDR_PATCH, 48);
        self.u32(0); // type
        self.u32(40); // size_in_bytes
        self.u32(0); // action
        self.u32(0);
        self.u64((tile_base(col, 0) | bd | BD_ADDR_LOW) as u64);
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
        for (row, dir, ch, at) in pending {
            self.tct(col, row, dir, ch);
            self.clock.wait(at, self.bytes.len());
        }
    }
    /// Takes every pending completion token and awaits every computation (the end of an op's program).
    pub fn drain_all(&mut self) {
        for col in 0..self.pending.len() {
            self.drain(col as u8);
        }
        for ti in 0..self.busy.len() {
            if let Some(&(col, row)) = self.tiles.get(ti) {
                self.await_core((ti, col, row));
            }
        }
    }
    /// Awaits the computation core tile `tile` was given, if any: a MASKPOLL of `DONE` for 1, then `DONE`
    /// cleared.
    fn await_core(&mut self, tile: (usize, u8, u8)) {
        let (ti, col, row) = tile;
        if !self.busy.get(ti).copied().unwrap_or(false) {
            return;
        }
        self.busy[ti] = false;
        let done = self.aie.map_or(DONE_LOCK, |l| l.tiles.core.lock(DONE));
        self.maskpoll(col, row, done, 1, 0x3F);
        self.clock.wait(self.clock.core_end(ti), self.bytes.len());
        self.write(col, row, done, 0);
    }
    /// Next BD of a round-robin pool of `n` starting at `base`.
    fn next(slot: &mut u32, base: u32, n: u32) -> u32 {
        let bd = base + *slot % n;
        *slot = (*slot + 1) % n;
        bd
    }
    /// An AIE-ML transfer (see `dma.rs`) of plan `p` for core tile `tile` of an array with routes `l`.
    fn aie_dma(&mut self, l: Layout, tile: (usize, u8, u8), store: bool, buf: Xrt, p: Plan) {
        let (ti, col, row) = tile;
        let k = row - l.first_core;
        let c = self.open_column(&l, col);
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
            core: self.next_core_bd(ti),
        };
        let regs = dma::registers(&l, k, store, &p, bds);
        let at = self.write_transfer(col, &l, regs, bds.shim, buf, &p);
        let (r, d, ch) = dma::completion(&l, k, store);
        self.pending[c].push((r, d, ch, at));
    }
    /// The index of column `col`, its transfer state made and its memory tile's staging locks set on first use.
    fn open_column(&mut self, l: &Layout, col: u8) -> usize {
        let c = usize::from(col);
        if self.pending.len() <= c {
            self.pending.resize(c + 1, Vec::new());
            self.locks_set.resize(c + 1, false);
            self.mem_bds.resize(c + 1, [0, 0]);
            self.next_bd.resize(c + 1, 0);
        }
        if !self.locks_set[c] {
            for (reg, value) in dma::lock_init(l) {
                self.write(col, 1, reg, value);
            }
            self.locks_set[c] = true;
        }
        c
    }
    /// The next BD of core tile index `ti`.
    fn next_core_bd(&mut self, ti: usize) -> u32 {
        if self.core_bds.len() <= ti {
            self.core_bds.resize(ti + 1, 0);
        }
        TxnBody::next(&mut self.core_bds[ti], 0, 16)
    }
    /// Writes a transfer's registers in column `col` (BDs, shim BD `shim_bd`'s address bound to `buf`, then the
    /// queue pushes); returns when the clock says its DDR leg ends.
    fn write_transfer(
        &mut self,
        col: u8,
        l: &Layout,
        regs: dma::Registers,
        shim_bd: u32,
        buf: Xrt,
        p: &Plan,
    ) -> u64 {
        for (r, reg, words) in &regs.blocks {
            self.blockwrite(col, *r, *reg, words);
        }
        self.ddr_patch(col, l.tiles.shim.bd(shim_bd), buf, p.offset);
        for (r, reg, value) in regs.writes {
            self.write(col, r, reg, value);
        }
        self.clock
            .transfer(self.bytes.len(), u64::from(p.words()) * 4)
    }
    /// A DMA between `buf` + `offset` and the tile's local memory as the AIE-ML data path of `dma.rs` does it.
    /// `Err` says why the transfer does not fit the BDs (a byte count off a 32-bit word, a walk beyond the
    /// dimension fields) or the target has no routes. `store` moves tile → DDR.
    pub fn dma(&mut self, tile: (usize, u8, u8), store: bool, t: &Transfer) -> Result<(), String> {
        // The core must be done with its memory before data moves in or out of it.
        self.await_core(tile);
        let l = self
            .aie
            .filter(|l| tile.2 >= l.first_core && tile.2 - l.first_core < l.cores)
            .ok_or_else(|| format!("core tile row {} has no route to a memory tile", tile.2))?;
        let verb = if store { "storing" } else { "loading" };
        let plan = t.plan(verb)?;
        self.aie_dma(l, tile, store, t.buf, plan);
        Ok(())
    }
    /// A load from `buf` + `offset` into the same local address of several core tiles of one column, read from
    /// DDR once: staged in the memory tile and read by each core's channel (`dma::broadcast`). The column is
    /// drained before (the stage is load area 0's memory) and after. `Err` as for [`TxnBody::dma`].
    pub fn broadcast(&mut self, tiles: &[(usize, u8, u8)], x: &Transfer) -> Result<(), String> {
        let Some(&(_, col, _)) = tiles.first() else {
            return Ok(());
        };
        let l = self.aie.ok_or("the target has no routes")?;
        if tiles
            .iter()
            .any(|t| t.1 != col || t.2 < l.first_core || t.2 - l.first_core >= l.cores)
        {
            return Err("a broadcast serves core tiles of one column".into());
        }
        let p = x.plan("broadcasting")?;
        for &t in tiles {
            self.await_core(t);
        }
        let c = self.open_column(&l, col);
        self.drain(col);
        let shim_bd = TxnBody::next(&mut self.next_bd[c], 0, NUM_BDS);
        let mem_in = TxnBody::next(&mut self.mem_bds[c][0], 0, 24);
        let mut ks = Vec::new();
        let mut per_core = Vec::new();
        for &(ti, _, row) in tiles {
            let k = row - l.first_core;
            let half = usize::from(k % 2);
            let mem_out = TxnBody::next(&mut self.mem_bds[c][half], 24 * half as u32, 24);
            ks.push(k);
            per_core.push((mem_out, self.next_core_bd(ti)));
        }
        let regs = dma::broadcast(&l, &ks, &p, shim_bd, mem_in, &per_core);
        let at = self.write_transfer(col, &l, regs, shim_bd, x.buf, &p);
        for &k in &ks {
            let (r, d, ch) = dma::completion(&l, k, false);
            self.pending[c].push((r, d, ch, at));
        }
        self.drain(col);
        Ok(())
    }
    /// Runs `kernel` (`cycles` long) with its parameter block at `param_addr` through the resident
    /// super-kernel: made resident on the core's first compute in this body (VNPU_KERNEL), then the mailbox
    /// and `GO` released. Its `DONE` is awaited when the host next needs the core (a transfer in or out of
    /// its memory, its next computation, the end of the op), so that cores compute while the host moves
    /// other tiles' data.
    pub fn compute(
        &mut self,
        tile: (usize, u8, u8),
        kernel: Kernel,
        param_addr: u32,
        param_bytes: u32,
        cycles: u64,
    ) {
        self.await_core(tile);
        let (ti, col, row) = tile;
        if self.tiles.len() <= ti {
            self.tiles.resize(ti + 1, (0, 0));
            self.busy.resize(ti + 1, false);
        }
        self.tiles[ti] = (col, row);
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
        let go = self.aie.map_or(GO_LOCK, |l| l.tiles.core.lock(GO));
        self.write(col, row, go, 1);
        self.clock.compute(ti, self.bytes.len(), cycles);
        self.busy[ti] = true;
    }
    /// Waits for the transfers pending in the tile's column: TCTs for their completion tokens.
    pub fn sync(&mut self, tile: (usize, u8, u8)) {
        self.drain(tile.1);
    }
    /// Appends another body (fusion), keeping its bytes unchanged.
    pub fn append_raw(&mut self, bytes: &[u8], ops: u32) {
        self.bytes.extend_from_slice(bytes);
        self.ops += ops;
    }
}

/// One transfer between a fused buffer and a core tile's local memory: `rows` rows of `row_bytes`, `ddr_stride`
/// bytes apart from `buf` + `offset` and `local_stride` bytes apart from local address `local`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Transfer {
    /// The fused buffer.
    pub buf: Xrt,
    /// Byte offset in it.
    pub offset: u64,
    /// Local address of the first row.
    pub local: u32,
    /// Bytes per row.
    pub row_bytes: u32,
    /// Rows.
    pub rows: u32,
    /// Bytes between rows in DDR.
    pub ddr_stride: u32,
    /// Bytes between rows in local memory.
    pub local_stride: u32,
}

impl Transfer {
    /// Its plan, or why it does not fit (`verb`: what the transfer does, for the message).
    fn plan(&self, verb: &str) -> Result<Plan, String> {
        let Transfer {
            buf,
            offset,
            local,
            row_bytes,
            rows,
            ddr_stride,
            local_stride,
        } = *self;
        Plan::of(offset, local, row_bytes, rows, ddr_stride, local_stride).ok_or_else(|| {
            format!(
                "{verb} {rows} row(s) of {row_bytes} B, {ddr_stride} B apart at {buf:?} offset {offset} and {local_stride} B \
                 apart at local {local}, do not fit AIE-ML buffer descriptors (32-bit words at word-aligned addresses, \
                 wraps and steps within the BD fields)"
            )
        })
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
