//! In-crate tests (feature `std`): a hand-built bundle ([`crate::fixture`]) checked through every layer of
//! the runtime — config validation, bundle/instance errors, the three ways to run, the engine at
//! several thread counts, the log and the profile, the recipe runner (with [`crate::fixture::recipes`] written the
//! way `bundlec` writes them), NPU segments ([`segments`]: the segment table, a mock device and the
//! emulator through the instance, the engine and mixed recipes) and, with `capi`, the C API.

mod bundle_tests;
#[cfg(feature = "capi")]
mod capi_tests;
mod config_tests;
mod device_tests;
mod engine_tests;
mod log_tests;
mod meta_tests;
mod mixed_tests;
mod recipe_tests;
mod runner_tests;
mod segment_config_tests;
mod segments;

use crate::{Bundle, BundleConfig, Error};

/// Loads `fixture` with `config` (which must point into it) and its own weights.
fn load<'a>(
    fixture: &crate::fixture::Fixture,
    config: &'a BundleConfig,
) -> Result<Bundle<'a>, Error> {
    // SAFETY: `config` points into `fixture`'s live tables, and the fixture's kernels and entry
    // match them.
    unsafe { Bundle::new(config, fixture.entry, &fixture.weights) }
}

/// Bit patterns of a float slice, for bitwise comparisons.
fn bits(values: &[f32]) -> std::vec::Vec<u32> {
    values.iter().map(|v| v.to_bits()).collect()
}
