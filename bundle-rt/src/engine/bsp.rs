//! [`Engine`]: the BSP scheduler. Each layer's `(op, task)` pairs go on a task queue that a pool of
//! workers drains; a barrier closes the layer before the next one is loaded.
//!
//! ```text
//!  caller (worker 0)                     worker 1                 worker 2
//!  job = layer k, shares set
//!  lock: gen += 1, published = gen|active
//!  notify (sleepers only) ─────────────▶ sees gen change (spins on `published`, or wakes)
//!  take/run tasks                        take a task, notify_one ─▶ sees it / wakes
//!    …                                   run it, take more …       take/run …
//!  tickets gone → barrier.wait(active) ◀ tickets gone → wait ◀──── tickets gone → wait
//!  (layer k done; load layer k+1)
//! ```
//!
//! The queue of a layer is its ops' tasks in table order, numbered 0..total and dealt out in
//! contiguous shares to the layer's `active = min(threads, total)` threads, thread `t` owning
//! `total·t/active..total·(t+1)/active`: a thread takes numbers from the bottom of its own share,
//! then from the top of the next share that has any left, each with one compare-and-swap on that
//! share's word (no lock, so no futex call when two threads meet there). Shares keep a thread on the
//! same part of consecutive layers, so a task mostly reads what its own core wrote (see
//! docs/runtime.md for the measurement). A thread maps a number to its `(op, task)` pair with a
//! cursor of its own, which moves forward and restarts when a stolen number lies below it. Nothing
//! is allocated per run.
//!
//! The caller writes the layer's job and shares while no worker reads them (every thread of the
//! previous layer has passed its barrier), then publishes the layer as one atomic word,
//! `generation << 16 | active`, stored under the monitor's lock with the monitor's own copy (so a
//! sleeping worker cannot miss it). Workers poll that word without the lock (one cache-line transfer
//! per layer, instead of every worker taking the lock in turn to read the job) and sleep on the
//! monitor only after [`SPIN`] rounds. Workers `active..threads` sit the layer out: they neither read
//! the job nor meet at the barrier, whose round has `active` parties, so a layer of 4 tasks on a
//! 16-thread engine costs a 4-party barrier. When every thread takes part, a worker that wakes
//! first takes a number, then wakes the next sleeper (the chained wake-up); when some are left out,
//! the caller wakes all sleepers, since one left out would swallow a single notification. Layers
//! with a single task (or more than 2³²), and every layer when the engine has one thread, run
//! inline on the caller without waking anyone.
//!
//! Results are bitwise identical for any thread count: by the format contract each task writes its
//! own disjoint bytes with the same arithmetic whoever runs it, and the barrier orders layers.
//!
//! With a [`Device`] ([`Engine::run_with_device`]), an NPU segment runs on the caller in place of
//! its layers: when the walk reaches the segment's first layer, the previous layer's barrier has
//! closed (or it ran inline), so every worker is parked waiting for a new generation and no task
//! touches the areas; the caller then borrows them as slices (`Instance::areas`, through the
//! `&mut Instance` it holds), runs the copies and the transaction (`exec/segment.rs`), drops the
//! borrow, and continues after the segment's last layer.

use alloc::boxed::Box;
use alloc::sync::Arc;
use alloc::vec::Vec;
use core::cell::UnsafeCell;
use core::ptr;
use core::sync::atomic::{AtomicU64, Ordering};

use super::port::{Barrier, Monitor, Port};
use crate::config::{BundleArg, BundleOp};
use crate::error::Error;
use crate::exec::segment;
use crate::exec::{self, Bases, OpCall};
use crate::instance::Instance;
use crate::log::{Level, Log};
use crate::npu::Device;
use crate::profile::{self, OpTiming, SegmentTiming};
use crate::Result;

/// Most threads an engine runs (the caller included).
pub const MAX_THREADS: usize = 256;
/// Records kept in an engine's log.
pub const LOG_CAPACITY: usize = 64;

