//! ConvTranspose's geometry for every rank (`Deconv`: pads, output padding, output_shape and SAME resolved per
//! axis), and the 3-D ConvTranspose (volumetric decoders, 3-D U-Nets, video generators) over the 2-D one; other
//! ranks go to the 1-D lift or the 2-D parser (`windows.rs`, `nn_ops.rs`).
//!
//! Output depth `o` of a transposed convolution gathers input depth `i` through kernel depth `k` where
//! `o = i·s + k·d − pad_begin`. So for each kernel depth the input's depth slices, as a batch of 2-D images
//! `[N·D, C, H, W]`, go through the 2-D ConvTranspose with the weight's `k` plane (folded at compile time; no
//! bias), giving one `[N·D, M, H', W']` product per input depth; these are spread `s` apart along the depth (a
//! zero `Pad` of a unit axis and a `Reshape`), shifted to `k·d − pad_begin` and cut or zero-filled to the output
//! depth (one `Pad`, negative where it crops), and the kernel depths' placements are added. The sum is viewed
//! and transposed back to `[N, M, D', H', W']` and the bias added last, so that it reaches every output depth.
//! Pads, output_padding, output_shape and SAME are resolved per axis by [`Deconv`], which the 2-D parser
//! (`nn_ops.rs`) uses too.

use super::attrs::MAX_WINDOW;
use super::importer::Importer;
use super::nodes::{Lowered, Node, Parse};
use super::windows::{fold_into, lift, plane_op, volume, weight_plane};
use crate::error::{Error, Result};
use crate::ir::ops::deconv::deconv_pads;
use crate::ir::{BinOp, Op, PadMode, TensorId};

/// A ConvTranspose's geometry over its spatial axes, output_shape and SAME resolved into explicit pads (begins,
/// then ends) and output padding.
pub(super) struct Deconv {
    pub kernel: Vec<usize>,
    pub strides: Vec<usize>,
    pub dil: Vec<usize>,
    pub pads: Vec<usize>,
    pub out_pad: Vec<usize>,
}

impl Deconv {
    /// The geometry of ConvTranspose `n` over input shape `xs` and weight shape `ws` (ranks checked equal by
    /// the caller), validated.
    pub(super) fn of(n: &Node<'_>, xs: &[usize], ws: &[usize]) -> Result<Deconv> {
        let Node { name, op, a, .. } = *n;
        let sp = xs.len() - 2;
        let kernel = if a.has("kernel_shape") {
            a.positive_usizes("kernel_shape", sp, 0)?
        } else {
            ws[2..].to_vec()
        };
        let strides = a.positive_usizes("strides", sp, 1)?;
        let dil = a.positive_usizes("dilations", sp, 1)?;
        let mut out_pad = a.usizes("output_padding", sp, 0)?;
        let auto = a.string("auto_pad", "NOTSET")?;
        let out_shape = a
            .ints("output_shape")?
            .map(|v| v[v.len().saturating_sub(sp)..].to_vec());
        let mut pads = vec![0usize; 2 * sp];
        // An explicit output_shape, or SAME's input·stride, fixes the pads (and any extra end padding).
        let target: Option<Vec<usize>> = match (auto.as_str(), out_shape) {
            (_, Some(os)) if os.len() == sp => {
                Some(os.iter().map(|&v| v.max(1) as usize).collect())
            }
            ("SAME_UPPER" | "SAME_LOWER", _) => {
                Some((0..sp).map(|i| xs[2 + i] * strides[i]).collect())
            }
            ("NOTSET", _) => {
                pads = a.usizes("pads", 2 * sp, 0)?;
                None
            }
            ("VALID", _) => None,
            (other, _) => {
                return Err(Error::node(
                    name,
                    op,
                    format!("attribute 'auto_pad': unknown value '{other}'"),
                ))
            }
        };
        if let Some(t) = target {
            for i in 0..sp {
                let (p, extra) = deconv_pads(
                    xs[2 + i],
                    kernel[i],
                    strides[i],
                    dil[i],
                    out_pad[i],
                    t[i],
                    auto == "SAME_UPPER",
                );
                pads[i] = p[0];
                pads[i + sp] = p[1];
                out_pad[i] = extra;
            }
        }
        Ok(Deconv {
            kernel,
            strides,
            dil,
            pads,
            out_pad,
        })
    }
}

