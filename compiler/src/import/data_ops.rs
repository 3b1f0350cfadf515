//! ONNX → IR mapping of the data ops: Cast / CastLike, ConstantOfShape and Range (compile-time constants), Slice,
//! Pad, Split (one Slice per output), Expand, Tile and Gather. Index arguments (starts, pads, split sizes,
//! shapes) must be constants, which shape-folded graphs have.

use super::importer::Importer;
use super::nodes::{Lowered, Node, Parser};
use super::tensor::decode;
use crate::error::{Error, Result};
use crate::ir::types::{checked_numel, MAX_RANK};
use crate::ir::{numel, DType, Op, PadMode, Tensor, TensorId};
use tract_onnx::pb::NodeProto;

/// The ONNX ops this file maps, for `bundlec ops`.
pub const SUPPORTED: &[(&str, &str)] = &[
    (
        "Cast, CastLike",
        "f32, u8, i8, i32, i64, bool (float to int truncates)",
    ),
    (
        "ConstantOfShape, Range",
        "folded at compile time (inputs must be constant)",
    ),
    ("Slice", "constant starts/ends/axes/steps, negative steps"),
    (
        "Pad",
        "constant, reflect, edge, wrap; constant pads (negative crops), axes",
    ),
    (
        "Split",
        "constant split sizes, or num_outputs / equal parts",
    ),
    ("Expand, Tile", "constant shape / repeats"),
    ("Trilu", "any dtype, rank >= 2; constant k"),
    (
        "Gather",
        "any axis; run-time or constant i64/i32 indices (clamped at run time)",
    ),
];

/// The error for an index argument that is not a compile-time constant; names the ONNX input tensor(s).
pub(super) fn err_const(node: &NodeProto, name: &str, idx: &[usize], what: &str) -> Error {
    let names: Vec<String> = idx
        .iter()
        .filter_map(|&i| node.input.get(i).filter(|n| !n.is_empty()))
        .map(|n| format!("'{n}'"))
        .collect();
    Error::unsupported(
        name,
        &node.op_type,
        format!("input {} ({what}) must be constant", names.join(", ")),
    )
}

impl Importer<'_> {
    pub(super) fn const_tensor(&self, t: Option<TensorId>) -> Option<Tensor> {
        t.and_then(|t| self.g.constant(t).cloned())
    }
}

impl Importer<'_> {
    /// A constant an op materialises at compile time (ConstantOfShape, Range): at most [`MAX_RANK`] dims and
    /// 2^27 elements (real shape tensors are tiny), charged to the constant budget before it is built.
    fn check_const(&mut self, name: &str, op: &str, shape: &[usize], dtype: DType) -> Result<()> {
        let err = |m: String| Error::node(name, op, m);
        if shape.len() > MAX_RANK {
            return Err(err(format!(
                "a compile-time constant of rank {} exceeds the rank limit of {MAX_RANK}",
                shape.len()
            )));
        }
        match checked_numel(shape) {
            Some(n) if n <= 1 << 27 => self.budget.take(n, dtype).map_err(err),
            _ => Err(err(format!(
                "a compile-time constant of shape {shape:?} exceeds 2^27 elements"
            ))),
        }
    }
}

/// The parsers of this file's op types.
pub(super) const PARSERS: &[Parser] = &[
    Parser {
        ops: &["Cast", "CastLike"],
        parse: parse_cast,
    },
    Parser {
        ops: &["ConstantOfShape"],
        parse: parse_constant_of_shape,
    },
    Parser {
        ops: &["Range"],
        parse: parse_range,
    },
    Parser {
        ops: &["Slice"],
        parse: parse_slice,
    },
    Parser {
        ops: &["Pad"],
        parse: parse_pad,
    },
    Parser {
        ops: &["Split"],
        parse: parse_split,
    },
    Parser {
        ops: &["Expand"],
        parse: parse_expand,
    },
    Parser {
        ops: &["Tile"],
        parse: parse_tile,
    },
    Parser {
        ops: &["Trilu"],
        parse: parse_trilu,
    },
    Parser {
        ops: &["Gather"],
        parse: parse_gather,
    },
];

