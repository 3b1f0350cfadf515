//! A small ONNX model builder writing `ModelProto` bytes with prost through tract-onnx's generated types.

use prost::Message;
use tract_onnx::pb::{
    self, attribute_proto::AttributeType, tensor_shape_proto::dimension, type_proto,
};

/// An attribute value.
pub enum Attr {
    Int(i64),
    Ints(Vec<i64>),
    Float(f32),
    Str(&'static str),
}

/// Builds a graph node by node.
#[derive(Default)]
pub struct Model {
    nodes: Vec<pb::NodeProto>,
    inits: Vec<pb::TensorProto>,
    inputs: Vec<pb::ValueInfoProto>,
    outputs: Vec<pb::ValueInfoProto>,
    pub opset: i64,
}

fn value_info(name: &str, shape: &[usize], elem: i32) -> pb::ValueInfoProto {
    let dims = shape
        .iter()
        .map(|&d| pb::tensor_shape_proto::Dimension {
            value: Some(dimension::Value::DimValue(d as i64)),
            ..Default::default()
        })
        .collect();
    pb::ValueInfoProto {
        name: name.into(),
        r#type: Some(pb::TypeProto {
            value: Some(type_proto::Value::TensorType(type_proto::Tensor {
                elem_type: elem,
                shape: Some(pb::TensorShapeProto { dim: dims }),
            })),
            ..Default::default()
        }),
        ..Default::default()
    }
}

impl Model {
    pub fn new() -> Self {
        Model {
            opset: 17,
            ..Default::default()
        }
    }
    pub fn input(&mut self, name: &str, shape: &[usize]) -> &mut Self {
        self.inputs.push(value_info(name, shape, 1));
        self
    }
    pub fn output(&mut self, name: &str, shape: &[usize]) -> &mut Self {
        self.outputs.push(value_info(name, shape, 1));
        self
    }
    pub fn init(&mut self, name: &str, shape: &[usize], values: Vec<f32>) -> &mut Self {
        assert_eq!(values.len(), shape.iter().product::<usize>(), "init {name}");
        self.inits.push(pb::TensorProto {
            name: name.into(),
            dims: shape.iter().map(|&d| d as i64).collect(),
            data_type: 1,
            float_data: values,
            ..Default::default()
        });
        self
    }
    /// An integer initializer of ONNX type `elem` (2 u8, 3 i8, 6 i32) stored in `int32_data`.
    pub fn init_ints(
        &mut self,
        name: &str,
        shape: &[usize],
        elem: i32,
        values: &[i64],
    ) -> &mut Self {
        assert_eq!(values.len(), shape.iter().product::<usize>(), "init {name}");
        self.inits.push(pb::TensorProto {
            name: name.into(),
            dims: shape.iter().map(|&d| d as i64).collect(),
            data_type: elem,
            int32_data: values.iter().map(|&v| v as i32).collect(),
            ..Default::default()
        });
        self
    }
    pub fn init_i64(&mut self, name: &str, values: Vec<i64>) -> &mut Self {
        self.inits.push(pb::TensorProto {
            name: name.into(),
            dims: vec![values.len() as i64],
            data_type: 7,
            int64_data: values,
            ..Default::default()
        });
        self
    }
    pub fn node(
        &mut self,
        op: &str,
        inputs: &[&str],
        outputs: &[&str],
        attrs: Vec<(&str, Attr)>,
    ) -> &mut Self {
        let attribute = attrs
            .into_iter()
            .map(|(k, a)| {
                let mut p = pb::AttributeProto {
                    name: k.into(),
                    ..Default::default()
                };
                match a {
                    Attr::Int(i) => {
                        p.i = i;
                        p.r#type = AttributeType::Int as i32;
                    }
                    Attr::Ints(v) => {
                        p.ints = v;
                        p.r#type = AttributeType::Ints as i32;
                    }
                    Attr::Float(f) => {
                        p.f = f;
                        p.r#type = AttributeType::Float as i32;
                    }
                    Attr::Str(v) => {
                        p.s = v.as_bytes().to_vec();
                        p.r#type = AttributeType::String as i32;
                    }
                }
                p
            })
            .collect();
        let name = format!("{}_{}", op.to_lowercase(), self.nodes.len());
        self.nodes.push(pb::NodeProto {
            name,
            op_type: op.into(),
            input: inputs.iter().map(|s| s.to_string()).collect(),
            output: outputs.iter().map(|s| s.to_string()).collect(),
            attribute,
            ..Default::default()
        });
        self
    }
    /// Serialises the model.
    pub fn bytes(&self) -> Vec<u8> {
        let m = pb::ModelProto {
            ir_version: 8,
            opset_import: vec![pb::OperatorSetIdProto {
                domain: String::new(),
                version: self.opset,
            }],
            producer_name: "bundlec-tests".into(),
            graph: Some(pb::GraphProto {
                name: "g".into(),
                node: self.nodes.clone(),
                initializer: self.inits.clone(),
                input: self.inputs.clone(),
                output: self.outputs.clone(),
                ..Default::default()
            }),
            ..Default::default()
        };
        m.encode_to_vec()
    }
}
