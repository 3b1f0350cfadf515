//! The C API of `bundle-rt` (`brt_*`, declared in `bundle-rt/include/bundle_rt.h`) as a static library:
//! `cargo build -p bundle-rt-capi --release` writes `target/release/libbundle_rt_capi.a`. This crate only
//! re-exports; every function lives in `bundle_rt::capi`.

pub use bundle_rt::capi::*;
