//! Resolving a checked [`Recipe`] against a [`Bundle`]: one [`Slot`] per recipe buffer and one
//! [`Call`] per run, each argument reduced to `(slot, byte offset)`.
//!
//! This is where the runner's memory safety is argued. Kernels take bare addresses, and by the format
//! contract (which `Bundle::new`'s caller vouched for) task `t < numTasks` of op `k` touches only the
//! `BundleArg.size` bytes at each argument address, and never writes an argument in the constant area.
//! So each recipe argument must resolve to a region of exactly that size inside its buffer, aligned
//! like the op table's, and the read-only `weights` buffer may only stand for constant-area
//! arguments; the `int` constant (the task count) must equal `numTasks`. Anything else is an
//! [`Error::BadRecipe`] naming the run and argument. Buffers are sized from the bundle, never from
//! the recipe alone: inputs and outputs by their tensors, `weight` by the constant area.
//!
//! Runs that are not bundle ops — the runtime's `bundlert_copy` and npu runs — are resolved in
//! `npu_runs.rs`, which argues their safety: every region they touch lies inside its buffer, and no
//! written region overlaps another region of the same run or lies in a `weight` buffer.
//!
//! A `weight` buffer is the bundle's constant area, unless npu runs name it as their instruction
//! buffer (argidx 1, DynamicDispatch's convention): then the runner fills it with that segment's
//! instruction buffer (`u32 0`, `u32` transaction bytes + 8, the transaction embedded in the
//! bundle, which is `NAME.<segment>.txn`), and no other argument may name it.

use alloc::collections::BTreeMap;
use alloc::vec;
use alloc::vec::Vec;

use super::call::{instr_misuse, ArgRef, Call, Slot};
use super::json::entry_err;
use super::npu_runs::{self, BUILTIN_LIBRARY, COPY_FN};
use super::recipe::{check_slice, value_err, BufferKind, Recipe, Run, Where};
use crate::buf::AreaBuf;
use crate::bundle::{area_alignment, Bundle};
use crate::config::{Area, Role};
use crate::error::{bad, Error, FieldPath, Name, RecipePath, RecipeTable, RecipeWhy, RunList, Why};
use crate::Result;

/// What a cpu resource stands for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum CpuKind {
    /// An op of the bundle's op table (looked up by the run's name).
    Op,
    /// The runtime's `bundlert_copy`.
    Copy,
}

/// The kind of each cpu resource, from its name and `library_name`: the bundle's model name means
/// the op table, `bundlert` the runtime's functions (only `bundlert_copy`); without a library name,
/// `bundlert_copy` is the runtime's unless the op table has an op of that name.
pub(super) fn cpu_kinds(bundle: &Bundle<'_>, recipe: &Recipe) -> Result<Vec<CpuKind>> {
    let model = bundle.model_name();
    let has_op =
        |name: &str| (0..bundle.view().ops().len()).any(|i| bundle.view().op_name(i) == name);
    let mut kinds = Vec::with_capacity(recipe.cpus.len());
    for (i, cpu) in recipe.cpus.iter().enumerate() {
        let at = |field| RecipePath::entry(RecipeTable::Cpus, i, field);
        let kind = match cpu.library_name.as_deref() {
            Some(lib) if lib != model && lib != BUILTIN_LIBRARY => {
                return Err(value_err(at("library_name"), lib, RecipeWhy::WrongLibrary));
            }
            Some(lib) if lib != model => {
                if cpu.name != COPY_FN {
                    return Err(value_err(at("name"), &cpu.name, RecipeWhy::UnknownBuiltin));
                }
                CpuKind::Copy
            }
            Some(lib) if lib != BUILTIN_LIBRARY => CpuKind::Op,
            // No library, or a model itself called `bundlert`.
            _ if cpu.name == COPY_FN && !has_op(&cpu.name) => CpuKind::Copy,
            _ => CpuKind::Op,
        };
        kinds.push(kind);
    }
    Ok(kinds)
}

