//! The recipe runner (feature `alloc`): runs a bundle the way XRT's `xrt::runner` runs a run recipe.
//!
//! ```text
//!   json.rs    serde mirrors of the JSON (every field optional), integer fields, syntax errors
//!   recipe.rs  Recipe::parse: JSON → checked Recipe (buffers, cpus, kernels, runs)
//!   build.rs   Recipe + Bundle → one slot per buffer, one resolved call per run (the safety checks)
//!   npu_runs.rs  bundlert_copy and npu runs: their conventions, checks and execution
//!   meta.rs    DdMeta: DynamicDispatch's meta JSON of a segment, parsed and checked against it
//!   runner.rs  Runner: new, bind_input, bind_output, execute, wait, set_device, check_meta
//! ```
//!
//! A recipe's `cpu` runs name ops of the bundle's op table (`NAME_config`), which the runner calls
//! directly: no library is loaded; `bundlert_copy` (library `bundlert`) is the runtime's own copy.
//! `npu` runs name kernels whose names are NPU segments of the bundle; they run the transaction in
//! the segment's instruction buffer (filled from the bundle) on the runner's
//! [`Device`](crate::npu::Device) (the emulator by default).
//! See `docs/runtime.md` ("Runner", "Devices and the NPU") for the rules and the error list.

mod build;
mod call;
mod json;
mod meta;
mod npu_runs;
mod recipe;
// The layout `runner/runner.rs` follows STYLE.md's module map; the type is `runner::Runner`.
#[allow(clippy::module_inception)]
mod runner;

pub use meta::{DdMeta, MetaOp, MetaTensor, META_BUFFERS};
pub use recipe::{
    Argument, Buffer, BufferKind, Constant, Cpu, Kernel, Recipe, Run, Where, RECIPE_VERSION,
};
pub use runner::Runner;
