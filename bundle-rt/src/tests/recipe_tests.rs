//! Recipe errors: each broken field of the fixture's recipe — in the JSON itself or against the
//! bundle — is rejected by `Runner::new` with an error naming that field, the run or value, and why.

use std::string::{String, ToString};

use serde_json::{json, Value};

use super::load;
use crate::fixture::recipes::{recipe, text};
use crate::fixture::Fixture;
use crate::{Error, RecipeWhy, Role, Runner};

/// `Runner::new` on the small fixture with its recipe after `edit`; the error.
fn reject(edit: impl FnOnce(&mut Value)) -> Error {
    let fx = Fixture::small();
    let cfg = fx.config();
    let bundle = load(&fx, &cfg).unwrap();
    let mut r = recipe(&fx);
    edit(&mut r);
    Runner::new(&bundle, &text(&r)).map(|_| ()).unwrap_err()
}

/// Path, quoted name and reason of a `BadRecipe` error from `edit`.
fn bad(edit: impl FnOnce(&mut Value)) -> (String, String, RecipeWhy) {
    match reject(edit) {
        Error::BadRecipe { at, name, why, .. } => (at.to_string(), name.as_str().to_string(), why),
        other => panic!("expected BadRecipe, got {other:?}"),
    }
}

fn at(path: &str, name: &str, why: RecipeWhy) -> (String, String, RecipeWhy) {
    (path.to_string(), name.to_string(), why)
}

/// Removes `key` from the object `v`.
fn remove(v: &mut Value, key: &str) {
    v.as_object_mut().unwrap().remove(key);
}

#[test]
fn error_stays_small() {
    // Clippy's result_large_err threshold; every Result of the crate carries an Error.
    assert!(core::mem::size_of::<Error>() <= 128);
}

#[test]
fn not_json() {
    let fx = Fixture::small();
    let cfg = fx.config();
    let bundle = load(&fx, &cfg).unwrap();
    let err = Runner::new(&bundle, "{\n  \"version\": ").unwrap_err();
    assert!(
        matches!(err, Error::RecipeSyntax { line: 2, .. }),
        "{err:?}"
    );
    let mut r = recipe(&fx);
    r["execution"]["runs"][1]["arguments"] = json!({ "name": "x" });
    let err = Runner::new(&bundle, &text(&r)).unwrap_err();
    let Error::RecipeSyntax { message, .. } = err else {
        panic!("{err:?}")
    };
    assert!(
        message.as_str().starts_with("invalid type: map"),
        "{message}"
    );
    assert!(err
        .to_string()
        .starts_with("run recipe is not valid: invalid type"));
}

#[test]
fn document_fields() {
    use RecipeWhy::*;
    assert_eq!(
        bad(|r| r["version"] = json!("2.0")),
        at("version", "2.0", Unsupported)
    );
    let err = reject(|r| r["version"] = json!("2.0"));
    assert_eq!(
        err.to_string(),
        "bad recipe field version = `2.0`: not supported by this runtime"
    );
    assert_eq!(bad(|r| remove(r, "version")), at("version", "", Missing));
    assert_eq!(
        bad(|r| remove(r, "resources")),
        at("resources", "", Missing)
    );
    assert_eq!(
        bad(|r| remove(r, "execution")),
        at("execution", "", Missing)
    );
}

#[test]
fn buffer_and_cpu_fields() {
    use RecipeWhy::*;
    assert_eq!(
        bad(|r| r["resources"]["buffers"][1]["name"] = json!("x")),
        at("resources.buffers[1].name", "x", Duplicate { first: 0 })
    );
    let err = reject(|r| r["resources"]["buffers"][1]["name"] = json!("x"));
    assert_eq!(
        err.to_string(),
        "bad recipe field resources.buffers[1].name = `x`: already used by entry 0 of the same list"
    );
    let (path, name, why) = bad(|r| r["resources"]["buffers"][4]["type"] = json!("scratchpad"));
    assert_eq!(
        (&path[..], &name[..]),
        ("resources.buffers[4].type", "scratchpad")
    );
    assert!(matches!(why, UnknownValue { .. }));
    assert_eq!(
        bad(|r| remove(&mut r["resources"]["buffers"][4], "size")),
        at("resources.buffers[4].size", "activations", Missing)
    );
    assert_eq!(
        bad(|r| r["resources"]["buffers"][4]["size"] = json!("12a")),
        at("resources.buffers[4].size", "\"12a\"", NotAnInteger)
    );
    assert_eq!(
        bad(|r| r["resources"]["buffers"][4]["size"] = json!(-1)),
        at("resources.buffers[4].size", "-1", NotAnInteger)
    );
    assert_eq!(
        bad(|r| r["resources"]["cpus"][1]["name"] = json!("add_c")),
        at("resources.cpus[1].name", "add_c", Duplicate { first: 0 })
    );
    assert_eq!(
        bad(|r| r["resources"]["cpus"][2]["library_name"] = json!("other")),
        at("resources.cpus[2].library_name", "other", WrongLibrary)
    );
}

