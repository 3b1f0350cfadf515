//! [`StdPort`]: the port on `std` — `std::thread` workers, `Mutex` + `Condvar` monitors,
//! `std::sync::Barrier`, and an `Instant`-based clock.
//!
//! Poisoned locks are recovered (`PoisonError::into_inner`): kernels are `extern "C"` and cannot
//! unwind, and the engine's own critical sections do not panic, so a poisoned lock still guards
//! consistent state; recovering keeps the runtime panic-free.

use std::sync::{Condvar, Mutex, PoisonError};
use std::thread::JoinHandle;
use std::time::Instant;

use super::port::{Barrier, Monitor, Port, WorkerBody};
use crate::error::Error;
use crate::Result;

/// The `std` port.
#[derive(Debug)]
pub struct StdPort {
    epoch: Instant,
    stack_size: Option<usize>,
}

impl StdPort {
    /// A port whose clock starts now; workers get the default stack size.
    pub fn new() -> StdPort {
        StdPort {
            epoch: Instant::now(),
            stack_size: None,
        }
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

/// `Mutex<T>` plus a `Condvar`.
#[derive(Debug)]
pub struct StdMonitor<T> {
    mutex: Mutex<T>,
    cond: Condvar,
}

impl<T: Send> Monitor<T> for StdMonitor<T> {
    fn lock<R>(&self, f: impl FnOnce(&mut T) -> R) -> R {
        let mut guard = self.mutex.lock().unwrap_or_else(PoisonError::into_inner);
        f(&mut guard)
    }

    fn wait_until<R>(&self, mut ready: impl FnMut(&T) -> bool, f: impl FnOnce(&mut T) -> R) -> R {
        let guard = self.mutex.lock().unwrap_or_else(PoisonError::into_inner);
        let mut guard = self
            .cond
            .wait_while(guard, |value| !ready(value))
            .unwrap_or_else(PoisonError::into_inner);
        f(&mut guard)
    }

    fn notify_one(&self) {
        self.cond.notify_one();
    }

    fn notify_all(&self) {
        self.cond.notify_all();
    }
}

/// `std::sync::Barrier`.
#[derive(Debug)]
pub struct StdBarrier(std::sync::Barrier);

impl Barrier for StdBarrier {
    fn wait(&self) {
        self.0.wait();
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
        }
    }

    fn barrier(&self, parties: usize) -> StdBarrier {
        StdBarrier(std::sync::Barrier::new(parties.max(1)))
    }

    fn spawn(&self, index: usize, body: WorkerBody) -> Result<JoinHandle<()>> {
        let mut builder = std::thread::Builder::new().name(std::format!("bundle-rt-{index}"));
        if let Some(bytes) = self.stack_size {
            builder = builder.stack_size(bytes);
        }
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
}
