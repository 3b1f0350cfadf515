//! `fuse_epilogues`: folds what follows a Conv / Gemm / MatMul into its epilogue — first (MatMul) an `Add` of a
//! row of N values, the bias of a `MatMul` + `Add` linear layer, then a residual `Add` of a same-shaped tensor,
//! then a `Relu` or `Clip` — when the product's result has no other reader. The fused node
//! moves to the position of the last absorbed node (the residual may be computed after the product) and takes
//! over its output tensor.

use super::single_use;
use crate::ir::{Activation, BinOp, DType, Epilogue, Graph, NodeId, Op, TensorId, UnOp};

fn epilogue_mut(op: &mut Op) -> Option<&mut Epilogue> {
    match op {
        Op::Conv(a) => Some(&mut a.epilogue),
        Op::Gemm(a) => Some(&mut a.epilogue),
        Op::MatMul(e) => Some(e),
        _ => None,
    }
}

/// Fuses epilogues; returns the number of absorbed nodes.
pub fn fuse_epilogues(g: &mut Graph) -> usize {
    let mut absorbed = 0;
    let mut changed = true;
    while changed {
        changed = false;
        for &p in &g.order.clone() {
            let Some(e) = epilogue_mut(&mut g.nodes[p].op).copied() else {
                continue;
            };
            let out = g.nodes[p].outputs[0];
            let Some(next) = single_use(g, out) else {
                continue;
            };
            let next_node = g.nodes[next].clone();
            let out_shape = g.tensors[out].shape.clone();
            let fused = match &next_node.op {
                Op::Binary(BinOp::Add)
                    if matches!(g.nodes[p].op, Op::MatMul(_)) && e == Epilogue::default() =>
                {
                    let other = other_input(&next_node.inputs, out);
                    if other == out || !is_row(g, other, &out_shape) {
                        continue;
                    }
                    g.nodes[p].inputs.push(other);
                    Epilogue { bias: true, ..e }
                }
                Op::Binary(BinOp::Add) if !e.residual && e.act == Activation::None => {
                    let other = other_input(&next_node.inputs, out);
                    if g.tensors[other].shape != out_shape || other == out {
                        continue;
                    }
                    g.nodes[p].inputs.push(other);
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
                _ => continue,
            };
            if let Some(ep) = epilogue_mut(&mut g.nodes[p].op) {
                *ep = fused;
            }
            g.nodes[p].outputs = next_node.outputs.clone();
            move_to(g, p, next);
            absorbed += 1;
            changed = true;
            break;
        }
    }
    absorbed
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

/// Removes `absorbed` from the order and puts `p` in its place.
fn move_to(g: &mut Graph, p: NodeId, absorbed: NodeId) {
    g.order.retain(|&n| n != p);
    if let Some(pos) = g.order.iter().position(|&n| n == absorbed) {
        g.order[pos] = p;
    }
}
