//! The values an [`Error::BadRecipe`](super::Error::BadRecipe) carries about a run recipe:
//! [`RecipePath`] locates the field (`execution.runs[3].arguments[1].argidx`), [`Quoted`] says what
//! the name in the error is (the entry at fault, or the field's value), and [`RecipeWhy`] says what is
//! wrong. They are plain `Copy` data, like the config errors, so the error stays allocation-free even
//! though recipes are only read with `alloc`.

use core::fmt;

use crate::config::Role;

/// A list of a recipe that holds entries, or the document itself.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RecipeTable {
    /// A top-level field (`version`, `resources`, `execution`).
    Document,
    /// `resources.buffers`.
    Buffers,
    /// `resources.cpus`.
    Cpus,
    /// `resources.kernels`.
    Kernels,
    /// `execution.runs`.
    Runs,
}

impl RecipeTable {
    /// The list's path in the document (`""` for the document).
    pub const fn path(self) -> &'static str {
        match self {
            RecipeTable::Document => "",
            RecipeTable::Buffers => "resources.buffers",
            RecipeTable::Cpus => "resources.cpus",
            RecipeTable::Kernels => "resources.kernels",
            RecipeTable::Runs => "execution.runs",
        }
    }

    /// What one entry of the list is called in messages.
    const fn noun(self) -> &'static str {
        match self {
            RecipeTable::Document => "recipe",
            RecipeTable::Buffers => "buffer",
            RecipeTable::Cpus => "cpu",
            RecipeTable::Kernels => "kernel",
            RecipeTable::Runs => "run",
        }
    }
}

/// A list inside a run.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RunList {
    /// `arguments`.
    Arguments,
    /// `constants`.
    Constants,
}

/// Where a bad value sits in a recipe: `table[index].inner[inner_index].field`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RecipePath {
    /// The list (or the document, for top-level fields).
    pub table: RecipeTable,
    /// The entry of the list (0 for the document).
    pub index: u32,
    /// A list inside a run and its entry, e.g. `(Arguments, 1)`.
    pub inner: Option<(RunList, u32)>,
    /// The field, spelled as in the JSON (`"argidx"`); `""` for the entry itself.
    pub field: &'static str,
}

impl RecipePath {
    /// A top-level field.
    pub const fn document(field: &'static str) -> RecipePath {
        RecipePath {
            table: RecipeTable::Document,
            index: 0,
            inner: None,
            field,
        }
    }

    /// A field of entry `index` of `table`.
    pub const fn entry(table: RecipeTable, index: usize, field: &'static str) -> RecipePath {
        RecipePath {
            table,
            index: index as u32,
            inner: None,
            field,
        }
    }

    /// A field of entry `inner_index` of list `inner` of run `run`.
    pub const fn run_item(
        run: usize,
        inner: RunList,
        inner_index: usize,
        field: &'static str,
    ) -> RecipePath {
        RecipePath {
            table: RecipeTable::Runs,
            index: run as u32,
            inner: Some((inner, inner_index as u32)),
            field,
        }
    }
}

impl fmt::Display for RecipePath {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.table == RecipeTable::Document {
            return f.write_str(self.field);
        }
        write!(f, "{}[{}]", self.table.path(), self.index)?;
        match self.inner {
            Some((RunList::Arguments, i)) => write!(f, ".arguments[{i}]")?,
            Some((RunList::Constants, i)) => write!(f, ".constants[{i}]")?,
            None => {}
        }
        if !self.field.is_empty() {
            write!(f, ".{}", self.field)?;
        }
        Ok(())
    }
}

/// What the name in a [`BadRecipe`](super::Error::BadRecipe) error is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Quoted {
    /// The name of the entry at fault (the run, buffer or cpu of the path).
    Entry,
    /// The value of the field (a string, or a number or other JSON value as text).
    Value,
}