/// The NPU segment of each kernel resource: the segment of the bundle with the kernel's name (its
/// transaction is embedded in the bundle and fills its instruction buffer).
pub(super) fn kernel_segments(bundle: &Bundle<'_>, recipe: &Recipe) -> Result<Vec<usize>> {
    let mut segments = Vec::with_capacity(recipe.kernels.len());
    for (i, kernel) in recipe.kernels.iter().enumerate() {
        let segment = bundle
            .view()
            .find_npu_segment(&kernel.name)
            .ok_or_else(|| {
                let at = RecipePath::entry(RecipeTable::Kernels, i, "name");
                value_err(at, &kernel.name, RecipeWhy::UnknownSegment)
            })?;
        segments.push(segment.index);
    }
    Ok(segments)
}

/// The NPU segment whose instruction buffer each recipe buffer is: the buffer an npu run names as
/// argidx 1 (a `weight` buffer, the same for every run of the segment and for no other segment).
/// `kernels` is [`kernel_segments`].
pub(super) fn instr_buffers(recipe: &Recipe, kernels: &[usize]) -> Result<Vec<Option<usize>>> {
    let mut instr = vec![None; recipe.buffers.len()];
    for (r, run) in recipe.runs.iter().enumerate() {
        let kernel = recipe.kernels.iter().position(|k| k.name == run.name);
        let segment = kernel.and_then(|k| kernels.get(k)).copied();
        let (Where::Npu, Some(segment)) = (run.location, segment) else {
            continue;
        };
        let Some(j) = run.arguments.iter().position(|a| a.argidx == 1) else {
            continue; // `npu_runs::npu_call` reports the missing argument.
        };
        let buffer = run.arguments[j].buffer;
        let at = RecipePath::run_item(r, RunList::Arguments, j, "name");
        let why = match (recipe.buffers[buffer].kind, instr[buffer]) {
            (BufferKind::Weight, None) => None,
            (BufferKind::Weight, Some(other)) if other == segment => None,
            (BufferKind::Weight, Some(_)) => Some("it holds another NPU segment's instructions"),
            _ => Some("it must be a `weight` buffer, which the runner fills"),
        };
        if let Some(why) = why {
            let why = RecipeWhy::Instructions { why };
            return Err(entry_err(at, &run.name, why));
        }
        instr[buffer] = Some(segment);
    }
    Ok(instr)
}

/// Segment `segment`'s instruction buffer, in DynamicDispatch's layout: `u32 0`, `u32` transaction
/// bytes + 8, the transaction.
fn instr_slot(bundle: &Bundle<'_>, segment: usize, align: usize, name: &str) -> Result<Slot> {
    let txn = bundle
        .view()
        .npu_segment(segment)
        .map_or(&[][..], |s| s.txn);
    let len = txn
        .len()
        .saturating_add(crate::format::NPU_INSTR_HEADER_BYTES);
    let mut data = AreaBuf::owned(len, align, name)?;
    let (head, body) = data
        .bytes_mut()
        .split_at_mut(crate::format::NPU_INSTR_HEADER_BYTES.min(len));
    if let Some(size) = head.get_mut(4..8) {
        // Word 1: the transaction's bytes + 8 (DynamicDispatch writes the header's total size + 8;
        // a device refuses a container whose total size is not its length).
        size.copy_from_slice(&u32::try_from(len).unwrap_or(u32::MAX).to_le_bytes());
    }
    body.copy_from_slice(txn);
    Ok(Slot::Instr { data, segment })
}

