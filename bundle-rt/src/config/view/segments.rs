//! The NPU segment table of a config (format version 2): its checks ([`check_all`], run by
//! `ConfigView::new` after the layers) and its typed view ([`NpuSegmentInfo`], [`NpuCopyInfo`],
//! [`ByteRange`]), which hands out names, transaction bytes and ranges without re-checking.
//!
//! What holds once a view exists, per segment `i`: `name` is a valid, unique string; `txn` is
//! non-NULL with `txnSize >= 16` (the container header) and a multiple of 4 (the container is a
//! sequence of 32-bit words; its contents are the device's to check); `numLayers >= 1`,
//! `firstLayer + numLayers <= numLayers` of the config, and `firstLayer` is at or after the end of
//! segment `i - 1` (sorted, not overlapping); the `in`, `out` and `scratch` staging ranges lie inside
//! the activation area and are pairwise disjoint (empty ranges are disjoint from everything); the
//! `const` and `params` ranges lie inside the constant area; each copy has a known `area`,
//! `reserved == 0`, its `[offset, offset + size)` inside that area and `[fusedOffset, fusedOffset +
//! size)` inside `inSize` (copy-ins) or `outSize` (copy-outs), and no copy-out targets the constant
//! area. Every end is computed with checked arithmetic.

use core::ops::Range;

use super::checks::check_ptr;
#[cfg(feature = "alloc")]
use super::checks::unique;
use super::table::{read_name, validated_str, ConfigView, MAX_TABLE_ENTRIES};
use crate::config::{Area, NpuCopy, NpuSegment};
use crate::error::{bad, FieldPath, Why};
use crate::Result;

/// Bytes of the transaction container header: the least `txnSize` accepted.
const TXN_HEADER_BYTES: u64 = 16;

/// A checked byte range `[offset, offset + size)` inside an area.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ByteRange {
    /// First byte.
    pub offset: usize,
    /// Length in bytes.
    pub size: usize,
}

impl ByteRange {
    /// Builds a range from validated config values (`offset + size` inside an area, so no wrap).
    fn of(offset: u64, size: u64) -> ByteRange {
        ByteRange {
            offset: offset as usize,
            size: size as usize,
        }
    }

    /// One past the last byte.
    pub fn end(&self) -> usize {
        // Validated: offset + size <= area size <= isize::MAX; saturating keeps it panic-free.
        self.offset.saturating_add(self.size)
    }

    /// As a `Range`, for slicing.
    pub fn range(&self) -> Range<usize> {
        self.offset..self.end()
    }
}

/// One checked copy of a segment: `size` bytes between `area` at `offset` and the fused staging
/// buffer at `fused_offset` (`in` for copy-ins, `out` for copy-outs; offsets relative to it).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct NpuCopyInfo {
    /// The tensor's area (never [`Area::Constant`] for a copy-out).
    pub area: Area,
    /// The tensor's bytes in that area.
    pub bytes: ByteRange,
    /// Byte offset in the fused staging buffer.
    pub fused_offset: usize,
}

impl NpuCopyInfo {
    /// The bytes in the fused staging buffer (relative to its start).
    pub fn fused_range(&self) -> Range<usize> {
        self.fused_offset..self.fused_offset.saturating_add(self.bytes.size)
    }
}

/// One NPU segment of a validated config; see the module docs for what holds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct NpuSegmentInfo<'a> {
    /// Index in the segment table.
    pub index: usize,
    /// The segment's name (`npu0`, ...), as the recipe's kernel names it.
    pub name: &'a str,
    /// The transaction binary.
    pub txn: &'a [u8],
    /// First BSP layer replaced.
    pub first_layer: usize,
    /// Layers replaced (at least 1).
    pub num_layers: usize,
    /// The fused `in` staging buffer, in the activation area.
    pub input: ByteRange,
    /// The fused `out` staging buffer, in the activation area.
    pub output: ByteRange,
    /// The `scratch` buffer, in the activation area.
    pub scratch: ByteRange,
    /// NPU-layout constants, in the constant area.
    pub constants: ByteRange,
    /// Kernel parameter blocks (`super_instr`), in the constant area.
    pub params: ByteRange,
    /// The compiler's cycle estimate: instruction, data, compute.
    pub est_cycles: [u64; 3],
    copies: &'a [NpuCopy],
    num_copy_in: usize,
}

impl<'a> NpuSegmentInfo<'a> {
    /// The layers replaced: `first_layer .. first_layer + num_layers`.
    pub fn layers(&self) -> Range<usize> {
        self.first_layer..self.first_layer.saturating_add(self.num_layers)
    }

    /// Number of copy-ins.
    pub fn num_copies_in(&self) -> usize {
        self.num_copy_in
    }

    /// Number of copy-outs.
    pub fn num_copies_out(&self) -> usize {
        self.copies.len().saturating_sub(self.num_copy_in)
    }

