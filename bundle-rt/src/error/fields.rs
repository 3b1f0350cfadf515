//! The small values an [`Error`](super::Error) carries about a bundle: [`Name`], a fixed-size copy
//! of a tensor, op or buffer name (errors never allocate), and [`FieldPath`] + [`Why`], which locate
//! a bad `NAME_config` field (`ops[3].args[1].offset`) and say what is wrong with its value.

use core::fmt;

/// Capacity of a [`Name`] in bytes; longer names are cut at a character boundary.
pub const NAME_CAPACITY: usize = 64;

/// A copy of a name (tensor, op, buffer) kept inside an [`Error`](super::Error) without allocating.
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

    /// The text `value` displays as, cut like [`Name::new`] (for values quoted in errors, such as a
    /// JSON number or string from a recipe).
    pub fn from_display(value: impl fmt::Display) -> Name {
        let mut name = Name::new("");
        // `NameWriter::write_str` never fails; cut text is marked as truncated instead.
        let _ = fmt::write(&mut NameWriter(&mut name), format_args!("{value}"));
        name
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

/// Appends formatted text to a [`Name`], for [`Name::from_display`].
struct NameWriter<'n>(&'n mut Name);

impl fmt::Write for NameWriter<'_> {
    /// Appends `s`, cutting at a character boundary once [`NAME_CAPACITY`] is reached.
    fn write_str(&mut self, s: &str) -> fmt::Result {
        let name = &mut *self.0;
        let used = name.len as usize;
        let mut take = s.len().min(NAME_CAPACITY - used);
        while !s.is_char_boundary(take) {
            take -= 1;
        }
        name.bytes[used..used + take].copy_from_slice(&s.as_bytes()[..take]);
        name.len = (used + take) as u8;
        name.truncated |= take < s.len();
        Ok(())
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
    /// The struct or table: `"BundleConfig"`, `"symbolTable"`, `"tensors"`, `"ops"`, `"layers"`,
    /// `"npuSegments"`.
    pub table: &'static str,
    /// The entry of the table, `None` for `BundleConfig` itself.
    pub index: Option<usize>,
    /// A nested table and entry, e.g. `("args", 1)` inside an op or `("copies", 3)` inside an NPU
    /// segment.
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
    /// A feature this runtime does not implement (an unknown `flags` bit).
    Unsupported,
    /// A count or size is below what the format requires (`txnSize` below the 16-byte container
    /// header, a segment's `firstLayer` before the end of the previous segment).
    TooSmall {
        /// The smallest accepted value.
        min: u64,
    },
    /// A byte range overlaps another one that must be disjoint from it (the fused staging buffers
    /// of an NPU segment); `other` is that range's offset field.
    Overlaps {
        /// The other range's offset field, e.g. `"inOffset"`.
        other: &'static str,
    },
    /// A copy-out targets the constant area, which is read-only.
    ReadOnly,
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
            Why::TooSmall { min } => write!(f, "smaller than the minimum {min}"),
            Why::Overlaps { other } => write!(f, "the range overlaps the one at {other}"),
            Why::ReadOnly => f.write_str("the constant area is read-only"),
        }
    }
}
