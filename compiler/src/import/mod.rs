//! ONNX import: `tract-onnx` parses the protobuf; this module turns the `ModelProto` into our `ir::Graph` (tract
//! types stop here). It resolves input shapes (from the model or `--input` specs), decodes initializers, maps
//! each node through the parser `registry.rs` holds for its op type (one family file each: `core_ops.rs`,
//! `cnn_ops.rs`, `shape_ops.rs`, `data_ops.rs`, `slice_ops.rs`, `resize_ops.rs`, `nn_ops.rs`, `quant_ops.rs`), folds nodes whose
//! inputs are all constants with the reference semantics, and lists every unsupported node at once.

mod attrs;
mod cnn_ops;
mod core_ops;
mod data_ops;
mod deconv3d;
mod einsum;
mod importer;
mod input_spec;
mod nn_ops;
mod nodes;
mod quant_ops;
mod registry;
mod resize_ops;
mod scatter_ops;
mod shape_ops;
mod slice_ops;
mod subgraph;
mod tensor;
mod windows;

pub use input_spec::InputSpec;
pub use shape_ops::reshape_target;

pub use registry::supported_ops;
pub use subgraph::select_outputs;

use crate::error::{clip_name, Error, Result, UnsupportedNode};
use crate::ir::{self, DType, Graph, NodeData, Op, TensorId, TensorKind, UnOp};
use importer::Importer;
use nodes::Lowered;
use std::collections::{HashMap, HashSet};
use std::path::Path;
use tract_onnx::pb;
use tract_onnx::prelude::Framework;

/// Reads and imports an ONNX file.
pub fn import_file(path: &Path, specs: &[InputSpec]) -> Result<Graph> {
    import_read_file(path, &read_model(path)?, specs, &[])
}

/// Reads an ONNX file's bytes (a regular file of at most `fsio::MAX_MODEL_BYTES`).
pub fn read_model(path: &Path) -> Result<Vec<u8>> {
    crate::fsio::read_bounded(path, crate::fsio::MAX_MODEL_BYTES, "an ONNX model")
}

/// Imports the `bytes` already read from `path` (named after its stem, external data beside it). `outputs`
/// (`--outputs`): when not empty, the tensors to compute instead of the graph's outputs
/// ([`select_outputs`]).
pub fn import_read_file(
    path: &Path,
    bytes: &[u8],
    specs: &[InputSpec],
    outputs: &[String],
) -> Result<Graph> {
    let name = path.file_stem().and_then(|s| s.to_str()).unwrap_or("model");
    import_bytes(
        bytes,
        &path.display().to_string(),
        name,
        specs,
        outputs,
        path.parent(),
    )
}

/// Imports an ONNX model from bytes; `label` names it in errors, `model_dir` resolves external data.
pub fn import_bytes(
    bytes: &[u8],
    label: &str,
    name: &str,
    specs: &[InputSpec],
    outputs: &[String],
    model_dir: Option<&Path>,
) -> Result<Graph> {
    let proto = tract_onnx::onnx()
        .proto_model_for_read(&mut &bytes[..])
        .map_err(|e| Error::Malformed {
            path: label.to_string(),
            message: format!("{e:#}"),
        })?;
    let mut graph = proto.graph.ok_or_else(|| Error::Malformed {
        path: label.into(),
        message: "no graph".into(),
    })?;
    if !outputs.is_empty() {
        subgraph::select_outputs(&mut graph, outputs)?;
    }
    let graph = &graph;
    let opset = proto
        .opset_import
        .iter()
        .find(|o| o.domain.is_empty() || o.domain == "ai.onnx")
        .map_or(1, |o| o.version);
    let mut used: HashSet<String> = graph
        .node
        .iter()
        .flat_map(|n| n.input.iter().cloned())
        .collect();
    used.extend(graph.output.iter().map(|o| o.name.clone()));
    let mut imp = Importer {
        g: Graph {
            name: name.to_string(),
            ..Graph::default()
        },
        names: HashMap::new(),
        opset,
        model_dir,
        used,
        budget: ir::ConstBudget::default(),
        warnings: attrs::Warnings::default(),
    };
    check_names(graph)?;
    imp.inputs(graph, specs)?;
    imp.nodes(graph)?;
    imp.outputs(graph, label)?;
    imp.g.warnings = std::mem::take(&mut *imp.warnings.borrow_mut());
    ir::verify::verify(&imp.g, "import")?;
    Ok(imp.g)
}

