//! Kernels as data: the unit of the schedule and of the op table. A graph node lowers to one or more kernels (a
//! conv to `im2col` + `gemm`); each kernel names its argument buffers (graph tensors or its own scratch), which
//! of them it writes, its task count, and a `Body` saying what to compute. This module and its family files
//! (`gemm.rs`, `conv.rs`, ...) hold only descriptions and the quantities derived from them (work units, sizes,
//! which fused epilogue a machine-code kernel applies); they import only `ir`. The lowering (`lower/`) builds
//! them, the planner (`plan/`) places their buffers, and the code generators (`codegen/`, `x86/`) read them.

pub mod args;
pub mod body;
pub mod conv;
pub mod data;
pub mod depthwise;
pub mod elementwise;
pub mod gemm;
pub mod gemm_bf16;
pub mod interleave;
pub mod math;
pub mod pool;
pub mod qconv;
pub mod qgemm;
pub mod qgemv;

pub mod quant;

use crate::ir::NodeId;
pub use args::{Arg, Buf, KernelId, Role, ScratchId};
pub use body::Body;
use cranelift_entity::PrimaryMap;

/// One schedulable kernel.
#[derive(Debug, Clone, PartialEq)]
pub struct Kernel {
    /// Unique name (`<node>` or `<node>.<step>`), used in the op table and the recipe.
    pub name: String,
    /// The graph node it implements.
    pub node: NodeId,
    /// Argument buffers with their roles; the one with role `Out` is written, the others are read. Their order
    /// is the order of the kernel's argument pointer array.
    pub args: Vec<Arg>,
    /// Number of tasks (>= 1).
    pub tasks: u32,
    /// What to generate.
    pub body: Body,
}

impl Kernel {
    /// The buffer the kernel writes.
    pub fn out(&self) -> Option<Buf> {
        self.args
            .iter()
            .find(|a| a.role == Role::Out)
            .map(|a| a.buf)
    }
    /// The buffers the kernel reads.
    pub fn reads(&self) -> impl Iterator<Item = Buf> + '_ {
        self.args
            .iter()
            .filter(|a| a.role != Role::Out)
            .map(|a| a.buf)
    }
    /// Units of independent work, the upper bound for `tasks`.
    pub fn units(&self) -> usize {
        self.body.units()
    }
}

/// The result of lowering a graph: kernels in a valid sequential order, and scratch buffer sizes in bytes.
#[derive(Debug, Clone, Default)]
pub struct Lowering {
    /// Kernels.
    pub kernels: PrimaryMap<KernelId, Kernel>,
    /// Scratch sizes (bytes).
    pub scratch: PrimaryMap<ScratchId, usize>,
}

/// Most tasks any kernel is split into.
pub const MAX_TASKS: usize = 64;
