//! The runs of a mixed recipe that are not bundle ops: `bundlert_copy` (a cpu function of the
//! runtime itself) and npu runs (an NPU segment's transaction on the runner's [`Device`]), resolved
//! into [`Call::Copy`] and [`Call::Npu`] and executed here.
//!
//! The conventions, as bundlec writes them (`docs/bundle-format.md`, `docs/npu.md`):
//!
//! - `bundlert_copy`: argument 0 (source) and argument 1 (destination), sub-buffers of equal size,
//!   no constants. The destination may not be `weights`; source and destination may not overlap.
//! - npu run (DynamicDispatch's call of the XRT DPU kernel): buffer arguments argidx 1, the
//!   segment's instruction buffer (a whole `weight` buffer the runner fills, see `build.rs`), and
//!   argidx 3 `in`, 4 `out`, 5 `scratch`, 6 `const`, 7 `super_instr` (DDR_PATCH argidx 0..4 of the
//!   transaction); `int` constants argidx 0 = 2 (the opcode of an aie-rt v0.1 transaction) and
//!   argidx 2 = the instruction buffer's size in 32-bit words. A sub-buffer of `size` 0 is an
//!   *empty* buffer here (XRT would bind the whole buffer, which would alias the others; a
//!   transaction never touches a buffer its segment does not have, so the two bindings run the
//!   same). `out` and `scratch` may not be `weight` buffers, and must not overlap any other buffer
//!   of the run. The transaction the device runs is the one in the instruction buffer.
//!
//! Safety: every `Region` lies inside its slot's buffer (checked here against the buffer's size),
//! so `base + offset .. + len` stays inside one allocation. The regions a run writes are disjoint
//! from every other region of the run (checked; regions of different slots are different
//! allocations, and `weights` is never written), so the `&mut [u8]` made for them alias nothing,
//! and the `&[u8]` for the read-only ones are only read while they live. The runner holds
//! `&mut self` while executing, so no other reference into its buffers exists.

use super::call::{instr_misuse, Call, Region, Slot};
use super::json::entry_err;
use super::recipe::{check_slice, Argument, Run};
use crate::bundle::Bundle;
use crate::error::{Error, Name, Quoted, RecipePath, RecipeTable, RecipeWhy, RunList};
use crate::npu::{Device, NpuBuffers, NpuCycles};
use crate::Result;

/// The runtime's copy function.
pub(super) const COPY_FN: &str = "bundlert_copy";
/// The `library_name` of the runtime's functions.
pub(super) const BUILTIN_LIBRARY: &str = "bundlert";
/// Buffer argidx of the instruction buffer.
const INSTR_ARGIDX: u64 = 1;
/// Buffer argidx of the five fused buffers, in `NpuBuffers` order.
const NPU_ARGIDX: [u64; 5] = [3, 4, 5, 6, 7];
/// Which of the five the transaction may write (`out`, `scratch`).
const NPU_WRITTEN: [bool; 5] = [false, true, true, false, false];

/// Resolves argument `arg` against its buffer: XRT's rule (a sub-buffer when `0 < size < buffer
/// size`, otherwise the whole buffer), except that with `zero_is_empty` a `size` of 0 is an empty
/// region.
fn region(
    bundle: &Bundle<'_>,
    slots: &[Slot],
    arg: &Argument,
    zero_is_empty: bool,
) -> core::result::Result<Region, RecipeWhy> {
    let limit = slots.get(arg.buffer).map_or(0, |s| s.len(bundle));
    let (offset, len) = match arg.slice {
        Some((_, 0)) if zero_is_empty => (0, 0),
        Some((offset, size)) if size > 0 => {
            check_slice(offset, size, limit as u64)?;
            if size < limit as u64 {
                // offset + size <= limit, the size of an allocation: both fit usize.
                (offset as usize, size as usize)
            } else {
                (0, limit)
            }
        }
        _ => (0, limit),
    };
    Ok(Region {
        slot: arg.buffer,
        offset,
        len,
    })
}