#[test]
fn external_buffers_must_be_tensors() {
    use RecipeWhy::*;
    let extra = json!({ "name": "z", "type": "input" });
    assert_eq!(
        bad(|r| r["resources"]["buffers"]
            .as_array_mut()
            .unwrap()
            .push(extra)),
        at(
            "resources.buffers[5].name",
            "z",
            NotATensor {
                wanted: Role::Input
            }
        )
    );
    assert_eq!(
        bad(|r| r["resources"]["buffers"][1]["type"] = json!("input")),
        at(
            "resources.buffers[1].name",
            "y",
            NotATensor {
                wanted: Role::Input
            }
        )
    );
    assert_eq!(
        bad(|r| r["resources"]["buffers"][0]["size"] = json!(60)),
        at(
            "resources.buffers[0].size",
            "x",
            Mismatch {
                expected: 64,
                got: 60
            }
        )
    );
    assert_eq!(
        bad(|r| r["resources"]["buffers"][3]["size"] = json!(64)),
        at(
            "resources.buffers[3].size",
            "weights",
            Mismatch {
                expected: 128,
                got: 64
            }
        )
    );
}

#[test]
fn run_fields() {
    use RecipeWhy::*;
    assert_eq!(
        bad(|r| remove(&mut r["execution"]["runs"][1], "where")),
        at("execution.runs[1].where", "double", Missing)
    );
    let (path, name, why) = bad(|r| r["execution"]["runs"][1]["where"] = json!("gpu"));
    assert_eq!((&path[..], &name[..]), ("execution.runs[1].where", "gpu"));
    assert_eq!(
        why,
        UnknownValue {
            expected: "cpu, npu"
        }
    );
    assert_eq!(
        bad(|r| r["execution"]["runs"][1]["name"] = json!("triple")),
        at(
            "execution.runs[1].name",
            "triple",
            NotDeclared {
                list: "resources.cpus"
            }
        )
    );
    assert_eq!(
        bad(|r| {
            r["resources"]["cpus"][1]["name"] = json!("triple");
            r["execution"]["runs"][1]["name"] = json!("triple");
        }),
        at("execution.runs[1].name", "triple", UnknownOp)
    );
    assert_eq!(
        bad(|r| r["execution"]["runs"][1]["where"] = json!("npu")),
        at(
            "execution.runs[1].name",
            "double",
            NotDeclared {
                list: "resources.kernels"
            }
        )
    );
    // A kernel must be an NPU segment of the bundle (the fixture has none).
    let err = reject(|r| {
        r["resources"]["kernels"] = json!([{ "name": "double", "instance": "DPU" }]);
        r["execution"]["runs"][1]["where"] = json!("npu");
    });
    assert_eq!(
        err.to_string(),
        "bad recipe field resources.kernels[0].name = `double`: the bundle's NPU segment table has no segment of this name"
    );
}

