//! Per-op profiling: [`OpTiming`] slots filled from task start/end timestamps, [`SegmentTiming`]
//! slots filled per NPU segment run (wall time and the device's instruction/data/compute cycles),
//! and [`ProfileTable`], which prints them next to the op and segment names.
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

/// Timing of one NPU segment, accumulated over its runs on a device (until
/// [`SegmentTiming::reset`]): runs, wall time, and the cycles the device reported.
#[derive(Debug)]
pub struct SegmentTiming {
    runs: AtomicU64,
    wall: AtomicU64,
    instruction: AtomicU64,
    data: AtomicU64,
    compute: AtomicU64,
}

impl SegmentTiming {
    /// An empty slot.
    pub const fn new() -> SegmentTiming {
        SegmentTiming {
            runs: AtomicU64::new(0),
            wall: AtomicU64::new(0),
            instruction: AtomicU64::new(0),
            data: AtomicU64::new(0),
            compute: AtomicU64::new(0),
        }
    }

    /// `n` empty slots, one per NPU segment.
    #[cfg(feature = "alloc")]
    pub fn table(n: usize) -> alloc::vec::Vec<SegmentTiming> {
        (0..n).map(|_| SegmentTiming::new()).collect()
    }

    /// Empties the slot.
    pub fn reset(&self) {
        for v in [
            &self.runs,
            &self.wall,
            &self.instruction,
            &self.data,
            &self.compute,
        ] {
            v.store(0, Relaxed);
        }
    }

    /// Records one run from `start` to `end` and its cycles `[instruction, data, compute]`.
    pub fn record(&self, start: u64, end: u64, cycles: [u64; 3]) {
        self.runs.fetch_add(1, Relaxed);
        self.wall.fetch_add(end.saturating_sub(start), Relaxed);
        self.instruction.fetch_add(cycles[0], Relaxed);
        self.data.fetch_add(cycles[1], Relaxed);
        self.compute.fetch_add(cycles[2], Relaxed);
    }

    /// Runs recorded.
    pub fn runs(&self) -> u64 {
        self.runs.load(Relaxed)
    }

    /// Sum of the runs' wall times (copies and the device run).
    pub fn wall(&self) -> u64 {
        self.wall.load(Relaxed)
    }

    /// Summed instruction-transfer cycles.
    pub fn instruction(&self) -> u64 {
        self.instruction.load(Relaxed)
    }

    /// Summed data-transfer cycles.
    pub fn data(&self) -> u64 {
        self.data.load(Relaxed)
    }

    /// Summed compute cycles.
    pub fn compute(&self) -> u64 {
        self.compute.load(Relaxed)
    }

    /// `instruction + max(data, compute)` of the sums (saturating), as `NpuCycles::total`.
    pub fn total_cycles(&self) -> u64 {
        self.instruction()
            .saturating_add(core::cmp::max(self.data(), self.compute()))
    }
}

impl Default for SegmentTiming {
    fn default() -> Self {
        SegmentTiming::new()
    }
}

/// Fails unless `segments` has a slot per NPU segment.
pub(crate) fn check_segment_table(view: &ConfigView<'_>, segments: &[SegmentTiming]) -> Result<()> {
    let needed = view.num_npu_segments();
    if segments.len() < needed {
        return Err(Error::BufferTooSmall {
            what: Name::new("profile table (segment slots)"),
            needed: needed as u64,
            got: segments.len() as u64,
        });
    }
    Ok(())
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

/// A printable profile: one row per op with its layer, tasks, busy and span time, then (with
/// [`ProfileTable::with_segments`]) one row per NPU segment with its layers, runs, wall time and
/// cycles.
///
/// Times are printed in the clock's unit divided by `divisor` (e.g. 1000 to show µs from a ns clock).
#[derive(Clone, Copy)]
pub struct ProfileTable<'t, 'b> {
    bundle: &'t Bundle<'b>,
    timings: &'t [OpTiming],
    segments: &'t [SegmentTiming],
    divisor: u64,
}

impl<'t, 'b> ProfileTable<'t, 'b> {
    /// A table for `bundle`'s ops; `timings` needs one slot per op.
    pub fn new(bundle: &'t Bundle<'b>, timings: &'t [OpTiming], divisor: u64) -> Result<Self> {
        check_table(bundle.view(), timings)?;
        Ok(ProfileTable {
            bundle,
            timings,
            segments: &[],
            divisor: divisor.max(1),
        })
    }

    /// The same table with NPU segment rows; `segments` needs one slot per segment.
    pub fn with_segments(self, segments: &'t [SegmentTiming]) -> Result<Self> {
        check_segment_table(self.bundle.view(), segments)?;
        Ok(ProfileTable { segments, ..self })
    }

    /// Sum of the ops' spans and the segments' wall times (the model's time when layers run one
    /// after another).
    pub fn total_span(&self) -> u64 {
        let ops = self.timings.iter().map(OpTiming::span);
        let segments = self.segments.iter().map(SegmentTiming::wall);
        ops.chain(segments).fold(0, u64::saturating_add)
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
        if !self.segments.is_empty() {
            writeln!(
                f,
                "{:<40} {:>5} {:>6} {:>12} {:>12} {:>12} {:>12} {:>12}",
                "npu segment",
                "layer",
                "runs",
                "wall",
                "instr cyc",
                "data cyc",
                "compute cyc",
                "cycles"
            )?;
        }
        for (seg, t) in view.npu_segments().zip(self.segments) {
            writeln!(
                f,
                "{:<40} {:>5} {:>6} {:>12} {:>12} {:>12} {:>12} {:>12}",
                seg.name,
                seg.first_layer,
                t.runs(),
                t.wall() / d,
                t.instruction(),
                t.data(),
                t.compute(),
                t.total_cycles()
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
