//! Executing decoded ops: the emulator's per-tile state (data memories, the DMA state of `dma.rs`:
//! buffer descriptors, channels and locks; whether a core's super-kernel is resident) and the
//! cycle count. A write to a start queue or a lock value lets the DMA engine and the resident
//! super-kernels run until they settle; a TCT takes a task-completion token and a MASKPOLL on a
//! channel's status or a lock waits for it, and either that cannot be satisfied is a deadlock
//! naming the channel.
//!
//! A run replays the ops twice from a reset state. The *check* pass moves no data: it simulates
//! only the registers (which no op derives from data), so every DDR_PATCH bound, buffer descriptor
//! address, DMA bound on both sides, store permission and register MASKPOLL is checked before the
//! first byte is written. The *execute* pass then does the work; the only checks left to it are
//! those that read data memory (a super-instruction's mailbox and parameter block, MASKWRITE/MASKPOLL
//! on a data word),
//! and each runs before its op changes anything. Ops complete in order (a MASKPOLL never waits).
//! Tile memories are allocated on first use, kept across runs and zeroed when a run first touches
//! them; every allocation failure is [`Error::OutOfMemory`](crate::Error::OutOfMemory).

use alloc::vec::Vec;

use super::decode::{Op, OpKind, HEADER_BYTES};
use super::dma::{Dir, Dma};
use super::kernels;
use super::memory::{buf_len, oom, DmaMem, Memories, OpErr, DDR_OFFSET_BITS};
use super::params::{Kernel, Params};
use super::regs::{self, Addr, Reg, Tile, Word, BD_ADDR_HIGH, BD_ADDR_LOW};
use super::target::{NpuBuffers, NpuCycles, NpuTarget};
use crate::aie::lock::Acquire;
use crate::error::{DmaStall, NpuRegion, NpuWhy};
use crate::Result;

/// Most turns (DMA engine, then super-kernels) one settle takes before it calls the array
/// unsettled.
const MAX_SETTLE_TURNS: u32 = 1 << 12;

/// The super-kernel's lock a host (or a BD) releases to start one super-instruction.
pub(crate) const GO_LOCK: usize = crate::superkernel::GO_LOCK as usize;
/// The lock the super-kernel releases after each super-instruction.
pub(crate) const DONE_LOCK: usize = crate::superkernel::DONE_LOCK as usize;
pub(crate) use crate::superkernel::MAILBOX;

/// Per-tile state, reused across runs.
#[derive(Debug, Default)]
pub(crate) struct State {
    /// Data memories.
    memories: Memories,
    /// Buffer descriptors, channels, locks.
    dma: Dma,
    /// Per tile: whether the super-kernel is resident (VNPU_KERNEL).
    resident: Vec<bool>,
    /// Compute cycles per tile in this run.
    busy: Vec<u64>,
    /// Per tile: when its core finishes its last super-instruction.
    core_free: Vec<u64>,
    /// The host's time: `host_at` plus the instruction bytes fetched since, over the fetch rate.
    host_at: u64,
    host_bytes: u64,
    instr_rate: u64,
}

/// Which pass runs.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Pass {
    /// Registers only: checks every op that does not read data memory.
    Check,
    /// Everything.
    Execute,
}

/// `ceil(a / b)`, with a rate of 0 counted as 1.
fn cycles(a: u64, rate: u32) -> u64 {
    a.div_ceil(u64::from(rate.max(1)))
}

/// Resizes `v` to `len` copies of `fill`, reporting allocation failure.
fn resize<T: Clone>(v: &mut Vec<T>, len: usize, fill: T) -> Result<()> {
    v.clear();
    v.try_reserve(len)
        .map_err(|_| oom(len.saturating_mul(core::mem::size_of::<T>())))?;
    v.resize(len, fill);
    Ok(())
}

impl State {
    /// Empty state; memories are allocated by the first run that uses them.
    pub(crate) fn new() -> State {
        State::default()
    }

