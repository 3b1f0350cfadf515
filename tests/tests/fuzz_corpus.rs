//! Replays the compiler fuzz target's committed corpus (`fuzz/seeds/compile_onnx`: small valid models, the
//! hostile models of tests/py/hostile_models.py and every crash the fuzzer found, as `crash-*` files) through
//! `bundlec::compile_file` on stable, the way `fuzz/fuzz_targets/compile_onnx.rs` does: each input must give a
//! bundle or an error, never a panic. Valid models must compile.

use std::path::Path;

#[test]
fn compiler_corpus_compiles_or_errors_without_panics() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../fuzz/seeds/compile_onnx");
    let mut files: Vec<_> = std::fs::read_dir(&dir)
        .expect("fuzz/seeds/compile_onnx")
        .map(|e| e.expect("dir entry").path())
        .collect();
    files.sort();
    assert!(files.len() >= 50, "corpus has {} files", files.len());
    let scratch = bundlec_tests::harness::scratch("fuzz_corpus");
    let mut panics = Vec::new();
    let (mut ok, mut errors) = (0, 0);
    for f in &files {
        let name = f.file_name().unwrap().to_string_lossy().to_string();
        let path = scratch.join("model.onnx");
        std::fs::copy(f, &path).expect("copy corpus file");
        let r = std::panic::catch_unwind(|| {
            bundlec::compile_file(&path, &bundlec::Options::new("fuzz")).map(|_| ())
        });
        match r {
            Err(_) => panics.push(name),
            Ok(Ok(())) => ok += 1,
            Ok(Err(e)) => {
                errors += 1;
                let msg = e.to_string();
                assert!(
                    name.starts_with("hostile_") || name.starts_with("crash-"),
                    "{name}: a valid model failed: {msg}"
                );
                assert!(!msg.contains("this is a bundlec bug"), "{name}: {msg}");
            }
        }
    }
    assert!(panics.is_empty(), "panicked on: {panics:?}");
    eprintln!("compiler corpus: {ok} compiled, {errors} clean errors, 0 panics");
}