#[test]
fn argument_fields() {
    use RecipeWhy::*;
    let arg = |r: &mut Value, j: usize, key: &str, v: Value| {
        r["execution"]["runs"][0]["arguments"][j][key] = v;
    };
    let path = |j: usize, field: &str| std::format!("execution.runs[0].arguments[{j}].{field}");
    assert_eq!(
        bad(|r| arg(r, 0, "name", json!("z"))),
        at(
            &path(0, "name"),
            "z",
            NotDeclared {
                list: "resources.buffers"
            }
        )
    );
    assert_eq!(
        bad(|r| arg(r, 2, "argidx", json!(0))),
        at(&path(2, "argidx"), "add_c", Duplicate { first: 0 })
    );
    assert_eq!(
        bad(|r| remove(&mut r["execution"]["runs"][0]["arguments"][2], "argidx")),
        at(&path(2, "argidx"), "add_c", Missing)
    );
    assert_eq!(
        bad(|r| remove(&mut r["execution"]["runs"][0]["arguments"][2], "size")),
        at(&path(2, "size"), "add_c", Incomplete)
    );
    assert_eq!(
        bad(|r| arg(r, 2, "offset", json!(128))),
        at(
            &path(2, "size"),
            "add_c",
            OutOfRange {
                end: 192,
                limit: 128
            }
        )
    );
    assert_eq!(
        bad(|r| arg(r, 2, "offset", json!(u64::MAX))),
        at(&path(2, "size"), "add_c", Overflow)
    );
    // Against the op table.
    let err = reject(|r| arg(r, 2, "argidx", json!(5)));
    assert_eq!(
        err.to_string(),
        "bad recipe field execution.runs[0].arguments[2].argidx (run `add_c`): argidx 5 is not below the op's 3 buffer arguments"
    );
    assert_eq!(
        bad(|r| {
            let args = r["execution"]["runs"][1]["arguments"]
                .as_array_mut()
                .unwrap();
            args.pop();
        }),
        at(
            "execution.runs[1].arguments",
            "double",
            ArgCount {
                expected: 2,
                got: 1
            }
        )
    );
    assert_eq!(
        bad(|r| arg(r, 2, "size", json!(32))),
        at(
            &path(2, "size"),
            "add_c",
            Mismatch {
                expected: 64,
                got: 32
            }
        )
    );
    assert_eq!(
        bad(|r| arg(r, 2, "offset", json!(32))),
        at(&path(2, "offset"), "add_c", Misaligned { align: 64 })
    );
    assert_eq!(
        bad(|r| arg(r, 2, "name", json!("weights"))),
        at(&path(2, "name"), "add_c", ReadOnly)
    );
    assert_eq!(
        bad(|r| r["execution"]["runs"][3]["arguments"][0]["name"] = json!("y")),
        at(
            "execution.runs[3].arguments[0].name",
            "mark",
            Mismatch {
                expected: 12,
                got: 64
            }
        )
    );
}

#[test]
fn constant_fields() {
    use RecipeWhy::*;
    let konst = |r: &mut Value, key: &str, v: Value| {
        r["execution"]["runs"][3]["constants"][0][key] = v;
    };
    let path = "execution.runs[3].constants[0]";
    assert_eq!(
        bad(|r| konst(r, "type", json!("string"))),
        at(&std::format!("{path}.type"), "string", Unsupported)
    );
    assert_eq!(
        bad(|r| remove(&mut r["execution"]["runs"][3]["constants"][0], "type")),
        at(&std::format!("{path}.type"), "mark", Missing)
    );
    let (p, name, why) = bad(|r| konst(r, "type", json!("float")));
    assert_eq!(
        (&p[..], &name[..]),
        (&std::format!("{path}.type")[..], "float")
    );
    assert!(matches!(why, UnknownValue { .. }));
    assert_eq!(
        bad(|r| konst(r, "value", json!("four"))),
        at(&std::format!("{path}.value"), "\"four\"", NotAnInteger)
    );
    // Against the op table: exactly the task count, after the buffer arguments.
    assert_eq!(
        bad(|r| r["execution"]["runs"][3]["constants"] = json!([])),
        at("execution.runs[3].constants", "mark", Missing)
    );
    assert_eq!(
        bad(|r| {
            let extra = json!({ "value": 0, "type": "int", "argidx": 2 });
            let list = r["execution"]["runs"][3]["constants"]
                .as_array_mut()
                .unwrap();
            list.push(extra);
        }),
        at("execution.runs[3].constants[1]", "mark", Unsupported)
    );
    assert_eq!(
        bad(|r| konst(r, "argidx", json!(0))),
        at(
            &std::format!("{path}.argidx"),
            "mark",
            Mismatch {
                expected: 1,
                got: 0
            }
        )
    );
    assert_eq!(
        bad(|r| konst(r, "value", json!("4"))),
        at(
            &std::format!("{path}.value"),
            "mark",
            Mismatch {
                expected: 3,
                got: 4
            }
        )
    );
}

/// Writes the recipe fuzz target's seed corpus (`fuzz/seeds/recipe`): the recipes bundlec would write for the
/// fixture. Run by hand after a recipe format change: `cargo test -p bundle-rt write_fuzz_seeds -- --ignored`.
#[test]
#[ignore]
fn write_fuzz_seeds() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../fuzz/seeds/recipe");
    std::fs::create_dir_all(&dir).expect("create corpus dir");
    let fx = Fixture::small();
    for (name, r) in [
        ("plain.json", recipe(&fx)),
        ("split.json", crate::fixture::recipes::split(&fx)),
    ] {
        std::fs::write(dir.join(name), text(&r)).expect("write seed");
    }
}
