//! [`Recipe`]: an XRT run recipe (`NAME.recipe.json`, SPEC §8) parsed and checked on its own,
//! before it meets a bundle.
//!
//! The JSON is read with `serde` into loose mirror structs (`json.rs`: every field optional,
//! numbers as raw JSON values), then checked field by field so that each failure is an
//! [`Error::BadRecipe`] naming the field (`execution.runs[3].arguments[1].argidx`), the run or buffer, and the reason. Only a
//! document that is not JSON, or a field of the wrong JSON type, is an [`Error::RecipeSyntax`] with
//! line and column. What holds once a `Recipe` exists:
//!
//! - `version` is `"1.0"`; buffer, cpu and kernel names are unique within their lists;
//! - every buffer has a known `type`; every buffer other than `input`, `output` and `weight` (the
//!   external ones) has a `size`;
//! - every kernel has a `name` and no `ctrlcode` (XRT loads it as ELF control code, which this
//!   runtime does not run: an npu run's transaction is its instruction buffer, argidx 1);
//!   `instance` is an optional string;
//! - every run has a `name` naming a cpu resource (`where: "cpu"`) or a kernel resource (`"npu"`);
//! - every argument names a declared buffer, has an `argidx` unique within its run, and gives
//!   `offset` and `size` together or not at all; a sub-buffer of a buffer of declared size lies inside
//!   it;
//! - every constant has `type: "int"` and non-negative integer `value` and `argidx`.
//!
//! Integers may be JSON numbers or strings of decimal digits (XRT's examples write `"size": "1024"`).
//! Unknown fields are ignored, as XRT's runner does. Checks against a bundle (op names, argument
//! counts and sizes, task counts) are the [`Runner`](super::Runner)'s.

use alloc::collections::BTreeMap;
use alloc::string::{String, ToString};
use alloc::vec::Vec;

use super::json::{
    entry_err, integer, missing, syntax, RawArgument, RawBuffer, RawConstant, RawCpu, RawKernel,
    RawRecipe, RawRun,
};
use crate::error::{Error, Name, Quoted, RecipePath, RecipeTable, RecipeWhy, RunList};
use crate::Result;

/// The recipe `version` this runtime reads.
pub const RECIPE_VERSION: &str = "1.0";

/// A checked run recipe; see the module docs for what holds.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Recipe {
    /// `header.program` (a CPU-only bundle: `NAME.o`), if given; not used by the runner.
    pub program: Option<String>,
    /// `header.xclbin` (a bundle with NPU segments: the target, e.g. `vnpu.json`), if given; not
    /// used by the runner.
    pub xclbin: Option<String>,
    /// `resources.buffers`.
    pub buffers: Vec<Buffer>,
    /// `resources.cpus`.
    pub cpus: Vec<Cpu>,
    /// `resources.kernels`.
    pub kernels: Vec<Kernel>,
    /// `execution.runs`, in order.
    pub runs: Vec<Run>,
}

/// The `type` of a buffer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BufferKind {
    /// `input`: external, bound by the caller.
    Input,
    /// `output`: external, bound by the caller.
    Output,
    /// `weight`: external; the runner binds the bundle's constant area.
    Weight,
    /// `internal`, or any other type (`inout`, `spill`, `unknown`, `debug`): allocated by the runner.
    Internal,
}

/// One entry of `resources.buffers`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Buffer {
    /// Its name.
    pub name: String,
    /// Its kind.
    pub kind: BufferKind,
    /// `size` in bytes: required for internal buffers, only checked for external ones.
    pub size: Option<u64>,
}

/// One entry of `resources.cpus`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Cpu {
    /// The function's name (an op name of the bundle).
    pub name: String,
    /// `library_name` (the bundle's model name), if given.
    pub library_name: Option<String>,
}

/// One entry of `resources.kernels`: an NPU kernel, one per NPU segment of the bundle.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Kernel {
    /// The kernel's name: the name of a segment in the bundle's segment table (`npu0`).
    pub name: String,
    /// `instance` (the xclbin kernel, `DPU`), if given; not used by the runner.
    pub instance: Option<String>,
}

/// Where a run executes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Where {
    /// `"cpu"`: an op of the bundle, or the runtime's `bundlert_copy`.
    Cpu,
    /// `"npu"`: a kernel resource (an NPU segment of the bundle).
    Npu,
}

/// One entry of `execution.runs`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Run {
    /// The resource run.
    pub name: String,
    /// `where`.
    pub location: Where,
    /// Buffer arguments, in recipe order.
    pub arguments: Vec<Argument>,
    /// Constant arguments, in recipe order.
    pub constants: Vec<Constant>,
}

/// A buffer argument of a run.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Argument {
    /// Index into [`Recipe::buffers`].
    pub buffer: usize,
    /// Position in the function's argument list.
    pub argidx: u64,
    /// `(offset, size)` when given; a sub-buffer only when `0 < size < buffer size`.
    pub slice: Option<(u64, u64)>,
}

