//! `fold_constants`: evaluates every node whose inputs are all constants with the reference semantics and turns
//! its outputs into constants (same tensor ids and names), then drops the node.

use crate::error::{Error, Result};
use crate::ir::{numel, ops, Graph, TensorId, TensorKind};
use std::collections::HashSet;

/// Folds constant nodes; returns how many were folded.
pub fn fold_constants(g: &mut Graph) -> Result<usize> {
    let mut folded = Vec::new();
    let mut budget = g.const_budget();
    let outputs: HashSet<TensorId> = g.outputs.iter().copied().collect();
    for &n in &g.order.clone() {
        let node = &g.nodes[n];
        if node.inputs.is_empty() || !node.inputs.iter().all(|&i| g.constant(i).is_some()) {
            continue;
        }
        // Model outputs must be written by a kernel: keep the node that produces them.
        if node.outputs.iter().any(|o| outputs.contains(o)) {
            continue;
        }
        // Every folded value is charged before it is computed (one budget with the graph's constants).
        for &o in &node.outputs {
            let t = &g.tensors[o];
            budget
                .take(numel(&t.shape), t.dtype)
                .map_err(|m| Error::node(&node.name, &node.onnx_op, m))?;
        }
        let vals: Vec<_> = node.inputs.iter().filter_map(|&i| g.constant(i)).collect();
        let outs =
            ops::eval(&node.op, &vals).map_err(|m| Error::node(&node.name, &node.onnx_op, m))?;
        for (&o, v) in node.outputs.clone().iter().zip(outs) {
            g.tensors[o].kind = TensorKind::Constant(v);
        }
        folded.push(n);
    }
    g.remove_nodes(&folded);
    Ok(folded.len())
}
