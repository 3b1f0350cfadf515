//! Reductions: ReduceSum/Mean/Max/Min/Prod/L1/L2/SumSquare/LogSum/LogSumExp over a set of axes and ArgMax/ArgMin
//! along one axis. `reduce_geom` gives the `[outer, len, inner]` row geometry (with the transpose needed first
//! when the reduced axes are not adjacent) that codegen shares; `reduce_row` is the per-row semantics.

use super::args::arity;
use super::shape::eval_transpose;
use crate::ir::attrs::ReduceKind;
use crate::ir::op::Op;
use crate::ir::types::{numel, DType, Data, Shape, Tensor};

/// The output shape of reducing `axes` of `shape`.
pub fn reduced_shape(shape: &[usize], axes: &[usize], keepdims: bool) -> Shape {
    (0..shape.len())
        .filter_map(|d| match (axes.contains(&d), keepdims) {
            (false, _) => Some(shape[d]),
            (true, true) => Some(1),
            (true, false) => None,
        })
        .collect()
}

/// Row geometry of a reduction: `perm` (when the reduced axes must first be moved last; `None` when they are
/// already adjacent) and `(outer, len, inner)` of the (possibly permuted) input.
pub fn reduce_geom(shape: &[usize], axes: &[usize]) -> (Option<Vec<usize>>, (usize, usize, usize)) {
    // Axes of size 1 never matter; the rest must be one contiguous run.
    let real: Vec<usize> = axes.iter().copied().filter(|&a| shape[a] != 1).collect();
    if real.is_empty() {
        return (None, (numel(shape), 1, 1));
    }
    let (lo, hi) = (real[0], real[real.len() - 1]);
    let gap = (lo..=hi).any(|d| !axes.contains(&d) && shape[d] != 1);
    if !gap {
        return (
            None,
            (
                numel(&shape[..lo]),
                numel(&shape[lo..=hi]),
                numel(&shape[hi + 1..]),
            ),
        );
    }
    let mut perm: Vec<usize> = (0..shape.len()).filter(|d| !axes.contains(d)).collect();
    perm.extend_from_slice(axes);
    let kept: usize = perm[..shape.len() - axes.len()]
        .iter()
        .map(|&d| shape[d])
        .product();
    let len: usize = axes.iter().map(|&d| shape[d]).product();
    (Some(perm), (kept, len, 1))
}

pub(crate) fn infer_reduce(
    inputs: &[(DType, &[usize])],
    axes: &[usize],
    keepdims: bool,
) -> Result<Vec<(DType, Shape)>, String> {
    arity(inputs, 1, 1)?;
    let s = inputs[0].1;
    if let Some(&a) = axes.iter().find(|&&a| a >= s.len()) {
        return Err(format!("axis {a} out of range for shape {s:?}"));
    }
    Ok(vec![(inputs[0].0, reduced_shape(s, axes, keepdims))])
}

/// Reduces one row (reference semantics).
pub fn reduce_row(kind: ReduceKind, row: impl Iterator<Item = f32> + Clone) -> f32 {
    match kind {
        ReduceKind::Sum => row.sum(),
        ReduceKind::Mean => {
            let n = row.clone().count() as f32;
            row.sum::<f32>() / n
        }
        ReduceKind::Max => row.fold(f32::NEG_INFINITY, f32::max),
        ReduceKind::Min => row.fold(f32::INFINITY, f32::min),
        ReduceKind::Prod => row.product(),
        ReduceKind::L1 => row.map(f32::abs).sum(),
        ReduceKind::L2 => row.map(|x| x * x).sum::<f32>().sqrt(),
        ReduceKind::SumSquare => row.map(|x| x * x).sum(),
        ReduceKind::LogSum => row.sum::<f32>().ln(),
        ReduceKind::LogSumExp => {
            let m = row.clone().fold(f32::NEG_INFINITY, f32::max);
            if m == f32::NEG_INFINITY {
                return m;
            }
            m + row.map(|x| (x - m).exp()).sum::<f32>().ln()
        }
    }
}

fn rows(x: &Tensor, axes: &[usize]) -> Result<(Tensor, (usize, usize, usize)), String> {
    let (perm, geo) = reduce_geom(&x.shape, axes);
    let x = match perm {
        Some(p) => eval_transpose(&[x], &p)?.remove(0),
        None => x.clone(),
    };
    Ok((x, geo))
}

