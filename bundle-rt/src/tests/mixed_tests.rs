//! Mixed recipes (cpu runs, `bundlert_copy` runs and npu runs) through the Runner: the emulator and
//! a mock device give the fallback path's bits, the parsed kernels and header, and each broken
//! field of an npu or copy run is rejected naming that field.

use std::boxed::Box;
use std::string::{String, ToString};
use std::vec;
use std::vec::Vec;

use serde_json::{json, Value};

use super::load;
use super::segments::{compute_layer0, layer0, Mock};
use crate::fixture::recipes::{mixed, text};
use crate::fixture::Fixture;
use crate::runner::{Kernel, Where};
use crate::{Error, RecipeWhy, Runner};

/// Bytes of an f32 slice.
fn f32_bytes(values: &[f32]) -> Vec<u8> {
    values.iter().flat_map(|v| v.to_le_bytes()).collect()
}

/// Runs `json` on `fx` for `seed` through a runner (after `setup`) and through the entry
/// function; asserts equal `y` and `marks`.
fn check(fx: &Fixture, json: &str, seed: f32, setup: impl FnOnce(&mut Runner<'_, '_>)) {
    let cfg = fx.config();
    let bundle = load(fx, &cfg).unwrap();
    let x = fx.input(seed);
    let mut y = vec![0u8; fx.n * 4];
    let mut marks = vec![0u8; 12];
    {
        let mut runner = Runner::new(&bundle, json).expect("mixed recipe accepted");
        setup(&mut runner);
        runner.bind_input("x", &f32_bytes(&x)).unwrap();
        runner.bind_output("y", &mut y).unwrap();
        runner.bind_output("marks", &mut marks).unwrap();
        runner.execute().unwrap();
        assert_eq!(runner.npu_cycles().len(), 1);
    }
    let mut inst = bundle.instance().unwrap();
    inst.set_input("x", &x).unwrap();
    inst.run().unwrap();
    assert_eq!(y, inst.output_bytes("y").unwrap(), "y");
    assert_eq!(y, f32_bytes(&fx.expected(&x)));
    assert_eq!(marks, inst.output_bytes("marks").unwrap(), "marks");
}

#[test]
fn mixed_recipe_on_the_emulator() {
    let fx = layer0(2.0);
    let r = mixed(&fx);
    assert_eq!(r["execution"]["runs"].as_array().unwrap().len(), 7);
    let json = text(&r);
    for seed in [0.0, -2.5, 9.75] {
        check(&fx, &json, seed, |runner| {
            assert_eq!(runner.device_name(), Some("vnpu-emulator"));
        });
    }
    let cfg = fx.config();
    let bundle = load(&fx, &cfg).unwrap();
    let runner = Runner::new(&bundle, &json).unwrap();
    let recipe = runner.recipe();
    assert_eq!(recipe.xclbin.as_deref(), Some("vnpu.json"));
    assert_eq!(recipe.program, None);
    assert_eq!(
        recipe.kernels,
        [Kernel {
            name: "npu0".to_string(),
            instance: Some("DPU".to_string()),
        }]
    );
    assert_eq!(recipe.runs[2].location, Where::Npu);
}

#[test]
fn mixed_recipe_on_a_mock_device() {
    let fx = layer0(2.0);
    let json = text(&mixed(&fx));
    let mock = Mock::new(compute_layer0);
    let calls = mock.calls.clone();
    check(&fx, &json, 1.25, |runner| {
        runner.set_device(Box::new(mock));
        assert_eq!(runner.device_name(), Some("mock"));
    });
    let calls = calls.lock().unwrap();
    assert_eq!(calls.len(), 1);
    // The weights buffer stands for const and params, with the compiler's size of at least 1.
    assert_eq!(calls[0].sizes, [128, 128, 0, 4, 136]);
    assert_eq!(calls[0].txn, fx.txns[0]);
}