    /// The copy-ins (area → fused `in`), in table order.
    pub fn copies_in(&self) -> impl Iterator<Item = NpuCopyInfo> + 'a {
        let copies = self.copies.get(..self.num_copy_in).unwrap_or(&[]);
        copies.iter().filter_map(copy_info)
    }

    /// The copy-outs (fused `out` → area), in table order.
    pub fn copies_out(&self) -> impl Iterator<Item = NpuCopyInfo> + 'a {
        let copies = self.copies.get(self.num_copy_in..).unwrap_or(&[]);
        copies.iter().filter_map(copy_info)
    }
}

/// The typed form of a validated copy (`None` only for an unknown area, which validation excludes).
fn copy_info(copy: &NpuCopy) -> Option<NpuCopyInfo> {
    Some(NpuCopyInfo {
        area: Area::from_code(copy.area)?,
        bytes: ByteRange::of(copy.offset, copy.size),
        fused_offset: copy.fused_offset as usize,
    })
}

impl<'a> ConfigView<'a> {
    /// Number of NPU segments (`numNpuSegments`).
    pub fn num_npu_segments(&self) -> usize {
        self.npu_segments.len()
    }

    /// NPU segment `index`, or `None` past the table.
    pub fn npu_segment(&self, index: usize) -> Option<NpuSegmentInfo<'a>> {
        let seg = self.npu_segments.get(index)?;
        let txn = if seg.txn.is_null() {
            &[][..]
        } else {
            // SAFETY: `new` checked this pointer non-NULL and `txnSize <= isize::MAX`; the caller of
            // `new` guaranteed `txnSize` readable bytes for 'a.
            unsafe { core::slice::from_raw_parts(seg.txn, seg.txn_size as usize) }
        };
        Some(NpuSegmentInfo {
            index,
            // SAFETY: `new` checked that this pointer is a NUL-terminated UTF-8 string, valid for 'a.
            name: unsafe { validated_str(seg.name) },
            txn,
            first_layer: seg.first_layer as usize,
            num_layers: seg.num_layers as usize,
            input: ByteRange::of(seg.in_offset, seg.in_size),
            output: ByteRange::of(seg.out_offset, seg.out_size),
            scratch: ByteRange::of(seg.scratch_offset, seg.scratch_size),
            constants: ByteRange::of(seg.const_offset, seg.const_size),
            params: ByteRange::of(seg.params_offset, seg.params_size),
            est_cycles: seg.est_cycles,
            copies: copies(seg),
            num_copy_in: seg.num_copy_in as usize,
        })
    }

    /// The NPU segments, sorted by first layer.
    pub fn npu_segments(&self) -> impl Iterator<Item = NpuSegmentInfo<'a>> + 'a {
        let view = *self;
        (0..view.npu_segments.len()).filter_map(move |i| view.npu_segment(i))
    }

    /// The NPU segment called `name`, if any.
    pub fn find_npu_segment(&self, name: &str) -> Option<NpuSegmentInfo<'a>> {
        self.npu_segments().find(|s| s.name == name)
    }

    /// Name of segment `index` (`""` past the table).
    #[cfg(feature = "alloc")]
    fn npu_segment_name(&self, index: usize) -> &'a str {
        match self.npu_segments.get(index) {
            // SAFETY: `check_all` checked that this pointer is a NUL-terminated UTF-8 string.
            Some(seg) => unsafe { validated_str(seg.name) },
            None => "",
        }
    }
}

/// The copy table of `seg`: empty when it declares no copies.
///
/// Only called once `copies` passed [`check_ptr`] (in [`segment`], or for a validated view): then
/// the pointer is non-NULL and aligned, and `ConfigView::new`'s caller guaranteed the entries.
fn copies<'a>(seg: &NpuSegment) -> &'a [NpuCopy] {
    let count = seg.num_copy_in as usize + seg.num_copy_out as usize;
    if count == 0 || seg.copies.is_null() || !seg.copies.is_aligned() {
        return &[];
    }
    // SAFETY: see above; `count <= 2^24` was checked, so the byte size is far below isize::MAX.
    unsafe { core::slice::from_raw_parts(seg.copies, count) }
}

/// Checks every segment, in order, then that their names are unique (with `alloc`).
///
/// # Safety
/// As for `ConfigView::new`: each segment's name, transaction and copy pointers cover what it
/// declares.
pub(super) unsafe fn check_all(view: &ConfigView<'_>) -> Result<()> {
    let mut prev_end = 0u64;
    for i in 0..view.npu_segments.len() {
        // SAFETY: forwarded from the caller.
        prev_end = unsafe { segment(view, i, prev_end) }?;
    }
    // Names are unique so that a recipe kernel names one segment (the runner needs `alloc`).
    #[cfg(feature = "alloc")]
    unique(view.npu_segments.len(), "npuSegments", |i| {
        view.npu_segment_name(i)
    })?;
    Ok(())
}

