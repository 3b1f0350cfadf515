//! [`SinglePort`]: the fallback port for targets without threads — it runs the engine on the
//! calling thread only, with spin-based primitives that need nothing but atomics.
//!
//! `spawn` always fails, so an engine on this port has exactly one thread and never waits: each layer
//! runs inline on the caller. The primitives are nevertheless correct under real concurrency (a spin
//! lock and a counting spin barrier), so sharing them across cores is sound, merely busy-waiting.
//! A clock can be supplied as a plain function (e.g. reading a cycle counter) for profiling.

use core::cell::UnsafeCell;
use core::hint::spin_loop;
use core::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

use super::port::{Barrier, Monitor, Port, WorkerBody};
use crate::error::Error;
use crate::Result;

/// The single-thread port.
#[derive(Clone, Copy, Debug, Default)]
pub struct SinglePort {
    clock: Option<fn() -> u64>,
}

impl SinglePort {
    /// A port without clock (`now_ns` returns 0).
    pub const fn new() -> SinglePort {
        SinglePort { clock: None }
    }

    /// A port whose `now_ns` calls `clock`.
    pub const fn with_clock(clock: fn() -> u64) -> SinglePort {
        SinglePort { clock: Some(clock) }
    }
}

/// A spin lock guarding a `T`; waiting spins on the predicate.
pub struct SpinMonitor<T> {
    locked: AtomicBool,
    value: UnsafeCell<T>,
}

// SAFETY: the value is only reached while `locked` is held (acquire/release), like a mutex; T: Send
// suffices as for `std::sync::Mutex`.
unsafe impl<T: Send> Sync for SpinMonitor<T> {}

/// Releases the spin lock when dropped, so a panicking closure cannot leave it locked.
struct Unlock<'m>(&'m AtomicBool);

impl Drop for Unlock<'_> {
    fn drop(&mut self) {
        self.0.store(false, Ordering::Release);
    }
}

impl<T> SpinMonitor<T> {
    fn acquire(&self) -> Unlock<'_> {
        while self
            .locked
            .compare_exchange_weak(false, true, Ordering::Acquire, Ordering::Relaxed)
            .is_err()
        {
            spin_loop();
        }
        Unlock(&self.locked)
    }
}

impl<T: Send> Monitor<T> for SpinMonitor<T> {
    fn lock<R>(&self, f: impl FnOnce(&mut T) -> R) -> R {
        let _unlock = self.acquire();
        // SAFETY: the lock is held until `_unlock` drops, so this is the only access to the value.
        f(unsafe { &mut *self.value.get() })
    }

    fn wait_until<R>(&self, mut ready: impl FnMut(&T) -> bool, f: impl FnOnce(&mut T) -> R) -> R {
        loop {
            let unlock = self.acquire();
            // SAFETY: the lock is held until `unlock` drops, so this is the only access to the value.
            let value = unsafe { &mut *self.value.get() };
            if ready(value) {
                let result = f(value);
                drop(unlock);
                return result;
            }
            drop(unlock);
            spin_loop();
        }
    }

    fn notify_one(&self) {}

    fn notify_all(&self) {}
}

/// A reusable counting barrier that spins.
pub struct SpinBarrier {
    arrived: AtomicUsize,
    round: AtomicUsize,
}

impl Barrier for SpinBarrier {
    fn wait(&self, parties: usize) {
        let round = self.round.load(Ordering::Acquire);
        if self.arrived.fetch_add(1, Ordering::AcqRel) + 1 >= parties {
            // Last to arrive: reset the count before opening the next round, so a party that leaves
            // and re-enters sees a fresh count.
            self.arrived.store(0, Ordering::Relaxed);
            self.round.fetch_add(1, Ordering::Release);
        } else {
            while self.round.load(Ordering::Acquire) == round {
                spin_loop();
            }
        }
    }
}

impl Port for SinglePort {
    type Monitor<T: Send> = SpinMonitor<T>;
    type Barrier = SpinBarrier;
    type Thread = core::convert::Infallible;

    fn monitor<T: Send>(&self, value: T) -> SpinMonitor<T> {
        SpinMonitor {
            locked: AtomicBool::new(false),
            value: UnsafeCell::new(value),
        }
    }

    fn barrier(&self, _parties: usize) -> SpinBarrier {
        SpinBarrier {
            arrived: AtomicUsize::new(0),
            round: AtomicUsize::new(0),
        }
    }

    fn spawn(&self, index: usize, body: WorkerBody) -> Result<Self::Thread> {
        drop(body);
        Err(Error::Spawn { index })
    }

    fn join(&self, thread: Self::Thread) {
        match thread {}
    }

    fn max_threads(&self) -> usize {
        1
    }

    fn now_ns(&self) -> u64 {
        self.clock.map_or(0, |clock| clock())
    }
}
