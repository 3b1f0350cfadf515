//! Running one NPU segment on a [`Device`] in place of its layers: the copy-ins fill the fused `in`
//! staging buffer from the tensors' areas, the device runs the transaction against the five bound
//! buffers, and the copy-outs drain the fused `out` buffer back into the areas.
//!
//! Everything here is safe code. The three staging buffers are disjoint parts of the activation
//! area (checked by `ConfigView::new`), so [`split3`] hands them out as three `&mut [u8]` made with
//! `split_at_mut`: no two live references overlap, whatever the offsets. Copies use
//! `copy_within` inside the activation area (defined for any overlap) and `copy_from_slice` between
//! areas, each range looked up with `get`/`get_mut`, so a range the validator let through but the
//! instance's area cannot hold is an error, never a panic or an out-of-bounds access. The constant
//! area is only read. The caller guarantees that no kernel runs while a segment does (the engine
//! runs segments on the calling thread between layers, when every worker is parked).

use core::ops::Range;

use crate::config::{Area, ByteRange, ConfigView, NpuCopyInfo, NpuSegmentInfo};
use crate::error::{bad, Error, FieldPath, Why};
use crate::npu::{Device, NpuBuffers, NpuCycles};
use crate::Result;

/// The three areas of an instance, borrowed for one segment run.
pub(crate) struct Areas<'x> {
    /// The bundle's constant area (read-only).
    pub(crate) constants: &'x [u8],
    /// The instance's mutable area (inputs, outputs).
    pub(crate) mutable: &'x mut [u8],
    /// The instance's activation area (tensors, staging buffers).
    pub(crate) activations: &'x mut [u8],
}

/// The segment that starts at `layer`, if it is the next one (`*next`, advanced past it).
///
/// Segments are sorted and disjoint (validated), and a run visits layers in order and jumps to the
/// end of each segment it runs, so checking only the next one finds every segment.
pub(crate) fn starting_at<'a>(
    view: &ConfigView<'a>,
    next: &mut usize,
    layer: usize,
) -> Option<NpuSegmentInfo<'a>> {
    let seg = view.npu_segment(*next).filter(|s| s.first_layer == layer)?;
    *next += 1;
    Some(seg)
}

/// Runs `seg` on `device`: copy-ins, the transaction, copy-outs. On a device error nothing is
/// copied out (the areas keep what the copy-ins and earlier layers left).
pub(crate) fn run(
    seg: &NpuSegmentInfo<'_>,
    areas: Areas<'_>,
    device: &mut dyn Device,
) -> Result<NpuCycles> {
    let Areas {
        constants,
        mutable,
        activations,
    } = areas;
    let at = |field| FieldPath::entry("npuSegments", seg.index, field);
    for copy in seg.copies_in() {
        let dst = shift(seg.input, &copy, at("inOffset"))?;
        match copy.area {
            Area::Activations => copy_within(activations, copy.bytes.range(), dst, at("copies"))?,
            Area::Constant => {
                copy_between(
                    constants,
                    copy.bytes.range(),
                    activations,
                    dst,
                    at("copies"),
                )?;
            }
            Area::Mutable => {
                copy_between(mutable, copy.bytes.range(), activations, dst, at("copies"))?;
            }
        }
    }
    let ranges = [seg.input, seg.output, seg.scratch].map(|r| r.range());
    let act_len = activations.len();
    let [input, output, scratch] = split3(activations, ranges)
        .ok_or_else(|| out_of_area(at("inOffset"), seg.input, act_len))?;
    let constant = |r: ByteRange, field| {
        constants
            .get(r.range())
            .ok_or_else(|| out_of_area(at(field), r, constants.len()))
    };
    let bufs = NpuBuffers {
        input,
        output,
        scratch,
        constants: constant(seg.constants, "constOffset")?,
        params: constant(seg.params, "paramsOffset")?,
    };
    let cycles = device.run(seg.txn, bufs)?;
    for copy in seg.copies_out() {
        let src = shift(seg.output, &copy, at("outOffset"))?;
        let src = src..src.saturating_add(copy.bytes.size);
        match copy.area {
            Area::Activations => {
                copy_within(activations, src, copy.bytes.offset, at("copies"))?;
            }
            Area::Mutable => {
                copy_between(activations, src, mutable, copy.bytes.offset, at("copies"))?;
            }
            // Excluded by validation: the constant area is read-only.
            Area::Constant => return Err(bad(at("copies"), 0, Why::ReadOnly)),
        }
    }
    Ok(cycles)
}

