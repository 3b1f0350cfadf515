//! ONNX → IR mapping of the ops that cut and extend along axes: Slice, Pad and Split (one Slice per output).
//! Starts, ends, axes, steps, pads and split sizes must be constants, which shape-folded graphs have.

use super::importer::Importer;
use super::nodes::{err_const, Lowered, Node, Parser};
use crate::error::{Error, Result};
use crate::ir::{Op, PadMode, TensorId};

/// The ONNX ops this file maps, for `bundlec ops`.
pub const SUPPORTED: &[(&str, &str)] = &[
    ("Slice", "constant starts/ends/axes/steps, negative steps"),
    (
        "Pad",
        "constant, reflect, edge, wrap; constant pads (negative crops), axes",
    ),
    (
        "Split",
        "constant split sizes, or num_outputs / equal parts",
    ),
];

/// The parsers of this file's op types.
pub(super) const PARSERS: &[Parser] = &[
    (&["Slice"], parse_slice),
    (&["Pad"], parse_pad),
    (&["Split"], parse_split),
];

/// `Slice`.
fn parse_slice(im: &mut Importer<'_>, n: &Node<'_>) -> Result<Lowered> {
    let Node { name, op, a, .. } = *n;
    let shape = |t: TensorId| im.g.tensors[t].shape.clone();
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
            im.const_input(n, 1, "starts")?,
            im.const_input(n, 2, "ends")?,
            im.const_input(n, 3, "axes")?,
            im.const_input(n, 4, "steps")?,
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
    let x = n.req(0)?;
    let r = shape(x).len();
    let mode_s = a.string("mode", "constant")?;
    let (pads, value, axes) = if im.opset < 11 {
        let p = a
            .ints("pads")?
            .ok_or_else(|| Error::node(name, op, "attribute 'pads' is required"))?;
        (p.to_vec(), a.float("value", 0.0)? as f64, None)
    } else {
        let p = im
            .const_input(n, 1, "pads")?
            .ok_or_else(|| Error::node(name, op, "missing input 'pads'"))?;
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
        (p, v, im.const_input(n, 3, "axes")?)
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
    let x = n.req(0)?;
    let xs = shape(x);
    let axis = a.axis("axis", 0, xs.len())?;
    let d = xs[axis];
    let outs = node.output.len();
    let sizes: Vec<i64> = if let Some(s) = if im.opset < 13 {
        a.ints("split")?.map(<[i64]>::to_vec)
    } else {
        im.const_input(n, 1, "split")?
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