    /// Resets memories' state, DMA state and cycle sums for a pass over `target`.
    fn reset(&mut self, target: &NpuTarget) -> Result<()> {
        let tiles = regs::tile_count(target);
        resize(&mut self.memories.clean, tiles, false)?;
        resize(&mut self.busy, tiles, 0)?;
        resize(&mut self.core_free, tiles, 0)?;
        self.host_at = 0;
        self.host_bytes = 0;
        self.instr_rate = u64::from(target.instr_bytes_per_cycle.max(1));
        resize(&mut self.resident, tiles, false)?;
        let mems = &mut self.memories.mems;
        if mems.len() < tiles {
            let more = tiles - mems.len();
            mems.try_reserve(more).map_err(|_| oom(tiles))?;
            mems.resize_with(tiles, Vec::new);
        }
        self.dma.reset(target);
        Ok(())
    }

    /// Runs decoded `ops` of `txn`: the check pass, then the execute pass.
    pub(crate) fn run(
        &mut self,
        target: &NpuTarget,
        txn: &[u8],
        ops: &[Op<'_>],
        mut bufs: NpuBuffers<'_>,
    ) -> Result<NpuCycles> {
        for pass in [Pass::Check, Pass::Execute] {
            self.reset(target)?;
            // The header is fetched first; each op's bytes before it runs.
            self.host_bytes = HEADER_BYTES as u64;
            for (index, op) in ops.iter().enumerate() {
                let end = ops
                    .get(index + 1)
                    .map_or(txn.len() as u64, |n| n.offset.into());
                self.host_bytes += end.saturating_sub(op.offset.into());
                self.op(target, op, &mut bufs, pass)
                    .map_err(|e| e.at(index as u32, op.offset))?;
            }
        }
        let instr = cycles(txn.len() as u64, target.instr_bytes_per_cycle);
        let cores = self.core_free.iter().copied().max().unwrap_or(0);
        let last = self.host().max(self.dma.last_free()).max(cores);
        Ok(NpuCycles {
            instruction: instr.saturating_add(target.dispatch_cycles.into()),
            data: cycles(self.dma.ddr_bytes, target.dma_bytes_per_cycle),
            compute: self.busy.iter().copied().max().unwrap_or(0),
            elapsed: last.saturating_add(target.dispatch_cycles.into()),
        })
    }

    /// The host's time now: the instructions fetched since it last waited.
    fn host(&self) -> u64 {
        self.host_at + self.host_bytes.div_ceil(self.instr_rate)
    }

    /// The host waits until `t`.
    fn wait_until(&mut self, t: u64) {
        if t > self.host() {
            self.host_at = t;
            self.host_bytes = 0;
        }
    }

    /// The tile's data memory, allocated and zeroed for this run.
    fn mem(&mut self, tile: Tile) -> core::result::Result<&mut [u8], OpErr> {
        self.memories.tile(tile.index, tile.local as usize)
    }

    /// Runs the DMA engine and the resident super-kernels until nothing can move.
    fn settle(
        &mut self,
        target: &NpuTarget,
        bufs: &mut NpuBuffers<'_>,
        pass: Pass,
    ) -> core::result::Result<(), OpErr> {
        // DMA channels and super-kernels can keep releasing each other's locks forever; a settle
        // that takes more turns than any transaction needs is refused.
        for _ in 0..MAX_SETTLE_TURNS {
            let mut mem = DmaMem {
                target,
                memories: &mut self.memories,
                bufs: &mut *bufs,
                execute: pass == Pass::Execute,
            };
            self.dma.run(target, &mut mem)?;
            if !self.run_cores(target, pass)? {
                return Ok(());
            }
        }
        Err(NpuWhy::DmaUnsettled.into())
    }

    /// One turn of every resident super-kernel: while its `GO` lock can be taken (at least 1, minus
    /// 1), it reads its mailbox, runs the kernel it names on the parameter block it points at (only
    /// in the execute pass: the check pass does not hold data memory) and releases `DONE` (+1).
    /// Returns whether any ran.
    fn run_cores(&mut self, target: &NpuTarget, pass: Pass) -> core::result::Result<bool, OpErr> {
        let mut any = false;
        let rows = usize::from(target.rows);
        for t in 0..self.resident.len() {
            if !self.resident[t] {
                continue;
            }
            let (col, row) = ((t / rows) as u8, (t % rows) as u8);
            let tile = regs::tile_at(target, col, row)?;
            while let Some(Acquire::Done) =
                self.dma.tile(t).and_then(|d| d.acquire_lock(GO_LOCK, -1))
            {
                // The core starts when GO was released and it is idle; DONE follows its cycles.
                let go = self.dma.tile_ref(t).map_or(0, |d| d.lock_time(GO_LOCK));
                let start = go.max(self.core_free.get(t).copied().unwrap_or(0));
                let took = if pass == Pass::Execute {
                    self.super_step(target, tile)?
                } else {
                    0
                };
                let end = start.saturating_add(took);
                if let Some(f) = self.core_free.get_mut(t) {
                    *f = end;
                }
                let Some(d) = self.dma.tile(t) else { break };
                if let Err(value) = d.release_lock(DONE_LOCK, 1, end) {
                    let lock = DONE_LOCK as u8;
                    let delta = 1;
                    return Err(NpuWhy::LockFault {
                        col,
                        row,
                        lock,
                        value,
                        delta,
                    }
                    .into());
                }
                any = true;
            }
        }
        Ok(any)
    }

    /// One super-instruction of core `tile`: the mailbox's kernel, parameter block address and
    /// size, checked, then the kernel; returns its cycles.
    fn super_step(&mut self, target: &NpuTarget, tile: Tile) -> core::result::Result<u64, OpErr> {
        let mem = self.mem(tile)?;
        let word = |i: usize| regs::u32_at(mem, MAILBOX as usize + 4 * i).unwrap_or(0);
        let (code, addr, bytes, reserved) = (word(0), word(1), word(2), word(3));
        let kernel = Kernel::from_code(code).ok_or(NpuWhy::UnknownKernel { kernel: code })?;
        if reserved != 0 {
            let value = reserved.into();
            return Err(NpuWhy::BadField {
                field: "mailbox reserved",
                value,
            }
            .into());
        }
        if bytes != kernel.block_bytes() {
            let expected = kernel.block_bytes();
            return Err(NpuWhy::ParamSize {
                kernel: code,
                bytes,
                expected,
            }
            .into());
        }
        if addr % 4 != 0 {
            let value = addr.into();
            return Err(NpuWhy::BadField {
                field: "parameter block address",
                value,
            }
            .into());
        }
        regs::check_local(tile, addr.into(), bytes.into())?;
        self.compute(target, tile, kernel, addr)
    }

    /// The word `at` names; `None` for a data word in the check pass.
    fn read(&mut self, at: &Addr, pass: Pass) -> core::result::Result<Option<u32>, OpErr> {
        let Word::Reg(reg) = at.word else {
            let Word::Data(off) = at.word else {
                return Ok(None);
            };
            if pass == Pass::Check {
                return Ok(None);
            }
            return Ok(regs::u32_at(self.mem(at.tile)?, off as usize));
        };
        let t = at.tile.index;
        let Some(d) = self.dma.tile_ref(t) else {
            return Ok(Some(0));
        };
        Ok(Some(match reg {
            Reg::Bd { bd, word } => d.bd_word(bd, word),
            Reg::Lock(id) => d.lock(usize::from(id)),
            Reg::Ctrl { dir, ch } => d.ctrl(dir_of(dir), usize::from(ch)),
            Reg::Status { dir, ch } => d.status(dir_of(dir), usize::from(ch)),
            _ => 0, // a start queue reads 0
        }))
    }

    /// Writes the word `at` names (data words only in the execute pass); a task queued or a lock
    /// set lets the DMA engine run.
    fn write(
        &mut self,
        target: &NpuTarget,
        at: &Addr,
        value: u32,
        bufs: &mut NpuBuffers<'_>,
        pass: Pass,
    ) -> core::result::Result<(), OpErr> {
        let reg = match at.word {
            Word::Reg(reg) => reg,
            Word::Data(off) => {
                if pass == Pass::Execute {
                    let off = off as usize;
                    if let Some(d) = self.mem(at.tile)?.get_mut(off..off + 4) {
                        d.copy_from_slice(&value.to_le_bytes());
                    }
                }
                return Ok(());
            }
        };
        let t = at.tile.index;
        let mut settle = false;
        let now = self.host();
        let Some(d) = self.dma.tile(t) else {
            return Ok(());
        };
        match reg {
            Reg::Bd { bd, word } => d.set_bd_word(bd, word, value),
            Reg::Lock(id) => {
                d.set_lock(usize::from(id), value, now);
                settle = true;
            }
            Reg::Ctrl { dir, ch } => d.set_ctrl(dir_of(dir), usize::from(ch), value),
            Reg::Queue { dir, ch } => {
                d.push(dir_of(dir), usize::from(ch), value, now)?;
                settle = true;
            }
            _ => {} // status registers are read-only
        }
        if settle {
            self.settle(target, bufs, pass)?;
        }
        Ok(())
    }

    /// A TCT: takes one task-completion token of channel `ch` (`dir`) from each tile of the
    /// `cols` x `rows` block at (`col`, `row`); a missing one is a deadlock naming the channel.
    #[allow(clippy::too_many_arguments)] // the TCT's fields
    fn tct(
        &mut self,
        target: &NpuTarget,
        (col, row): (u8, u8),
        (cols, rows): (u8, u8),
        dir: u8,
        ch: u8,
    ) -> core::result::Result<(), OpErr> {
        for c in col..col.saturating_add(cols.max(1)) {
            for r in row..row.saturating_add(rows.max(1)) {
                if c >= target.cols || r >= target.rows {
                    continue;
                }
                let t = usize::from(c) * usize::from(target.rows) + usize::from(r);
                let Some(d) = self.dma.tile(t) else {
                    continue;
                };
                let token_at = d.token_at(dir_of(dir), usize::from(ch));
                if !d.take_token(dir_of(dir), usize::from(ch)) {
                    let stall = d
                        .stall(dir_of(dir), usize::from(ch))
                        .unwrap_or(DmaStall::NoToken);
                    return Err(NpuWhy::DmaDeadlock {
                        col: c,
                        row: r,
                        dir,
                        channel: ch,
                        stall,
                    }
                    .into());
                }
                self.wait_until(token_at);
            }
        }
        Ok(())
    }

    fn op(
        &mut self,
        target: &NpuTarget,
        op: &Op<'_>,
        bufs: &mut NpuBuffers<'_>,
        pass: Pass,
    ) -> core::result::Result<(), OpErr> {
        match op.kind {
            OpKind::Write { at, value } => self.write(target, &at, value, bufs, pass)?,
            OpKind::BlockWrite { first, payload } => {
                for (k, word) in payload.chunks_exact(4).enumerate() {
                    let at = regs::word_at(target, first + 4 * k as u64)?;
                    let value = regs::u32_at(word, 0).unwrap_or(0);
                    self.write(target, &at, value, bufs, pass)?;
                }
            }
            OpKind::MaskWrite { at, value, mask } => {
                if let Some(old) = self.read(&at, pass)? {
                    let new = (old & !mask) | (value & mask);
                    self.write(target, &at, new, bufs, pass)?;
                }
            }
            OpKind::MaskPoll { at, value, mask } => {
                if let Some(actual) = self.read(&at, pass)? {
                    if actual & mask != value {
                        // A channel that cannot finish is named with what it waits for.
                        if let Word::Reg(Reg::Status { dir, ch }) = at.word {
                            let stall = self
                                .dma
                                .tile_ref(at.tile.index)
                                .and_then(|d| d.stall(dir_of(dir), usize::from(ch)));
                            if let Some(stall) = stall {
                                return Err(OpErr::Why(NpuWhy::DmaDeadlock {
                                    col: at.tile.col,
                                    row: at.tile.row,
                                    dir,
                                    channel: ch,
                                    stall,
                                }));
                            }
                        }
                        return Err(OpErr::Why(NpuWhy::PollTimeout {
                            reg: at.raw,
                            mask,
                            expected: value,
                            actual,
                        }));
                    }
                    // The host waits until the register took the value it polls for.
                    let d = self.dma.tile_ref(at.tile.index);
                    let since = match at.word {
                        Word::Reg(Reg::Lock(id)) => d.map_or(0, |d| d.lock_time(id.into())),
                        Word::Reg(Reg::Status { dir, ch }) => {
                            d.map_or(0, |d| d.free_at(dir_of(dir), ch.into()))
                        }
                        _ => 0,
                    };
                    self.wait_until(since);
                }
            }
            OpKind::DdrPatch {
                shim,
                bd,
                buffer,
                argplus,
            } => {
                let size = buf_len(bufs, buffer);
                if argplus >= size || argplus >> DDR_OFFSET_BITS != 0 {
                    let region = NpuRegion::Buffer(buffer);
                    let why = NpuWhy::OutOfBounds {
                        region,
                        start: argplus,
                        len: 1,
                        size,
                    };
                    return Err(OpErr::Why(why));
                }
                let addr = (u64::from(buffer.argidx()) + 1) << DDR_OFFSET_BITS | argplus;
                // Word 1 gets address bits 31:0 (argplus is 4-byte aligned), word 2's low half
                // bits 47:32; its other bits are kept.
                if let Some(d) = self.dma.tile(shim.index) {
                    let high = d.bd_word(bd, BD_ADDR_HIGH) & !0xFFFF;
                    d.set_bd_word(bd, BD_ADDR_HIGH, high | ((addr >> 32) as u32 & 0xFFFF));
                    d.set_bd_word(bd, BD_ADDR_LOW, addr as u32);
                }
            }
            OpKind::Nop => {}
            OpKind::LoadKernel { tile } => {
                if let Some(r) = self.resident.get_mut(tile.index) {
                    *r = true;
                }
                self.settle(target, bufs, pass)?;
            }
            OpKind::Tct {
                col,
                row,
                cols,
                rows,
                dir,
                channel,
            } => self.tct(target, (col, row), (cols, rows), dir, channel)?,
        }
        Ok(())
    }

    /// A kernel on `tile`: reads and checks the parameter block, runs the kernel, counts and
    /// returns its cycles.
    fn compute(
        &mut self,
        target: &NpuTarget,
        tile: Tile,
        kernel: Kernel,
        param_addr: u32,
    ) -> core::result::Result<u64, OpErr> {
        let mem = self.mem(tile)?;
        let start = param_addr as usize;
        let end = start + kernel.block_bytes() as usize;
        let block = mem.get(start..end).unwrap_or(&[]);
        let params = Params::parse(kernel, block, tile.local)?;
        kernels::run(&params, mem);
        let (work, f32) = params.work();
        let rate = if f32 {
            target.macs_per_cycle_f32
        } else {
            target.macs_per_cycle_i8
        };
        let took = cycles(work, rate);
        if let Some(busy) = self.busy.get_mut(tile.index) {
            *busy = busy.saturating_add(took);
        }
        Ok(took)
    }
}

/// The channel direction of a register's `dir` field (0 S2MM).
fn dir_of(dir: u8) -> Dir {
    if dir == 0 {
        Dir::S2mm
    } else {
        Dir::Mm2s
    }
}
