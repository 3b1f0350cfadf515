//! `bundle-rt`: the runtime for bundles written by `bundlec`.
//!
//! A bundle is an object file exporting an entry function and a `NAME_config` table, plus a `.weights`
//! image of the constant area (see `docs/bundle-format.md`). This crate mirrors that table, checks it,
//! and runs the model safely:
//!
//! ```text
//!   &BundleConfig ──ConfigView::new──▶ ConfigView ─┐
//!   weights bytes ──size + FNV-1a check───────────┴▶ Bundle ──▶ Instance (mutable + activation areas)
//!                                                                 │  set_input / output (typed, checked)
//!                                                                 ├─ run()      entry function, one thread
//!                                                                 ├─ run_ops()  op table, one thread
//!                                                                 ├─ Engine::run  op table, BSP worker pool
//!                                                                 └─ run_ops_with_device / Engine::run_with_device:
//!                                                                    NPU segments on a Device, the rest as above
//!   &Bundle + NAME.recipe.json ──Runner::new──▶ Runner: bind_input / bind_output / execute / wait
//!                                               (cpu runs, bundlert_copy, npu runs on a Device)
//! ```
//!
//! Invariants: a [`ConfigView`] exists only for a config whose every count, offset, size, name and
//! layer range was checked; everything after it (tensor access, op argument building, the engine)
//! relies on those checks instead of repeating them. Failures are [`Error`] values naming the tensor,
//! op or config field at fault; nothing here panics on bad input.
//!
//! Features: none gives a pure `no_std` runtime where the caller provides every area (NPU segment
//! tables are checked; the segments run as their CPU fallback ops); `alloc` adds owned 64-aligned
//! areas, the `engine` module, the recipe `runner` (with `serde_json`), the `npu` module (the
//! `Device` trait and the `Emulator`) and the device paths; `std` adds the std-thread
//! `engine::StdPort`; `capi` adds the C API (`brt_*`, `include/bundle_rt.h`).

#![no_std]
#![deny(missing_docs)]
#![deny(unsafe_op_in_unsafe_fn)]

#[cfg(feature = "alloc")]
extern crate alloc;
#[cfg(feature = "std")]
extern crate std;

#[cfg(not(target_pointer_width = "64"))]
compile_error!("bundle-rt mirrors the LP64 layout of NAME_config and needs a 64-bit target");

pub mod aie;
mod buf;
pub mod bundle;
#[cfg(feature = "capi")]
pub mod capi;
pub mod config;
pub mod cpu;
#[cfg(feature = "alloc")]
pub mod engine;
pub mod error;
mod exec;
#[cfg(any(all(test, feature = "std"), feature = "fixture"))]
#[doc(hidden)]
pub mod fixture;
pub mod format;
pub mod instance;
pub mod log;
#[cfg(feature = "alloc")]
pub mod npu;
pub mod profile;
#[cfg(feature = "alloc")]
pub mod runner;
pub mod superkernel;

#[cfg(all(test, feature = "std"))]
mod tests;

pub use bundle::{checksum64, fnv1a64, Bundle};
pub use config::{
    Area, BundleArg, BundleConfig, BundleLayer, BundleOp, BundleOpFn, BundleTensorDesc, ByteRange,
    ConfigView, DType, EntryFn, NpuCopy, NpuCopyInfo, NpuSegment, NpuSegmentInfo, Role,
    SymbolTableEntry, TensorInfo,
};
pub use error::{Error, FieldPath, Name, Quoted, RecipePath, RecipeWhy, Result, Why};
pub use format::{
    MAX_OP_ARGS, NPU_INSTR_HEADER_BYTES, NPU_OPCODE_TXN, TXN_GENERATIONS, TXN_GEN_AIE2IPU,
    TXN_GEN_AIE2P,
};
pub use instance::{Element, Instance};
pub use log::{Level, Log, Record};
#[cfg(feature = "alloc")]
pub use npu::{Device, Emulator, NpuBuffers, NpuCycles, NpuTarget};
pub use profile::{OpTiming, ProfileTable, SegmentTiming};
#[cfg(feature = "alloc")]
pub use runner::{Recipe, Runner};
