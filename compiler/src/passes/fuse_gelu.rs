//! `fuse_gelu`: the exact GELU written out in elementary ops, `0.5 · x · (1 + erf(x / √2))`, becomes one
//! `Gelu` map. Exporters spell it as `Div(x, √2)` or `Mul(x, 1/√2)`, then `Erf`, `Add(·, 1)`, and the two
//! products in one of three groupings: `(x · 0.5) · (1 + erf)` (BERT-style encoders), `(x · (1 + erf)) · 0.5`
//! (PyTorch's `F.gelu` export) or `x · ((1 + erf) · 0.5)`; either operand order of each commutative op. Every
//! tensor inside the pattern must have the pattern's next node as its only reader, and the constants must be
//! scalars (one element) of the expected value. The five nodes (four maps of a tensor's size to memory and
//! back, each a kernel of its own) become one map; the last node takes over as `Gelu(x)` and keeps its output
//! tensor, the others leave the order. The result differs from the unfused ops by a few ulp (one rounding of
//! the scaling instead of a division), within the elementwise tolerance.

use crate::ir::{numel, BinOp, DType, Graph, NodeId, Op, TensorId, UnOp, Uses};

/// Fuses every matched GELU; returns how many.
pub fn fuse_gelu(g: &mut Graph) -> usize {
    let mut fused = 0;
    let mut removed = std::collections::HashSet::new();
    let mut uses = Uses::new(g);
    for &erf in &g.order.clone() {
        if g.nodes[erf].op != Op::Unary(UnOp::Erf) || removed.contains(&erf) {
            continue;
        }
        let Some((x, last, absorbed)) = match_gelu(g, &uses, erf) else {
            continue;
        };
        let out = g.nodes[last].outputs[0];
        if g.tensors[out].shape != g.tensors[x].shape {
            continue;
        }
        g.nodes[last].op = Op::Unary(UnOp::Gelu { tanh: false });
        for &n in &absorbed {
            uses.remove_node(g, n);
        }
        uses.set_inputs(g, last, vec![x]);
        removed.extend(absorbed);
        fused += 1;
    }
    if !removed.is_empty() {
        g.order.retain(|n| !removed.contains(n));
    }
    fused
}

/// The GELU around `erf`: (its input x, the node that computes the result, the other nodes of the pattern).
fn match_gelu(g: &Graph, uses: &Uses, erf: NodeId) -> Option<(TensorId, NodeId, Vec<NodeId>)> {
    let producer = |_: &Graph, t| uses.producer(t);
    let single_use = |_: &Graph, t| uses.single_use(t);
    // x / √2 or x · (1/√2).
    let s = g.nodes[erf].inputs[0];
    let scale = producer(g, s)?;
    (single_use(g, s)? == erf).then_some(())?;
    let x = match &g.nodes[scale].op {
        Op::Binary(BinOp::Div) => {
            let [x, c] = pair(g, scale)?;
            near(g, c, std::f32::consts::SQRT_2)?;
            x
        }
        Op::Binary(BinOp::Mul) => operand_with(g, scale, std::f32::consts::FRAC_1_SQRT_2)?,
        _ => return None,
    };
    // 1 + erf.
    let add = single_use(g, g.nodes[erf].outputs[0])?;
    (g.nodes[add].op == Op::Binary(BinOp::Add)).then_some(())?;
    operand_with(g, add, 1.0)?;
    let o = g.nodes[add].outputs[0];
    let m1 = single_use(g, o)?;
    (g.nodes[m1].op == Op::Binary(BinOp::Mul)).then_some(())?;
    let y = other(g, m1, o)?;
    let mut absorbed = vec![scale, erf, add];
    let last = if y == x {
        // (x · (1 + erf)) · 0.5
        let m2 = single_use(g, g.nodes[m1].outputs[0])?;
        (g.nodes[m2].op == Op::Binary(BinOp::Mul)).then_some(())?;
        operand_with(g, m2, 0.5)?;
        absorbed.push(m1);
        m2
    } else if near(g, y, 0.5).is_some() {
        // x · ((1 + erf) · 0.5)
        let m2 = single_use(g, g.nodes[m1].outputs[0])?;
        (g.nodes[m2].op == Op::Binary(BinOp::Mul)).then_some(())?;
        (other(g, m2, g.nodes[m1].outputs[0])? == x).then_some(())?;
        absorbed.push(m1);
        m2
    } else {
        // (x · 0.5) · (1 + erf)
        let h = producer(g, y)?;
        (g.nodes[h].op == Op::Binary(BinOp::Mul) && single_use(g, y)? == m1).then_some(())?;
        (operand_with(g, h, 0.5)? == x).then_some(())?;
        absorbed.push(h);
        m1
    };
    Some((x, last, absorbed))
}

/// A binary node's two inputs.
fn pair(g: &Graph, n: NodeId) -> Option<[TensorId; 2]> {
    match g.nodes[n].inputs[..] {
        [a, b] => Some([a, b]),
        _ => None,
    }
}

/// The input of binary node `n` that is not `t` (None when both are or `t` is neither).
fn other(g: &Graph, n: NodeId, t: TensorId) -> Option<TensorId> {
    match pair(g, n)? {
        [a, b] if a == t && b != t => Some(b),
        [a, b] if b == t && a != t => Some(a),
        _ => None,
    }
}

/// The operand of commutative binary node `n` whose partner is a scalar constant near `v`.
fn operand_with(g: &Graph, n: NodeId, v: f32) -> Option<TensorId> {
    let [a, b] = pair(g, n)?;
    if near(g, b, v).is_some() {
        Some(a)
    } else if near(g, a, v).is_some() {
        Some(b)
    } else {
        None
    }
}

/// `Some` when `t` is a one-element f32 constant within 1e-6 (relative) of `v`.
fn near(g: &Graph, t: TensorId, v: f32) -> Option<()> {
    let c = g.constant(t)?;
    let x = *c.as_f32()?.first()?;
    (c.dtype == DType::F32 && numel(&c.shape) == 1 && (x - v).abs() <= 1e-6 * v.abs()).then_some(())
}
