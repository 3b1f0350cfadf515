//! Golden test: docs/ops.md is the output of `bundlec ops` under a fixed preamble. Run with BLESS=1 to rewrite.

use std::path::Path;
use std::process::Command;

#[test]
fn ops_doc_matches_bundlec_ops() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("repo root");
    let doc = root.join("docs/ops.md");
    let out = Command::new(env!("CARGO"))
        .args([
            "run", "-q", "-p", "bundlec", "--bin", "bundlec", "--", "ops",
        ])
        .current_dir(root)
        .output()
        .expect("run bundlec ops");
    assert!(
        out.status.success(),
        "bundlec ops failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let table = String::from_utf8(out.stdout).expect("utf-8");
    let text = std::fs::read_to_string(&doc).expect("read docs/ops.md");
    let preamble_end = text.find("| ONNX ops").expect("table in docs/ops.md");
    let expected = format!("{}{}", &text[..preamble_end], table);
    if std::env::var_os("BLESS").is_some() {
        std::fs::write(&doc, &expected).expect("bless");
        return;
    }
    assert_eq!(
        text, expected,
        "docs/ops.md is stale: run BLESS=1 cargo test -p bundlec-tests --test docs"
    );
}
