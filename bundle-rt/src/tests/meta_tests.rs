//! DynamicDispatch's meta JSON through [`DdMeta::parse`] and [`Runner::check_meta`]: the document
//! of the fixture's layer-0 segment is read and matches the segment; every broken field, and every
//! disagreement with the segment's sizes and copies, is an [`Error::BadMeta`] naming field and entry.

use std::string::{String, ToString};

use serde_json::{json, Value};

use super::load;
use super::segments::layer0;
use crate::error::MetaWhy;
use crate::fixture::recipes::{mixed, text};
use crate::runner::DdMeta;
use crate::{Error, Runner};

/// The meta document of layer 0 (`in` = x, c; `out` = t1, t2; `const` = k; `super_instr` = two
/// ELTWISE blocks), written as bundlec writes it.
fn layer0_meta(n: usize) -> Value {
    let b = 4 * n;
    let t = |label: &str, arg: u32, dtype: &str, shape: usize, size: usize, offset: usize| {
        json!({ "packed_buffer_label": label, "xrt_arg_id": arg, "dtype": dtype, "shape": [shape],
                "size_in_bytes": size, "offset": offset })
    };
    json!({
        "dd_meta_major_version": 1,
        "dd_meta_minor_version": 0,
        "op_list": [
            { "name": "add_c", "type": "Add", "in_args": ["x", "c"], "const_args": ["add_c:params"],
              "out_args": ["t1"] },
            { "name": "double", "type": "Mul", "in_args": ["x"],
              "const_args": ["double:const", "double:params"], "out_args": ["t2"],
              "attrs": { "input_shape": { "type": "int", "value": [n.to_string()] } } },
        ],
        "fused_tensors": {
            "in": { "buffer_size": 2 * b, "xrt_arg_id": 0, "packed_tensors": ["x", "c"] },
            "out": { "buffer_size": 2 * b, "xrt_arg_id": 1, "packed_tensors": ["t1", "t2"] },
            "scratch": { "buffer_size": 0, "xrt_arg_id": 2, "packed_tensors": [] },
            "const": { "buffer_size": 4, "xrt_arg_id": 3, "packed_tensors": ["double:const"] },
            "super_instr": { "buffer_size": 136, "xrt_arg_id": 4,
                             "packed_tensors": ["add_c:params", "double:params"] },
        },
        "tensor_map": {
            "x": t("in", 0, "float", n, b, 0),
            "c": t("in", 0, "float32", n, b, b),
            "t1": t("out", 1, "float", n, b, 0),
            "t2": t("out", 1, "float", n, b, b),
            "double:const": t("const", 3, "float", 1, 4, 0),
            "add_c:params": t("super_instr", 4, "uint8", 68, 68, 0),
            "double:params": t("super_instr", 4, "uint8", 68, 68, 68),
        },
        "aux_info": {},
    })
}

/// Field, name and reason of the error for layer 0's document after `edit`.
fn bad(edit: impl FnOnce(&mut Value)) -> (&'static str, String, MetaWhy) {
    let fx = layer0(2.0);
    let cfg = fx.config();
    let bundle = load(&fx, &cfg).unwrap();
    let runner = Runner::new(&bundle, &text(&mixed(&fx))).unwrap();
    let mut meta = layer0_meta(fx.n);
    edit(&mut meta);
    match runner.check_meta("npu0", &meta.to_string()).unwrap_err() {
        Error::BadMeta { field, name, why } => (field, name.as_str().to_string(), why),
        other => panic!("expected BadMeta, got {other:?}"),
    }
}

fn at(field: &'static str, name: &str, why: MetaWhy) -> (&'static str, String, MetaWhy) {
    (field, name.to_string(), why)
}

#[test]
fn layer0_meta_matches_its_segment() {
    let fx = layer0(2.0);
    let cfg = fx.config();
    let bundle = load(&fx, &cfg).unwrap();
    let runner = Runner::new(&bundle, &text(&mixed(&fx))).unwrap();
    let meta = runner
        .check_meta("npu0", &layer0_meta(fx.n).to_string())
        .unwrap();
    assert_eq!(meta.version, (1, 0));
    let b = 4 * fx.n as u64;
    assert_eq!(meta.buffer_sizes, [2 * b, 2 * b, 0, 4, 136]);
    assert_eq!(meta.tensors.len(), 7);
    let c = meta.tensor("c").unwrap();
    assert_eq!((c.buffer, c.offset, c.size), (0, b, b));
    assert_eq!(meta.ops[1].args[1], ["double:const", "double:params"]);
    let err = runner.check_meta("npu7", &layer0_meta(fx.n).to_string());
    assert!(matches!(
        err,
        Err(Error::BadMeta {
            why: MetaWhy::UnknownKernel,
            ..
        })
    ));
}

