//! The AIE-ML data movement the emulator models (docs/aie-ml-facts.md): per tile, the buffer
//! descriptors ([`crate::aie::bd`]), the DMA channels (control word, a start queue of 4 tasks,
//! status) and the locks ([`crate::aie::lock`]); across tiles, the stream routes of the device
//! configuration ([`route`]); and [`Dma::run`], which advances every channel until none can move.
//!
//! A task (`START_BD_ID`, `REPEAT_COUNT` + 1 runs, `ENABLE_TOKEN_ISSUE`) written to a queue starts
//! when its channel is idle: each BD of its chain acquires its lock, moves its words, releases its
//! lock, then follows `NEXT_BD`; a finished run repeats with the iteration index advanced; a
//! finished task with the token flag leaves a task-completion token for a TCT to take. Words move
//! between an MM2S channel and the S2MM channel its route feeds, as many as both BDs have left, so
//! a stream is a rendezvous (no FIFO). Everything runs to completion between two host ops, which
//! is one legal interleaving of the hardware's; a channel still waiting when the host waits on it
//! is a deadlock, reported naming the tile, channel and what it waits for.
//!
//! The emulator gives each move's bytes to a [`DmaMemory`]: DDR for the shim (the five fused
//! buffers), data memory for memory and core tiles (a memory tile also reaches its west and east
//! neighbours: 0..0x80000 west, 0x80000.. own, 0x100000.. east).
//!
//! Time (cycles) runs beside the data: a task starts no earlier than the host time of its queue
//! push and the end of its channel's previous work, a BD's acquire no earlier than the lock's last
//! change, and words that cross DDR (a shim channel's) take `bytes / dma_bytes_per_cycle` cycles of
//! the one DDR link, in the order they move; streams between tiles take no time of their own. A
//! release, the end of a task and its token carry the time they happened, which TCTs, MASKPOLLs
//! and the super-kernels wait for.

use alloc::vec::Vec;

use super::target::NpuTarget;
use crate::aie::bd::{Bd, BdKind};
use crate::aie::lock::{Acquire, Locks};
use crate::error::{DmaStall, NpuWhy};

/// Channels per direction a tile may have (memory tiles: 6; shim and core tiles: 2).
pub(crate) const MAX_CHANNELS: usize = 6;
/// Tasks a start queue holds.
pub(crate) const QUEUE_DEPTH: usize = 4;
/// BD words kept per tile (48 BDs of 8 words: the memory tile's, the largest).
const BD_SLOTS: usize = 48 * 8;

/// A channel's direction: into the tile's memory (`S2mm`) or out of it (`Mm2s`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Dir {
    /// Stream to memory.
    S2mm = 0,
    /// Memory to stream.
    Mm2s = 1,
}

/// Channels per direction of a tile kind.
pub(crate) fn channels(kind: BdKind) -> usize {
    match kind {
        BdKind::MemTile => 6,
        BdKind::Shim | BdKind::Core => 2,
    }
}

/// The BD layout of the tile in `row`.
pub(crate) fn kind_of(target: &NpuTarget, row: u8) -> BdKind {
    match row {
        0 => BdKind::Shim,
        r if r <= target.mem_tile_rows => BdKind::MemTile,
        _ => BdKind::Core,
    }
}