/// What the workers need to run tasks of the current layer. Valid from the generation bump that
/// publishes it until the layer's barrier.
#[derive(Clone, Copy)]
struct Job {
    ops: *const BundleOp,
    bases: Bases,
    timings: *const OpTiming,
    /// The layer's ops: `first..end` in the op table.
    first: usize,
    end: usize,
    /// Tasks of those ops together: the tickets of this layer are `0..total`.
    total: u64,
    /// Threads taking part in the layer: `0..active` (`min(threads, total)`).
    active: usize,
}

// SAFETY: addresses of data that the running `Engine::run` keeps alive and that the format contract
// lets tasks of one layer use concurrently (op tables are read-only; timing slots are atomics).
unsafe impl Send for Job {}

/// One thread's position in the layer's ticket order: op `op` holds tickets `base..base + its tasks`.
struct Cursor {
    op: usize,
    base: u64,
}

impl Cursor {
    /// The `(op, task)` pair of `ticket`, which must be `< job.total` and not below the first ticket
    /// of the cursor's op (`base`; a thread that stole a lower ticket restarts its cursor first).
    ///
    /// # Safety
    /// `job.ops` must point to the op table, valid at least up to `job.end`, whose ops `first..end`
    /// have `job.total` tasks together.
    unsafe fn resolve(&mut self, job: &Job, ticket: u64) -> Option<(usize, u32)> {
        while self.op < job.end {
            // SAFETY: `self.op < job.end`, inside the table by the caller's contract.
            let num_tasks = u64::from(unsafe { (*job.ops.add(self.op)).num_tasks });
            if ticket < self.base + num_tasks {
                return u32::try_from(ticket - self.base).ok().map(|t| (self.op, t));
            }
            self.base += num_tasks;
            self.op += 1;
        }
        None
    }
}

/// State guarded by the monitor: what a sleeping worker waits for.
struct State {
    generation: u64,
    shutdown: bool,
    active: usize,
}

/// The published layer: `generation << 16 | active`, or [`SHUTDOWN`]. Written under the monitor's
/// lock together with [`State`] (so a sleeper cannot miss it) and read without it by spinning workers.
const SHUTDOWN: u64 = u64::MAX;
/// Rounds a worker polls [`Shared::published`] before it sleeps on the monitor (tens of µs).
const SPIN: u32 = 1 << 14;

fn pack(generation: u64, active: usize) -> u64 {
    generation << 16 | active as u64
}

/// The current layer's [`Job`], written by the caller only while no worker reads it (see
/// [`Shared::job`]).
struct JobCell(UnsafeCell<Job>);

// SAFETY: accesses follow the protocol on `Shared::job`: one writer (the caller) between a layer's
// barrier and the next publication, readers only after they saw that publication take them in.
unsafe impl Sync for JobCell {}

struct Shared<P: Port> {
    port: P,
    state: P::Monitor<State>,
    /// The layer word (see [`pack`]); a worker polls it, and takes part in a new generation only when
    /// its index is below the word's `active`.
    published: AtomicU64,
    /// The layer's job. The caller writes it before publishing a generation and after the previous
    /// layer's barrier; a worker reads it only after seeing a generation that includes it, and that
    /// generation's barrier cannot open before the worker arrives, so no read overlaps a write.
    /// Workers left out of a layer never read it.
    job: JobCell,
    barrier: P::Barrier,
    /// Each thread's remaining tickets of the current layer, `lo..hi` packed as `hi << 32 | lo`
    /// (see the module docs); indexed by thread, the caller being 0.
    ranges: Box<[Range]>,
}

/// One thread's share of a layer's tickets, alone on its cache line: the owner takes `lo` upward,
/// a thief whose own share is gone takes `hi - 1` downward, both with a compare-and-swap.
#[repr(align(64))]
struct Range(AtomicU64);

impl Range {
    fn set(&self, lo: u64, hi: u64) {
        self.0.store(hi << 32 | lo, Ordering::Relaxed);
    }