pub(crate) fn eval_reduce(
    inputs: &[&Tensor],
    kind: ReduceKind,
    axes: &[usize],
    keepdims: bool,
) -> Result<Vec<Tensor>, String> {
    let (dt, out) = infer_reduce(&[(inputs[0].dtype, &inputs[0].shape)], axes, keepdims)?.remove(0);
    let (x, (outer, len, inner)) = rows(inputs[0], axes)?;
    let data = match &x.data {
        Data::F32(v) => {
            let mut r = Vec::with_capacity(outer * inner);
            for o in 0..outer {
                for i in 0..inner {
                    let it = (0..len).map(|j| v[(o * len + j) * inner + i]);
                    r.push(reduce_row(kind, it));
                }
            }
            Data::F32(r)
        }
        Data::I64(v) => {
            let mut r = Vec::with_capacity(outer * inner);
            for o in 0..outer {
                for i in 0..inner {
                    let it = (0..len).map(|j| v[(o * len + j) * inner + i]);
                    r.push(match kind {
                        ReduceKind::Sum => it.fold(0i64, i64::wrapping_add),
                        ReduceKind::Prod => it.fold(1i64, i64::wrapping_mul),
                        ReduceKind::Max => it.max().unwrap_or(i64::MIN),
                        ReduceKind::Min => it.min().unwrap_or(i64::MAX),
                        _ => return Err(format!("{kind:?} needs f32 input, got {dt}")),
                    });
                }
            }
            Data::I64(r)
        }
    };
    Ok(vec![Tensor {
        dtype: dt,
        shape: out,
        data,
    }])
}

pub(crate) fn infer_arg(
    inputs: &[(DType, &[usize])],
    axis: usize,
    keepdims: bool,
) -> Result<Vec<(DType, Shape)>, String> {
    super::args::want_f32(inputs[0].0, "input")?;
    let (_, s) = infer_reduce(inputs, &[axis], keepdims)?.remove(0);
    Ok(vec![(DType::I64, s)])
}

pub(crate) fn eval_arg(
    inputs: &[&Tensor],
    max: bool,
    axis: usize,
    keepdims: bool,
    last: bool,
) -> Result<Vec<Tensor>, String> {
    let (_, out) = infer_arg(&[(inputs[0].dtype, &inputs[0].shape)], axis, keepdims)?.remove(0);
    let (x, (outer, len, inner)) = rows(inputs[0], &[axis])?;
    let v = x.to_f32_vec();
    let mut r = Vec::with_capacity(outer * inner);
    for o in 0..outer {
        for i in 0..inner {
            let mut best = 0usize;
            for j in 1..len {
                let (a, b) = (
                    v[(o * len + j) * inner + i],
                    v[(o * len + best) * inner + i],
                );
                let better = if max { a > b } else { a < b };
                if better || (last && a == b) {
                    best = j;
                }
            }
            r.push(best as i64);
        }
    }
    Ok(vec![Tensor::i64(out, r)])
}

/// TopK's output: the input's shape with `k` along `axis` (values of the input's dtype: f32, i32 or i64; or
/// i64 indices).
pub(crate) fn infer_topk(
    inputs: &[(DType, &[usize])],
    axis: usize,
    k: usize,
    indices: bool,
) -> Result<Vec<(DType, Shape)>, String> {
    arity(inputs, 1, 1)?;
    let dt = inputs[0].0;
    if !matches!(dt, DType::F32 | DType::I32 | DType::I64) {
        return Err(format!("input is {dt}: TopK takes f32, i32 or i64"));
    }
    let s = inputs[0].1;
    let Some(&len) = s.get(axis) else {
        return Err(format!("axis {axis} out of range for shape {s:?}"));
    };
    if k > len {
        return Err(format!("k = {k} exceeds the axis length {len}"));
    }
    let mut out = s.to_vec();
    out[axis] = k;
    Ok(vec![(if indices { DType::I64 } else { dt }, out)])
}

/// TopK (reference semantics): per row, a stable sort by value (descending for `largest`; NaN last), the first
/// `k`. Integers compare exactly (as i64).
pub(crate) fn eval_topk(
    inputs: &[&Tensor],
    axis: usize,
    k: usize,
    largest: bool,
    indices: bool,
) -> Result<Vec<Tensor>, String> {
    let (_, out) = infer_topk(&[(inputs[0].dtype, &inputs[0].shape)], axis, k, indices)?.remove(0);
    let (x, (outer, len, inner)) = rows(inputs[0], &[axis])?;
    let float = x.dtype == DType::F32;
    let (fv, iv) = match float {
        true => (x.to_f32_vec(), Vec::new()),
        false => (Vec::new(), x.to_i64_vec()),
    };
    let n = outer * k * inner;
    let (mut vals, mut ivals, mut idx) = (vec![0f32; n], vec![0i64; n], vec![0i64; n]);
    for o in 0..outer {
        for i in 0..inner {
            let pos = |j: usize| (o * len + j) * inner + i;
            let mut order: Vec<usize> = (0..len).collect();
            // Stable: equal values keep the lower index first; NaN sorts last.
            order.sort_by(|&a, &b| match float {
                true => {
                    let (x, y) = (fv[pos(a)], fv[pos(b)]);
                    let c = if largest {
                        y.partial_cmp(&x)
                    } else {
                        x.partial_cmp(&y)
                    };
                    c.unwrap_or_else(|| x.is_nan().cmp(&y.is_nan()))
                }
                false => {
                    let (x, y) = (iv[pos(a)], iv[pos(b)]);
                    if largest {
                        y.cmp(&x)
                    } else {
                        x.cmp(&y)
                    }
                }
            });
            for (r, &j) in order[..k].iter().enumerate() {
                let at = (o * k + r) * inner + i;
                match float {
                    true => vals[at] = fv[pos(j)],
                    false => ivals[at] = iv[pos(j)],
                }
                idx[at] = j as i64;
            }
        }
    }
    Ok(vec![match (indices, float) {
        (true, _) => Tensor::i64(out, idx),
        (false, true) => Tensor::f32(out, vals),
        (false, false) => Tensor::ints(x.dtype, out, ivals),
    }])
}