/// What is wrong with a recipe field.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RecipeWhy {
    /// A required field is absent.
    Missing,
    /// The value must be a non-negative integer (a JSON number, or a string of decimal digits).
    NotAnInteger,
    /// The value is valid XRT but not supported by this runtime (a `version` other than "1.0", a
    /// `string` constant, more constants than the task count).
    Unsupported,
    /// The value is not one of `expected`.
    UnknownValue {
        /// The accepted values, comma-separated.
        expected: &'static str,
    },
    /// The name (or argidx) is already used by entry `first` of the same list.
    Duplicate {
        /// Index of the first entry with it.
        first: u32,
    },
    /// No entry of this name in the list `list` (e.g. `resources.buffers`).
    NotDeclared {
        /// The list searched.
        list: &'static str,
    },
    /// The bundle's op table has no op of this name.
    UnknownOp,
    /// The bundle has no tensor of this name with the buffer's role.
    NotATensor {
        /// The role the buffer type asks for.
        wanted: Role,
    },
    /// A cpu resource's `library_name` is not the bundle's model name.
    WrongLibrary,
    /// `offset + size` (= `end`) runs past the buffer (`limit` bytes).
    OutOfRange {
        /// End of the sub-buffer.
        end: u64,
        /// Size of the buffer.
        limit: u64,
    },
    /// `offset + size` overflows 64 bits.
    Overflow,
    /// `offset` and `size` must be given together.
    Incomplete,
    /// A buffer argument's `argidx` is not below the op's argument count.
    ArgIndexTooLarge {
        /// The argidx given.
        argidx: u64,
        /// The op's `numArgs`.
        num_args: u32,
    },
    /// The run has another number of buffer arguments than the op.
    ArgCount {
        /// The op's `numArgs`.
        expected: u32,
        /// Arguments in the run.
        got: u32,
    },
    /// The value (a size, a task count, a constant's argidx) differs from the bundle's.
    Mismatch {
        /// What the bundle requires.
        expected: u64,
        /// What the recipe gives.
        got: u64,
    },
    /// A sub-buffer offset is not a multiple of the bundle's alignment.
    Misaligned {
        /// The alignment required.
        align: u32,
    },
    /// The argument is the read-only `weights` buffer, but it may be written: an op argument
    /// outside the constant area, a `bundlert_copy` destination, or an npu run's `out` or `scratch`.
    ReadOnly,
    /// A kernel's name is not the name of an NPU segment of the bundle.
    UnknownSegment,
    /// A cpu resource of `library_name` `"bundlert"` that the runtime does not have (its only
    /// function is `bundlert_copy`).
    UnknownBuiltin,
    /// The argument's bytes overlap those of argument `argidx` of the same run, and one of the two
    /// is written (a copy's destination, an npu run's `out` or `scratch`).
    Overlaps {
        /// The other argument's `argidx`.
        argidx: u64,
    },
    /// An npu run's instruction buffer (argidx 1) is misused; `why` says how.
    Instructions {
        /// What is wrong.
        why: &'static str,
    },
}

impl fmt::Display for RecipeWhy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            RecipeWhy::Missing => f.write_str("required field is missing"),
            RecipeWhy::NotAnInteger => {
                f.write_str("not a non-negative integer (a JSON number or a decimal string)")
            }
            RecipeWhy::Unsupported => f.write_str("not supported by this runtime"),
            RecipeWhy::UnknownValue { expected } => write!(f, "not one of {expected}"),
            RecipeWhy::Duplicate { first } => {
                write!(f, "already used by entry {first} of the same list")
            }
            RecipeWhy::NotDeclared { list } => write!(f, "no entry of this name in {list}"),
            RecipeWhy::UnknownOp => f.write_str("the bundle's op table has no op of this name"),
            RecipeWhy::NotATensor { wanted } => {
                write!(f, "the bundle has no tensor of this name that is {wanted}")
            }
            RecipeWhy::WrongLibrary => f.write_str(
                "not the bundle's model name (cpu functions are looked up in the bundle's op table)",
            ),
            RecipeWhy::OutOfRange { end, limit } => {
                write!(f, "sub-buffer ends at {end}, past the buffer size {limit}")
            }
            RecipeWhy::Overflow => f.write_str("offset + size overflows 64 bits"),
            RecipeWhy::Incomplete => f.write_str("`offset` and `size` must be given together"),
            RecipeWhy::ArgIndexTooLarge { argidx, num_args } => write!(
                f,
                "argidx {argidx} is not below the op's {num_args} buffer arguments"
            ),
            RecipeWhy::ArgCount { expected, got } => write!(
                f,
                "the run has {got} buffer arguments, the op takes {expected}"
            ),
            RecipeWhy::Mismatch { expected, got } => {
                write!(f, "is {got}, the bundle requires {expected}")
            }
            RecipeWhy::Misaligned { align } => {
                write!(f, "offset is not a multiple of the bundle's alignment {align}")
            }
            RecipeWhy::ReadOnly => f.write_str(
                "`weight` buffers are read-only, but this argument may be written (not a constant)",
            ),
            RecipeWhy::UnknownSegment => {
                f.write_str("the bundle's NPU segment table has no segment of this name")
            }
            RecipeWhy::UnknownBuiltin => {
                f.write_str("library `bundlert` has no function of this name (only `bundlert_copy`)")
            }
            RecipeWhy::Overlaps { argidx } => write!(
                f,
                "its bytes overlap those of argidx {argidx}, and one of the two is written"
            ),
            RecipeWhy::Instructions { why } => write!(f, "instruction buffer: {why}"),
        }
    }
}

/// Writes the name of a [`BadRecipe`](super::Error::BadRecipe) error: ` (run `x`)` or `` = `x` ``.
pub(super) fn fmt_quoted(
    f: &mut fmt::Formatter<'_>,
    at: &RecipePath,
    quoted: Quoted,
    name: &super::Name,
) -> fmt::Result {
    if name.as_str().is_empty() && !name.is_truncated() {
        return Ok(());
    }
    match quoted {
        Quoted::Entry => write!(f, " ({} `{name}`)", at.table.noun()),
        Quoted::Value => write!(f, " = `{name}`"),
    }
}
