//! What a partition is: the options it was made under, and the placement of every node (CPU, or an NPU segment
//! with its fused op programs).

use crate::ir::NodeId;
use crate::npu::fuse::FusedSegment;
use crate::npu::ops::NpuOp;
use crate::npu::NpuTarget;
use std::collections::HashMap;
use std::path::PathBuf;

/// Partitioning options (the CLI's `--npu*` flags).
#[derive(Debug, Clone)]
pub struct PartitionOptions {
    /// The target.
    pub target: NpuTarget,
    /// Required relative gain for a segment to stay on the NPU.
    pub min_gain: f64,
    /// `--partition-cache FILE`.
    pub cache: Option<PathBuf>,
    /// `--npu-strict`: an error when nothing lands on the NPU.
    pub strict: bool,
    /// Hash of the model source (file bytes), part of the cache key.
    pub model_hash: u64,
}

/// A segment placed on the NPU.
#[derive(Debug, Clone)]
pub struct Segment {
    /// `npu0`, `npu1`, ...
    pub id: String,
    /// Its nodes, topological.
    pub nodes: Vec<NodeId>,
    /// Their NPU ops.
    pub ops: Vec<NpuOp>,
    /// The fused program.
    pub fused: FusedSegment,
    /// CPU estimate of the same nodes, NPU cycles.
    pub cpu_cycles: f64,
    /// Border copies, NPU cycles.
    pub transfer_cycles: f64,
}

/// Where a node went and why.
#[derive(Debug, Clone)]
pub struct Placement {
    /// The node.
    pub node: NodeId,
    /// Segment index, or None for the CPU.
    pub segment: Option<usize>,
    /// Constraint id (`op`, `dtype`, ..., `cost`) when on the CPU.
    pub constraint: Option<&'static str>,
    /// Why it is on the CPU.
    pub reason: Option<String>,
}

/// The partition of a graph.
#[derive(Debug, Clone)]
pub struct Partition {
    /// The target.
    pub target: NpuTarget,
    /// NPU segments, in topological order of their first node.
    pub segments: Vec<Segment>,
    /// Every live node, in graph order.
    pub placements: Vec<Placement>,
    /// Cache key.
    pub key: u64,
    /// Whether the assignment came from the cache file.
    pub from_cache: bool,
}

impl Partition {
    /// Segment of each node.
    pub fn segment_of(&self) -> HashMap<NodeId, usize> {
        self.placements
            .iter()
            .filter_map(|p| p.segment.map(|s| (p.node, s)))
            .collect()
    }
}
