//! `fold_qdq`: turns the QDQ form of a quantised model into integer ops, the way onnxruntime's QDQ transformer
//! does. `Quantize(act(Conv(Dequantize(x), Dequantize(w), bias)))` — and the same around MatMul and Gemm —
//! becomes one `QConv` / `QMatMul` that reads the u8 / i8 `x` and writes the quantised output: weights are the
//! constant integers behind their DequantizeLinear, the bias is the i32 behind its DequantizeLinear (or an f32
//! bias quantised with scale `x_scale * w_scale[c]`), `act` (Relu / Clip) becomes the output clamp, and the
//! requantisation scale is `x_scale * w_scale[c] / y_scale`. Then `Quantize(Dequantize(t))` with the same
//! parameters is `t`, and `Quantize(act(Add(Dequantize(a), Dequantize(b))))` becomes one `QAdd` (the residual
//! connections of a quantised ResNet), `Quantize(MaxPool(Dequantize(x)))` of equal parameters a MaxPool on the
//! integers, and `Quantize(GlobalAveragePool(Dequantize(x)))` one `QGlobalAvgPool`. It runs first, before constant folding can fold the weights' DequantizeLinear away; the
//! DequantizeLinear nodes it leaves unread are removed by `eliminate_dead_nodes`.

use crate::ir::ops::quant::{quantize_one, range_of};
use crate::ir::{
    DType, Data, Graph, IntProduct, NodeData, NodeId, Op, QuantParams, Requant, Tensor, TensorId,
    UnOp, Uses,
};
use std::collections::{HashMap, HashSet};

/// Folds QDQ patterns; returns the number of integer ops created plus the Q/DQ pairs removed.
pub fn fold_qdq(g: &mut Graph) -> usize {
    // Producer lookups are only ever of Dequantize outputs, which neither phase changes: one map per phase.
    // Readers are asked through `Uses`, kept in step as nodes are folded; absorbed nodes leave the order at the
    // end of each phase, in one pass.
    let p = g.producers();
    let mut f = Folding {
        uses: Uses::new(g),
        absorbed: Vec::new(),
    };
    let mut count = 0;
    for n in g.order.clone() {
        if fold_product(g, &p, &mut f, n)
            .or_else(|| fold_add(g, &p, &mut f, n))
            .or_else(|| fold_max_pool(g, &p, &mut f, n))
            .or_else(|| fold_global_avg(g, &p, &mut f, n))
            .is_some()
        {
            count += 1;
        }
    }
    g.remove_nodes(&f.absorbed);
    let p = g.producers();
    count + remove_round_trips(g, &p)
}

/// What the product and Add folds share: the reader index, kept in step, and the nodes absorbed so far (they
/// leave the order at the end of the phase).
struct Folding {
    uses: Uses,
    absorbed: Vec<NodeId>,
}

impl Folding {
    /// Rewrites node `n` into `node`, absorbing `gone`.
    fn replace(&mut self, g: &mut Graph, n: NodeId, node: NodeData, gone: Vec<NodeId>) {
        for &a in &gone {
            self.uses.remove_node(g, a);
        }
        self.uses.remove_node(g, n);
        g.nodes[n] = node;
        self.uses.add_node(g, n);
        self.absorbed.extend(gone);
    }
}

/// Each tensor's live producer (`Graph::producers`).
type Producers = cranelift_entity::SecondaryMap<TensorId, Option<NodeId>>;

/// The producing node of `t` when it is a live Dequantize.
fn dequantize_of(g: &Graph, p: &Producers, t: TensorId) -> Option<(NodeId, QuantParams)> {
    let n = p[t]?;
    match &g.nodes[n].op {
        Op::Dequantize(q) => Some((n, q.clone())),
        _ => None,
    }
}

/// The constant integer weights behind a Dequantize, minus their zero point, as i8 with per-channel scales
/// along `axis` (`None` when a value leaves i8 or the parameters run along another axis).
fn weights(g: &Graph, p: &Producers, w: TensorId, axis: usize) -> Option<(Tensor, Vec<f32>)> {
    let (d, q) = dequantize_of(g, p, w)?;
    let c = g.constant(g.nodes[d].inputs[0])?;
    if !matches!(c.dtype, DType::U8 | DType::I8) || c.shape.len() <= axis {
        return None;
    }
    let n = c.shape[axis];
    let per = match q.axis {
        None => false,
        Some(a) if a == axis => true,
        Some(_) => return None,
    };
    let inner: usize = c.shape[axis + 1..].iter().product();
    let vals = c.to_i64_vec();
    let mut out = Vec::with_capacity(vals.len());
    for (i, v) in vals.iter().enumerate() {
        let ch = if per { (i / inner) % n } else { 0 };
        let d = v - q.zero_point[ch] as i64;
        if !(-128..=127).contains(&d) {
            return None;
        }
        out.push(d);
    }
    let scales = if per {
        q.scale.clone()
    } else {
        vec![q.scale[0]; n]
    };
    let t = Tensor {
        dtype: DType::I8,
        shape: c.shape.clone(),
        data: Data::I64(out),
    };
    Some((t, scales))
}

