//! The C API (feature `capi`): `brt_*` functions over opaque handles, declared in
//! `include/bundle_rt.h`.
//!
//! ```text
//!   brt_bundle   = Arc<Bundle<'static>>          brt_bundle_create / _destroy
//!   brt_instance = Instance + optional Engine    brt_instance_create, brt_set_input, brt_run, brt_get_output
//!                  + optional Emulator           brt_instance_use_npu
//!   brt_runner   = Runner                        brt_runner_create, _bind_input, _bind_output, _execute, _wait
//! ```
//!
//! Every function returns a [`Status`] (0 = success) and never unwinds into C: each body runs under
//! `catch_unwind` (a panic would be a runtime bug; it becomes `BRT_ERR_PANIC`). Every pointer is
//! checked for NULL, every name for UTF-8. On failure the thread's last-error message
//! ([`brt_last_error`]) holds the full [`Error`] text. Instances and runners hold a reference count
//! on their bundle, so the handles may be destroyed in any order. A bundle may be shared between
//! threads; one instance or runner must be used by one thread at a time.

use core::ffi::{c_char, c_int, c_void, CStr};
use std::boxed::Box;
use std::sync::Arc;

use crate::engine::{Engine, StdPort};
use crate::npu::{Device, Emulator};
use crate::{Bundle, BundleConfig, EntryFn, Error, Instance};

mod runner;
mod status;

pub use runner::{
    brt_runner_bind_input, brt_runner_bind_output, brt_runner_create, brt_runner_destroy,
    brt_runner_execute, brt_runner_wait, BrtRunner,
};
pub use status::{brt_error_string, brt_last_error, Status};
pub(crate) use status::{guard, Failure};

/// `p` as a reference, or `BRT_ERR_NULL` naming `what`.
///
/// # Safety
/// A non-NULL `p` must point to a live `T` not mutated elsewhere for `'a`.
pub(crate) unsafe fn deref<'a, T>(p: *const T, what: &str) -> Result<&'a T, Failure> {
    // SAFETY: forwarded from the caller.
    unsafe { p.as_ref() }.ok_or_else(|| Failure::new(Status::Null, std::format!("{what} is NULL")))
}

/// `p` as a mutable reference, or `BRT_ERR_NULL` naming `what`.
///
/// # Safety
/// A non-NULL `p` must point to a live `T` not accessed elsewhere for `'a`.
pub(crate) unsafe fn deref_mut<'a, T>(p: *mut T, what: &str) -> Result<&'a mut T, Failure> {
    // SAFETY: forwarded from the caller.
    unsafe { p.as_mut() }.ok_or_else(|| Failure::new(Status::Null, std::format!("{what} is NULL")))
}

/// A NUL-terminated UTF-8 string argument.
///
/// # Safety
/// A non-NULL `p` must be a NUL-terminated string valid for `'a`.
pub(crate) unsafe fn text<'a>(p: *const c_char, what: &str) -> Result<&'a str, Failure> {
    if p.is_null() {
        return Err(Failure::new(Status::Null, std::format!("{what} is NULL")));
    }
    // SAFETY: non-NULL and NUL-terminated per the caller.
    let s = unsafe { CStr::from_ptr(p) };
    s.to_str()
        .map_err(|_| Failure::new(Status::InvalidArgument, std::format!("{what} is not UTF-8")))
}

/// `bytes` bytes at `data` (which may be NULL when `bytes` is 0).
///
/// # Safety
/// A non-NULL `data` must be valid for reads of `bytes` bytes for `'a`.
pub(crate) unsafe fn input<'a>(data: *const c_void, bytes: usize) -> Result<&'a [u8], Failure> {
    if bytes == 0 {
        return Ok(&[]);
    }
    if data.is_null() {
        return Err(Failure::new(Status::Null, "data is NULL"));
    }
    // SAFETY: non-NULL and valid for `bytes` bytes per the caller.
    Ok(unsafe { core::slice::from_raw_parts(data.cast::<u8>(), bytes) })
}

/// Stores `value` in `*out` as a heap handle.
///
/// # Safety
/// `out` must be NULL-checked already and valid for a write.
unsafe fn put<T>(out: *mut *mut T, value: T) {
    // SAFETY: per the caller.
    unsafe { *out = Box::into_raw(Box::new(value)) };
}

/// `brt_bundle`: a loaded bundle (config, entry function, owned copy of the weights).
pub struct BrtBundle {
    pub(crate) bundle: Arc<Bundle<'static>>,
}

