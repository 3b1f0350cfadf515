//! The recipe runner (feature `alloc`): runs a bundle the way XRT's `xrt::runner` runs a run recipe.
//!
//! ```text
//!   json.rs    serde mirrors of the JSON (every field optional), integer fields, syntax errors
//!   recipe.rs  Recipe::parse: JSON → checked Recipe (buffers, cpus, kernels, runs)
//!   build.rs   Recipe + Bundle → one slot per buffer, one resolved call per run (the safety checks)
//!   runner.rs  Runner: new, bind_input, bind_output, execute, wait
//! ```
//!
//! A recipe's `cpu` runs name ops of the bundle's op table (`NAME_config`), which the runner calls
//! directly: no library is loaded. `npu` runs fail with [`crate::Error::NoNpuDevice`] until an NPU
//! device exists. See `docs/runtime.md` ("Runner") for the rules and the error list.

mod build;
mod json;
mod recipe;
// The layout `runner/runner.rs` follows STYLE.md's module map; the type is `runner::Runner`.
#[allow(clippy::module_inception)]
mod runner;

pub use recipe::{Argument, Buffer, BufferKind, Constant, Cpu, Recipe, Run, Where, RECIPE_VERSION};
pub use runner::Runner;
