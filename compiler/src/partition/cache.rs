//! The partition cache (`--partition-cache FILE`). Each `segments[]` entry is the protobuf JSON of VAIP's
//! `vaip_core.MetaDefProto` (capability.proto's field names): `id`, `inputs`, `outputs`, `nodes` (each node named
//! by its first output), `constant_initializers`, `device`, and bundlec's estimates as strings in `generic_param`
//! (`cycles.instruction`, `bytes.in`, ...). The file level holds `version`, `key`, `target` and per CPU node the
//! constraint and reason. The key hashes the model, the target description and the flags; a file with another key,
//! or of an older version, is rewritten; a file with this key is re-validated (known nodes, each accepted by the
//! op library, at most one segment each, convex groups) and its assignment reused. Errors name the field at
//! fault.

use super::assign;
use super::placement::{Partition, PartitionOptions};
use crate::error::{Error, Result};
use crate::ir::{Graph, NodeId};
use bundle_rt::fnv1a64;
use serde_json::{json, Value};
use std::collections::{HashMap, HashSet};
use std::path::Path;

/// Cache format version (2: segments as MetaDefProto JSON).
pub const VERSION: u64 = 2;

/// The cache key of a model, target and flags.
pub fn key(g: &Graph, o: &PartitionOptions) -> u64 {
    let mut s = format!(
        "{:x}|{}|{}|",
        o.model_hash,
        serde_json::to_string(&o.target).unwrap_or_default(),
        o.min_gain
    );
    for &n in &g.order {
        let node = &g.nodes[n];
        s.push_str(&format!(
            "{}:{}:{:?};",
            node.name,
            node.onnx_op,
            node.outputs
                .iter()
                .map(|&t| &g.tensors[t].shape)
                .collect::<Vec<_>>()
        ));
    }
    fnv1a64(s.as_bytes())
}

/// Longest name echoed back in an error, in bytes.
const MAX_ECHOED_NAME: usize = 64;

/// A name for an error message: at most [`MAX_ECHOED_NAME`] bytes, marked when cut.
fn shorten(name: &str) -> String {
    crate::error::clip_to(name, MAX_ECHOED_NAME)
}

fn first_output(g: &Graph, n: NodeId) -> &str {
    &g.tensors[g.nodes[n].outputs[0]].name
}

/// The cache document.
pub fn to_json(g: &Graph, p: &Partition) -> Value {
    let segs: Vec<Value> = p
        .segments
        .iter()
        .map(|s| {
            let names = |v: &[(crate::ir::TensorId, usize)]| {
                v.iter()
                    .map(|(t, _)| g.tensors[*t].name.clone())
                    .collect::<Vec<_>>()
            };
            let mut consts: Vec<String> = s
                .nodes
                .iter()
                .flat_map(|&n| {
                    g.nodes[n]
                        .inputs
                        .iter()
                        .filter(|&&t| g.constant(t).is_some())
                        .map(|&t| g.tensors[t].name.clone())
                })
                .collect();
            consts.sort();
            consts.dedup();
            let f = &s.fused;
            let dma: u64 = f.op_costs.iter().map(|c| c.dma_bytes).sum();
            let extras: [(&str, u64); 13] = [
                ("cycles.instruction", f.cycles[0]),
                ("cycles.data", f.cycles[1]),
                ("cycles.compute", f.cycles[2]),
                ("cycles.total", f.total_cycles),
                ("cycles.cpu", s.cpu_cycles.round() as u64),
                ("cycles.transfer", s.transfer_cycles.round() as u64),
                ("bytes.in", f.sizes[0] as u64),
                ("bytes.out", f.sizes[1] as u64),
                ("bytes.scratch", f.sizes[2] as u64),
                ("bytes.const", f.consts.len() as u64),
                ("bytes.params", f.params.len() as u64),
                ("bytes.dma", dma),
                ("bytes.txn", f.txn.len() as u64),
            ];
            // protobuf JSON of a map<string, string>: every value a string.
            let generic: serde_json::Map<String, Value> = extras
                .iter()
                .map(|(k, v)| (k.to_string(), Value::String(v.to_string())))
                .collect();
            json!({
                "id": s.id,
                "inputs": names(&f.inputs),
                "outputs": names(&f.outputs),
                "nodes": s.nodes.iter().map(|&n| first_output(g, n)).collect::<Vec<_>>(),
                "constant_initializers": consts,
                "device": p.target.name,
                "generic_param": generic,
            })
        })
        .collect();
    let rejected: Vec<Value> = p
        .placements
        .iter()
        .filter(|x| x.segment.is_none())
        .map(|x| {
            json!({
                "node": first_output(g, x.node),
                "op": g.nodes[x.node].onnx_op,
                "constraint": x.constraint.unwrap_or(""),
                "reason": x.reason.clone().unwrap_or_default(),
            })
        })
        .collect();
    json!({
        "version": VERSION,
        "key": format!("{:016x}", p.key),
        "target": p.target.name,
        "segments": segs,
        "rejected": rejected,
    })
}

