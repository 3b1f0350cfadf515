//! Where each NPU segment lives in the bundle: its transaction, the layers of the op table it replaces, its
//! fused `in`/`out`/`scratch` staging buffers in the activation area (planned as buffers live over exactly those
//! layers), its NPU-layout constants and parameter blocks appended to the constant area (beside the CPU copies),
//! and the copies that fill `in` from the tensors' areas and drain `out` back. The config's segment table, the
//! recipe's npu runs and the header's segment list are all written from these layouts.

use crate::error::{Error, Result};
use crate::ir::Graph;
use crate::kernel::{Buf, ScratchId};
use crate::partition::Partition;
use crate::plan::{Area, Location, MemoryPlan, Schedule};
use cranelift_entity::{EntityRef, PrimaryMap};

/// One copy between a tensor's area and a fused staging buffer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NpuCopy {
    /// The tensor's area.
    pub area: Area,
    /// The tensor's offset in it.
    pub offset: usize,
    /// Bytes.
    pub size: usize,
    /// Offset in the fused `in` (copy-in) or `out` (copy-out) buffer.
    pub fused: usize,
}

/// A segment placed in the bundle.
#[derive(Debug, Clone)]
pub struct SegmentLayout {
    /// Index in `Partition::segments`.
    pub index: usize,
    /// `npu0`, ...
    pub id: String,
    /// The transaction container.
    pub txn: Vec<u8>,
    /// First layer and number of layers replaced.
    pub layers: (u32, u32),
    /// `in`, `out`, `scratch` in the activation area.
    pub staging: [Location; 3],
    /// (offset, size) of the NPU-layout constants in the constant area.
    pub consts: (usize, usize),
    /// (offset, size) of the parameter blocks in the constant area.
    pub params: (usize, usize),
    /// Copies into `in`.
    pub copy_in: Vec<NpuCopy>,
    /// Copies out of `out`.
    pub copy_out: Vec<NpuCopy>,
    /// Estimated cycles: instruction, data, compute.
    pub cycles: [u64; 3],
    /// The segment as programmed ([`crate::npu::fuse::FusedSegment::total_cycles`]).
    pub total_cycles: u64,
    /// Nodes in the segment.
    pub nodes: usize,
}

/// Staging pins (buffer, first layer, last layer) and, per segment, its `in`/`out`/`scratch` buffers.
pub type Staging = (Vec<(Buf, u32, u32)>, Vec<[Buf; 3]>);

/// The staging buffers to plan: per segment, three activation buffers live over its layers. Pushes their sizes
/// into `scratch` and returns the (buffer, first, last) pins and their indices.
pub fn staging_pins(
    p: &Partition,
    s: &Schedule,
    scratch: &mut PrimaryMap<ScratchId, usize>,
) -> Staging {
    let mut pins = Vec::new();
    let mut bufs = Vec::new();
    for (i, seg) in p.segments.iter().enumerate() {
        let (first, n) = s.segments[i];
        let mut b3 = [Buf::Scratch(ScratchId::new(0)); 3];
        for (j, &size) in seg.fused.sizes.iter().enumerate() {
            b3[j] = Buf::Scratch(scratch.push(size.max(1)));
            pins.push((b3[j], first, first + n.max(1) - 1));
        }
        bufs.push(b3);
    }
    (pins, bufs)
}

/// Lays the segments out, in order of their first layer (the order of the config's segment table); appends their
/// constants and parameters to the constant area.
pub fn layouts(
    g: &Graph,
    p: &Partition,
    s: &Schedule,
    plan: &mut MemoryPlan,
    bufs: &[[Buf; 3]],
) -> Result<Vec<SegmentLayout>> {
    let mut out = Vec::new();
    for (i, seg) in p.segments.iter().enumerate() {
        let f = &seg.fused;
        let staging = [0, 1, 2].map(|j| plan.loc[&bufs[i][j]]);
        let copy = |t: crate::ir::TensorId, fused: usize| -> Result<NpuCopy> {
            let loc = plan.loc.get(&Buf::Tensor(t)).ok_or_else(|| {
                Error::internal(
                    "emit",
                    format!(
                        "segment {} tensor '{}' has no location",
                        seg.id, g.tensors[t].name
                    ),
                )
            })?;
            Ok(NpuCopy {
                area: loc.area,
                offset: loc.offset,
                size: g.tensors[t].size_bytes(),
                fused,
            })
        };
        let copy_in = f
            .inputs
            .iter()
            .map(|&(t, o)| copy(t, o))
            .collect::<Result<Vec<_>>>()?;
        let copy_out = f
            .outputs
            .iter()
            .map(|&(t, o)| copy(t, o))
            .collect::<Result<Vec<_>>>()?;
        let c_at = plan.append_constant(f.consts.len());
        let p_at = plan.append_constant(f.params.len());
        if s.segments[i].1 == 0 {
            return Err(Error::internal(
                "emit",
                format!("segment {} has no kernels", seg.id),
            ));
        }
        out.push(SegmentLayout {
            index: i,
            id: seg.id.clone(),
            txn: f.txn.clone(),
            layers: s.segments[i],
            staging,
            consts: (c_at, f.consts.len()),
            params: (p_at, f.params.len()),
            copy_in,
            copy_out,
            cycles: f.cycles,
            total_cycles: f.total_cycles,
            nodes: seg.nodes.len(),
        });
    }
    out.sort_by_key(|l| l.layers.0);
    Ok(out)
}

/// Writes the segments' constants and parameters into the weights image.
pub fn fill_weights(img: &mut [u8], p: &Partition, layouts: &[SegmentLayout]) -> Result<()> {
    for l in layouts {
        let seg = &p.segments[l.index];
        for (bytes, (at, len)) in [(&seg.fused.consts, l.consts), (&seg.fused.params, l.params)] {
            img.get_mut(at..at + len)
                .ok_or_else(|| {
                    Error::internal(
                        "emit",
                        format!("segment {} constants outside the constant area", l.id),
                    )
                })?
                .copy_from_slice(bytes);
        }
    }
    Ok(())
}
