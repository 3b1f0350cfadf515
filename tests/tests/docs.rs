//! Golden tests: docs/ops.md is the output of `bundlec ops`, docs/npu-ops.md that of `bundlec ops --npu vnpu`,
//! each under a fixed preamble. Run with BLESS=1 to rewrite.

use std::path::Path;
use std::process::Command;

#[test]
fn ops_doc_matches_bundlec_ops() {
    golden("docs/ops.md", &["ops"], "| ONNX ops");
}

#[test]
fn npu_ops_doc_matches_bundlec_ops_npu() {
    golden(
        "docs/npu-ops.md",
        &["ops", "--npu", "vnpu"],
        "NPU target vnpu",
    );
}

fn golden(path: &str, args: &[&str], marker: &str) {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("repo root");
    let doc = root.join(path);
    let out = Command::new(env!("CARGO"))
        .args(["run", "-q", "-p", "bundlec", "--bin", "bundlec", "--"])
        .args(args)
        .current_dir(root)
        .output()
        .expect("run bundlec ops");
    assert!(
        out.status.success(),
        "bundlec ops failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let table = String::from_utf8(out.stdout).expect("utf-8");
    let text = std::fs::read_to_string(&doc).unwrap_or_else(|e| panic!("read {path}: {e}"));
    let preamble_end = text
        .find(marker)
        .unwrap_or_else(|| panic!("'{marker}' in {path}"));
    let expected = format!("{}{}", &text[..preamble_end], table);
    if std::env::var_os("BLESS").is_some() {
        std::fs::write(&doc, &expected).expect("bless");
        return;
    }
    assert_eq!(
        text, expected,
        "{path} is stale: run BLESS=1 cargo test -p bundlec-tests --test docs"
    );
}