/// Refuses names holding a NUL byte: the config stores tensor and node names as C strings, where two names that
/// differ only after a NUL would read the same (and `set_input` would find the wrong tensor).
fn check_names(graph: &pb::GraphProto) -> Result<()> {
    let nul = |n: &str| n.contains('\0');
    let bad = |n: &str| {
        Error::tensor(
            &n.escape_debug().to_string(),
            "name holds a NUL byte (names are stored as C strings)",
        )
    };
    let tensors = graph
        .input
        .iter()
        .map(|v| v.name.as_str())
        .chain(graph.output.iter().map(|v| v.name.as_str()))
        .chain(graph.initializer.iter().map(|t| t.name.as_str()));
    for n in tensors {
        if nul(n) {
            return Err(bad(n));
        }
    }
    for node in &graph.node {
        if let Some(n) = node.input.iter().chain(&node.output).find(|n| nul(n)) {
            return Err(bad(n));
        }
        if nul(&node.name) {
            return Err(Error::node(
                &node.name.escape_debug().to_string(),
                &node.op_type,
                "node name holds a NUL byte (names are stored as C strings)",
            ));
        }
    }
    Ok(())
}

impl Importer<'_> {
    fn is_used(&self, name: &str) -> bool {
        self.used.contains(name)
    }

    /// Whether any output after the first (training statistics, masks, indices) is read.
    fn extra_outputs_used(&self, node: &pb::NodeProto) -> bool {
        node.output
            .iter()
            .skip(1)
            .any(|o| !o.is_empty() && self.is_used(o))
    }

    fn inputs(&mut self, graph: &pb::GraphProto, specs: &[InputSpec]) -> Result<()> {
        input_spec::check_unique(specs)?;
        let mut listed: HashSet<&str> = HashSet::new();
        for vi in &graph.input {
            if !listed.insert(vi.name.as_str()) {
                return Err(Error::tensor(&vi.name, "graph input is listed twice"));
            }
        }
        let spec_of = |name: &str| specs.iter().find(|s| s.name == name);
        for init in &graph.initializer {
            // An initializer listed as a graph input is the input's default (ONNX before IR 4): a spec overrides it.
            if listed.contains(init.name.as_str()) && spec_of(&init.name).is_some() {
                continue;
            }
            if self.names.contains_key(&init.name) {
                return Err(Error::tensor(&init.name, "initializer is defined twice"));
            }
            let t = tensor::decode(init, self.model_dir, &mut self.budget)?;
            let id = self.g.add_constant(init.name.clone(), t);
            self.names.insert(init.name.clone(), id);
        }
        for spec in specs {
            if !listed.contains(spec.name.as_str()) {
                let known: Vec<&str> = graph
                    .input
                    .iter()
                    .filter(|i| !self.names.contains_key(&i.name))
                    .map(|i| i.name.as_str())
                    .collect();
                let what = if graph.initializer.iter().any(|i| i.name == spec.name) {
                    "has an initializer but no input"
                } else {
                    "has no input"
                };
                return Err(Error::InvalidArgument {
                    what: format!("{} {}", input_spec::flag(spec), spec.name),
                    message: format!(
                        "the model {what} named '{}' (inputs: {})",
                        spec.name,
                        known.join(", ")
                    ),
                });
            }
        }
        for vi in &graph.input {
            if self.names.contains_key(&vi.name) {
                continue; // an initializer listed as input (pre-IR-4 style), without a spec
            }
            let (dtype, shape) = match spec_of(&vi.name) {
                Some(InputSpec { value: Some(v), .. }) => {
                    self.budget
                        .take(v.len(), v.dtype)
                        .map_err(|m| Error::tensor(&vi.name, m))?;
                    let id = self.g.add_constant(vi.name.clone(), v.clone());
                    self.names.insert(vi.name.clone(), id);
                    continue;
                }
                Some(s) => (s.dtype, s.shape.clone()),
                None => input_type(vi)?,
            };
            ir::types::check_size(dtype, &shape).map_err(|m| Error::tensor(&vi.name, m))?;
            let id = self
                .g
                .add_tensor(vi.name.clone(), dtype, shape, TensorKind::Input);
            self.g.inputs.push(id);
            self.names.insert(vi.name.clone(), id);
        }
        Ok(())
    }

    fn nodes(&mut self, graph: &pb::GraphProto) -> Result<()> {
        let mut unsupported: Vec<UnsupportedNode> = Vec::new();
        let mut poisoned: HashSet<String> = HashSet::new();
        for (idx, node) in graph.node.iter().enumerate() {
            let name = if node.name.is_empty() {
                format!("{}_{idx}", node.op_type)
            } else {
                node.name.clone()
            };
            let mut ins = Vec::with_capacity(node.input.len());
            let mut blocked = false;
            for i in &node.input {
                if i.is_empty() {
                    ins.push(None);
                } else if let Some(&t) = self.names.get(i) {
                    ins.push(Some(t));
                } else if poisoned.contains(i) {
                    blocked = true;
                } else {
                    return Err(Error::node(
                        &name,
                        &node.op_type,
                        format!("input '{}' is not defined before this node", clip_name(i)),
                    ));
                }
            }
            let lowered = if blocked {
                // Downstream of an unsupported node: only check the op type is known.
                if registry::parser(&node.op_type).is_none() {
                    unsupported.push(UnsupportedNode {
                        node: clip_name(&name),
                        op: clip_name(&node.op_type),
                        reason: "op is not supported".into(),
                    });
                }
                poisoned.extend(node.output.iter().cloned());
                continue;
            } else {
                self.lower_node(node, &name, &ins)
            };
            match lowered {
                Err(Error::Unsupported(mut list)) => {
                    unsupported.append(&mut list);
                    poisoned.extend(node.output.iter().cloned());
                }
                Err(e) => return Err(e),
                Ok(l) => self.emit(node, &name, l)?,
            }
        }
        if !unsupported.is_empty() {
            return Err(Error::Unsupported(unsupported));
        }
        Ok(())
    }

    /// Adds what a node lowered to, folding it when every input is constant.
    fn emit(&mut self, node: &pb::NodeProto, name: &str, l: Lowered) -> Result<()> {
        let out0 = node.output.first().cloned().unwrap_or_default();
        for o in node.output.iter().filter(|o| !o.is_empty()) {
            if self.names.contains_key(o) {
                return Err(Error::node(
                    name,
                    &node.op_type,
                    format!("output '{}' is already defined (by an earlier node, an initializer or a graph input)", clip_name(o)),
                ));
            }
        }
        match l {
            Lowered::Alias(t) => {
                self.names.insert(out0, t);
            }
            Lowered::Const(t) => {
                let id = self.g.add_constant(out0.clone(), t);
                self.names.insert(out0, id);
            }
            Lowered::Node(op, inputs) => {
                let id = self.add_node(name, &node.op_type, op, inputs, &out0)?;
                self.names.insert(out0, id);
            }
            Lowered::Many(list) => {
                for (i, (op, inputs)) in list.into_iter().enumerate() {
                    let oname = node.output.get(i).cloned().unwrap_or_default();
                    let id =
                        self.add_node(&format!("{name}.{i}"), &node.op_type, op, inputs, &oname)?;
                    self.names.insert(oname, id);
                }
            }
            Lowered::Chain(b, inputs) => {
                let mut acc = inputs[0];
                for (i, &next) in inputs[1..].iter().enumerate() {
                    let last = i + 2 == inputs.len();
                    let oname = if last {
                        out0.clone()
                    } else {
                        format!("{out0}.{i}")
                    };
                    acc = self.add_node(
                        &format!("{name}.{i}"),
                        &node.op_type,
                        Op::Binary(b),
                        vec![acc, next],
                        &oname,
                    )?;
                }
                self.names.insert(out0, acc);
            }
        }
        Ok(())
    }

    /// Infers the output type, then either folds (all inputs constant) or appends a node.
    pub(super) fn add_node(
        &mut self,
        name: &str,
        onnx_op: &str,
        op: Op,
        inputs: Vec<TensorId>,
        out: &str,
    ) -> Result<TensorId> {
        let all_const = inputs.iter().all(|&t| self.g.constant(t).is_some());
        if !all_const && !op.any_input_dtype() {
            if let Some(&t) = inputs
                .iter()
                .find(|&&t| self.g.tensors[t].dtype != DType::F32)
            {
                let td = &self.g.tensors[t];
                let reason = format!(
                    "input '{}' is {}: only f32 is computed at run time",
                    clip_name(&td.name),
                    td.dtype
                );
                return Err(Error::unsupported(name, onnx_op, reason));
            }
        }
        let types: Vec<_> = inputs
            .iter()
            .map(|&t| (self.g.tensors[t].dtype, self.g.tensors[t].shape.as_slice()))
            .collect();
        let outs = ir::ops::infer(&op, &types).map_err(|m| Error::node(name, onnx_op, m))?;
        for (d, s) in &outs {
            // Folded outputs and data movement may be empty (shape arithmetic, later folded); computed
            // run-time tensors may not.
            let check = if all_const || op.moves_data() {
                ir::types::check_bytes
            } else {
                ir::types::check_size
            };
            check(*d, s).map_err(|m| Error::node(name, onnx_op, format!("output: {m}")))?;
        }
        let (dtype, shape) = outs
            .into_iter()
            .next()
            .ok_or_else(|| Error::internal("import", "op without outputs"))?;
        // DequantizeLinear of a constant stays a node until `passes::fold_qdq` has seen the integer weights and
        // biases (fold_constants folds what it leaves).
        if all_const && !matches!(op, Op::Dequantize(_)) {
            self.budget
                .take(ir::numel(&shape), dtype)
                .map_err(|m| Error::node(name, onnx_op, m))?;
            let vals: Vec<&ir::Tensor> =
                inputs.iter().filter_map(|&t| self.g.constant(t)).collect();
            let v = ir::ops::eval(&op, &vals)
                .map_err(|m| Error::node(name, onnx_op, m))?
                .remove(0);
            return Ok(self.g.add_constant(out, v));
        }
        let t = self.g.add_tensor(out, dtype, shape, TensorKind::Value);
        self.g.push_node(NodeData {
            name: name.into(),
            onnx_op: onnx_op.into(),
            op,
            inputs,
            outputs: vec![t],
        });
        Ok(t)
    }

    fn outputs(&mut self, graph: &pb::GraphProto, label: &str) -> Result<()> {
        let mut taken: HashSet<TensorId> = HashSet::new();
        for vi in &graph.output {
            let t = *self.names.get(&vi.name).ok_or_else(|| Error::Malformed {
                path: label.into(),
                message: format!(
                    "graph output '{}' is not produced by any node",
                    clip_name(&vi.name)
                ),
            })?;
            // Outputs must be written by a kernel under their own name: copy inputs, constants and aliases.
            let td = &self.g.tensors[t];
            let t = if td.name != vi.name
                || !matches!(td.kind, TensorKind::Value)
                || taken.contains(&t)
            {
                let (dtype, shape) = (td.dtype, td.shape.clone());
                let o = self
                    .g
                    .add_tensor(vi.name.clone(), dtype, shape, TensorKind::Value);
                let name = format!("{}.copy", vi.name);
                self.g.push_node(NodeData {
                    name,
                    onnx_op: "Identity".into(),
                    op: Op::Unary(UnOp::Identity),
                    inputs: vec![t],
                    outputs: vec![o],
                });
                o
            } else {
                t
            };
            taken.insert(t);
            self.g.outputs.push(t);
        }
        Ok(())
    }
}