/// Segment `i`, which must start at or after layer `prev_end`; returns its end layer.
///
/// # Safety
/// As for [`check_all`].
unsafe fn segment(view: &ConfigView<'_>, i: usize, prev_end: u64) -> Result<u64> {
    let seg = &view.npu_segments[i];
    let at = |field| FieldPath::entry("npuSegments", i, field);
    // SAFETY: forwarded from the caller.
    unsafe { read_name(seg.name, at("name")) }?;
    if seg.txn.is_null() {
        return Err(bad(at("txn"), 0, Why::Null));
    }
    if seg.txn_size < TXN_HEADER_BYTES {
        let why = Why::TooSmall {
            min: TXN_HEADER_BYTES,
        };
        return Err(bad(at("txnSize"), seg.txn_size, why));
    }
    if !seg.txn_size.is_multiple_of(4) {
        return Err(bad(
            at("txnSize"),
            seg.txn_size,
            Why::Misaligned { align: 4 },
        ));
    }
    if seg.txn_size > isize::MAX as u64 {
        let why = Why::TooLarge {
            max: isize::MAX as u64,
        };
        return Err(bad(at("txnSize"), seg.txn_size, why));
    }

    let num_layers = view.layers.len() as u64;
    let first = u64::from(seg.first_layer);
    if seg.num_layers == 0 {
        return Err(bad(at("numLayers"), 0, Why::Zero));
    }
    if first < prev_end {
        let why = Why::TooSmall { min: prev_end };
        return Err(bad(at("firstLayer"), first, why));
    }
    if first >= num_layers {
        let why = Why::OutOfRange {
            end: first + 1,
            limit: num_layers,
        };
        return Err(bad(at("firstLayer"), first, why));
    }
    // Both are u32, so the sum cannot overflow u64.
    let end = first + u64::from(seg.num_layers);
    if end > num_layers {
        let why = Why::OutOfRange {
            end,
            limit: num_layers,
        };
        return Err(bad(at("numLayers"), seg.num_layers.into(), why));
    }

    let act = view.area_size(Area::Activations) as u64;
    let cst = view.area_size(Area::Constant) as u64;
    let staging = [
        (seg.in_offset, seg.in_size, "inOffset"),
        (seg.out_offset, seg.out_size, "outOffset"),
        (seg.scratch_offset, seg.scratch_size, "scratchOffset"),
    ];
    for (offset, size, field) in staging {
        within(offset, size, act, at(field))?;
    }
    within(seg.const_offset, seg.const_size, cst, at("constOffset"))?;
    within(seg.params_offset, seg.params_size, cst, at("paramsOffset"))?;
    for (b, &(offset, size, field)) in staging.iter().enumerate() {
        for &(other_offset, other_size, other) in &staging[..b] {
            if overlap(offset, size, other_offset, other_size) {
                return Err(bad(at(field), offset, Why::Overlaps { other }));
            }
        }
    }
    copies_of(view, i, seg)?;
    Ok(end)
}

/// The copy table of segment `i`.
fn copies_of(view: &ConfigView<'_>, i: usize, seg: &NpuSegment) -> Result<()> {
    let at = |field| FieldPath::entry("npuSegments", i, field);
    let num_in = u64::from(seg.num_copy_in);
    let total = num_in + u64::from(seg.num_copy_out);
    if total > MAX_TABLE_ENTRIES {
        let (field, value) = if num_in > MAX_TABLE_ENTRIES {
            ("numCopyIn", num_in)
        } else {
            ("numCopyOut", seg.num_copy_out.into())
        };
        let why = Why::TooLarge {
            max: MAX_TABLE_ENTRIES,
        };
        return Err(bad(at(field), value, why));
    }
    if total > 0 {
        check_ptr(seg.copies, at("copies"))?;
    }
    for (j, copy) in copies(seg).iter().enumerate() {
        let at = |field| FieldPath::nested("npuSegments", i, "copies", j, field);
        let area = Area::from_code(copy.area).ok_or(bad(
            at("area"),
            copy.area.into(),
            Why::UnknownCode,
        ))?;
        if copy.reserved != 0 {
            let why = Why::Mismatch { expected: 0 };
            return Err(bad(at("reserved"), copy.reserved.into(), why));
        }
        let copy_out = j as u64 >= num_in;
        if copy_out && area == Area::Constant {
            return Err(bad(at("area"), copy.area.into(), Why::ReadOnly));
        }
        let limit = view.area_size(area) as u64;
        within(copy.offset, copy.size, limit, at("offset"))?;
        let fused = if copy_out { seg.out_size } else { seg.in_size };
        within(copy.fused_offset, copy.size, fused, at("fusedOffset"))?;
    }
    Ok(())
}

/// `[offset, offset + size)` must not overflow and must end at or before `limit`.
fn within(offset: u64, size: u64, limit: u64, at: FieldPath) -> Result<()> {
    let end = offset
        .checked_add(size)
        .ok_or(bad(at, offset, Why::Overflow))?;
    if end > limit {
        return Err(bad(at, offset, Why::OutOfRange { end, limit }));
    }
    Ok(())
}

/// Whether two ranges (already checked not to overflow) share a byte.
fn overlap(a: u64, a_size: u64, b: u64, b_size: u64) -> bool {
    a_size > 0 && b_size > 0 && a < b.saturating_add(b_size) && b < a.saturating_add(a_size)
}
