//! ONNX → IR mapping of the int8 family: QuantizeLinear / DequantizeLinear (per tensor and per axis) become
//! `Quantize` / `Dequantize`, and the operator-form integer ops — QLinearConv, QLinearMatMul, ConvInteger,
//! MatMulInteger — become `QConv` / `QMatMul` with their quantisation parameters resolved at compile time.
//! Scales and zero points must be constants; weights must be constants. Weights minus their zero point that fit
//! s8 (symmetric s8 weights, or u8 weights with zero point 128) are i8; others within [-255, 255] (u8 weights
//! with zero point 0 or 255) are kept as "wide" i32 weights, which only the i16-pair GEMM kernels take.

use super::importer::Importer;
use super::nodes::{Lowered, Node, Parser};
use crate::error::{Error, Result};
use crate::ir::ops::quant::range_of;
use crate::ir::{DType, Data, IntProduct, Op, QuantParams, Requant, Tensor, TensorId};

/// The ONNX ops this file maps, for `bundlec ops`.
pub const SUPPORTED: &[(&str, &str)] = &[
    (
        "QuantizeLinear, DequantizeLinear",
        "u8 / i8 (and i32 for DequantizeLinear); per tensor or per axis; constant scale and zero point",
    ),
    (
        "QLinearConv, ConvInteger",
        "2-D; u8 / i8 input; constant weights (s8, or u8 whose zero point brings them into s8); \
         per-channel weight scales",
    ),
    (
        "QLinearAdd, QLinearMul (com.microsoft)",
        "same-shape u8 / i8 operands, per-tensor constant parameters; the f32 chain DequantizeLinear, Add/Mul, \
         QuantizeLinear",
    ),
    (
        "QLinearGlobalAveragePool (com.microsoft)",
        "channels_last = 0; per-tensor constant parameters",
    ),
    (
        "QLinearMatMul, MatMulInteger",
        "u8 / i8 [.., M, K] input times a constant [K, N] weight; per-column weight scales",
    ),
];

