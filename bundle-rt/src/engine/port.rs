//! The port layer: what the engine needs from an operating system, as a trait an RTOS can implement.
//!
//! Four services, mapped one-to-one onto common RTOS primitives:
//!
//! | engine need            | trait item                       | POSIX / Zephyr / FreeRTOS analogue            |
//! |------------------------|----------------------------------|-----------------------------------------------|
//! | worker threads         | [`Port::spawn`], [`Port::join`]  | `pthread_create/join`, `k_thread_create/join` |
//! | mutex + cond. variable | [`Monitor`] (`lock`, `wait_until`, `notify_*`) | `pthread_mutex` + `pthread_cond`, `k_mutex` + `k_condvar` |
//! | layer barrier          | [`Barrier::wait`]                | mutex + counter + condvar (parties per round) |
//! | profiling clock        | [`Port::now_ns`]                 | `clock_gettime`, `k_cycle_get_64`             |
//!
//! The mutex and its condition variable come as one [`Monitor`] object guarding a value, with
//! closure-scoped locking: an implementation cannot be misused by forgetting an unlock, and a
//! condition wait always re-checks its predicate (spurious wake-ups are harmless). Monitors, barriers
//! and threads are created once, when the engine is made; the run path only locks, waits and notifies.

use alloc::boxed::Box;

use crate::Result;

/// The body of a worker thread, given to [`Port::spawn`]; it returns when the engine shuts down.
pub type WorkerBody = Box<dyn FnOnce() + Send + 'static>;

/// A mutex guarding a `T`, with its condition variable.
pub trait Monitor<T>: Send + Sync {
    /// Locks, runs `f` on the value, unlocks.
    fn lock<R>(&self, f: impl FnOnce(&mut T) -> R) -> R;

    /// Locks; while `ready` is false, waits on the condition variable (releasing the lock while
    /// asleep); then runs `f` on the value with the lock held and unlocks.
    fn wait_until<R>(&self, ready: impl FnMut(&T) -> bool, f: impl FnOnce(&mut T) -> R) -> R;

    /// Wakes one thread waiting in [`Monitor::wait_until`], if any.
    fn notify_one(&self);

    /// Wakes every thread waiting in [`Monitor::wait_until`].
    fn notify_all(&self);
}

/// A reusable barrier whose rounds each have their own number of parties, at most the number it was
/// made for.
pub trait Barrier: Send + Sync {
    /// Blocks until `parties` threads have called `wait` for this round, then releases them all.
    /// Every party of a round passes the same `parties`.
    fn wait(&self, parties: usize);
}

/// An operating-system port: threads, monitors, barriers and a clock.
pub trait Port: Send + Sync + Sized + 'static {
    /// The monitor type for a guarded value of type `T`.
    type Monitor<T: Send>: Monitor<T>;
    /// The barrier type.
    type Barrier: Barrier;
    /// Handle of a started worker thread.
    type Thread: Send;

    /// Creates a monitor guarding `value`.
    fn monitor<T: Send>(&self, value: T) -> Self::Monitor<T>;

    /// Creates a barrier for `parties` threads (at least 1).
    fn barrier(&self, parties: usize) -> Self::Barrier;

    /// Starts worker `index` (1-based; the engine's caller is worker 0) running `body`.
    /// Fails with [`crate::Error::Spawn`] when the thread cannot be started.
    fn spawn(&self, index: usize, body: WorkerBody) -> Result<Self::Thread>;

    /// Waits for a worker to return from its body.
    fn join(&self, thread: Self::Thread);

    /// The most threads (workers plus the caller) this port can run; the engine caps at this.
    fn max_threads(&self) -> usize;

    /// A monotonic timestamp in nanoseconds for logs and profiles; 0 when the port has no clock.
    fn now_ns(&self) -> u64 {
        0
    }

    /// One round of a busy wait (the `round`-th of this wait): a spin-loop hint, or on a port that
    /// can, now and then giving the core to another thread.
    fn relax(&self, round: u32) {
        let _ = round;
        core::hint::spin_loop();
    }
}
