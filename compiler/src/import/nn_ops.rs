//! ONNX → IR mapping of reductions, normalisations and ConvTranspose: Reduce* (axes as attribute before opset
//! 18 — 13 for ReduceSum — and as a constant input after), ArgMax / ArgMin, GlobalMaxPool, LayerNormalization,
//! RMSNormalization, InstanceNormalization, LRN, and ConvTranspose (pads, auto_pad, output_shape,
//! output_padding).

use super::attrs::MAX_WINDOW;
use super::importer::Importer;
use super::nodes::{Lowered, Node, Parser};
use crate::error::{Error, Result};
use crate::ir::{ConvTransposeAttrs, LrnAttrs, Op, ReduceKind};

/// The ONNX ops this file maps, for `bundlec ops`.
pub const SUPPORTED: &[(&str, &str)] = &[
    (
        "ReduceSum, ReduceMean, ReduceMax, ReduceMin, ReduceProd, ReduceL1, ReduceL2, ReduceSumSquare, \
         ReduceLogSum, ReduceLogSumExp",
        "f32 (i64 Sum/Prod/Max/Min when folded); constant axes; keepdims, noop_with_empty_axes",
    ),
    ("ArgMax, ArgMin", "f32 input, i64 output; keepdims, select_last_index"),
    (
        "TopK",
        "f32, i32, i64; constant k; largest or smallest; sorted (ties to the lower index)",
    ),
    ("GlobalMaxPool", "rank >= 3"),
    (
        "LayerNormalization, RMSNormalization",
        "any axis; scale/bias broadcast to the normalised shape; Mean/InvStdDev outputs unused",
    ),
    ("InstanceNormalization", "rank >= 3"),
    ("LRN", "across channels, rank >= 3"),
    (
        "ConvTranspose",
        "1-D, 2-D and 3-D, f32; pads, auto_pad, strides, dilations, group, output_padding, output_shape, bias",
    ),
];

fn reduce_kind(op: &str) -> Option<ReduceKind> {
    Some(match op {
        "ReduceSum" => ReduceKind::Sum,
        "ReduceMean" => ReduceKind::Mean,
        "ReduceMax" => ReduceKind::Max,
        "ReduceMin" => ReduceKind::Min,
        "ReduceProd" => ReduceKind::Prod,
        "ReduceL1" => ReduceKind::L1,
        "ReduceL2" => ReduceKind::L2,
        "ReduceSumSquare" => ReduceKind::SumSquare,
        "ReduceLogSum" => ReduceKind::LogSum,
        "ReduceLogSumExp" => ReduceKind::LogSumExp,
        _ => return None,
    })
}

impl Importer<'_> {}

/// The parsers of this file's op types.
pub(super) const PARSERS: &[Parser] = &[
    (
        &[
            "ReduceSum",
            "ReduceMean",
            "ReduceMax",
            "ReduceMin",
            "ReduceProd",
            "ReduceL1",
            "ReduceL2",
            "ReduceSumSquare",
            "ReduceLogSum",
            "ReduceLogSumExp",
        ],
        parse_reduce,
    ),
    (&["ArgMax", "ArgMin"], parse_arg_reduce),
    (&["GlobalMaxPool"], parse_global_max_pool),
    (&["TopK"], parse_topk),
    (
        &["LayerNormalization", "RMSNormalization"],
        parse_layer_normalization,
    ),
    (&["InstanceNormalization"], parse_instance_normalization),
    (&["LRN"], parse_lrn),
    (&["ConvTranspose"], |im, n| {
        super::deconv3d::conv_transpose(im, n, parse_conv_transpose)
    }),
];

/// The reductions (`reduce_kind`).
fn parse_reduce(im: &mut Importer<'_>, n: &Node<'_>) -> Result<Lowered> {
    let Node { name, op, a, .. } = *n;
    let kind = reduce_kind(op).ok_or_else(|| Error::node(name, op, "not a reduction"))?;
    let x = n.req(0)?;
    let r = im.g.tensors[x].shape.len();
    let axes_input = if op == "ReduceSum" { 13 } else { 18 };
    let axes = if im.opset < axes_input {
        a.ints("axes")?.map(<[i64]>::to_vec)
    } else {
        im.const_input(n, 1, "axes")?
    };
    let axes = axes.unwrap_or_default();
    if axes.is_empty() && a.int("noop_with_empty_axes", 0)? != 0 {
        return Ok(Lowered::Alias(x));
    }
    let mut axes: Vec<usize> = if axes.is_empty() {
        (0..r).collect()
    } else {
        axes.iter()
            .map(|&v| {
                let u = if v < 0 { v + r as i64 } else { v };
                if (0..r as i64).contains(&u) {
                    Ok(u as usize)
                } else {
                    Err(Error::node(
                        name,
                        op,
                        format!("axis {v} out of range for rank {r}"),
                    ))
                }
            })
            .collect::<Result<_>>()?
    };
    axes.sort_unstable();
    axes.dedup();
    if im.g.tensors[x].shape.contains(&0) {
        return Err(Error::unsupported(
            name,
            op,
            "zero-sized tensors are not supported",
        ));
    }
    let keepdims = a.int("keepdims", 1)? != 0;
    Ok(Lowered::Node(
        Op::Reduce {
            kind,
            axes,
            keepdims,
        },
        vec![x],
    ))
}

/// `ArgMax`, `ArgMin`.
fn parse_arg_reduce(im: &mut Importer<'_>, n: &Node<'_>) -> Result<Lowered> {
    let Node { op, a, .. } = *n;
    let x = n.req(0)?;
    let axis = a.axis("axis", 0, im.g.tensors[x].shape.len())?;
    Ok(Lowered::Node(
        Op::ArgReduce {
            max: op == "ArgMax",
            axis,
            keepdims: a.int("keepdims", 1)? != 0,
            select_last: a.int("select_last_index", 0)? != 0,
        },
        vec![x],
    ))
}

