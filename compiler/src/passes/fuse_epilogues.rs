//! `fuse_epilogues`: folds what follows a Conv / Gemm / MatMul into its epilogue — first (MatMul) a `Mul` or
//! `Div` by a scalar constant, an attention's scaling of `QKᵀ` by `1/√d`, and an `Add` of a row of N values, the
//! bias of a `MatMul` + `Add` linear layer or an attention's mask, then a residual `Add` of a same-shaped
//! tensor, then a `Relu` or `Clip` — when the product's result has no other reader. The fused node
//! moves to the position of the last absorbed node (the residual may be computed after the product) and takes
//! over its output tensor. A division becomes a multiplication by the reciprocal: the same numbers when the
//! divisor is a power of two (√64 = 8 in BERT-base), within an ulp of the quotient otherwise.

use crate::ir::{
    numel, Activation, BinOp, DType, Epilogue, Graph, NodeId, Op, TensorId, UnOp, Uses,
};
use std::collections::{HashMap, HashSet};

fn epilogue_mut(op: &mut Op) -> Option<&mut Epilogue> {
    match op {
        Op::Conv(a) => Some(&mut a.epilogue),
        Op::Gemm(a) => Some(&mut a.epilogue),
        Op::MatMul(e) => Some(e),
        _ => None,
    }
}

/// Fuses epilogues; returns the number of absorbed nodes. One pass over the products in order, each absorbing
/// what follows it until nothing more fits; readers are asked through `ir::Uses`, kept in step as nodes are
/// absorbed, and the order is rebuilt once at the end (O(nodes) instead of a rescan per fusion).
pub fn fuse_epilogues(g: &mut Graph) -> usize {
    let mut uses = Uses::new(g);
    // product -> the absorbed node whose place in the order it takes; places it left.
    let mut slot: HashMap<NodeId, NodeId> = HashMap::new();
    let mut dropped: HashSet<NodeId> = HashSet::new();
    let mut absorbed = 0;
    for p in g.order.clone() {
        while let Some(e) = epilogue_mut(&mut g.nodes[p].op).copied() {
            let out = g.nodes[p].outputs[0];
            let Some(next) = uses.single_use(out) else {
                break;
            };
            let next_node = g.nodes[next].clone();
            let out_shape = g.tensors[out].shape.clone();
            let is_matmul = matches!(g.nodes[p].op, Op::MatMul(_));
            let mut extra = None;
            let fused = match &next_node.op {
                Op::Binary(op @ (BinOp::Mul | BinOp::Div))
                    if is_matmul && e == Epilogue::default() =>
                {
                    let Some(scale) = scale_of(g, *op, &next_node.inputs, out) else {
                        break;
                    };
                    if g.tensors[next_node.outputs[0]].shape != out_shape {
                        break;
                    }
                    Epilogue { scale, ..e }
                }
                Op::Binary(BinOp::Add)
                    if is_matmul && !e.bias && !e.residual && e.act == Activation::None =>
                {
                    let other = other_input(&next_node.inputs, out);
                    if other == out || !is_row(g, other, &out_shape) {
                        break;
                    }
                    extra = Some(other);
                    Epilogue { bias: true, ..e }
                }
                Op::Binary(BinOp::Add) if !e.residual && e.act == Activation::None => {
                    let other = other_input(&next_node.inputs, out);
                    if g.tensors[other].shape != out_shape || other == out {
                        break;
                    }
                    extra = Some(other);
                    Epilogue {
                        residual: true,
                        ..e
                    }
                }
                Op::Unary(UnOp::Relu) if e.act == Activation::None => Epilogue {
                    act: Activation::Relu,
                    ..e
                },
                Op::Unary(UnOp::Clip(lo, hi)) if e.act == Activation::None => Epilogue {
                    act: Activation::Clip(*lo, *hi),
                    ..e
                },
                _ => break,
            };
            if let Some(ep) = epilogue_mut(&mut g.nodes[p].op) {
                *ep = fused;
            }
            // `next` leaves: it no longer reads its inputs; `p` reads the extra operand and writes its output.
            uses.remove_node(g, next);
            if let Some(other) = extra {
                let mut inputs = g.nodes[p].inputs.clone();
                inputs.push(other);
                uses.set_inputs(g, p, inputs);
            }
            uses.set_outputs(g, p, next_node.outputs.clone());
            dropped.insert(slot.insert(p, next).unwrap_or(p));
            absorbed += 1;
        }
    }
    if absorbed > 0 {
        let at: HashMap<NodeId, NodeId> = slot.iter().map(|(&p, &s)| (s, p)).collect();
        g.order = g
            .order
            .iter()
            .filter_map(|n| match at.get(n) {
                Some(&p) => Some(p),
                None => (!dropped.contains(n)).then_some(*n),
            })
            .collect();
    }
    absorbed
}

