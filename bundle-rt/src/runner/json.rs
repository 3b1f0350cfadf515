//! The JSON layer of the recipe reader: loose `serde` mirrors of a run recipe, in which every field
//! is optional (so a missing one is reported with its path by `recipe.rs`, not as a parse error) and
//! numbers stay raw JSON values; plus the conversion of `serde_json` errors and of integer fields.
//!
//! Unknown fields are ignored, as XRT's runner ignores them. Integers may be JSON numbers or strings
//! of decimal digits: XRT's own examples write `"size": "1024"`.

use alloc::string::{String, ToString};
use alloc::vec::Vec;

use serde::Deserialize;
use serde_json::Value;

use crate::error::{Error, Name, Quoted, RecipePath, RecipeWhy};
use crate::Result;

/// A non-negative integer: a JSON number or a string of decimal digits.
pub(super) fn integer(value: Option<&Value>, at: RecipePath, entry: &str) -> Result<u64> {
    let value = value.ok_or_else(|| missing(at, entry))?;
    let parsed = match value {
        Value::Number(n) => n.as_u64(),
        Value::String(s) if !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit()) => {
            s.parse().ok()
        }
        _ => None,
    };
    parsed.ok_or_else(|| Error::BadRecipe {
        at,
        name: Name::from_display(value),
        quoted: Quoted::Value,
        why: RecipeWhy::NotAnInteger,
    })
}

/// [`Error::RecipeSyntax`] from a `serde_json` error (its message without the position suffix).
pub(super) fn syntax(e: &serde_json::Error) -> Error {
    let text = e.to_string();
    let message = text.split(" at line ").next().unwrap_or("");
    Error::RecipeSyntax {
        line: e.line() as u64,
        column: e.column() as u64,
        message: Name::new(message),
    }
}

/// The document.
#[derive(Deserialize)]
pub(super) struct RawRecipe {
    pub(super) version: Option<String>,
    pub(super) header: Option<RawHeader>,
    pub(super) resources: Option<RawResources>,
    pub(super) execution: Option<RawExecution>,
}

/// `header` (`program` for a CPU-only recipe, `xclbin` with NPU kernels; not used by the runner).
#[derive(Deserialize)]
pub(super) struct RawHeader {
    pub(super) xclbin: Option<String>,
    pub(super) program: Option<String>,
}

/// `resources`.
#[derive(Deserialize)]
pub(super) struct RawResources {
    pub(super) buffers: Option<Vec<RawBuffer>>,
    pub(super) cpus: Option<Vec<RawCpu>>,
    pub(super) kernels: Option<Vec<RawKernel>>,
}

/// An entry of `resources.buffers`.
#[derive(Deserialize)]
pub(super) struct RawBuffer {
    pub(super) name: Option<String>,
    #[serde(rename = "type")]
    pub(super) kind: Option<String>,
    pub(super) size: Option<Value>,
}

/// An entry of `resources.cpus` (the older `library_path` is ignored).
#[derive(Deserialize)]
pub(super) struct RawCpu {
    pub(super) name: Option<String>,
    pub(super) library_name: Option<String>,
}

/// An entry of `resources.kernels`.
#[derive(Deserialize)]
pub(super) struct RawKernel {
    pub(super) name: Option<String>,
    pub(super) instance: Option<String>,
    pub(super) ctrlcode: Option<String>,
}

/// `execution`.
#[derive(Deserialize)]
pub(super) struct RawExecution {
    pub(super) runs: Option<Vec<RawRun>>,
}

/// An entry of `execution.runs`.
#[derive(Deserialize)]
pub(super) struct RawRun {
    pub(super) name: Option<String>,
    #[serde(rename = "where")]
    pub(super) location: Option<String>,
    pub(super) arguments: Option<Vec<RawArgument>>,
    pub(super) constants: Option<Vec<RawConstant>>,
}

/// A buffer argument of a run.
#[derive(Deserialize)]
pub(super) struct RawArgument {
    pub(super) name: Option<String>,
    pub(super) argidx: Option<Value>,
    pub(super) offset: Option<Value>,
    pub(super) size: Option<Value>,
}

/// A constant argument of a run.
#[derive(Deserialize)]
pub(super) struct RawConstant {
    pub(super) value: Option<Value>,
    #[serde(rename = "type")]
    pub(super) kind: Option<String>,
    pub(super) argidx: Option<Value>,
}

/// A [`RecipeWhy::Missing`] error for the entry called `entry`.
pub(super) fn missing(at: RecipePath, entry: &str) -> Error {
    entry_err(at, entry, RecipeWhy::Missing)
}

/// An error naming the entry at fault.
pub(crate) fn entry_err(at: RecipePath, entry: &str, why: RecipeWhy) -> Error {
    Error::BadRecipe {
        at,
        name: Name::new(entry),
        quoted: Quoted::Entry,
        why,
    }
}
