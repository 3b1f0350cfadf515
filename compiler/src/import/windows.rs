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
//! `[N, M, D', H', W']`. 3-D MaxPool and AveragePool alike: the 2-D pool of each kernel depth's slices, combined
//! by Max, or added and scaled by `1/KD` (depth padding is −∞ for Max, zeros for an AveragePool that counts
//! padding; one that excludes it takes no depth padding).

use super::attrs::Attrs;
use super::importer::Importer;
use super::nodes::{Lowered, Node, Parse};
use crate::error::{Error, Result};
use crate::ir::{BinOp, Op, PadMode, Tensor, TensorId};

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
    let y = plane_op(im, n, (&proto, &ins), parse, "y2d")?;
    let ys = im.g.tensors[y].shape.clone();
    Ok(Lowered::Node(
        Op::Reshape(vec![ys[0], ys[1], ys[3]]),
        vec![y],
    ))
}

/// `[N·D', M, H', W']` viewed and transposed back to `[N, M, D', H', W']`.
pub(super) fn volume(
    im: &mut Importer<'_>,
    n: &Node<'_>,
    y: TensorId,
    batch: usize,
    dout: usize,
) -> Result<Lowered> {
    let ys = im.g.tensors[y].shape.clone();
    let v = im.sub_node(
        n,
        "volume",
        Op::Reshape(vec![batch, dout, ys[1], ys[2], ys[3]]),
        vec![y],
    )?;
    Ok(Lowered::Node(Op::Transpose(vec![0, 2, 1, 3, 4]), vec![v]))
}

/// The depth geometry of a 3-D windowed node over input `xs`: its strides, dilations and pads (all three
/// axes, validated; SAME resolved into explicit pads), the output depth, and the padding past the end that
/// `ceil_mode` adds for the last window.
struct Depth {
    strides: Vec<i64>,
    dil: Vec<i64>,
    pads: Vec<i64>,
    out: usize,
    over: i64,
}

impl Depth {
    /// `kernel`: the three kernel extents; `ceil`: the node's `ceil_mode`.
    fn of(n: &Node<'_>, xs: &[usize], kernel: &[i64], ceil: bool) -> Result<Depth> {
        let three = |key: &str| -> Result<Vec<i64>> {
            match n.a.ints(key)? {
                None => Ok(vec![1; 3]),
                Some(v) if v.len() == 3 && v.iter().all(|&e| e >= 1) => Ok(v.to_vec()),
                Some(v) => Err(n.a.err(key, format!("expected 3 values >= 1, got {v:?}"))),
            }
        };
        let (strides, dil) = (three("strides")?, three("dilations")?);
        let span = |i: usize| (kernel[i] - 1) * dil[i] + 1;
        let pads = match n.a.string("auto_pad", "NOTSET")?.as_str() {
            "NOTSET" => match n.a.ints("pads")? {
                None => vec![0; 6],
                Some(v) if v.len() == 6 && v.iter().all(|&p| p >= 0) => v.to_vec(),
                Some(v) => {
                    return Err(n
                        .a
                        .err("pads", format!("expected 6 values >= 0, got {v:?}")));
                }
            },
            "VALID" => vec![0; 6],
            same @ ("SAME_UPPER" | "SAME_LOWER") => {
                // Output ceil(in / stride); the extra padding after (UPPER) or before (LOWER) the input.
                let mut p = vec![0; 6];
                for i in 0..3 {
                    let input = xs[2 + i] as i64;
                    let out = (input + strides[i] - 1) / strides[i];
                    let total = ((out - 1) * strides[i] + span(i) - input).max(0);
                    let small = total / 2;
                    let begin = if same == "SAME_UPPER" {
                        small
                    } else {
                        total - small
                    };
                    p[i] = begin;
                    p[i + 3] = total - begin;
                }
                p
            }
            p => return Err(n.a.err("auto_pad", format!("unknown value '{p}'"))),
        };
        let (kd, sd) = (kernel[0], strides[0]);
        let dp = xs[2] as i64 + pads[0] + pads[3];
        if kd < 1 || dp < span(0) {
            let m = format!("kernel depth {kd} does not fit depth {dp}");
            return Err(Error::node(n.name, n.op, m));
        }
        let mut out = (dp - span(0)) / sd + 1;
        if ceil {
            // One more window when the last one would start inside the input or its begin padding.
            out = (dp - span(0) + sd - 1) / sd + 1;
            if (out - 1) * sd >= xs[2] as i64 + pads[0] {
                out -= 1;
            }
        }
        let over = ((out - 1) * sd + span(0) - dp).max(0);
        Ok(Depth {
            strides,
            dil,
            pads,
            out: out as usize,
            over,
        })
    }

