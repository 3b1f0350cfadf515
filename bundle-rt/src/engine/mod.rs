//! The BSP engine: runs a bundle's op table layer by layer on a pool of worker threads.
//!
//! ```text
//!   port.rs      Port trait: spawn/join, Monitor (mutex + condition variable), Barrier, clock
//!   std_port.rs  StdPort: std::thread, std::sync       (feature `std`)
//!   affinity.rs  CpuPlan: which CPU each StdPort worker is bound to (Linux)
//!   single.rs    SinglePort: no threads, spin primitives (any target)
//!   bsp.rs       Engine<P: Port>: the caller's side — publish a layer, run its share, close it
//!   worker.rs    the workers' side: wait for a layer that takes them in, drain tickets, meet at the barrier
//!   shares.rs    a layer's tickets in per-thread shares with stealing
//! ```
//!
//! The engine needs `alloc` (worker bodies and the shared state are heap objects made once, at
//! engine creation); running never allocates. Without `alloc`, `Instance::run_ops` is the
//! single-thread path.

#[cfg(feature = "std")]
mod affinity;
mod bsp;
mod port;
mod shared;
mod shares;
mod single;
#[cfg(feature = "std")]
mod std_port;
mod worker;

pub use bsp::{Engine, LOG_CAPACITY, MAX_THREADS};
pub use port::{Barrier, Monitor, Port, WorkerBody};
pub use single::{SinglePort, SpinBarrier, SpinMonitor};
#[cfg(feature = "std")]
pub use std_port::{StdBarrier, StdMonitor, StdPort};
