//! `fold_pad`: a zero-constant Pad of a Conv's input that pads only the spatial axes (the form TensorFlow's
//! `SAME` padding takes in exported models, often asymmetric) becomes the Conv's own padding, when the Conv is
//! the padded tensor's only reader. Zero padding is exactly what Conv pads mean, so the result is unchanged, and
//! the copy the Pad made disappears (the depthwise and im2col kernels read padding for free).

use crate::ir::{Graph, Op, PadMode, Uses};

/// Folds eligible Pads into their Conv; returns how many.
pub fn fold_pad(g: &mut Graph) -> usize {
    let mut folded = 0;
    let mut uses = Uses::new(g);
    for &conv in &g.order.clone() {
        let Op::Conv(attrs) = &g.nodes[conv].op else {
            continue;
        };
        let x = g.nodes[conv].inputs[0];
        let Some(pad) = uses.producer(x) else {
            continue;
        };
        let Op::Pad { begins, ends, mode } = &g.nodes[pad].op else {
            continue;
        };
        let zero = matches!(mode, PadMode::Constant(v) if *v == 0.0 && v.is_sign_positive());
        let spatial_only = begins.len() == 4
            && ends.len() == 4
            && begins[..2] == [0, 0]
            && ends[..2] == [0, 0]
            && begins.iter().chain(ends).all(|&p| p >= 0);
        if !zero || !spatial_only || uses.single_use(x) != Some(conv) {
            continue;
        }
        let add = [begins[2], begins[3], ends[2], ends[3]].map(|p| p as usize);
        let mut a = attrs.clone();
        for (p, q) in a.pads.iter_mut().zip(add) {
            *p += q;
        }
        let src = g.nodes[pad].inputs[0];
        uses.set_input(g, conv, 0, src);
        g.nodes[conv].op = Op::Conv(a);
        folded += 1;
    }
    folded
}