/// `brt_instance`: an instance of a bundle, with the engine of its last multi-thread run and, once
/// `brt_instance_use_npu` enabled it, the emulator its NPU segments run on.
pub struct BrtInstance {
    // Declared (so dropped) before `bundle`, which it borrows.
    instance: Instance<'static>,
    engine: Option<Engine<StdPort>>,
    npu: Option<Emulator>,
    /// Keeps the bundle alive for `instance`.
    _bundle: Arc<Bundle<'static>>,
}

/// `brt_bundle_create`: checks `config` and the `len` weight bytes, copies them, and stores a new
/// bundle in `*out` (NULL on failure).
///
/// # Safety
/// `config` must be a bundlec `NAME_config` that stays valid while the bundle or anything made from
/// it exists (the linked static is), and `entry` the entry function compiled with it; `weights` must
/// be readable for `len` bytes; `out` must be writable.
#[no_mangle]
pub unsafe extern "C" fn brt_bundle_create(
    config: *const BundleConfig,
    entry: Option<EntryFn>,
    weights: *const u8,
    len: usize,
    out: *mut *mut BrtBundle,
) -> Status {
    guard(|| {
        // SAFETY: the caller's contract (see `# Safety`).
        let out = unsafe { deref_mut(out, "out") }?;
        *out = core::ptr::null_mut();
        // SAFETY: the caller's contract (see `# Safety`).
        let config: &'static BundleConfig = unsafe { deref(config, "config") }?;
        let entry = entry.ok_or_else(|| Failure::new(Status::Null, "entry is NULL"))?;
        // SAFETY: the caller's contract (see `# Safety`).
        let weights = unsafe { input(weights.cast(), len) }?;
        // SAFETY: `config` and `entry` come from the same compiled bundle and the config outlives
        // the handle (the caller's contract).
        let bundle = unsafe { Bundle::new(config, entry, weights) }?;
        // SAFETY: `out` was checked above.
        unsafe {
            put(
                out,
                BrtBundle {
                    bundle: Arc::new(bundle),
                },
            )
        };
        Ok(())
    })
}

/// `brt_bundle_destroy`: releases the handle (instances and runners keep the bundle alive); NULL is
/// ignored.
///
/// # Safety
/// `bundle` must be NULL or a handle from `brt_bundle_create`, not yet destroyed.
#[no_mangle]
pub unsafe extern "C" fn brt_bundle_destroy(bundle: *mut BrtBundle) {
    if !bundle.is_null() {
        // SAFETY: per the contract, a live handle made by `Box::into_raw`.
        guard(|| {
            // SAFETY: the caller's contract (see `# Safety`).
            drop(unsafe { Box::from_raw(bundle) });
            Ok(())
        });
    }
}

/// `brt_instance_create`: a new instance with zeroed areas in `*out` (NULL on failure).
///
/// # Safety
/// `bundle` must be a live bundle handle; `out` must be writable.
#[no_mangle]
pub unsafe extern "C" fn brt_instance_create(
    bundle: *const BrtBundle,
    out: *mut *mut BrtInstance,
) -> Status {
    guard(|| {
        // SAFETY: the caller's contract.
        let out = unsafe { deref_mut(out, "out") }?;
        *out = core::ptr::null_mut();
        // SAFETY: the caller's contract.
        let bundle = Arc::clone(&unsafe { deref(bundle, "bundle") }?.bundle);
        // SAFETY: the Arc's value lives at a fixed address until the last clone drops; the handle
        // keeps `bundle` and drops it after the instance (field order).
        let shared: &'static Bundle<'static> = unsafe { &*Arc::as_ptr(&bundle) };
        let instance = Instance::new(shared)?;
        let handle = BrtInstance {
            instance,
            engine: None,
            npu: None,
            _bundle: bundle,
        };
        // SAFETY: `out` was checked above.
        unsafe { put(out, handle) };
        Ok(())
    })
}

/// `brt_instance_destroy`: frees the instance (and its engine's threads); NULL is ignored.
///
/// # Safety
/// `instance` must be NULL or a handle from `brt_instance_create`, not yet destroyed.
#[no_mangle]
pub unsafe extern "C" fn brt_instance_destroy(instance: *mut BrtInstance) {
    if !instance.is_null() {
        // SAFETY: per the contract, a live handle made by `Box::into_raw`.
        guard(|| {
            // SAFETY: the caller's contract (see `# Safety`).
            drop(unsafe { Box::from_raw(instance) });
            Ok(())
        });
    }
}

