//! Index-mapping data movement: Slice, Pad (constant, reflect, edge, wrap; negative pads crop), Expand and Tile
//! are each described by per-axis offset tables (`offset_tables`): for every output coordinate on an axis, the
//! input element offset it reads, or `FILL` for a padded position. The reference evaluation below and the
//! generated kernel (`codegen/ops/data.rs`) both walk these same tables. Gather (run-time indices) lives here too.

use super::args::arity;
use super::elementwise::{broadcast_shapes, broadcast_strides};
use crate::ir::types::{numel, strides, DType, Data, Shape, Tensor};
use crate::ir::{Op, PadMode};

/// Table entry for an output position that is filled rather than read (Pad's constant mode).
pub const FILL: i64 = -(1 << 40);

/// Most entries the offset tables of one op may hold together (the sum of the output's dims): the tables are
/// built on the host and become a constant of the bundle.
pub const MAX_TABLE_ENTRIES: usize = 1 << 26;

/// The output shape of an index-mapping op, with checked arithmetic and without building any table (shape
/// inference runs on every node before sizes are checked, so it must not allocate by the output's size).
pub fn mapped_shape(op: &Op, input: &[usize]) -> Result<Shape, String> {
    let r = input.len();
    let check_rank = |n: usize, what: &str| {
        if n != r {
            Err(format!("{what} has {n} entries for an input of rank {r}"))
        } else {
            Ok(())
        }
    };
    match op {
        Op::Slice { starts, steps, out } => {
            check_rank(starts.len(), "starts")?;
            check_rank(steps.len(), "steps")?;
            check_rank(out.len(), "output shape")?;
            for d in 0..r {
                if out[d] == 0 {
                    continue;
                }
                // The coordinates are linear in the output index: the two ends bound them all.
                let last = starts[d] as i128 + (out[d] as i128 - 1) * steps[d] as i128;
                let n = input[d] as i128;
                if !(0..n).contains(&(starts[d] as i128)) || !(0..n).contains(&last) {
                    return Err(format!(
                        "slice of axis {d} (start {}, step {}, {} elements) leaves the input's {} elements",
                        starts[d], steps[d], out[d], input[d]
                    ));
                }
            }
            Ok(out.clone())
        }
        Op::Pad { begins, ends, mode } => {
            check_rank(begins.len(), "pads (begin)")?;
            check_rank(ends.len(), "pads (end)")?;
            (0..r)
                .map(|d| {
                    let len = input[d] as i128 + begins[d] as i128 + ends[d] as i128;
                    if len < 0 {
                        return Err(format!(
                            "pads crop axis {d} of length {} below zero",
                            input[d]
                        ));
                    }
                    if input[d] == 0 && len > 0 && !matches!(mode, PadMode::Constant(_)) {
                        return Err(format!("cannot {mode:?}-pad the empty axis {d}"));
                    }
                    usize::try_from(len).map_err(|_| format!("padded axis {d} is too long"))
                })
                .collect()
        }
        Op::Expand(shape) => broadcast_shapes(input, shape),
        Op::Tile(reps) => {
            check_rank(reps.len(), "repeats")?;
            input
                .iter()
                .zip(reps)
                .enumerate()
                .map(|(d, (a, b))| {
                    a.checked_mul(*b)
                        .ok_or_else(|| format!("axis {d}: {a} x {b} repeats overflows"))
                })
                .collect()
        }
        _ => Err(format!("{} is not an index-mapping op", op.name())),
    }
}

