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

use alloc::collections::BTreeMap;
use alloc::vec;
use alloc::vec::Vec;

use super::recipe::{check_slice, entry_err, value_err, BufferKind, Recipe, Run, Where};
use crate::buf::AreaBuf;
use crate::bundle::{area_alignment, Bundle};
use crate::config::{Area, BundleOpFn, Role};
use crate::error::{bad, Error, FieldPath, Name, RecipePath, RecipeTable, RecipeWhy, RunList, Why};
use crate::Result;

/// What backs one recipe buffer while the runner lives.
pub(super) enum Slot {
    /// A `weight` buffer: the bundle's constant area (read-only).
    Weights,
    /// An internal buffer, owned and zeroed.
    Internal(AreaBuf<'static>),
    /// An input: the runner's copy of the bound bytes (symbol `tensor`).
    Input {
        data: AreaBuf<'static>,
        tensor: usize,
        bound: bool,
    },
    /// An output: computed into `data`, copied to `target` (`data`'s length) at the end of a run.
    Output {
        data: AreaBuf<'static>,
        tensor: usize,
        target: Option<core::ptr::NonNull<u8>>,
    },
}

impl Slot {
    /// The buffer's size in bytes.
    pub(super) fn len(&self, bundle: &Bundle<'_>) -> usize {
        match self {
            Slot::Weights => bundle.area_size(Area::Constant),
            Slot::Internal(data) | Slot::Input { data, .. } | Slot::Output { data, .. } => {
                data.bytes().len()
            }
        }
    }
}

/// One argument of a call: `offset` bytes into the buffer of slot `slot`.
#[derive(Clone, Copy, Debug)]
pub(super) struct ArgRef {
    pub(super) slot: usize,
    pub(super) offset: usize,
}

/// One run, resolved: op `op`'s kernel, called for tasks `0..tasks` with `args` (argidx order).
pub(super) struct Call {
    pub(super) func: BundleOpFn,
    pub(super) tasks: u32,
    pub(super) args: Vec<ArgRef>,
}

/// One slot per buffer of `recipe`; checks library names and external buffers against `bundle`.
pub(super) fn slots(bundle: &Bundle<'_>, recipe: &Recipe) -> Result<Vec<Slot>> {
    for (i, cpu) in recipe.cpus.iter().enumerate() {
        if let Some(lib) = cpu
            .library_name
            .as_deref()
            .filter(|&l| l != bundle.model_name())
        {
            let at = RecipePath::entry(RecipeTable::Cpus, i, "library_name");
            return Err(value_err(at, lib, RecipeWhy::WrongLibrary));
        }
    }
    let align = area_alignment(bundle.view());
    let mut slots = Vec::with_capacity(recipe.buffers.len());
    for (i, buf) in recipe.buffers.iter().enumerate() {
        let at = |field| RecipePath::entry(RecipeTable::Buffers, i, field);
        let (slot, len) = match buf.kind {
            BufferKind::Weight => (Slot::Weights, bundle.area_size(Area::Constant)),
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

/// One call per run of `recipe`, resolved against `bundle`'s op table and the buffers in `slots`.
pub(super) fn calls(bundle: &Bundle<'_>, recipe: &Recipe, slots: &[Slot]) -> Result<Vec<Call>> {
    let view = bundle.view();
    let ops: BTreeMap<&str, usize> = (0..view.ops().len())
        .map(|i| (view.op_name(i), i))
        .collect();
    let mut calls = Vec::with_capacity(recipe.runs.len());
    for (r, run) in recipe.runs.iter().enumerate() {
        let at = |field| RecipePath::entry(RecipeTable::Runs, r, field);
        if run.location == Where::Npu {
            return Err(Error::NoNpuDevice {
                run: Name::new(&run.name),
            });
        }
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
            if matches!(slots[arg.buffer], Slot::Weights) && expected.area != Area::Constant as u32
            {
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
        calls.push(Call {
            func,
            tasks: op_table.num_tasks,
            args,
        });
    }
    Ok(calls)
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