    /// For each output depth, how many kernel depths an average divides by: those inside the padded input
    /// (`include_pad`) or inside the input itself; never the `ceil_mode` overhang.
    fn counts(&self, depth: usize, kd: usize, include_pad: bool) -> Vec<usize> {
        let (lo, hi) = match include_pad {
            true => (0, depth as i64 + self.pads[0] + self.pads[3]),
            false => (self.pads[0], self.pads[0] + depth as i64),
        };
        (0..self.out as i64)
            .map(|od| {
                (0..kd as i64)
                    .map(|d| od * self.strides[0] + d * self.dil[0])
                    .filter(|p| (lo..hi).contains(p))
                    .count()
            })
            .collect()
    }

    /// `x` with its depth padded by `fill`, the `ceil_mode` overhang included (itself without depth padding).
    fn pad(&self, im: &mut Importer<'_>, n: &Node<'_>, x: TensorId, fill: f64) -> Result<TensorId> {
        if self.pads[0] == 0 && self.pads[3] + self.over == 0 {
            return Ok(x);
        }
        let op = Op::Pad {
            begins: vec![0, 0, self.pads[0], 0, 0],
            ends: vec![0, 0, self.pads[3] + self.over, 0, 0],
            mode: PadMode::Constant(fill),
        };
        im.sub_node(n, "pad_d", op, vec![x])
    }

    /// The depths of `x` (of shape `xs`) that tap kernel depth `d` (a strided `Slice`) as a batch of 2-D
    /// images `[N·D', C, H, W]`.
    fn images(
        &self,
        im: &mut Importer<'_>,
        n: &Node<'_>,
        (x, xs): (TensorId, &[usize]),
        d: usize,
    ) -> Result<TensorId> {
        let [b, c, h, w] = [xs[0], xs[1], xs[3], xs[4]];
        let slice = Op::Slice {
            starts: vec![0, 0, d as i64 * self.dil[0], 0, 0],
            steps: vec![1, 1, self.strides[0], 1, 1],
            out: vec![b, c, self.out, h, w],
        };
        let xd = im.sub_node(n, &format!("depth{d}"), slice, vec![x])?;
        let to_front = Op::Transpose(vec![0, 2, 1, 3, 4]);
        let xt = im.sub_node(n, &format!("depth_t{d}"), to_front, vec![xd])?;
        let batch = Op::Reshape(vec![b * self.out, c, h, w]);
        im.sub_node(n, &format!("images{d}"), batch, vec![xt])
    }

    /// `n` as the 2-D node over the planes: kernel `plane`, the H and W strides and pads, and the dilations
    /// when `dilations`.
    fn plane_node(
        &self,
        n: &Node<'_>,
        plane: &[i64],
        dilations: bool,
    ) -> tract_onnx::pb::NodeProto {
        let spatial = ["kernel_shape", "strides", "dilations", "pads", "auto_pad"];
        let mut proto = n.node.clone();
        proto
            .attribute
            .retain(|a| !spatial.contains(&a.name.as_str()));
        let ints = |name: &str, v: Vec<i64>| tract_onnx::pb::AttributeProto {
            name: name.into(),
            r#type: tract_onnx::pb::attribute_proto::AttributeType::Ints as i32,
            ints: v,
            ..Default::default()
        };
        let p = &self.pads;
        proto.attribute.extend([
            ints("kernel_shape", plane.to_vec()),
            ints("strides", self.strides[1..].to_vec()),
            ints("pads", vec![p[1], p[2], p[4], p[5]]),
        ]);
        if dilations {
            proto
                .attribute
                .push(ints("dilations", self.dil[1..].to_vec()));
        }
        proto
    }
}

/// The 2-D weight `[M, C/g, KH, KW]` of kernel depth `d` of a 3-D weight `w` of shape `ws` (a strided `Slice` and a
/// `Reshape`, both folded at compile time for a constant weight).
pub(super) fn weight_plane(
    im: &mut Importer<'_>,
    n: &Node<'_>,
    (w, ws): (TensorId, &[usize]),
    d: usize,
) -> Result<TensorId> {
    let wslice = Op::Slice {
        starts: vec![0, 0, d as i64, 0, 0],
        steps: vec![1; 5],
        out: vec![ws[0], ws[1], 1, ws[3], ws[4]],
    };
    let w5 = im.sub_node(n, &format!("w_d{d}"), wslice, vec![w])?;
    let plane = Op::Reshape(vec![ws[0], ws[1], ws[3], ws[4]]);
    im.sub_node(n, &format!("w2d{d}"), plane, vec![w5])
}

/// `y` combined into the running result `acc` of the kernel depths by `op` (appended as `tag`), or `y` itself
/// for the first.
pub(super) fn fold_into(
    im: &mut Importer<'_>,
    n: &Node<'_>,
    acc: Option<TensorId>,
    y: TensorId,
    (op, tag): (BinOp, &str),
) -> Result<TensorId> {
    match acc {
        None => Ok(y),
        Some(s) => im.sub_node(n, tag, Op::Binary(op), vec![s, y]),
    }
}