/// The S2MM channel that MM2S channel `ch` of tile (`col`, `row`) feeds, as (col, row, channel):
/// the stream routes of the device configuration. In each column: shim MM2S 0, 1 feed the memory
/// tile's S2MM 0, 1; memory-tile MM2S `k` < cores feeds core row `first + k` S2MM 0; core row
/// `first + k` MM2S 0 feeds memory-tile S2MM `2 + k`; the memory tile's two MM2S after its core
/// channels feed the shim's S2MM 0, 1. `None` for an unrouted channel. (The first memory-tile row
/// serves the column; arrays without one have no routes.)
pub(crate) fn route(target: &NpuTarget, col: u8, row: u8, ch: usize) -> Option<(u8, u8, usize)> {
    let mem = 1u8;
    if target.mem_tile_rows == 0 {
        return None;
    }
    let first_core = target.mem_tile_rows + 1;
    let cores = usize::from(target.rows.saturating_sub(first_core));
    match kind_of(target, row) {
        BdKind::Shim => (ch < 2).then_some((col, mem, ch)),
        BdKind::MemTile if row == mem => {
            if ch < cores {
                Some((col, first_core + ch as u8, 0))
            } else if ch < cores + 2 && cores + 2 <= MAX_CHANNELS {
                Some((col, 0, ch - cores))
            } else {
                None
            }
        }
        BdKind::Core if ch == 0 => {
            let k = usize::from(row - first_core);
            (2 + k < MAX_CHANNELS).then_some((col, mem, 2 + k))
        }
        _ => None,
    }
}

/// A task in a start queue.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Task {
    bd: u8,
    runs: u32,
    token: bool,
    /// Host time of its push.
    at: u64,
}

/// The BD a channel is working on.
#[derive(Clone, Copy, Debug)]
struct Active {
    task: Task,
    /// Runs of the task completed so far (the iteration index).
    run: u32,
    index: u8,
    bd: Bd,
    /// Whether its acquire has been granted (or it has none).
    acquired: bool,
    /// Words moved.
    done: u32,
    /// The time its work has reached.
    t: u64,
}

/// One DMA channel.
#[derive(Clone, Copy, Debug, Default)]
struct Channel {
    ctrl: u32,
    queue: [Option<Task>; QUEUE_DEPTH],
    active: Option<Active>,
    /// Task-completion tokens issued and not yet taken by a TCT.
    tokens: u32,
    /// When the channel's last BD ended.
    free: u64,
    /// When its latest token was issued.
    token_at: u64,
}

impl Channel {
    fn queued(&self) -> usize {
        self.queue.iter().filter(|t| t.is_some()).count()
    }
}

/// The DMA state of one tile.
#[derive(Clone, Debug)]
pub(crate) struct TileDma {
    kind: BdKind,
    bds: [u32; BD_SLOTS],
    locks: Locks<64>,
    /// When each lock last changed.
    lock_t: [u64; 64],
    chans: [[Channel; MAX_CHANNELS]; 2],
}

impl TileDma {
    fn new(kind: BdKind) -> TileDma {
        TileDma {
            kind,
            bds: [0; BD_SLOTS],
            locks: Locks::default(),
            lock_t: [0; 64],
            chans: [[Channel::default(); MAX_CHANNELS]; 2],
        }
    }

    /// Word `word` of BD `bd`.
    pub(crate) fn bd_word(&self, bd: u8, word: u8) -> u32 {
        self.bds
            .get(usize::from(bd) * 8 + usize::from(word))
            .copied()
            .unwrap_or(0)
    }

    /// Sets word `word` of BD `bd`.
    pub(crate) fn set_bd_word(&mut self, bd: u8, word: u8, value: u32) {
        if let Some(w) = self.bds.get_mut(usize::from(bd) * 8 + usize::from(word)) {
            *w = value;
        }
    }

    /// BD `bd`, decoded from its words.
    pub(crate) fn decode(&self, bd: u8) -> Bd {
        let at = usize::from(bd) * 8;
        let words = self.bds.get(at..at + self.kind.words()).unwrap_or(&[]);
        Bd::decode(self.kind, words)
    }

    /// A lock's value.
    pub(crate) fn lock(&self, id: usize) -> u32 {
        self.locks.get(id).map_or(0, u32::from)
    }

    /// Sets a lock's value register at time `at`.
    pub(crate) fn set_lock(&mut self, id: usize, value: u32, at: u64) {
        self.locks.set(id, value);
        if let Some(t) = self.lock_t.get_mut(id) {
            *t = at;
        }
    }

    /// When lock `id` last changed.
    pub(crate) fn lock_time(&self, id: usize) -> u64 {
        self.lock_t.get(id).copied().unwrap_or(0)
    }

