//! `--outputs`: the part of a model that computes chosen tensors. A detector's post-processing (NonZero, TopK
//! with a run-time k, NonMaxSuppression) has output shapes that depend on the data, which an ahead-of-time
//! bundle cannot have; its backbone and head have static shapes. Selecting the head's tensors as the outputs
//! keeps exactly the nodes they need and the graph inputs those nodes read; the user deploys that part and
//! post-processes on the host.

use crate::error::{clip_name, Error, Result};
use std::collections::{HashMap, HashSet};
use tract_onnx::pb::{GraphProto, ValueInfoProto};

/// Rewrites `graph` to compute `outputs` (tensor names, in order) and nothing else: the nodes they need
/// (transitively, in the model's order), the graph inputs those nodes read, every initializer. An error names a
/// tensor that no node, input or initializer of the model produces, or one named twice.
pub fn select_outputs(graph: &mut GraphProto, outputs: &[String]) -> Result<()> {
    let mut producer: HashMap<&str, usize> = HashMap::new();
    for (i, node) in graph.node.iter().enumerate() {
        for o in node.output.iter().filter(|o| !o.is_empty()) {
            producer.insert(o.as_str(), i);
        }
    }
    let sources: HashSet<&str> = graph
        .input
        .iter()
        .map(|v| v.name.as_str())
        .chain(graph.initializer.iter().map(|t| t.name.as_str()))
        .collect();
    for (i, o) in outputs.iter().enumerate() {
        if outputs[..i].contains(o) {
            return Err(Error::tensor(
                &clip_name(o),
                "--outputs names this tensor twice",
            ));
        }
        if !producer.contains_key(o.as_str()) && !sources.contains(o.as_str()) {
            return Err(Error::tensor(
                &clip_name(o),
                "--outputs: no node, graph input or initializer of the model produces it",
            ));
        }
    }
    // The nodes the outputs need, walking producers back from them.
    let mut needed: HashSet<usize> = HashSet::new();
    let mut read: HashSet<String> = HashSet::new();
    let mut stack: Vec<String> = outputs.to_vec();
    while let Some(t) = stack.pop() {
        if !read.insert(t.clone()) {
            continue;
        }
        if let Some(&i) = producer.get(t.as_str()) {
            if needed.insert(i) {
                stack.extend(
                    graph.node[i]
                        .input
                        .iter()
                        .filter(|n| !n.is_empty())
                        .cloned(),
                );
            }
        }
    }
    let mut i = 0;
    graph.node.retain(|_| {
        i += 1;
        needed.contains(&(i - 1))
    });
    graph.input.retain(|v| read.contains(&v.name));
    graph.output = outputs
        .iter()
        .map(|o| ValueInfoProto {
            name: o.clone(),
            ..Default::default()
        })
        .collect();
    Ok(())
}
