//! Elementwise ops: binary arithmetic with numpy broadcasting and unary math. Shape rules, reference evaluation,
//! and the broadcasting helper that codegen uses to walk inputs with per-dimension strides.

use super::{arity, f32s, want_f32};
use crate::ir::op::{BinOp, UnOp};
use crate::ir::types::{numel, strides, DType, Data, Shape, Tensor};

/// The numpy broadcast of two shapes.
pub fn broadcast_shapes(a: &[usize], b: &[usize]) -> Result<Shape, String> {
    let rank = a.len().max(b.len());
    let mut out = vec![0; rank];
    for i in 0..rank {
        let da = if i + a.len() >= rank {
            a[i + a.len() - rank]
        } else {
            1
        };
        let db = if i + b.len() >= rank {
            b[i + b.len() - rank]
        } else {
            1
        };
        out[i] = match (da, db) {
            (x, y) if x == y => x,
            (1, y) => y,
            (x, 1) => x,
            _ => return Err(format!("shapes {a:?} and {b:?} do not broadcast")),
        };
    }
    Ok(out)
}

/// Strides (in elements) to read `shape` broadcast to `out`: 0 on broadcast dimensions.
pub fn broadcast_strides(shape: &[usize], out: &[usize]) -> Vec<usize> {
    let st = strides(shape);
    let off = out.len() - shape.len();
    (0..out.len())
        .map(|i| {
            if i < off || shape[i - off] == 1 {
                0
            } else {
                st[i - off]
            }
        })
        .collect()
}

pub(crate) fn infer_binary(inputs: &[(DType, &[usize])]) -> Result<Vec<(DType, Shape)>, String> {
    arity(inputs, 2, 2)?;
    if inputs[0].0 != inputs[1].0 {
        return Err(format!(
            "input dtypes differ: {} and {}",
            inputs[0].0, inputs[1].0
        ));
    }
    Ok(vec![(
        inputs[0].0,
        broadcast_shapes(inputs[0].1, inputs[1].1)?,
    )])
}

pub(crate) fn infer_unary(inputs: &[(DType, &[usize])]) -> Result<Vec<(DType, Shape)>, String> {
    arity(inputs, 1, 1)?;
    Ok(vec![(inputs[0].0, inputs[0].1.to_vec())])
}

/// Reference semantics of a binary op on one pair of floats.
pub fn apply_binary(op: BinOp, a: f32, b: f32) -> f32 {
    match op {
        BinOp::Add => a + b,
        BinOp::Sub => a - b,
        BinOp::Mul => a * b,
        BinOp::Div => a / b,
        BinOp::Max => a.max(b),
        BinOp::Min => a.min(b),
    }
}

fn apply_binary_i64(op: BinOp, a: i64, b: i64) -> Result<i64, String> {
    Ok(match op {
        BinOp::Add => a.wrapping_add(b),
        BinOp::Sub => a.wrapping_sub(b),
        BinOp::Mul => a.wrapping_mul(b),
        BinOp::Div => a.checked_div(b).ok_or("integer division by zero")?,
        BinOp::Max => a.max(b),
        BinOp::Min => a.min(b),
    })
}

/// Reference semantics of a unary op on one float.
pub fn apply_unary(op: UnOp, x: f32) -> f32 {
    match op {
        UnOp::Relu => x.max(0.0),
        UnOp::Sigmoid => 1.0 / (1.0 + (-x).exp()),
        UnOp::Tanh => x.tanh(),
        UnOp::Exp => x.exp(),
        UnOp::Neg => -x,
        UnOp::Abs => x.abs(),
        UnOp::Sqrt => x.sqrt(),
        UnOp::Reciprocal => 1.0 / x,
        UnOp::Clip(lo, hi) => x.max(lo).min(hi),
        UnOp::Identity => x,
        UnOp::LeakyRelu(a) => x.max(0.0) + a * x.min(0.0),
        UnOp::HardSigmoid(a, b) => (a * x + b).clamp(0.0, 1.0),
        UnOp::HardSwish => x * (x / 6.0 + 0.5).clamp(0.0, 1.0),
        UnOp::Elu(a) => x.max(0.0) + a * (x.min(0.0).exp() - 1.0),
        UnOp::Selu(a, g) => g * (x.max(0.0) + a * (x.min(0.0).exp() - 1.0)),
    }
}

