//! Comparisons, logical ops and Where: Equal / Less / LessOrEqual / Greater / GreaterOrEqual on numbers of one
//! dtype give bool, And / Or / Xor / Not work on bool, Where(cond, a, b) picks from a or b, all with numpy
//! broadcasting (`broadcast_all`, whose strides codegen walks). Bools are 0 / 1.

use super::args::arity;
use super::elementwise::{broadcast_shapes, broadcast_strides};
use crate::ir::types::{numel, DType, Data, Shape, Tensor};
use crate::ir::{CmpOp, LogicOp, Op};

/// The broadcast output shape of several inputs and each input's strides over it.
pub fn broadcast_all(shapes: &[&[usize]]) -> Result<(Shape, Vec<Vec<usize>>), String> {
    let mut out: Shape = vec![];
    for s in shapes {
        out = broadcast_shapes(&out, s)?;
    }
    let st = shapes.iter().map(|s| broadcast_strides(s, &out)).collect();
    Ok((out, st))
}

pub(crate) fn infer_logic(
    op: &Op,
    inputs: &[(DType, &[usize])],
) -> Result<Vec<(DType, Shape)>, String> {
    let shapes: Vec<&[usize]> = inputs.iter().map(|i| i.1).collect();
    let (out, _) = broadcast_all(&shapes)?;
    let bool_in = |i: usize| -> Result<(), String> {
        if inputs[i].0 != DType::Bool {
            return Err(format!("input {i} must be bool, got {}", inputs[i].0));
        }
        Ok(())
    };
    let dt = match op {
        Op::Compare(_) => {
            arity(inputs, 2, 2)?;
            if inputs[0].0 != inputs[1].0 {
                return Err(format!(
                    "input dtypes differ: {} and {}",
                    inputs[0].0, inputs[1].0
                ));
            }
            DType::Bool
        }
        Op::Logic(_) => {
            arity(inputs, 2, 2)?;
            bool_in(0)?;
            bool_in(1)?;
            DType::Bool
        }
        Op::Not => {
            arity(inputs, 1, 1)?;
            bool_in(0)?;
            DType::Bool
        }
        Op::Where => {
            arity(inputs, 3, 3)?;
            bool_in(0)?;
            if inputs[1].0 != inputs[2].0 {
                return Err(format!(
                    "X and Y dtypes differ: {} and {}",
                    inputs[1].0, inputs[2].0
                ));
            }
            inputs[1].0
        }
        _ => return Err(format!("{} is not a logic op", op.name())),
    };
    Ok(vec![(dt, out)])
}

/// Reference semantics of a comparison (values of one dtype, compared as f64 which holds every f32 and every
/// integer the compared tensors hold exactly up to 2^53).
pub fn compare(op: CmpOp, a: f64, b: f64) -> bool {
    match op {
        CmpOp::Eq => a == b,
        CmpOp::Lt => a < b,
        CmpOp::Le => a <= b,
        CmpOp::Gt => a > b,
        CmpOp::Ge => a >= b,
    }
}

fn value(t: &Tensor, i: usize) -> f64 {
    match &t.data {
        Data::F32(v) => v[i] as f64,
        Data::I64(v) => v[i] as f64,
    }
}

pub(crate) fn eval_logic(op: &Op, inputs: &[&Tensor]) -> Result<Vec<Tensor>, String> {
    let types = super::args::types_of(inputs);
    let (dt, out) = infer_logic(op, &types)?.remove(0);
    let shapes: Vec<&[usize]> = inputs.iter().map(|t| t.shape.as_slice()).collect();
    let (_, st) = broadcast_all(&shapes)?;
    let n = numel(&out);
    let mut idx = vec![0usize; out.len()];
    let mut f = Vec::new();
    let mut ints = Vec::with_capacity(n);
    for _ in 0..n {
        let off = |k: usize| idx.iter().zip(&st[k]).map(|(i, s)| i * s).sum::<usize>();
        match op {
            Op::Compare(c) => {
                ints.push(compare(*c, value(inputs[0], off(0)), value(inputs[1], off(1))) as i64)
            }
            Op::Logic(l) => {
                let (a, b) = (
                    value(inputs[0], off(0)) != 0.0,
                    value(inputs[1], off(1)) != 0.0,
                );
                ints.push(match l {
                    LogicOp::And => a && b,
                    LogicOp::Or => a || b,
                    LogicOp::Xor => a != b,
                } as i64)
            }
            Op::Not => ints.push((value(inputs[0], off(0)) == 0.0) as i64),
            _ => {
                let pick = if value(inputs[0], off(0)) != 0.0 {
                    1
                } else {
                    2
                };
                match &inputs[pick].data {
                    Data::F32(v) => f.push(v[off(pick)]),
                    Data::I64(v) => ints.push(v[off(pick)]),
                }
            }
        }
        super::args::advance(&mut idx, &out);
    }
    let data = if dt == DType::F32 {
        Data::F32(f)
    } else {
        Data::I64(ints)
    };
    Ok(vec![Tensor {
        dtype: dt,
        shape: out,
        data,
    }])
}

/// The dtype and shape of each output of this family's `op` (`ops::infer`).
pub fn infer(op: &Op, inputs: &[(DType, &[usize])]) -> Result<Vec<(DType, Shape)>, String> {
    match op {
        Op::Compare(_) | Op::Logic(_) | Op::Not | Op::Where => infer_logic(op, inputs),
        _ => Err(format!("{} is not in the logic family", op.name())),
    }
}

/// Evaluates this family's `op` (`ops::eval`).
pub fn eval(op: &Op, inputs: &[&Tensor]) -> Result<Vec<Tensor>, String> {
    match op {
        Op::Compare(_) | Op::Logic(_) | Op::Not | Op::Where => eval_logic(op, inputs),
        _ => Err(format!("{} is not in the logic family", op.name())),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn where_broadcasts_and_compare() {
        let mut c = Tensor::i64(vec![2, 1], vec![1, 0]);
        c.dtype = DType::Bool;
        let a = Tensor::f32(vec![3], vec![1., 2., 3.]);
        let b = Tensor::f32(vec![1], vec![-1.]);
        let r = eval_logic(&Op::Where, &[&c, &a, &b]).unwrap();
        assert_eq!(r[0].shape, vec![2, 3]);
        assert_eq!(r[0].to_f32_vec(), [1., 2., 3., -1., -1., -1.]);
        let r = eval_logic(&Op::Compare(CmpOp::Lt), &[&a, &b]).unwrap();
        assert_eq!(
            (r[0].dtype, r[0].to_i64_vec()),
            (DType::Bool, vec![0, 0, 0])
        );
    }
}