/// An `int` constant argument of a run.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Constant {
    /// Position in the function's argument list.
    pub argidx: u64,
    /// The value.
    pub value: u64,
}

impl Recipe {
    /// Parses and checks `json`.
    pub fn parse(json: &str) -> Result<Recipe> {
        let raw: RawRecipe = serde_json::from_str(json).map_err(|e| syntax(&e))?;
        let version = raw
            .version
            .ok_or_else(|| missing(RecipePath::document("version"), ""))?;
        if version != RECIPE_VERSION {
            let at = RecipePath::document("version");
            return Err(value_err(at, &version, RecipeWhy::Unsupported));
        }
        let resources = raw
            .resources
            .ok_or_else(|| missing(RecipePath::document("resources"), ""))?;
        let execution = raw
            .execution
            .ok_or_else(|| missing(RecipePath::document("execution"), ""))?;
        let (program, xclbin) = raw.header.map_or((None, None), |h| (h.program, h.xclbin));
        let buffers = buffers(resources.buffers.unwrap_or_default())?;
        let cpus = cpus(resources.cpus.unwrap_or_default())?;
        let kernels = kernels(resources.kernels.unwrap_or_default())?;
        let mut recipe = Recipe {
            program,
            xclbin,
            buffers,
            cpus,
            kernels,
            runs: Vec::new(),
        };
        for (i, run) in execution.runs.unwrap_or_default().into_iter().enumerate() {
            let run = recipe.run(i, run)?;
            recipe.runs.push(run);
        }
        Ok(recipe)
    }

    /// Index of the buffer called `name`.
    pub fn buffer(&self, name: &str) -> Option<usize> {
        self.buffers.iter().position(|b| b.name == name)
    }

    /// Checks run `i`.
    fn run(&self, i: usize, raw: RawRun) -> Result<Run> {
        let at = |field| RecipePath::entry(RecipeTable::Runs, i, field);
        let name = raw.name.ok_or_else(|| missing(at("name"), ""))?;
        let location = match raw.location.as_deref() {
            Some("cpu") => Where::Cpu,
            Some("npu") => Where::Npu,
            Some(other) => {
                let why = RecipeWhy::UnknownValue {
                    expected: "cpu, npu",
                };
                return Err(value_err(at("where"), other, why));
            }
            None => return Err(missing(at("where"), &name)),
        };
        let (declared, list) = match location {
            Where::Cpu => (self.cpus.iter().any(|c| c.name == name), "resources.cpus"),
            Where::Npu => (
                self.kernels.iter().any(|k| k.name == name),
                "resources.kernels",
            ),
        };
        if !declared {
            return Err(value_err(
                at("name"),
                &name,
                RecipeWhy::NotDeclared { list },
            ));
        }
        let mut arguments: Vec<Argument> = Vec::new();
        for (j, arg) in raw.arguments.unwrap_or_default().into_iter().enumerate() {
            let arg = self.argument(i, &name, j, arg)?;
            if let Some(first) = arguments.iter().position(|a| a.argidx == arg.argidx) {
                let at = RecipePath::run_item(i, RunList::Arguments, j, "argidx");
                let why = RecipeWhy::Duplicate {
                    first: first as u32,
                };
                return Err(entry_err(at, &name, why));
            }
            arguments.push(arg);
        }
        let mut constants = Vec::new();
        for (j, c) in raw.constants.unwrap_or_default().into_iter().enumerate() {
            constants.push(constant(i, &name, j, c)?);
        }
        Ok(Run {
            name,
            location,
            arguments,
            constants,
        })
    }

    /// Checks argument `j` of run `i` (called `run`).
    fn argument(&self, i: usize, run: &str, j: usize, raw: RawArgument) -> Result<Argument> {
        let at = |field| RecipePath::run_item(i, RunList::Arguments, j, field);
        let name = raw.name.ok_or_else(|| missing(at("name"), run))?;
        let buffer = self.buffer(&name).ok_or_else(|| {
            let why = RecipeWhy::NotDeclared {
                list: "resources.buffers",
            };
            value_err(at("name"), &name, why)
        })?;
        let argidx = integer(raw.argidx.as_ref(), at("argidx"), run)?;
        let slice = match (raw.offset, raw.size) {
            (None, None) => None,
            (Some(_), None) => return Err(entry_err(at("size"), run, RecipeWhy::Incomplete)),
            (None, Some(_)) => return Err(entry_err(at("offset"), run, RecipeWhy::Incomplete)),
            (Some(offset), Some(size)) => Some((
                integer(Some(&offset), at("offset"), run)?,
                integer(Some(&size), at("size"), run)?,
            )),
        };
        if let (Some((offset, size)), Some(limit)) = (slice, self.buffers[buffer].size) {
            check_slice(offset, size, limit).map_err(|why| entry_err(at("size"), run, why))?;
        }
        Ok(Argument {
            buffer,
            argidx,
            slice,
        })
    }
}