#[test]
fn without_a_device_npu_runs_fail_before_anything_runs() {
    let fx = layer0(2.0);
    let cfg = fx.config();
    let bundle = load(&fx, &cfg).unwrap();
    let json = text(&mixed(&fx));
    let (mut y, mut marks) = (vec![0u8; 64], vec![0u8; 12]);
    let mut runner = Runner::new(&bundle, &json).unwrap();
    assert!(runner.take_device().is_some());
    assert_eq!(runner.device_name(), None);
    runner.bind_input("x", &[0; 64]).unwrap();
    runner.bind_output("y", &mut y).unwrap();
    runner.bind_output("marks", &mut marks).unwrap();
    let err = runner.execute().unwrap_err();
    assert!(matches!(err, Error::NoNpuDevice { run } if run.as_str() == "npu0"));
    assert!(err.to_string().contains("no NPU device"), "{err}");
    drop(runner);
    assert_eq!(marks, [0; 12], "nothing ran");
}

/// Path, quoted name and reason of the `BadRecipe` error of the layer-0 mixed recipe after `edit`.
fn bad(edit: impl FnOnce(&mut Value)) -> (String, String, RecipeWhy) {
    let fx = layer0(2.0);
    let cfg = fx.config();
    let bundle = load(&fx, &cfg).unwrap();
    let mut r = mixed(&fx);
    edit(&mut r);
    match Runner::new(&bundle, &text(&r)).map(|_| ()).unwrap_err() {
        Error::BadRecipe { at, name, why, .. } => (at.to_string(), name.as_str().to_string(), why),
        other => panic!("expected BadRecipe, got {other:?}"),
    }
}

fn at(path: &str, name: &str, why: RecipeWhy) -> (String, String, RecipeWhy) {
    (path.to_string(), name.to_string(), why)
}

/// Runs 0, 1: copy-ins (x, c); 2: the npu run (arguments: instructions, in, out, scratch, const,
/// super_instr; constants: opcode, words); 3, 4: copy-outs (t1, t2); 5, 6: cpu ops.
#[test]
fn npu_run_errors() {
    assert_eq!(
        bad(|r| {
            r["resources"]["kernels"][0]["name"] = json!("npu9");
            r["execution"]["runs"][2]["name"] = json!("npu9");
        }),
        at(
            "resources.kernels[0].name",
            "npu9",
            RecipeWhy::UnknownSegment
        )
    );
    assert_eq!(
        bad(|r| r["execution"]["runs"][2]["arguments"][5]["argidx"] = json!(2)),
        at(
            "execution.runs[2].arguments[5].argidx",
            "2",
            RecipeWhy::UnknownValue {
                expected: "1, 3, 4, 5, 6, 7 (instructions, in, out, scratch, const, super_instr)"
            }
        )
    );
    assert_eq!(
        bad(|r| {
            let args = r["execution"]["runs"][2]["arguments"]
                .as_array_mut()
                .unwrap();
            args.pop();
        }),
        at(
            "execution.runs[2].arguments",
            "npu0",
            RecipeWhy::ArgCount {
                expected: 6,
                got: 5
            }
        )
    );
    // The instruction buffer's words: 8 header bytes and the transaction.
    let words = (layer0(2.0).txns[0].len() as u64 + 8) / 4;
    assert_eq!(
        bad(|r| r["execution"]["runs"][2]["constants"][1]["value"] = json!(words + 1)),
        at(
            "execution.runs[2].constants[1].value",
            "npu0",
            RecipeWhy::Mismatch {
                expected: words,
                got: words + 1
            }
        )
    );
    assert_eq!(
        bad(|r| r["execution"]["runs"][2]["constants"][0]["value"] = json!(3)),
        at(
            "execution.runs[2].constants[0].value",
            "npu0",
            RecipeWhy::Mismatch {
                expected: 2,
                got: 3
            }
        )
    );
    assert_eq!(
        bad(|r| r["execution"]["runs"][2]["constants"][1]["argidx"] = json!(0)),
        at(
            "execution.runs[2].constants[1].argidx",
            "npu0",
            RecipeWhy::Duplicate { first: 0 }
        )
    );
    assert_eq!(
        bad(|r| {
            let c = r["execution"]["runs"][2]["constants"]
                .as_array_mut()
                .unwrap();
            c.pop();
        }),
        at("execution.runs[2].constants", "npu0", RecipeWhy::Missing)
    );
    assert_eq!(
        bad(|r| r["execution"]["runs"][2]["constants"][1]["argidx"] = json!(1)),
        at(
            "execution.runs[2].constants[1].argidx",
            "1",
            RecipeWhy::UnknownValue { expected: "0, 2" }
        )
    );
    assert_eq!(
        bad(|r| r["execution"]["runs"][2]["arguments"][2]["name"] = json!("weights")),
        at(
            "execution.runs[2].arguments[2].name",
            "npu0",
            RecipeWhy::ReadOnly
        )
    );
    // `out` moved onto `in`: a written buffer overlapping another.
    assert_eq!(
        bad(|r| r["execution"]["runs"][2]["arguments"][2]["offset"] = json!(192)),
        at(
            "execution.runs[2].arguments[2].size",
            "npu0",
            RecipeWhy::Overlaps { argidx: 3 }
        )
    );
    // A scratch of the whole activation buffer (no offset and size) overlaps everything.
    assert_eq!(
        bad(|r| {
            let arg = r["execution"]["runs"][2]["arguments"][3]
                .as_object_mut()
                .unwrap();
            arg.remove("offset");
            arg.remove("size");
        }),
        at(
            "execution.runs[2].arguments[2].size",
            "npu0",
            RecipeWhy::Overlaps { argidx: 5 }
        )
    );
    // The read-only buffers may overlap each other.
    let fx = layer0(2.0);
    let cfg = fx.config();
    let bundle = load(&fx, &cfg).unwrap();
    let mut r = mixed(&fx);
    r["execution"]["runs"][2]["arguments"][4] =
        json!({ "name": "weights", "argidx": 6, "offset": 0, "size": 0 });
    r["execution"]["runs"][2]["arguments"][5] = json!({ "name": "weights", "argidx": 7 });
    assert!(Runner::new(&bundle, &text(&r)).is_ok());
}