    /// The next ticket from the bottom (`owner`) or the top of this share, if any is left.
    fn take(&self, owner: bool) -> Option<u64> {
        let mut cur = self.0.load(Ordering::Relaxed);
        loop {
            let (lo, hi) = (cur & 0xffff_ffff, cur >> 32);
            if lo >= hi {
                return None;
            }
            let (next, ticket) = if owner {
                (hi << 32 | (lo + 1), lo)
            } else {
                ((hi - 1) << 32 | lo, hi - 1)
            };
            // Relaxed: the ticket only has to be unique; the lock (publication) and the barrier
            // order the data.
            match self
                .0
                .compare_exchange_weak(cur, next, Ordering::Relaxed, Ordering::Relaxed)
            {
                Ok(_) => return Some(ticket),
                Err(seen) => cur = seen,
            }
        }
    }
}

/// A BSP engine with a fixed pool of worker threads, created through a [`Port`].
pub struct Engine<P: Port> {
    shared: Arc<Shared<P>>,
    workers: Vec<P::Thread>,
    threads: usize,
    log: Log<LOG_CAPACITY>,
}

impl<P: Port> Engine<P> {
    /// An engine running `threads` threads: the caller plus `threads - 1` workers started now.
    pub fn new(port: P, threads: usize) -> Result<Engine<P>> {
        let max = port.max_threads().clamp(1, MAX_THREADS);
        if threads == 0 || threads > max {
            return Err(Error::BadThreadCount {
                requested: threads,
                max,
            });
        }
        let state = State {
            generation: 0,
            shutdown: false,
            active: 0,
        };
        let shared = Arc::new(Shared {
            state: port.monitor(state),
            published: AtomicU64::new(pack(0, 0)),
            job: JobCell(UnsafeCell::new(Job {
                ops: ptr::null(),
                bases: Bases([ptr::null_mut(); 3]),
                timings: ptr::null(),
                first: 0,
                end: 0,
                total: 0,
                active: 0,
            })),
            barrier: port.barrier(threads),
            port,
            ranges: (0..threads).map(|_| Range(AtomicU64::new(0))).collect(),
        });
        let mut engine = Engine {
            shared,
            workers: Vec::with_capacity(threads - 1),
            threads,
            log: Log::new(),
        };
        for index in 1..threads {
            let shared = Arc::clone(&engine.shared);
            // On failure `engine` drops here, which stops and joins the workers already started.
            let thread = engine
                .shared
                .port
                .spawn(index, Box::new(move || worker(&shared, index)))?;
            engine.workers.push(thread);
        }
        let now = engine.shared.port.now_ns();
        engine.log.push(
            Level::Info,
            now,
            format_args!("engine started: {threads} threads"),
        );
        Ok(engine)
    }

    /// Threads running each layer (the caller included).
    pub fn threads(&self) -> usize {
        self.threads
    }

    /// The port.
    pub fn port(&self) -> &P {
        &self.shared.port
    }

    /// The engine's log (engine start, one record per run).
    pub fn log(&self) -> &Log<LOG_CAPACITY> {
        &self.log
    }

    /// The engine's log, to change its level or callback or to drain it.
    pub fn log_mut(&mut self) -> &mut Log<LOG_CAPACITY> {
        &mut self.log
    }

    /// Runs `instance`'s op table layer by layer on the pool.
    pub fn run(&mut self, instance: &mut Instance<'_>) -> Result<()> {
        self.run_inner(instance, None, None, &[])
    }

    /// As [`Engine::run`], recording each task's start and end from [`Port::now_ns`] into
    /// `timings[op]`; `timings` needs one slot per op.
    pub fn run_profiled(
        &mut self,
        instance: &mut Instance<'_>,
        timings: &[OpTiming],
    ) -> Result<()> {
        profile::check_table(instance.bundle().view(), timings)?;
        self.run_inner(instance, None, Some(timings), &[])
    }

    /// As [`Engine::run`], except that with a `device` each NPU segment runs there, on the calling
    /// thread, instead of its layers: copy-ins into the fused `in` staging buffer, the transaction,
    /// copy-outs from `out`, then the layer after the segment. Without a device this is exactly
    /// [`Engine::run`] (the fallback ops run, bitwise identical). Each segment run adds an `Info`
    /// record to the log (a failed one an `Error` record); a device error stops the run there.
    pub fn run_with_device(
        &mut self,
        instance: &mut Instance<'_>,
        device: Option<&mut dyn Device>,
    ) -> Result<()> {
        self.run_inner(instance, device, None, &[])
    }

