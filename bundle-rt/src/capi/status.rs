//! Status codes and errors of the C API: [`Status`] (`brt_status`), the mapping from [`Error`],
//! [`guard`] (which every `brt_*` body runs under: no unwinding into C, the failure's message kept
//! for [`brt_last_error`]) and the two string functions.

use core::ffi::{c_char, c_int, CStr};
use std::cell::RefCell;
use std::ffi::CString;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::string::{String, ToString};

use crate::Error;

/// `brt_status`: the result of every `brt_*` call.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Status {
    /// `BRT_OK`.
    Ok = 0,
    /// `BRT_ERR_NULL`: a required pointer argument is NULL.
    Null = 1,
    /// `BRT_ERR_INVALID_ARGUMENT`: a name or recipe is not UTF-8, or a thread count is below 1.
    InvalidArgument = 2,
    /// `BRT_ERR_BAD_CONFIG`: the `NAME_config` breaks the format (magic, version, a field).
    BadConfig = 3,
    /// `BRT_ERR_BAD_WEIGHTS`: the weights have the wrong size or checksum.
    BadWeights = 4,
    /// `BRT_ERR_UNKNOWN_NAME`: no tensor or recipe buffer of that name.
    UnknownName = 5,
    /// `BRT_ERR_WRONG_KIND`: the tensor or buffer is not an input (or output) as the call needs.
    WrongKind = 6,
    /// `BRT_ERR_SIZE`: a byte count differs from the tensor's size.
    Size = 7,
    /// `BRT_ERR_BAD_RECIPE`: the recipe is not valid JSON, breaks the recipe rules, or does not
    /// match the bundle.
    BadRecipe = 8,
    /// `BRT_ERR_NO_DEVICE`: the recipe has an npu run and the runner has no NPU device.
    NoDevice = 9,
    /// `BRT_ERR_UNBOUND`: execute with an input or output buffer unbound.
    Unbound = 10,
    /// `BRT_ERR_RUN_FAILED`: the entry function returned non-zero.
    RunFailed = 11,
    /// `BRT_ERR_THREADS`: the thread count is too large or a worker thread could not start.
    Threads = 12,
    /// `BRT_ERR_OUT_OF_MEMORY`: an area or buffer could not be allocated.
    OutOfMemory = 13,
    /// `BRT_ERR_UNSUPPORTED`: the bundle needs something this runtime or CPU lacks (an op with too many
    /// arguments for the engine, instruction-set features).
    Unsupported = 14,
    /// `BRT_ERR_PANIC`: a runtime bug was caught before it could unwind into C.
    Panic = 15,
    /// `BRT_ERR_NPU`: an NPU transaction is invalid or failed on the device (bounds, a read-only
    /// buffer, a poll timeout, kernel parameters).
    Npu = 16,
}

impl Status {
    /// The status for a runtime error.
    fn of(e: &Error) -> Status {
        match e {
            Error::BadMagic { .. } | Error::BadVersion { .. } | Error::BadConfig { .. } => {
                Status::BadConfig
            }
            Error::WeightsSize { .. } | Error::WeightsChecksum { .. } => Status::BadWeights,
            Error::UnknownTensor { .. } | Error::UnknownBuffer { .. } => Status::UnknownName,
            Error::WrongRole { .. } | Error::DTypeMismatch { .. } | Error::NotBindable { .. } => {
                Status::WrongKind
            }
            Error::SizeMismatch { .. }
            | Error::ByteSizeMismatch { .. }
            | Error::Misaligned { .. }
            | Error::BufferTooSmall { .. } => Status::Size,
            Error::OutOfMemory { .. } => Status::OutOfMemory,
            Error::EntryFailed { .. } => Status::RunFailed,
            Error::TooManyArgs { .. } | Error::CpuFeatures { .. } => Status::Unsupported,
            Error::BadThreadCount { .. } | Error::Spawn { .. } => Status::Threads,
            Error::RecipeSyntax { .. } | Error::BadRecipe { .. } | Error::BadMeta { .. } => {
                Status::BadRecipe
            }
            Error::NoNpuDevice { .. } => Status::NoDevice,
            Error::Unbound { .. } => Status::Unbound,
            // A transaction the NPU device rejected or could not run.
            Error::NpuHeader { .. } | Error::Npu { .. } => Status::Npu,
        }
    }
}

/// A failed call: its status and the message for [`brt_last_error`].
pub(crate) struct Failure {
    status: Status,
    message: String,
}

impl Failure {
    pub(crate) fn new(status: Status, message: impl Into<String>) -> Failure {
        Failure {
            status,
            message: message.into(),
        }
    }
}

impl From<Error> for Failure {
    fn from(e: Error) -> Failure {
        Failure::new(Status::of(&e), e.to_string())
    }
}

std::thread_local! {
    static LAST_ERROR: RefCell<CString> = RefCell::new(CString::default());
}

/// Runs `body`, turning its failure or a panic into a status and the thread's last-error message.
pub(crate) fn guard(body: impl FnOnce() -> Result<(), Failure>) -> Status {
    let failure = match catch_unwind(AssertUnwindSafe(body)) {
        Ok(Ok(())) => return Status::Ok,
        Ok(Err(failure)) => failure,
        Err(_) => Failure::new(Status::Panic, "internal error: bundle-rt panicked (a bug)"),
    };
    let text = CString::new(failure.message.replace('\0', " ")).unwrap_or_default();
    LAST_ERROR.with(|last| *last.borrow_mut() = text);
    failure.status
}

/// `brt_error_string`: a static description of a status code (never NULL).
#[no_mangle]
pub extern "C" fn brt_error_string(status: c_int) -> *const c_char {
    let text: &'static CStr = match status {
        0 => c"success",
        1 => c"a required pointer argument is NULL",
        2 => c"invalid argument (a string that is not UTF-8, a thread count below 1)",
        3 => c"the bundle config breaks the bundle format",
        4 => c"the weights have the wrong size or checksum",
        5 => c"no tensor or recipe buffer of that name",
        6 => c"the tensor or buffer is not of the kind the call needs",
        7 => c"byte count differs from the tensor's size",
        8 => c"the run recipe is invalid or does not match the bundle",
        9 => c"the recipe has an npu run and there is no NPU device",
        10 => c"an input or output buffer of the recipe is not bound",
        11 => c"the entry function failed",
        12 => c"bad thread count, or a worker thread could not start",
        13 => c"out of memory",
        14 => c"not supported by this runtime",
        15 => c"internal error (bundle-rt panicked)",
        16 => c"an NPU transaction is invalid or failed on the device",
        _ => c"unknown status code",
    };
    text.as_ptr()
}

/// `brt_last_error`: the message of the last failed `brt_*` call on this thread (`""` if none). The
/// string stays valid until the next failing call on this thread.
#[no_mangle]
pub extern "C" fn brt_last_error() -> *const c_char {
    LAST_ERROR
        .try_with(|last| last.borrow().as_ptr())
        .unwrap_or(c"".as_ptr())
}
