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

/// aie-rt's device generation of the first Ryzen AI NPUs (`XAIE_DEV_GEN_AIE2IPU`: Phoenix, Hawk Point; NPU1).
pub const TXN_GEN_AIE2IPU: u8 = 3;
/// aie-rt's device generation of the second (`XAIE_DEV_GEN_AIE2P`: Strix, Krackan; NPU2).
pub const TXN_GEN_AIE2P: u8 = 4;
/// Every device generation byte a transaction header may carry: the ones `npu`'s decoder reads. An NPU target
/// description (bundlec's `--npu FILE`) must name one of these.
pub const TXN_GENERATIONS: &[u8] = &[TXN_GEN_AIE2IPU, TXN_GEN_AIE2P];
/// The XRT DPU kernel's opcode (kernel argument 0) for an instruction buffer that holds an aie-rt v0.1
/// transaction, as DynamicDispatch passes it.
pub const NPU_OPCODE_TXN: u64 = 2;
/// Bytes before the transaction in DynamicDispatch's instruction buffer (kernel argument 1): `u32 0`, then
/// `u32` the transaction's bytes + 8. Kernel argument 2 is the whole buffer's size in 32-bit words.
pub const NPU_INSTR_HEADER_BYTES: usize = 8;

pub use bundle::{checksum64, fnv1a64, Bundle};
pub use config::{
    Area, BundleArg, BundleConfig, BundleLayer, BundleOp, BundleOpFn, BundleTensorDesc, ByteRange,
    ConfigView, DType, EntryFn, NpuCopy, NpuCopyInfo, NpuSegment, NpuSegmentInfo, Role,
    SymbolTableEntry, TensorInfo,
};
pub use error::{Error, FieldPath, Name, Quoted, RecipePath, RecipeWhy, Why};
pub use instance::{Element, Instance};
pub use log::{Level, Log, Record};
#[cfg(feature = "alloc")]
pub use npu::{Device, Emulator, NpuBuffers, NpuCycles, NpuTarget};
pub use profile::{OpTiming, ProfileTable, SegmentTiming};
#[cfg(feature = "alloc")]
pub use runner::{Recipe, Runner};

/// The most arguments one op may take when run through [`Instance::run_ops`] or the engine: the
/// argument array is built on the stack with this capacity, so the run path never allocates.
pub const MAX_OP_ARGS: usize = 64;

/// `Result` with this crate's [`Error`].
pub type Result<T> = core::result::Result<T, Error>;
