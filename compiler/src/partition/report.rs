//! The placement table of `bundlec partition` and `bundlec compile -v`, in the spirit of Vela's reports: totals
//! (nodes on the NPU and the CPU with percentages), per segment its sizes and estimated cycles, per NPU op its
//! kernel, MACs, compute vs DMA cycles and MAC utilisation, and per CPU node the constraint and reason.

use super::cost::us;
use super::placement::Partition;
use crate::ir::Graph;
use std::fmt::Write;

/// The table as text.
pub fn table(g: &Graph, p: &Partition) -> String {
    let t = &p.target;
    let mut s = String::new();
    let total = p.placements.len().max(1);
    let on = p.placements.iter().filter(|x| x.segment.is_some()).count();
    let _ =
        writeln!(
        s,
        "target {}: {} core tiles x {} KiB local, {} MHz, {} f32 / {} int8 MAC/cycle per tile{}",
        t.name,
        t.core_tiles().len(),
        t.local_memory_bytes / 1024,
        t.clock_mhz,
        t.macs_per_cycle.f32,
        t.macs_per_cycle.i8,
        if p.from_cache { " (assignment from the partition cache)" } else { "" }
    );
    let _ = writeln!(
        s,
        "nodes: {on} on the NPU ({:.1}%), {} on the CPU ({:.1}%), {} segment(s)",
        100.0 * on as f64 / total as f64,
        total - on,
        100.0 * (total - on) as f64 / total as f64,
        p.segments.len()
    );
    if p.segments.is_empty() {
        let _ = writeln!(
            s,
            "WARNING: nothing was placed on the NPU; the whole model runs on the CPU"
        );
    }
    for seg in &p.segments {
        let f = &seg.fused;
        let _ = writeln!(
            s,
            "\nsegment {}: {} ops; bytes in {} out {} scratch {} const {} params {}; txn {} B",
            seg.id,
            seg.nodes.len(),
            f.sizes[0],
            f.sizes[1],
            f.sizes[2],
            f.consts.len(),
            f.params.len(),
            f.txn.len()
        );
        let _ = writeln!(
            s,
            "  cycles: instruction {} data {} compute {} total {} ({:.1} us); CPU estimate {:.1} us; transfers {:.1} us",
            f.cycles[0],
            f.cycles[1],
            f.cycles[2],
            f.total_cycles,
            us(f.total_cycles as f64, t),
            us(seg.cpu_cycles, t),
            us(seg.transfer_cycles, t)
        );
        let _ = writeln!(
            s,
            "  | node | op | kernel | MACs | compute cyc | DMA cyc | DMA bytes | MAC util |"
        );
        let _ = writeln!(s, "  |---|---|---|---|---|---|---|---|");
        for ((&n, op), c) in seg.nodes.iter().zip(&seg.ops).zip(&f.op_costs) {
            // Against the array's MAC rate in the op's own type: int8 ops run 8x the f32 MACs per cycle.
            let rate = op.elem().map_or(0, |e| e.macs_per_cycle(t)) * t.core_tiles().len() as u64;
            let util = if c.cycles() > 0 && rate > 0 {
                c.macs as f64 / (c.cycles() as f64 * rate as f64)
            } else {
                0.0
            };
            let _ = writeln!(
                s,
                "  | {} | {} | {} | {} | {} | {} | {} | {:.1}% |",
                g.nodes[n].name,
                g.nodes[n].onnx_op,
                op.kind(),
                c.macs,
                c.compute_cycles,
                c.dma_cycles,
                c.dma_bytes,
                100.0 * util
            );
        }
    }
    let cpu: Vec<_> = p
        .placements
        .iter()
        .filter(|x| x.segment.is_none())
        .collect();
    if !cpu.is_empty() {
        let _ = writeln!(
            s,
            "\nCPU nodes:\n  | node | op | constraint | reason |\n  |---|---|---|---|"
        );
        for x in cpu {
            let _ = writeln!(
                s,
                "  | {} | {} | {} | {} |",
                g.nodes[x.node].name,
                g.nodes[x.node].onnx_op,
                x.constraint.unwrap_or(""),
                x.reason.clone().unwrap_or_default()
            );
        }
    }
    s
}