/// The i32 bias for accumulators of scale `acc_scale[c]`: the integers behind a Dequantize whose scale is that
/// product, else the dequantised / f32 constant quantised with it.
fn bias(g: &Graph, p: &Producers, b: TensorId, acc_scale: &[f32]) -> Option<Vec<i32>> {
    let m = acc_scale.len();
    if let Some((d, q)) = dequantize_of(g, p, b) {
        let c = g.constant(g.nodes[d].inputs[0])?;
        if c.dtype == DType::I32 && c.len() == m && q.zero_point.iter().all(|&z| z == 0) {
            let same = (0..m).all(|i| {
                let s = if q.scale.len() == 1 {
                    q.scale[0]
                } else {
                    q.scale[i]
                };
                s == acc_scale[i]
            });
            if same {
                return Some(c.to_i64_vec().iter().map(|&v| v as i32).collect());
            }
        }
        let v = crate::ir::ops::eval(&g.nodes[d].op, &[c]).ok()?.remove(0);
        return quantize_bias(&v.to_f32_vec(), acc_scale);
    }
    let c = g.constant(b)?;
    quantize_bias(c.as_f32()?, acc_scale)
}

fn quantize_bias(b: &[f32], acc_scale: &[f32]) -> Option<Vec<i32>> {
    if b.len() != acc_scale.len() && b.len() != 1 {
        return None;
    }
    let v = (0..acc_scale.len())
        .map(|i| {
            let x = if b.len() == 1 { b[0] } else { b[i] };
            (x / acc_scale[i]).round_ties_even()
        })
        .collect::<Vec<f32>>();
    v.iter()
        .all(|x| x.abs() < 2.0e9)
        .then(|| v.iter().map(|&x| x as i32).collect())
}

/// What follows a product: the absorbed nodes, the clamp bounds in f32 (before quantisation), and the
/// Quantize's parameters and output.
type Tail = (Vec<NodeId>, (f32, f32), QuantParams, TensorId);

/// What follows the product: an optional Relu / Clip, then a per-tensor Quantize.
fn tail(g: &Graph, uses: &Uses, y: TensorId) -> Option<Tail> {
    let mut nodes = vec![];
    let mut t = y;
    let mut bounds = (f32::NEG_INFINITY, f32::INFINITY);
    let mut next = uses.single_use(t)?;
    match g.nodes[next].op {
        Op::Unary(UnOp::Relu) => bounds = (0.0, f32::INFINITY),
        Op::Unary(UnOp::Clip(lo, hi)) => bounds = (lo, hi),
        _ => {}
    }
    if bounds != (f32::NEG_INFINITY, f32::INFINITY) {
        nodes.push(next);
        t = g.nodes[next].outputs[0];
        next = uses.single_use(t)?;
    }
    let Op::Quantize(q) = &g.nodes[next].op else {
        return None;
    };
    if q.axis.is_some() {
        return None;
    }
    nodes.push(next);
    Some((nodes, bounds, q.clone(), g.nodes[next].outputs[0]))
}

