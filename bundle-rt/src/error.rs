//! The crate's one error type, [`Error`], and the small values it carries.
//!
//! Errors never allocate (the runtime is `no_std`): names of tensors, ops and buffers are copied into
//! a fixed-size [`Name`], and a bad config field is located by a [`FieldPath`] such as
//! `ops[3].args[1].offset` plus a [`Why`] saying what is wrong with its value. Each variant's doc says
//! whether it is a *caller error* (fix the calling code or its data) or a *bundle error* (the config
//! or weights do not match the contract in `docs/bundle-format.md`: a compiler bug or mismatched files).

use core::fmt;

use crate::config::{DType, Role};

/// Capacity of a [`Name`] in bytes; longer names are cut at a character boundary.
pub const NAME_CAPACITY: usize = 64;

/// A copy of a name (tensor, op, buffer) kept inside an [`Error`] without allocating.
#[derive(Clone, Copy, PartialEq, Eq)]
pub struct Name {
    bytes: [u8; NAME_CAPACITY],
    len: u8,
    truncated: bool,
}

impl Name {
    /// Copies `s`, cutting it to [`NAME_CAPACITY`] bytes at a character boundary.
    pub fn new(s: &str) -> Name {
        let mut len = s.len().min(NAME_CAPACITY);
        while !s.is_char_boundary(len) {
            len -= 1;
        }
        let mut bytes = [0u8; NAME_CAPACITY];
        bytes[..len].copy_from_slice(&s.as_bytes()[..len]);
        Name {
            bytes,
            len: len as u8,
            truncated: len < s.len(),
        }
    }

    /// The (possibly cut) name.
    pub fn as_str(&self) -> &str {
        // The copy was cut at a character boundary of a `str`, so it is valid UTF-8.
        core::str::from_utf8(&self.bytes[..self.len as usize]).unwrap_or("")
    }

    /// Whether the original name was longer than [`NAME_CAPACITY`] bytes.
    pub fn is_truncated(&self) -> bool {
        self.truncated
    }
}

impl fmt::Display for Name {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())?;
        if self.truncated {
            f.write_str("…")?;
        }
        Ok(())
    }
}

impl fmt::Debug for Name {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:?}", self.as_str())
    }
}

/// Where a bad value sits in `NAME_config`: `table[index].inner[inner_index].field`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FieldPath {
    /// The struct or table: `"BundleConfig"`, `"symbolTable"`, `"tensors"`, `"ops"`, `"layers"`.
    pub table: &'static str,
    /// The entry of the table, `None` for `BundleConfig` itself.
    pub index: Option<usize>,
    /// A nested table and entry, e.g. `("args", 1)` inside an op.
    pub inner: Option<(&'static str, usize)>,
    /// The field, spelled as in the C struct (`"offset"`, `"numTasks"`).
    pub field: &'static str,
}

impl FieldPath {
    /// A field of `BundleConfig` itself.
    pub const fn config(field: &'static str) -> FieldPath {
        FieldPath {
            table: "BundleConfig",
            index: None,
            inner: None,
            field,
        }
    }

    /// A field of entry `index` of `table`.
    pub const fn entry(table: &'static str, index: usize, field: &'static str) -> FieldPath {
        FieldPath {
            table,
            index: Some(index),
            inner: None,
            field,
        }
    }

    /// A field of entry `inner_index` of the nested table `inner` of entry `index` of `table`.
    pub const fn nested(
        table: &'static str,
        index: usize,
        inner: &'static str,
        inner_index: usize,
        field: &'static str,
    ) -> FieldPath {
        FieldPath {
            table,
            index: Some(index),
            inner: Some((inner, inner_index)),
            field,
        }
    }
}

impl fmt::Display for FieldPath {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.table)?;
        if let Some(i) = self.index {
            write!(f, "[{i}]")?;
        }
        if let Some((inner, i)) = self.inner {
            write!(f, ".{inner}[{i}]")?;
        }
        write!(f, ".{}", self.field)
    }
}

/// What is wrong with the value of a config field.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Why {
    /// A pointer is NULL although entries or a string are declared.
    Null,
    /// A pointer or offset is not a multiple of `align`.
    Misaligned {
        /// The required alignment in bytes.
        align: u64,
    },
    /// A count or size is above what the runtime accepts.
    TooLarge {
        /// The largest accepted value.
        max: u64,
    },
    /// `offset + size` (= `end`) runs past the area or table it points into (`limit` bytes or entries).
    OutOfRange {
        /// The end of the range the field describes.
        end: u64,
        /// The size of what it must fit in.
        limit: u64,
    },
    /// Computing the size or end overflows 64 bits.
    Overflow,
    /// The value must be a power of two.
    NotPowerOfTwo,
    /// The value must be at least 1.
    Zero,
    /// The value must equal `expected`.
    Mismatch {
        /// The value the contract requires here.
        expected: u64,
    },
    /// An enumeration code (dtype, role, area, kind) that this runtime does not know.
    UnknownCode,
    /// A string has no NUL within `max` bytes.
    Unterminated {
        /// The longest accepted string, in bytes.
        max: u64,
    },
    /// A string is not UTF-8 (the value is the byte offset of the first bad byte).
    NotUtf8,
    /// A string is empty.
    Empty,
    /// A name is used twice; `first` is the index of its first use.
    Duplicate {
        /// Index of the entry that has the name first.
        first: u64,
    },
    /// A feature this runtime does not implement yet (non-empty NPU segment table).
    Unsupported,
}

impl fmt::Display for Why {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            Why::Null => f.write_str("pointer is NULL"),
            Why::Misaligned { align } => write!(f, "not a multiple of {align}"),
            Why::TooLarge { max } => write!(f, "larger than the limit {max}"),
            Why::OutOfRange { end, limit } => write!(f, "ends at {end}, past the size {limit}"),
            Why::Overflow => f.write_str("size or end overflows 64 bits"),
            Why::NotPowerOfTwo => f.write_str("not a power of two"),
            Why::Zero => f.write_str("must be at least 1"),
            Why::Mismatch { expected } => write!(f, "expected {expected}"),
            Why::UnknownCode => f.write_str("unknown code"),
            Why::Unterminated { max } => write!(f, "no NUL terminator within {max} bytes"),
            Why::NotUtf8 => f.write_str("not valid UTF-8 (value = offset of the bad byte)"),
            Why::Empty => f.write_str("empty string"),
            Why::Duplicate { first } => write!(f, "name already used by entry {first}"),
            Why::Unsupported => f.write_str("not supported by this runtime version"),
        }
    }
}

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
    /// Caller/bundle limit: an op has more arguments than [`crate::MAX_OP_ARGS`], so it can only run
    /// through the entry function (`Instance::run`).
    TooManyArgs {
        /// The op.
        op: Name,
        /// Its `numArgs`.
        num_args: u64,
        /// [`crate::MAX_OP_ARGS`].
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
        }
    }
}

#[cfg(feature = "std")]
impl std::error::Error for Error {}

/// Shorthand for [`Error::BadConfig`].
pub(crate) fn bad(field: FieldPath, value: u64, why: Why) -> Error {
    Error::BadConfig { field, value, why }
}
