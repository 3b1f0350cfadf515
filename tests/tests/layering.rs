//! The layering of bundlec's and bundle-rt's sources, read with `syn`: no files import each other in a circle, and
//! every import between top-level modules goes in one of the directions docs/architecture.md states (`COMPILER`
//! and `RUNTIME` below). An import is a `use` or a path in code (`crate::`, `super::`, a child module, or a name a
//! `use` brought in), resolved through re-exports to the file that defines it; a re-export (`pub use`) is not
//! itself an import of the module that makes it. Test code (`#[cfg(test)]` items and modules) is left out.

use bundlec_tests::imports::{check, Rules};
use std::path::Path;

/// Top-level modules of compiler/src and the top-level modules each may import (besides itself and `LEAVES`).
const COMPILER: Rules = &[
    ("ir", &[]),
    ("import", &["ir"]),
    ("profile", &["ir"]),
    ("passes", &["ir", "profile"]),
    ("kernel", &["ir"]),
    ("x86", &["ir", "kernel"]),
    ("plan", &["ir", "kernel"]),
    ("lower", &["ir", "kernel", "x86", "plan"]),
    ("codegen", &["ir", "kernel", "x86", "plan", "lower"]),
    ("npu", &["ir"]),
    ("partition", &["ir", "npu"]),
    (
        "emit",
        &[
            "ir",
            "kernel",
            "x86",
            "plan",
            "lower",
            "codegen",
            "npu",
            "partition",
        ],
    ),
    ("pipeline", &["*"]),
    ("buildscript", &["*"]),
    ("cli", &["*"]),
    ("", &["*"]),
];
/// Modules anyone may import in compiler/src.
const COMPILER_LEAVES: &[&str] = &["error", "fsio"];

/// The same for bundle-rt/src. A rule may name a module below the top level (`config/view`): a file takes the
/// rule of the longest module path that holds it. An allowed module also allows the modules below it that have
/// rules of their own, unless written `=module`.
const RUNTIME: Rules = &[
    ("format", &[]),
    ("cpu", &[]),
    ("log", &[]),
    ("superkernel", &[]),
    ("config", &["cpu"]),
    ("error", &["cpu", "=config"]),
    ("config/view", &["cpu", "config", "error"]),
    ("buf", &["error"]),
    ("aie", &["error"]),
    ("bundle", &["cpu", "config", "error", "buf"]),
    ("profile", &["config", "error", "bundle"]),
    ("npu", &["config", "error", "aie", "superkernel", "buf"]),
    (
        "exec",
        &["config", "error", "bundle", "profile", "npu", "buf"],
    ),
    (
        "instance",
        &["config", "error", "bundle", "profile", "npu", "buf", "exec"],
    ),
    (
        "engine",
        &[
            "config", "error", "bundle", "profile", "npu", "buf", "exec", "instance", "log", "cpu",
        ],
    ),
    (
        "runner",
        &[
            "config", "error", "bundle", "profile", "npu", "buf", "exec", "instance", "engine",
            "aie",
        ],
    ),
    ("capi", &["*"]),
    ("fixture", &["*"]),
    ("", &["*"]),
];
/// Modules anyone may import in bundle-rt/src.
const RUNTIME_LEAVES: &[&str] = &["format"];

fn check_tree(dir: &str, rules: Rules, leaves: &[&str]) -> Vec<String> {
    check(
        &Path::new(env!("CARGO_MANIFEST_DIR")).join("..").join(dir),
        dir,
        rules,
        leaves,
    )
}

#[test]
fn compiler_layers() {
    let p = check_tree("compiler/src", COMPILER, COMPILER_LEAVES);
    assert!(
        p.is_empty(),
        "{} layering problems:\n{}",
        p.len(),
        p.join("\n")
    );
}

#[test]
fn runtime_layers() {
    let p = check_tree("bundle-rt/src", RUNTIME, RUNTIME_LEAVES);
    assert!(
        p.is_empty(),
        "{} layering problems:\n{}",
        p.len(),
        p.join("\n")
    );
}

/// The checker itself: a small crate with a circle through a re-export, an import against the rules, a child
/// that imports its parent's own item, and test code that may do anything.
#[test]
fn checker_finds_circles_and_wrong_directions() {
    let dir = std::env::temp_dir().join(format!("bundlec-layering-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let files: &[(&str, &str)] = &[
        ("lib.rs", "pub mod low;\npub mod high;\npub mod fam;\npub use high::H;\n"),
        ("low.rs", "use crate::H;\npub struct L(pub H);\n"),
        ("high.rs", "use crate::low::L;\npub struct H;\npub fn f(_: L) {}\n"),
        ("fam/mod.rs", "mod child;\npub struct Shared;\npub fn run() { child::go() }\n"),
        (
            "fam/child.rs",
            "pub fn go() { let _ = super::Shared; }\n#[cfg(test)]\nmod tests { use crate::high::H; }\n",
        ),
    ];
    for (name, text) in files {
        let p = dir.join(name);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, text).unwrap();
    }
    let rules: Rules = &[("low", &[]), ("high", &["low"]), ("fam", &[]), ("", &["*"])];
    let p = check(&dir, "t", rules, &[]);
    let _ = std::fs::remove_dir_all(&dir);
    let all = p.join("\n");
    assert!(
        all.contains("low.rs:1: `crate::H` imports t/high.rs (`low` may not import `high`)"),
        "{all}"
    );
    assert!(
        all.contains("import circle of 2 files:\n    high.rs:1 -> low.rs")
            || all.contains("low.rs:1 -> high.rs"),
        "{all}"
    );
    assert!(
        all.contains("fam/child.rs:1 -> fam/mod.rs (`super::Shared`)"),
        "{all}"
    );
    assert_eq!(p.len(), 3, "{all}");
}