#[test]
fn malformed_documents() {
    let n = layer0(2.0).n;
    let b = 4 * n as u64;
    let missing = MetaWhy::Missing;
    assert_eq!(
        bad(|m| {
            m.as_object_mut().unwrap().remove("dd_meta_minor_version");
        }),
        at("dd_meta_minor_version", "", missing)
    );
    assert_eq!(
        bad(|m| m["dd_meta_major_version"] = json!(2)),
        at("dd_meta_major_version", "2", MetaWhy::Unsupported)
    );
    assert_eq!(
        bad(|m| {
            m["fused_tensors"]
                .as_object_mut()
                .unwrap()
                .remove("scratch");
        }),
        at("scratch", "scratch", missing)
    );
    let labels = "in, out, scratch, const, super_instr";
    let unknown = MetaWhy::UnknownValue { expected: labels };
    assert_eq!(
        bad(|m| m["fused_tensors"]["ctrl_pkt"] = json!({})),
        at("fused_tensors", "ctrl_pkt", unknown)
    );
    assert_eq!(
        bad(|m| m["tensor_map"]["x"]["packed_buffer_label"] = json!("ifm")),
        at("tensor_map.packed_buffer_label", "x", unknown)
    );
    let mismatch = |expected, got| MetaWhy::Mismatch { expected, got };
    assert_eq!(
        bad(|m| m["fused_tensors"]["out"]["xrt_arg_id"] = json!(4)),
        at("fused_tensors.xrt_arg_id", "out", mismatch(1, 4))
    );
    assert_eq!(
        bad(|m| m["tensor_map"]["t1"]["xrt_arg_id"] = json!(0)),
        at("tensor_map.xrt_arg_id", "t1", mismatch(1, 0))
    );
    assert!(matches!(
        bad(|m| m["tensor_map"]["x"]["dtype"] = json!("f32")),
        ("tensor_map.dtype", _, MetaWhy::UnknownValue { .. })
    ));
    assert_eq!(
        bad(|m| m["tensor_map"]["x"]["shape"] = json!([n, 2])),
        at("tensor_map.size_in_bytes", "x", mismatch(2 * b, b))
    );
    assert_eq!(
        bad(|m| m["tensor_map"]["t2"]["offset"] = json!(b + 4)),
        at(
            "tensor_map.offset",
            "t2",
            MetaWhy::OutOfRange {
                end: 2 * b + 4,
                limit: 2 * b
            }
        )
    );
    assert_eq!(
        bad(|m| m["fused_tensors"]["out"]["packed_tensors"] = json!(["t1", "x"])),
        at("fused_tensors.packed_tensors", "x", MetaWhy::NotDeclared)
    );
    assert_eq!(
        bad(|m| m["op_list"][0]["out_args"] = json!(["y"])),
        at("op_list.out_args", "y", MetaWhy::NotDeclared)
    );
    assert_eq!(
        bad(|m| m["tensor_map"]["x"]["offset"] = json!(-1)),
        at(
            "tensor_map.offset",
            "x",
            MetaWhy::WrongType {
                expected: "a non-negative integer"
            }
        )
    );
    assert!(matches!(
        DdMeta::parse("{\"dd_meta_major_version\": 1,"),
        Err(Error::BadMeta {
            why: MetaWhy::Syntax { line: 1, .. },
            ..
        })
    ));
}

#[test]
fn documents_of_another_segment() {
    let n = layer0(2.0).n;
    let b = 4 * n as u64;
    // Sizes the segment does not have.
    assert_eq!(
        bad(|m| m["fused_tensors"]["super_instr"]["buffer_size"] = json!(200)),
        at(
            "fused_tensors.buffer_size",
            "super_instr",
            MetaWhy::Mismatch {
                expected: 136,
                got: 200
            }
        )
    );
    // `x` and `c` swapped, `c` one element short: the copy of `x` at 0 finds no tensor there.
    assert_eq!(
        bad(|m| {
            m["tensor_map"]["x"]["offset"] = json!(b);
            m["tensor_map"]["c"]["offset"] = json!(0);
            m["tensor_map"]["c"]["shape"] = json!([n - 1]);
            m["tensor_map"]["c"]["size_in_bytes"] = json!(b - 4);
        }),
        at("tensor_map.offset", "in", MetaWhy::NoCopy { offset: 0 })
    );
    // A third output the segment never copies out.
    assert_eq!(
        bad(|m| {
            m["tensor_map"]["t3"] = json!({ "packed_buffer_label": "out", "xrt_arg_id": 1,
                "dtype": "float", "shape": [1], "size_in_bytes": 4, "offset": 4 });
        }),
        at("tensor_map.offset", "t3", MetaWhy::NoCopy { offset: 4 })
    );
}