    /// As [`Engine::run_with_device`], recording tasks into `timings[op]` (one slot per op) and
    /// segment runs (wall time from [`Port::now_ns`], the device's cycles) into
    /// `segments[segment]` (one slot per NPU segment).
    pub fn run_with_device_profiled(
        &mut self,
        instance: &mut Instance<'_>,
        device: Option<&mut dyn Device>,
        timings: &[OpTiming],
        segments: &[SegmentTiming],
    ) -> Result<()> {
        profile::check_table(instance.bundle().view(), timings)?;
        profile::check_segment_table(instance.bundle().view(), segments)?;
        self.run_inner(instance, device, Some(timings), segments)
    }

    fn run_inner(
        &mut self,
        instance: &mut Instance<'_>,
        mut device: Option<&mut dyn Device>,
        timings: Option<&[OpTiming]>,
        segments: &[SegmentTiming],
    ) -> Result<()> {
        let view = *instance.bundle().view();
        exec::check_arg_capacity(&view)?;
        let bases = instance.bases();
        let job = Job {
            ops: view.ops().as_ptr(),
            bases,
            timings: timings.map_or(ptr::null(), <[OpTiming]>::as_ptr),
            first: 0,
            end: 0,
            total: 0,
            active: 0,
        };
        let shared = &*self.shared;
        let start = shared.port.now_ns();
        let clock = || shared.port.now_ns();
        let profiling = timings.map(|t| (&clock as &dyn Fn() -> u64, t));
        let mut parallel_layers = 0usize;
        let mut npu_runs = 0usize;
        let (mut index, mut next_segment) = (0usize, 0usize);
        while let Some(layer) = view.layers().get(index) {
            if let Some(dev) = device.as_deref_mut() {
                if let Some(seg) = segment::starting_at(&view, &mut next_segment, index) {
                    let seg_start = shared.port.now_ns();
                    // No task runs now (see the module docs): the previous layer is closed.
                    let result = segment::run(&seg, instance.areas(), dev);
                    let seg_end = shared.port.now_ns();
                    let layers = seg.layers();
                    let cycles = match result {
                        Ok(cycles) => cycles,
                        Err(e) => {
                            self.log.push(
                                Level::Error,
                                seg_end,
                                format_args!("npu {} on {} failed: {e}", seg.name, dev.name()),
                            );
                            return Err(e);
                        }
                    };
                    if let Some(slot) = segments.get(seg.index).filter(|_| timings.is_some()) {
                        let c = [cycles.instruction, cycles.data, cycles.compute];
                        slot.record(seg_start, seg_end, c);
                    }
                    self.log.push(
                        Level::Info,
                        seg_end,
                        format_args!(
                            "npu {} on {}: layers {}..{}, {} cycles (i {} d {} c {}), {} ns",
                            seg.name,
                            dev.name(),
                            layers.start,
                            layers.end,
                            cycles.total(),
                            cycles.instruction,
                            cycles.data,
                            cycles.compute,
                            seg_end.saturating_sub(seg_start)
                        ),
                    );
                    npu_runs += 1;
                    index = layers.end;
                    continue;
                }
            }
            index += 1;
            let first = layer.first_op as usize;
            let ops = first..first + layer.num_ops as usize;
            let tasks: u64 = view.ops()[ops.clone()]
                .iter()
                .map(|op| u64::from(op.num_tasks))
                .sum();
            if self.threads == 1 || tasks <= 1 || tasks > u64::from(u32::MAX) {
                // SAFETY: validated view, this instance's areas, `&mut instance` held for the whole
                // run (no borrow of the areas from a segment run is live), argument capacity
                // checked above.
                unsafe { exec::run_in_order(&view, ops, &bases, profiling) };
                continue;
            }
            parallel_layers += 1;
            // `tasks` fits in u32 here; threads beyond the task count would only meet at the barrier.
            let active = self.threads.min(tasks as usize);
            let job = Job {
                first: ops.start,
                end: ops.end,
                total: tasks,
                active,
                ..job
            };
            // SAFETY: every thread that read the previous job has passed its barrier, and the others
            // read a job only after the publication below takes them in (see `Shared::job`).
            unsafe { *shared.job.0.get() = job };
            // Nobody takes tickets now (same reason).
            deal(&shared.ranges[..active], tasks);
            for range in &shared.ranges[active..] {
                range.set(0, 0);
            }
            shared.state.lock(|s| {
                s.generation += 1;
                s.active = active;
                shared
                    .published
                    .store(pack(s.generation, active), Ordering::Release);
            });
            if active == self.threads {
                // Each worker that wakes wakes the next one (chained, see the module docs).
                shared.state.notify_one();
            } else {
                // A sleeper left out of the layer would swallow a single notification.
                shared.state.notify_all();
            }
            // SAFETY: `job` is valid until the barrier below: the view and instance are borrowed for
            // this whole call.
            unsafe { drain(shared, &job, 0, false) };
            shared.barrier.wait(active);
        }
        let end = shared.port.now_ns();
        self.log.push(
            Level::Info,
            end,
            format_args!(
                "run {}: {} layers ({} parallel), {} ops, {} threads{}, {} ns",
                view.model_name(),
                view.layers().len(),
                parallel_layers,
                view.ops().len(),
                self.threads,
                NpuRuns(npu_runs),
                end.saturating_sub(start)
            ),
        );
        Ok(())
    }
}