/// `brt_set_input`: copies `bytes` bytes into input `name` (exactly the tensor's size).
///
/// # Safety
/// `instance` must be a live handle used by no other thread; `name` a NUL-terminated string; `data`
/// readable for `bytes` bytes.
#[no_mangle]
pub unsafe extern "C" fn brt_set_input(
    instance: *mut BrtInstance,
    name: *const c_char,
    data: *const c_void,
    bytes: usize,
) -> Status {
    guard(|| {
        // SAFETY: the caller's contract (see `# Safety`).
        let handle = unsafe { deref_mut(instance, "instance") }?;
        // SAFETY: the caller's contract (see `# Safety`).
        let name = unsafe { text(name, "name") }?;
        // SAFETY: the caller's contract (see `# Safety`).
        let data = unsafe { input(data, bytes) }?;
        Ok(handle.instance.set_input_bytes(name, data)?)
    })
}

/// `brt_instance_use_npu`: `enable != 0` makes the following `brt_run` calls run the bundle's NPU
/// segments on the virtual NPU emulator, through the op table (threads == 1: on this thread;
/// threads > 1: on the BSP engine); `enable == 0` goes back to the default (threads == 1: the
/// entry function, which runs the segments' CPU fallback). A bundle without NPU segments gives the
/// same results either way.
///
/// # Safety
/// `instance` must be a live handle used by no other thread.
#[no_mangle]
pub unsafe extern "C" fn brt_instance_use_npu(instance: *mut BrtInstance, enable: c_int) -> Status {
    guard(|| {
        // SAFETY: the caller's contract.
        let handle = unsafe { deref_mut(instance, "instance") }?;
        handle.npu = match (enable != 0, handle.npu.take()) {
            (false, _) => None,
            (true, kept) => Some(kept.unwrap_or_else(Emulator::vnpu)),
        };
        Ok(())
    })
}

/// `brt_run`: runs the model; `threads == 1` calls the entry function, `threads > 1` runs the op
/// table on the BSP engine with that many threads (the engine is kept for the next call). After
/// `brt_instance_use_npu(instance, 1)`, NPU segments run on the emulator and `threads == 1` walks
/// the op table on this thread instead of calling the entry function.
///
/// # Safety
/// `instance` must be a live handle used by no other thread.
#[no_mangle]
pub unsafe extern "C" fn brt_run(instance: *mut BrtInstance, threads: c_int) -> Status {
    guard(|| {
        // SAFETY: the caller's contract.
        let handle = unsafe { deref_mut(instance, "instance") }?;
        let threads = usize::try_from(threads)
            .ok()
            .filter(|&t| t >= 1)
            .ok_or_else(|| {
                Failure::new(
                    Status::InvalidArgument,
                    std::format!("thread count {threads} is below 1"),
                )
            })?;
        let device = handle.npu.as_mut().map(|e| e as &mut dyn Device);
        if threads == 1 {
            return match device {
                Some(device) => Ok(handle.instance.run_ops_with_device(Some(device))?),
                None => Ok(handle.instance.run()?),
            };
        }
        if handle.engine.as_ref().map(Engine::threads) != Some(threads) {
            handle.engine = None;
            // Workers are bound to CPUs unless BRT_NO_PIN is set (bundle_rt.h).
            let port = match std::env::var_os("BRT_NO_PIN") {
                Some(_) => StdPort::unpinned(),
                None => StdPort::new(),
            };
            handle.engine = Some(Engine::new(port, threads)?);
        }
        match handle.engine.as_mut() {
            Some(engine) => Ok(engine.run_with_device(&mut handle.instance, device)?),
            None => Err(Failure::new(Status::Threads, "no engine")),
        }
    })
}

/// `brt_get_output`: copies output `name` into `data` (`bytes` must be the tensor's size).
///
/// # Safety
/// `instance` must be a live handle; `name` a NUL-terminated string; `data` writable for `bytes`
/// bytes and not overlapping the instance.
#[no_mangle]
pub unsafe extern "C" fn brt_get_output(
    instance: *const BrtInstance,
    name: *const c_char,
    data: *mut c_void,
    bytes: usize,
) -> Status {
    guard(|| {
        // SAFETY: the caller's contract (see `# Safety`).
        let handle = unsafe { deref(instance, "instance") }?;
        // SAFETY: the caller's contract (see `# Safety`).
        let name = unsafe { text(name, "name") }?;
        let output = handle.instance.output_bytes(name)?;
        if output.len() != bytes {
            return Err(Error::ByteSizeMismatch {
                name: crate::Name::new(name),
                expected: output.len() as u64,
                got: bytes as u64,
            }
            .into());
        }
        if bytes > 0 {
            if data.is_null() {
                return Err(Failure::new(Status::Null, "data is NULL"));
            }
            // SAFETY: `data` is writable for `bytes` bytes and does not overlap the instance.
            unsafe { core::ptr::copy_nonoverlapping(output.as_ptr(), data.cast(), bytes) };
        }
        Ok(())
    })
}
