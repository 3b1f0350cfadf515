//! Calling op tasks: building an op's argument array from area bases and `BundleArg` offsets, and
//! running a range of the op table in order on the calling thread.
//!
//! Both `Instance::run_ops` and the BSP engine go through [`OpCall`], so they pass kernels exactly the
//! same pointers. The argument array lives on the stack with capacity [`MAX_OP_ARGS`]; callers check
//! [`check_arg_capacity`] once before a run, so the run path neither allocates nor fails midway.
//! `segment.rs` (with `alloc`) runs an NPU segment on a device in place of its layers, for both.

use core::ops::Range;

use crate::config::{Area, BundleArg, BundleOp, BundleOpFn, ConfigView};
use crate::error::{Error, Name};
use crate::profile::OpTiming;
use crate::{Result, MAX_OP_ARGS};

#[cfg(feature = "alloc")]
pub(crate) mod segment;

/// Base addresses of the three areas of one instance, indexed by [`Area`].
#[derive(Clone, Copy, Debug)]
pub(crate) struct Bases(pub(crate) [*mut u8; 3]);

// SAFETY: the bases are plain addresses; the code that dereferences them (kernels, during a run that
// holds `&mut Instance`) is what must be, and is, synchronised.
unsafe impl Send for Bases {}

/// A profiling clock and the per-op timing table it fills.
pub(crate) type Profiling<'p> = Option<(&'p dyn Fn() -> u64, &'p [OpTiming])>;

/// Fails with [`Error::TooManyArgs`] if some op has more arguments than [`MAX_OP_ARGS`].
pub(crate) fn check_arg_capacity(view: &ConfigView<'_>) -> Result<()> {
    match view.widest_op() {
        Some((op, n)) if n > MAX_OP_ARGS => Err(Error::TooManyArgs {
            op: Name::new(view.op_name(op)),
            num_args: n as u64,
            max: MAX_OP_ARGS as u64,
        }),
        _ => Ok(()),
    }
}

/// One op, ready to run any of its tasks.
pub(crate) struct OpCall {
    func: BundleOpFn,
    args: [*mut u8; MAX_OP_ARGS],
}

impl OpCall {
    /// Resolves `op`'s arguments against `bases`; `None` if it has no kernel or too many arguments
    /// (both excluded by validation and [`check_arg_capacity`]).
    ///
    /// # Safety
    /// `op` and `args` must come from a validated [`ConfigView`] and `bases` must be the areas of an
    /// instance of that bundle, each valid for its area size.
    pub(crate) unsafe fn new(op: &BundleOp, args: &[BundleArg], bases: &Bases) -> Option<OpCall> {
        let func = op.func?;
        if args.len() > MAX_OP_ARGS {
            return None;
        }
        let mut call = OpCall {
            func,
            args: [core::ptr::null_mut(); MAX_OP_ARGS],
        };
        for (slot, arg) in call.args.iter_mut().zip(args) {
            let area = Area::from_code(arg.area)?;
            // SAFETY: validation checked offset + size <= area size, so the result stays inside (or
            // one past the end of) the area's allocation.
            *slot = unsafe { bases.0[area as usize].add(arg.offset as usize) };
        }
        Some(call)
    }

    /// Runs task `task`.
    ///
    /// # Safety
    /// The areas behind the bases must be valid for the call and not accessed concurrently except by
    /// other tasks of the same BSP layer (which, by the format contract, touch disjoint bytes).
    pub(crate) unsafe fn call(&self, task: u32) {
        // SAFETY: forwarded; `args` holds the op's arguments, as the kernel expects.
        unsafe { (self.func)(self.args.as_ptr(), u64::from(task)) }
    }
}

/// Runs every task of every op in `ops` that an engine of `threads` threads runs (`BundleOp::tasks_on`), in table
/// order, on this thread.
///
/// # Safety
/// As for [`OpCall::new`] and [`OpCall::call`], with no concurrent access to the areas at all; the
/// caller has passed [`check_arg_capacity`].
pub(crate) unsafe fn run_in_order(
    view: &ConfigView<'_>,
    ops: Range<usize>,
    bases: &Bases,
    profiling: Profiling<'_>,
    threads: usize,
) {
    for i in ops {
        let op = &view.ops()[i];
        // A pair's other schedule (`BundleOp::tasks_on`).
        if op.tasks_on(threads) == 0 {
            continue;
        }
        // SAFETY: forwarded from the caller.
        let Some(call) = (unsafe { OpCall::new(op, view.op_args(i), bases) }) else {
            continue;
        };
        for task in 0..op.num_tasks {
            match profiling {
                Some((clock, timings)) => {
                    let start = clock();
                    // SAFETY: forwarded from the caller.
                    unsafe { call.call(task) };
                    if let Some(slot) = timings.get(i) {
                        slot.record(start, clock());
                    }
                }
                // SAFETY: forwarded from the caller.
                None => unsafe { call.call(task) },
            }
        }
    }
}
