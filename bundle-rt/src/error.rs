//! The crate's one error type, [`Error`], and the small values it carries.
//!
//! Errors never allocate (the runtime is `no_std`): names of tensors, ops and buffers are copied into
//! a fixed-size [`Name`], and a bad config field is located by a [`FieldPath`] such as
//! `ops[3].args[1].offset` plus a [`Why`] saying what is wrong with its value (`fields.rs`); a bad
//! run-recipe field likewise by a [`RecipePath`] and a [`RecipeWhy`] (`recipe.rs`). Each variant's
//! doc says whether it is a *caller error* (fix the calling code or its data) or a *bundle error*
//! (the config or weights do not match the contract in `docs/bundle-format.md`: a compiler bug or
//! mismatched files).

use core::fmt;

use crate::config::{DType, Role};

mod fields;
mod meta;
mod npu;
mod recipe;

pub use fields::{FieldPath, Name, Why, NAME_CAPACITY};
pub use meta::MetaWhy;
pub use npu::{kernel_name, DmaStall, NpuBuffer, NpuRegion, NpuWhy, ParamWhy};
pub use recipe::{Quoted, RecipePath, RecipeTable, RecipeWhy, RunList};

/// Every failure of `bundle-rt`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Error {
    /// Bundle error: `BundleConfig.magic` is not `"BUNDLC1\0"` (a Glow config, or the wrong symbol).
    BadMagic {
        /// The value found.
        found: u64,
    },
    /// Bundle error: the config was written for another format version.
    BadVersion {
        /// The version found.
        found: u32,
        /// The version this runtime reads.
        supported: u32,
    },
    /// Bundle error: a config field breaks the format contract.
    BadConfig {
        /// Which field.
        field: FieldPath,
        /// Its value (for strings: the offending byte offset, or 0).
        value: u64,
        /// What is wrong with it.
        why: Why,
    },
    /// Caller error: the running CPU lacks instruction-set features the bundle's kernels use (`cpuFeatures`).
    CpuFeatures {
        /// The missing features ([`crate::cpu`] bits).
        missing: u64,
        /// Every feature the bundle needs.
        needed: u64,
    },
    /// Caller error: the weights are not `constantWeightVarsMemSize` bytes (wrong or truncated file).
    WeightsSize {
        /// `constantWeightVarsMemSize`.
        expected: u64,
        /// Length of the bytes given.
        got: u64,
    },
    /// Caller error: the weights' FNV-1a 64 checksum differs from `weightsChecksum` (another model's file).
    WeightsChecksum {
        /// `weightsChecksum` from the config.
        expected: u64,
        /// Checksum of the bytes given.
        got: u64,
    },
    /// Caller error: no tensor of this name in the symbol table.
    UnknownTensor {
        /// The name asked for.
        name: Name,
    },
    /// Caller error: the tensor exists but is not an input (or output) as the call requires.
    WrongRole {
        /// The tensor.
        name: Name,
        /// Its role.
        role: Role,
        /// The role the call needs.
        wanted: Role,
    },
    /// Caller error: typed access with an element type other than the tensor's dtype.
    DTypeMismatch {
        /// The tensor.
        name: Name,
        /// The tensor's dtype.
        dtype: DType,
        /// The dtype of the element type used.
        requested: DType,
    },
    /// Caller error: data with a number of elements other than the tensor's.
    SizeMismatch {
        /// The tensor.
        name: Name,
        /// Elements in the tensor.
        expected: u64,
        /// Elements given.
        got: u64,
    },
    /// Caller error: raw bytes of a length other than the tensor's size in bytes.
    ByteSizeMismatch {
        /// The tensor.
        name: Name,
        /// The tensor's size in bytes.
        expected: u64,
        /// Bytes given.
        got: u64,
    },
    /// Caller error: a caller-provided buffer (or a tensor inside it) is not aligned enough.
    Misaligned {
        /// The buffer or tensor.
        what: Name,
        /// Its address.
        address: u64,
        /// The alignment required.
        align: u64,
    },
    /// Caller error: a caller-provided buffer is smaller than the area it must hold.
    BufferTooSmall {
        /// The buffer.
        what: Name,
        /// Bytes needed.
        needed: u64,
        /// Bytes given.
        got: u64,
    },
    /// An area could not be allocated.
    OutOfMemory {
        /// The area.
        what: Name,
        /// Its size in bytes.
        bytes: u64,
    },
    /// The entry function returned a non-zero status.
    EntryFailed {
        /// The model name.
        model: Name,
        /// The status returned.
        code: i32,
    },
    /// Caller/bundle limit: an op has more arguments than [`crate::format::MAX_OP_ARGS`], so it can only run
    /// through the entry function (`Instance::run`).
    TooManyArgs {
        /// The op.
        op: Name,
        /// Its `numArgs`.
        num_args: u64,
        /// [`crate::format::MAX_OP_ARGS`].
        max: u64,
    },
    /// Caller error: a thread count of 0 or above the engine's limit.
    BadThreadCount {
        /// The count asked for.
        requested: usize,
        /// The largest count accepted.
        max: usize,
    },
    /// The port could not start worker thread `index` (or cannot start threads at all).
    Spawn {
        /// The worker's index (1-based; the calling thread is worker 0).
        index: usize,
    },
    /// Caller error: a run recipe is not JSON, or a field has the wrong JSON type (a number where a
    /// string belongs, an object where a list belongs).
    RecipeSyntax {
        /// Line of the error (1-based; 0 when unknown).
        line: u64,
        /// Column of the error (1-based; 0 when unknown).
        column: u64,
        /// The JSON parser's message (cut to [`NAME_CAPACITY`] bytes).
        message: Name,
    },
    /// Caller error: a run recipe breaks the recipe rules (`docs/runtime.md`, SPEC §8), or does not
    /// match the bundle it is run with (a recipe of another build).
    BadRecipe {
        /// Which field.
        at: RecipePath,
        /// The entry's name or the field's value, as `quoted` says.
        name: Name,
        /// What `name` is.
        quoted: Quoted,
        /// What is wrong.
        why: RecipeWhy,
    },
    /// Caller error: a DynamicDispatch meta JSON (`NAME.<segment>.meta.json`) is not valid, or
    /// does not describe the segment it is checked against.
    BadMeta {
        /// The field (`fused_tensors.buffer_size`, `tensor_map.offset`, ...).
        field: &'static str,
        /// The entry (a buffer label, tensor or op name), or the JSON parser's message.
        name: Name,
        /// What is wrong.
        why: MetaWhy,
    },
    /// Caller error: the recipe has a run `where: "npu"`, and the runner has no NPU device (it
    /// was taken with `Runner::take_device`).
    NoNpuDevice {
        /// The run's name.
        run: Name,
    },
    /// Caller error: the recipe declares no buffer of this name.
    UnknownBuffer {
        /// The name asked for.
        name: Name,
    },
    /// Caller error: the buffer is not an external input or output (the runner binds `weight` buffers
    /// to the bundle's constants and allocates internal ones), or not of the kind the call binds.
    NotBindable {
        /// The buffer.
        name: Name,
        /// What the call needs it to be.
        wanted: Role,
    },
    /// Caller error: `execute` while an external input or output buffer is unbound.
    Unbound {
        /// The buffer.
        name: Name,
    },
    /// Compiler/caller error: the header of an NPU transaction (or its op list as a whole) is
    /// invalid, or built for another array (`docs/npu-transaction-format.md`).
    NpuHeader {
        /// Byte offset of the field at fault in the transaction.
        offset: u32,
        /// What is wrong.
        why: NpuWhy,
    },
    /// Compiler/caller error: op `op` of an NPU transaction is invalid, or fails when run against
    /// the bound buffers (out of bounds, store to a read-only buffer, poll timeout, bad kernel
    /// parameters).
    Npu {
        /// Index of the op (0-based, in file order).
        op: u32,
        /// Byte offset of the op in the transaction.
        offset: u32,
        /// What is wrong.
        why: NpuWhy,
    },
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::BadMagic { found } => write!(
                f,
                "bundle config has magic {found:#018x}, not \"BUNDLC1\\0\": not a bundlec config (a Glow bundle, or the wrong symbol?)"
            ),
            Error::BadVersion { found, supported } => write!(
                f,
                "bundle config version {found} is not supported (this runtime reads version {supported}); rebuild the bundle with a matching bundlec"
            ),
            Error::BadConfig { field, value, why } => {
                write!(f, "bad bundle config field {field} = {value}: {why}")
            }
            Error::CpuFeatures { missing, needed } => write!(
                f,
                "this CPU lacks {} of the features the bundle's kernels use ({}); recompile with a lower --cpu (e.g. x86-64-v3 or generic)",
                crate::cpu::Features(*missing),
                crate::cpu::Features(*needed)
            ),
            Error::WeightsSize { expected, got } => write!(
                f,
                "weights are {got} bytes, the bundle expects {expected} (constantWeightVarsMemSize); wrong or truncated .weights file?"
            ),
            Error::WeightsChecksum { expected, got } => write!(
                f,
                "weights checksum {got:#018x} differs from the bundle's {expected:#018x}: the .weights file belongs to another build"
            ),
            Error::UnknownTensor { name } => write!(
                f,
                "no tensor `{name}` in the bundle (names are the ONNX tensor names; see Bundle::inputs/outputs)"
            ),
            Error::WrongRole { name, role, wanted } => {
                write!(f, "tensor `{name}` is {role}, not {wanted}")
            }
            Error::DTypeMismatch {
                name,
                dtype,
                requested,
            } => write!(f, "tensor `{name}` has dtype {dtype}, accessed as {requested}"),
            Error::SizeMismatch {
                name,
                expected,
                got,
            } => write!(f, "tensor `{name}` has {expected} elements, got {got}"),
            Error::ByteSizeMismatch {
                name,
                expected,
                got,
            } => write!(f, "tensor `{name}` is {expected} bytes, got {got}"),
            Error::Misaligned {
                what,
                address,
                align,
            } => write!(f, "{what} at {address:#x} is not {align}-byte aligned"),
            Error::BufferTooSmall { what, needed, got } => {
                write!(f, "{what} needs {needed} bytes, the buffer given has {got}")
            }
            Error::OutOfMemory { what, bytes } => {
                write!(f, "cannot allocate {bytes} bytes for the {what}")
            }
            Error::EntryFailed { model, code } => {
                write!(f, "entry function of `{model}` returned {code}")
            }
            Error::TooManyArgs { op, num_args, max } => write!(
                f,
                "op `{op}` has {num_args} arguments, more than the {max} the op-table runner supports; use Instance::run"
            ),
            Error::BadThreadCount { requested, max } => {
                write!(f, "thread count {requested} is not in 1..={max}")
            }
            Error::Spawn { index } => write!(f, "the port could not start worker thread {index}"),
            Error::RecipeSyntax {
                line,
                column,
                message,
            } => write!(
                f,
                "run recipe is not valid: {message} at line {line} column {column}"
            ),
            Error::BadRecipe {
                at,
                name,
                quoted,
                why,
            } => {
                write!(f, "bad recipe field {at}")?;
                recipe::fmt_quoted(f, at, *quoted, name)?;
                write!(f, ": {why}")
            }
            Error::BadMeta { field, name, why } => {
                write!(f, "bad DynamicDispatch meta field `{field}`")?;
                if !name.as_str().is_empty() {
                    write!(f, " (`{name}`)")?;
                }
                write!(f, ": {why}")
            }
            Error::NoNpuDevice { run } => write!(
                f,
                "run `{run}` is an npu run, but the runner has no NPU device (Runner::set_device)"
            ),
            Error::UnknownBuffer { name } => {
                write!(f, "the recipe has no buffer `{name}` (resources.buffers)")
            }
            Error::NotBindable { name, wanted } => write!(
                f,
                "buffer `{name}` cannot be bound as {wanted}: only external input and output buffers are bound by the caller"
            ),
            Error::Unbound { name } => write!(
                f,
                "external buffer `{name}` is not bound; bind every input and output before execute"
            ),
            Error::NpuHeader { offset, why } => {
                write!(f, "bad NPU transaction header (byte {offset}): {why}")
            }
            Error::Npu { op, offset, why } => {
                write!(f, "NPU transaction op {op} (byte {offset}): {why}")
            }
        }
    }
}

#[cfg(feature = "std")]
impl std::error::Error for Error {}

/// Shorthand for [`Error::BadConfig`].
pub(crate) fn bad(field: FieldPath, value: u64, why: Why) -> Error {
    Error::BadConfig { field, value, why }
}

/// `Result` with this crate's [`Error`].
pub type Result<T> = core::result::Result<T, Error>;
