//! Build script: writes a small MLP as ONNX (a real app would ship its own `.onnx` file), then compiles it with
//! `bundlec::BuildScript`, which links the bundle into this crate and generates the typed `mlp` module.

use prost::Message;
use tract_onnx::pb;

fn tensor(name: &str, dims: &[i64], seed: u32) -> pb::TensorProto {
    let n: i64 = dims.iter().product();
    let vals = (0..n).map(|i| {
        (((i as u32).wrapping_mul(2654435761).wrapping_add(seed) >> 16) % 200) as f32 / 100.0 - 1.0
    });
    pb::TensorProto {
        name: name.into(),
        dims: dims.to_vec(),
        data_type: 1,
        float_data: vals.collect(),
        ..Default::default()
    }
}

fn value(name: &str, dims: &[i64]) -> pb::ValueInfoProto {
    use pb::tensor_shape_proto::{dimension::Value, Dimension};
    let dim = dims
        .iter()
        .map(|&d| Dimension {
            value: Some(Value::DimValue(d)),
            ..Default::default()
        })
        .collect();
    let ty = pb::type_proto::Tensor {
        elem_type: 1,
        shape: Some(pb::TensorShapeProto { dim }),
    };
    pb::ValueInfoProto {
        name: name.into(),
        r#type: Some(pb::TypeProto {
            value: Some(pb::type_proto::Value::TensorType(ty)),
            ..Default::default()
        }),
        ..Default::default()
    }
}

fn node(op: &str, ins: &[&str], out: &str) -> pb::NodeProto {
    pb::NodeProto {
        op_type: op.into(),
        name: out.into(),
        input: ins.iter().map(|s| s.to_string()).collect(),
        output: vec![out.into()],
        ..Default::default()
    }
}

fn main() {
    let graph = pb::GraphProto {
        name: "mlp".into(),
        node: vec![
            node("MatMul", &["x", "w1"], "h"),
            node("Add", &["h", "b1"], "hb"),
            node("Relu", &["hb"], "r"),
            node("MatMul", &["r", "w2"], "logits"),
            node("Softmax", &["logits"], "y"),
        ],
        initializer: vec![
            tensor("w1", &[4, 16], 1),
            tensor("b1", &[16], 2),
            tensor("w2", &[16, 3], 3),
        ],
        input: vec![value("x", &[1, 4])],
        output: vec![value("y", &[1, 3])],
        ..Default::default()
    };
    let model = pb::ModelProto {
        ir_version: 8,
        opset_import: vec![pb::OperatorSetIdProto {
            domain: String::new(),
            version: 17,
        }],
        graph: Some(graph),
        ..Default::default()
    };
    let out = std::path::PathBuf::from(std::env::var("OUT_DIR").expect("OUT_DIR"));
    let path = out.join("mlp.onnx");
    std::fs::write(&path, model.encode_to_vec()).expect("write model");
    if let Err(e) = bundlec::BuildScript::new(&path, "mlp").compile() {
        panic!("bundlec: {e}");
    }
    println!("cargo:rerun-if-changed=build.rs");
}
