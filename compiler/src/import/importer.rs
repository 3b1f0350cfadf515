//! The importer's state (`Importer`): the graph being built, the ONNX name -> tensor map, the opset, the budget
//! for compile-time constants and the attribute warnings. `mod.rs` drives the import and each family file
//! (`nodes.rs`, `cnn_ops.rs`, ...) adds the methods that map its node types.

use super::attrs;
use crate::ir::{self, Graph, TensorId};
use std::collections::{HashMap, HashSet};
use std::path::Path;

/// Import state: the graph being built and the ONNX name → tensor map.
pub(crate) struct Importer<'a> {
    /// The graph being built.
    pub(super) g: Graph,
    /// ONNX tensor name -> tensor.
    pub(super) names: HashMap<String, TensorId>,
    /// The model's default-domain opset.
    pub(super) opset: i64,
    /// Where external data files are looked up.
    pub(super) model_dir: Option<&'a Path>,
    /// Names some node or output reads.
    pub(super) used: HashSet<String>,
    /// Every compile-time constant (initializers, `Constant` nodes, folds) is charged here.
    pub(super) budget: ir::ConstBudget,
    /// Warnings from attributes (the NaN policy), moved into the graph at the end.
    pub(super) warnings: attrs::Warnings,
}
