//! The worker side of the BSP engine (`bsp.rs`): a worker waits for a layer that takes it in (polling the
//! published word, then sleeping on the monitor), reads the layer's job, takes tickets from the shares
//! (`shares.rs`) and runs their tasks, and meets the others at the layer's barrier. The caller runs the same
//! `drain` for its own share.

use core::sync::atomic::Ordering;

use super::port::{Barrier, Monitor, Port};
use super::shared::{Job, Shared, SHUTDOWN, SPIN};
use super::shares::take;
use crate::config::{BundleArg, BundleOp};
use crate::exec::OpCall;

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
    /// have `job.total` tasks together on `job.threads` threads (`BundleOp::tasks_on`).
    unsafe fn resolve(&mut self, job: &Job, ticket: u64) -> Option<(usize, u32)> {
        while self.op < job.end {
            // SAFETY: `self.op < job.end`, inside the table by the caller's contract.
            let num_tasks = u64::from(unsafe { (*job.ops.add(self.op)).tasks_on(job.threads) });
            if ticket < self.base + num_tasks {
                return u32::try_from(ticket - self.base).ok().map(|t| (self.op, t));
            }
            self.base += num_tasks;
            self.op += 1;
        }
        None
    }
}

/// Body of worker threads: wait for a generation that includes this worker, drain the queue, meet
/// at the barrier.
pub(super) fn worker<P: Port>(shared: &Shared<P>, me: usize) {
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
    // The layer a word (not `SHUTDOWN`) publishes, when it is new and takes this worker in.
    let new_layer = |word: u64| {
        let (generation, active) = (word >> 16, (word & 0xffff) as usize);
        (generation != seen && me < active).then_some((generation, active))
    };
    for round in 0..SPIN {
        let word = shared.published.load(Ordering::Acquire);
        if word == SHUTDOWN {
            return None;
        }
        if let Some(layer) = new_layer(word) {
            return Some(layer);
        }
        shared.port.relax(round);
    }
    let word = shared
        .state
        .wait_until(|&w| w == SHUTDOWN || new_layer(w).is_some(), |w| *w);
    // The lock ordered the caller's job write (made before it published) before this read.
    if word == SHUTDOWN {
        None
    } else {
        new_layer(word)
    }
}

/// Takes and runs tasks until the layer's tickets are gone; wakes the next worker after the first
/// ticket when `wake_next` is set.
///
/// # Safety
/// `job` must describe the current layer and be valid (see [`Job`]).
pub(super) unsafe fn drain<P: Port>(shared: &Shared<P>, job: &Job, me: usize, mut wake_next: bool) {
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