/// One slot per buffer of `recipe`; checks external buffers against `bundle`. `instr` is
/// [`instr_buffers`].
pub(super) fn slots(
    bundle: &Bundle<'_>,
    recipe: &Recipe,
    instr: &[Option<usize>],
) -> Result<Vec<Slot>> {
    let align = area_alignment(bundle.view());
    let mut slots = Vec::with_capacity(recipe.buffers.len());
    for (i, buf) in recipe.buffers.iter().enumerate() {
        let at = |field| RecipePath::entry(RecipeTable::Buffers, i, field);
        let (slot, len) = match buf.kind {
            BufferKind::Weight => match instr.get(i).copied().flatten() {
                Some(segment) => {
                    let slot = instr_slot(bundle, segment, align, &buf.name)?;
                    let len = slot.len(bundle);
                    (slot, len)
                }
                None => (Slot::Weights, bundle.area_size(Area::Constant)),
            },
            BufferKind::Internal => {
                // The recipe requires a size for internal buffers.
                let bytes = buf.size.unwrap_or(0);
                let len = usize::try_from(bytes).map_err(|_| Error::OutOfMemory {
                    what: Name::new(&buf.name),
                    bytes,
                })?;
                (Slot::Internal(AreaBuf::owned(len, align, &buf.name)?), len)
            }
            BufferKind::Input | BufferKind::Output => {
                let wanted = if buf.kind == BufferKind::Input {
                    Role::Input
                } else {
                    Role::Output
                };
                let tensor = bundle
                    .view()
                    .find(&buf.name)
                    .filter(|t| t.role == wanted)
                    .ok_or_else(|| {
                        value_err(at("name"), &buf.name, RecipeWhy::NotATensor { wanted })
                    })?;
                let data = AreaBuf::owned(tensor.size_bytes, align, &buf.name)?;
                let tensor_index = tensor.index;
                let slot = match wanted {
                    Role::Input => Slot::Input {
                        data,
                        tensor: tensor_index,
                        bound: false,
                    },
                    _ => Slot::Output {
                        data,
                        tensor: tensor_index,
                        target: None,
                    },
                };
                (slot, tensor.size_bytes)
            }
        };
        if let Some(size) = buf.size.filter(|&s| s != len as u64) {
            let why = RecipeWhy::Mismatch {
                expected: len as u64,
                got: size,
            };
            return Err(entry_err(at("size"), &buf.name, why));
        }
        slots.push(slot);
    }
    Ok(slots)
}

/// One call per run of `recipe`, resolved against `bundle`'s op table and NPU segments and the
/// buffers in `slots`; `cpus` and `kernels` are [`cpu_kinds`] and [`kernel_segments`].
pub(super) fn calls(
    bundle: &Bundle<'_>,
    recipe: &Recipe,
    slots: &[Slot],
    cpus: &[CpuKind],
    kernels: &[usize],
) -> Result<Vec<Call>> {
    let view = bundle.view();
    let ops: BTreeMap<&str, usize> = (0..view.ops().len())
        .map(|i| (view.op_name(i), i))
        .collect();
    let mut calls = Vec::with_capacity(recipe.runs.len());
    for (r, run) in recipe.runs.iter().enumerate() {
        // `Recipe::parse` checked that the run's name is declared in the list its `where` names.
        let call = match run.location {
            Where::Npu => {
                let kernel = recipe.kernels.iter().position(|k| k.name == run.name);
                let segment = kernel.and_then(|k| kernels.get(k)).copied();
                let Some(segment) = segment else {
                    let at = RecipePath::entry(RecipeTable::Runs, r, "name");
                    return Err(value_err(at, &run.name, RecipeWhy::UnknownSegment));
                };
                npu_runs::npu_call(bundle, r, run, slots, segment)?
            }
            Where::Cpu => {
                let cpu = recipe.cpus.iter().position(|c| c.name == run.name);
                match cpu.and_then(|c| cpus.get(c)) {
                    Some(CpuKind::Copy) => npu_runs::copy_call(bundle, r, run, slots)?,
                    _ => op_call(bundle, &ops, r, run, slots)?,
                }
            }
        };
        calls.push(call);
    }
    Ok(calls)
}