    /// When channel `ch` finished its last BD.
    pub(crate) fn free_at(&self, dir: Dir, ch: usize) -> u64 {
        self.chans[dir as usize].get(ch).map_or(0, |c| c.free)
    }

    /// When channel `ch` issued its latest token.
    pub(crate) fn token_at(&self, dir: Dir, ch: usize) -> u64 {
        self.chans[dir as usize].get(ch).map_or(0, |c| c.token_at)
    }

    /// Acquires lock `id` as a core's program does (`value` as a BD's acquire); `None` past the
    /// locks.
    pub(crate) fn acquire_lock(&mut self, id: usize, value: i8) -> Option<Acquire> {
        self.locks.acquire(id, value)
    }

    /// Releases lock `id` by `delta` at time `at`; `Err` with the lock's value when it would leave
    /// 0..=63.
    pub(crate) fn release_lock(&mut self, id: usize, delta: i8, at: u64) -> Result<(), u8> {
        match self.locks.release(id, delta) {
            Some(Err(fault)) => Err(fault.value),
            _ => {
                if let Some(t) = self.lock_t.get_mut(id) {
                    *t = (*t).max(at);
                }
                Ok(())
            }
        }
    }

    /// A channel's control word.
    pub(crate) fn ctrl(&self, dir: Dir, ch: usize) -> u32 {
        self.chans[dir as usize].get(ch).map_or(0, |c| c.ctrl)
    }

    /// Sets a channel's control word (kept; its fields have no effect here).
    pub(crate) fn set_ctrl(&mut self, dir: Dir, ch: usize, value: u32) {
        if let Some(c) = self.chans[dir as usize].get_mut(ch) {
            c.ctrl = value;
        }
    }

    /// A channel's status word (AIE-ML layout): `CUR_BD` (bits 24..), `TASK_QUEUE_SIZE` (20..22),
    /// `CHANNEL_RUNNING` (19), `STALLED_STREAM` (4), `STALLED_LOCK_ACQ` (2), `STATUS` 1 while
    /// busy. An idle channel with an empty queue reads 0.
    pub(crate) fn status(&self, dir: Dir, ch: usize) -> u32 {
        let Some(c) = self.chans[dir as usize].get(ch) else {
            return 0;
        };
        let queued = c.queued() as u32;
        match &c.active {
            None => queued << 20,
            Some(a) => {
                let stall = if a.acquired { 1 << 4 } else { 1 << 2 };
                u32::from(a.index) << 24 | queued << 20 | 1 << 19 | stall | 1
            }
        }
    }

    /// Queues a task (the start-queue word: `START_BD_ID`, `REPEAT_COUNT` at 16, token at 31)
    /// pushed at host time `at`.
    pub(crate) fn push(&mut self, dir: Dir, ch: usize, word: u32, at: u64) -> Result<(), NpuWhy> {
        let bd_bits = if self.kind == BdKind::MemTile {
            0x3F
        } else {
            0xF
        };
        let task = Task {
            bd: (word & bd_bits) as u8,
            runs: ((word >> 16) & 0xFF) + 1,
            token: word >> 31 == 1,
            at,
        };
        let c = self.chans[dir as usize]
            .get_mut(ch)
            .ok_or(NpuWhy::BadField {
                field: "channel",
                value: ch as u64,
            })?;
        let slot = c.queue.iter_mut().find(|t| t.is_none());
        let Some(slot) = slot else {
            return Err(NpuWhy::QueueOverflow {
                dir: dir as u8,
                channel: ch as u8,
            });
        };
        *slot = Some(task);
        Ok(())
    }

    /// Takes a task-completion token of a channel, if one is there.
    pub(crate) fn take_token(&mut self, dir: Dir, ch: usize) -> bool {
        match self.chans[dir as usize].get_mut(ch) {
            Some(c) if c.tokens > 0 => {
                c.tokens -= 1;
                true
            }
            _ => false,
        }
    }

