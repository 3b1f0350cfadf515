//! The compiler's one error type. Every variant names what was wrong (file, node, op, tensor, field) and says
//! whether it is the user's input at fault or a bug in bundlec (`Internal`).

use std::fmt;

/// One node that no device can run, with the reason.
#[derive(Debug, Clone, PartialEq)]
pub struct UnsupportedNode {
    /// ONNX node name (or `#index` when the node has no name).
    pub node: String,
    /// ONNX op type, e.g. `GridSample`.
    pub op: String,
    /// Why it is rejected (unknown op, unsupported attribute value, dtype...).
    pub reason: String,
}

/// Errors from any compiler stage.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A file could not be read or written (user or environment error).
    #[error("{path}: {error}")]
    Io {
        /// The file.
        path: String,
        /// The OS error (part of the message, so not repeated as a source).
        error: std::io::Error,
    },
    /// The model file is not a valid ONNX protobuf or misses required parts (user error).
    #[error("malformed ONNX model {path}: {message}")]
    Malformed {
        /// The model file.
        path: String,
        /// What is wrong.
        message: String,
    },
    /// Nodes that cannot be compiled, all listed at once (user error).
    #[error("{}", format_unsupported(.0))]
    Unsupported(Vec<UnsupportedNode>),
    /// A node whose inputs or attributes are inconsistent (user error).
    #[error("node '{node}' ({op}): {message}")]
    InvalidNode {
        /// ONNX node name.
        node: String,
        /// ONNX op type.
        op: String,
        /// What is wrong.
        message: String,
    },
    /// A tensor that is malformed or whose shape/dtype cannot be used (user error).
    #[error("tensor '{tensor}': {message}")]
    InvalidTensor {
        /// ONNX tensor name.
        tensor: String,
        /// What is wrong.
        message: String,
    },
    /// A bad command-line or API argument (user error).
    #[error("invalid {what}: {message}")]
    InvalidArgument {
        /// The argument, e.g. `--input`.
        what: String,
        /// What is wrong.
        message: String,
    },
    /// An NPU target description that cannot be used (user error).
    #[error("NPU target {file}: field '{field}': {message}")]
    NpuTarget {
        /// The description file (or `vnpu`).
        file: String,
        /// The field at fault, e.g. `ops[3].max_stride`.
        field: String,
        /// What is wrong.
        message: String,
    },
    /// A partition cache file that cannot be used (user error).
    #[error("partition cache {file}: {field}: {message}")]
    PartitionCache {
        /// The cache file.
        file: String,
        /// The field at fault, e.g. `segments[1].nodes[4]`.
        field: String,
        /// What is wrong.
        message: String,
    },
    /// A bundle object that cannot be read back (user error: not a bundle, truncated, another version).
    #[error("bundle object {file}: {field}: {message}")]
    BadObject {
        /// The object file.
        file: String,
        /// The config field or table at fault, e.g. `ops[3].args`.
        field: String,
        /// What is wrong.
        message: String,
    },
    /// `--npu-strict` and some part of the model could not be placed on the NPU (user error).
    #[error("--npu-strict: {message}")]
    NpuStrict {
        /// What stayed on the CPU and why.
        message: String,
    },
    /// A failed internal invariant: a bug in bundlec, never caused by the input alone.
    #[error("internal error in {stage}: {message} (this is a bundlec bug)")]
    Internal {
        /// The pipeline stage, e.g. `codegen` or `verify`.
        stage: &'static str,
        /// What went wrong.
        message: String,
    },
}

fn format_unsupported(nodes: &[UnsupportedNode]) -> String {
    let mut s = format!("{} node(s) cannot be compiled:", nodes.len());
    for n in nodes {
        s.push_str(&format!("\n  node '{}' ({}): {}", n.node, n.op, n.reason));
    }
    s.push_str("\nsupported ops: run `bundlec ops`");
    s
}

/// Longest name an error message echoes: a model's names may be megabytes long, and an error must stay
/// readable (the cut is marked with the name's length in bytes).
pub const MAX_ECHOED_NAME: usize = 256;

/// The longest prefix of `text` of at most `max` bytes that ends on a character boundary.
pub fn prefix(text: &str, max: usize) -> &str {
    let mut end = max.min(text.len());
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    &text[..end]
}

/// A name from a model for an error message: at most `max` bytes, the cut marked with the name's length.
pub fn clip_to(name: &str, max: usize) -> String {
    let head = prefix(name, max);
    if head.len() == name.len() {
        return name.to_string();
    }
    format!("{head}... ({} bytes)", name.len())
}

/// [`clip_to`] at [`MAX_ECHOED_NAME`] bytes.
pub fn clip_name(name: &str) -> String {
    clip_to(name, MAX_ECHOED_NAME)
}

impl Error {
    /// Shorthand for [`Error::Internal`].
    pub fn internal(stage: &'static str, message: impl fmt::Display) -> Self {
        Error::Internal {
            stage,
            message: message.to_string(),
        }
    }
    /// One unsupported node (the importer merges these into a single list).
    pub fn unsupported(node: &str, op: &str, reason: impl Into<String>) -> Self {
        Error::Unsupported(vec![UnsupportedNode {
            node: clip_name(node),
            op: clip_name(op),
            reason: reason.into(),
        }])
    }
    /// Shorthand for [`Error::InvalidNode`].
    pub fn node(node: &str, op: &str, message: impl fmt::Display) -> Self {
        Error::InvalidNode {
            node: clip_name(node),
            op: clip_name(op),
            message: message.to_string(),
        }
    }
    /// Shorthand for [`Error::InvalidTensor`].
    pub fn tensor(tensor: &str, message: impl fmt::Display) -> Self {
        Error::InvalidTensor {
            tensor: clip_name(tensor),
            message: message.to_string(),
        }
    }
}

/// The compiler's result type.
pub type Result<T> = std::result::Result<T, Error>;
