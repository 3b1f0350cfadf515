//! Fusion of a segment's ops into one transaction, as DynamicDispatch does: the segment's inputs are packed into
//! the fused `in` buffer, its outputs into `out`, tensors that live only inside the segment into `scratch`
//! (offsets reused once a tensor is dead), every op's constants and parameter blocks appended to `const` and
//! `super_instr`. Each op's DDR_PATCH records, written against its own arg map, are rewritten to the fused buffer
//! and offset of the tensor they address; op bodies are appended after one header whose op count and size are
//! the sums. The result also lists the copies that fill `in` and drain `out`.

use super::ops::{ArgKind, OpCost, OpProgram};
use super::target::NpuTarget;
use super::txn::{self, TxnBody, Xrt};
use crate::ir::{Graph, NodeId, TensorId};
use std::collections::HashMap;

/// A segment compiled for the NPU.
#[derive(Debug, Clone, Default)]
pub struct FusedSegment {
    /// The transaction container.
    pub txn: Vec<u8>,
    /// Fused `const` buffer.
    pub consts: Vec<u8>,
    /// Fused `super_instr` buffer.
    pub params: Vec<u8>,
    /// Bytes of `in`, `out`, `scratch`.
    pub sizes: [usize; 3],
    /// Segment inputs and their offsets in `in`.
    pub inputs: Vec<(TensorId, usize)>,
    /// Segment outputs and their offsets in `out`.
    pub outputs: Vec<(TensorId, usize)>,
    /// Tensors internal to the segment and their offsets in `scratch` (offsets reused once dead).
    pub scratch: Vec<(TensorId, usize)>,
    /// Per op, in segment order: (offset, bytes) of its constants in `const` and of its parameter
    /// blocks in `super_instr`.
    pub op_blobs: Vec<[(usize, usize); 2]>,
    /// Estimated cycles: instruction transfer (with dispatch), data transfer, compute.
    pub cycles: [u64; 3],
    /// The segment as programmed: the dispatch overhead, the header's fetch and Σ over ops of their bodies'
    /// elapsed cycles ([`OpCost::elapsed`]).
    pub total_cycles: u64,
    /// Per-op cost, in segment order.
    pub op_costs: Vec<OpCost>,
}

fn a64(x: usize) -> usize {
    x.div_ceil(64) * 64
}