    /// Why channel `ch` is not idle, if it is not.
    pub(crate) fn stall(&self, dir: Dir, ch: usize) -> Option<DmaStall> {
        let c = self.chans[dir as usize].get(ch)?;
        let a = c.active.as_ref()?;
        Some(match (a.acquired, a.bd.acquire) {
            (false, Some(l)) => DmaStall::Lock {
                bd: a.index,
                lock: l.id,
                value: self.locks.get(usize::from(l.id)).unwrap_or(0),
                wants: l.value,
            },
            _ => DmaStall::Stream {
                bd: a.index,
                done: a.done,
                len: a.bd.len,
            },
        })
    }
}

/// One side of a move: the tile, its BD and the first word of the walk.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Side {
    pub(crate) col: u8,
    pub(crate) row: u8,
    pub(crate) bd: Bd,
    /// Index of the first word in the BD's walk.
    pub(crate) first: u32,
    /// The task run (iteration index).
    pub(crate) run: u32,
}

/// Where the engine's bytes live: checks a BD's whole reach when it starts, moves words.
pub(crate) trait DmaMemory {
    /// The error of a check or a move (a [`NpuWhy`], or what the memory adds).
    type Error: From<NpuWhy>;
    /// Checks that `side.bd`'s walk in run `side.run` lies inside the tile's memory (or, for the
    /// shim, inside one bound buffer, writable when `write`).
    fn check(&mut self, side: &Side, write: bool) -> Result<(), Self::Error>;
    /// Moves `words` words from `from` to `to`.
    fn copy(&mut self, from: &Side, to: &Side, words: u32) -> Result<(), Self::Error>;
}

/// The DMA state of the whole array.
#[derive(Clone, Debug, Default)]
pub(crate) struct Dma {
    tiles: Vec<TileDma>,
    /// Bytes moved through shim channels in this run (DDR traffic).
    pub(crate) ddr_bytes: u64,
    /// When the DDR link is next free.
    pub(crate) ddr_free: u64,
    /// DDR bytes per cycle.
    rate: u32,
}

/// Most state changes one [`Dma::run`] makes before it calls the array unsettled (a chain of BDs
/// without locks that never ends would otherwise spin forever).
const MAX_EVENTS: u64 = 1 << 20;

impl Dma {
    /// Every tile idle, BDs and locks 0, no tokens.
    pub(crate) fn reset(&mut self, target: &NpuTarget) {
        self.tiles.clear();
        for t in 0..usize::from(target.cols) * usize::from(target.rows) {
            let row = (t % usize::from(target.rows)) as u8;
            self.tiles.push(TileDma::new(kind_of(target, row)));
        }
        self.ddr_bytes = 0;
        self.ddr_free = 0;
        self.rate = target.dma_bytes_per_cycle.max(1);
    }

    /// The latest time any channel finished (the array's last DMA activity).
    pub(crate) fn last_free(&self) -> u64 {
        let chans = self.tiles.iter().flat_map(|t| t.chans.iter().flatten());
        chans.map(|c| c.free).max().unwrap_or(0).max(self.ddr_free)
    }

    /// The DMA state of tile `index` (`col * rows + row`).
    pub(crate) fn tile(&mut self, index: usize) -> Option<&mut TileDma> {
        self.tiles.get_mut(index)
    }

    /// The DMA state of tile `index`, read-only.
    pub(crate) fn tile_ref(&self, index: usize) -> Option<&TileDma> {
        self.tiles.get(index)
    }

    /// The tile and local id of lock `id` as a BD of tile (`col`, `row`) names it: a memory tile's
    /// ids 0..64 are its west neighbour's, 64..128 its own, 128..192 its east neighbour's.
    fn lock_owner(&self, target: &NpuTarget, col: u8, row: u8, id: u8) -> Option<(usize, usize)> {
        let rows = usize::from(target.rows);
        let here = usize::from(col) * rows + usize::from(row);
        match kind_of(target, row) {
            BdKind::MemTile => {
                let (side, local) = (id / 64, usize::from(id % 64));
                let tile = match side {
                    0 => here.checked_sub(rows)?,
                    1 => here,
                    2 if usize::from(col) + 1 < usize::from(target.cols) => here + rows,
                    _ => return None,
                };
                Some((tile, local))
            }
            _ => (id < 16).then_some((here, usize::from(id))),
        }
    }

