//! The graph: tensors and nodes in typed arenas (`TensorId`, `NodeId`), the model's inputs and outputs, and the
//! node order. Invariants (checked by `ir::verify`): `order` is topological; every tensor has at most one
//! producer among the nodes in `order`; every non-input, non-constant tensor read by a node is produced earlier;
//! shapes and dtypes agree with each op's shape rule.

use super::op::Op;
use super::types::{numel, ConstBudget, DType, Shape, Tensor};
use cranelift_entity::{entity_impl, PrimaryMap};

/// A tensor in the graph.
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct TensorId(u32);
entity_impl!(TensorId, "t");

/// A node in the graph.
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct NodeId(u32);
entity_impl!(NodeId, "n");

/// Where a tensor's value comes from.
#[derive(Debug, Clone, PartialEq)]
pub enum TensorKind {
    /// A model input, written by the caller.
    Input,
    /// Produced by a node.
    Value,
    /// Known at compile time.
    Constant(Tensor),
}

/// A tensor: name, type and origin.
#[derive(Debug, Clone, PartialEq)]
pub struct TensorData {
    /// The ONNX name (unique in the graph).
    pub name: String,
    /// Element type.
    pub dtype: DType,
    /// Static shape.
    pub shape: Shape,
    /// Origin.
    pub kind: TensorKind,
}

impl TensorData {
    /// Size in bytes.
    pub fn size_bytes(&self) -> usize {
        numel(&self.shape) * self.dtype.size()
    }
    /// The constant value, if any.
    pub fn constant(&self) -> Option<&Tensor> {
        match &self.kind {
            TensorKind::Constant(t) => Some(t),
            _ => None,
        }
    }
}

/// A node: an op applied to input tensors, producing output tensors.
#[derive(Debug, Clone, PartialEq)]
pub struct NodeData {
    /// The ONNX node name (or a generated one), for errors and kernel names.
    pub name: String,
    /// The ONNX op type it came from (for errors).
    pub onnx_op: String,
    /// The operator.
    pub op: Op,
    /// Inputs, in the op's order.
    pub inputs: Vec<TensorId>,
    /// Outputs.
    pub outputs: Vec<TensorId>,
}

/// A static-shape dataflow graph.
#[derive(Debug, Clone, Default)]
pub struct Graph {
    /// Model name.
    pub name: String,
    /// All tensors.
    pub tensors: PrimaryMap<TensorId, TensorData>,
    /// All nodes ever created (removed nodes stay here but leave `order`).
    pub nodes: PrimaryMap<NodeId, NodeData>,
    /// Live nodes in topological order.
    pub order: Vec<NodeId>,
    /// Model inputs, in ONNX order.
    pub inputs: Vec<TensorId>,
    /// Model outputs, in ONNX order.
    pub outputs: Vec<TensorId>,
    /// Warnings about the model (attributes that make some outputs NaN or infinite), naming node and attribute.
    pub warnings: Vec<String>,
}

impl Graph {
    /// Adds a tensor.
    pub fn add_tensor(
        &mut self,
        name: impl Into<String>,
        dtype: DType,
        shape: Shape,
        kind: TensorKind,
    ) -> TensorId {
        self.tensors.push(TensorData {
            name: name.into(),
            dtype,
            shape,
            kind,
        })
    }
    /// Adds a constant tensor.
    pub fn add_constant(&mut self, name: impl Into<String>, value: Tensor) -> TensorId {
        let (dtype, shape) = (value.dtype, value.shape.clone());
        self.add_tensor(name, dtype, shape, TensorKind::Constant(value))
    }
    /// Appends a node at the end of the order.
    pub fn push_node(&mut self, node: NodeData) -> NodeId {
        let id = self.nodes.push(node);
        self.order.push(id);
        id
    }
    /// The tensor's data.
    pub fn tensor(&self, t: TensorId) -> &TensorData {
        &self.tensors[t]
    }
    /// The constant value of a tensor, if it is a constant.
    pub fn constant(&self, t: TensorId) -> Option<&Tensor> {
        self.tensors[t].constant()
    }
    /// For each tensor, the live node producing it.
    pub fn producers(&self) -> cranelift_entity::SecondaryMap<TensorId, Option<NodeId>> {
        let mut p = cranelift_entity::SecondaryMap::new();
        for &n in &self.order {
            for &o in &self.nodes[n].outputs {
                p[o] = Some(n);
            }
        }
        p
    }
    /// For each tensor, how many live nodes read it (each read counted), plus one per model output use.
    pub fn use_counts(&self) -> cranelift_entity::SecondaryMap<TensorId, usize> {
        let mut c = cranelift_entity::SecondaryMap::new();
        for &n in &self.order {
            for &i in &self.nodes[n].inputs {
                c[i] += 1;
            }
        }
        for &o in &self.outputs {
            c[o] += 1;
        }
        c
    }
    /// Replaces every read of `from` (by live nodes and as a model output) with `to`.
    pub fn replace_uses(&mut self, from: TensorId, to: TensorId) {
        for &n in &self.order {
            for i in self.nodes[n].inputs.iter_mut() {
                if *i == from {
                    *i = to;
                }
            }
        }
        for o in self.outputs.iter_mut() {
            if *o == from {
                *o = to;
            }
        }
    }
    /// Removes nodes from the order.
    pub fn remove_nodes(&mut self, dead: &[NodeId]) {
        if dead.is_empty() {
            return;
        }
        let dead: std::collections::HashSet<NodeId> = dead.iter().copied().collect();
        self.order.retain(|n| !dead.contains(n));
    }
    /// The constant budget charged with every constant the graph holds (dead ones included: a conservative
    /// count), for a pass that folds more.
    pub fn const_budget(&self) -> ConstBudget {
        let mut b = ConstBudget::default();
        for t in self.tensors.values() {
            if let TensorKind::Constant(v) = &t.kind {
                // The constants are already held, so the charge can only fail past the limit, which the
                // importer's own budget already refused.
                let _ = b.take(v.len(), v.dtype);
            }
        }
        b
    }
}
