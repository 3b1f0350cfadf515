//! [`StdPort`]: the port on `std` — `std::thread` workers, `Mutex` + `Condvar` monitors, a barrier, and an
//! `Instant`-based clock.
//!
//! Layers of small models last tens of microseconds, about what a futex sleep and wake-up costs (more in a
//! virtual machine), so both waits spin first — a monitor wait polls its predicate with `try_lock`, a barrier
//! wait polls its generation — for [`SPIN`] rounds of `spin_loop` (yielding the core every 64th round) before
//! they block on the condition variable.
//! A wait that is not satisfied in that time (an idle engine between runs) sleeps as before.
//!
//! Workers are bound to CPUs other than the creating thread's (Linux; `affinity.rs` says why and
//! how); [`StdPort::unpinned`] leaves them to the scheduler.
//!
//! Poisoned locks are recovered (`PoisonError::into_inner`): kernels are `extern "C"` and cannot
//! unwind, and the engine's own critical sections do not panic, so a poisoned lock still guards
//! consistent state; recovering keeps the runtime panic-free.

use core::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Condvar, Mutex, PoisonError};
use std::thread::JoinHandle;
use std::time::Instant;

use super::affinity::CpuPlan;
use super::port::{Barrier, Monitor, Port, WorkerBody};
use crate::error::Error;
use crate::Result;

/// The `std` port.
#[derive(Debug)]
pub struct StdPort {
    epoch: Instant,
    stack_size: Option<usize>,
    cpus: CpuPlan,
}

impl StdPort {
    /// A port whose clock starts now; workers get the default stack size and are bound to CPUs
    /// other than the calling thread's (on Linux; see the module docs).
    pub fn new() -> StdPort {
        StdPort {
            epoch: Instant::now(),
            stack_size: None,
            cpus: CpuPlan::for_caller(),
        }
    }

    /// As [`StdPort::new`], with workers left unbound (the scheduler places them).
    pub fn unpinned() -> StdPort {
        StdPort {
            epoch: Instant::now(),
            stack_size: None,
            cpus: CpuPlan::default(),
        }
    }

    /// The CPU worker `index` (1-based) is bound to, if any.
    pub fn worker_cpu(&self, index: usize) -> Option<usize> {
        self.cpus.cpu(index)
    }

    /// A port whose workers get `bytes` of stack (kernels with large stack frames may need it).
    pub fn with_stack_size(bytes: usize) -> StdPort {
        StdPort {
            stack_size: Some(bytes),
            ..StdPort::new()
        }
    }
}

impl Default for StdPort {
    fn default() -> Self {
        StdPort::new()
    }
}

/// `Mutex<T>` plus a `Condvar`, and the number of threads blocked on it: a notification with no sleeper makes
/// no system call (`Condvar::notify_*` always calls `futex`, about a microsecond in a virtual machine, and the
/// engine notifies two or three times per layer while the workers usually spin).
#[derive(Debug)]
pub struct StdMonitor<T> {
    mutex: Mutex<T>,
    cond: Condvar,
    sleepers: AtomicUsize,
}

impl<T: Send> Monitor<T> for StdMonitor<T> {
    fn lock<R>(&self, f: impl FnOnce(&mut T) -> R) -> R {
        let mut guard = self.mutex.lock().unwrap_or_else(PoisonError::into_inner);
        f(&mut guard)
    }

    fn wait_until<R>(&self, mut ready: impl FnMut(&T) -> bool, f: impl FnOnce(&mut T) -> R) -> R {
        for i in 0..SPIN {
            // Poll the predicate now and then without blocking on the lock.
            if i % 32 == 0 {
                if let Ok(mut guard) = self.mutex.try_lock() {
                    if ready(&guard) {
                        return f(&mut guard);
                    }
                }
            }
            relax(i);
        }
        let mut guard = self.mutex.lock().unwrap_or_else(PoisonError::into_inner);
        if !ready(&guard) {
            // Counted under the lock before the predicate fails for good: a notifier changes the value under the
            // same lock, so it either finds this thread counted or the predicate already true.
            self.sleepers.fetch_add(1, Ordering::SeqCst);
            guard = self
                .cond
                .wait_while(guard, |value| !ready(value))
                .unwrap_or_else(PoisonError::into_inner);
            self.sleepers.fetch_sub(1, Ordering::SeqCst);
        }
        f(&mut guard)
    }

