//! Buffer placement. Constants and mutables are laid out in order; activation buffers (intermediate tensors and
//! kernel scratch) get offsets from `pack.rs` (the best of several greedy packings of their layer-liveness
//! intervals, 64-aligned). Reports the activation efficiency (max live bytes / area size).

use super::{align, Schedule};
use crate::error::{Error, Result};
use crate::ir::{Graph, TensorKind};
use crate::kernel::{Buf, KernelId, Lowering};
use std::collections::HashMap;

/// The three memory areas of a bundle.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Area {
    /// Constant weights (initialised from `.weights`).
    Constant = 0,
    /// Inputs and outputs.
    Mutable = 1,
    /// Scratch.
    Activations = 2,
}

/// Where a buffer lives.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Location {
    /// The area.
    pub area: Area,
    /// Byte offset in the area (64-aligned).
    pub offset: usize,
    /// Size in bytes.
    pub size: usize,
}

/// The memory plan of a compiled model.
#[derive(Debug, Clone)]
pub struct MemoryPlan {
    /// Location of every buffer a kernel uses, plus every model input and output.
    pub loc: HashMap<Buf, Location>,
    /// Constant buffers in area order.
    pub constants: Vec<Buf>,
    /// Constant area size.
    pub constant_size: usize,
    /// Mutable area size.
    pub mutable_size: usize,
    /// Activation area size.
    pub activation_size: usize,
    /// Largest sum of live activation bytes in any layer.
    pub max_live: usize,
    /// Layer-liveness `(first, last)` of every activation buffer: the intervals the packing kept apart.
    pub live: HashMap<Buf, (u32, u32)>,
}

impl MemoryPlan {
    /// Appends a blob to the constant area (64-aligned) and returns its offset.
    pub fn append_constant(&mut self, bytes: usize) -> usize {
        let at = super::align(self.constant_size);
        self.constant_size = at + super::align(bytes.max(1));
        at
    }
    /// Appends `bytes` (64-aligned) to the activation area, live throughout (a fat bundle's dispatch slot), and
    /// returns their offset.
    pub fn reserve_activation(&mut self, bytes: usize) -> usize {
        let at = super::align(self.activation_size);
        self.activation_size = at + super::align(bytes);
        self.max_live += bytes;
        at
    }
    /// max live / area size (1.0 is optimal; 1.0 when there are no activations).
    pub fn efficiency(&self) -> f64 {
        if self.activation_size == 0 {
            1.0
        } else {
            self.max_live as f64 / self.activation_size as f64
        }
    }

    /// Plans memory for a lowering and schedule.
    pub fn new(g: &Graph, l: &Lowering, s: &Schedule) -> Result<MemoryPlan> {
        MemoryPlan::with_pins(g, l, s, &[], false)
    }

