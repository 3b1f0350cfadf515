//! The graph interpreter: runs every node of a `Graph` in order with the reference semantics of `ir/ops`,
//! freeing each value after its last reader. `bundlec profile` records statistics through its callback; the
//! int8 tests use it as the oracle of whole quantised graphs.

use super::{Graph, Tensor, TensorId};
use std::collections::HashMap;

/// Runs `g` on `inputs` (one per graph input, in order); `seen` is called with every graph input and every node
/// output as it is produced. Returns the model outputs. Errors are plain messages naming the node.
pub fn run(
    g: &Graph,
    inputs: Vec<Tensor>,
    seen: &mut dyn FnMut(TensorId, &Tensor),
) -> Result<Vec<Tensor>, String> {
    if inputs.len() != g.inputs.len() {
        return Err(format!(
            "{} inputs given, the graph has {}",
            inputs.len(),
            g.inputs.len()
        ));
    }
    let uses = g.use_counts();
    let mut left = uses.clone();
    let mut vals: HashMap<TensorId, Tensor> = HashMap::new();
    for (&t, v) in g.inputs.iter().zip(inputs) {
        seen(t, &v);
        vals.insert(t, v);
    }
    for &nid in &g.order {
        let node = &g.nodes[nid];
        let ins: Vec<&Tensor> = node
            .inputs
            .iter()
            .map(|&t| {
                vals.get(&t)
                    .or_else(|| g.constant(t))
                    .ok_or_else(|| format!("no value for tensor '{}'", g.tensors[t].name))
            })
            .collect::<Result<_, _>>()?;
        let outs = super::ops::eval(&node.op, &ins)
            .map_err(|m| format!("node '{}' ({}): {m}", node.name, node.onnx_op))?;
        for &t in &node.inputs {
            left[t] = left[t].saturating_sub(1);
            if left[t] == 0 && !g.outputs.contains(&t) {
                vals.remove(&t);
            }
        }
        for (&t, v) in node.outputs.iter().zip(outs) {
            seen(t, &v);
            if uses[t] > 0 {
                vals.insert(t, v);
            }
        }
    }
    g.outputs
        .iter()
        .map(|&t| {
            vals.get(&t)
                .or_else(|| g.constant(t))
                .cloned()
                .ok_or_else(|| format!("no value for output '{}'", g.tensors[t].name))
        })
        .collect()
}