/// A sub-buffer `(offset, size)` of a buffer of `limit` bytes: `size == 0` means the whole buffer
/// (offset ignored, XRT's rule); otherwise it must lie inside.
pub(crate) fn check_slice(
    offset: u64,
    size: u64,
    limit: u64,
) -> core::result::Result<(), RecipeWhy> {
    if size == 0 {
        return Ok(());
    }
    let end = offset.checked_add(size).ok_or(RecipeWhy::Overflow)?;
    if end > limit {
        return Err(RecipeWhy::OutOfRange { end, limit });
    }
    Ok(())
}

/// Checks `resources.buffers`.
fn buffers(raw: Vec<RawBuffer>) -> Result<Vec<Buffer>> {
    let mut seen = BTreeMap::new();
    let mut out = Vec::with_capacity(raw.len());
    for (i, b) in raw.into_iter().enumerate() {
        let at = |field| RecipePath::entry(RecipeTable::Buffers, i, field);
        let name = b.name.ok_or_else(|| missing(at("name"), ""))?;
        unique(&mut seen, &name, i, at("name"))?;
        let kind = match b.kind.as_deref() {
            Some("input") => BufferKind::Input,
            Some("output") => BufferKind::Output,
            Some("weight") => BufferKind::Weight,
            Some("internal" | "inout" | "spill" | "unknown" | "debug") => BufferKind::Internal,
            Some(other) => {
                let why = RecipeWhy::UnknownValue {
                    expected: "input, output, inout, internal, weight, spill, unknown, debug",
                };
                return Err(value_err(at("type"), other, why));
            }
            None => return Err(missing(at("type"), &name)),
        };
        let size = match b.size {
            Some(v) => Some(integer(Some(&v), at("size"), &name)?),
            None if kind == BufferKind::Internal => return Err(missing(at("size"), &name)),
            None => None,
        };
        out.push(Buffer { name, kind, size });
    }
    Ok(out)
}

/// Checks `resources.cpus`.
fn cpus(raw: Vec<RawCpu>) -> Result<Vec<Cpu>> {
    let mut seen = BTreeMap::new();
    let mut out = Vec::with_capacity(raw.len());
    for (i, c) in raw.into_iter().enumerate() {
        let at = |field| RecipePath::entry(RecipeTable::Cpus, i, field);
        let name = c.name.ok_or_else(|| missing(at("name"), ""))?;
        unique(&mut seen, &name, i, at("name"))?;
        out.push(Cpu {
            name,
            library_name: c.library_name,
        });
    }
    Ok(out)
}

/// Checks `resources.kernels` (names unique; the runner matches them to the bundle's segments).
fn kernels(raw: Vec<RawKernel>) -> Result<Vec<Kernel>> {
    let mut seen = BTreeMap::new();
    let mut out = Vec::with_capacity(raw.len());
    for (i, k) in raw.into_iter().enumerate() {
        let at = RecipePath::entry(RecipeTable::Kernels, i, "name");
        let name = k.name.ok_or_else(|| missing(at, ""))?;
        unique(&mut seen, &name, i, at)?;
        if k.ctrlcode.is_some() {
            let at = RecipePath::entry(RecipeTable::Kernels, i, "ctrlcode");
            return Err(entry_err(at, &name, RecipeWhy::Unsupported));
        }
        out.push(Kernel {
            name,
            instance: k.instance,
        });
    }
    Ok(out)
}

/// Checks constant `j` of run `i` (called `run`).
fn constant(i: usize, run: &str, j: usize, raw: RawConstant) -> Result<Constant> {
    let at = |field| RecipePath::run_item(i, RunList::Constants, j, field);
    match raw.kind.as_deref() {
        Some("int") => {}
        Some("string") => return Err(value_err(at("type"), "string", RecipeWhy::Unsupported)),
        Some(other) => {
            let why = RecipeWhy::UnknownValue {
                expected: "int, string",
            };
            return Err(value_err(at("type"), other, why));
        }
        None => return Err(missing(at("type"), run)),
    }
    Ok(Constant {
        argidx: integer(raw.argidx.as_ref(), at("argidx"), run)?,
        value: integer(raw.value.as_ref(), at("value"), run)?,
    })
}

/// Records `name` as entry `i`, failing if an earlier entry has it.
fn unique(seen: &mut BTreeMap<String, usize>, name: &str, i: usize, at: RecipePath) -> Result<()> {
    if let Some(&first) = seen.get(name) {
        let why = RecipeWhy::Duplicate {
            first: first as u32,
        };
        return Err(value_err(at, name, why));
    }
    seen.insert(name.to_string(), i);
    Ok(())
}

/// An error quoting the field's (string) value.
pub(crate) fn value_err(at: RecipePath, value: &str, why: RecipeWhy) -> Error {
    Error::BadRecipe {
        at,
        name: Name::new(value),
        quoted: Quoted::Value,
        why,
    }
}