    /// Makes BD `index` the active one of a channel for `task`'s run `run`, after checking it.
    #[allow(clippy::too_many_arguments)] // the channel's coordinates and the BD's
    fn activate<M: DmaMemory>(
        &mut self,
        target: &NpuTarget,
        (col, row, dir, ch): (u8, u8, Dir, usize),
        task: Task,
        (run, t0): (u32, u64),
        index: u8,
        mem: &mut M,
    ) -> Result<(), M::Error> {
        let t = usize::from(col) * usize::from(target.rows) + usize::from(row);
        let Some(tile) = self.tiles.get(t) else {
            return Ok(());
        };
        let bad = |why| NpuWhy::BadBd {
            col,
            row,
            bd: index,
            why,
        };
        if u32::from(index) >= tile.kind.count() {
            return Err(bad("no such BD").into());
        }
        if tile.kind == BdKind::MemTile && (usize::from(index) < 24) != (ch % 2 == 0) {
            return Err(bad("BDs 0..24 serve even channels, 24..48 odd ones").into());
        }
        let bd = tile.decode(index);
        if !bd.valid {
            return Err(bad("not valid").into());
        }
        for l in bd.acquire.iter().chain(bd.release.iter()) {
            if self.lock_owner(target, col, row, l.id).is_none() {
                return Err(bad("lock id past the tile's locks").into());
            }
        }
        let side = Side {
            col,
            row,
            bd,
            first: 0,
            run,
        };
        mem.check(&side, dir == Dir::S2mm)?;
        if let Some(c) = self.tiles[t].chans[dir as usize].get_mut(ch) {
            c.active = Some(Active {
                task,
                run,
                index,
                bd,
                acquired: bd.acquire.is_none(),
                done: 0,
                t: t0,
            });
        }
        Ok(())
    }

    /// One step of one channel: start a queued task, take its lock, or finish its BD. Returns
    /// whether anything changed.
    fn advance<M: DmaMemory>(
        &mut self,
        target: &NpuTarget,
        (col, row, dir, ch): (u8, u8, Dir, usize),
        mem: &mut M,
    ) -> Result<bool, M::Error> {
        let t = usize::from(col) * usize::from(target.rows) + usize::from(row);
        let Some(c) = self
            .tiles
            .get_mut(t)
            .and_then(|x| x.chans[dir as usize].get_mut(ch))
        else {
            return Ok(false);
        };
        let Some(a) = c.active else {
            let Some(task) = c.queue[0] else {
                return Ok(false);
            };
            c.queue.rotate_left(1);
            c.queue[QUEUE_DEPTH - 1] = None;
            let t0 = task.at.max(c.free);
            self.activate(target, (col, row, dir, ch), task, (0, t0), task.bd, mem)?;
            return Ok(true);
        };
        if !a.acquired {
            let Some(l) = a.bd.acquire else {
                return Ok(false);
            };
            let Some((owner, id)) = self.lock_owner(target, col, row, l.id) else {
                return Ok(false);
            };
            let got = self.tiles[owner].locks.acquire(id, l.value);
            if got == Some(Acquire::Done) {
                let since = self.tiles[owner].lock_time(id);
                if let Some(a) = self.tiles[t].chans[dir as usize][ch].active.as_mut() {
                    a.acquired = true;
                    a.t = a.t.max(since);
                }
                return Ok(true);
            }
            return Ok(false);
        }
        if a.done < a.bd.len {
            return Ok(false);
        }
        if let Some(l) = a.bd.release {
            if let Some((owner, id)) = self.lock_owner(target, col, row, l.id) {
                if let Err(value) = self.tiles[owner].release_lock(id, l.value, a.t) {
                    return Err(NpuWhy::LockFault {
                        col,
                        row,
                        lock: l.id,
                        value,
                        delta: l.value,
                    }
                    .into());
                }
            }
        }
        let c = &mut self.tiles[t].chans[dir as usize][ch];
        c.active = None;
        c.free = c.free.max(a.t);
        if let Some(next) = a.bd.next {
            self.activate(target, (col, row, dir, ch), a.task, (a.run, a.t), next, mem)?;
        } else if a.run + 1 < a.task.runs {
            self.activate(
                target,
                (col, row, dir, ch),
                a.task,
                (a.run + 1, a.t),
                a.task.bd,
                mem,
            )?;
        } else if a.task.token {
            c.tokens += 1;
            c.token_at = c.token_at.max(a.t);
        }
        Ok(true)
    }

