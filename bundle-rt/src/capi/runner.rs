//! The runner half of the C API: `brt_runner_*` over [`Runner`], with the same conventions as the
//! rest of `capi.rs` (status codes, NULL checks, no unwinding, last-error message).
//!
//! A bound output is a raw pointer that C keeps valid, so bindings follow the runner's copy-out
//! model: `brt_runner_bind_input` copies the bytes at once (bind again to change the input), and
//! `brt_runner_execute` writes each output into the memory last bound for it.

use core::ffi::{c_char, c_void};
use core::ptr::NonNull;
use std::boxed::Box;
use std::sync::Arc;

use super::{deref, deref_mut, guard, input, put, text, BrtBundle, Failure, Status};
use crate::runner::Runner;
use crate::Bundle;

/// `brt_runner`: a run recipe bound to a bundle.
pub struct BrtRunner {
    // Declared (so dropped) before `_bundle`, which it borrows.
    runner: Runner<'static, 'static>,
    /// Keeps the bundle alive for `runner`.
    _bundle: Arc<Bundle<'static>>,
}

/// `brt_runner_create`: parses and checks `recipe_json` against `bundle` and stores a new runner in
/// `*out` (NULL on failure).
///
/// # Safety
/// `bundle` must be a live bundle handle; `recipe_json` a NUL-terminated string; `out` writable.
#[no_mangle]
pub unsafe extern "C" fn brt_runner_create(
    bundle: *const BrtBundle,
    recipe_json: *const c_char,
    out: *mut *mut BrtRunner,
) -> Status {
    guard(|| {
        // SAFETY: the caller's contract (see `# Safety`).
        let out = unsafe { deref_mut(out, "out") }?;
        *out = core::ptr::null_mut();
        // SAFETY: the caller's contract (see `# Safety`).
        let bundle = Arc::clone(&unsafe { deref(bundle, "bundle") }?.bundle);
        // SAFETY: the caller's contract (see `# Safety`).
        let json = unsafe { text(recipe_json, "recipe_json") }?;
        // SAFETY: the Arc's value lives at a fixed address until the last clone drops; the handle
        // keeps `bundle` and drops it after the runner (field order).
        let shared: &'static Bundle<'static> = unsafe { &*Arc::as_ptr(&bundle) };
        let runner = Runner::new(shared, json)?;
        let handle = BrtRunner {
            runner,
            _bundle: bundle,
        };
        // SAFETY: `out` was checked above.
        unsafe { put(out, handle) };
        Ok(())
    })
}

/// `brt_runner_destroy`: frees the runner; NULL is ignored.
///
/// # Safety
/// `runner` must be NULL or a handle from `brt_runner_create`, not yet destroyed.
#[no_mangle]
pub unsafe extern "C" fn brt_runner_destroy(runner: *mut BrtRunner) {
    if !runner.is_null() {
        guard(|| {
            // SAFETY: per the contract, a live handle made by `Box::into_raw`.
            drop(unsafe { Box::from_raw(runner) });
            Ok(())
        });
    }
}

/// `brt_runner_bind_input`: copies `bytes` bytes (exactly the tensor's size) into input buffer
/// `name`.
///
/// # Safety
/// `runner` must be a live handle used by no other thread; `name` a NUL-terminated string; `data`
/// readable for `bytes` bytes.
#[no_mangle]
pub unsafe extern "C" fn brt_runner_bind_input(
    runner: *mut BrtRunner,
    name: *const c_char,
    data: *const c_void,
    bytes: usize,
) -> Status {
    guard(|| {
        // SAFETY: the caller's contract (see `# Safety`).
        let handle = unsafe { deref_mut(runner, "runner") }?;
        // SAFETY: the caller's contract (see `# Safety`).
        let name = unsafe { text(name, "name") }?;
        // SAFETY: the caller's contract (see `# Safety`).
        let data = unsafe { input(data, bytes) }?;
        Ok(handle.runner.bind_input(name, data)?)
    })
}

/// `brt_runner_bind_output`: makes `data` (`bytes` bytes, exactly the tensor's size) the
/// destination of output buffer `name` for every following execute.
///
/// # Safety
/// `runner` must be a live handle used by no other thread; `name` a NUL-terminated string; `data`
/// must stay writable for `bytes` bytes, and untouched during `brt_runner_execute`, until it is
/// rebound or the runner is destroyed.
#[no_mangle]
pub unsafe extern "C" fn brt_runner_bind_output(
    runner: *mut BrtRunner,
    name: *const c_char,
    data: *mut c_void,
    bytes: usize,
) -> Status {
    guard(|| {
        // SAFETY: the caller's contract (see `# Safety`).
        let handle = unsafe { deref_mut(runner, "runner") }?;
        // SAFETY: the caller's contract (see `# Safety`).
        let name = unsafe { text(name, "name") }?;
        let ptr = match NonNull::new(data.cast::<u8>()) {
            Some(ptr) => ptr,
            None if bytes == 0 => NonNull::dangling(),
            None => return Err(Failure::new(Status::Null, "data is NULL")),
        };
        // SAFETY: the caller's contract is `bind_output_raw`'s (C memory cannot overlap the
        // runner's own allocations unless the caller breaks it).
        Ok(unsafe { handle.runner.bind_output_raw(name, ptr, bytes) }?)
    })
}

/// `brt_runner_execute`: runs the recipe (synchronously) and writes the bound outputs.
///
/// # Safety
/// `runner` must be a live handle used by no other thread.
#[no_mangle]
pub unsafe extern "C" fn brt_runner_execute(runner: *mut BrtRunner) -> Status {
    guard(|| {
        // SAFETY: the caller's contract.
        let handle = unsafe { deref_mut(runner, "runner") }?;
        Ok(handle.runner.execute()?)
    })
}

/// `brt_runner_wait`: the status of the last execute (execution is synchronous).
///
/// # Safety
/// `runner` must be a live handle used by no other thread.
#[no_mangle]
pub unsafe extern "C" fn brt_runner_wait(runner: *mut BrtRunner) -> Status {
    guard(|| {
        // SAFETY: the caller's contract.
        let handle = unsafe { deref_mut(runner, "runner") }?;
        Ok(handle.runner.wait()?)
    })
}
