//! `fold_batchnorm`: a BatchNormalization whose input is a Conv's only use, with constant weights and
//! parameters, is folded into the Conv: W'\[m\] = W\[m\] * s\[m\], b'\[m\] = b\[m\] * s\[m\] + t\[m\], where (s, t) is the
//! per-channel affine form of the normalisation. The Conv takes over the BatchNorm's output tensor.

use crate::ir::ops::nn::batchnorm_affine;
use crate::ir::{Graph, Op, Tensor, Uses};

/// Folds eligible BatchNorms; returns how many.
pub fn fold_batchnorm(g: &mut Graph) -> usize {
    let mut removed = Vec::new();
    let mut uses = Uses::new(g);
    for &bn in &g.order.clone() {
        let Op::BatchNorm { epsilon } = g.nodes[bn].op else {
            continue;
        };
        let x = g.nodes[bn].inputs[0];
        let Some(conv) = uses.producer(x) else {
            continue;
        };
        let Op::Conv(attrs) = g.nodes[conv].op.clone() else {
            continue;
        };
        if uses.single_use(x) != Some(bn) || attrs.epilogue != Default::default() {
            continue;
        }
        let params: Option<Vec<Vec<f32>>> = g.nodes[bn].inputs[1..]
            .iter()
            .map(|&t| g.constant(t).map(|c| c.to_f32_vec()))
            .collect();
        let (Some(p), Some(w)) = (params, g.constant(g.nodes[conv].inputs[1]).cloned()) else {
            continue;
        };
        let (s, t) = batchnorm_affine(&p[0], &p[1], &p[2], &p[3], epsilon);
        let m = s.len();
        let per = w.len() / m.max(1);
        let wv: Vec<f32> = w
            .to_f32_vec()
            .iter()
            .enumerate()
            .map(|(i, v)| v * s[i / per])
            .collect();
        let old_b = if attrs.has_bias {
            g.constant(g.nodes[conv].inputs[2]).map(|c| c.to_f32_vec())
        } else {
            Some(vec![0.0; m])
        };
        let Some(old_b) = old_b else { continue };
        let bv: Vec<f32> = (0..m).map(|i| old_b[i] * s[i] + t[i]).collect();
        let name = g.nodes[conv].name.clone();
        let wid = g.add_constant(format!("{name}.W_bn"), Tensor::f32(w.shape.clone(), wv));
        let bid = g.add_constant(format!("{name}.B_bn"), Tensor::f32(vec![m], bv));
        let out = g.nodes[bn].outputs[0];
        uses.remove_node(g, bn);
        let inputs = vec![g.nodes[conv].inputs[0], wid, bid];
        uses.set_inputs(g, conv, inputs);
        if let Op::Conv(a) = &mut g.nodes[conv].op {
            a.has_bias = true;
        }
        uses.set_outputs(g, conv, vec![out]);
        removed.push(bn);
    }
    g.remove_nodes(&removed);
    removed.len()
}
