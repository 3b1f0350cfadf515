//! The 1-D forms of the windowed ops (Conv, ConvTranspose, MaxPool, AveragePool: a Whisper encoder's stem,
//! wav2vec2's feature extractor, temporal CNNs) mapped through their 2-D parsers: the input `[N, C, L]` is
//! viewed as `[N, C, 1, L]` (a weight `[M, C/g, K]` as `[M, C/g, 1, K]`), each spatial attribute gains a leading
//! unit axis (kernel, stride and dilation 1, no padding, output_padding 0, output_shape 1), and the 2-D op's
//! output `[N, M, 1, L']` is viewed as `[N, M, L']`. The views are `Reshape`s, which cost nothing at run time.

use super::attrs::Attrs;
use super::importer::Importer;
use super::nodes::{Lowered, Node, Parse};
use crate::error::{Error, Result};
use crate::ir::{Op, TensorId};

/// Maps `n` with the 2-D parser `parse`, through the 2-D form when the input has one spatial axis; `weight`:
/// input 1 is a weight with one spatial axis too.
pub(super) fn lift(
    im: &mut Importer<'_>,
    n: &Node<'_>,
    parse: Parse,
    weight: bool,
) -> Result<Lowered> {
    let x = n.req(0)?;
    let xs = im.g.tensors[x].shape.clone();
    if xs.len() != 3 {
        return parse(im, n);
    }
    let mut proto = n.node.clone();
    for at in &mut proto.attribute {
        match (at.name.as_str(), at.ints.len()) {
            ("kernel_shape" | "strides" | "dilations" | "output_shape", 1) => at.ints.insert(0, 1),
            ("output_padding", 1) => at.ints.insert(0, 0),
            ("pads", 2) => at.ints = vec![0, at.ints[0], 0, at.ints[1]],
            _ => {}
        }
    }
    let view = |s: &[usize]| vec![s[0], s[1], 1, s[2]];
    let mut ins: Vec<Option<TensorId>> = n.ins.to_vec();
    ins[0] = Some(im.sub_node(n, "2d", Op::Reshape(view(&xs)), vec![x])?);
    if let Some(w) = n.input(1).filter(|_| weight) {
        let ws = im.g.tensors[w].shape.clone();
        if ws.len() == 3 {
            ins[1] = Some(im.sub_node(n, "w2d", Op::Reshape(view(&ws)), vec![w])?);
        }
    }
    let a = Attrs::new(&proto, n.name, im.warnings.clone());
    let n2 = Node {
        node: &proto,
        name: n.name,
        op: n.op,
        ins: &ins,
        a: &a,
    };
    let Lowered::Node(op, inputs) = parse(im, &n2)? else {
        return Err(Error::internal(
            "import",
            format!("the 2-D form of {} did not map to one node", n.op),
        ));
    };
    let y = im.sub_node(n, "y2d", op, inputs)?;
    let ys = im.g.tensors[y].shape.clone();
    Ok(Lowered::Node(
        Op::Reshape(vec![ys[0], ys[1], ys[3]]),
        vec![y],
    ))
}