/// Reads a cache file: `Ok(None)` when its key differs (it will be rewritten), the groups when it is valid.
pub fn load(
    path: &Path,
    key: u64,
    g: &Graph,
    accepted: &dyn Fn(NodeId) -> bool,
) -> Result<Option<Vec<Vec<NodeId>>>> {
    let file = path.display().to_string();
    let bad = |field: String, message: String| Error::PartitionCache {
        file: file.clone(),
        field,
        message,
    };
    let text =
        crate::fsio::read_text_bounded(path, crate::fsio::MAX_TEXT_BYTES, "a partition cache")?;
    let v: Value = serde_json::from_str(&text)
        .map_err(|e| bad(format!("line {}", e.line()), e.to_string()))?;
    match v.get("version").and_then(Value::as_u64) {
        Some(VERSION) => {}
        // An older bundlec's cache: rewritten like one of another model.
        Some(old) if old < VERSION => return Ok(None),
        _ => return Err(bad("version".into(), format!("expected {VERSION}"))),
    }
    let k = v
        .get("key")
        .and_then(Value::as_str)
        .ok_or_else(|| bad("key".into(), "missing or not a string".into()))?;
    if k != format!("{key:016x}") {
        return Ok(None);
    }
    let by_name: HashMap<&str, NodeId> = g.order.iter().map(|&n| (first_output(g, n), n)).collect();
    let segs = v
        .get("segments")
        .and_then(Value::as_array)
        .ok_or_else(|| bad("segments".into(), "missing or not an array".into()))?;
    let pos: HashMap<NodeId, usize> = g.order.iter().enumerate().map(|(i, &n)| (n, i)).collect();
    let mut seen = HashSet::new();
    let mut groups = Vec::new();
    for (i, s) in segs.iter().enumerate() {
        let nodes = s.get("nodes").and_then(Value::as_array).ok_or_else(|| {
            bad(
                format!("segments[{i}].nodes"),
                "missing or not an array".into(),
            )
        })?;
        if nodes.is_empty() {
            return Err(bad(
                format!("segments[{i}].nodes"),
                "empty (a segment holds at least one node)".into(),
            ));
        }
        let mut grp = Vec::new();
        for (j, n) in nodes.iter().enumerate() {
            let field = format!("segments[{i}].nodes[{j}]");
            let name = n
                .as_str()
                .ok_or_else(|| bad(field.clone(), "not a string".into()))?;
            let id = *by_name.get(name).ok_or_else(|| {
                bad(
                    field.clone(),
                    format!("no node's first output is '{}'", shorten(name)),
                )
            })?;
            if !accepted(id) {
                return Err(bad(
                    field,
                    format!(
                        "node '{}' cannot run on the NPU",
                        shorten(&g.nodes[id].name)
                    ),
                ));
            }
            if !seen.insert(id) {
                return Err(bad(
                    field,
                    format!("node '{}' is in two segments", shorten(name)),
                ));
            }
            grp.push(id);
        }
        grp.sort_by_key(|n| pos[n]);
        groups.push(grp);
    }
    assign::is_convex(g, &groups).map_err(|e| bad("segments".into(), e))?;
    Ok(Some(groups))
}