/// `", N npu"` in the run record when segments ran on a device, nothing otherwise.
struct NpuRuns(usize);

impl core::fmt::Display for NpuRuns {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self.0 {
            0 => Ok(()),
            n => write!(f, ", {n} npu"),
        }
    }
}

impl<P: Port> Drop for Engine<P> {
    fn drop(&mut self) {
        self.shared.state.lock(|s| {
            s.shutdown = true;
            s.generation += 1;
            self.shared.published.store(SHUTDOWN, Ordering::Release);
        });
        self.shared.state.notify_all();
        for thread in self.workers.drain(..) {
            self.shared.port.join(thread);
        }
    }
}

impl<P: Port> core::fmt::Debug for Engine<P> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("Engine")
            .field("threads", &self.threads)
            .finish()
    }
}

/// Body of worker threads: wait for a generation that includes this worker, drain the queue, meet
/// at the barrier.
fn worker<P: Port>(shared: &Shared<P>, me: usize) {
    let mut seen = 0u64;
    while let Some((generation, active)) = next_layer(shared, me, seen) {
        seen = generation;
        // SAFETY: the caller wrote the job before publishing `generation`, which takes this worker in,
        // and does not write it again before the barrier below (see `Shared::job`).
        let job = unsafe { *shared.job.0.get() };
        // SAFETY: that job describes the current layer and stays valid until the barrier.
        unsafe { drain(shared, &job, me, active == shared.ranges.len()) };
        shared.barrier.wait(active);
    }
}

/// The next layer worker `me` takes part in, as `(generation, active)`, after `seen`; `None` when
/// the engine shuts down. Polls the published word for [`SPIN`] rounds (no lock: a layer wakes a
/// spinning worker with one cache-line transfer), then sleeps on the monitor.
fn next_layer<P: Port>(shared: &Shared<P>, me: usize, seen: u64) -> Option<(u64, usize)> {
    let takes_part = |generation: u64, active: usize| generation != seen && me < active;
    for round in 0..SPIN {
        let word = shared.published.load(Ordering::Acquire);
        if word == SHUTDOWN {
            return None;
        }
        let (generation, active) = (word >> 16, (word & 0xffff) as usize);
        if takes_part(generation, active) {
            return Some((generation, active));
        }
        shared.port.relax(round);
    }
    let (shutdown, generation, active) = shared.state.wait_until(
        |s| s.shutdown || takes_part(s.generation, s.active),
        |s| (s.shutdown, s.generation, s.active),
    );
    // The lock ordered the caller's job write (made before it published) before this read.
    (!shutdown).then_some((generation, active))
}