/// The output shape and, per output axis, the input element offset of every coordinate (or `FILL`). The
/// tables hold one entry per output coordinate of each axis, at most [`MAX_TABLE_ENTRIES`] together.
pub fn offset_tables(op: &Op, input: &[usize]) -> Result<(Shape, Vec<Vec<i64>>), String> {
    let out = mapped_shape(op, input)?;
    let entries = out.iter().try_fold(0usize, |a, &d| a.checked_add(d));
    if entries.is_none_or(|e| e > MAX_TABLE_ENTRIES) {
        return Err(format!(
            "output shape {out:?} needs index tables of more than {MAX_TABLE_ENTRIES} entries"
        ));
    }
    let st = strides(input);
    let r = input.len();
    let tabs: Vec<Vec<i64>> = match op {
        Op::Slice { starts, steps, .. } => (0..r)
            .map(|d| {
                (0..out[d] as i64)
                    .map(|o| (starts[d] + o * steps[d]) * st[d] as i64)
                    .collect()
            })
            .collect(),
        Op::Pad { begins, mode, .. } => (0..r)
            .map(|d| {
                let n = input[d] as i64;
                (0..out[d] as i64)
                    .map(|o| {
                        let i = o - begins[d];
                        let i = if (0..n).contains(&i) {
                            i
                        } else {
                            match mode {
                                PadMode::Constant(_) => return FILL,
                                PadMode::Edge => i.clamp(0, n - 1),
                                PadMode::Wrap => i.rem_euclid(n),
                                PadMode::Reflect => reflect(i, n),
                            }
                        };
                        i * st[d] as i64
                    })
                    .collect()
            })
            .collect(),
        Op::Expand(_) => {
            let bs = broadcast_strides(input, &out);
            (0..out.len())
                .map(|d| (0..out[d]).map(|o| (o * bs[d]) as i64).collect())
                .collect()
        }
        Op::Tile(_) => (0..r)
            .map(|d| {
                (0..out[d])
                    .map(|o| ((o % input[d].max(1)) * st[d]) as i64)
                    .collect()
            })
            .collect(),
        _ => return Err(format!("{} is not an index-mapping op", op.name())),
    };
    Ok((out, tabs))
}

/// Reflects an out-of-range coordinate into [0, n) without repeating the edge (numpy 'reflect').
fn reflect(i: i64, n: i64) -> i64 {
    if n == 1 {
        return 0;
    }
    let period = 2 * (n - 1);
    let m = i.rem_euclid(period);
    if m < n {
        m
    } else {
        period - m
    }
}

pub(crate) fn infer_mapped(
    op: &Op,
    inputs: &[(DType, &[usize])],
) -> Result<Vec<(DType, Shape)>, String> {
    arity(inputs, 1, 1)?;
    Ok(vec![(inputs[0].0, mapped_shape(op, inputs[0].1)?)])
}

fn map_values<T: Copy>(src: &[T], out: &[usize], tabs: &[Vec<i64>], fill: T) -> Vec<T> {
    let n = numel(out);
    let mut v = Vec::with_capacity(n);
    let mut idx = vec![0usize; out.len()];
    for _ in 0..n {
        let mut off = 0i64;
        let mut filled = false;
        for (d, &i) in idx.iter().enumerate() {
            let t = tabs[d][i];
            filled |= t == FILL;
            off += t;
        }
        v.push(if filled { fill } else { src[off as usize] });
        super::args::advance(&mut idx, out);
    }
    v
}

/// The constant Pad fills with (0 for other modes and ops).
pub fn fill_value(op: &Op) -> f64 {
    match op {
        Op::Pad {
            mode: PadMode::Constant(v),
            ..
        } => *v,
        _ => 0.0,
    }
}

pub(crate) fn eval_mapped(op: &Op, inputs: &[&Tensor]) -> Result<Vec<Tensor>, String> {
    arity(inputs, 1, 1)?;
    let x = inputs[0];
    let (out, tabs) = offset_tables(op, &x.shape)?;
    let fill = fill_value(op);
    let data = match &x.data {
        Data::F32(v) => Data::F32(map_values(v, &out, &tabs, fill as f32)),
        Data::I64(v) => Data::I64(map_values(v, &out, &tabs, fill as i64)),
    };
    Ok(vec![Tensor {
        dtype: x.dtype,
        shape: out,
        data,
    }])
}

/// Gather geometry: (outer, axis length, number of indices, inner).
pub type GatherGeom = (usize, usize, usize, usize);

/// The gather geometry and the output shape.
pub fn gather_geom(
    data: &[usize],
    indices: &[usize],
    axis: usize,
) -> Result<(GatherGeom, Shape), String> {
    if axis >= data.len() {
        return Err(format!("axis {axis} out of range for rank {}", data.len()));
    }
    let mut out = data[..axis].to_vec();
    out.extend_from_slice(indices);
    out.extend_from_slice(&data[axis + 1..]);
    Ok((
        (
            numel(&data[..axis]),
            data[axis],
            numel(indices),
            numel(&data[axis + 1..]),
        ),
        out,
    ))
}

