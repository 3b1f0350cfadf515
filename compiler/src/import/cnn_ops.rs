//! ONNX → IR mapping of the CNN family (`ir/ops/cnn.rs`): Conv (2-D; pads, auto_pad, strides, dilations, groups,
//! bias), BatchNormalization (inference; folded into a preceding Conv by a pass), MaxPool / AveragePool and
//! GlobalAveragePool, and the Conv-like attributes and explicit pads that the integer convolutions
//! (`quant_ops.rs`) share.

use super::attrs::{Attrs, MAX_WINDOW};
use super::importer::Importer;
use super::nodes::{Lowered, Node, Parser};
use super::windows::{conv, pool};
use crate::error::{Error, Result};
use crate::ir::{ConvAttrs, Epilogue, Op, PoolAttrs, PoolKind, TensorId};

/// The ONNX ops this file maps, for `bundlec ops`.
pub const SUPPORTED: &[(&str, &str)] = &[
    (
        "Conv",
        "1-D, 2-D and 3-D, f32; pads, auto_pad, strides, dilations, group (incl. depthwise), bias",
    ),
    (
        "BatchNormalization",
        "inference (training_mode = 0); folded into a preceding Conv",
    ),
    (
        "MaxPool",
        "1-D, 2-D and 3-D; pads, auto_pad, strides, dilations, ceil_mode; no Indices output",
    ),
    (
        "AveragePool",
        "1-D, 2-D and 3-D; pads, auto_pad, strides, dilations, ceil_mode, count_include_pad",
    ),
    ("GlobalAveragePool", "rank >= 3"),
];

impl Importer<'_> {
    /// BatchNormalization's epsilon under the NaN policy, and with constant statistics every channel checked:
    /// a channel whose variance + epsilon is not positive, or whose scale, bias or mean is not finite, would
    /// make every output of that channel NaN or infinite.
    fn batchnorm_epsilon(&self, a: &Attrs, ins: &[Option<TensorId>]) -> Result<f32> {
        let eps = a.epsilon(1e-5)?;
        let constant = |i: usize| {
            let t = ins.get(i).copied().flatten()?;
            let v = self.g.constant(t)?;
            Some((v.to_f32_vec(), self.g.tensors[t].name.as_str()))
        };
        for (i, what) in [(1, "scale"), (2, "bias"), (3, "mean"), (4, "variance")] {
            let Some((v, tensor)) = constant(i) else {
                continue;
            };
            for (c, &x) in v.iter().enumerate() {
                let bad = !x.is_finite() || (i == 4 && x + eps <= 0.0);
                if bad {
                    let why = if i == 4 && x.is_finite() {
                        format!("variance {x} + epsilon {eps} is not positive")
                    } else {
                        format!("{what} {x} is not finite")
                    };
                    return Err(Error::node(
                        a.name,
                        "BatchNormalization",
                        format!(
                            "channel {c} of '{tensor}': {why}, so every output of the channel would be NaN or infinite"
                        ),
                    ));
                }
            }
        }
        Ok(eps)
    }

    /// The attributes of a 2-D Conv-like node (Conv, QLinearConv, ConvInteger) with input `x` and weights `w`.
    pub(super) fn conv_attrs(
        &self,
        a: &Attrs,
        op: &str,
        x: TensorId,
        w: TensorId,
        has_bias: bool,
    ) -> Result<ConvAttrs> {
        let (xs, ws) = (
            self.g.tensors[x].shape.clone(),
            self.g.tensors[w].shape.clone(),
        );
        if xs.len() != 4 || ws.len() != 4 {
            return Err(Error::unsupported(
                a.name,
                op,
                format!(
                    "only 2-D convolution is supported (input rank {})",
                    xs.len()
                ),
            ));
        }
        let kernel = a.positive_usizes("kernel_shape", 2, 0)?;
        let kernel = if a.has("kernel_shape") {
            [kernel[0], kernel[1]]
        } else {
            [ws[2], ws[3]]
        };
        let strides = a.positive_usizes("strides", 2, 1)?;
        let dil = a.positive_usizes("dilations", 2, 1)?;
        let pads = self.pads(a, op, &xs[2..], &kernel, &strides, &dil)?;
        Ok(ConvAttrs {
            kernel,
            strides: [strides[0], strides[1]],
            pads,
            dilations: [dil[0], dil[1]],
            group: a.int_in("group", 1, 1..=MAX_WINDOW as i64)? as usize,
            has_bias,
            epilogue: Epilogue::default(),
        })
    }

    /// Explicit pads [top, left, bottom, right] from `pads` or `auto_pad`.
    fn pads(
        &self,
        a: &Attrs,
        op: &str,
        spatial: &[usize],
        k: &[usize; 2],
        s: &[usize],
        d: &[usize],
    ) -> Result<[usize; 4]> {
        let auto = a.string("auto_pad", "NOTSET")?;
        match auto.as_str() {
            "NOTSET" => {
                let p = a.usizes("pads", 4, 0)?;
                Ok([p[0], p[1], p[2], p[3]])
            }
            "VALID" => Ok([0; 4]),
            "SAME_UPPER" | "SAME_LOWER" => {
                let mut pads = [0usize; 4];
                for i in 0..2 {
                    let out = spatial[i].div_ceil(s[i].max(1));
                    let eff = (k[i] - 1) * d[i] + 1;
                    let total = ((out - 1) * s[i] + eff).saturating_sub(spatial[i]);
                    let (small, big) = (total / 2, total - total / 2);
                    let (begin, end) = if auto == "SAME_UPPER" {
                        (small, big)
                    } else {
                        (big, small)
                    };
                    pads[i] = begin;
                    pads[i + 2] = end;
                }
                Ok(pads)
            }
            other => Err(Error::node(
                a.name,
                op,
                format!("attribute 'auto_pad': unknown value '{other}'"),
            )),
        }
    }
}

