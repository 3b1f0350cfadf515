//! Elementwise ops: binary arithmetic with numpy broadcasting and unary math. Shape rules, reference evaluation,
//! and the broadcasting helper that codegen uses to walk inputs with per-dimension strides.

use super::args::{arity, f32s, want_f32};
use crate::ir::attrs::{BinOp, UnOp};
use crate::ir::op::Op;
use crate::ir::types::{numel, strides, DType, Data, Shape, Tensor};

/// The numpy broadcast of two shapes.
pub fn broadcast_shapes(a: &[usize], b: &[usize]) -> Result<Shape, String> {
    let rank = a.len().max(b.len());
    if rank > crate::ir::types::MAX_RANK {
        return Err(format!(
            "broadcasting {} and {} dims exceeds the rank limit of {}",
            a.len(),
            b.len(),
            crate::ir::types::MAX_RANK
        ));
    }
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
        BinOp::Pow => a.powf(b),
        BinOp::PRelu => {
            if a < 0.0 {
                a * b
            } else {
                a
            }
        }
        BinOp::FMod => a % b,
        BinOp::Mod => {
            let r = a % b;
            if r != 0.0 && (r < 0.0) != (b < 0.0) {
                r + b
            } else {
                r
            }
        }
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
        BinOp::Pow => u32::try_from(b)
            .ok()
            .and_then(|e| a.checked_pow(e))
            .ok_or_else(|| format!("integer power {a}^{b} is out of range"))?,
        BinOp::PRelu => {
            if a < 0 {
                a.wrapping_mul(b)
            } else {
                a
            }
        }
        BinOp::FMod => a.checked_rem(b).ok_or("integer modulo by zero")?,
        BinOp::Mod => {
            let r = a.checked_rem(b).ok_or("integer modulo by zero")?;
            if r != 0 && (r < 0) != (b < 0) {
                r + b
            } else {
                r
            }
        }
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
        UnOp::Log => x.ln(),
        UnOp::Erf => erf(x),
        UnOp::Floor => x.floor(),
        UnOp::Ceil => x.ceil(),
        UnOp::Round => x.round_ties_even(),
        UnOp::Sign => {
            if x > 0.0 {
                1.0
            } else if x < 0.0 {
                -1.0
            } else {
                x
            }
        }
        UnOp::Softplus => {
            if x > 20.0 {
                x
            } else {
                x.exp().ln_1p()
            }
        }
        UnOp::Softsign => x / (1.0 + x.abs()),
        UnOp::ThresholdedRelu(a) => {
            if x > a {
                x
            } else {
                0.0
            }
        }
        UnOp::Celu(a) => x.max(0.0) + (a * ((x / a).exp() - 1.0)).min(0.0),
        UnOp::Gelu { tanh: false } => 0.5 * x * (1.0 + erf(x * std::f32::consts::FRAC_1_SQRT_2)),
        UnOp::Gelu { tanh: true } => {
            let k = (2.0 / std::f32::consts::PI).sqrt();
            0.5 * x * (1.0 + (k * (x + 0.044715 * x * x * x)).tanh())
        }
        UnOp::Mish => {
            let sp = if x > 20.0 { x } else { x.exp().ln_1p() };
            x * sp.tanh()
        }
    }
}

/// Coefficients (highest power first) of P(t) in erfc(x) ≈ t·exp(-x² + P(t)), t = 1/(1 + x/2), x >= 0.
pub const ERFC_COEFFS: [f64; 10] = [
    0.170_872_77,
    -0.822_152_23,
    1.488_515_87,
    -1.135_203_98,
    0.278_868_07,
    -0.186_288_06,
    0.096_784_18,
    0.374_091_96,
    1.000_023_68,
    -1.265_512_23,
];

