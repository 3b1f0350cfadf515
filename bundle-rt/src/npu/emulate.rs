//! Executing decoded ops: the emulator's per-tile state (data memory and registers: a shim tile's 16
//! buffer descriptors of 8 words, a memory or core tile's `DMA_LOAD_DONE`, `DMA_STORE_DONE`,
//! `CORE_DONE`) and the cycle count. A VNPU_DMA takes its DDR address from the shim buffer descriptor
//! it names (words 1 and 2, as a DDR_PATCH leaves them) and moves data to or from the tile it serves.
//!
//! A run replays the ops twice from a reset state. The *check* pass moves no data: it simulates
//! only the registers (which no op derives from data), so every DDR_PATCH bound, buffer descriptor
//! address, DMA bound on both sides, store permission and register MASKPOLL is checked before the
//! first byte is written. The *execute* pass then does the work; the only checks left to it are
//! those that read data memory (a COMPUTE's parameter block, MASKWRITE/MASKPOLL on a data word),
//! and each runs before its op changes anything. Ops complete in order (a MASKPOLL never waits).
//! Tile memories are allocated on first use, kept across runs and zeroed when a run first touches
//! them; every allocation failure is [`Error::OutOfMemory`].

use alloc::vec::Vec;

use super::decode::{Dma, Op, OpKind};
use super::device::{NpuBuffers, NpuCycles, NpuTarget};
use super::kernels;
use super::params::{Kernel, Params};
use super::regs::{self, Addr, Reg, Tile, Word, BD_ADDR_HIGH, BD_ADDR_LOW, BD_WORDS, NUM_BDS};
use crate::error::{Error, Name, NpuBuffer, NpuRegion, NpuWhy};
use crate::Result;

/// Bits of a DDR address that are the offset inside its buffer.
const DDR_OFFSET_BITS: u32 = 40;

/// Words of a shim tile's buffer descriptors.
const BD_TABLE: usize = (NUM_BDS * BD_WORDS) as usize;

/// The registers of one tile (a shim tile uses `bd`, the others the counters).
#[derive(Clone, Copy, Debug)]
struct Regs {
    /// Word `w` of BD `i` at `8i + w`.
    bd: [u32; BD_TABLE],
    load_done: u32,
    store_done: u32,
    core_done: u32,
}

impl Default for Regs {
    fn default() -> Regs {
        Regs {
            bd: [0; BD_TABLE],
            load_done: 0,
            store_done: 0,
            core_done: 0,
        }
    }
}

/// The index of word `word` of BD `bd` in [`Regs::bd`].
fn bd_word(bd: u8, word: u8) -> usize {
    usize::from(bd) * BD_WORDS as usize + usize::from(word)
}

impl Regs {
    fn get(&self, reg: Reg) -> u32 {
        match reg {
            Reg::Bd { bd, word } => self.bd.get(bd_word(bd, word)).copied().unwrap_or(0),
            Reg::LoadDone => self.load_done,
            Reg::StoreDone => self.store_done,
            Reg::CoreDone => self.core_done,
        }
    }

    fn set(&mut self, reg: Reg, v: u32) {
        let slot = match reg {
            Reg::Bd { bd, word } => self.bd.get_mut(bd_word(bd, word)),
            Reg::LoadDone => Some(&mut self.load_done),
            Reg::StoreDone => Some(&mut self.store_done),
            Reg::CoreDone => Some(&mut self.core_done),
        };
        if let Some(slot) = slot {
            *slot = v;
        }
    }

    /// The 48-bit DDR address in BD `bd`: bits 31:2 from word 1, bits 47:32 from word 2's low half.
    fn bd_addr(&self, bd: u8) -> u64 {
        let low = self.get(Reg::Bd {
            bd,
            word: BD_ADDR_LOW,
        }) & !3;
        let high = self.get(Reg::Bd {
            bd,
            word: BD_ADDR_HIGH,
        }) & 0xFFFF;
        u64::from(high) << 32 | u64::from(low)
    }

    /// Writes `addr` (4-byte aligned, below 2^48) into BD `bd` as a DDR_PATCH does: word 1, and
    /// word 2's low half (its other bits are kept).
    fn patch_bd(&mut self, bd: u8, addr: u64) {
        let high = Reg::Bd {
            bd,
            word: BD_ADDR_HIGH,
        };
        let word2 = (self.get(high) & !0xFFFF) | ((addr >> 32) as u32 & 0xFFFF);
        self.set(high, word2);
        let low = Reg::Bd {
            bd,
            word: BD_ADDR_LOW,
        };
        self.set(low, addr as u32);
    }
}

/// Per-tile state, reused across runs.
#[derive(Debug, Default)]
pub(crate) struct State {
    regs: Vec<Regs>,
    /// Data memory per tile index (empty until first used).
    mems: Vec<Vec<u8>>,
    /// Whether the tile's memory is zeroed for this run.
    clean: Vec<bool>,
    /// Compute cycles per tile in this run.
    busy: Vec<u64>,
    /// Bytes moved by VNPU_DMA in this run.
    dma_bytes: u64,
}