/// The field an error about argument `arg`'s bytes names: `size` for a sub-buffer, else `name`.
fn bytes_field(arg: &Argument) -> &'static str {
    if arg.slice.is_some() {
        "size"
    } else {
        "name"
    }
}

/// Run `r` (`bundlert_copy`): two arguments, equal sizes, destination writable and disjoint.
pub(super) fn copy_call(bundle: &Bundle<'_>, r: usize, run: &Run, slots: &[Slot]) -> Result<Call> {
    let at = |field| RecipePath::entry(RecipeTable::Runs, r, field);
    let arg_at = |j, field| RecipePath::run_item(r, RunList::Arguments, j, field);
    if run.arguments.len() != 2 {
        let why = RecipeWhy::ArgCount {
            expected: 2,
            got: run.arguments.len() as u32,
        };
        return Err(entry_err(at("arguments"), &run.name, why));
    }
    if !run.constants.is_empty() {
        let at = RecipePath::run_item(r, RunList::Constants, 0, "");
        return Err(entry_err(at, &run.name, RecipeWhy::Unsupported));
    }
    let mut found: [Option<(usize, Region)>; 2] = [None, None];
    for (j, arg) in run.arguments.iter().enumerate() {
        let index = usize::try_from(arg.argidx).ok().filter(|&i| i < 2);
        let Some(index) = index else {
            let why = RecipeWhy::ArgIndexTooLarge {
                argidx: arg.argidx,
                num_args: 2,
            };
            return Err(entry_err(arg_at(j, "argidx"), &run.name, why));
        };
        if matches!(slots.get(arg.buffer), Some(Slot::Instr { .. })) {
            return Err(instr_misuse(r, run, j));
        }
        let region = region(bundle, slots, arg, false)
            .map_err(|why| entry_err(arg_at(j, "size"), &run.name, why))?;
        if index == 1 && slots.get(arg.buffer).is_some_and(Slot::read_only) {
            return Err(entry_err(arg_at(j, "name"), &run.name, RecipeWhy::ReadOnly));
        }
        if let Some(slot) = found.get_mut(index) {
            *slot = Some((j, region));
        }
    }
    // Two arguments with distinct argidx (checked by `Recipe::parse`) below 2: both are present.
    let [Some((_, src)), Some((j, dst))] = found else {
        return Err(entry_err(at("arguments"), &run.name, RecipeWhy::Missing));
    };
    let dst_arg = &run.arguments[j];
    if dst.len != src.len {
        let why = RecipeWhy::Mismatch {
            expected: src.len as u64,
            got: dst.len as u64,
        };
        return Err(entry_err(arg_at(j, bytes_field(dst_arg)), &run.name, why));
    }
    if dst.overlaps(&src) {
        let why = RecipeWhy::Overlaps { argidx: 0 };
        return Err(entry_err(arg_at(j, bytes_field(dst_arg)), &run.name, why));
    }
    Ok(Call::Copy { src, dst })
}

