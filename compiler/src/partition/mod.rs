//! Heterogeneous partitioning (SPEC §7): for every node, the NPU op library's capability query (accept, or the
//! constraint it breaks) and a trial compile (the working set must fit after tiling); accepted nodes grouped into
//! maximal convex subgraphs (`assign.rs`); each group fused into one transaction and kept on the NPU only when
//! the cost model says it pays (`cost.rs`). The result is cached as JSON in VAIP's MetaDef shape (`cache.rs`) and
//! printed as a Vela-style table (`report.rs`).

pub mod assign;
pub mod cache;
pub mod cost;
pub mod placement;
pub mod report;

use crate::error::{Error, Result};
use crate::ir::{Graph, NodeId, TensorId};
use crate::npu::fuse::fuse;
use crate::npu::ops::{npu_op_for_node, NpuOp, OpProgram};
use std::collections::{HashMap, HashSet};

pub use placement::{Partition, PartitionOptions, Placement, Segment};

/// Whether a tensor is read by a node outside `inside` or is a model output; `readers` maps each tensor to the
/// nodes reading it (computed once per graph).
fn read_outside(
    g: &Graph,
    readers: &HashMap<TensorId, Vec<NodeId>>,
    inside: &HashSet<NodeId>,
    t: TensorId,
) -> bool {
    g.outputs.contains(&t)
        || readers
            .get(&t)
            .is_some_and(|r| r.iter().any(|n| !inside.contains(n)))
}

/// Partitions `g` for `opts.target`.
pub fn partition(g: &Graph, opts: &PartitionOptions) -> Result<Partition> {
    let t = &opts.target;
    let key = cache::key(g, opts);
    let mut ok: HashMap<NodeId, (NpuOp, OpProgram)> = HashMap::new();
    let mut placements: Vec<Placement> = Vec::new();
    for &n in &g.order {
        let r = npu_op_for_node(g, n, t)
            .map_err(|r| (r.constraint.id, r.detail))
            .and_then(|op| {
                op.program(t)
                    .map(|p| (op, p))
                    .map_err(|r| (r.constraint.id, r.detail))
            });
        let (constraint, reason) = match r {
            Ok(x) => {
                ok.insert(n, x);
                (None, None)
            }
            Err((c, why)) => (Some(c), Some(why)),
        };
        placements.push(Placement {
            node: n,
            segment: None,
            constraint,
            reason,
        });
    }
    let cached = match &opts.cache {
        Some(p) if p.exists() => cache::load(p, key, g, &|n| ok.contains_key(&n))?,
        _ => None,
    };
    let from_cache = cached.is_some();
    let groups = match cached {
        Some(gs) => gs,
        None => assign::group_convex(g, &|n| ok.contains_key(&n)),
    };
    let mut readers: HashMap<TensorId, Vec<NodeId>> = HashMap::new();
    for &n in &g.order {
        for &x in &g.nodes[n].inputs {
            readers.entry(x).or_default().push(n);
        }
    }
    let mut segments = Vec::new();
    let index: HashMap<NodeId, usize> = placements
        .iter()
        .enumerate()
        .map(|(i, p)| (p.node, i))
        .collect();
    for nodes in groups {
        let inside: HashSet<NodeId> = nodes.iter().copied().collect();
        let progs: Vec<OpProgram> = nodes.iter().map(|n| ok[n].1.clone()).collect();
        let fused = fuse(g, t, &nodes, &progs, |x| {
            read_outside(g, &readers, &inside, x)
        })
        .map_err(|e| Error::internal("partition", e))?;
        let cpu: f64 = nodes
            .iter()
            .zip(&progs)
            .map(|(&n, p)| cost::cpu_cycles(g, n, p.cost.macs, t))
            .sum();
        let transfer = cost::transfer_cycles(&fused, t);
        let npu = fused.total_cycles as f64;
        if !from_cache && !cost::pays(npu, transfer, cpu, opts.min_gain) {
            let why = format!(
                "offload does not pay: NPU {:.1} us + transfers {:.1} us vs CPU {:.1} us (min gain {})",
                cost::us(npu, t),
                cost::us(transfer, t),
                cost::us(cpu, t),
                opts.min_gain
            );
            for n in &nodes {
                let p = &mut placements[index[n]];
                p.constraint = Some("cost");
                p.reason = Some(why.clone());
            }
            continue;
        }
        let si = segments.len();
        for n in &nodes {
            placements[index[n]].segment = Some(si);
        }
        segments.push(Segment {
            id: format!("npu{si}"),
            ops: nodes.iter().map(|n| ok[n].0.clone()).collect(),
            nodes,
            fused,
            cpu_cycles: cpu,
            transfer_cycles: transfer,
        });
    }
    let p = Partition {
        target: t.clone(),
        segments,
        placements,
        key,
        from_cache,
    };
    if let Some(path) = &opts.cache {
        if !from_cache {
            let text = serde_json::to_string_pretty(&cache::to_json(g, &p))
                .map_err(|e| Error::internal("partition", e))?;
            crate::fsio::write_file(path, (text + "\n").as_bytes())?;
        }
    }
    if opts.strict {
        let cpu: Vec<String> = p
            .placements
            .iter()
            .filter(|x| x.segment.is_none())
            .map(|x| {
                format!(
                    "{} ({}): {}",
                    g.nodes[x.node].name,
                    g.nodes[x.node].onnx_op,
                    x.reason.clone().unwrap_or_default()
                )
            })
            .collect();
        if p.segments.is_empty() {
            return Err(Error::NpuStrict {
                message: format!(
                    "nothing was placed on the NPU; {} node(s) stay on the CPU:\n  {}",
                    cpu.len(),
                    cpu.join("\n  ")
                ),
            });
        }
    }
    Ok(p)
}