/// The dtype and shape of each output of this family's `op` (`ops::infer`).
pub fn infer(op: &Op, inputs: &[(DType, &[usize])]) -> Result<Vec<(DType, Shape)>, String> {
    match op {
        Op::Reduce { axes, keepdims, .. } => infer_reduce(inputs, axes, *keepdims),
        Op::ArgReduce { axis, keepdims, .. } => infer_arg(inputs, *axis, *keepdims),
        Op::TopK {
            axis, k, indices, ..
        } => infer_topk(inputs, *axis, *k, *indices),
        _ => Err(format!("{} is not in the reduce family", op.name())),
    }
}

/// Evaluates this family's `op` (`ops::eval`).
pub fn eval(op: &Op, inputs: &[&Tensor]) -> Result<Vec<Tensor>, String> {
    match op {
        Op::Reduce {
            kind,
            axes,
            keepdims,
        } => eval_reduce(inputs, *kind, axes, *keepdims),
        Op::ArgReduce {
            max,
            axis,
            keepdims,
            select_last,
        } => eval_arg(inputs, *max, *axis, *keepdims, *select_last),
        Op::TopK {
            axis,
            k,
            largest,
            indices,
        } => eval_topk(inputs, *axis, *k, *largest, *indices),
        _ => Err(format!("{} is not in the reduce family", op.name())),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn topk_is_a_stable_partial_sort() {
        let x = Tensor::f32(vec![2, 4], vec![1., 3., 3., 0., 5., f32::NAN, -1., 5.]);
        let v = eval_topk(&[&x], 1, 2, true, false).unwrap();
        assert_eq!(v[0].to_f32_vec(), [3., 3., 5., 5.]);
        let i = eval_topk(&[&x], 1, 3, true, true).unwrap();
        assert_eq!(i[0].to_i64_vec(), [1, 2, 0, 0, 3, 2]);
        let s = eval_topk(&[&x], 0, 1, false, true).unwrap();
        assert_eq!(
            (s[0].shape.clone(), s[0].to_i64_vec()),
            (vec![1, 4], vec![0, 0, 1, 0])
        );
        assert!(eval_topk(&[&x], 1, 5, true, false).is_err());
    }

    #[test]
    fn geometry_adjacent_and_gapped() {
        assert_eq!(reduce_geom(&[2, 3, 4], &[1]), (None, (2, 3, 4)));
        assert_eq!(reduce_geom(&[2, 3, 4], &[1, 2]), (None, (2, 12, 1)));
        assert_eq!(reduce_geom(&[2, 1, 4], &[0, 1]), (None, (1, 2, 4)));
        assert_eq!(
            reduce_geom(&[2, 3, 4], &[0, 2]),
            (Some(vec![1, 0, 2]), (3, 8, 1))
        );
    }

    #[test]
    fn reduce_values() {
        let x = Tensor::f32(vec![2, 3], vec![1., 2., 3., 4., 5., 6.]);
        let r = eval_reduce(&[&x], ReduceKind::Sum, &[0], false).unwrap();
        assert_eq!(r[0].to_f32_vec(), [5., 7., 9.]);
        let r = eval_reduce(&[&x], ReduceKind::Max, &[1], true).unwrap();
        assert_eq!(
            (r[0].shape.clone(), r[0].to_f32_vec()),
            (vec![2, 1], vec![3., 6.])
        );
        let r = eval_reduce(&[&x], ReduceKind::LogSumExp, &[0, 1], false).unwrap();
        let want = (1..=6).map(|v| (v as f32).exp()).sum::<f32>().ln();
        assert!((r[0].to_f32_vec()[0] - want).abs() < 1e-5);
        let a = eval_arg(
            &[&Tensor::f32(vec![4], vec![1., 3., 3., 0.])],
            true,
            0,
            false,
            true,
        );
        assert_eq!(a.unwrap()[0].to_i64_vec(), [2]);
    }
}
