//! `quantize`: Glow's profile-guided quantisation, expressed as the QDQ form `fold_qdq` already turns into
//! integer ops. For every f32 Conv / Gemm / MatMul with constant weights (not named in `--keep-f32`) whose input
//! and output have ranges in the profile, it inserts `Quantize → Dequantize` on the input and on the output (after
//! a following Relu / Clip), and replaces the weights by per-channel symmetric i8 constants (`scale =
//! max|w| / 127`) behind a Dequantize. Activations are u8 with `scale = (hi - lo) / 255` and
//! `zero_point = rhe(-lo / scale)` over the calibrated range `[lo, hi]` (which always contains 0). The
//! producer's output tensor is renamed and the Dequantize writes the original one, so names, model outputs and
//! other readers are unchanged; consecutive Quantize(Dequantize) pairs cancel in `fold_qdq`.

use super::single_use;
use crate::ir::{
    DType, Data, Graph, NodeData, NodeId, Op, QuantParams, Tensor, TensorId, TensorKind, UnOp,
};
use crate::profile::histogram::Calibration;
use crate::profile::Profile;
use std::collections::HashMap;

/// What the pass did.
#[derive(Debug, Clone, Default)]
pub struct QuantizeReport {
    /// Nodes prepared for int8.
    pub quantized: Vec<String>,
    /// Nodes left in f32, with the reason.
    pub kept: Vec<(String, String)>,
}

/// u8 activation parameters for the range `[lo, hi]` (lo <= 0 <= hi).
pub fn activation_params(lo: f32, hi: f32) -> QuantParams {
    let span = hi - lo;
    let scale = if span > 0.0 && span.is_finite() {
        span / 255.0
    } else {
        1.0 / 255.0
    };
    let zp = (-lo / scale).round_ties_even().clamp(0.0, 255.0) as i32;
    QuantParams {
        dtype: DType::U8,
        axis: None,
        scale: vec![scale],
        zero_point: vec![zp],
    }
}

/// Per-channel symmetric i8 weights along `axis`: (values, scales). `min_scale[c]` floors a channel's scale:
/// a bias must fit i32 at scale `x_scale · w_scale[c]`, so a channel whose weights are nearly zero (a pruned or
/// BatchNorm-silenced channel) gets the smallest scale that keeps its bias in range, as onnxruntime's quantiser
/// does; its weights then round to (nearly) zero, which they were.
pub fn quantize_weights(w: &Tensor, axis: usize, min_scale: &[f32]) -> Option<(Tensor, Vec<f32>)> {
    let v = w.as_f32()?;
    let n = *w.shape.get(axis)?;
    let inner: usize = w.shape[axis + 1..].iter().product();
    let mut amax = vec![0f32; n];
    for (i, x) in v.iter().enumerate() {
        let c = (i / inner) % n;
        amax[c] = amax[c].max(x.abs());
    }
    if amax.iter().any(|a| !a.is_finite()) {
        return None;
    }
    let scales: Vec<f32> = amax
        .iter()
        .enumerate()
        .map(|(c, &a)| {
            let s = if a > 0.0 { a / 127.0 } else { 1.0 };
            s.max(min_scale.get(c).copied().unwrap_or(0.0))
        })
        .collect();
    let q = v
        .iter()
        .enumerate()
        .map(|(i, x)| {
            let c = (i / inner) % n;
            (x / scales[c]).round_ties_even().clamp(-127.0, 127.0) as i64
        })
        .collect();
    let t = Tensor {
        dtype: DType::I8,
        shape: w.shape.clone(),
        data: Data::I64(q),
    };
    Some((t, scales))
}