    /// Moves words from MM2S channel `ch` of tile (`col`, `row`) to the S2MM channel its route
    /// feeds, as many as both active BDs have left. Returns whether any moved.
    fn transfer<M: DmaMemory>(
        &mut self,
        target: &NpuTarget,
        (col, row, ch): (u8, u8, usize),
        mem: &mut M,
    ) -> Result<bool, M::Error> {
        let Some((dc, dr, dch)) = route(target, col, row, ch) else {
            return Ok(false);
        };
        let rows = usize::from(target.rows);
        let (s, d) = (
            usize::from(col) * rows + usize::from(row),
            usize::from(dc) * rows + usize::from(dr),
        );
        let active = |tile: usize, dir: Dir, ch: usize| {
            self.tiles
                .get(tile)
                .and_then(|x| x.chans[dir as usize].get(ch))
                .and_then(|c| c.active)
                .filter(|a| a.acquired && a.done < a.bd.len)
        };
        let (Some(from), Some(to)) = (active(s, Dir::Mm2s, ch), active(d, Dir::S2mm, dch)) else {
            return Ok(false);
        };
        let words = (from.bd.len - from.done).min(to.bd.len - to.done);
        let side = |c, r, a: Active| Side {
            col: c,
            row: r,
            bd: a.bd,
            first: a.done,
            run: a.run,
        };
        mem.copy(&side(col, row, from), &side(dc, dr, to), words)?;
        let mut end = from.t.max(to.t);
        if row == 0 || dr == 0 {
            let bytes = u64::from(words) * 4;
            self.ddr_bytes = self.ddr_bytes.saturating_add(bytes);
            end = end.max(self.ddr_free) + bytes.div_ceil(u64::from(self.rate));
            self.ddr_free = end;
        }
        for (tile, dir, ch) in [(s, Dir::Mm2s, ch), (d, Dir::S2mm, dch)] {
            if let Some(a) = self.tiles[tile].chans[dir as usize][ch].active.as_mut() {
                a.done += words;
                a.t = end;
            }
        }
        Ok(true)
    }

    /// Advances every channel until none can: tasks start, locks are taken and released, words
    /// move along the routes.
    pub(crate) fn run<M: DmaMemory>(
        &mut self,
        target: &NpuTarget,
        mem: &mut M,
    ) -> Result<(), M::Error> {
        let mut events: u64 = 0;
        loop {
            let mut progress = false;
            for t in 0..self.tiles.len() {
                let rows = usize::from(target.rows);
                let (col, row) = ((t / rows) as u8, (t % rows) as u8);
                let n = channels(self.tiles[t].kind);
                for dir in [Dir::S2mm, Dir::Mm2s] {
                    for ch in 0..n {
                        while self.advance(target, (col, row, dir, ch), mem)? {
                            progress = true;
                            events += 1;
                            if events > MAX_EVENTS {
                                return Err(NpuWhy::DmaUnsettled.into());
                            }
                        }
                    }
                }
                for ch in 0..n {
                    if self.transfer(target, (col, row, ch), mem)? {
                        progress = true;
                        events += 1;
                    }
                }
            }
            if !progress {
                return Ok(());
            }
        }
    }
}
