//! Per-op profiling: [`OpTiming`] slots filled from task start/end timestamps, and [`ProfileTable`],
//! which prints them next to the op names.
//!
//! Timestamps come from a clock the caller supplies (for the engine: `engine::Port::now_ns`).
//! Slots are atomics, so tasks of one op running on several workers record into the same slot without
//! a lock: `tasks` and `busy` (summed task time) add up, `first_start`/`last_end` keep the op's span.
//! The table is caller storage (`[OpTiming]` with one slot per op), so profiling never allocates.

use core::fmt;
use core::sync::atomic::{AtomicU64, Ordering::Relaxed};

use crate::bundle::Bundle;
use crate::config::ConfigView;
use crate::error::{Error, Name};
use crate::Result;

/// Timing of one op, accumulated over its tasks (and over runs until [`OpTiming::reset`]).
#[derive(Debug)]
pub struct OpTiming {
    first_start: AtomicU64,
    last_end: AtomicU64,
    busy: AtomicU64,
    tasks: AtomicU64,
}

impl OpTiming {
    /// An empty slot.
    pub const fn new() -> OpTiming {
        OpTiming {
            first_start: AtomicU64::new(u64::MAX),
            last_end: AtomicU64::new(0),
            busy: AtomicU64::new(0),
            tasks: AtomicU64::new(0),
        }
    }

    /// `n` empty slots, one per op.
    #[cfg(feature = "alloc")]
    pub fn table(n: usize) -> alloc::vec::Vec<OpTiming> {
        (0..n).map(|_| OpTiming::new()).collect()
    }

    /// Empties the slot.
    pub fn reset(&self) {
        self.first_start.store(u64::MAX, Relaxed);
        self.last_end.store(0, Relaxed);
        self.busy.store(0, Relaxed);
        self.tasks.store(0, Relaxed);
    }

    /// Records one task that ran from `start` to `end`.
    pub fn record(&self, start: u64, end: u64) {
        self.first_start.fetch_min(start, Relaxed);
        self.last_end.fetch_max(end, Relaxed);
        self.busy.fetch_add(end.saturating_sub(start), Relaxed);
        self.tasks.fetch_add(1, Relaxed);
    }

    /// Tasks recorded.
    pub fn tasks(&self) -> u64 {
        self.tasks.load(Relaxed)
    }

    /// Sum of the tasks' durations.
    pub fn busy(&self) -> u64 {
        self.busy.load(Relaxed)
    }

    /// Earliest task start, `None` if nothing was recorded.
    pub fn first_start(&self) -> Option<u64> {
        (self.tasks() > 0).then(|| self.first_start.load(Relaxed))
    }

    /// Latest task end, `None` if nothing was recorded.
    pub fn last_end(&self) -> Option<u64> {
        (self.tasks() > 0).then(|| self.last_end.load(Relaxed))
    }

    /// From the first start to the last end (wall time of the op in one run), 0 if nothing recorded.
    pub fn span(&self) -> u64 {
        match (self.first_start(), self.last_end()) {
            (Some(s), Some(e)) => e.saturating_sub(s),
            _ => 0,
        }
    }
}

impl Default for OpTiming {
    fn default() -> Self {
        OpTiming::new()
    }
}

/// Empties every slot of a table.
pub fn reset_all(timings: &[OpTiming]) {
    timings.iter().for_each(OpTiming::reset);
}

/// Fails unless `timings` has a slot per op.
pub(crate) fn check_table(view: &ConfigView<'_>, timings: &[OpTiming]) -> Result<()> {
    let needed = view.ops().len();
    if timings.len() < needed {
        return Err(Error::BufferTooSmall {
            what: Name::new("profile table (slots)"),
            needed: needed as u64,
            got: timings.len() as u64,
        });
    }
    Ok(())
}

/// A printable per-op profile: one row per op with its layer, tasks, busy and span time.
///
/// Times are printed in the clock's unit divided by `divisor` (e.g. 1000 to show µs from a ns clock).
#[derive(Clone, Copy)]
pub struct ProfileTable<'t, 'b> {
    bundle: &'t Bundle<'b>,
    timings: &'t [OpTiming],
    divisor: u64,
}

impl<'t, 'b> ProfileTable<'t, 'b> {
    /// A table for `bundle`'s ops; `timings` needs one slot per op.
    pub fn new(bundle: &'t Bundle<'b>, timings: &'t [OpTiming], divisor: u64) -> Result<Self> {
        check_table(bundle.view(), timings)?;
        Ok(ProfileTable {
            bundle,
            timings,
            divisor: divisor.max(1),
        })
    }

    /// Sum of the ops' spans (the model's time when layers run one after another).
    pub fn total_span(&self) -> u64 {
        self.timings.iter().map(OpTiming::span).sum()
    }

    /// Index of the op with the largest busy time.
    pub fn busiest_op(&self) -> Option<usize> {
        let n = self.bundle.view().ops().len();
        (0..n).max_by_key(|&i| self.timings[i].busy())
    }
}

impl fmt::Display for ProfileTable<'_, '_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let view = self.bundle.view();
        let d = self.divisor;
        writeln!(
            f,
            "{:<40} {:>5} {:>6} {:>12} {:>12}",
            "op", "layer", "tasks", "busy", "span"
        )?;
        for (i, op) in view.ops().iter().enumerate() {
            let t = &self.timings[i];
            writeln!(
                f,
                "{:<40} {:>5} {:>6} {:>12} {:>12}",
                view.op_name(i),
                op.layer,
                t.tasks(),
                t.busy() / d,
                t.span() / d
            )?;
        }
        write!(
            f,
            "{:<40} {:>5} {:>6} {:>12} {:>12}",
            "total",
            "",
            "",
            "",
            self.total_span() / d
        )
    }
}
