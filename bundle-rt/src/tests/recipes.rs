//! Run recipes for the test fixture, written the way `bundlec` writes them (`emit/recipe.rs`): one
//! external buffer per input and output, `weights`, the internal `activations`, one cpu resource and
//! one run per op with the op's arguments as (sub-)buffers and the task count as an `int` constant.
//! [`split`] is the same execution with another buffer layout, to exercise sub-buffer resolution;
//! [`mixed`] is the recipe of a bundle with NPU segments.

use std::string::{String, ToString};
use std::vec;
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

/// The mixed recipe `bundlec` would write for `fx` with NPU segments (`emit/recipe.rs`): the
/// target in `header.xclbin`, one kernel per segment, `bundlert_copy` as a cpu resource, and the
/// runs of each segment's layers replaced by its copy-ins, one npu run (XRT DPU convention) and
/// its copy-outs; the scratch argument is written with `size` 0 when the segment has none.
pub fn mixed(fx: &Fixture) -> Value {
    let mut r = recipe(fx);
    let plain_runs = r["execution"]["runs"].as_array().unwrap().clone();
    let mutable = |offset: u64| {
        let names = ["x", "y", "marks"];
        let sym = fx
            .symbols
            .iter()
            .position(|s| s.kind == 1 && s.offset == offset)
            .expect("a mutable copy is an input or output");
        names[sym]
    };
    let area_arg = |area: u32, offset: u64, size: u64, argidx: u32| match area {
        1 => json!({ "name": mutable(offset), "argidx": argidx }),
        0 => json!({ "name": "weights", "argidx": argidx, "offset": offset, "size": size }),
        _ => json!({ "name": "activations", "argidx": argidx, "offset": offset, "size": size }),
    };
    let act = |argidx: u32, offset: u64, size: u64| json!({ "name": "activations", "argidx": argidx, "offset": offset, "size": size });
    let mut runs = Vec::new();
    let mut cpus = vec![json!({ "name": "bundlert_copy", "library_name": "bundlert" })];
    let mut kernels = Vec::new();
    let mut done = vec![false; fx.segments.len()];
    for (i, op) in fx.ops.iter().enumerate() {
        let seg = fx
            .segments
            .iter()
            .position(|s| (s.first_layer..s.first_layer + s.num_layers).contains(&op.layer));
        let Some(si) = seg else {
            cpus.push(json!({ "name": op_name(i), "library_name": "fixture" }));
            runs.push(plain_runs[i].clone());
            continue;
        };
        if done[si] {
            continue;
        }
        done[si] = true;
        let s = &fx.segments[si];
        let name = fx.names.iter().find(|n| n.as_ptr() == s.name).unwrap();
        let name = name.to_str().unwrap();
        kernels.push(json!({ "name": name, "instance": "vnpu", "ctrlcode": std::format!("fixture.{name}.txn") }));
        let copies = &fx.copies[si];
        let (ins, outs) = copies.split_at(s.num_copy_in as usize);
        for c in ins {
            let args = [
                area_arg(c.area, c.offset, c.size, 0),
                act(1, s.in_offset + c.fused_offset, c.size),
            ];
            runs.push(json!({ "name": "bundlert_copy", "where": "cpu", "arguments": args }));
        }
        runs.push(json!({
            "name": name,
            "where": "npu",
            "arguments": [
                act(3, s.in_offset, s.in_size),
                act(4, s.out_offset, s.out_size),
                act(5, s.scratch_offset, s.scratch_size),
                { "name": "weights", "argidx": 6, "offset": s.const_offset, "size": s.const_size.max(1) },
                { "name": "weights", "argidx": 7, "offset": s.params_offset, "size": s.params_size.max(1) },
            ],
            "constants": [
                { "value": 2, "type": "int", "argidx": 0 },
                { "value": 0, "type": "int", "argidx": 1 },
                { "value": s.txn_size / 4, "type": "int", "argidx": 2 },
            ],
        }));
        for c in outs {
            let args = [
                act(0, s.out_offset + c.fused_offset, c.size),
                area_arg(c.area, c.offset, c.size, 1),
            ];
            runs.push(json!({ "name": "bundlert_copy", "where": "cpu", "arguments": args }));
        }
    }
    r["header"] = json!({ "xclbin": "vnpu.json" });
    r["resources"]["cpus"] = Value::Array(cpus);
    r["resources"]["kernels"] = Value::Array(kernels);
    r["execution"]["runs"] = Value::Array(runs);
    r
}
