//! BSP layering. Kernels are grouped into *units*: a CPU kernel is a unit of its own, the kernels of one NPU
//! segment form one unit. A unit's level is one more than the highest level of the units that wrote the buffers
//! it reads (level 0 reads only inputs and constants). Each level expands into layers: one layer holding the
//! level's CPU kernels, then, per segment of the level, the segment's kernels in their own layers (a kernel one
//! layer after the segment kernels it reads). A segment therefore owns a contiguous run of layers that no other
//! kernel shares: the entry function and a device-less engine run those layers as the segment's CPU fallback,
//! an engine with an NPU device runs the segment's transaction in their place. Without segments this is the
//! plain "one more than the latest writer" layering. Kernels are ordered by (layer, lowering order), a valid
//! sequential order as well. Convex segments keep the unit graph acyclic.

use crate::kernel::{Buf, KernelId, Lowering};
use cranelift_entity::{EntityRef, SecondaryMap};
use std::collections::HashMap;

/// The schedule of a lowering.
#[derive(Debug, Clone, PartialEq)]
pub struct Schedule {
    /// Layer of each kernel.
    pub layer: SecondaryMap<KernelId, u32>,
    /// Kernels in execution order (sorted by layer).
    pub order: Vec<KernelId>,
    /// Number of layers.
    pub num_layers: u32,
    /// Per segment: (first layer, number of layers).
    pub segments: Vec<(u32, u32)>,
}

impl Schedule {
    /// Computes layers and order for a CPU-only lowering.
    pub fn new(l: &Lowering) -> Schedule {
        Schedule::with_segments(l, &SecondaryMap::new(), 0)
    }

    /// Computes layers and order; `segment[k]` is the NPU segment of kernel `k`, if any.
    pub fn with_segments(
        l: &Lowering,
        segment: &SecondaryMap<KernelId, Option<usize>>,
        num_segments: usize,
    ) -> Schedule {
        let nk = l.kernels.len();
        // Dense kernel indices below; `KernelId::new(i)` is kernel `i`.
        let segment: Vec<Option<usize>> = l.kernels.keys().map(|k| segment[k]).collect();
        // Units: CPU kernels are 0..nk, segment s is nk + s.
        let unit = |k: usize| segment[k].map_or(k, |s| nk + s);
        let mut writer: HashMap<Buf, usize> = HashMap::new();
        let mut kdeps: Vec<Vec<usize>> = vec![Vec::new(); nk];
        for (i, k) in l.kernels.values().enumerate() {
            for b in k.reads() {
                if let Some(&w) = writer.get(&b) {
                    kdeps[i].push(w);
                }
            }
            if let Some(b) = k.out() {
                writer.insert(b, i);
            }
        }
        // Unit levels by fixed point over the (acyclic) unit graph in lowering order.
        let mut level = vec![0u32; nk + num_segments];
        let mut changed = true;
        while changed {
            changed = false;
            for (i, deps) in kdeps.iter().enumerate() {
                for &d in deps {
                    let (u, ud) = (unit(i), unit(d));
                    if u != ud && level[u] < level[ud] + 1 {
                        level[u] = level[ud] + 1;
                        changed = true;
                    }
                }
            }
        }
        // Depth of each segment kernel inside its segment.
        let mut depth = vec![0u32; nk];
        for i in 0..nk {
            if let Some(s) = segment[i] {
                for &d in &kdeps[i] {
                    if segment[d] == Some(s) {
                        depth[i] = depth[i].max(depth[d] + 1);
                    }
                }
            }
        }
        let max_level = level.iter().copied().max().unwrap_or(0);
        let mut layer = vec![0u32; nk];
        let mut segments = vec![(0u32, 0u32); num_segments];
        let mut next = 0u32;
        // CPU kernels bucketed by level, segment kernels by segment and segments by level, each in kernel
        // order: one pass over the kernels instead of one per level.
        let mut cpu_at: Vec<Vec<usize>> = vec![Vec::new(); max_level as usize + 1];
        let mut seg_kernels: Vec<Vec<usize>> = vec![Vec::new(); num_segments];
        for k in 0..nk {
            match segment[k] {
                None => cpu_at[level[k] as usize].push(k),
                Some(s) => seg_kernels[s].push(k),
            }
        }
        let mut seg_at: Vec<Vec<usize>> = vec![Vec::new(); max_level as usize + 1];
        for s in 0..num_segments {
            seg_at[level[nk + s] as usize].push(s);
        }
        for lv in 0..=max_level as usize {
            let cpu = std::mem::take(&mut cpu_at[lv]);
            if !cpu.is_empty() {
                for k in cpu {
                    layer[k] = next;
                }
                next += 1;
            }
            for &s in &seg_at[lv] {
                let ks = std::mem::take(&mut seg_kernels[s]);
                if ks.is_empty() {
                    continue;
                }
                let span = ks.iter().map(|&k| depth[k]).max().unwrap_or(0) + 1;
                for k in ks {
                    layer[k] = next + depth[k];
                }
                segments[s] = (next, span);
                next += span;
            }
        }
        let mut order: Vec<usize> = (0..nk).collect();
        order.sort_by_key(|&i| (layer[i], i));
        let num_layers = if nk == 0 { 0 } else { next };
        let mut layers = SecondaryMap::with_capacity(nk);
        for (i, &lv) in layer.iter().enumerate() {
            layers[KernelId::new(i)] = lv;
        }
        Schedule {
            layer: layers,
            order: order.into_iter().map(KernelId::new).collect(),
            num_layers,
            segments,
        }
    }
}