pub(crate) fn infer_gather(
    inputs: &[(DType, &[usize])],
    axis: usize,
) -> Result<Vec<(DType, Shape)>, String> {
    arity(inputs, 2, 2)?;
    if !matches!(inputs[1].0, DType::I64 | DType::I32) {
        return Err(format!("indices must be i64 or i32, got {}", inputs[1].0));
    }
    let (_, out) = gather_geom(inputs[0].1, inputs[1].1, axis)?;
    Ok(vec![(inputs[0].0, out)])
}

pub(crate) fn eval_gather(inputs: &[&Tensor], axis: usize) -> Result<Vec<Tensor>, String> {
    arity(inputs, 2, 2)?;
    let (x, ind) = (inputs[0], inputs[1]);
    let ((outer, n, _, inner), out) = gather_geom(&x.shape, &ind.shape, axis)?;
    let idx: Vec<usize> = ind
        .to_i64_vec()
        .iter()
        .map(|&i| {
            let j = if i < 0 { i + n as i64 } else { i };
            if (0..n as i64).contains(&j) {
                Ok(j as usize)
            } else {
                Err(format!(
                    "index {i} out of range for axis {axis} of length {n}"
                ))
            }
        })
        .collect::<Result<_, _>>()?;
    fn pick<T: Copy>(v: &[T], outer: usize, n: usize, inner: usize, idx: &[usize]) -> Vec<T> {
        let mut r = Vec::with_capacity(outer * idx.len() * inner);
        for o in 0..outer {
            for &i in idx {
                let at = (o * n + i) * inner;
                r.extend_from_slice(&v[at..at + inner]);
            }
        }
        r
    }
    let data = match &x.data {
        Data::F32(v) => Data::F32(pick(v, outer, n, inner, &idx)),
        Data::I64(v) => Data::I64(pick(v, outer, n, inner, &idx)),
    };
    Ok(vec![Tensor {
        dtype: x.dtype,
        shape: out,
        data,
    }])
}

/// Whether Trilu keeps element (i, j) of a matrix: on or above diagonal `k` for the upper triangle, on or below
/// it for the lower.
pub fn trilu_keeps(upper: bool, k: i64, i: usize, j: usize) -> bool {
    let d = j as i64 - i as i64;
    if upper {
        d >= k
    } else {
        d <= k
    }
}

fn infer_trilu(inputs: &[(DType, &[usize])]) -> Result<Vec<(DType, Shape)>, String> {
    arity(inputs, 1, 1)?;
    let (dt, s) = inputs[0];
    if s.len() < 2 {
        return Err(format!("input of rank {} (Trilu needs rank >= 2)", s.len()));
    }
    Ok(vec![(dt, s.to_vec())])
}

/// Trilu of any dtype: the elements off the triangle become zero (0.0 or 0).
fn eval_trilu(inputs: &[&Tensor], upper: bool, k: i64) -> Result<Vec<Tensor>, String> {
    arity(inputs, 1, 1)?;
    let x = inputs[0];
    infer_trilu(&[(x.dtype, &x.shape)])?;
    let r = x.shape.len();
    let (rows, cols) = (x.shape[r - 2], x.shape[r - 1]);
    let off = |e: usize| !trilu_keeps(upper, k, e / cols % rows, e % cols);
    let data = match &x.data {
        Data::F32(v) => Data::F32(
            v.iter()
                .enumerate()
                .map(|(e, &a)| if off(e) { 0.0 } else { a })
                .collect(),
        ),
        Data::I64(v) => Data::I64(
            v.iter()
                .enumerate()
                .map(|(e, &a)| if off(e) { 0 } else { a })
                .collect(),
        ),
    };
    Ok(vec![Tensor {
        dtype: x.dtype,
        shape: x.shape.clone(),
        data,
    }])
}

