//! The C API (feature `capi`), called from Rust as C would: the fixture through the entry function,
//! the engine and the runner with identical bits; NULL arguments, bad names and sizes, bad weights,
//! bad recipes, unbound buffers and thread counts as status codes with a last-error message;
//! handles destroyed in any order; and `brt_instance_use_npu` (NPU segments on the emulator) and a
//! mixed recipe through `brt_runner_*`.

use core::ffi::{c_char, c_void, CStr};
use core::ptr::{null, null_mut};
use std::ffi::CString;
use std::string::{String, ToString};
use std::vec;
use std::vec::Vec;

use super::segments::layer0;
use crate::capi::*;
use crate::fixture::recipes::{mixed, recipe, text};
use crate::fixture::Fixture;

fn c(s: &str) -> CString {
    CString::new(s).unwrap()
}

fn last_error() -> String {
    // SAFETY: brt_last_error returns a valid NUL-terminated string.
    unsafe { CStr::from_ptr(brt_last_error()) }
        .to_str()
        .unwrap()
        .to_string()
}

/// A bundle handle for `fx` (whose config must outlive it).
fn bundle(fx: &Fixture, cfg: &crate::BundleConfig) -> *mut BrtBundle {
    let mut out = null_mut();
    // SAFETY: `cfg` points into `fx`, whose entry matches; both outlive the handle in every test.
    let status = unsafe {
        brt_bundle_create(
            cfg,
            Some(fx.entry),
            fx.weights.as_ptr(),
            fx.weights.len(),
            &mut out,
        )
    };
    assert_eq!(status, Status::Ok, "{}", last_error());
    out
}

fn f32_bytes(values: &[f32]) -> Vec<u8> {
    values.iter().flat_map(|v| v.to_le_bytes()).collect()
}

#[test]
fn entry_engine_and_runner_agree() {
    let fx = Fixture::large();
    let cfg = fx.config();
    let b = bundle(&fx, &cfg);
    let x = f32_bytes(&fx.input(0.75));
    let (name_x, name_y) = (c("x"), c("y"));
    let mut outputs = Vec::new();
    // SAFETY: live handles, NUL-terminated names, buffers of the stated sizes.
    unsafe {
        let mut inst = null_mut();
        assert_eq!(brt_instance_create(b, &mut inst), Status::Ok);
        for threads in [1, 2, 4, 1, 3] {
            let status = brt_set_input(inst, name_x.as_ptr(), x.as_ptr().cast(), x.len());
            assert_eq!(status, Status::Ok);
            assert_eq!(brt_run(inst, threads), Status::Ok, "{}", last_error());
            let mut y = vec![0u8; x.len()];
            let status = brt_get_output(inst, name_y.as_ptr(), y.as_mut_ptr().cast(), y.len());
            assert_eq!(status, Status::Ok);
            outputs.push(y);
        }
        brt_instance_destroy(inst);

        let json = c(&text(&recipe(&fx)));
        let mut runner = null_mut();
        assert_eq!(brt_runner_create(b, json.as_ptr(), &mut runner), Status::Ok);
        let mut y = vec![0u8; x.len()];
        let mut marks = vec![0u8; 37 * 4];
        let bind_in = brt_runner_bind_input(runner, name_x.as_ptr(), x.as_ptr().cast(), x.len());
        assert_eq!(bind_in, Status::Ok);
        let bind_y =
            brt_runner_bind_output(runner, name_y.as_ptr(), y.as_mut_ptr().cast(), y.len());
        assert_eq!(bind_y, Status::Ok);
        let marks_name = c("marks");
        let bind_marks = brt_runner_bind_output(
            runner,
            marks_name.as_ptr(),
            marks.as_mut_ptr().cast(),
            marks.len(),
        );
        assert_eq!(bind_marks, Status::Ok);
        assert_eq!(brt_runner_execute(runner), Status::Ok, "{}", last_error());
        assert_eq!(brt_runner_wait(runner), Status::Ok);
        brt_runner_destroy(runner);
        outputs.push(y);
        assert!(marks.chunks(4).all(|m| m == 1i32.to_le_bytes()));
        brt_bundle_destroy(b);
    }
    let expected = f32_bytes(&fx.expected(&fx.input(0.75)));
    for (k, y) in outputs.iter().enumerate() {
        assert_eq!(y, &expected, "output {k}");
    }
}

