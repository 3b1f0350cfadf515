//! What the BSP engine's caller and its workers share: the current layer's `Job`, the cell that publishes it,
//! the `Shared` state (generation, barrier, port) and the shutdown and spin constants.

use super::port::Port;
use super::shares::Range;
use crate::config::BundleOp;
use crate::exec::Bases;
use crate::profile::OpTiming;
use alloc::boxed::Box;
use core::cell::UnsafeCell;
use core::sync::atomic::AtomicU64;

/// What the workers need to run tasks of the current layer. Valid from the generation bump that
/// publishes it until the layer's barrier.
#[derive(Clone, Copy)]
pub(super) struct Job {
    pub(super) ops: *const BundleOp,
    pub(super) bases: Bases,
    pub(super) timings: *const OpTiming,
    /// The layer's ops: `first..end` in the op table.
    pub(super) first: usize,
    pub(super) end: usize,
    /// Tasks of those ops together: the tickets of this layer are `0..total`.
    pub(super) total: u64,
    /// Threads taking part in the layer: `0..active` (`min(threads, total)`).
    pub(super) active: usize,
    /// The engine's threads, which choose an interleaved pair's schedule (`BundleOp::tasks_on`).
    pub(super) threads: usize,
}

/// The published layer word once the engine shuts down; otherwise it is `generation << 16 | active`
/// ([`pack`]).
pub(super) const SHUTDOWN: u64 = u64::MAX;

/// Rounds a worker polls [`Shared::published`] before it sleeps on the monitor (tens of µs).
pub(super) const SPIN: u32 = 1 << 14;

/// The layer word of `generation`, taking threads `0..active` in.
pub(super) fn pack(generation: u64, active: usize) -> u64 {
    generation << 16 | active as u64
}

/// The current layer's [`Job`], written by the caller only while no worker reads it (see
/// [`Shared::job`]).
pub(super) struct JobCell(pub(super) UnsafeCell<Job>);

/// What the caller and the workers share.
pub(super) struct Shared<P: Port> {
    pub(super) port: P,
    /// The layer word, for sleepers: changed under its lock (so a sleeper cannot miss it), and
    /// `published` with it.
    pub(super) state: P::Monitor<u64>,
    /// The layer word (see [`pack`]), for spinning workers, which read it without the lock; a worker
    /// takes part in a new generation only when its index is below the word's `active`.
    pub(super) published: AtomicU64,
    /// The layer's job. The caller writes it before publishing a generation and after the previous
    /// layer's barrier; a worker reads it only after seeing a generation that includes it, and that
    /// generation's barrier cannot open before the worker arrives, so no read overlaps a write.
    /// Workers left out of a layer never read it.
    pub(super) job: JobCell,
    pub(super) barrier: P::Barrier,
    /// Each thread's remaining tickets of the current layer, `lo..hi` packed as `hi << 32 | lo`
    /// (see the module docs); indexed by thread, the caller being 0.
    pub(super) ranges: Box<[Range]>,
}

// SAFETY: addresses of data that the running `Engine::run` keeps alive and that the format contract
// lets tasks of one layer use concurrently (op tables are read-only; timing slots are atomics).
unsafe impl Send for Job {}

// SAFETY: accesses follow the protocol on `Shared::job`: one writer (the caller) between a layer's
// barrier and the next publication, readers only after they saw that publication take them in.
unsafe impl Sync for JobCell {}
