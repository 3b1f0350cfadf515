//! The importer's state (`Importer`): the graph being built, the ONNX name -> tensor map, the opset, the budget
//! for compile-time constants and the attribute warnings. `mod.rs` drives the import; each family file
//! (`core_ops.rs`, `cnn_ops.rs`, ...) registers its parsers in `registry.rs` and adds the helpers they share.

use super::attrs;
use crate::ir::{self, DType, Graph, TensorId};
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

impl Importer<'_> {
    /// The values of integer constant `t`, or None when it is not a constant or is f32.
    pub(super) fn const_ints(&self, t: TensorId) -> Option<Vec<i64>> {
        let c = self.g.constant(t)?;
        (c.dtype != DType::F32).then(|| c.to_i64_vec())
    }
}