fn fold_product(g: &mut Graph, p: &Producers, f: &mut Folding, n: NodeId) -> Option<()> {
    let node = g.nodes[n].clone();
    // (weight axis of the output channels, bias input, Gemm transB)
    let (axis, bias_in, trans_b) = match &node.op {
        Op::Conv(a) if a.epilogue == Default::default() => {
            (0, a.has_bias.then(|| node.inputs[2]), false)
        }
        Op::MatMul(e) if *e == Default::default() => (1, None, false),
        Op::Gemm(a)
            if a.alpha == 1.0
                && !a.trans_a
                && (!a.has_c || a.beta == 1.0)
                && a.epilogue == Default::default() =>
        {
            (
                if a.trans_b { 0 } else { 1 },
                a.has_c.then(|| node.inputs[2]),
                a.trans_b,
            )
        }
        _ => return None,
    };
    let (dx, xq) = dequantize_of(g, p, node.inputs[0])?;
    if xq.axis.is_some() || !matches!(xq.dtype, DType::U8 | DType::I8) {
        return None;
    }
    let x = g.nodes[dx].inputs[0];
    let (mut w, sw) = weights(g, p, node.inputs[1], axis)?;
    if !matches!(node.op, Op::Conv(_)) && w.shape.len() != 2 {
        return None;
    }
    if trans_b {
        w = crate::ir::ops::eval(&Op::Transpose(vec![1, 0]), &[&w])
            .ok()?
            .remove(0);
    }
    let sx = xq.scale[0];
    let acc_scale: Vec<f32> = sw.iter().map(|&s| sx * s).collect();
    let bias = match bias_in {
        Some(b) => bias(g, p, b, &acc_scale)?,
        None => vec![0; sw.len()],
    };
    let (absorbed, bounds, yq, y) = tail(g, &f.uses, node.outputs[0])?;
    let (sy, zy) = (yq.scale[0], yq.zero_point[0]);
    let clamp = clamp_of(bounds, &yq)?;
    let product = IntProduct {
        x_zero_point: xq.zero_point[0],
        bias,
        requant: Some(Requant {
            scale: acc_scale.iter().map(|&s| s / sy).collect(),
            zero_point: zy,
            clamp,
            dtype: yq.dtype,
        }),
    };
    let op = match &node.op {
        Op::Conv(a) => Op::QConv(
            crate::ir::ConvAttrs {
                has_bias: false,
                ..a.clone()
            },
            product,
        ),
        _ => Op::QMatMul(product),
    };
    let types = [
        (g.tensors[x].dtype, g.tensors[x].shape.as_slice()),
        (DType::I8, w.shape.as_slice()),
    ];
    let out = crate::ir::ops::infer(&op, &types).ok()?.remove(0);
    if out != (g.tensors[y].dtype, g.tensors[y].shape.clone()) {
        return None;
    }
    let wid = g.add_constant(format!("{}::w_s8", node.name), w);
    let new = NodeData {
        name: node.name.clone(),
        onnx_op: node.onnx_op.clone(),
        op,
        inputs: vec![x, wid],
        outputs: vec![y],
    };
    f.replace(g, n, new, absorbed);
    Some(())
}

/// The quantised image of f32 clamp bounds: quantisation is monotonic, so clamping before it is clamping the
/// quantised value to the bounds' images.
fn clamp_of((lo, hi): (f32, f32), yq: &QuantParams) -> Option<(i32, i32)> {
    let (sy, zy) = (yq.scale[0], yq.zero_point[0]);
    let signed = yq.dtype == DType::I8;
    let (dlo, dhi) = range_of(yq.dtype)?;
    Some((
        if lo.is_finite() {
            quantize_one(lo, sy, zy, signed)
        } else {
            dlo
        },
        if hi.is_finite() {
            quantize_one(hi, sy, zy, signed)
        } else {
            dhi
        },
    ))
}

/// `Quantize(act(Add(Dequantize(a), Dequantize(b))))` (or Mul) of same-shaped per-tensor operands becomes `QAdd(a, b)`
/// (the same f32 operations, fused: the result is identical).
fn fold_add(g: &mut Graph, p: &Producers, f: &mut Folding, n: NodeId) -> Option<()> {
    let node = g.nodes[n].clone();
    let mul = match node.op {
        Op::Binary(crate::ir::BinOp::Add) => false,
        Op::Binary(crate::ir::BinOp::Mul) => true,
        _ => return None,
    };
    let shape = &g.tensors[node.outputs[0]].shape;
    let mut ins = Vec::new();
    let mut params = Vec::new();
    for &t in &node.inputs {
        let (d, q) = dequantize_of(g, p, t)?;
        if q.axis.is_some()
            || !matches!(q.dtype, DType::U8 | DType::I8)
            || &g.tensors[t].shape != shape
        {
            return None;
        }
        ins.push(g.nodes[d].inputs[0]);
        params.push((q.scale[0], q.zero_point[0]));
    }
    let (absorbed, bounds, yq, y) = tail(g, &f.uses, node.outputs[0])?;
    let clamp = clamp_of(bounds, &yq)?;
    let new = NodeData {
        name: node.name.clone(),
        onnx_op: node.onnx_op.clone(),
        op: Op::QAdd(crate::ir::QAddParams {
            a: params[0],
            b: params[1],
            y: (yq.scale[0], yq.zero_point[0]),
            clamp,
            dtype: yq.dtype,
            mul,
        }),
        inputs: ins,
        outputs: vec![y],
    };
    f.replace(g, n, new, absorbed);
    Some(())
}