impl Importer<'_> {
    fn const_of(&self, name: &str, op: &str, t: TensorId, what: &str) -> Result<Tensor> {
        self.g.constant(t).cloned().ok_or_else(|| {
            Error::unsupported(
                name,
                op,
                format!("{what} '{}' must be constant", self.g.tensors[t].name),
            )
        })
    }

    /// Scale and zero point of a QuantizeLinear / DequantizeLinear: per tensor when the scale has one element,
    /// else per slice along `axis`.
    fn qparams(
        &self,
        name: &str,
        op: &str,
        scale: TensorId,
        zp: Option<TensorId>,
        axis: usize,
        default: DType,
    ) -> Result<QuantParams> {
        let s = self.const_of(name, op, scale, "scale")?;
        if s.dtype != DType::F32 {
            return Err(Error::unsupported(name, op, format!("{} scale", s.dtype)));
        }
        let scale = s.to_f32_vec();
        let (dtype, zero_point) = match zp {
            Some(z) => {
                let z = self.const_of(name, op, z, "zero point")?;
                (z.dtype, z.to_i64_vec().iter().map(|&v| v as i32).collect())
            }
            None => (default, vec![0; scale.len()]),
        };
        if range_of(dtype).is_none() {
            return Err(Error::unsupported(
                name,
                op,
                format!("{dtype} quantisation (u8, i8 and i32 are supported)"),
            ));
        }
        // A 1-D scale of length > 1 is per axis (length 1 is the same as per tensor).
        let per_axis = s.shape.len() == 1 && scale.len() > 1;
        let q = QuantParams {
            dtype,
            axis: per_axis.then_some(axis),
            scale,
            zero_point,
        };
        if q.zero_point.len() != q.scale.len() {
            return Err(Error::node(
                name,
                op,
                format!(
                    "{} scales but {} zero points",
                    q.scale.len(),
                    q.zero_point.len()
                ),
            ));
        }
        Ok(q)
    }

    fn scalar_scale(&self, name: &str, op: &str, t: TensorId) -> Result<f32> {
        let v = self.const_of(name, op, t, "scale")?.to_f32_vec();
        match v.as_slice() {
            [s] if s.is_finite() && *s > 0.0 => Ok(*s),
            _ => Err(Error::unsupported(
                name,
                op,
                format!("scale {v:?}: one finite positive value is required"),
            )),
        }
    }

    fn per_channel_scale(&self, name: &str, op: &str, t: TensorId, n: usize) -> Result<Vec<f32>> {
        let v = self.const_of(name, op, t, "weight scale")?.to_f32_vec();
        let v = if v.len() == 1 { vec![v[0]; n] } else { v };
        if v.len() != n || v.iter().any(|s| !(s.is_finite() && *s > 0.0)) {
            return Err(Error::node(
                name,
                op,
                format!("weight scales must be 1 or {n} finite positive values"),
            ));
        }
        Ok(v)
    }

    /// The activation zero point (a scalar of the input's type; 0 when absent).
    fn scalar_zero_point(
        &self,
        name: &str,
        op: &str,
        zp: Option<TensorId>,
        x: TensorId,
    ) -> Result<i32> {
        let dt = self.g.tensors[x].dtype;
        if !matches!(dt, DType::U8 | DType::I8) {
            return Err(Error::unsupported(
                name,
                op,
                format!(
                    "input '{}' is {dt} (u8 or i8 expected)",
                    self.g.tensors[x].name
                ),
            ));
        }
        let Some(z) = zp else { return Ok(0) };
        let v = self.const_of(name, op, z, "input zero point")?.to_i64_vec();
        match v.as_slice() {
            [z] => Ok(*z as i32),
            _ => Err(Error::unsupported(
                name,
                op,
                "a per-row input zero point (one value is required)",
            )),
        }
    }

    /// The constant weights minus their zero point (per slice along `axis`), as i8.
    fn int8_weights(
        &self,
        name: &str,
        op: &str,
        w: TensorId,
        zp: Option<TensorId>,
        axis: usize,
    ) -> Result<Tensor> {
        let wt = self.const_of(name, op, w, "weight")?;
        if !matches!(wt.dtype, DType::U8 | DType::I8) {
            return Err(Error::unsupported(
                name,
                op,
                format!("{} weights (u8 or i8 expected)", wt.dtype),
            ));
        }
        let n = wt.shape[axis];
        let zs = match zp {
            Some(z) => self
                .const_of(name, op, z, "weight zero point")?
                .to_i64_vec(),
            None => vec![0],
        };
        if zs.len() != 1 && zs.len() != n {
            return Err(Error::node(
                name,
                op,
                format!("{} weight zero points for {n} channels", zs.len()),
            ));
        }
        let inner: usize = wt.shape[axis + 1..].iter().product();
        let vals = wt.to_i64_vec();
        let mut out = Vec::with_capacity(vals.len());
        for (i, v) in vals.iter().enumerate() {
            let z = if zs.len() == 1 {
                zs[0]
            } else {
                zs[(i / inner) % n]
            };
            let d = v - z;
            if !(-255..=255).contains(&d) {
                return Err(Error::unsupported(
                    name,
                    op,
                    format!("weight {v} minus zero point {z} is outside [-255, 255]"),
                ));
            }
            out.push(d);
        }
        // Weights whose zero point takes them out of s8 (u8 weights with zero point 0 or 255) are kept as
        // i32 "wide" weights in [-255, 255]: the i16-pair kernels take them; VNNI, the i16 depthwise and the NPU
        // do not.
        let wide = out.iter().any(|d| !(-128..=127).contains(d));
        Ok(Tensor {
            dtype: if wide { DType::I32 } else { DType::I8 },
            shape: wt.shape.clone(),
            data: Data::I64(out),
        })
    }

    fn output_params(
        &self,
        name: &str,
        op: &str,
        scale: TensorId,
        zp: Option<TensorId>,
    ) -> Result<(f32, i32, DType)> {
        let s = self.scalar_scale(name, op, scale)?;
        let (z, dt) = match zp {
            Some(z) => {
                let t = self.const_of(name, op, z, "output zero point")?;
                match t.to_i64_vec().as_slice() {
                    [v] => (*v as i32, t.dtype),
                    _ => {
                        return Err(Error::unsupported(
                            name,
                            op,
                            "per-channel output zero point",
                        ))
                    }
                }
            }
            None => (0, DType::U8),
        };
        if !matches!(dt, DType::U8 | DType::I8) {
            return Err(Error::unsupported(name, op, format!("{dt} output")));
        }
        Ok((s, z, dt))
    }

    fn int32_bias(&self, name: &str, op: &str, b: TensorId, m: usize) -> Result<Vec<i32>> {
        let t = self.const_of(name, op, b, "bias")?;
        let v: Vec<i32> = t.to_i64_vec().iter().map(|&x| x as i32).collect();
        if t.dtype != DType::I32 || v.len() != m {
            return Err(Error::node(
                name,
                op,
                format!("bias must be {m} i32 values, got {} {}", v.len(), t.dtype),
            ));
        }
        Ok(v)
    }
}

