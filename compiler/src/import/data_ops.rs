//! ONNX → IR mapping of the data ops: Cast / CastLike, ConstantOfShape and Range (compile-time constants),
//! Expand, Tile, Trilu and Gather (Slice, Pad and Split are `slice_ops.rs`). Index arguments (shapes, repeats,
//! k) must be constants, which shape-folded graphs have.

use super::importer::Importer;
use super::nodes::{err_const, Lowered, Node, Parser};
use super::tensor::decode;
use crate::error::{Error, Result};
use crate::ir::types::{checked_numel, MAX_RANK};
use crate::ir::{numel, DType, Op, Tensor, TensorId};

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
    ("Expand, Tile", "constant shape / repeats"),
    ("Trilu", "any dtype, rank >= 2; constant k"),
    (
        "Gather",
        "any axis; run-time or constant i64/i32 indices (clamped at run time)",
    ),
];

impl Importer<'_> {
    pub(super) fn const_tensor(&self, t: Option<TensorId>) -> Option<Tensor> {
        t.and_then(|t| self.g.constant(t).cloned())
    }

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
    (&["Cast", "CastLike"], parse_cast),
    (&["ConstantOfShape"], parse_constant_of_shape),
    (&["Range"], parse_range),
    (&["Expand"], parse_expand),
    (&["Tile"], parse_tile),
    (&["Trilu"], parse_trilu),
    (&["Gather"], parse_gather),
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
    let Node { name, op, a, .. } = *n;
    let dims = im.const_input(n, 0, "the shape input")?.unwrap_or_default();
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

/// `Expand`.
fn parse_expand(im: &mut Importer<'_>, n: &Node<'_>) -> Result<Lowered> {
    let Node { name, op, .. } = *n;
    let to = im
        .const_input(n, 1, "the shape input")?
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
    let Node { name, op, .. } = *n;
    let reps = im
        .const_input(n, 1, "repeats")?
        .ok_or_else(|| Error::node(name, op, "missing input 'repeats'"))?;
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
    let Node { name, op, a, .. } = *n;
    let x = n.req(0)?;
    let k = match im.const_input(n, 1, "k")?.as_deref() {
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