/// Maps the 2-D node `proto` over inputs `ins` with `parse` and appends it as `tag`.
pub(super) fn plane_op(
    im: &mut Importer<'_>,
    n: &Node<'_>,
    (proto, ins): (&tract_onnx::pb::NodeProto, &[Option<TensorId>]),
    parse: Parse,
    tag: &str,
) -> Result<TensorId> {
    let a = Attrs::new(proto, n.name, im.warnings.clone());
    let n2 = Node {
        node: proto,
        name: n.name,
        op: n.op,
        ins,
        a: &a,
    };
    let Lowered::Node(op, inputs) = parse(im, &n2)? else {
        return Err(Error::internal(
            "import",
            format!("the 2-D form of {} did not map to one node", n.op),
        ));
    };
    im.sub_node(n, tag, op, inputs)
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
    if ws.len() != 5 {
        let m = format!("weight of rank {} for a 3-D input", ws.len());
        return Err(Error::node(n.name, n.op, m));
    }
    let kernel: Vec<i64> = ws[2..].iter().map(|&k| k as i64).collect();
    let depth = Depth::of(n, &xs, &kernel, false)?;
    let xp = depth.pad(im, n, x, 0.0)?;
    let proto = depth.plane_node(n, &[ws[3] as i64, ws[4] as i64], true);
    let mut acc: Option<TensorId> = None;
    for d in 0..ws[2] {
        let x2 = depth.images(im, n, (xp, &xs), d)?;
        let w2 = weight_plane(im, n, (w, &ws), d)?;
        // The bias with the first kernel depth.
        let ins = [Some(x2), Some(w2), n.input(2).filter(|_| d == 0)];
        let y = plane_op(im, n, (&proto, &ins), parse, &format!("conv{d}"))?;
        acc = Some(fold_into(im, n, acc, y, (BinOp::Add, &format!("sum{d}")))?);
    }
    let y = acc.ok_or_else(|| Error::internal("import", "a 3-D Conv without kernel depth"))?;
    volume(im, n, y, xs[0], depth.out)
}

/// A 3-D MaxPool or AveragePool (`x` of rank 5) through `parse` (the 2-D pool parser), as the module says; other
/// ranks go to [`lift`].
pub(super) fn pool(im: &mut Importer<'_>, n: &Node<'_>, parse: Parse) -> Result<Lowered> {
    let x = n.req(0)?;
    let xs = im.g.tensors[x].shape.clone();
    if xs.len() != 5 {
        return lift(im, n, parse, false);
    }
    let k = match n.a.ints("kernel_shape")? {
        Some(v) if v.len() == 3 && v.iter().all(|&e| e >= 1) => v.to_vec(),
        v => {
            return Err(n
                .a
                .err("kernel_shape", format!("expected 3 values >= 1, got {v:?}")))
        }
    };
    let depth = Depth::of(n, &xs, &k, n.a.int("ceil_mode", 0)? != 0)?;
    let max = n.op == "MaxPool";
    let xp = depth.pad(im, n, x, if max { f64::NEG_INFINITY } else { 0.0 })?;
    let proto = depth.plane_node(n, &k[1..], true);
    let combine = if max { BinOp::Max } else { BinOp::Add };
    let mut acc: Option<TensorId> = None;
    for d in 0..k[0] as usize {
        let x2 = depth.images(im, n, (xp, &xs), d)?;
        let y = plane_op(im, n, (&proto, &[Some(x2)]), parse, &format!("pool{d}"))?;
        acc = Some(fold_into(im, n, acc, y, (combine, &format!("combine{d}")))?);
    }
    let y = acc.ok_or_else(|| Error::internal("import", "a 3-D pool without kernel depth"))?;
    if max {
        return volume(im, n, y, xs[0], depth.out);
    }
    // The sum of the kernel depths' plane averages over the depths counted (the 2-D pool divides by the
    // plane's count: the windows are products, so the two divisors multiply).
    let include_pad = n.a.int("count_include_pad", 0)? != 0;
    let counts = depth.counts(xs[2], k[0] as usize, include_pad);
    let out0 = n.node.output.first().map_or("", String::as_str);
    let inv = |c: &usize| if *c == 0 { 0.0 } else { 1.0 / *c as f32 };
    let v = volume(im, n, y, xs[0], depth.out)?;
    let Lowered::Node(op, ins) = v else {
        return Ok(v);
    };
    if counts.iter().all(|&c| c == 1) {
        return Ok(Lowered::Node(op, ins));
    }
    let y = im.sub_node(n, "volume_t", op, ins)?;
    let inv = match counts.iter().all(|&c| c == counts[0]) {
        true => Tensor::f32(vec![], vec![inv(&counts[0])]),
        false => Tensor::f32(vec![depth.out, 1, 1], counts.iter().map(inv).collect()),
    };
    let inv = im.g.add_constant(format!("{out0}.inv_depth"), inv);
    Ok(Lowered::Node(Op::Binary(BinOp::Mul), vec![y, inv]))
}