/// Takes and runs tasks until the layer's tickets are gone; wakes the next worker after the first
/// ticket when `wake_next` is set.
///
/// # Safety
/// `job` must describe the current layer and be valid (see [`Job`]).
unsafe fn drain<P: Port>(shared: &Shared<P>, job: &Job, me: usize, mut wake_next: bool) {
    let mut current: Option<(usize, OpCall)> = None;
    let mut cursor = Cursor {
        op: job.first,
        base: 0,
    };
    let ranges = shared.ranges.get(..job.active).unwrap_or(&shared.ranges);
    loop {
        let ticket = take(ranges, me);
        if wake_next {
            shared.state.notify_one();
            wake_next = false;
        }
        let Some(ticket) = ticket.filter(|&t| t < job.total) else {
            return;
        };
        if ticket < cursor.base {
            cursor = Cursor {
                op: job.first,
                base: 0,
            };
        }
        // SAFETY: `job` describes the op table's range `first..end` with `total` tasks; the cursor
        // was restarted above if this ticket lies below it.
        let Some((index, task)) = (unsafe { cursor.resolve(job, ticket) }) else {
            return;
        };
        if current.as_ref().map(|c| c.0) != Some(index) {
            // SAFETY: `index` is inside the validated op table.
            let op = unsafe { &*job.ops.add(index) };
            // SAFETY: validated op and argument table; `job.bases` are the instance's areas.
            current = unsafe { OpCall::new(op, op_args(op), &job.bases) }.map(|call| (index, call));
        }
        let Some((_, call)) = &current else {
            continue;
        };
        if job.timings.is_null() {
            // SAFETY: tasks of one layer touch disjoint bytes (format contract); areas are live.
            unsafe { call.call(task) };
        } else {
            let start = shared.port.now_ns();
            // SAFETY: as above.
            unsafe { call.call(task) };
            let end = shared.port.now_ns();
            // SAFETY: the timing table has a slot per op (checked before the run) and lives for it.
            unsafe { (*job.timings.add(index)).record(start, end) };
        }
    }
}

/// Deals tickets `0..total` out in contiguous shares, thread `t` of `T` getting `total·t/T..total·(t+1)/T`.
fn deal(ranges: &[Range], total: u64) {
    let n = ranges.len() as u64;
    for (t, range) in (0u64..).zip(ranges) {
        range.set(total * t / n, total * (t + 1) / n);
    }
}

/// The next ticket for thread `me`: from the bottom of its own share, else from the top of the
/// next thread's share that has any left.
fn take(ranges: &[Range], me: usize) -> Option<u64> {
    let n = ranges.len();
    ranges
        .get(me)?
        .take(true)
        .or_else(|| (1..n).find_map(|d| ranges.get((me + d) % n).and_then(|r| r.take(false))))
}

/// The argument table of a validated op.
///
/// # Safety
/// `op` must come from a validated config.
unsafe fn op_args(op: &BundleOp) -> &[BundleArg] {
    if op.num_args == 0 {
        return &[];
    }
    // SAFETY: validation checked pointer, alignment and count.
    unsafe { core::slice::from_raw_parts(op.args, op.num_args as usize) }
}

#[cfg(test)]
mod tests {
    use super::{deal, take, Range};
    use core::sync::atomic::AtomicU64;
    use std::vec::Vec;

    /// Threads taking from their own share and stealing from the others' get every ticket of
    /// `0..total` exactly once, for totals smaller and larger than the thread count.
    #[test]
    fn shares_hand_out_each_ticket_once() {
        for (threads, total) in [(1, 5), (2, 1), (3, 2), (4, 1000), (8, 100_003)] {
            let ranges: Vec<Range> = (0..threads).map(|_| Range(AtomicU64::new(0))).collect();
            deal(&ranges, total);
            let mut got: Vec<u64> = std::thread::scope(|s| {
                let handles: Vec<_> = (0..threads)
                    .map(|me| {
                        let ranges = &ranges;
                        s.spawn(move || {
                            core::iter::from_fn(|| take(ranges, me)).collect::<Vec<_>>()
                        })
                    })
                    .collect();
                handles
                    .into_iter()
                    .flat_map(|h| h.join().unwrap())
                    .collect()
            });
            got.sort_unstable();
            assert_eq!(got, (0..total).collect::<Vec<_>>(), "{threads} threads");
        }
    }
}
