//! Run recipes: any text as `NAME.recipe.json` for the runtime's hand-built test bundle with an NPU segment over
//! its layer 0 (`bundle_rt::fixture::segments::layer0`), so that cpu runs, `bundlert_copy` runs and npu runs
//! (instruction buffers, the emulator) are all reached. `Runner::new` must accept it or return an error naming
//! the field; an accepted recipe is executed with the input and outputs bound, which must also succeed or fail
//! cleanly (the fixture's kernels are real code that trusts the addresses the runner computes, so a bad bound
//! check shows up as a sanitizer report). Seeds: `fuzz/seeds/recipe` (plain recipes, and `mixed.json`, the
//! segment's mixed recipe).
#![no_main]

use bundle_rt::Bundle;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let fx = bundle_rt::fixture::segments::layer0(2.0);
    let cfg = fx.config();
    // SAFETY: `cfg` points into `fx`, whose entry and kernels are the code for it.
    let Ok(bundle) = (unsafe { Bundle::new(&cfg, fx.entry, &fx.weights) }) else {
        return;
    };
    let Ok(mut runner) = bundle_rt::runner::Runner::new(&bundle, text) else {
        return;
    };
    let x: Vec<u8> = fx.input(0.5).iter().flat_map(|v| v.to_le_bytes()).collect();
    let mut y = vec![0u8; fx.n * 4];
    let mut marks = vec![0u8; 64];
    let _ = runner.bind_input("x", &x);
    let _ = runner.bind_output("y", &mut y);
    let _ = runner.bind_output("marks", &mut marks);
    if runner.execute().is_ok() {
        let _ = runner.wait();
    }
});
