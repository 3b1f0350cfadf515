//! `fuse_epilogues`: folds what follows a Conv / Gemm / MatMul into its epilogue — first a residual `Add` of a
//! same-shaped tensor, then a `Relu` or `Clip` — when the product's result has no other reader. The fused node
//! moves to the position of the last absorbed node (the residual may be computed after the product) and takes
//! over its output tensor.

use super::single_use;
use crate::ir::{Activation, BinOp, Epilogue, Graph, NodeId, Op, UnOp};

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
                Op::Binary(BinOp::Add) if !e.residual && e.act == Activation::None => {
                    let other = if next_node.inputs[0] == out {
                        next_node.inputs[1]
                    } else {
                        next_node.inputs[0]
                    };
                    if g.tensors[other].shape != out_shape || other == out {
                        continue;
                    }
                    g.nodes[p].inputs.push(other);
                    Epilogue {
                        residual: true,
                        act: Activation::None,
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

/// Removes `absorbed` from the order and puts `p` in its place.
fn move_to(g: &mut Graph, p: NodeId, absorbed: NodeId) {
    g.order.retain(|&n| n != p);
    if let Some(pos) = g.order.iter().position(|&n| n == absorbed) {
        g.order[pos] = p;
    }
}