/// `Quantize(MaxPool(Dequantize(x)))` with identical per-tensor parameters on both sides becomes `MaxPool(x)` on
/// the integers: the dequantisation is monotone (positive scale) so the max commutes with it, and the
/// requantisation of a dequantised integer gives it back exactly.
fn fold_max_pool(g: &mut Graph, p: &Producers, f: &mut Folding, n: NodeId) -> Option<()> {
    let node = g.nodes[n].clone();
    let Op::Pool(crate::ir::PoolKind::Max, _) = node.op else {
        return None;
    };
    let (d, q) = dequantize_of(g, p, node.inputs[0])?;
    if q.axis.is_some()
        || !matches!(q.dtype, DType::U8 | DType::I8)
        || q.scale[0].partial_cmp(&0.0) != Some(std::cmp::Ordering::Greater)
    {
        return None;
    }
    let next = f.uses.single_use(node.outputs[0])?;
    match &g.nodes[next].op {
        Op::Quantize(yq) if *yq == q => {}
        _ => return None,
    }
    let new = NodeData {
        inputs: vec![g.nodes[d].inputs[0]],
        outputs: vec![g.nodes[next].outputs[0]],
        ..node
    };
    f.replace(g, n, new, vec![next]);
    Some(())
}

/// `Quantize(GlobalAveragePool(Dequantize(x)))` of per-tensor parameters becomes `QGlobalAvgPool(x)`: the sum in
/// i32, one multiply and one rounding (as onnxruntime's QLinearGlobalAveragePool), where the f32 chain rounds
/// each partial sum; the two agree within a quantisation step.
fn fold_global_avg(g: &mut Graph, p: &Producers, f: &mut Folding, n: NodeId) -> Option<()> {
    let node = g.nodes[n].clone();
    if node.op != Op::GlobalAveragePool {
        return None;
    }
    let (d, q) = dequantize_of(g, p, node.inputs[0])?;
    if q.axis.is_some() || !matches!(q.dtype, DType::U8 | DType::I8) {
        return None;
    }
    let next = f.uses.single_use(node.outputs[0])?;
    let Op::Quantize(yq) = &g.nodes[next].op else {
        return None;
    };
    if yq.axis.is_some() || !matches!(yq.dtype, DType::U8 | DType::I8) {
        return None;
    }
    let params = crate::ir::QGapParams {
        x: (q.scale[0], q.zero_point[0]),
        y: (yq.scale[0], yq.zero_point[0]),
        dtype: yq.dtype,
    };
    let new = NodeData {
        op: Op::QGlobalAvgPool(params),
        inputs: vec![g.nodes[d].inputs[0]],
        outputs: vec![g.nodes[next].outputs[0]],
        ..node
    };
    f.replace(g, n, new, vec![next]);
    Some(())
}

/// Replaces `Quantize(Dequantize(t))` with identical parameters by `t` (exact: `(q - z) * s / s` rounds back to
/// `q - z`); returns how many.
fn remove_round_trips(g: &mut Graph, p: &Producers) -> usize {
    let outputs: HashSet<TensorId> = g.outputs.iter().copied().collect();
    // Each removed Quantize's output and the tensor that replaces it, already resolved: in order, a replacement
    // that was itself replaced (Q(DQ(Q(DQ(t))))) is looked up once when recorded.
    let mut to: HashMap<TensorId, TensorId> = HashMap::new();
    let mut removed = Vec::new();
    for n in g.order.clone() {
        let Op::Quantize(q) = &g.nodes[n].op else {
            continue;
        };
        let out = g.nodes[n].outputs[0];
        if outputs.contains(&out) {
            continue;
        }
        let Some((d, dq)) = dequantize_of(g, p, g.nodes[n].inputs[0]) else {
            continue;
        };
        if dq == *q {
            let src = g.nodes[d].inputs[0];
            to.insert(out, to.get(&src).copied().unwrap_or(src));
            removed.push(n);
        }
    }
    if removed.is_empty() {
        return 0;
    }
    g.remove_nodes(&removed);
    for &n in &g.order {
        for i in g.nodes[n].inputs.iter_mut() {
            *i = to.get(i).copied().unwrap_or(*i);
        }
    }
    removed.len()
}
