//! The NPU back end: the target description (`target.rs`, its tile kinds' registers in `tiles.rs`), the NPU op
//! library (`ops/<family>.rs`, the operator interface of seed 001), the transaction writer (`txn.rs`: AIE-ML
//! transfers from `dma.rs`, timed by `clock.rs`), segment fusion into one transaction
//! (`fuse.rs`), DynamicDispatch's meta JSON of a fused segment (`meta.rs`) and the disassembler behind
//! `bundlec inspect --txn` (`disasm.rs`).
//!
//! ```text
//!  partition ─► per node: ops::npu_op_for_node ─► NpuOp::program (arg map, txn body, params, NPU-layout consts)
//!            ─► per segment: fuse::fuse ─► NAME.<segment>.txn + const/params images + in/out/scratch layout
//!                                       ─► meta::dd_meta ─► NAME.<segment>.meta.json
//! ```

pub mod clock;
pub mod disasm;
pub mod dma;
pub mod fuse;
pub mod meta;
pub mod ops;
pub mod target;
pub mod tiles;
pub mod txn;

pub use target::NpuTarget;