/// Which pass runs.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Pass {
    /// Registers only: checks every op that does not read data memory.
    Check,
    /// Everything.
    Execute,
}

type R<T> = core::result::Result<T, NpuWhy>;

/// Turns an allocation failure into [`Error::OutOfMemory`].
fn oom(bytes: usize) -> Error {
    Error::OutOfMemory {
        what: Name::new("NPU tile data memory"),
        bytes: bytes as u64,
    }
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

    /// Resets registers, counters and cycle sums for a pass over an array of `tiles` tiles.
    fn reset(&mut self, tiles: usize) -> Result<()> {
        resize(&mut self.regs, tiles, Regs::default())?;
        resize(&mut self.clean, tiles, false)?;
        resize(&mut self.busy, tiles, 0)?;
        if self.mems.len() < tiles {
            let more = tiles - self.mems.len();
            self.mems.try_reserve(more).map_err(|_| oom(tiles))?;
            self.mems.resize_with(tiles, Vec::new);
        }
        self.dma_bytes = 0;
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
        let tiles = regs::tile_count(target);
        for pass in [Pass::Check, Pass::Execute] {
            self.reset(tiles)?;
            for (index, op) in ops.iter().enumerate() {
                self.op(target, op, &mut bufs, pass)
                    .map_err(|e| e.at(index as u32, op.offset))?;
            }
        }
        let instr = cycles(txn.len() as u64, target.instr_bytes_per_cycle);
        Ok(NpuCycles {
            instruction: instr.saturating_add(target.dispatch_cycles.into()),
            data: cycles(self.dma_bytes, target.dma_bytes_per_cycle),
            compute: self.busy.iter().copied().max().unwrap_or(0),
        })
    }

    /// The tile's data memory, allocated and zeroed for this run.
    fn mem(&mut self, tile: Tile) -> core::result::Result<&mut [u8], OpErr> {
        let size = tile.local as usize;
        let (Some(mem), Some(clean)) = (
            self.mems.get_mut(tile.index),
            self.clean.get_mut(tile.index),
        ) else {
            return Ok(&mut []);
        };
        if !*clean {
            if mem.len() != size {
                *mem = Vec::new();
                mem.try_reserve_exact(size).map_err(|_| OpErr::Oom(size))?;
                mem.resize(size, 0);
            } else {
                mem.fill(0);
            }
            *clean = true;
        }
        Ok(mem)
    }

    fn regs(&mut self, tile: Tile) -> R<&mut Regs> {
        let (col, row) = (tile.col, tile.row);
        self.regs
            .get_mut(tile.index)
            .ok_or(NpuWhy::NotCoreTile { col, row })
    }

    /// The word `at` names; `None` for a data word in the check pass.
    fn read(&mut self, at: &Addr, pass: Pass) -> core::result::Result<Option<u32>, OpErr> {
        Ok(match at.word {
            Word::Reg(reg) => Some(self.regs(at.tile)?.get(reg)),
            Word::Data(off) if pass == Pass::Execute => {
                regs::u32_at(self.mem(at.tile)?, off as usize)
            }
            Word::Data(_) => None,
        })
    }

    /// Writes the word `at` names (data words only in the execute pass).
    fn write(&mut self, at: &Addr, value: u32, pass: Pass) -> core::result::Result<(), OpErr> {
        match at.word {
            Word::Reg(reg) => self.regs(at.tile)?.set(reg, value),
            Word::Data(off) if pass == Pass::Execute => {
                let off = off as usize;
                if let Some(d) = self.mem(at.tile)?.get_mut(off..off + 4) {
                    d.copy_from_slice(&value.to_le_bytes());
                }
            }
            Word::Data(_) => {}
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
            OpKind::Write { at, value } => self.write(&at, value, pass)?,
            OpKind::BlockWrite { first, payload } => {
                for (k, word) in payload.chunks_exact(4).enumerate() {
                    let at = regs::word_at(target, first + 4 * k as u64)?;
                    let value = regs::u32_at(word, 0).unwrap_or(0);
                    self.write(&at, value, pass)?;
                }
            }
            OpKind::MaskWrite { at, value, mask } => {
                if let Some(old) = self.read(&at, pass)? {
                    self.write(&at, (old & !mask) | (value & mask), pass)?;
                }
            }
            OpKind::MaskPoll { at, value, mask } => {
                if let Some(actual) = self.read(&at, pass)? {
                    if actual & mask != value {
                        return Err(OpErr::Why(NpuWhy::PollTimeout {
                            reg: at.raw,
                            mask,
                            expected: value,
                            actual,
                        }));
                    }
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
                self.regs(shim)?.patch_bd(bd, addr);
            }
            OpKind::Nop => {}
            OpKind::Dma(d) => self.dma(&d, bufs, pass)?,
            OpKind::Compute {
                tile,
                kernel,
                param_addr,
            } => {
                if pass == Pass::Execute {
                    self.compute(target, tile, kernel, param_addr)?;
                }
                let regs = self.regs(tile)?;
                regs.core_done = regs.core_done.wrapping_add(1);
            }
        }
        Ok(())
    }

    /// A VNPU_DMA: checks the DDR side (the local side was checked by decode), then copies.
    fn dma(
        &mut self,
        d: &Dma,
        bufs: &mut NpuBuffers<'_>,
        pass: Pass,
    ) -> core::result::Result<(), OpErr> {
        // The BD's address is below 2^48 and `skip` ≤ 3: no overflow.
        let addr = self.regs(d.shim)?.bd_addr(d.bd) + u64::from(d.skip);
        let buffer = (addr >> DDR_OFFSET_BITS)
            .checked_sub(1)
            .and_then(NpuBuffer::from_argidx)
            .ok_or(NpuWhy::BadAddress { addr })?;
        if d.store && !buffer.is_writable() {
            return Err(OpErr::Why(NpuWhy::ReadOnlyBuffer { buffer }));
        }
        let start = addr & ((1 << DDR_OFFSET_BITS) - 1);
        let size = buf_len(bufs, buffer);
        // All in u64 from u32 factors: (2^32)^2 + 2^40 + 2^32 < 2^64, no overflow.
        let span = u64::from(d.rows - 1) * u64::from(d.ddr_stride) + u64::from(d.row_bytes);
        if start + span > size {
            let region = NpuRegion::Buffer(buffer);
            return Err(OpErr::Why(NpuWhy::OutOfBounds {
                region,
                start,
                len: span,
                size,
            }));
        }
        regs::check_local(d.tile, d.local.into(), {
            u64::from(d.rows - 1) * u64::from(d.local_stride) + u64::from(d.row_bytes)
        })?;
        if pass == Pass::Execute {
            // Every row was checked above (the last row ends furthest on both sides), and both
            // sides fit `usize` (they are inside slices).
            let (start, len) = (start as usize, d.row_bytes as usize);
            let mem = self.mem(d.tile)?;
            for r in 0..d.rows as usize {
                let ddr = start + r * d.ddr_stride as usize;
                let local = d.local as usize + r * d.local_stride as usize;
                let (Some(ddr_end), Some(local_end)) =
                    (ddr.checked_add(len), local.checked_add(len))
                else {
                    break;
                };
                let Some(tile_row) = mem.get_mut(local..local_end) else {
                    break;
                };
                if d.store {
                    if let Some(dst) = buf_mut(bufs, buffer).and_then(|b| b.get_mut(ddr..ddr_end)) {
                        dst.copy_from_slice(tile_row);
                    }
                } else if let Some(src) = buf(bufs, buffer).get(ddr..ddr_end) {
                    tile_row.copy_from_slice(src);
                }
            }
            let moved = u64::from(d.rows).saturating_mul(d.row_bytes.into());
            self.dma_bytes = self.dma_bytes.saturating_add(moved);
        }
        let regs = self.regs(d.tile)?;
        if d.store {
            regs.store_done = regs.store_done.wrapping_add(1);
        } else {
            regs.load_done = regs.load_done.wrapping_add(1);
        }
        Ok(())
    }

    /// A VNPU_COMPUTE: reads and checks the parameter block, runs the kernel, counts its cycles.
    fn compute(
        &mut self,
        target: &NpuTarget,
        tile: Tile,
        kernel: Kernel,
        param_addr: u32,
    ) -> core::result::Result<(), OpErr> {
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
        if let Some(busy) = self.busy.get_mut(tile.index) {
            *busy = busy.saturating_add(cycles(work, rate));
        }
        Ok(())
    }
}

/// The length of a bound buffer.
fn buf_len(bufs: &NpuBuffers<'_>, b: NpuBuffer) -> u64 {
    buf(bufs, b).len() as u64
}

/// A bound buffer, read-only.
fn buf<'s>(bufs: &'s NpuBuffers<'_>, b: NpuBuffer) -> &'s [u8] {
    match b {
        NpuBuffer::Input => bufs.input,
        NpuBuffer::Output => bufs.output,
        NpuBuffer::Scratch => bufs.scratch,
        NpuBuffer::Constants => bufs.constants,
        NpuBuffer::Params => bufs.params,
    }
}

/// A writable bound buffer (`out`, `scratch`).
fn buf_mut<'s>(bufs: &'s mut NpuBuffers<'_>, b: NpuBuffer) -> Option<&'s mut [u8]> {
    match b {
        NpuBuffer::Output => Some(bufs.output),
        NpuBuffer::Scratch => Some(bufs.scratch),
        _ => None,
    }
}

/// An op's failure before it is located: a [`NpuWhy`], or a tile memory of this many bytes that
/// could not be allocated.
enum OpErr {
    Why(NpuWhy),
    Oom(usize),
}

impl From<NpuWhy> for OpErr {
    fn from(why: NpuWhy) -> OpErr {
        OpErr::Why(why)
    }
}

impl OpErr {
    /// Locates the failure at op `op`, byte `offset`.
    fn at(self, op: u32, offset: u32) -> Error {
        match self {
            OpErr::Why(why) => Error::Npu { op, offset, why },
            OpErr::Oom(bytes) => oom(bytes),
        }
    }
}
