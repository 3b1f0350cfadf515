//! The virtual NPU (`vnpu`): the [`Device`] boundary an NPU driver implements, and [`Emulator`],
//! which runs bundlec's transaction binaries (`docs/npu-transaction-format.md`) on the host,
//! bit-exactly.
//!
//! ```text
//!   txn bytes ──decode──▶ Vec<Op> (header, sizes, opcodes, tiles, registers, DMA local sides checked)
//!                 │
//!   NpuBuffers ───┴──check pass──▶ registers simulated: DDR_PATCH/DMA bounds, read-only stores, polls
//!                      │
//!                      └──execute pass──▶ data moved, parameter blocks checked, kernels run
//!                                  │
//!                                  └──▶ NpuCycles (instruction, data, busiest tile's compute)
//! ```
//!
//! Invariants: nothing here panics on any transaction, buffer or parameter-block contents; every
//! failure is [`Error::NpuHeader`](crate::Error::NpuHeader) or [`Error::Npu`](crate::Error::Npu)
//! naming the op index and byte offset (or [`Error::OutOfMemory`](crate::Error::OutOfMemory) for a
//! tile memory). Everything that does not depend on data-memory contents is checked before the
//! first byte moves; what does (kernel parameters, polls on data words) is checked before its op
//! acts. All offsets and sizes use checked arithmetic; kernels follow the format's arithmetic
//! exactly (no fused multiply-add, i32 wrapping integer sums, round half to even).

mod decode;
mod device;
mod dma;
mod emulate;
mod kernels;
mod memory;
mod params;
mod regs;
mod target;
#[cfg(all(test, feature = "std"))]
mod tests;

pub use device::{Device, Emulator};
pub use target::{NpuBuffers, NpuCycles, NpuTarget};