/// Visits every output index of a broadcast, yielding the flat offsets into `a` and `b`.
fn for_each_broadcast(out: &[usize], sa: &[usize], sb: &[usize], mut f: impl FnMut(usize, usize)) {
    let n = numel(out);
    let mut idx = vec![0usize; out.len()];
    for _ in 0..n {
        let oa: usize = idx.iter().zip(sa).map(|(i, s)| i * s).sum();
        let ob: usize = idx.iter().zip(sb).map(|(i, s)| i * s).sum();
        f(oa, ob);
        for d in (0..out.len()).rev() {
            idx[d] += 1;
            if idx[d] < out[d] {
                break;
            }
            idx[d] = 0;
        }
    }
}

pub(crate) fn eval_binary(op: BinOp, inputs: &[&Tensor]) -> Result<Vec<Tensor>, String> {
    arity(inputs, 2, 2)?;
    let (a, b) = (inputs[0], inputs[1]);
    let out = broadcast_shapes(&a.shape, &b.shape)?;
    let (sa, sb) = (
        broadcast_strides(&a.shape, &out),
        broadcast_strides(&b.shape, &out),
    );
    match (&a.data, &b.data) {
        (Data::F32(x), Data::F32(y)) => {
            let mut v = Vec::with_capacity(numel(&out));
            for_each_broadcast(&out, &sa, &sb, |i, j| v.push(apply_binary(op, x[i], y[j])));
            Ok(vec![Tensor::f32(out, v)])
        }
        (Data::I64(x), Data::I64(y)) => {
            let mut v = Vec::with_capacity(numel(&out));
            let mut err = None;
            for_each_broadcast(&out, &sa, &sb, |i, j| {
                match apply_binary_i64(op, x[i], y[j]) {
                    Ok(r) => v.push(r),
                    Err(e) => err = Some(e),
                }
            });
            if let Some(e) = err {
                return Err(e);
            }
            Ok(vec![Tensor {
                dtype: a.dtype,
                shape: out,
                data: Data::I64(v),
            }])
        }
        _ => Err(format!("input dtypes differ: {} and {}", a.dtype, b.dtype)),
    }
}

pub(crate) fn eval_unary(op: UnOp, inputs: &[&Tensor]) -> Result<Vec<Tensor>, String> {
    arity(inputs, 1, 1)?;
    if op == UnOp::Identity {
        return Ok(vec![inputs[0].clone()]);
    }
    if let Data::I64(v) = &inputs[0].data {
        // Integer forms fold shape arithmetic (e.g. Neg of a Shape-derived axis).
        let f: fn(i64) -> i64 = match op {
            UnOp::Neg => |x| x.wrapping_neg(),
            UnOp::Abs => |x| x.wrapping_abs(),
            UnOp::Relu => |x| x.max(0),
            _ => return Err(format!("{op:?} needs f32 input, got {}", inputs[0].dtype)),
        };
        let t = Tensor {
            dtype: inputs[0].dtype,
            shape: inputs[0].shape.clone(),
            data: Data::I64(v.iter().map(|&x| f(x)).collect()),
        };
        return Ok(vec![t]);
    }
    want_f32(inputs[0].dtype, "input")?;
    let x = f32s(inputs[0], "input")?;
    Ok(vec![Tensor::f32(
        inputs[0].shape.clone(),
        x.iter().map(|&v| apply_unary(op, v)).collect(),
    )])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn broadcast_rules() {
        assert_eq!(broadcast_shapes(&[2, 3, 4], &[4]).unwrap(), vec![2, 3, 4]);
        assert_eq!(
            broadcast_shapes(&[2, 1, 4], &[3, 1]).unwrap(),
            vec![2, 3, 4]
        );
        assert!(broadcast_shapes(&[2, 3], &[4]).is_err());
        assert_eq!(broadcast_strides(&[3, 1], &[2, 3, 4]), vec![0, 1, 0]);
    }

    #[test]
    fn binary_broadcast_values() {
        let a = Tensor::f32(vec![2, 2], vec![1.0, 2.0, 3.0, 4.0]);
        let b = Tensor::f32(vec![2], vec![10.0, 20.0]);
        let r = eval_binary(BinOp::Sub, &[&a, &b]).unwrap();
        assert_eq!(r[0].as_f32().unwrap(), &[-9.0, -18.0, -7.0, -16.0]);
    }
}