    fn notify_one(&self) {
        if self.sleepers.load(Ordering::SeqCst) > 0 {
            self.cond.notify_one();
        }
    }

    fn notify_all(&self) {
        if self.sleepers.load(Ordering::SeqCst) > 0 {
            self.cond.notify_all();
        }
    }
}

/// Spin rounds before a wait blocks (a few tens of microseconds).
pub const SPIN: u32 = 1 << 14;

/// One spin round: a `spin_loop` hint, and every 64th round a `yield_now`, so that a spinning thread gives its
/// core to the thread it waits for when the machine is oversubscribed (other processes' busy threads).
fn relax(i: u32) {
    if i % 64 == 63 {
        std::thread::yield_now();
    } else {
        core::hint::spin_loop();
    }
}

/// A generation barrier: arrivals count up; the last one resets the count and advances the generation, which
/// the others poll for `SPIN` rounds and then wait for on a condition variable. The generation changes under
/// the mutex, so a blocked waiter cannot miss it; the count's and generation's acquire/release order every
/// party's writes before the barrier before every party's reads after it. Waiters that block are counted
/// (under the mutex), and the last arrival notifies only when there are any.
#[derive(Debug)]
pub struct StdBarrier {
    count: AtomicUsize,
    generation: AtomicUsize,
    sleepers: AtomicUsize,
    lock: Mutex<()>,
    cond: Condvar,
}

impl Barrier for StdBarrier {
    fn wait(&self, parties: usize) {
        let generation = self.generation.load(Ordering::Acquire);
        if self.count.fetch_add(1, Ordering::AcqRel) + 1 >= parties {
            self.count.store(0, Ordering::Relaxed);
            let _guard = self.lock.lock().unwrap_or_else(PoisonError::into_inner);
            self.generation.fetch_add(1, Ordering::Release);
            if self.sleepers.load(Ordering::SeqCst) > 0 {
                self.cond.notify_all();
            }
            return;
        }
        for i in 0..SPIN {
            if self.generation.load(Ordering::Acquire) != generation {
                return;
            }
            relax(i);
        }
        let mut guard = self.lock.lock().unwrap_or_else(PoisonError::into_inner);
        self.sleepers.fetch_add(1, Ordering::SeqCst);
        while self.generation.load(Ordering::Acquire) == generation {
            guard = self
                .cond
                .wait(guard)
                .unwrap_or_else(PoisonError::into_inner);
        }
        self.sleepers.fetch_sub(1, Ordering::SeqCst);
    }
}

impl Port for StdPort {
    type Monitor<T: Send> = StdMonitor<T>;
    type Barrier = StdBarrier;
    type Thread = JoinHandle<()>;

    fn monitor<T: Send>(&self, value: T) -> StdMonitor<T> {
        StdMonitor {
            mutex: Mutex::new(value),
            cond: Condvar::new(),
            sleepers: AtomicUsize::new(0),
        }
    }

    fn barrier(&self, _parties: usize) -> StdBarrier {
        StdBarrier {
            count: AtomicUsize::new(0),
            generation: AtomicUsize::new(0),
            sleepers: AtomicUsize::new(0),
            lock: Mutex::new(()),
            cond: Condvar::new(),
        }
    }

    fn spawn(&self, index: usize, body: WorkerBody) -> Result<JoinHandle<()>> {
        let mut builder = std::thread::Builder::new().name(std::format!("bundle-rt-{index}"));
        if let Some(bytes) = self.stack_size {
            builder = builder.stack_size(bytes);
        }
        let cpu = self.cpus.cpu(index);
        let body = move || {
            if let Some(cpu) = cpu {
                // Best effort: an unbound worker is only slower.
                let _ = CpuPlan::bind_current(cpu);
            }
            body()
        };
        builder.spawn(body).map_err(|_| Error::Spawn { index })
    }

    fn join(&self, thread: JoinHandle<()>) {
        // A worker body cannot panic (see the module docs); nothing to report either way.
        let _ = thread.join();
    }

    fn max_threads(&self) -> usize {
        super::MAX_THREADS
    }

    fn now_ns(&self) -> u64 {
        u64::try_from(self.epoch.elapsed().as_nanos()).unwrap_or(u64::MAX)
    }

    fn relax(&self, round: u32) {
        relax(round);
    }
}