/// erf(x), computed in f64 and rounded: the Maclaurin series below |x| = 0.5, above it 1 - erfc(|x|) with the
/// Chebyshev-fitted erfc `t·exp(-x² + P(t))`, t = 1/(1 + |x|/2) (relative error < 1.2e-7). `codegen::math::erf`
/// evaluates the same two forms in f32.
pub fn erf(x: f32) -> f32 {
    let x = x as f64;
    let a = x.abs();
    let r = if a < 0.5 {
        // Taylor: 2/sqrt(pi) * sum (-1)^n x^(2n+1) / (n! (2n+1))
        let mut term = a;
        let mut sum = a;
        let x2 = a * a;
        for n in 1..30 {
            term *= -x2 / n as f64;
            sum += term / (2 * n + 1) as f64;
        }
        sum * 2.0 / std::f64::consts::PI.sqrt()
    } else {
        let t = 1.0 / (1.0 + 0.5 * a);
        let p = ERFC_COEFFS.iter().fold(0.0, |p, &c| p * t + c);
        let y = t * (p - a * a).exp();
        1.0 - y
    };
    // Odd, -0 included (erf(-0) = -0, as C's erf).
    (if x.is_sign_negative() { -r } else { r }) as f32
}

/// Reference semantics of Cast on one float (to the target dtype's value, held as f64).
pub fn cast_f32(x: f32, to: DType) -> f64 {
    match to {
        DType::F32 => x as f64,
        DType::Bool => (x != 0.0) as i64 as f64,
        DType::I64 => x as i64 as f64,
        DType::I32 => x as i32 as f64,
        DType::I8 => x as i8 as f64,
        DType::U8 => x as u8 as f64,
    }
}

/// Wraps an integer to the target dtype.
pub fn cast_int(x: i64, to: DType) -> i64 {
    match to {
        DType::Bool => (x != 0) as i64,
        DType::I32 => x as i32 as i64,
        DType::I8 => x as i8 as i64,
        DType::U8 => x as u8 as i64,
        DType::I64 | DType::F32 => x,
    }
}

pub(crate) fn eval_cast(inputs: &[&Tensor], to: DType) -> Result<Vec<Tensor>, String> {
    arity(inputs, 1, 1)?;
    let x = inputs[0];
    let data = match (&x.data, to) {
        (Data::F32(v), DType::F32) => Data::F32(v.clone()),
        (Data::F32(v), _) => Data::I64(v.iter().map(|&f| cast_f32(f, to) as i64).collect()),
        (Data::I64(v), DType::F32) => Data::F32(v.iter().map(|&i| i as f32).collect()),
        (Data::I64(v), _) => Data::I64(v.iter().map(|&i| cast_int(i, to)).collect()),
    };
    Ok(vec![Tensor {
        dtype: to,
        shape: x.shape.clone(),
        data,
    }])
}

/// Visits every output index of a broadcast, yielding the flat offsets into `a` and `b`.
fn for_each_broadcast(out: &[usize], sa: &[usize], sb: &[usize], mut f: impl FnMut(usize, usize)) {
    let n = numel(out);
    let mut idx = vec![0usize; out.len()];
    for _ in 0..n {
        let oa: usize = idx.iter().zip(sa).map(|(i, s)| i * s).sum();
        let ob: usize = idx.iter().zip(sb).map(|(i, s)| i * s).sum();
        f(oa, ob);
        super::args::advance(&mut idx, out);
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

/// The dtype and shape of each output of this family's `op` (`ops::infer`).
pub fn infer(op: &Op, inputs: &[(DType, &[usize])]) -> Result<Vec<(DType, Shape)>, String> {
    match op {
        Op::Binary(_) => infer_binary(inputs),
        Op::Unary(_) => infer_unary(inputs),
        Op::Cast(to) => {
            arity(inputs, 1, 1)?;
            Ok(vec![(*to, inputs[0].1.to_vec())])
        }
        _ => Err(format!("{} is not in the elementwise family", op.name())),
    }
}

/// Evaluates this family's `op` (`ops::eval`).
pub fn eval(op: &Op, inputs: &[&Tensor]) -> Result<Vec<Tensor>, String> {
    match op {
        Op::Binary(b) => eval_binary(*b, inputs),
        Op::Unary(u) => eval_unary(*u, inputs),
        Op::Cast(to) => eval_cast(inputs, *to),
        _ => Err(format!("{} is not in the elementwise family", op.name())),
    }
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