/// The instruction buffer `npu0.instr` (buffer 5): a whole `weight` buffer, named only by argidx 1
/// of its segment's npu runs, of the bundle's size; no `ctrlcode`.
#[test]
fn instruction_buffer_errors() {
    let not_weight = RecipeWhy::Instructions {
        why: "it must be a `weight` buffer, which the runner fills",
    };
    assert_eq!(
        bad(|r| r["execution"]["runs"][2]["arguments"][0]["name"] = json!("activations")),
        at("execution.runs[2].arguments[0].name", "npu0", not_weight)
    );
    let whole = RecipeWhy::Instructions {
        why: "an npu run binds its segment's whole instruction buffer",
    };
    assert_eq!(
        bad(|r| {
            r["execution"]["runs"][2]["arguments"][0] =
                json!({ "name": "npu0.instr", "argidx": 1, "offset": 8, "size": 16 });
        }),
        at("execution.runs[2].arguments[0].size", "npu0", whole)
    );
    // Naming the constant area as the instruction buffer takes it from every other run.
    let misuse = RecipeWhy::Instructions {
        why: "only argidx 1 of its segment's npu runs may name it",
    };
    assert_eq!(
        bad(|r| {
            r["execution"]["runs"][2]["arguments"][0]["name"] = json!("weights");
            r["resources"]["buffers"][5]
                .as_object_mut()
                .unwrap()
                .remove("size");
        }),
        at(
            "execution.runs[1].arguments[0].name",
            "bundlert_copy",
            misuse
        )
    );
    assert_eq!(
        bad(|r| r["execution"]["runs"][2]["arguments"][4]["name"] = json!("npu0.instr")),
        at("execution.runs[2].arguments[4].name", "npu0", misuse)
    );
    assert_eq!(
        bad(|r| r["execution"]["runs"][3]["arguments"][1]["name"] = json!("npu0.instr")),
        at(
            "execution.runs[3].arguments[1].name",
            "bundlert_copy",
            misuse
        )
    );
    let size = (layer0(2.0).txns[0].len() + 8) as u64;
    assert_eq!(
        bad(|r| r["resources"]["buffers"][5]["size"] = json!(size + 4)),
        at(
            "resources.buffers[5].size",
            "npu0.instr",
            RecipeWhy::Mismatch {
                expected: size,
                got: size + 4
            }
        )
    );
    assert_eq!(
        bad(|r| r["resources"]["kernels"][0]["ctrlcode"] = json!("npu0.elf")),
        at(
            "resources.kernels[0].ctrlcode",
            "npu0",
            RecipeWhy::Unsupported
        )
    );
}

