//! The 1-D and 3-D forms of the windowed ops, mapped through their 2-D parsers.
//!
//! 1-D (Conv, ConvTranspose, MaxPool, AveragePool: a Whisper encoder's stem, wav2vec2's feature extractor,
//! temporal CNNs): the input `[N, C, L]` is viewed as `[N, C, 1, L]` (a weight `[M, C/g, K]` as `[M, C/g, 1,
//! K]`), each spatial attribute gains a leading unit axis (kernel, stride and dilation 1, no padding,
//! output_padding 0, output_shape 1), and the 2-D op's output `[N, M, 1, L']` is viewed as `[N, M, L']`. The views
//! are `Reshape`s, which cost nothing at run time.
//!
//! 3-D Conv (video and volumetric models): the depth padding is a zero `Pad`; then for each kernel depth `kd`
//! the input's depth slices that tap it (a strided `Slice`) become a batch of 2-D images `[N·D', C, H, W]`
//! (a `Transpose` and a `Reshape`), convolved by a 2-D Conv with the weight's `kd` plane (folded at compile
//! time); the `KD` products are added (the bias with the first) and the sum is viewed and transposed back to
//! `[N, M, D', H', W']`.

use super::attrs::Attrs;
use super::importer::Importer;
use super::nodes::{Lowered, Node, Parse};
use crate::error::{Error, Result};
use crate::ir::{numel, Op, PadMode, TensorId};

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

/// A 3-D Conv (`x` of rank 5) through `parse` (the 2-D Conv parser), as the module says; other ranks go to
/// [`lift`].
pub(super) fn conv(im: &mut Importer<'_>, n: &Node<'_>, parse: Parse) -> Result<Lowered> {
    let (x, w) = (n.req(0)?, n.req(1)?);
    let xs = im.g.tensors[x].shape.clone();
    let ws = im.g.tensors[w].shape.clone();
    if xs.len() != 5 {
        return lift(im, n, parse, true);
    }
    let err = |m: String| Error::unsupported(n.name, n.op, m);
    if ws.len() != 5 {
        return Err(Error::node(
            n.name,
            n.op,
            format!("weight of rank {} for a 3-D input", ws.len()),
        ));
    }
    match n.a.string("auto_pad", "NOTSET")?.as_str() {
        "NOTSET" | "VALID" => {}
        p => return Err(err(format!("auto_pad {p} on a 3-D Conv"))),
    }
    let three = |key: &str, default: i64| -> Result<Vec<i64>> {
        match n.a.ints(key)? {
            None => Ok(vec![default; 3]),
            Some(v) if v.len() == 3 && v.iter().all(|&e| e >= 1) => Ok(v.to_vec()),
            Some(v) => Err(n.a.err(key, format!("expected 3 values >= 1, got {v:?}"))),
        }
    };
    let (strides, dil) = (three("strides", 1)?, three("dilations", 1)?);
    let pads = match n.a.ints("pads")? {
        None => vec![0; 6],
        Some(v) if v.len() == 6 && v.iter().all(|&p| p >= 0) => v.to_vec(),
        Some(v) => {
            return Err(n
                .a
                .err("pads", format!("expected 6 values >= 0, got {v:?}")))
        }
    };
    let kd = ws[2];
    let span = (kd as i64 - 1) * dil[0] + 1;
    let dp = xs[2] as i64 + pads[0] + pads[3];
    if dp < span || kd == 0 {
        return Err(Error::node(
            n.name,
            n.op,
            format!("kernel depth {kd} does not fit depth {dp}"),
        ));
    }
    let dout = ((dp - span) / strides[0] + 1) as usize;
    // Depth padding.
    let mut xp = x;
    if pads[0] > 0 || pads[3] > 0 {
        let mode = PadMode::Constant(0.0);
        let (begins, ends) = (vec![0, 0, pads[0], 0, 0], vec![0, 0, pads[3], 0, 0]);
        xp = im.sub_node(n, "pad_d", Op::Pad { begins, ends, mode }, vec![x])?;
    }
    // The 2-D node: H and W attributes.
    let mut proto = n.node.clone();
    proto.attribute.retain(|a| {
        !matches!(
            a.name.as_str(),
            "kernel_shape" | "strides" | "dilations" | "pads"
        )
    });
    let ints = |name: &str, v: Vec<i64>| tract_onnx::pb::AttributeProto {
        name: name.into(),
        r#type: tract_onnx::pb::attribute_proto::AttributeType::Ints as i32,
        ints: v,
        ..Default::default()
    };
    proto.attribute.extend([
        ints("kernel_shape", vec![ws[3] as i64, ws[4] as i64]),
        ints("strides", strides[1..].to_vec()),
        ints("dilations", dil[1..].to_vec()),
        ints("pads", vec![pads[1], pads[2], pads[4], pads[5]]),
    ]);
    let a2 = Attrs::new(&proto, n.name, im.warnings.clone());
    let (c, h, wd) = (xs[1], xs[3], xs[4]);
    let mut acc: Option<TensorId> = None;
    for d in 0..kd {
        let tag = |what: &str| format!("{what}{d}");
        let start = d as i64 * dil[0];
        let slice = Op::Slice {
            starts: vec![0, 0, start, 0, 0],
            steps: vec![1, 1, strides[0], 1, 1],
            out: vec![xs[0], c, dout, h, wd],
        };
        let xd = im.sub_node(n, &tag("depth"), slice, vec![xp])?;
        let xt = im.sub_node(
            n,
            &tag("depth_t"),
            Op::Transpose(vec![0, 2, 1, 3, 4]),
            vec![xd],
        )?;
        let x2 = im.sub_node(
            n,
            &tag("images"),
            Op::Reshape(vec![xs[0] * dout, c, h, wd]),
            vec![xt],
        )?;
        let wslice = Op::Slice {
            starts: vec![0, 0, d as i64, 0, 0],
            steps: vec![1; 5],
            out: vec![ws[0], ws[1], 1, ws[3], ws[4]],
        };
        let w5 = im.sub_node(n, &tag("w_d"), wslice, vec![w])?;
        let w2 = im.sub_node(
            n,
            &tag("w2d"),
            Op::Reshape(vec![ws[0], ws[1], ws[3], ws[4]]),
            vec![w5],
        )?;
        let mut ins = vec![Some(x2), Some(w2)];
        if d == 0 {
            ins.push(n.input(2));
        }
        let n2 = Node {
            node: &proto,
            name: n.name,
            op: n.op,
            ins: &ins,
            a: &a2,
        };
        let Lowered::Node(op, inputs) = parse(im, &n2)? else {
            return Err(Error::internal(
                "import",
                "a 2-D Conv did not map to one node",
            ));
        };
        let y = im.sub_node(n, &tag("conv"), op, inputs)?;
        acc = Some(match acc {
            None => y,
            Some(s) => im.sub_node(
                n,
                &tag("sum"),
                Op::Binary(crate::ir::BinOp::Add),
                vec![s, y],
            )?,
        });
    }
    let y = acc.ok_or_else(|| Error::internal("import", "a 3-D Conv without kernel depth"))?;
    let ys = im.g.tensors[y].shape.clone();
    let m = ys[1];
    let (ho, wo) = (ys[2], ys[3]);
    debug_assert_eq!(numel(&ys), xs[0] * dout * m * ho * wo);
    let y5 = im.sub_node(
        n,
        "volume",
        Op::Reshape(vec![xs[0], dout, m, ho, wo]),
        vec![y],
    )?;
    Ok(Lowered::Node(Op::Transpose(vec![0, 2, 1, 3, 4]), vec![y5]))
}