#[test]
fn null_and_bad_arguments() {
    let fx = Fixture::small();
    let cfg = fx.config();
    let x = c("x");
    // SAFETY: every non-NULL pointer is valid; NULLs are what is being tested.
    unsafe {
        let mut out = core::ptr::NonNull::<BrtBundle>::dangling().as_ptr();
        let status = brt_bundle_create(null(), Some(fx.entry), null(), 0, &mut out);
        assert_eq!(status, Status::Null);
        assert!(out.is_null(), "*out is cleared on failure");
        assert_eq!(last_error(), "config is NULL");
        let status = brt_bundle_create(&cfg, None, fx.weights.as_ptr(), 128, &mut out);
        assert_eq!(status, Status::Null);
        let status = brt_bundle_create(&cfg, Some(fx.entry), fx.weights.as_ptr(), 128, null_mut());
        assert_eq!(status, Status::Null);
        let status = brt_bundle_create(&cfg, Some(fx.entry), fx.weights.as_ptr(), 127, &mut out);
        assert_eq!(status, Status::BadWeights);
        assert!(
            last_error().contains("weights are 127 bytes"),
            "{}",
            last_error()
        );
        let mut bad_cfg = cfg;
        bad_cfg.magic = 7;
        let w = fx.weights.as_ptr();
        let status = brt_bundle_create(&bad_cfg, Some(fx.entry), w, 128, &mut out);
        assert_eq!(status, Status::BadConfig);

        let b = bundle(&fx, &cfg);
        assert_eq!(brt_instance_create(null(), &mut null_mut()), Status::Null);
        let mut inst = null_mut();
        assert_eq!(brt_instance_create(b, &mut inst), Status::Ok);
        let data = [0u8; 64];
        let set = |name: *const c_char, data: *const c_void, bytes| {
            brt_set_input(inst, name, data, bytes)
        };
        assert_eq!(set(null(), data.as_ptr().cast(), 64), Status::Null);
        assert_eq!(set(x.as_ptr(), null(), 64), Status::Null);
        assert_eq!(set(x.as_ptr(), data.as_ptr().cast(), 60), Status::Size);
        let nope = c("nope");
        assert_eq!(
            set(nope.as_ptr(), data.as_ptr().cast(), 64),
            Status::UnknownName
        );
        assert!(last_error().contains("no tensor `nope`"));
        let y = c("y");
        assert_eq!(set(y.as_ptr(), data.as_ptr().cast(), 64), Status::WrongKind);
        let not_utf8 = [0xffu8, 0];
        assert_eq!(
            set(not_utf8.as_ptr().cast(), data.as_ptr().cast(), 64),
            Status::InvalidArgument
        );
        assert_eq!(
            brt_set_input(null_mut(), x.as_ptr(), null(), 0),
            Status::Null
        );
        assert_eq!(brt_run(inst, 0), Status::InvalidArgument);
        assert_eq!(brt_run(inst, -3), Status::InvalidArgument);
        assert_eq!(brt_run(inst, 100_000), Status::Threads);
        assert_eq!(brt_run(null_mut(), 1), Status::Null);
        let mut small = [0u8; 8];
        let get = brt_get_output(inst, y.as_ptr(), small.as_mut_ptr().cast(), 8);
        assert_eq!(get, Status::Size);
        assert_eq!(
            brt_get_output(inst, y.as_ptr(), null_mut(), 64),
            Status::Null
        );
        // Destroying the bundle first is fine: the instance holds a reference.
        brt_bundle_destroy(b);
        assert_eq!(set(x.as_ptr(), data.as_ptr().cast(), 64), Status::Ok);
        assert_eq!(brt_run(inst, 2), Status::Ok);
        brt_instance_destroy(inst);
        brt_instance_destroy(null_mut());
        brt_bundle_destroy(null_mut());
        brt_runner_destroy(null_mut());
    }
}