/// The dtype and shape of each output of this family's `op` (`ops::infer`).
pub fn infer(op: &Op, inputs: &[(DType, &[usize])]) -> Result<Vec<(DType, Shape)>, String> {
    match op {
        Op::Slice { .. } | Op::Pad { .. } | Op::Expand(_) | Op::Tile(_) => infer_mapped(op, inputs),
        Op::Gather { axis } => infer_gather(inputs, *axis),
        Op::Trilu { .. } => infer_trilu(inputs),
        _ => Err(format!("{} is not in the index family", op.name())),
    }
}

/// Evaluates this family's `op` (`ops::eval`).
pub fn eval(op: &Op, inputs: &[&Tensor]) -> Result<Vec<Tensor>, String> {
    match op {
        Op::Slice { .. } | Op::Pad { .. } | Op::Expand(_) | Op::Tile(_) => eval_mapped(op, inputs),
        Op::Gather { axis } => eval_gather(inputs, *axis),
        Op::Trilu { upper, k } => eval_trilu(inputs, *upper, *k),
        _ => Err(format!("{} is not in the index family", op.name())),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn trilu_keeps_a_triangle() {
        let x = Tensor::f32(vec![3, 3], (1..=9).map(|v| v as f32).collect());
        let up = eval(&Op::Trilu { upper: true, k: 0 }, &[&x])
            .unwrap()
            .remove(0);
        assert_eq!(
            up.as_f32().unwrap(),
            &[1.0, 2.0, 3.0, 0.0, 5.0, 6.0, 0.0, 0.0, 9.0]
        );
        let x = Tensor::i64(vec![2, 2, 3], (1..=12).collect());
        let low = eval(
            &Op::Trilu {
                upper: false,
                k: -1,
            },
            &[&x],
        )
        .unwrap()
        .remove(0);
        assert_eq!(low.to_i64_vec(), vec![0, 0, 0, 4, 0, 0, 0, 0, 0, 10, 0, 0]);
        let v = Tensor::f32(vec![3], vec![1.0; 3]);
        assert!(eval(&Op::Trilu { upper: true, k: 0 }, &[&v]).is_err());
    }

    #[test]
    fn pad_modes_match_numpy() {
        let x = Tensor::f32(vec![4], vec![1.0, 2.0, 3.0, 4.0]);
        let run = |mode| {
            let op = Op::Pad {
                begins: vec![3],
                ends: vec![2],
                mode,
            };
            eval_mapped(&op, &[&x]).unwrap()[0].to_f32_vec()
        };
        // numpy.pad([1,2,3,4], (3,2), mode=...)
        assert_eq!(run(PadMode::Reflect), [4., 3., 2., 1., 2., 3., 4., 3., 2.]);
        assert_eq!(run(PadMode::Edge), [1., 1., 1., 1., 2., 3., 4., 4., 4.]);
        assert_eq!(run(PadMode::Wrap), [2., 3., 4., 1., 2., 3., 4., 1., 2.]);
        assert_eq!(
            run(PadMode::Constant(9.0)),
            [9., 9., 9., 1., 2., 3., 4., 9., 9.]
        );
    }

    #[test]
    fn slice_negative_step_and_bounds() {
        let x = Tensor::i64(vec![2, 3], vec![0, 1, 2, 3, 4, 5]);
        let op = Op::Slice {
            starts: vec![1, 2],
            steps: vec![-1, -2],
            out: vec![2, 2],
        };
        assert_eq!(
            eval_mapped(&op, &[&x]).unwrap()[0].to_i64_vec(),
            [5, 3, 2, 0]
        );
        let bad = Op::Slice {
            starts: vec![0, 2],
            steps: vec![1, 1],
            out: vec![2, 2],
        };
        assert!(eval_mapped(&bad, &[&x]).is_err());
    }

    #[test]
    fn gather_negative_index() {
        let x = Tensor::f32(vec![3, 2], vec![0., 1., 2., 3., 4., 5.]);
        let i = Tensor::i64(vec![2], vec![-1, 0]);
        let r = eval_gather(&[&x, &i], 0).unwrap();
        assert_eq!(r[0].shape, vec![2, 2]);
        assert_eq!(r[0].to_f32_vec(), [4., 5., 0., 1.]);
        assert!(eval_gather(&[&x, &Tensor::i64(vec![1], vec![3])], 0).is_err());
    }
}