/// `TopK`: one op per output, both from the same selection.
fn parse_topk(im: &mut Importer<'_>, n: &Node<'_>) -> Result<Lowered> {
    let Node { name, op, a, .. } = *n;
    let x = n.req(0)?;
    let xs = im.g.tensors[x].shape.clone();
    let axis = a.axis("axis", -1, xs.len())?;
    let k = if im.opset < 10 {
        a.int("k", -1)?
    } else {
        let v = im
            .const_input(n, 1, "k")?
            .ok_or_else(|| Error::node(name, op, "missing input 'K'"))?;
        match v.as_slice() {
            [k] => *k,
            _ => {
                return Err(Error::node(
                    name,
                    op,
                    format!("K must hold one value, holds {}", v.len()),
                ))
            }
        }
    };
    let k = usize::try_from(k)
        .ok()
        .filter(|&k| k <= xs[axis])
        .ok_or_else(|| Error::node(name, op, format!("k = {k} is not in 0..={}", xs[axis])))?;
    let largest = a.int("largest", 1)? != 0;
    let topk = |indices| Op::TopK {
        axis,
        k,
        largest,
        indices,
    };
    Ok(Lowered::Many(vec![
        (topk(false), vec![x]),
        (topk(true), vec![x]),
    ]))
}

/// `GlobalMaxPool`.
fn parse_global_max_pool(im: &mut Importer<'_>, n: &Node<'_>) -> Result<Lowered> {
    let Node { name, op, .. } = *n;
    let x = n.req(0)?;
    let r = im.g.tensors[x].shape.len();
    if r < 3 {
        return Err(Error::node(name, op, format!("input rank {r} < 3")));
    }
    Ok(Lowered::Node(
        Op::Reduce {
            kind: ReduceKind::Max,
            axes: (2..r).collect(),
            keepdims: true,
        },
        vec![x],
    ))
}

/// `LayerNormalization`, `RMSNormalization`.
fn parse_layer_normalization(im: &mut Importer<'_>, n: &Node<'_>) -> Result<Lowered> {
    let Node {
        node, name, op, a, ..
    } = *n;
    let unused_extra_outputs = |what: &str| -> Result<()> {
        if im.extra_outputs_used(node) {
            return Err(Error::unsupported(
                name,
                op,
                format!("the {what} output is used"),
            ));
        }
        Ok(())
    };
    unused_extra_outputs("Mean / InvStdDev")?;
    let x = n.req(0)?;
    let axis = a.axis("axis", -1, im.g.tensors[x].shape.len())?;
    let mut v = vec![x, n.req(1)?];
    if op == "LayerNormalization" {
        v.extend(n.input(2));
    }
    Ok(Lowered::Node(
        Op::LayerNorm {
            axis,
            epsilon: a.epsilon(1e-5)?,
            rms: op == "RMSNormalization",
        },
        v,
    ))
}

/// `InstanceNormalization`.
fn parse_instance_normalization(_: &mut Importer<'_>, n: &Node<'_>) -> Result<Lowered> {
    let Node { a, .. } = *n;
    Ok(Lowered::Node(
        Op::InstanceNorm {
            epsilon: a.epsilon(1e-5)?,
        },
        vec![n.req(0)?, n.req(1)?, n.req(2)?],
    ))
}

/// `LRN`.
fn parse_lrn(_: &mut Importer<'_>, n: &Node<'_>) -> Result<Lowered> {
    let Node { a, .. } = *n;
    let size = a.int_in("size", 0, 1..=MAX_WINDOW as i64)?;
    let bias = a.finite("bias", 1.0)?;
    if bias <= 0.0 {
        a.warn(
            "bias",
            format!(
                "{bias} is not positive: outputs are infinite or NaN where a window is all zeros"
            ),
        );
    }
    Ok(Lowered::Node(
        Op::Lrn(LrnAttrs {
            size: size as usize,
            alpha: a.finite("alpha", 1e-4)?,
            beta: a.finite("beta", 0.75)?,
            bias,
        }),
        vec![n.req(0)?],
    ))
}

/// `ConvTranspose` of a 4-D input (the 1-D and 3-D forms: `windows.rs`).
pub(super) fn parse_conv_transpose(im: &mut Importer<'_>, n: &Node<'_>) -> Result<Lowered> {
    let Node { name, op, a, .. } = *n;
    let (x, w) = (n.req(0)?, n.req(1)?);
    let (xs, ws) = (im.g.tensors[x].shape.clone(), im.g.tensors[w].shape.clone());
    if xs.len() != 4 || ws.len() != 4 {
        return Err(Error::unsupported(
            name,
            op,
            format!(
                "ConvTranspose of input rank {} and weight rank {} (1-D, 2-D and 3-D are supported)",
                xs.len(),
                ws.len()
            ),
        ));
    }
    let g = super::deconv3d::Deconv::of(n, &xs, &ws)?;
    let bias = n.input(2);
    let attrs = ConvTransposeAttrs {
        kernel: [g.kernel[0], g.kernel[1]],
        strides: [g.strides[0], g.strides[1]],
        pads: [g.pads[0], g.pads[1], g.pads[2], g.pads[3]],
        dilations: [g.dil[0], g.dil[1]],
        output_padding: [g.out_pad[0], g.out_pad[1]],
        group: a.int_in("group", 1, 1..=MAX_WINDOW as i64)? as usize,
        has_bias: bias.is_some(),
    };
    let mut v = vec![x, w];
    v.extend(bias);
    Ok(Lowered::Node(Op::ConvTranspose(attrs), v))
}