#[test]
fn runner_errors() {
    let fx = Fixture::small();
    let cfg = fx.config();
    let b = bundle(&fx, &cfg);
    let (x, y) = (c("x"), c("y"));
    // SAFETY: live handles and valid pointers, except the NULLs under test.
    unsafe {
        let mut runner = null_mut();
        let bad_json = c("{ \"version\": \"1.0\"");
        assert_eq!(
            brt_runner_create(b, bad_json.as_ptr(), &mut runner),
            Status::BadRecipe
        );
        assert!(runner.is_null());
        assert!(
            last_error().starts_with("run recipe is not valid"),
            "{}",
            last_error()
        );
        let mut npu = recipe(&fx);
        npu["resources"]["kernels"] = serde_json::json!([{ "name": "mark" }]);
        npu["execution"]["runs"][3]["where"] = serde_json::json!("npu");
        let npu = c(&text(&npu));
        let status = brt_runner_create(b, npu.as_ptr(), &mut runner);
        assert_eq!(status, Status::BadRecipe, "`mark` is not an NPU segment");
        assert_eq!(brt_runner_create(b, null(), &mut runner), Status::Null);
        assert_eq!(
            brt_runner_create(null(), npu.as_ptr(), &mut runner),
            Status::Null
        );

        let json = c(&text(&recipe(&fx)));
        assert_eq!(brt_runner_create(b, json.as_ptr(), &mut runner), Status::Ok);
        brt_bundle_destroy(b);
        assert_eq!(brt_runner_execute(runner), Status::Unbound);
        assert!(last_error().contains("`x` is not bound"));
        assert_eq!(brt_runner_wait(runner), Status::Unbound);
        let data = [0u8; 64];
        let w = c("weights");
        let status = brt_runner_bind_input(runner, w.as_ptr(), data.as_ptr().cast(), 64);
        assert_eq!(status, Status::WrongKind);
        let nope = c("nope");
        let status = brt_runner_bind_input(runner, nope.as_ptr(), data.as_ptr().cast(), 64);
        assert_eq!(status, Status::UnknownName);
        let status = brt_runner_bind_input(runner, x.as_ptr(), data.as_ptr().cast(), 32);
        assert_eq!(status, Status::Size);
        let status = brt_runner_bind_output(runner, y.as_ptr(), null_mut(), 64);
        assert_eq!(status, Status::Null);
        assert_eq!(brt_runner_execute(null_mut()), Status::Null);
        brt_runner_destroy(runner);
    }
}

/// Runs the instance on `x` with `threads`; output `y`.
///
/// # Safety
/// `inst` must be a live instance handle of a fixture with 16 elements.
unsafe fn run_y(inst: *mut BrtInstance, x: &[u8], threads: i32) -> Vec<u8> {
    let (name_x, name_y) = (c("x"), c("y"));
    let mut y = vec![0u8; x.len()];
    // SAFETY: per the contract; names and buffers of the stated sizes.
    unsafe {
        let status = brt_set_input(inst, name_x.as_ptr(), x.as_ptr().cast(), x.len());
        assert_eq!(status, Status::Ok);
        assert_eq!(brt_run(inst, threads), Status::Ok, "{}", last_error());
        let status = brt_get_output(inst, name_y.as_ptr(), y.as_mut_ptr().cast(), y.len());
        assert_eq!(status, Status::Ok);
    }
    y
}

