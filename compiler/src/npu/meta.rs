//! DynamicDispatch's meta JSON for a fused segment (`NAME.<segment>.meta.json`, version 1.0): what its fusion
//! runtime reads beside a transaction. `fused_tensors` gives the five fused buffers (`in`, `out`, `scratch`,
//! `const`, `super_instr`: their size and DDR_PATCH argidx 0..4) and the tensors packed into each; `tensor_map`
//! places every tensor (buffer label, argidx, dtype, shape, bytes, offset); `op_list` lists the segment's nodes
//! with their activation, constant and output arguments. A node's constants and parameter blocks are in the NPU's
//! layout, not an ONNX tensor's, so they appear as `<node>:const` and `<node>:params` (`uint8`, one dimension).
//! Every key DynamicDispatch's loader requires is written; `aux_info` keeps the segment's original input and
//! output shapes and dtypes, as its fuse script does. Names are unique within `tensor_map` (a blob name that a
//! tensor already has gets a numeric suffix).

use super::fuse::FusedSegment;
use super::txn::Xrt;
use crate::ir::{DType, Graph, NodeId, TensorId};
use serde_json::{json, Map, Value};

/// Meta format version written.
pub const VERSION: (u32, u32) = (1, 0);

/// The five fused buffers: label and DDR_PATCH argidx, in argidx order.
pub const BUFFERS: [(&str, Xrt); 5] = [
    ("in", Xrt::In),
    ("out", Xrt::Out),
    ("scratch", Xrt::Scratch),
    ("const", Xrt::Const),
    ("super_instr", Xrt::Params),
];

/// DynamicDispatch's dtype name (its `get_size_of_type` accepts these; ONNX's lower-case names).
pub fn dtype_name(d: DType) -> &'static str {
    match d {
        DType::F32 => "float",
        DType::U8 | DType::Bool => "uint8",
        DType::I8 => "int8",
        DType::I32 => "int32",
        DType::I64 => "int64",
    }
}

/// One entry of `tensor_map`.
fn entry(
    label: &str,
    xrt: Xrt,
    dtype: &str,
    shape: &[usize],
    bytes: usize,
    offset: usize,
) -> Value {
    json!({
        "packed_buffer_label": label,
        "xrt_arg_id": xrt as u32,
        "dtype": dtype,
        "shape": shape,
        "size_in_bytes": bytes,
        "offset": offset,
    })
}

/// The meta document of segment `nodes` fused into `f`, whose five buffers the bundle gives `sizes` bytes (the
/// fused sizes, with an empty `in`, `out` or `scratch` planned as 1 byte).
pub fn dd_meta(g: &Graph, nodes: &[NodeId], f: &FusedSegment, sizes: [usize; 5]) -> Value {
    let mut packed: [Vec<String>; 5] = Default::default();
    let mut map = Map::new();
    let mut tensor = |xrt: Xrt, t: TensorId, offset: usize| {
        let tt = &g.tensors[t];
        let (label, _) = BUFFERS[xrt as usize];
        packed[xrt as usize].push(tt.name.clone());
        let e = entry(
            label,
            xrt,
            dtype_name(tt.dtype),
            &tt.shape,
            tt.size_bytes(),
            offset,
        );
        map.insert(tt.name.clone(), e);
    };
    for &(t, off) in &f.inputs {
        tensor(Xrt::In, t, off);
    }
    for &(t, off) in &f.outputs {
        tensor(Xrt::Out, t, off);
    }
    for &(t, off) in &f.scratch {
        tensor(Xrt::Scratch, t, off);
    }
    let mut ops = Vec::new();
    for (&n, blobs) in nodes.iter().zip(&f.op_blobs) {
        let node = &g.nodes[n];
        let names = |ts: &[TensorId]| -> Vec<String> {
            ts.iter()
                .filter(|&&t| g.constant(t).is_none())
                .map(|&t| g.tensors[t].name.clone())
                .collect()
        };
        let mut const_args = Vec::new();
        for ((off, bytes), (xrt, suffix)) in blobs
            .iter()
            .zip([(Xrt::Const, "const"), (Xrt::Params, "params")])
        {
            if *bytes == 0 {
                continue;
            }
            let mut name = format!("{}:{suffix}", node.name);
            let mut k = 0;
            while map.contains_key(&name) {
                k += 1;
                name = format!("{}:{suffix}_{k}", node.name);
            }
            let (label, _) = BUFFERS[xrt as usize];
            let e = entry(label, xrt, "uint8", &[*bytes], *bytes, *off);
            map.insert(name.clone(), e);
            packed[xrt as usize].push(name.clone());
            const_args.push(name);
        }
        ops.push(json!({
            "name": node.name,
            "type": node.onnx_op,
            "in_args": names(&node.inputs),
            "const_args": const_args,
            "out_args": names(&node.outputs),
        }));
    }
    let mut fused = Map::new();
    for (((label, xrt), size), names) in BUFFERS.iter().zip(sizes).zip(packed) {
        let v = json!({ "buffer_size": size, "xrt_arg_id": *xrt as u32, "packed_tensors": names });
        fused.insert(label.to_string(), v);
    }
    let original = |ts: &[(TensorId, usize)]| -> Map<String, Value> {
        ts.iter()
            .map(|&(t, _)| {
                let tt = &g.tensors[t];
                let v = json!({ "shape": tt.shape, "dtype": dtype_name(tt.dtype) });
                (tt.name.clone(), v)
            })
            .collect()
    };
    json!({
        "dd_meta_major_version": VERSION.0,
        "dd_meta_minor_version": VERSION.1,
        "op_list": ops,
        "fused_tensors": fused,
        "tensor_map": map,
        "aux_info": {
            "original_inputs": original(&f.inputs),
            "original_outputs": original(&f.outputs),
        },
    })
}
