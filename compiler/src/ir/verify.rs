//! The graph verifier: checks the invariants documented in `ir::graph` (topological order, single producer,
//! inputs defined before use, shapes agreeing with each op's shape rule). The pipeline runs it after import and
//! after every pass when verification is on; a failure after a pass is a bundlec bug.

use super::graph::{Graph, TensorKind};
use super::ops;
use crate::error::{Error, Result};
use cranelift_entity::SecondaryMap;

/// Verifies `g`; `stage` names the pass that just ran (for the error).
pub fn verify(g: &Graph, stage: &'static str) -> Result<()> {
    let mut defined: SecondaryMap<super::TensorId, bool> = SecondaryMap::new();
    for (t, data) in g.tensors.iter() {
        if matches!(data.kind, TensorKind::Input | TensorKind::Constant(_)) {
            defined[t] = true;
        }
    }
    for &n in &g.order {
        let node = &g.nodes[n];
        for &i in &node.inputs {
            if !defined[i] {
                return Err(Error::internal(
                    stage,
                    format!(
                        "node '{}' reads tensor '{}' before it is produced",
                        node.name, g.tensors[i].name
                    ),
                ));
            }
        }
        let types: Vec<_> = node
            .inputs
            .iter()
            .map(|&i| (g.tensors[i].dtype, g.tensors[i].shape.as_slice()))
            .collect();
        let out = ops::infer(&node.op, &types).map_err(|e| {
            Error::internal(
                stage,
                format!("node '{}' ({}): {e}", node.name, node.op.name()),
            )
        })?;
        if out.len() != node.outputs.len() {
            return Err(Error::internal(
                stage,
                format!("node '{}' output count mismatch", node.name),
            ));
        }
        for ((dt, shape), &o) in out.iter().zip(&node.outputs) {
            let td = &g.tensors[o];
            if defined[o] {
                return Err(Error::internal(
                    stage,
                    format!("tensor '{}' has two producers", td.name),
                ));
            }
            if td.dtype != *dt || &td.shape != shape {
                return Err(Error::internal(
                    stage,
                    format!(
                        "tensor '{}' is {} {:?} but node '{}' makes {} {:?}",
                        td.name, td.dtype, td.shape, node.name, dt, shape
                    ),
                ));
            }
            defined[o] = true;
        }
    }
    for &o in &g.outputs {
        if !defined[o] {
            return Err(Error::internal(
                stage,
                format!("model output '{}' is never produced", g.tensors[o].name),
            ));
        }
    }
    Ok(())
}
