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
//! monitor only after [`SPIN`](super::shared::SPIN) rounds. Workers `active..threads` sit the layer out: they neither read
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
use super::shared::{pack, Job, JobCell, Shared, SHUTDOWN};
use super::shares::{deal, Range};
use super::worker::{drain, worker};
use crate::error::Error;
use crate::exec::segment;
use crate::exec::{self, Bases};
use crate::instance::Instance;
use crate::log::{Level, Log};
use crate::npu::Device;
use crate::profile::{self, OpTiming, SegmentTiming};
use crate::Result;

/// Most threads an engine runs (the caller included).
pub const MAX_THREADS: usize = 256;
/// Records kept in an engine's log.
pub const LOG_CAPACITY: usize = 64;

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
        let shared = Arc::new(Shared {
            state: port.monitor(pack(0, 0)),
            published: AtomicU64::new(pack(0, 0)),
            job: JobCell(UnsafeCell::new(Job {
                ops: ptr::null(),
                bases: Bases([ptr::null_mut(); 3]),
                timings: ptr::null(),
                first: 0,
                end: 0,
                total: 0,
                active: 0,
                threads,
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
            threads: self.threads,
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
                .map(|op| u64::from(op.tasks_on(self.threads)))
                .sum();
            if self.threads == 1 || tasks <= 1 || tasks > u64::from(u32::MAX) {
                // SAFETY: validated view, this instance's areas, `&mut instance` held for the whole
                // run (no borrow of the areas from a segment run is live), argument capacity
                // checked above.
                unsafe { exec::run_in_order(&view, ops, &bases, profiling, self.threads) };
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
            // (Threads `active..` take no tickets: their shares are left as they are.)
            deal(&shared.ranges[..active], tasks);
            shared.state.lock(|word| {
                *word = pack((*word >> 16) + 1, active);
                shared.published.store(*word, Ordering::Release);
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
        self.shared.state.lock(|word| {
            *word = SHUTDOWN;
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