/// Inserts the QDQ form for every quantisable product; returns what was done.
pub fn quantize(
    g: &mut Graph,
    profile: &Profile,
    calibration: Calibration,
    keep_f32: &[String],
) -> QuantizeReport {
    let mut report = QuantizeReport::default();
    let mut dq_of: HashMap<TensorId, TensorId> = HashMap::new();
    for n in g.order.clone() {
        let node = g.nodes[n].clone();
        let axis = match &node.op {
            Op::Conv(a) if a.epilogue == Default::default() => 0,
            Op::MatMul(e) if *e == Default::default() => 1,
            Op::Gemm(a) if !a.trans_a && a.alpha == 1.0 && (!a.has_c || a.beta == 1.0) => {
                if a.trans_b {
                    0
                } else {
                    1
                }
            }
            _ => continue,
        };
        let mut keep = |why: &str| report.kept.push((node.name.clone(), why.to_string()));
        if keep_f32.contains(&node.name) {
            keep("--keep-f32");
            continue;
        }
        let Some(w) = g.constant(node.inputs[1]).cloned() else {
            keep("weights are not constant");
            continue;
        };
        if !matches!(node.op, Op::Conv(_)) && w.shape.len() != 2 {
            keep("weights are not 2-D");
            continue;
        }
        let x = node.inputs[0];
        // The tensor the output quantisation goes after: the product's, or a single following Relu / Clip's.
        let (last, out) = match single_use(g, node.outputs[0]) {
            Some(r)
                if matches!(
                    g.nodes[r].op,
                    Op::Unary(UnOp::Relu) | Op::Unary(UnOp::Clip(..))
                ) =>
            {
                (r, g.nodes[r].outputs[0])
            }
            _ => (n, node.outputs[0]),
        };
        let range = |t: TensorId| {
            profile
                .histogram(&g.tensors[t].name)
                .map(|h| h.range_for(calibration))
        };
        let (Some(rx), Some(ry)) = (range(x), range(out)) else {
            keep("no profile for its input or output");
            continue;
        };
        // The bias is quantised at x_scale · w_scale[c] into i32: keep |b| / that below 2^30.
        let xq = activation_params(rx.0, rx.1);
        let bias = match &node.op {
            Op::Conv(a) if a.has_bias => g
                .constant(node.inputs[2])
                .and_then(|b| b.as_f32().map(<[f32]>::to_vec)),
            Op::Gemm(a) if a.has_c => g
                .constant(node.inputs[2])
                .and_then(|b| b.as_f32().map(<[f32]>::to_vec)),
            _ => None,
        };
        let channels = w.shape.get(axis).copied().unwrap_or(0);
        let min_scale: Vec<f32> = match &bias {
            Some(b) if b.len() == channels || b.len() == 1 => (0..channels)
                .map(|c| {
                    b[if b.len() == 1 { 0 } else { c }].abs() / (xq.scale[0] * (1u32 << 30) as f32)
                })
                .collect(),
            _ => vec![],
        };
        let Some((wq, scales)) = quantize_weights(&w, axis, &min_scale) else {
            keep("non-finite weights");
            continue;
        };
        report.quantized.push(node.name.clone());
        // Input: Quantize → Dequantize, shared by every product reading `x`.
        let xd = match dq_of.get(&x) {
            Some(&t) => t,
            None => {
                let t = qdq_after(g, x, xq.clone(), None);
                dq_of.insert(x, t);
                t
            }
        };
        g.nodes[n].inputs[0] = xd;
        // Weights: i8 constant → Dequantize (per channel).
        let wname = format!("{}::w_q", node.name);
        let wc = g.add_constant(wname.clone(), wq);
        let wd = g.add_tensor(
            format!("{wname}::dq"),
            DType::F32,
            w.shape.clone(),
            TensorKind::Value,
        );
        let pos = position(g, n);
        let wnode = g.nodes.push(NodeData {
            name: format!("{wname}::dequantize"),
            onnx_op: "DequantizeLinear".into(),
            op: Op::Dequantize(QuantParams {
                dtype: DType::I8,
                axis: Some(axis),
                zero_point: vec![0; scales.len()],
                scale: scales,
            }),
            inputs: vec![wc],
            outputs: vec![wd],
        });
        g.order.insert(pos, wnode);
        g.nodes[n].inputs[1] = wd;
        // Output: the producer writes a renamed tensor; Quantize → Dequantize writes the original.
        let raw = g.add_tensor(
            format!("{}::f32", g.tensors[out].name),
            DType::F32,
            g.tensors[out].shape.clone(),
            TensorKind::Value,
        );
        for o in g.nodes[last].outputs.iter_mut() {
            if *o == out {
                *o = raw;
            }
        }
        qdq_after(g, raw, activation_params(ry.0, ry.1), Some(out));
        dq_of.insert(out, out);
    }
    report
}

