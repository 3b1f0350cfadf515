//! The intermediate representation: static-shape tensors and nodes in typed arenas (`graph`), the operator set
//! (`op`) and its typed attributes (`attrs`), element types and host tensors (`types`), each op family's
//! reference semantics (`ops`), the producer/reader index the rewrites keep (`uses`), and the verifier (`verify`)
//! that checks the graph invariants between passes.

pub mod attrs;
pub mod eval;
pub mod graph;
pub mod op;
pub mod ops;
pub mod types;
pub mod uses;
pub mod verify;

pub use attrs::{
    Activation, BinOp, CmpOp, ConvAttrs, ConvTransposeAttrs, CoordMode, Epilogue, GemmAttrs,
    IntProduct, LogicOp, LrnAttrs, NearestMode, PadMode, PoolAttrs, PoolKind, QAddParams,
    QGapParams, QuantParams, ReduceKind, Requant, ResizeAttrs, ResizeMode, UnOp,
};
pub use graph::{Graph, NodeData, NodeId, TensorData, TensorId, TensorKind};
pub use op::Op;
pub use types::{numel, shape_str, ConstBudget, DType, Data, Shape, Tensor};
pub use uses::Uses;
