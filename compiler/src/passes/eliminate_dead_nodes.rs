//! `eliminate_dead_nodes`: removes nodes none of whose outputs is read by a live node or is a model output.

use crate::ir::Graph;
use std::collections::HashSet;

/// Removes dead nodes; returns how many.
pub fn eliminate_dead_nodes(g: &mut Graph) -> usize {
    let mut needed: HashSet<_> = g.outputs.iter().copied().collect();
    let mut dead = Vec::new();
    for &n in g.order.iter().rev() {
        let node = &g.nodes[n];
        if node.outputs.iter().any(|o| needed.contains(o)) {
            needed.extend(node.inputs.iter().copied());
        } else {
            dead.push(n);
        }
    }
    g.remove_nodes(&dead);
    dead.len()
}
