//! BSP layering: a kernel's layer is one more than the highest layer of the kernels that wrote the buffers it
//! reads (layer 0 reads only inputs and constants). Kernels are then ordered by (layer, lowering order), which
//! is a valid sequential order as well.

use crate::codegen::kernel::{Buf, Lowering};
use std::collections::HashMap;

/// The schedule of a lowering.
#[derive(Debug, Clone, PartialEq)]
pub struct Schedule {
    /// Layer of each kernel, indexed like `Lowering::kernels`.
    pub layer: Vec<u32>,
    /// Kernel indices in execution order (sorted by layer).
    pub order: Vec<usize>,
    /// Number of layers.
    pub num_layers: u32,
}

impl Schedule {
    /// Computes layers and order.
    pub fn new(l: &Lowering) -> Schedule {
        let mut writer: HashMap<Buf, usize> = HashMap::new();
        let mut layer = vec![0u32; l.kernels.len()];
        for (i, k) in l.kernels.iter().enumerate() {
            let mut lv = 0;
            for (ai, b) in k.args.iter().enumerate() {
                if k.writes.contains(&ai) {
                    continue;
                }
                if let Some(&w) = writer.get(b) {
                    lv = lv.max(layer[w] + 1);
                }
            }
            layer[i] = lv;
            for &w in &k.writes {
                writer.insert(k.args[w], i);
            }
        }
        let mut order: Vec<usize> = (0..l.kernels.len()).collect();
        order.sort_by_key(|&i| (layer[i], i));
        let num_layers = layer.iter().max().map_or(0, |m| m + 1);
        Schedule {
            layer,
            order,
            num_layers,
        }
    }
}