/// The dtype and static shape of a graph input from its ValueInfo.
fn input_type(vi: &pb::ValueInfoProto) -> Result<(DType, Vec<usize>)> {
    use pb::tensor_shape_proto::dimension::Value as Dim;
    use pb::type_proto::Value as Ty;
    let hint = format!("fix it with --input {}:DIMxDIM...xf32", clip_name(&vi.name));
    let tt = match vi.r#type.as_ref().and_then(|t| t.value.as_ref()) {
        Some(Ty::TensorType(tt)) => tt,
        // prost decodes only tensor types; a sequence, map or optional type arrives here as no value.
        None => {
            return Err(unsupported_input(
                &vi.name,
                "only tensor inputs are supported (sequence, map, optional)",
            ))
        }
    };
    let dtype = DType::from_onnx(tt.elem_type).ok_or_else(|| {
        unsupported_input(
            &vi.name,
            &format!(
                "ONNX data type {} is not supported (f32, u8, i8, i32, i64, bool)",
                tt.elem_type
            ),
        )
    })?;
    let dims = tt
        .shape
        .as_ref()
        .ok_or_else(|| Error::tensor(&vi.name, format!("input has no shape; {hint}")))?;
    let mut shape = Vec::new();
    for (i, d) in dims.dim.iter().enumerate() {
        match &d.value {
            Some(Dim::DimValue(v)) if *v > 0 => shape.push(*v as usize),
            Some(Dim::DimValue(0)) => {
                return Err(unsupported_input(
                    &vi.name,
                    "zero-sized tensors are not supported",
                ))
            }
            Some(Dim::DimParam(p)) => {
                return Err(Error::tensor(
                    &vi.name,
                    format!("dimension {i} is symbolic ('{p}'); {hint}"),
                ))
            }
            _ => {
                return Err(Error::tensor(
                    &vi.name,
                    format!("dimension {i} is unknown; {hint}"),
                ))
            }
        }
    }
    Ok((dtype, shape))
}

/// An unsupported graph input, reported like an unsupported node.
fn unsupported_input(name: &str, reason: &str) -> Error {
    Error::unsupported(name, "graph input", reason)
}
