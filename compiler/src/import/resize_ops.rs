//! ONNX → IR mapping of the resize family (`ir/ops/resize.rs`): Resize (opset 10, 11–18 and 19 forms) and
//! Upsample — nearest (every nearest_mode), linear and cubic, every coordinate mode but tf_crop_and_resize,
//! from constant scales or sizes.

use super::attrs::Attrs;
use super::importer::Importer;
use super::nodes::err_const;
use super::nodes::{Lowered, Node, Parser};
use crate::error::{Error, Result};
use crate::ir::{CoordMode, NearestMode, Op, ResizeAttrs, ResizeMode, Tensor, TensorId};
use tract_onnx::pb::NodeProto;

/// The ONNX ops this file maps, for `bundlec ops`.
pub const SUPPORTED: &[(&str, &str)] = &[(
    "Resize, Upsample",
    "nearest (all nearest_modes), linear, cubic; every coordinate mode but tf_crop_and_resize; \
         scales or sizes; constant scales/sizes",
)];

impl Importer<'_> {
    fn lower_resize(
        &mut self,
        node: &NodeProto,
        name: &str,
        ins: &[Option<TensorId>],
        a: &Attrs,
    ) -> Result<Lowered> {
        let op = node.op_type.as_str();
        let x = ins
            .first()
            .copied()
            .flatten()
            .ok_or_else(|| Error::node(name, op, "missing input 0"))?;
        let xs = self.g.tensors[x].shape.clone();
        let r = xs.len();
        let mode_s = a.string("mode", "nearest")?;
        let legacy = op == "Upsample" || self.opset < 11;
        let (scales_t, sizes_t) = if op == "Upsample" && self.opset < 9 {
            (
                a.floats("scales")?
                    .map(|f| Tensor::f32(vec![f.len()], f.to_vec())),
                None,
            )
        } else if legacy {
            (self.const_tensor(ins.get(1).copied().flatten()), None)
        } else {
            (
                self.const_tensor(ins.get(2).copied().flatten()),
                self.const_tensor(ins.get(3).copied().flatten()),
            )
        };
        let given_scales = ins
            .get(if legacy { 1 } else { 2 })
            .copied()
            .flatten()
            .is_some();
        let given_sizes = !legacy && ins.get(3).copied().flatten().is_some();
        if (given_scales && scales_t.is_none() && !(op == "Upsample" && self.opset < 9))
            || (given_sizes && sizes_t.is_none())
        {
            return Err(err_const(node, name, &[1, 2, 3], "scales / sizes"));
        }
        if a.int("antialias", 0)? != 0 {
            return Err(Error::unsupported(name, op, "antialias = 1"));
        }
        let policy = a.string("keep_aspect_ratio_policy", "stretch")?;
        if policy != "stretch" && sizes_t.is_some() {
            return Err(Error::unsupported(
                name,
                op,
                format!("keep_aspect_ratio_policy '{policy}'"),
            ));
        }
        if let Some(&bad) = a
            .ints("axes")?
            .unwrap_or(&[])
            .iter()
            .find(|&&x| x < -(r as i64) || x >= r as i64)
        {
            return Err(a.err("axes", format!("axis {bad} is out of range for rank {r}")));
        }
        let axes: Vec<usize> = match a.ints("axes")? {
            None => (0..r).collect(),
            Some(v) => v
                .iter()
                .map(|&x| {
                    if x < 0 {
                        (x + r as i64) as usize
                    } else {
                        x as usize
                    }
                })
                .collect(),
        };
        let mut scales = vec![1.0f64; r];
        let mut out = xs.clone();
        let sizes = sizes_t.map(|t| t.to_i64_vec()).filter(|v| !v.is_empty());
        let sc = scales_t.map(|t| t.to_f32_vec()).filter(|v| !v.is_empty());
        match (sizes, sc) {
            (Some(s), _) => {
                if s.len() != axes.len() {
                    return Err(Error::node(
                        name,
                        op,
                        format!("sizes {s:?} do not match axes {axes:?}"),
                    ));
                }
                for (i, &ax) in axes.iter().enumerate() {
                    out[ax] = s[i].max(0) as usize;
                    scales[ax] = s[i] as f64 / xs[ax] as f64;
                }
            }
            (None, Some(f)) => {
                if f.len() != axes.len() {
                    return Err(Error::node(
                        name,
                        op,
                        format!("scales {f:?} do not match axes {axes:?}"),
                    ));
                }
                for (i, &ax) in axes.iter().enumerate() {
                    scales[ax] = f[i] as f64;
                    out[ax] = (f[i] as f64 * xs[ax] as f64) as usize;
                }
            }
            (None, None) => return Err(Error::node(name, op, "needs scales or sizes")),
        }
        if out.contains(&0) || scales.iter().any(|&s| s <= 0.0) {
            return Err(Error::unsupported(
                name,
                op,
                "an empty output (zero-sized tensors are not supported)",
            ));
        }
        let coord = if legacy {
            CoordMode::Asymmetric
        } else {
            match a
                .string("coordinate_transformation_mode", "half_pixel")?
                .as_str()
            {
                "half_pixel" => CoordMode::HalfPixel,
                "pytorch_half_pixel" => CoordMode::PytorchHalfPixel,
                "align_corners" => CoordMode::AlignCorners,
                "asymmetric" => CoordMode::Asymmetric,
                "half_pixel_symmetric" => CoordMode::HalfPixelSymmetric,
                m => {
                    return Err(Error::unsupported(
                        name,
                        op,
                        format!("coordinate_transformation_mode '{m}'"),
                    ))
                }
            }
        };
        let mode = match mode_s.as_str() {
            "nearest" => ResizeMode::Nearest(if legacy {
                NearestMode::Floor
            } else {
                match a.string("nearest_mode", "round_prefer_floor")?.as_str() {
                    "round_prefer_floor" => NearestMode::RoundPreferFloor,
                    "round_prefer_ceil" => NearestMode::RoundPreferCeil,
                    "floor" => NearestMode::Floor,
                    "ceil" => NearestMode::Ceil,
                    m => {
                        return Err(Error::node(
                            name,
                            op,
                            format!("attribute 'nearest_mode': unknown value '{m}'"),
                        ))
                    }
                }
            }),
            "linear" | "bilinear" => ResizeMode::Linear,
            "cubic" => ResizeMode::Cubic,
            m => {
                return Err(Error::node(
                    name,
                    op,
                    format!("attribute 'mode': unknown value '{m}'"),
                ))
            }
        };
        Ok(Lowered::Node(
            Op::Resize(ResizeAttrs {
                out,
                scales,
                mode,
                coord,
                cubic_a: a.finite("cubic_coeff_a", -0.75)?,
                exclude_outside: a.int("exclude_outside", 0)? != 0,
            }),
            vec![x],
        ))
    }
}

/// The parsers of this file's op types.
pub(super) const PARSERS: &[Parser] = &[(&["Resize", "Upsample"], parse_resize)];

/// `Resize`, `Upsample`.
fn parse_resize(im: &mut Importer<'_>, n: &Node<'_>) -> Result<Lowered> {
    im.lower_resize(n.node, n.name, n.ins, n.a)
}