/// `Cast`, `CastLike`.
fn parse_cast(im: &mut Importer<'_>, n: &Node<'_>) -> Result<Lowered> {
    let Node { name, op, a, .. } = *n;
    let x = n.req(0)?;
    let to = if op == "Cast" {
        let code = a.int_in("to", 0, 0..=i32::MAX as i64)? as i32;
        DType::from_onnx(code)
            .ok_or_else(|| Error::unsupported(name, op, format!("target ONNX data type {code}")))?
    } else {
        im.g.tensors[n.req(1)?].dtype
    };
    Ok(if im.g.tensors[x].dtype == to {
        Lowered::Alias(x)
    } else {
        Lowered::Node(Op::Cast(to), vec![x])
    })
}

/// `ConstantOfShape`.
fn parse_constant_of_shape(im: &mut Importer<'_>, n: &Node<'_>) -> Result<Lowered> {
    let Node {
        node, name, op, a, ..
    } = *n;
    let ints = |i: usize, what: &str| -> Result<Option<Vec<i64>>> {
        match n.input(i) {
            None => Ok(None),
            Some(t) => im
                .const_ints(t)
                .map(Some)
                .ok_or_else(|| err_const(node, name, &[i], what)),
        }
    };
    let dims = ints(0, "the shape input")?.unwrap_or_default();
    if dims.iter().any(|&d| d < 0) {
        return Err(Error::node(
            name,
            op,
            format!("negative dimension in {dims:?}"),
        ));
    }
    let shape: Vec<usize> = dims.iter().map(|&d| d as usize).collect();
    let v = match a.tensor("value")? {
        Some(t) => decode(t, im.model_dir, &mut im.budget)?,
        None => Tensor::f32(vec![1], vec![0.0]),
    };
    im.check_const(name, op, &shape, v.dtype)?;
    let n = numel(&shape);
    if v.len() != 1 {
        return Err(a.err(
            "value",
            format!("must hold exactly one element, holds {}", v.len()),
        ));
    }
    Ok(Lowered::Const(match &v.data {
        crate::ir::Data::F32(x) => Tensor::f32(shape, vec![x[0]; n]),
        crate::ir::Data::I64(x) => Tensor {
            dtype: v.dtype,
            shape,
            data: crate::ir::Data::I64(vec![x[0]; n]),
        },
    }))
}

/// `Range`.
fn parse_range(im: &mut Importer<'_>, n: &Node<'_>) -> Result<Lowered> {
    let Node { node, name, op, .. } = *n;
    let vals: Vec<Tensor> = (0..3)
        .map(|i| {
            im.const_tensor(n.input(i))
                .ok_or_else(|| err_const(node, name, &[0, 1, 2], "start, limit and delta"))
        })
        .collect::<Result<_>>()?;
    if vals.iter().any(|t| t.len() != 1) {
        return Err(Error::node(
            name,
            op,
            "start, limit and delta must be scalars",
        ));
    }
    Ok(if vals[0].dtype == DType::F32 {
        let v: Vec<f32> = vals.iter().map(|t| t.to_f32_vec()[0]).collect();
        if v[2] == 0.0 || !v.iter().all(|x| x.is_finite()) {
            return Err(Error::node(
                name,
                op,
                format!(
                    "start {} limit {} delta {}: delta must be finite and non-zero",
                    v[0], v[1], v[2]
                ),
            ));
        }
        let n = ((v[1] - v[0]) / v[2]).ceil().max(0.0) as usize;
        im.check_const(name, op, &[n], DType::F32)?;
        Lowered::Const(Tensor::f32(
            vec![n],
            (0..n).map(|i| v[0] + i as f32 * v[2]).collect(),
        ))
    } else {
        let v: Vec<i64> = vals.iter().map(|t| t.to_i64_vec()[0]).collect();
        if v[2] == 0 {
            return Err(Error::node(name, op, "delta is 0"));
        }
        // Exact in i128: the count, and every value (each lies between start and limit).
        let (s, l, d) = (v[0] as i128, v[1] as i128, v[2] as i128);
        let span = l - s;
        let n = if (span > 0) == (d > 0) && span != 0 {
            (span + d - d.signum()) / d
        } else {
            0
        };
        let n = usize::try_from(n).unwrap_or(usize::MAX);
        im.check_const(name, op, &[n], vals[0].dtype)?;
        let mut t = Tensor::i64(
            vec![n],
            (0..n as i128).map(|i| (s + i * d) as i64).collect(),
        );
        t.dtype = vals[0].dtype;
        Lowered::Const(t)
    })
}