/// An `IntProduct` from resolved parameters: (x scale, weight scales, y scale, y zero point, y dtype).
fn product(
    x_zero_point: i32,
    bias: Vec<i32>,
    requant: Option<(f32, Vec<f32>, f32, i32, DType)>,
) -> IntProduct {
    IntProduct {
        x_zero_point,
        bias,
        requant: requant.map(|(sx, sw, sy, zy, dt)| Requant {
            scale: sw.iter().map(|&w| sx * w / sy).collect(),
            zero_point: zy,
            clamp: range_of(dt).unwrap_or((0, 255)),
            dtype: dt,
        }),
    }
}

/// The parsers of this file's op types.
pub(super) const PARSERS: &[Parser] = &[
    (&["QuantizeLinear", "DequantizeLinear"], parse_quantize),
    (&["QLinearConv", "ConvInteger"], parse_qconv),
    (&["QLinearMatMul", "MatMulInteger"], parse_qmatmul),
    (&["QLinearAdd", "QLinearMul"], parse_qbinary),
    (
        &["QLinearGlobalAveragePool"],
        parse_qlinear_global_average_pool,
    ),
];

/// `QuantizeLinear`, `DequantizeLinear`.
fn parse_quantize(im: &mut Importer<'_>, n: &Node<'_>) -> Result<Lowered> {
    check_params(im, n)?;
    let Node { name, op, a, .. } = *n;
    let x = n.req(0)?;
    let shape = im.g.tensors[x].shape.clone();
    // The axis only matters (and is only checked) for per-axis parameters.
    let per_axis =
        im.g.constant(n.req(1)?)
            .is_some_and(|s| s.shape.len() == 1 && s.len() > 1);
    let axis = if per_axis {
        a.axis("axis", 1, shape.len().max(1))?
    } else {
        0
    };
    let deq = op == "DequantizeLinear";
    let default = if deq {
        im.g.tensors[x].dtype
    } else {
        match a.int("output_dtype", 0)? {
            0 => DType::U8,
            c => DType::from_onnx(c as i32)
                .ok_or_else(|| a.err("output_dtype", format!("unknown type code {c}")))?,
        }
    };
    let q = im.qparams(name, op, n.req(1)?, n.input(2), axis, default)?;
    Ok(Lowered::Node(
        if deq {
            Op::Dequantize(q)
        } else {
            Op::Quantize(q)
        },
        vec![x],
    ))
}

/// `QLinearConv`, `ConvInteger`.
fn parse_qconv(im: &mut Importer<'_>, n: &Node<'_>) -> Result<Lowered> {
    check_params(im, n)?;
    let Node { name, op, a, .. } = *n;
    let linear = op == "QLinearConv";
    let (x, w) = if linear {
        (n.req(0)?, n.req(3)?)
    } else {
        (n.req(0)?, n.req(1)?)
    };
    let attrs = im.conv_attrs(a, op, x, w, false)?;
    let m = im.g.tensors[w].shape[0];
    let zp_at = |i: usize, j: usize| if linear { n.input(i) } else { n.input(j) };
    let xq = im.scalar_zero_point(name, op, zp_at(2, 2), x)?;
    let wt = im.int8_weights(name, op, w, zp_at(5, 3), 0)?;
    let p = if linear {
        let sx = im.scalar_scale(name, op, n.req(1)?)?;
        let sw = im.per_channel_scale(name, op, n.req(4)?, m)?;
        let (sy, zy, dt) = im.output_params(name, op, n.req(6)?, n.input(7))?;
        let bias = match n.input(8) {
            Some(b) => im.int32_bias(name, op, b, m)?,
            None => vec![0; m],
        };
        product(xq, bias, Some((sx, sw, sy, zy, dt)))
    } else {
        product(xq, vec![0; m], None)
    };
    let wid = im.g.add_constant(format!("{name}::w_s8"), wt);
    Ok(Lowered::Node(Op::QConv(attrs, p), vec![x, wid]))
}