/// Absolute offset in the activation area of a copy's bytes in the staging buffer `staging`.
fn shift(staging: ByteRange, copy: &NpuCopyInfo, at: FieldPath) -> Result<usize> {
    staging.offset.checked_add(copy.fused_offset).ok_or(bad(
        at,
        staging.offset as u64,
        Why::Overflow,
    ))
}

/// The error for a range the instance's area cannot hold (excluded by validation).
fn out_of_area(at: FieldPath, range: ByteRange, limit: usize) -> Error {
    let why = Why::OutOfRange {
        end: range.end() as u64,
        limit: limit as u64,
    };
    bad(at, range.offset as u64, why)
}

/// `area[src]` to `area[dst..]`, overlapping or not; bounds checked first.
fn copy_within(area: &mut [u8], src: Range<usize>, dst: usize, at: FieldPath) -> Result<()> {
    let len = src.len();
    let dst_end = dst.checked_add(len);
    if src.end > area.len() || src.start > src.end || dst_end.is_none_or(|e| e > area.len()) {
        let why = Why::OutOfRange {
            end: dst_end.unwrap_or(usize::MAX).max(src.end) as u64,
            limit: area.len() as u64,
        };
        return Err(bad(at, dst as u64, why));
    }
    area.copy_within(src, dst);
    Ok(())
}

/// `from[src]` to `to[dst..]` (two different areas); bounds checked first.
fn copy_between(
    from: &[u8],
    src: Range<usize>,
    to: &mut [u8],
    dst: usize,
    at: FieldPath,
) -> Result<()> {
    let len = src.len();
    let src_bytes = from.get(src.clone());
    let dst_bytes = dst.checked_add(len).and_then(|end| to.get_mut(dst..end));
    match (src_bytes, dst_bytes) {
        (Some(s), Some(d)) => {
            d.copy_from_slice(s);
            Ok(())
        }
        _ => {
            let why = Why::OutOfRange {
                end: src.end as u64,
                limit: from.len() as u64,
            };
            Err(bad(at, src.start as u64, why))
        }
    }
}

/// Splits `buf` into the three `ranges` (in that order) with `split_at_mut`; an empty range gets an
/// empty slice. `None` if two non-empty ranges overlap or one runs past `buf`.
fn split3(buf: &mut [u8], ranges: [Range<usize>; 3]) -> Option<[&mut [u8]; 3]> {
    let mut order = [0usize, 1, 2];
    order.sort_unstable_by_key(|&k| ranges[k].start);
    let mut out: [&mut [u8]; 3] = [&mut [], &mut [], &mut []];
    let mut rest = buf;
    let mut at = 0usize;
    for k in order {
        let range = &ranges[k];
        if range.is_empty() {
            continue;
        }
        // A start before `at` overlaps the previous range: `checked_sub` fails.
        let skip = range.start.checked_sub(at)?;
        let (_, tail) = core::mem::take(&mut rest).split_at_mut_checked(skip)?;
        let (mid, tail) = tail.split_at_mut_checked(range.len())?;
        out[k] = mid;
        rest = tail;
        at = range.end;
    }
    Some(out)
}

#[cfg(all(test, feature = "std"))]
mod tests {
    use super::split3;

    #[test]
    fn split3_hands_out_disjoint_ranges_in_order() {
        let mut buf: std::vec::Vec<u8> = (0..32).collect();
        let [a, b, c] = split3(&mut buf, [20..24, 0..4, 8..8]).unwrap();
        assert_eq!(
            (&a[..], &b[..], c.len()),
            (&[20, 21, 22, 23][..], &[0, 1, 2, 3][..], 0)
        );
        assert!(split3(&mut buf, [0..8, 4..12, 0..0]).is_none(), "overlap");
        assert!(
            split3(&mut buf, [0..8, 30..40, 0..0]).is_none(),
            "past the end"
        );
        let [a, b, c] = split3(&mut buf, [0..0, 0..0, 0..32]).unwrap();
        assert_eq!((a.len(), b.len(), c.len()), (0, 0, 32));
    }
}