/// Npu run `r` of segment `segment`: the instruction buffer, the five buffers and the two constants
/// of the convention.
pub(super) fn npu_call(
    bundle: &Bundle<'_>,
    r: usize,
    run: &Run,
    slots: &[Slot],
    segment: usize,
) -> Result<Call> {
    let at = |field| RecipePath::entry(RecipeTable::Runs, r, field);
    let arg_at = |j, field| RecipePath::run_item(r, RunList::Arguments, j, field);
    if run.arguments.len() != NPU_ARGIDX.len() + 1 {
        let why = RecipeWhy::ArgCount {
            expected: NPU_ARGIDX.len() as u32 + 1,
            got: run.arguments.len() as u32,
        };
        return Err(entry_err(at("arguments"), &run.name, why));
    }
    // For each of the five buffers: the argument's position in the run and its region.
    let mut found: [Option<(usize, Region)>; 5] = [None; 5];
    let mut instr = None;
    for (j, arg) in run.arguments.iter().enumerate() {
        if arg.argidx == INSTR_ARGIDX {
            instr = Some(instr_arg(bundle, r, run, j, slots, segment)?);
            continue;
        }
        let Some(k) = NPU_ARGIDX.iter().position(|&a| a == arg.argidx) else {
            let expected = "1, 3, 4, 5, 6, 7 (instructions, in, out, scratch, const, super_instr)";
            return Err(quote(
                arg_at(j, "argidx"),
                arg.argidx,
                RecipeWhy::UnknownValue { expected },
            ));
        };
        if matches!(slots.get(arg.buffer), Some(Slot::Instr { .. })) {
            return Err(instr_misuse(r, run, j));
        }
        let region = region(bundle, slots, arg, true)
            .map_err(|why| entry_err(arg_at(j, "size"), &run.name, why))?;
        if NPU_WRITTEN[k] && slots.get(arg.buffer).is_some_and(Slot::read_only) {
            return Err(entry_err(arg_at(j, "name"), &run.name, RecipeWhy::ReadOnly));
        }
        found[k] = Some((j, region));
    }
    // Six arguments with distinct argidx (checked by `Recipe::parse`), each one of the six.
    let Some((instr, words)) = instr else {
        return Err(entry_err(at("arguments"), &run.name, RecipeWhy::Missing));
    };
    let mut bufs = [Region::default(); 5];
    let mut positions = [0usize; 5];
    for (k, entry) in found.iter().enumerate() {
        let Some((j, region)) = *entry else {
            return Err(entry_err(at("arguments"), &run.name, RecipeWhy::Missing));
        };
        bufs[k] = region;
        positions[k] = j;
    }
    for (k, written) in bufs.iter().enumerate().filter(|&(k, _)| NPU_WRITTEN[k]) {
        for (other, region) in bufs.iter().enumerate().filter(|&(o, _)| o != k) {
            if written.overlaps(region) {
                let j = positions[k];
                let field = bytes_field(&run.arguments[j]);
                let why = RecipeWhy::Overlaps {
                    argidx: NPU_ARGIDX[other],
                };
                return Err(entry_err(arg_at(j, field), &run.name, why));
            }
        }
    }
    check_npu_constants(r, run, words)?;
    Ok(Call::Npu { instr, bufs })
}

/// Argument `j` of npu run `r` (argidx 1): the whole instruction buffer of `segment`. Returns its
/// slot and its size in 32-bit words.
fn instr_arg(
    bundle: &Bundle<'_>,
    r: usize,
    run: &Run,
    j: usize,
    slots: &[Slot],
    segment: usize,
) -> Result<(usize, u64)> {
    let arg = &run.arguments[j];
    let at = |field| RecipePath::run_item(r, RunList::Arguments, j, field);
    // `build::instr_buffers` made argidx 1 of every npu run its segment's instruction buffer.
    let Some(Slot::Instr { segment: s, .. }) = slots.get(arg.buffer) else {
        let why = RecipeWhy::Instructions {
            why: "it must be a `weight` buffer, which the runner fills",
        };
        return Err(entry_err(at("name"), &run.name, why));
    };
    let whole =
        region(bundle, slots, arg, false).map_err(|why| entry_err(at("size"), &run.name, why))?;
    let len = slots[arg.buffer].len(bundle);
    if *s != segment || whole.offset != 0 || whole.len != len {
        let why = RecipeWhy::Instructions {
            why: "an npu run binds its segment's whole instruction buffer",
        };
        return Err(entry_err(at(bytes_field(arg)), &run.name, why));
    }
    Ok((arg.buffer, len.div_ceil(4) as u64))
}

