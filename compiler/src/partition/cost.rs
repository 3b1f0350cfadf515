//! The cost model. An NPU segment costs its program as written (`FusedSegment::total_cycles`: the dispatch
//! overhead, the fetch, and each op's body timed by `npu/clock.rs` with its waits and overlaps) and the host
//! copies that fill its `in` buffer and drain `out`. The CPU alternative costs each node's multiply-accumulates
//! (or elements, or bytes moved) at the host rates of the target description, converted to NPU cycles. A
//! segment stays on the NPU when CPU ≥ (NPU + transfers) × (1 + min_gain).

use crate::ir::{numel, Graph, NodeId, Op};
use crate::npu::fuse::FusedSegment;
use crate::npu::NpuTarget;

/// Host estimate of one node, in NPU cycles.
pub fn cpu_cycles(g: &Graph, n: NodeId, macs: u64, t: &NpuTarget) -> f64 {
    let node = &g.nodes[n];
    let out = &g.tensors[node.outputs[0]];
    let host = match node.op {
        Op::Conv(_) | Op::MatMul(_) | Op::Gemm(_) => macs as f64 / t.host.macs_per_cycle.f32 as f64,
        Op::QConv(..) | Op::QMatMul(_) => macs as f64 / t.host.macs_per_cycle.i8 as f64,
        Op::Reshape(_) | Op::Concat(_) => {
            out.size_bytes() as f64 / t.host.copy_bytes_per_cycle as f64
        }
        Op::Pool(_, ref a) => {
            (numel(&out.shape) * a.kernel[0] * a.kernel[1]) as f64
                / t.host.elements_per_cycle as f64
        }
        _ => {
            node.inputs
                .iter()
                .map(|&i| numel(&g.tensors[i].shape))
                .sum::<usize>() as f64
                / t.host.elements_per_cycle as f64
        }
    };
    t.host_to_npu_cycles(host)
}

/// Host copies at the segment's borders, in NPU cycles.
pub fn transfer_cycles(f: &FusedSegment, t: &NpuTarget) -> f64 {
    let bytes = f.sizes[0] + f.sizes[1];
    t.host_to_npu_cycles(bytes as f64 / t.host.copy_bytes_per_cycle as f64)
}

/// Whether offloading pays.
pub fn pays(npu: f64, transfer: f64, cpu: f64, min_gain: f64) -> bool {
    cpu >= (npu + transfer) * (1.0 + min_gain)
}

/// Microseconds of `cycles` at the NPU clock.
pub fn us(cycles: f64, t: &NpuTarget) -> f64 {
    cycles / t.clock_mhz as f64
}
