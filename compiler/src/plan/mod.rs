//! Scheduling and memory planning. `schedule` assigns every kernel a BSP layer (one more than the latest layer
//! that wrote a buffer it reads) and orders kernels by layer. `alloc` places buffers in the three areas:
//! constants (each referenced constant once), mutables (inputs, then outputs) and activations, where
//! liveness intervals are counted in layers so that no two buffers live in the same layer ever overlap — the
//! property that lets a layer's kernels run concurrently (`in_place` names the one exception: an output a
//! residual epilogue writes over its dying residual); `pack` chooses the activation offsets.

pub mod alloc;
pub mod in_place;
pub mod pack;
pub mod schedule;

pub use alloc::{Area, Location, MemoryPlan};
pub use schedule::Schedule;

/// Alignment of every buffer and of each area, in bytes.
pub const ALIGN: usize = 64;

/// Rounds `x` up to a multiple of `ALIGN`.
pub fn align(x: usize) -> usize {
    x.div_ceil(ALIGN) * ALIGN
}
