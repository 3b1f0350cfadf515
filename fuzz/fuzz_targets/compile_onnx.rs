//! The compiler: any bytes as an ONNX model, compiled with default options. Import, passes, planning, codegen
//! and emission must give a bundle or an error naming the node, tensor or field; never a panic or an abort.
//! Slow to build instrumented (tract and Cranelift): `bash scripts/fuzz.sh --compiler`; the committed corpus in
//! fuzz/seeds/compile_onnx is replayed on stable by tests/tests/fuzz_corpus.rs.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let dir = std::env::temp_dir().join(format!("bundlec-fuzz-{}", std::process::id()));
    let _ = std::fs::create_dir_all(&dir);
    let path = dir.join("model.onnx");
    if std::fs::write(&path, data).is_ok() {
        let _ = bundlec::compile_file(&path, &bundlec::Options::new("fuzz"));
    }
});
