//! Why a DynamicDispatch meta JSON (`NAME.<segment>.meta.json`) is refused: [`MetaWhy`], the reason
//! of [`Error::BadMeta`](super::Error::BadMeta), which also names the field and the entry.

use core::fmt;

/// What is wrong with a meta field.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MetaWhy {
    /// The document is not JSON (the parser's message is the error's name).
    Syntax {
        /// Line (1-based).
        line: u64,
        /// Column (1-based).
        column: u64,
    },
    /// A key DynamicDispatch's loader requires is absent.
    Missing,
    /// The value has the wrong JSON type (`expected` says which).
    WrongType {
        /// The type required.
        expected: &'static str,
    },
    /// A version this runtime does not read (major other than 1).
    Unsupported,
    /// The value is not one of `expected`.
    UnknownValue {
        /// The accepted values.
        expected: &'static str,
    },
    /// The value differs from what the rest of the document or the bundle requires.
    Mismatch {
        /// What is required.
        expected: u64,
        /// What the document gives.
        got: u64,
    },
    /// A tensor's bytes `offset + size` (= `end`) run past its buffer (`limit` bytes).
    OutOfRange {
        /// End of the tensor's bytes (`u64::MAX` on overflow).
        end: u64,
        /// The buffer's size.
        limit: u64,
    },
    /// The name is not an entry of `tensor_map`, or not packed in the buffer it claims.
    NotDeclared,
    /// The kernel the document was checked for is not a kernel of the recipe that runs an NPU
    /// segment of the bundle.
    UnknownKernel,
    /// The bundle's segment copies a tensor at this fused offset that no entry of `tensor_map`
    /// places there (or an entry places one where the segment copies none).
    NoCopy {
        /// The offset in the fused buffer.
        offset: u64,
    },
}

impl fmt::Display for MetaWhy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            MetaWhy::Syntax { line, column } => {
                write!(f, "not valid JSON at line {line} column {column}")
            }
            MetaWhy::Missing => f.write_str("required key is missing"),
            MetaWhy::WrongType { expected } => write!(f, "must be {expected}"),
            MetaWhy::Unsupported => f.write_str("version not supported (major version 1 is read)"),
            MetaWhy::UnknownValue { expected } => write!(f, "not one of {expected}"),
            MetaWhy::Mismatch { expected, got } => write!(f, "is {got}, expected {expected}"),
            MetaWhy::OutOfRange { end, limit } => {
                write!(f, "bytes end at {end}, past the buffer's {limit}")
            }
            MetaWhy::NotDeclared => f.write_str("no tensor_map entry of this name in that buffer"),
            MetaWhy::UnknownKernel => {
                f.write_str("not a kernel of the recipe that runs an NPU segment of the bundle")
            }
            MetaWhy::NoCopy { offset } => write!(
                f,
                "the segment's copies and the tensor map disagree at fused offset {offset}"
            ),
        }
    }
}
