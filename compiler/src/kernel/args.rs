//! A kernel's arguments: the typed ids of kernels and scratch buffers, a buffer (graph tensor or scratch) and the
//! role an argument plays to its kernel.

use crate::ir::TensorId;
use cranelift_entity::entity_impl;

/// A kernel of a `Lowering`.
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct KernelId(u32);
entity_impl!(KernelId, "k");

/// A scratch buffer of a `Lowering` (it lives in the activation area).
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ScratchId(u32);
entity_impl!(ScratchId, "s");

/// A buffer argument.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Buf {
    /// A graph tensor.
    Tensor(TensorId),
    /// A scratch buffer of the lowering.
    Scratch(ScratchId),
}

/// What an argument is to its kernel. Bodies look their buffers up by role (`Kb::arg`), never by position;
/// the one argument a kernel writes has role `Out`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Role {
    /// The data input.
    X,
    /// The first operand of a binary op or a matrix product.
    A,
    /// The second operand of a binary op or a matrix product.
    B,
    /// Weights: a convolution's filters, a resample's tap weights.
    W,
    /// Bias: per channel, per row or per column.
    Bias,
    /// Per-channel scale (affine map, normalisation, quantisation, requantisation).
    Scale,
    /// Per-channel shift of the affine map.
    Shift,
    /// Per-channel zero points.
    ZeroPoint,
    /// Run-time or compile-time indices (Gather, resample taps).
    Index,
    /// Compile-time offset tables (IndexMap).
    Table,
    /// The residual added in a fused epilogue.
    Residual,
    /// Input `i` of a variadic op (Concat, logic ops).
    In(u32),
    /// The buffer the kernel writes.
    Out,
    /// A buffer the kernel writes and reads back itself (a transposed GEMM's `Cᵀ` before its fused
    /// transposing epilogue writes `Out`).
    Scratch,
}

/// One argument: a buffer and its role.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Arg {
    /// What the kernel does with it.
    pub role: Role,
    /// The buffer.
    pub buf: Buf,
}