/// The constants of an npu run: exactly argidx 0 = [`crate::format::NPU_OPCODE_TXN`] and 2 = `words`.
fn check_npu_constants(r: usize, run: &Run, words: u64) -> Result<()> {
    let at = |j, field| RecipePath::run_item(r, RunList::Constants, j, field);
    // (argidx, required value, first constant seen with it)
    let mut wanted: [(u64, u64, Option<usize>); 2] =
        [(0, crate::format::NPU_OPCODE_TXN, None), (2, words, None)];
    for (j, c) in run.constants.iter().enumerate() {
        let Some((_, want, seen)) = wanted.iter_mut().find(|w| w.0 == c.argidx) else {
            let why = RecipeWhy::UnknownValue { expected: "0, 2" };
            return Err(quote(at(j, "argidx"), c.argidx, why));
        };
        if let Some(first) = *seen {
            let why = RecipeWhy::Duplicate {
                first: first as u32,
            };
            return Err(entry_err(at(j, "argidx"), &run.name, why));
        }
        *seen = Some(j);
        if c.value != *want {
            let why = RecipeWhy::Mismatch {
                expected: *want,
                got: c.value,
            };
            return Err(entry_err(at(j, "value"), &run.name, why));
        }
    }
    if wanted.iter().any(|w| w.2.is_none()) {
        let at = RecipePath::entry(RecipeTable::Runs, r, "constants");
        return Err(entry_err(at, &run.name, RecipeWhy::Missing));
    }
    Ok(())
}

/// A [`Error::BadRecipe`] quoting a number.
fn quote(at: RecipePath, value: u64, why: RecipeWhy) -> Error {
    Error::BadRecipe {
        at,
        name: Name::from_display(value),
        quoted: Quoted::Value,
        why,
    }
}

/// Executes a copy call.
///
/// # Safety
/// `bases[slot]` must be the base of each slot's buffer (the constant area for `weights`), the
/// regions resolved by [`copy_call`] against those buffers, and nothing else may access them now.
pub(super) unsafe fn run_copy(bases: &[*mut u8], src: &Region, dst: &Region) {
    let (Some(&from), Some(&to)) = (bases.get(src.slot), bases.get(dst.slot)) else {
        return;
    };
    // SAFETY: both regions lie inside their buffers and have equal lengths; `dst` is not in the
    // constant area and does not overlap `src` (checked in `copy_call`).
    unsafe {
        core::ptr::copy_nonoverlapping(
            from.add(src.offset),
            to.add(dst.offset),
            src.len.min(dst.len),
        )
    };
}

/// Executes an npu call on `device`: binds the five regions as [`NpuBuffers`] and runs `txn`.
///
/// # Safety
/// As for [`run_copy`], with regions resolved by [`npu_call`].
pub(super) unsafe fn run_npu(
    bases: &[*mut u8],
    bufs: &[Region; 5],
    txn: &[u8],
    device: &mut dyn Device,
) -> Result<NpuCycles> {
    let ptr = |r: &Region| {
        // SAFETY: `offset <= buffer size` (a region lies inside its buffer), so the pointer stays
        // inside (or one past the end of) the allocation; an empty region has offset 0.
        bases.get(r.slot).map(|&base| unsafe { base.add(r.offset) })
    };
    let (Some(i), Some(o), Some(s), Some(c), Some(p)) = (
        ptr(&bufs[0]),
        ptr(&bufs[1]),
        ptr(&bufs[2]),
        ptr(&bufs[3]),
        ptr(&bufs[4]),
    ) else {
        return Ok(NpuCycles::default());
    };
    // SAFETY: see the module docs: each region lies inside a live buffer (base pointers are
    // non-NULL and aligned even for empty buffers); `out` and `scratch` overlap no other region and
    // are not the constant area, so the two `&mut` alias nothing; the read-only three are only read.
    let bound = unsafe {
        NpuBuffers {
            input: core::slice::from_raw_parts(i, bufs[0].len),
            output: core::slice::from_raw_parts_mut(o, bufs[1].len),
            scratch: core::slice::from_raw_parts_mut(s, bufs[2].len),
            constants: core::slice::from_raw_parts(c, bufs[3].len),
            params: core::slice::from_raw_parts(p, bufs[4].len),
        }
    };
    device.run(txn, bound)
}