    /// Plans memory with extra activation buffers live over fixed layer ranges (`(buffer, first, last)`: the
    /// NPU segments' staging buffers, which no kernel names). With `io_in_activations` (`--inputs-in-activations`)
    /// the model inputs and outputs are activation buffers too, live from layer 0 to their last reader (inputs)
    /// and from their producer to the last layer (outputs), and the mutable area is empty.
    pub fn with_pins(
        g: &Graph,
        l: &Lowering,
        s: &Schedule,
        pins: &[(Buf, u32, u32)],
        io_in_activations: bool,
    ) -> Result<MemoryPlan> {
        let mut loc = HashMap::new();
        let mut at = 0;
        let io = if io_in_activations {
            Vec::new()
        } else {
            g.inputs.iter().chain(&g.outputs).copied().collect()
        };
        for &t in &io {
            let size = g.tensors[t].size_bytes();
            loc.insert(
                Buf::Tensor(t),
                Location {
                    area: Area::Mutable,
                    offset: at,
                    size,
                },
            );
            at += align(size.max(1));
        }
        let mutable_size = at;
        let (mut constants, mut cat) = (Vec::new(), 0);
        let size_of = |b: Buf| match b {
            Buf::Scratch(i) => l.scratch[i],
            Buf::Tensor(t) => g.tensors[t].size_bytes(),
        };
        // Liveness in layers for activation buffers: (first, last).
        let mut live: HashMap<Buf, (u32, u32)> = HashMap::new();
        let mut act_order: Vec<Buf> = Vec::new();
        for &ki in &s.order {
            let k = &l.kernels[ki];
            let lv = s.layer[ki];
            for b in k.args.iter().map(|a| a.buf) {
                if loc.contains_key(&b) {
                    continue;
                }
                let size = size_of(b);
                match b {
                    Buf::Tensor(t) if matches!(g.tensors[t].kind, TensorKind::Constant(_)) => {
                        loc.insert(
                            b,
                            Location {
                                area: Area::Constant,
                                offset: cat,
                                size,
                            },
                        );
                        constants.push(b);
                        cat += align(size.max(1));
                    }
                    Buf::Tensor(t)
                        if g.tensors[t].kind == TensorKind::Input && !io_in_activations =>
                    {
                        return Err(Error::internal(
                            "plan",
                            format!("input '{}' has no mutable slot", g.tensors[t].name),
                        ));
                    }
                    _ => {
                        let e = live.entry(b).or_insert_with(|| {
                            act_order.push(b);
                            (lv, lv)
                        });
                        e.1 = e.1.max(lv);
                    }
                }
            }
        }
        // A pair the entry function interleaves (`kernel/interleave.rs`) runs as one step there: every buffer
        // of either kernel lives in both layers (the depthwise output must not take the GEMM's input's place).
        let interleaved: Vec<KernelId> = crate::kernel::interleave::pairs(l, &s.order)
            .into_iter()
            .flat_map(|(i, _)| [s.order[i], s.order[i + 1]])
            .collect();
        for pair in interleaved.chunks(2) {
            let (first, last) = (s.layer[pair[0]], s.layer[pair[1]]);
            for a in pair.iter().flat_map(|&k| &l.kernels[k].args) {
                if let Some(e) = live.get_mut(&a.buf) {
                    *e = (e.0.min(first), e.1.max(last));
                }
            }
        }
        // Outputs that take their residual's buffer (`in_place.rs`); not beside NPU staging buffers, whose
        // segments address tensors by their own layouts.
        let shared = if pins.is_empty() {
            super::in_place::pairs(g, l, s, &interleaved, &mut live)
        } else {
            HashMap::new()
        };
        act_order.retain(|b| !shared.contains_key(b));
        for &(b, f, t) in pins {
            live.insert(b, (f, t));
            act_order.push(b);
        }
        if io_in_activations {
            let last = s.num_layers.saturating_sub(1);
            for (&t, input) in g
                .inputs
                .iter()
                .map(|t| (t, true))
                .chain(g.outputs.iter().map(|t| (t, false)))
            {
                let b = Buf::Tensor(t);
                let e = live.entry(b).or_insert_with(|| {
                    act_order.push(b);
                    (0, last)
                });
                // The caller writes inputs before the first layer and reads outputs after the last.
                if input {
                    e.0 = 0;
                } else {
                    e.1 = last;
                }
            }
        }
        let items: Vec<super::pack::Item> = act_order
            .iter()
            .map(|b| super::pack::Item {
                first: live[b].0,
                last: live[b].1,
                size: align(size_of(*b).max(1)),
            })
            .collect();
        let (offsets, act_size) = super::pack::pack(&items);
        for (&b, offset) in act_order.iter().zip(offsets) {
            let size = size_of(b);
            let area = Area::Activations;
            loc.insert(b, Location { area, offset, size });
        }
        for (&b, first) in &shared {
            let at = loc[first];
            let size = size_of(b);
            loc.insert(b, Location { size, ..at });
        }
        Ok(MemoryPlan {
            loc,
            constants,
            constant_size: cat,
            mutable_size,
            activation_size: act_size,
            // The most aligned bytes live in one layer: the packing's lower bound.
            max_live: super::pack::lower_bound(&items),
            live,
        })
    }
}