/// `Slice`.
fn parse_slice(im: &mut Importer<'_>, n: &Node<'_>) -> Result<Lowered> {
    let Node {
        node, name, op, a, ..
    } = *n;
    let shape = |t: TensorId| im.g.tensors[t].shape.clone();
    let ints = |i: usize, what: &str| -> Result<Option<Vec<i64>>> {
        match n.input(i) {
            None => Ok(None),
            Some(t) => im
                .const_ints(t)
                .map(Some)
                .ok_or_else(|| err_const(node, name, &[i], what)),
        }
    };
    let x = n.req(0)?;
    let xs = shape(x);
    let (starts, ends, axes, steps) = if im.opset < 10 {
        (
            a.ints("starts")?.map(<[i64]>::to_vec),
            a.ints("ends")?.map(<[i64]>::to_vec),
            a.ints("axes")?.map(<[i64]>::to_vec),
            None,
        )
    } else {
        (
            ints(1, "starts")?,
            ints(2, "ends")?,
            ints(3, "axes")?,
            ints(4, "steps")?,
        )
    };
    let (starts, ends) = match (starts, ends) {
        (Some(s), Some(e)) if s.len() == e.len() => (s, e),
        _ => {
            return Err(Error::node(
                name,
                op,
                "starts and ends must be given with equal lengths",
            ))
        }
    };
    let r = xs.len() as i64;
    let axes = axes.unwrap_or_else(|| (0..starts.len() as i64).collect());
    let steps = steps.unwrap_or_else(|| vec![1; starts.len()]);
    if axes.len() != starts.len() || steps.len() != starts.len() {
        return Err(Error::node(name, op, "axes and steps must match starts"));
    }
    let mut st: Vec<i64> = vec![0; xs.len()];
    let mut sp: Vec<i64> = vec![1; xs.len()];
    let mut out = xs.clone();
    for i in 0..starts.len() {
        let ax = if axes[i] < 0 { axes[i] + r } else { axes[i] };
        if !(0..r).contains(&ax) {
            return Err(Error::node(
                name,
                op,
                format!("axis {} out of range", axes[i]),
            ));
        }
        let d = xs[ax as usize] as i64;
        let step = steps[i];
        if step == 0 {
            return Err(Error::node(name, op, "step 0"));
        }
        let norm = |v: i64| if v < 0 { v.saturating_add(d) } else { v };
        let (s, e) = (norm(starts[i]), norm(ends[i]));
        // In i128: a step near i64::MAX or i64::MIN must not overflow the count.
        let (s, len) = if step > 0 {
            let (s, e) = (s.clamp(0, d), e.clamp(0, d));
            let (a, b) = ((e - s).max(0) as i128, step as i128);
            let n = (a + b - 1) / b;
            (s, n as i64)
        } else {
            let (s, e) = (s.clamp(0, d - 1), e.clamp(-1, d - 1));
            let (a, b) = ((s - e).max(0) as i128, -(step as i128));
            let n = (a + b - 1) / b;
            (s, n as i64)
        };
        st[ax as usize] = s;
        sp[ax as usize] = step;
        out[ax as usize] = len as usize;
    }
    if out.contains(&0) && im.g.constant(x).is_none() {
        return Err(Error::unsupported(
            name,
            op,
            "the slice is empty (zero-sized tensors are not supported)",
        ));
    }
    Ok(Lowered::Node(
        Op::Slice {
            starts: st,
            steps: sp,
            out,
        },
        vec![x],
    ))
}