/// `QLinearMatMul`, `MatMulInteger`.
fn parse_qmatmul(im: &mut Importer<'_>, n: &Node<'_>) -> Result<Lowered> {
    check_params(im, n)?;
    let Node { name, op, .. } = *n;
    let linear = op == "QLinearMatMul";
    let (x, w) = if linear {
        (n.req(0)?, n.req(3)?)
    } else {
        (n.req(0)?, n.req(1)?)
    };
    let ws = im.g.tensors[w].shape.clone();
    if ws.len() != 2 {
        return Err(Error::unsupported(
            name,
            op,
            format!("the weight must be a 2-D [K, N] constant, got shape {ws:?}"),
        ));
    }
    let cols = ws[1];
    let zp_at = |i: usize, j: usize| if linear { n.input(i) } else { n.input(j) };
    let xq = im.scalar_zero_point(name, op, zp_at(2, 2), x)?;
    let wt = im.int8_weights(name, op, w, zp_at(5, 3), 1)?;
    let p = if linear {
        let sx = im.scalar_scale(name, op, n.req(1)?)?;
        let sw = im.per_channel_scale(name, op, n.req(4)?, cols)?;
        let (sy, zy, dt) = im.output_params(name, op, n.req(6)?, n.input(7))?;
        product(xq, vec![0; cols], Some((sx, sw, sy, zy, dt)))
    } else {
        product(xq, vec![0; cols], None)
    };
    let wid = im.g.add_constant(format!("{name}::w_s8"), wt);
    Ok(Lowered::Node(Op::QMatMul(p), vec![x, wid]))
}

/// `QLinearAdd`, `QLinearMul`.
fn parse_qbinary(im: &mut Importer<'_>, n: &Node<'_>) -> Result<Lowered> {
    check_params(im, n)?;
    let Node { name, op, .. } = *n;
    let (a_in, b_in) = (n.req(0)?, n.req(3)?);
    let (sa, sb, sy) = (
        im.scalar_scale(name, op, n.req(1)?)?,
        im.scalar_scale(name, op, n.req(4)?)?,
        im.scalar_scale(name, op, n.req(6)?)?,
    );
    let za = im.scalar_zero_point(name, op, n.input(2), a_in)?;
    let zb = im.scalar_zero_point(name, op, n.input(5), b_in)?;
    let (_, zy, dt) = im.output_params(name, op, n.req(6)?, n.input(7))?;
    let clamp = range_of(dt).unwrap_or((0, 255));
    Ok(Lowered::Node(
        Op::QAdd(crate::ir::QAddParams {
            a: (sa, za),
            b: (sb, zb),
            y: (sy, zy),
            clamp,
            dtype: dt,
            mul: op == "QLinearMul",
        }),
        vec![a_in, b_in],
    ))
}

/// `QLinearGlobalAveragePool`.
fn parse_qlinear_global_average_pool(im: &mut Importer<'_>, n: &Node<'_>) -> Result<Lowered> {
    check_params(im, n)?;
    let Node { name, op, a, .. } = *n;
    if a.int("channels_last", 0)? != 0 {
        return Err(Error::unsupported(name, op, "channels_last = 1"));
    }
    let x = n.req(0)?;
    let xdt = im.g.tensors[x].dtype;
    let sx = im.scalar_scale(name, op, n.req(1)?)?;
    let zx = im.scalar_zero_point(name, op, n.input(2), x)?;
    let (sy, zy, dt) = im.output_params(name, op, n.req(3)?, n.input(4))?;
    if !matches!(xdt, DType::U8 | DType::I8) {
        return Err(Error::unsupported(
            name,
            op,
            format!("X is {xdt}, not u8 or i8"),
        ));
    }
    let params = crate::ir::QGapParams {
        x: (sx, zx),
        y: (sy, zy),
        dtype: dt,
    };
    Ok(Lowered::Node(Op::QGlobalAvgPool(params), vec![x]))
}

/// What every int8 op asks first: no blocked quantisation, and every parameter input (scales, zero points,
/// weights, bias) constant, naming all that are not at once.
fn check_params(im: &Importer<'_>, n: &Node<'_>) -> Result<()> {
    let Node { name, op, a, .. } = *n;
    if a.int("block_size", 0)? != 0 {
        return Err(Error::unsupported(
            name,
            op,
            "blocked quantisation (block_size)",
        ));
    }
    let params: &[usize] = match op {
        "QuantizeLinear" | "DequantizeLinear" => &[1, 2],
        "QLinearConv" => &[1, 2, 3, 4, 5, 6, 7, 8],
        "QLinearMatMul" => &[1, 2, 3, 4, 5, 6, 7],
        "ConvInteger" | "MatMulInteger" => &[1, 2, 3],
        "QLinearAdd" | "QLinearMul" => &[1, 2, 4, 5, 6, 7],
        "QLinearGlobalAveragePool" => &[1, 2, 3, 4],
        _ => &[],
    };
    let runtime: Vec<String> = params
        .iter()
        .filter_map(|&i| n.input(i))
        .filter(|&t| im.g.constant(t).is_none())
        .map(|t| format!("'{}'", im.g.tensors[t].name))
        .collect();
    if !runtime.is_empty() {
        return Err(Error::unsupported(
            name,
            op,
            format!(
                "quantisation parameters and weights {} must be constant",
                runtime.join(", ")
            ),
        ));
    }
    Ok(())
}
