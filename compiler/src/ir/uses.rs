//! `Uses`: who writes and who reads each tensor among the live nodes, built once in O(nodes) and kept up to date
//! by the rewrites that use it, so that a pass or the lowering asks "the producer of t", "the readers of t" or
//! "t's single reader" in O(1) instead of scanning the order for every node it visits (which made long chains of
//! Convs, BatchNorms or Transposes quadratic).

use super::graph::{Graph, NodeId, TensorId};
use std::collections::{HashMap, HashSet};

/// Producers and readers of the live nodes' tensors, and the model outputs.
#[derive(Debug, Clone, Default)]
pub struct Uses {
    producer: HashMap<TensorId, NodeId>,
    /// One entry per read: a node reading a tensor twice appears twice.
    readers: HashMap<TensorId, Vec<NodeId>>,
    outputs: HashSet<TensorId>,
}

impl Uses {
    /// The index of `g`'s live nodes.
    pub fn new(g: &Graph) -> Uses {
        let mut u = Uses {
            outputs: g.outputs.iter().copied().collect(),
            ..Uses::default()
        };
        for &n in &g.order {
            for &o in &g.nodes[n].outputs {
                u.producer.insert(o, n);
            }
            for &i in &g.nodes[n].inputs {
                u.readers.entry(i).or_default().push(n);
            }
        }
        u
    }
    /// The live node that writes `t`, if any.
    pub fn producer(&self, t: TensorId) -> Option<NodeId> {
        self.producer.get(&t).copied()
    }
    /// The distinct live nodes that read `t`, in the order they were recorded.
    pub fn consumers(&self, t: TensorId) -> Vec<NodeId> {
        let mut seen = HashSet::new();
        self.readers
            .get(&t)
            .into_iter()
            .flatten()
            .copied()
            .filter(|n| seen.insert(*n))
            .collect()
    }
    /// `t`'s only reader when exactly one node reads it, once, and it is not a model output.
    pub fn single_use(&self, t: TensorId) -> Option<NodeId> {
        match self.readers.get(&t) {
            Some(r) if r.len() == 1 && !self.outputs.contains(&t) => Some(r[0]),
            _ => None,
        }
    }
    /// Sets input `k` of `node` to `to`, keeping the index in step.
    pub fn set_input(&mut self, g: &mut Graph, node: NodeId, k: usize, to: TensorId) {
        let from = std::mem::replace(&mut g.nodes[node].inputs[k], to);
        self.drop_read(from, node);
        self.readers.entry(to).or_default().push(node);
    }
    /// Replaces all of `node`'s inputs, keeping the index in step.
    pub fn set_inputs(&mut self, g: &mut Graph, node: NodeId, inputs: Vec<TensorId>) {
        for i in std::mem::replace(&mut g.nodes[node].inputs, inputs) {
            self.drop_read(i, node);
        }
        for &i in &g.nodes[node].inputs {
            self.readers.entry(i).or_default().push(node);
        }
    }
    /// Records that `node` now writes `outputs` instead of what it wrote before.
    pub fn set_outputs(&mut self, g: &mut Graph, node: NodeId, outputs: Vec<TensorId>) {
        for o in std::mem::replace(&mut g.nodes[node].outputs, outputs) {
            if self.producer.get(&o) == Some(&node) {
                self.producer.remove(&o);
            }
        }
        for &o in &g.nodes[node].outputs {
            self.producer.insert(o, node);
        }
    }
    /// Records `node`'s current reads and writes (after it was rewritten in place following [`Uses::remove_node`]).
    pub fn add_node(&mut self, g: &Graph, node: NodeId) {
        for &i in &g.nodes[node].inputs {
            self.readers.entry(i).or_default().push(node);
        }
        for &o in &g.nodes[node].outputs {
            self.producer.insert(o, node);
        }
    }
    /// Records that `node` left the order (the caller removes it): it reads and writes nothing any more.
    pub fn remove_node(&mut self, g: &Graph, node: NodeId) {
        for &i in &g.nodes[node].inputs {
            self.drop_read(i, node);
        }
        for o in &g.nodes[node].outputs {
            if self.producer.get(o) == Some(&node) {
                self.producer.remove(o);
            }
        }
    }
    fn drop_read(&mut self, t: TensorId, node: NodeId) {
        if let Some(r) = self.readers.get_mut(&t) {
            if let Some(at) = r.iter().position(|&n| n == node) {
                r.swap_remove(at);
            }
        }
    }
}