/// The parsers of this file's op types.
pub(super) const PARSERS: &[Parser] = &[
    (&["Conv"], |im, n| conv(im, n, parse_conv)),
    (&["BatchNormalization"], parse_batch_normalization),
    (&["MaxPool", "AveragePool"], |im, n| pool(im, n, parse_pool)),
    (&["GlobalAveragePool"], parse_global_average_pool),
];

/// `Conv`.
fn parse_conv(im: &mut Importer<'_>, n: &Node<'_>) -> Result<Lowered> {
    let Node { op, a, .. } = *n;
    let (x, w) = (n.req(0)?, n.req(1)?);
    let bias = n.input(2);
    let attrs = im.conv_attrs(a, op, x, w, bias.is_some())?;
    let mut v = vec![x, w];
    v.extend(bias);
    Ok(Lowered::Node(Op::Conv(attrs), v))
}

/// `BatchNormalization`.
fn parse_batch_normalization(im: &mut Importer<'_>, n: &Node<'_>) -> Result<Lowered> {
    let Node {
        node,
        name,
        op,
        ins,
        a,
    } = *n;
    if a.int("training_mode", 0)? != 0 {
        return Err(Error::unsupported(name, op, "training_mode = 1"));
    }
    if im.extra_outputs_used(node) {
        return Err(Error::unsupported(
            name,
            op,
            "running mean/var outputs are used (training only)",
        ));
    }
    Ok(Lowered::Node(
        Op::BatchNorm {
            epsilon: im.batchnorm_epsilon(a, ins)?,
        },
        (0..5).map(|i| n.req(i)).collect::<Result<_>>()?,
    ))
}

/// `MaxPool`, `AveragePool`.
fn parse_pool(im: &mut Importer<'_>, n: &Node<'_>) -> Result<Lowered> {
    let Node {
        node, name, op, a, ..
    } = *n;
    let rank = |t: TensorId| im.g.tensors[t].shape.len();
    let shape = |t: TensorId| im.g.tensors[t].shape.clone();
    let x = n.req(0)?;
    if rank(x) != 4 {
        return Err(Error::unsupported(
            name,
            op,
            format!("only 2-D pooling is supported (input rank {})", rank(x)),
        ));
    }
    if op == "MaxPool" && im.extra_outputs_used(node) {
        return Err(Error::unsupported(
            name,
            op,
            "the Indices output is not supported",
        ));
    }
    if a.int("storage_order", 0)? != 0 {
        return Err(Error::unsupported(name, op, "storage_order = 1"));
    }
    let k = a.positive_usizes("kernel_shape", 2, 0)?;
    if !a.has("kernel_shape") {
        return Err(Error::node(
            name,
            op,
            "attribute 'kernel_shape' is required",
        ));
    }
    let strides = a.positive_usizes("strides", 2, 1)?;
    let dil = a.positive_usizes("dilations", 2, 1)?;
    let kernel = [k[0], k[1]];
    let xs = shape(x);
    let pads = im.pads(a, op, &xs[2..], &kernel, &strides, &dil)?;
    let attrs = PoolAttrs {
        kernel,
        strides: [strides[0], strides[1]],
        pads,
        dilations: [dil[0], dil[1]],
        ceil_mode: a.int("ceil_mode", 0)? != 0,
        count_include_pad: a.int("count_include_pad", 0)? != 0,
    };
    let kind = if op == "MaxPool" {
        PoolKind::Max
    } else {
        PoolKind::Average
    };
    Ok(Lowered::Node(Op::Pool(kind, attrs), vec![x]))
}

/// `GlobalAveragePool`.
fn parse_global_average_pool(_: &mut Importer<'_>, n: &Node<'_>) -> Result<Lowered> {
    Ok(Lowered::Node(Op::GlobalAveragePool, vec![n.req(0)?]))
}