/// After `fold_qdq`: a product this pass prepared that is still an f32 Conv / Gemm / MatMul runs on dequantised
/// values — adds it to `report.kept` with that reason.
pub fn report_unfolded(g: &Graph, report: &mut QuantizeReport) {
    let f32_products: std::collections::HashSet<&str> = g
        .order
        .iter()
        .filter(|&&n| matches!(g.nodes[n].op, Op::Conv(_) | Op::Gemm(_) | Op::MatMul(_)))
        .map(|&n| g.nodes[n].name.as_str())
        .collect();
    for name in &report.quantized {
        if f32_products.contains(name.as_str()) {
            report.kept.push((
                name.clone(),
                "its QDQ form did not fold into an integer op; it runs in f32 on dequantised values".into(),
            ));
        }
    }
}

fn position(g: &Graph, n: NodeId) -> usize {
    g.order
        .iter()
        .position(|&m| m == n)
        .unwrap_or(g.order.len())
}

/// Appends `Quantize(t) → Dequantize` right after `t`'s producer (at the front for a model input); the
/// Dequantize writes `into` when given (else a new tensor, returned) and readers are not rewired.
fn qdq_after(g: &mut Graph, t: TensorId, q: QuantParams, into: Option<TensorId>) -> TensorId {
    let name = g.tensors[t].name.clone();
    let shape = g.tensors[t].shape.clone();
    let pos = g
        .order
        .iter()
        .position(|&m| g.nodes[m].outputs.contains(&t))
        .map_or(0, |p| p + 1);
    let tq = g.add_tensor(
        format!("{name}::q"),
        DType::U8,
        shape.clone(),
        TensorKind::Value,
    );
    let td = into.unwrap_or_else(|| {
        g.add_tensor(format!("{name}::dq"), DType::F32, shape, TensorKind::Value)
    });
    let qn = g.nodes.push(NodeData {
        name: format!("{name}::quantize"),
        onnx_op: "QuantizeLinear".into(),
        op: Op::Quantize(q.clone()),
        inputs: vec![t],
        outputs: vec![tq],
    });
    let dn = g.nodes.push(NodeData {
        name: format!("{name}::dequantize"),
        onnx_op: "DequantizeLinear".into(),
        op: Op::Dequantize(q),
        inputs: vec![tq],
        outputs: vec![td],
    });
    g.order.insert(pos, qn);
    g.order.insert(pos + 1, dn);
    td
}

/// `--quantized-io`: a model input read only by Quantize nodes of one (per-tensor) quantisation becomes that
/// integer type, and a model output written by a per-tensor Dequantize becomes the Dequantize's integer input
/// (under the output's name). Returns `(name, scale, zero_point)` of every converted input and output; the rest
/// stay f32.
pub fn quantize_io(g: &mut Graph) -> Vec<(String, f32, i32)> {
    let mut done = Vec::new();
    for t in g.inputs.clone() {
        let readers: Vec<NodeId> = super::consumers(g, t);
        let qs: Vec<QuantParams> = readers
            .iter()
            .filter_map(|&n| match &g.nodes[n].op {
                Op::Quantize(q) if q.axis.is_none() => Some(q.clone()),
                _ => None,
            })
            .collect();
        if readers.is_empty() || qs.len() != readers.len() || qs.iter().any(|q| *q != qs[0]) {
            continue;
        }
        g.tensors[t].dtype = qs[0].dtype;
        for &n in &readers {
            let out = g.nodes[n].outputs[0];
            g.replace_uses(out, t);
        }
        g.remove_nodes(&readers);
        done.push((
            g.tensors[t].name.clone(),
            qs[0].scale[0],
            qs[0].zero_point[0],
        ));
    }
    let producers = g.producers();
    for i in 0..g.outputs.len() {
        let t = g.outputs[i];
        let Some(n) = producers[t] else { continue };
        let Op::Dequantize(q) = &g.nodes[n].op else {
            continue;
        };
        let src = g.nodes[n].inputs[0];
        if q.axis.is_some()
            || q.dtype == DType::I32
            || g.inputs.contains(&src)
            || g.outputs.contains(&src)
        {
            continue;
        }
        let (scale, zp) = (q.scale[0], q.zero_point[0]);
        let name = g.tensors[t].name.clone();
        g.tensors[t].name = format!("{name}::f32");
        g.tensors[src].name = name.clone();
        g.outputs[i] = src;
        done.push((name, scale, zp));
    }
    done
}
