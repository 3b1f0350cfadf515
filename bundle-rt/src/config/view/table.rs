//! The validated view's type and what reading a config needs everywhere: `ConfigView`, the table limits, and
//! the reading of names (checked once, then read back unchecked).

use super::super::{
    BundleConfig, BundleLayer, BundleOp, BundleTensorDesc, NpuSegment, SymbolTableEntry,
};
use crate::error::{bad, FieldPath, Why};
use crate::Result;
use core::ffi::{c_char, CStr};

/// Most symbols, ops or layers a config may declare (keeps every table size far from overflow).
pub const MAX_TABLE_ENTRIES: u64 = 1 << 24;

/// Most arguments an op may declare in a config.
pub const MAX_CONFIG_ARGS: u64 = 1 << 16;

/// Longest name accepted, in bytes without the NUL.
pub const MAX_NAME_LEN: usize = 4096;

/// Largest `alignment` accepted.
pub const MAX_ALIGNMENT: u64 = 4096;

/// A validated `NAME_config`; see the module docs for what holds once one exists.
#[derive(Clone, Copy, Debug)]
pub struct ConfigView<'a> {
    pub(super) raw: &'a BundleConfig,
    pub(super) symbols: &'a [SymbolTableEntry],
    pub(super) tensors: &'a [BundleTensorDesc],
    pub(super) ops: &'a [BundleOp],
    pub(super) layers: &'a [BundleLayer],
    pub(super) npu_segments: &'a [NpuSegment],
    pub(super) model_name: &'a str,
    pub(super) area_sizes: [usize; 3],
    pub(super) num_inputs: usize,
    pub(super) num_outputs: usize,
    /// The op with the most arguments and its argument count, if there are ops.
    pub(super) widest_op: Option<(usize, usize)>,
    /// Whether `ops` is a fat bundle's `fastOps` table (this CPU has `fastCpuFeatures`).
    pub(super) fast: bool,
}

/// Reads a name: non-NULL, NUL-terminated within [`MAX_NAME_LEN`] bytes, UTF-8, not empty.
///
/// # Safety
/// A non-NULL `ptr` must point to a NUL-terminated string valid for `'a`.
pub(crate) unsafe fn read_name<'a>(ptr: *const c_char, field: FieldPath) -> Result<&'a str> {
    if ptr.is_null() {
        return Err(bad(field, 0, Why::Null));
    }
    let mut len = 0usize;
    loop {
        if len > MAX_NAME_LEN {
            let why = Why::Unterminated {
                max: MAX_NAME_LEN as u64,
            };
            return Err(bad(field, MAX_NAME_LEN as u64, why));
        }
        // SAFETY: the string is NUL-terminated and bytes before the terminator are readable; we stop
        // at the first NUL.
        if unsafe { *ptr.add(len) } == 0 {
            break;
        }
        len += 1;
    }
    if len == 0 {
        return Err(bad(field, 0, Why::Empty));
    }
    // SAFETY: `len` bytes before the NUL were just read.
    let bytes = unsafe { core::slice::from_raw_parts(ptr.cast::<u8>(), len) };
    core::str::from_utf8(bytes).map_err(|e| bad(field, e.valid_up_to() as u64, Why::NotUtf8))
}

/// A string [`read_name`] accepted earlier.
///
/// # Safety
/// `ptr` must have passed [`read_name`] and stay valid and unchanged for `'a`.
pub(super) unsafe fn validated_str<'a>(ptr: *const c_char) -> &'a str {
    // SAFETY: per the contract, a NUL-terminated string valid for 'a.
    let bytes = unsafe { CStr::from_ptr(ptr) }.to_bytes();
    // Checked UTF-8 in `read_name`; a failure is impossible, but stay panic-free.
    core::str::from_utf8(bytes).unwrap_or("")
}
