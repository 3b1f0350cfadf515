//! Run recipes for the test fixture, written the way `bundlec` writes them (`emit/recipe.rs`): one
//! external buffer per input and output, `weights`, the internal `activations`, one cpu resource and
//! one run per op with the op's arguments as (sub-)buffers and the task count as an `int` constant.
//! [`split`] is the same execution with another buffer layout, to exercise sub-buffer resolution.

use std::string::{String, ToString};
use std::vec::Vec;

use serde_json::{json, Value};

use super::fixture::Fixture;

/// The recipe `bundlec` would write for `fx`.
pub fn recipe(fx: &Fixture) -> Value {
    let names = ["x", "y", "marks"];
    let mut runs = Vec::new();
    for (i, op) in fx.ops.iter().enumerate() {
        let args: Vec<Value> = fx.args[i]
            .iter()
            .enumerate()
            .map(|(j, a)| match a.area {
                1 => {
                    let sym = fx
                        .symbols
                        .iter()
                        .position(|s| s.kind == 1 && s.offset == a.offset)
                        .expect("a mutable argument is an input or output");
                    json!({ "name": names[sym], "argidx": j })
                }
                0 => json!({ "name": "weights", "argidx": j, "offset": a.offset, "size": a.size }),
                _ => json!({ "name": "activations", "argidx": j, "offset": a.offset, "size": a.size }),
            })
            .collect();
        runs.push(json!({
            "name": op_name(i),
            "where": "cpu",
            "arguments": args,
            "constants": [ { "value": op.num_tasks, "type": "int", "argidx": fx.args[i].len() } ],
        }));
    }
    let cpus: Vec<Value> = (0..fx.ops.len())
        .map(|i| json!({ "name": op_name(i), "library_name": "fixture" }))
        .collect();
    json!({
        "version": "1.0",
        "header": { "program": "fixture.o" },
        "resources": {
            "buffers": [
                { "name": "x", "type": "input" },
                { "name": "y", "type": "output" },
                { "name": "marks", "type": "output" },
                { "name": "weights", "type": "weight" },
                { "name": "activations", "type": "internal", "size": fx.sizes[2] },
            ],
            "cpus": cpus,
        },
        "execution": { "runs": runs },
    })
}

/// The same execution as [`recipe`] with `t1` in its own internal buffer `t1` (whole-buffer
/// arguments, one written `"size": 0` with a stray offset, which XRT ignores), `t2` as a sub-buffer
/// at the end of a larger internal buffer `scratch`, `c` as a sub-buffer of `weights` with sizes as
/// strings, and `x` given with `offset 0, size = its size` (the whole buffer).
pub fn split(fx: &Fixture) -> Value {
    let bytes = (fx.n * 4) as u64;
    let mut r = recipe(fx);
    r["resources"]["buffers"][4] = json!({ "name": "t1", "type": "internal", "size": bytes });
    r["resources"]["buffers"]
        .as_array_mut()
        .unwrap()
        .push(json!({ "name": "scratch", "type": "spill", "size": (3 * bytes).to_string() }));
    let t1 = |argidx: usize| json!({ "name": "t1", "argidx": argidx });
    let t2 = |argidx: usize| json!({ "name": "scratch", "argidx": argidx, "offset": 2 * bytes, "size": bytes });
    let runs = &mut r["execution"]["runs"];
    runs[0]["arguments"][0] = json!({ "name": "x", "argidx": 0, "offset": 0, "size": bytes });
    runs[0]["arguments"][1] =
        json!({ "name": "weights", "argidx": 1, "offset": "0", "size": bytes.to_string() });
    runs[0]["arguments"][2] = json!({ "name": "t1", "argidx": 2, "offset": 128, "size": 0 });
    runs[1]["arguments"][1] = t2(1);
    runs[2]["arguments"][0] = t1(0);
    runs[2]["arguments"][1] = t2(1);
    // Arguments in another order than argidx: the runner places them by argidx.
    let args = runs[2]["arguments"].as_array_mut().unwrap();
    args.reverse();
    r
}

/// Name of fixture op `i`.
pub fn op_name(i: usize) -> &'static str {
    ["add_c", "double", "sum_plus_one", "mark"][i]
}

/// `value` as JSON text.
pub fn text(value: &Value) -> String {
    value.to_string()
}
