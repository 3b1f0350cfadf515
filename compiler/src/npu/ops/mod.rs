//! The NPU op library, following DynamicDispatch's operator interface (seed 001): every op gives its buffer
//! requirements as an arg map (INPUT, OUTPUT, SCRATCH_PAD, CONST_INPUT, CONST_KERNEL_PARAM_INPUT entries with XRT
//! arg index, ONNX arg index, offset and size), its transaction binary for its shapes, its runtime ("super
//! kernel") parameter blocks, and its constants formatted into the NPU's layout. One file per op family, named as
//! in `ir/ops/` and `codegen/ops/`: `cnn.rs` (Conv, MaxPool, AveragePool, GlobalAveragePool), `linalg.rs`
//! (MatMul, Gemm), `elementwise.rs` (Add, Mul, Relu, Clip), `shape.rs` (Concat, Reshape).
//!
//! `gen.rs` is the program generator the families drive (`Gen`). `capability.rs` turns an IR node into an
//! [`NpuOp`] or a rejection naming the one [`Constraint`] it breaks; the same constraint table prints `bundlec ops
//! --npu`. Ops are described independently of the IR (shapes, dtype, constants, quantisation), so the int8
//! variants are built and tested directly until the int8 importer produces them.

pub mod capability;
pub mod cnn;
pub mod constraint;
pub mod elementwise;
mod gen;
pub mod linalg;
pub mod program;
pub mod shape;
mod tiling;

use super::target::NpuTarget;

pub use capability::npu_op_for_node;
pub use constraint::{Constraint, Reject, CONSTRAINTS};
pub(crate) use gen::{EpilogueBlock, Gen};
pub use program::{
    ArgEntry, ArgKind, Elem, OpCost, OpProgram, Quant, Requant, Weights, PARAM_AREA, PARAM_SLOT2,
};
pub(crate) use tiling::{
    a64, act_words, best, budget, est, first_fit, local_memory, outside, sizes,
};

/// An NPU op with static shapes.
#[derive(Debug, Clone, PartialEq)]
pub enum NpuOp {
    /// Convolution (incl. depthwise and grouped) with bias, residual and activation.
    Conv(cnn::ConvOp),
    /// Max / average pooling.
    Pool(cnn::PoolOp),
    /// Global average pooling.
    Gap(cnn::GapOp),
    /// Matrix product with constant right operand.
    Gemm(linalg::GemmOp),
    /// Elementwise add / mul / activation.
    Eltwise(elementwise::EltwiseOp),
    /// Concat / Reshape: DMA copies.
    Copy(shape::CopyOp),
}

impl NpuOp {
    /// Compiles the op for a target: arg map, transaction body, params, NPU-layout constants, cost.
    pub fn program(&self, t: &NpuTarget) -> Result<OpProgram, Reject> {
        match self {
            NpuOp::Conv(o) => o.program(t),
            NpuOp::Pool(o) => o.program(t),
            NpuOp::Gap(o) => o.program(t),
            NpuOp::Gemm(o) => o.program(t),
            NpuOp::Eltwise(o) => o.program(t),
            NpuOp::Copy(o) => o.program(t),
        }
    }
    /// The element type its multiply-accumulates run in (`None` for a copy, which has none): the MAC rate
    /// utilisation is measured against.
    pub fn elem(&self) -> Option<Elem> {
        match self {
            NpuOp::Conv(o) => Some(o.elem),
            NpuOp::Pool(o) => Some(o.elem),
            NpuOp::Gap(o) => Some(o.elem),
            NpuOp::Gemm(o) => Some(o.elem),
            NpuOp::Eltwise(o) => Some(o.elem),
            NpuOp::Copy(_) => None,
        }
    }
    /// Short kernel name for tables.
    pub fn kind(&self) -> &'static str {
        match self {
            NpuOp::Conv(c) if c.depthwise() => "dwconv",
            NpuOp::Conv(_) => "conv",
            NpuOp::Pool(_) => "pool",
            NpuOp::Gap(_) => "gap",
            NpuOp::Gemm(_) => "gemm",
            NpuOp::Eltwise(_) => "eltwise",
            NpuOp::Copy(_) => "copy",
        }
    }
}