/// A ConvTranspose of a 5-D input as the module says; other ranks through [`lift`].
pub(super) fn conv_transpose(im: &mut Importer<'_>, n: &Node<'_>, parse: Parse) -> Result<Lowered> {
    let (x, w) = (n.req(0)?, n.req(1)?);
    let xs = im.g.tensors[x].shape.clone();
    if xs.len() != 5 {
        return lift(im, n, parse, true);
    }
    let ws = im.g.tensors[w].shape.clone();
    if ws.len() != 5 {
        let m = format!("weight of rank {} for a 3-D input", ws.len());
        return Err(Error::node(n.name, n.op, m));
    }
    let g = Deconv::of(n, &xs, &ws)?;
    let group = n.a.int_in("group", 1, 1..=MAX_WINDOW as i64)? as usize;
    let [b, c, d, h, wd] = [xs[0], xs[1], xs[2], xs[3], xs[4]];
    let m = ws[1] * group;
    let (kd, sd, dd) = (g.kernel[0], g.strides[0], g.dil[0]);
    if kd != ws[2] {
        let m = format!("kernel_shape depth {kd} but the weight's is {}", ws[2]);
        return Err(n.a.err("kernel_shape", m));
    }
    let full = (d.max(1) - 1) * sd + (kd - 1) * dd + 1 + g.out_pad[0];
    let (pb, pe) = (g.pads[0], g.pads[3]);
    if pb + pe >= full || d == 0 {
        let m = format!("pads {pb} and {pe} leave no output depth of {full}");
        return Err(n.a.err("pads", m));
    }
    let dout = full - pb - pe;
    let xt = im.sub_node(n, "depth_t", Op::Transpose(vec![0, 2, 1, 3, 4]), vec![x])?;
    let x2 = im.sub_node(n, "images", Op::Reshape(vec![b * d, c, h, wd]), vec![xt])?;
    let proto = plane_node(n, &g);
    let mut acc: Option<TensorId> = None;
    let mut plane_shape = Vec::new();
    for k in 0..kd {
        let w2 = weight_plane(im, n, (w, &ws), k)?;
        let y = plane_op(
            im,
            n,
            (&proto, &[Some(x2), Some(w2)]),
            parse,
            &format!("deconv{k}"),
        )?;
        plane_shape = im.g.tensors[y].shape.clone();
        let plane: usize = plane_shape[1..].iter().product();
        // The input depths' products `sd` apart: [b, d·sd, plane].
        let rows = im.sub_node(
            n,
            &format!("rows{k}"),
            Op::Reshape(vec![b, d, 1, plane]),
            vec![y],
        )?;
        let spread = if sd > 1 {
            let op = Op::Pad {
                begins: vec![0; 4],
                ends: vec![0, 0, sd as i64 - 1, 0],
                mode: PadMode::Constant(0.0),
            };
            im.sub_node(n, &format!("spread{k}"), op, vec![rows])?
        } else {
            rows
        };
        let len = d * sd;
        let flat = im.sub_node(
            n,
            &format!("strided{k}"),
            Op::Reshape(vec![b, len, plane]),
            vec![spread],
        )?;
        // Shifted to output depth k·dd − pb and fitted to the output depth (negative pads crop).
        let begin = (k * dd) as i64 - pb as i64;
        let end = dout as i64 - begin - len as i64;
        let (lo, hi) = ((-begin).max(0), (len as i64).min(dout as i64 - begin));
        if lo >= hi {
            continue;
        }
        let place = Op::Pad {
            begins: vec![0, begin, 0],
            ends: vec![0, end, 0],
            mode: PadMode::Constant(0.0),
        };
        let placed = im.sub_node(n, &format!("place{k}"), place, vec![flat])?;
        acc = Some(fold_into(
            im,
            n,
            acc,
            placed,
            (BinOp::Add, &format!("sum{k}")),
        )?);
    }
    let y = acc.ok_or_else(|| Error::node(n.name, n.op, "no kernel depth reaches the output"))?;
    let mut images = vec![b * dout];
    images.extend_from_slice(&plane_shape[1..]);
    let y = im.sub_node(n, "out_images", Op::Reshape(images), vec![y])?;
    let out = volume(im, n, y, b, dout)?;
    let Some(bias) = n.input(2) else {
        return Ok(out);
    };
    let Lowered::Node(op, ins) = out else {
        return Ok(out);
    };
    let t = im.sub_node(n, "volume_t", op, ins)?;
    let bias4 = im.sub_node(n, "bias", Op::Reshape(vec![m, 1, 1, 1]), vec![bias])?;
    Ok(Lowered::Node(Op::Binary(BinOp::Add), vec![t, bias4]))
}

/// `n` as the 2-D ConvTranspose over the planes: kernel, strides, dilations, pads and output padding of the H
/// and W axes, explicit (output_shape and auto_pad dropped: `g` has resolved them).
fn plane_node(n: &Node<'_>, g: &Deconv) -> tract_onnx::pb::NodeProto {
    let spatial = [
        "kernel_shape",
        "strides",
        "dilations",
        "pads",
        "auto_pad",
        "output_shape",
        "output_padding",
    ];
    let mut proto = n.node.clone();
    proto
        .attribute
        .retain(|a| !spatial.contains(&a.name.as_str()));
    let ints = |name: &str, v: &[usize]| tract_onnx::pb::AttributeProto {
        name: name.into(),
        r#type: tract_onnx::pb::attribute_proto::AttributeType::Ints as i32,
        ints: v.iter().map(|&x| x as i64).collect(),
        ..Default::default()
    };
    let p = &g.pads;
    proto.attribute.extend([
        ints("kernel_shape", &g.kernel[1..]),
        ints("strides", &g.strides[1..]),
        ints("dilations", &g.dil[1..]),
        ints("pads", &[p[1], p[2], p[4], p[5]]),
        ints("output_padding", &g.out_pad[1..]),
    ]);
    proto
}