#[test]
fn copy_run_errors() {
    assert_eq!(
        bad(|r| {
            let a = json!({ "name": "activations", "argidx": 2, "offset": 0, "size": 64 });
            r["execution"]["runs"][0]["arguments"]
                .as_array_mut()
                .unwrap()
                .push(a);
        }),
        at(
            "execution.runs[0].arguments",
            "bundlert_copy",
            RecipeWhy::ArgCount {
                expected: 2,
                got: 3
            }
        )
    );
    assert_eq!(
        bad(|r| r["execution"]["runs"][1]["arguments"][1]["argidx"] = json!(4)),
        at(
            "execution.runs[1].arguments[1].argidx",
            "bundlert_copy",
            RecipeWhy::ArgIndexTooLarge {
                argidx: 4,
                num_args: 2
            }
        )
    );
    assert_eq!(
        bad(|r| r["execution"]["runs"][1]["arguments"][1]["size"] = json!(32)),
        at(
            "execution.runs[1].arguments[1].size",
            "bundlert_copy",
            RecipeWhy::Mismatch {
                expected: 64,
                got: 32
            }
        )
    );
    assert_eq!(
        bad(|r| {
            r["execution"]["runs"][3]["arguments"][1] =
                json!({ "name": "weights", "argidx": 1, "offset": 0, "size": 64 });
        }),
        at(
            "execution.runs[3].arguments[1].name",
            "bundlert_copy",
            RecipeWhy::ReadOnly
        )
    );
    assert_eq!(
        bad(|r| r["execution"]["runs"][3]["arguments"][1]["offset"] = json!(288)),
        at(
            "execution.runs[3].arguments[1].size",
            "bundlert_copy",
            RecipeWhy::Overlaps { argidx: 0 }
        )
    );
    assert_eq!(
        bad(|r| r["execution"]["runs"][0]["constants"] =
            json!([{ "value": 1, "type": "int", "argidx": 2 }])),
        at(
            "execution.runs[0].constants[0]",
            "bundlert_copy",
            RecipeWhy::Unsupported
        )
    );
    assert_eq!(
        bad(|r| {
            let memset = json!({ "name": "bundlert_memset", "library_name": "bundlert" });
            r["resources"]["cpus"].as_array_mut().unwrap().push(memset);
        }),
        at(
            "resources.cpus[3].name",
            "bundlert_memset",
            RecipeWhy::UnknownBuiltin
        )
    );
    assert_eq!(
        bad(|r| r["resources"]["cpus"][0]["library_name"] = json!("libc")),
        at(
            "resources.cpus[0].library_name",
            "libc",
            RecipeWhy::WrongLibrary
        )
    );
    // Without a library name, `bundlert_copy` is still the runtime's (the bundle has no such op).
    let fx = layer0(2.0);
    let mut r = mixed(&fx);
    r["resources"]["cpus"][0]
        .as_object_mut()
        .unwrap()
        .remove("library_name");
    check(&fx, &text(&r), 0.5, |_| {});
}

/// The recipe fuzz target's seed `fuzz/seeds/recipe/mixed.json` is this fixture's mixed recipe, so that the
/// fuzzer starts from npu runs the runner accepts.
#[test]
fn fuzz_seed_is_the_mixed_recipe() {
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../fuzz/seeds/recipe/mixed.json"
    );
    let seed = std::fs::read_to_string(path).expect("fuzz/seeds/recipe/mixed.json");
    let seed: Value = serde_json::from_str(&seed).unwrap();
    assert_eq!(seed, mixed(&layer0(2.0)));
}