/// Fuses the programs of `nodes` (topological order; `progs[i]` compiled from `nodes[i]`). `outside` says
/// whether a tensor is read after the segment (by another node or as a model output).
pub fn fuse(
    g: &Graph,
    t: &NpuTarget,
    nodes: &[NodeId],
    progs: &[OpProgram],
    outside: impl Fn(TensorId) -> bool,
) -> Result<FusedSegment, String> {
    let produced: HashMap<TensorId, usize> = nodes
        .iter()
        .enumerate()
        .flat_map(|(i, &n)| g.nodes[n].outputs.iter().map(move |&o| (o, i)))
        .collect();
    let mut last_use: HashMap<TensorId, usize> = HashMap::new();
    let mut f = FusedSegment::default();
    let mut loc: HashMap<TensorId, (Xrt, usize)> = HashMap::new();
    for (i, &n) in nodes.iter().enumerate() {
        for &x in &g.nodes[n].inputs {
            if g.constant(x).is_some() {
                continue;
            }
            last_use.insert(x, i);
            if !produced.contains_key(&x) && !loc.contains_key(&x) {
                loc.insert(x, (Xrt::In, f.sizes[0]));
                f.inputs.push((x, f.sizes[0]));
                f.sizes[0] += a64(g.tensors[x].size_bytes().max(1));
            }
        }
    }
    // Outputs first (they live to the end), then internal tensors packed by op-index liveness.
    let mut internal = Vec::new();
    for &n in nodes {
        for &o in &g.nodes[n].outputs {
            if outside(o) {
                loc.insert(o, (Xrt::Out, f.sizes[1]));
                f.outputs.push((o, f.sizes[1]));
                f.sizes[1] += a64(g.tensors[o].size_bytes().max(1));
            } else {
                internal.push(o);
            }
        }
    }
    let mut placed: Vec<(usize, usize, usize, usize)> = Vec::new(); // (from, to, offset, size)
    for o in internal {
        let from = produced[&o];
        let to = last_use.get(&o).copied().unwrap_or(from);
        let size = a64(g.tensors[o].size_bytes().max(1));
        let mut busy: Vec<(usize, usize)> = placed
            .iter()
            .filter(|p| p.0 <= to && from <= p.1)
            .map(|p| (p.2, p.2 + p.3))
            .collect();
        busy.sort();
        let mut off = 0;
        for (s, e) in busy {
            if off + size <= s {
                break;
            }
            off = off.max(e);
        }
        placed.push((from, to, off, size));
        f.sizes[2] = f.sizes[2].max(off + size);
        loc.insert(o, (Xrt::Scratch, off));
        f.scratch.push((o, off));
    }
    let mut body = TxnBody::default();
    let (mut data, mut compute, mut work) = (0u64, 0u64, 0u64);
    for (i, (&n, p)) in nodes.iter().zip(progs).enumerate() {
        let node = &g.nodes[n];
        let const_base = f.consts.len();
        f.consts.extend_from_slice(&p.consts);
        f.consts.resize(a64(f.consts.len()), 0);
        let param_base = f.params.len();
        f.params.extend_from_slice(&p.params);
        f.params.resize(a64(f.params.len()), 0);
        f.op_blobs
            .push([(const_base, p.consts.len()), (param_base, p.params.len())]);
        let acts: Vec<TensorId> = node
            .inputs
            .iter()
            .copied()
            .filter(|&x| g.constant(x).is_none())
            .collect();
        let mut map = Vec::new(); // (op-local buffer, start, end) -> (fused buffer, base)
        let (mut ki, mut ko) = (0, 0);
        for e in &p.arg_map {
            let target = match e.kind {
                ArgKind::Input => {
                    let tsr = *acts.get(ki).ok_or_else(|| {
                        format!(
                            "node '{}': arg map has more inputs than the node",
                            node.name
                        )
                    })?;
                    ki += 1;
                    loc[&tsr]
                }
                ArgKind::Output => {
                    let tsr = *node.outputs.get(ko).ok_or_else(|| {
                        format!(
                            "node '{}': arg map has more outputs than the node",
                            node.name
                        )
                    })?;
                    ko += 1;
                    loc[&tsr]
                }
                ArgKind::ConstInput => (Xrt::Const, const_base + e.offset as usize),
                ArgKind::ConstKernelParamInput => (Xrt::Params, param_base + e.offset as usize),
                ArgKind::ScratchPad => {
                    return Err(format!(
                        "node '{}': per-op DDR scratch is not used",
                        node.name
                    ))
                }
            };
            map.push((e.xrt, e.offset, e.offset + e.size, target));
        }
        let mut bytes = p.body.bytes.clone();
        rewrite_patches(&mut bytes, |buf, plus| {
            map.iter()
                .find(|m| m.0 as u64 == buf && m.1 <= plus && plus < m.2.max(m.1 + 1))
                .map(|m| ((m.3).0 as u64, ((m.3).1 as u64) + plus - m.1))
        })
        .map_err(|e| format!("node '{}' op {i}: {e}", node.name))?;
        body.append_raw(&bytes, p.body.ops);
        data += p.cost.dma_cycles;
        compute += p.cost.compute_cycles;
        work += p.cost.elapsed;
        f.op_costs.push(p.cost);
    }
    f.txn = txn::container(t, &body);
    let instr = (f.txn.len() as u64).div_ceil(t.instr_bytes_per_cycle as u64)
        + t.dispatch_overhead_cycles as u64;
    f.cycles = [instr, data, compute];
    // As programmed: the dispatch, the header's fetch, then each op's body, which ends with nothing in flight.
    let header = (txn::HEADER_BYTES as u64).div_ceil(t.instr_bytes_per_cycle.max(1) as u64);
    f.total_cycles = t.dispatch_overhead_cycles as u64 + header + work;
    Ok(f)
}

/// Walks op records and rewrites each DDR_PATCH's (argidx, argplus) through `map`.
fn rewrite_patches(
    bytes: &mut [u8],
    map: impl Fn(u64, u64) -> Option<(u64, u64)>,
) -> Result<(), String> {
    let rd32 =
        |b: &[u8], at: usize| u32::from_le_bytes([b[at], b[at + 1], b[at + 2], b[at + 3]]) as usize;
    let rd64 = |b: &[u8], at: usize| u64::from_le_bytes(b[at..at + 8].try_into().unwrap_or([0; 8]));
    let mut at = 0;
    while at < bytes.len() {
        let size = match bytes[at] {
            txn::OP_WRITE => 24,
            txn::OP_BLOCKWRITE => rd32(bytes, at + 12),
            txn::OP_MASKWRITE | txn::OP_MASKPOLL => 32,
            op if op >= 128 => rd32(bytes, at + 4),
            op => return Err(format!("unexpected opcode {op} at byte {at}")),
        };
        if bytes[at] == txn::OP_DDR_PATCH {
            let (buf, plus) = (rd64(bytes, at + 32), rd64(bytes, at + 40));
            let (nb, np) = map(buf, plus).ok_or_else(|| {
                format!("patch of buffer {buf} + {plus} matches no arg map entry")
            })?;
            bytes[at + 32..at + 40].copy_from_slice(&nb.to_le_bytes());
            bytes[at + 40..at + 48].copy_from_slice(&np.to_le_bytes());
        }
        at += size.max(1);
    }
    Ok(())
}
