//! Graph-to-graph passes, one per file; transforms are verbs. Each keeps the `ir::graph` invariants and keeps
//! model output tensors (and their names) in place: a fused node takes over the output tensor of the last node
//! it absorbs.

pub mod eliminate_dead_nodes;
pub mod fold_batchnorm;
pub mod fold_constants;
pub mod fold_pad;
pub mod fold_qdq;
pub mod fuse_epilogues;
pub mod fuse_gelu;
pub mod fuse_transposes;
pub mod quantize;
pub mod trim_taps;

use crate::ir::{Graph, NodeId, TensorId};

/// Live nodes that read `t`.
pub(crate) fn consumers(g: &Graph, t: TensorId) -> Vec<NodeId> {
    g.order
        .iter()
        .copied()
        .filter(|&n| g.nodes[n].inputs.contains(&t))
        .collect()
}

/// Whether `t` has exactly one reader, which is a node, and is not a model output.
pub(crate) fn single_use(g: &Graph, t: TensorId) -> Option<NodeId> {
    if g.outputs.contains(&t) {
        return None;
    }
    let c = consumers(g, t);
    let reads: usize = c
        .iter()
        .map(|&n| g.nodes[n].inputs.iter().filter(|&&i| i == t).count())
        .sum();
    (c.len() == 1 && reads == 1).then(|| c[0])
}