/// Cpu run `r`, of an op of the op table.
fn op_call(
    bundle: &Bundle<'_>,
    ops: &BTreeMap<&str, usize>,
    r: usize,
    run: &Run,
    slots: &[Slot],
) -> Result<Call> {
    let view = bundle.view();
    let at = |field| RecipePath::entry(RecipeTable::Runs, r, field);
    let &op = ops
        .get(run.name.as_str())
        .ok_or_else(|| value_err(at("name"), &run.name, RecipeWhy::UnknownOp))?;
    let op_table = &view.ops()[op];
    let op_args = view.op_args(op);
    let num_args = op_args.len();
    if run.arguments.len() != num_args {
        let why = RecipeWhy::ArgCount {
            expected: num_args as u32,
            got: run.arguments.len() as u32,
        };
        return Err(entry_err(at("arguments"), &run.name, why));
    }
    let mut args = vec![ArgRef { slot: 0, offset: 0 }; num_args];
    for (j, arg) in run.arguments.iter().enumerate() {
        let at = |field| RecipePath::run_item(r, RunList::Arguments, j, field);
        let err = |field, why| entry_err(at(field), &run.name, why);
        let index = usize::try_from(arg.argidx).ok().filter(|&i| i < num_args);
        let Some(index) = index else {
            let why = RecipeWhy::ArgIndexTooLarge {
                argidx: arg.argidx,
                num_args: num_args as u32,
            };
            return Err(err("argidx", why));
        };
        let expected = &op_args[index];
        if matches!(slots[arg.buffer], Slot::Instr { .. }) {
            return Err(instr_misuse(r, run, j));
        }
        let limit = slots[arg.buffer].len(bundle) as u64;
        // XRT's rule: a sub-buffer only when 0 < size < buffer size, else the whole buffer.
        let (offset, size) = match arg.slice {
            Some((offset, size)) if size > 0 => {
                check_slice(offset, size, limit).map_err(|why| err("size", why))?;
                if size < limit {
                    (offset, size)
                } else {
                    (0, limit)
                }
            }
            _ => (0, limit),
        };
        let field = if arg.slice.is_some() { "size" } else { "name" };
        if size != expected.size {
            let why = RecipeWhy::Mismatch {
                expected: expected.size,
                got: size,
            };
            return Err(err(field, why));
        }
        if !offset.is_multiple_of(view.alignment() as u64) {
            let why = RecipeWhy::Misaligned {
                align: view.alignment() as u32,
            };
            return Err(err("offset", why));
        }
        if matches!(slots[arg.buffer], Slot::Weights) && expected.area != Area::Constant as u32 {
            return Err(err("name", RecipeWhy::ReadOnly));
        }
        args[index] = ArgRef {
            slot: arg.buffer,
            // offset + size <= limit, the size of an allocation, so it fits usize.
            offset: offset as usize,
        };
    }
    check_task_count(r, run, num_args as u64, op_table.num_tasks)?;
    // Validated by ConfigView: every op has a kernel; the error cannot happen.
    let func = op_table
        .func
        .ok_or(bad(FieldPath::entry("ops", op, "fn"), 0, Why::Null))?;
    Ok(Call::Op {
        func,
        tasks: op_table.num_tasks,
        args,
    })
}

/// The run's constants must be exactly the task count: one `int` at argidx `num_args` whose value is
/// the op's `numTasks` (a larger value would call tasks the kernel does not have).
fn check_task_count(r: usize, run: &Run, num_args: u64, tasks: u32) -> Result<()> {
    let Some(first) = run.constants.first() else {
        let at = RecipePath::entry(RecipeTable::Runs, r, "constants");
        return Err(entry_err(at, &run.name, RecipeWhy::Missing));
    };
    let at = |j, field| RecipePath::run_item(r, RunList::Constants, j, field);
    if run.constants.len() > 1 {
        return Err(entry_err(at(1, ""), &run.name, RecipeWhy::Unsupported));
    }
    if first.argidx != num_args {
        let why = RecipeWhy::Mismatch {
            expected: num_args,
            got: first.argidx,
        };
        return Err(entry_err(at(0, "argidx"), &run.name, why));
    }
    if first.value != u64::from(tasks) {
        let why = RecipeWhy::Mismatch {
            expected: tasks.into(),
            got: first.value,
        };
        return Err(entry_err(at(0, "value"), &run.name, why));
    }
    Ok(())
}