/// The factor a `Mul` or `Div` of the product `out` by a one-element f32 constant applies to it: the constant,
/// or for `out / c` its reciprocal, when finite and normal (no scaling that overflows or loses precision).
fn scale_of(g: &Graph, op: BinOp, inputs: &[TensorId], out: TensorId) -> Option<f32> {
    let other = other_input(inputs, out);
    if other == out || (op == BinOp::Div && inputs[0] != out) {
        return None;
    }
    let c = g.constant(other)?;
    if c.dtype != DType::F32 || numel(&c.shape) != 1 {
        return None;
    }
    let v = *c.as_f32()?.first()?;
    let f = if op == BinOp::Div { 1.0 / v } else { v };
    (f.is_normal() && v.is_normal()).then_some(f)
}

/// The input of a binary node that is not `out` (`out` itself when both are).
fn other_input(inputs: &[TensorId], out: TensorId) -> TensorId {
    if inputs[0] == out {
        inputs[1]
    } else {
        inputs[0]
    }
}

/// Whether `t` is an f32 row of `out`'s last dimension, shaped `[N]` or ones then `N`, no longer than `out`'s
/// shape (so that adding it keeps that shape).
fn is_row(g: &Graph, t: TensorId, out: &[usize]) -> bool {
    let s = &g.tensors[t].shape;
    g.tensors[t].dtype == DType::F32
        && s.len() <= out.len()
        && s.last() == out.last()
        && s.iter().rev().skip(1).all(|&d| d == 1)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ir::{eval, NodeData, Tensor, TensorKind};

    fn node(g: &mut Graph, name: &str, op: Op, inputs: Vec<TensorId>, shape: &[usize]) -> TensorId {
        let y = g.add_tensor(name, DType::F32, shape.to_vec(), TensorKind::Value);
        g.push_node(NodeData {
            name: name.into(),
            onnx_op: name.into(),
            op,
            inputs,
            outputs: vec![y],
        });
        y
    }

    /// An attention's scores `Add(Div(MatMul(Q, Kᵀ), d), mask)`, as `div` `d` (`Div`) or as a product by `d`.
    fn attention(d: f32, div: bool, divisor_first: bool) -> Graph {
        let mut g = Graph::default();
        let q = g.add_tensor("q", DType::F32, vec![2, 3, 4], TensorKind::Input);
        let k = g.add_tensor("k", DType::F32, vec![2, 4, 5], TensorKind::Input);
        let mask = g.add_tensor("mask", DType::F32, vec![1, 1, 5], TensorKind::Input);
        let c = g.add_tensor(
            "d",
            DType::F32,
            vec![],
            TensorKind::Constant(Tensor::f32(vec![], vec![d])),
        );
        g.inputs.extend([q, k, mask]);
        let qk = node(
            &mut g,
            "qk",
            Op::MatMul(Epilogue::default()),
            vec![q, k],
            &[2, 3, 5],
        );
        let (op, ins) = match (div, divisor_first) {
            (true, false) => (BinOp::Div, vec![qk, c]),
            (true, true) => (BinOp::Div, vec![c, qk]),
            (false, _) => (BinOp::Mul, vec![c, qk]),
        };
        let s = node(&mut g, "scale", Op::Binary(op), ins, &[2, 3, 5]);
        let y = node(
            &mut g,
            "mask",
            Op::Binary(BinOp::Add),
            vec![s, mask],
            &[2, 3, 5],
        );
        g.outputs.push(y);
        g
    }

    fn run(g: &Graph) -> Vec<f32> {
        let t = |shape: Vec<usize>, k: usize| {
            let n = shape.iter().product::<usize>();
            Tensor::f32(
                shape,
                (0..n)
                    .map(|i| ((i * 7 + k) % 13) as f32 * 0.37 - 2.1)
                    .collect(),
            )
        };
        let inputs = vec![
            t(vec![2, 3, 4], 1),
            t(vec![2, 4, 5], 2),
            t(vec![1, 1, 5], 3),
        ];
        let out = eval::run(g, inputs, &mut |_, _| {}).unwrap();
        out[0].as_f32().unwrap().to_vec()
    }

    /// The scaling and the mask join the MatMul: bitwise the unfused result for a power-of-two divisor and a
    /// product, within an ulp for another divisor; `d / QKᵀ` stays a division.
    #[test]
    fn attention_scale_and_mask_fold_into_the_product() {
        for (d, div) in [(8.0, true), (0.125, false), (3.0, true)] {
            let mut g = attention(d, div, false);
            let before = run(&g);
            assert_eq!(fuse_epilogues(&mut g), 2, "d {d} div {div}");
            assert_eq!(g.order.len(), 1);
            let Op::MatMul(e) = g.nodes[g.order[0]].op else {
                panic!("not a MatMul: {:?}", g.nodes[g.order[0]].op)
            };
            assert_eq!((e.scale, e.bias), (if div { 1.0 / d } else { d }, true));
            let after = run(&g);
            for (a, b) in before.iter().zip(&after) {
                if d == 3.0 {
                    assert!(
                        (a - b).abs() <= 2.0 * f32::EPSILON * a.abs().max(1.0),
                        "{a} vs {b}"
                    );
                } else {
                    assert_eq!(a.to_bits(), b.to_bits());
                }
            }
        }
        let mut g = attention(8.0, true, true);
        assert_eq!(fuse_epilogues(&mut g), 0);
        assert_eq!(g.order.len(), 3);
    }
}