/// `Pad`.
fn parse_pad(im: &mut Importer<'_>, n: &Node<'_>) -> Result<Lowered> {
    let Node {
        node, name, op, a, ..
    } = *n;
    let shape = |t: TensorId| im.g.tensors[t].shape.clone();
    let ints = |i: usize, what: &str| -> Result<Option<Vec<i64>>> {
        match n.input(i) {
            None => Ok(None),
            Some(t) => im
                .const_ints(t)
                .map(Some)
                .ok_or_else(|| err_const(node, name, &[i], what)),
        }
    };
    let x = n.req(0)?;
    let r = shape(x).len();
    let mode_s = a.string("mode", "constant")?;
    let (pads, value, axes) = if im.opset < 11 {
        let p = a
            .ints("pads")?
            .ok_or_else(|| Error::node(name, op, "attribute 'pads' is required"))?;
        (p.to_vec(), a.float("value", 0.0)? as f64, None)
    } else {
        let p = ints(1, "pads")?.ok_or_else(|| Error::node(name, op, "missing input 'pads'"))?;
        let v = match n.input(2) {
            None => 0.0,
            Some(t) => {
                let c = im
                    .const_tensor(Some(t))
                    .ok_or_else(|| err_const(node, name, &[2], "constant_value"))?;
                match &c.data {
                    crate::ir::Data::F32(v) => v.first().copied().unwrap_or(0.0) as f64,
                    crate::ir::Data::I64(v) => v.first().copied().unwrap_or(0) as f64,
                }
            }
        };
        (p, v, ints(3, "axes")?)
    };
    let lim = crate::import::attrs::MAX_WINDOW as i64 * 16;
    if let Some(&bad) = pads.iter().find(|&&p| !(-lim..=lim).contains(&p)) {
        return Err(Error::node(
            name,
            op,
            format!("pad amount {bad} is outside -{lim}..={lim}"),
        ));
    }
    let axes: Vec<usize> = match axes {
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
    if pads.len() != 2 * axes.len() || axes.iter().any(|&x| x >= r) {
        return Err(Error::node(
            name,
            op,
            format!("pads {pads:?} do not match the axes {axes:?} of rank {r}"),
        ));
    }
    let (mut begins, mut ends) = (vec![0i64; r], vec![0i64; r]);
    for (i, &ax) in axes.iter().enumerate() {
        begins[ax] = pads[i];
        ends[ax] = pads[i + axes.len()];
    }
    let mode = match mode_s.as_str() {
        "constant" => PadMode::Constant(value),
        "reflect" => PadMode::Reflect,
        "edge" => PadMode::Edge,
        "wrap" => PadMode::Wrap,
        m => {
            return Err(Error::node(
                name,
                op,
                format!("attribute 'mode': unknown value '{m}'"),
            ))
        }
    };
    Ok(Lowered::Node(Op::Pad { begins, ends, mode }, vec![x]))
}

/// `Split`.
fn parse_split(im: &mut Importer<'_>, n: &Node<'_>) -> Result<Lowered> {
    let Node {
        node, name, op, a, ..
    } = *n;
    let shape = |t: TensorId| im.g.tensors[t].shape.clone();
    let ints = |i: usize, what: &str| -> Result<Option<Vec<i64>>> {
        match n.input(i) {
            None => Ok(None),
            Some(t) => im
                .const_ints(t)
                .map(Some)
                .ok_or_else(|| err_const(node, name, &[i], what)),
        }
    };
    let x = n.req(0)?;
    let xs = shape(x);
    let axis = a.axis("axis", 0, xs.len())?;
    let d = xs[axis];
    let outs = node.output.len();
    let sizes: Vec<i64> = if let Some(s) = if im.opset < 13 {
        a.ints("split")?.map(<[i64]>::to_vec)
    } else {
        ints(1, "split")?
    } {
        s
    } else {
        let k = if a.has("num_outputs") {
            let k = a.int("num_outputs", 1)?;
            if k < 1 || k as usize > d.max(1) || k as usize != outs {
                return Err(a.err(
                    "num_outputs",
                    format!("{k} is not in 1..={d} or does not match the {outs} outputs"),
                ));
            }
            k as usize
        } else {
            outs
        };
        if k == 0 {
            return Err(Error::node(name, op, "no outputs"));
        }
        let chunk = d.div_ceil(k);
        (0..k)
            .map(|i| chunk.min(d.saturating_sub(i * chunk)) as i64)
            .collect()
    };
    if sizes.iter().sum::<i64>() != d as i64 || sizes.len() != outs {
        return Err(Error::node(
            name,
            op,
            format!(
                "split sizes {sizes:?} do not cover axis {axis} of length {d} with {outs} outputs"
            ),
        ));
    }
    if sizes.contains(&0) {
        return Err(Error::unsupported(
            name,
            op,
            "an empty split (zero-sized tensors are not supported)",
        ));
    }
    let mut at = 0i64;
    let mut list = Vec::new();
    for &s in &sizes {
        let mut starts = vec![0i64; xs.len()];
        starts[axis] = at;
        let mut out = xs.clone();
        out[axis] = s as usize;
        list.push((
            Op::Slice {
                starts,
                steps: vec![1; xs.len()],
                out,
            },
            vec![x],
        ));
        at += s;
    }
    Ok(Lowered::Many(list))
}

/// `Expand`.
fn parse_expand(im: &mut Importer<'_>, n: &Node<'_>) -> Result<Lowered> {
    let Node { node, name, op, .. } = *n;
    let ints = |i: usize, what: &str| -> Result<Option<Vec<i64>>> {
        match n.input(i) {
            None => Ok(None),
            Some(t) => im
                .const_ints(t)
                .map(Some)
                .ok_or_else(|| err_const(node, name, &[i], what)),
        }
    };
    let to = ints(1, "the shape input")?
        .ok_or_else(|| Error::node(name, op, "missing input 'shape'"))?;
    if to.iter().any(|&v| v < 0) {
        return Err(Error::node(
            name,
            op,
            format!("negative dimension in {to:?}"),
        ));
    }
    Ok(Lowered::Node(
        Op::Expand(to.iter().map(|&v| v as usize).collect()),
        vec![n.req(0)?],
    ))
}

/// `Tile`.
fn parse_tile(im: &mut Importer<'_>, n: &Node<'_>) -> Result<Lowered> {
    let Node { node, name, op, .. } = *n;
    let ints = |i: usize, what: &str| -> Result<Option<Vec<i64>>> {
        match n.input(i) {
            None => Ok(None),
            Some(t) => im
                .const_ints(t)
                .map(Some)
                .ok_or_else(|| err_const(node, name, &[i], what)),
        }
    };
    let reps =
        ints(1, "repeats")?.ok_or_else(|| Error::node(name, op, "missing input 'repeats'"))?;
    if reps.iter().any(|&v| v < 1) {
        return Err(Error::unsupported(
            name,
            op,
            format!("repeats {reps:?} (zero-sized tensors are not supported)"),
        ));
    }
    Ok(Lowered::Node(
        Op::Tile(reps.iter().map(|&v| v as usize).collect()),
        vec![n.req(0)?],
    ))
}

/// `Trilu`.
fn parse_trilu(im: &mut Importer<'_>, n: &Node<'_>) -> Result<Lowered> {
    let Node {
        node, name, op, a, ..
    } = *n;
    let ints = |i: usize, what: &str| -> Result<Option<Vec<i64>>> {
        match n.input(i) {
            None => Ok(None),
            Some(t) => im
                .const_ints(t)
                .map(Some)
                .ok_or_else(|| err_const(node, name, &[i], what)),
        }
    };
    let x = n.req(0)?;
    let k = match ints(1, "k")?.as_deref() {
        None => 0,
        Some(&[k]) => k,
        Some(v) => {
            return Err(Error::node(
                name,
                op,
                format!("k must hold one value, got {}", v.len()),
            ))
        }
    };
    let upper = a.int("upper", 1)? != 0;
    Ok(Lowered::Node(Op::Trilu { upper, k }, vec![x]))
}

/// `Gather`.
fn parse_gather(im: &mut Importer<'_>, n: &Node<'_>) -> Result<Lowered> {
    let Node { name, op, a, .. } = *n;
    let shape = |t: TensorId| im.g.tensors[t].shape.clone();
    let x = n.req(0)?;
    let axis = a.axis("axis", 0, shape(x).len())?;
    let idx = n.req(1)?;
    if !matches!(im.g.tensors[idx].dtype, DType::I64 | DType::I32) {
        return Err(Error::unsupported(
            name,
            op,
            format!("indices of dtype {}", im.g.tensors[idx].dtype),
        ));
    }
    if let Some(c) = im.const_tensor(Some(idx)) {
        let n = shape(x)[axis] as i64;
        if let Some(&bad) = c.to_i64_vec().iter().find(|&&i| i < -n || i >= n) {
            return Err(Error::node(
                name,
                op,
                format!("constant index {bad} is out of range for axis {axis} of length {n}"),
            ));
        }
    }
    Ok(Lowered::Node(Op::Gather { axis }, vec![x, idx]))
}