#[test]
fn npu_switch_and_mixed_runner() {
    // The transaction computes t2 = 3x where the fallback computes 2x, so the two paths differ.
    let fx = layer0(3.0);
    let cfg = fx.config();
    let b = bundle(&fx, &cfg);
    let xs = fx.input(0.5);
    let x = f32_bytes(&xs);
    let fallback = f32_bytes(&fx.expected(&xs));
    let c_of = |i: usize| i as f32 * 0.25 - 1.0;
    let on_npu: Vec<f32> = xs
        .iter()
        .enumerate()
        .map(|(i, &x)| ((x + c_of(i)) + x * 3.0) + 1.0)
        .collect();
    let on_npu = f32_bytes(&on_npu);
    // SAFETY: live handles, NUL-terminated names, buffers of the stated sizes.
    unsafe {
        assert_eq!(brt_instance_use_npu(null_mut(), 1), Status::Null);
        assert!(last_error().contains("instance is NULL"));
        let mut inst = null_mut();
        assert_eq!(brt_instance_create(b, &mut inst), Status::Ok);
        assert_eq!(run_y(inst, &x, 1), fallback, "entry function");
        assert_eq!(brt_instance_use_npu(inst, 1), Status::Ok);
        assert_eq!(run_y(inst, &x, 1), on_npu, "op table on this thread");
        assert_eq!(run_y(inst, &x, 3), on_npu, "engine");
        assert_eq!(brt_instance_use_npu(inst, 7), Status::Ok);
        assert_eq!(run_y(inst, &x, 2), on_npu);
        assert_eq!(brt_instance_use_npu(inst, 0), Status::Ok);
        assert_eq!(run_y(inst, &x, 1), fallback);
        assert_eq!(run_y(inst, &x, 2), fallback);
        brt_instance_destroy(inst);

        let json = c(&text(&mixed(&fx)));
        let mut runner = null_mut();
        let status = brt_runner_create(b, json.as_ptr(), &mut runner);
        assert_eq!(status, Status::Ok, "{}", last_error());
        let (name_x, name_y, name_m) = (c("x"), c("y"), c("marks"));
        let mut y = vec![0u8; x.len()];
        let mut marks = [0u8; 12];
        let status = brt_runner_bind_input(runner, name_x.as_ptr(), x.as_ptr().cast(), x.len());
        assert_eq!(status, Status::Ok);
        let status = brt_runner_bind_output(runner, name_y.as_ptr(), y.as_mut_ptr().cast(), 64);
        assert_eq!(status, Status::Ok);
        let status = brt_runner_bind_output(runner, name_m.as_ptr(), marks.as_mut_ptr().cast(), 12);
        assert_eq!(status, Status::Ok);
        assert_eq!(brt_runner_execute(runner), Status::Ok, "{}", last_error());
        brt_runner_destroy(runner);
        assert_eq!(y, on_npu, "the runner's npu run");
        brt_bundle_destroy(b);
    }

    // A transaction the emulator rejects: BRT_ERR_NPU.
    let mut fx = layer0(2.0);
    fx.txns[0][3] = 9;
    let cfg = fx.config();
    let b = bundle(&fx, &cfg);
    // SAFETY: as above.
    unsafe {
        let mut inst = null_mut();
        assert_eq!(brt_instance_create(b, &mut inst), Status::Ok);
        assert_eq!(brt_instance_use_npu(inst, 1), Status::Ok);
        assert_eq!(brt_run(inst, 1), Status::Npu);
        assert!(last_error().contains("NPU transaction"), "{}", last_error());
        brt_instance_destroy(inst);
        brt_bundle_destroy(b);
    }
}

#[test]
fn status_strings() {
    for code in -1..=17 {
        // SAFETY: brt_error_string returns a static NUL-terminated string.
        let text = unsafe { CStr::from_ptr(brt_error_string(code)) };
        assert!(!text.to_bytes().is_empty());
    }
    // SAFETY: as above.
    let ok = unsafe { CStr::from_ptr(brt_error_string(Status::Ok as i32)) };
    assert_eq!(ok.to_str().unwrap(), "success");
}
