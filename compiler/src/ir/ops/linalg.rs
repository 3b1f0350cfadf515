//! Matrix products: MatMul (numpy batching and broadcasting, 1-D operands promoted) and Gemm (transposes,
//! alpha/beta, broadcast C), both with a fused epilogue (residual add, activation).

use super::args::{arity, f32s, want_f32};
use super::elementwise::{broadcast_shapes, broadcast_strides};
use crate::ir::attrs::{Epilogue, GemmAttrs};
use crate::ir::op::Op;
use crate::ir::types::{numel, strides, DType, Shape, Tensor};

/// The batched-matmul geometry of two operand shapes.
#[derive(Debug, Clone, PartialEq)]
pub struct MatMulGeom {
    /// Rows of the product.
    pub m: usize,
    /// Reduction length.
    pub k: usize,
    /// Columns of the product.
    pub n: usize,
    /// Broadcast batch shape.
    pub batch: Shape,
    /// Batch strides (in elements) of A and B over `batch` (0 where broadcast).
    pub a_batch_strides: Vec<usize>,
    /// See `a_batch_strides`.
    pub b_batch_strides: Vec<usize>,
    /// The ONNX output shape (1-D operands' dims removed).
    pub out_shape: Shape,
}

/// Computes MatMul geometry following numpy: 1-D A is \[1,K\], 1-D B is \[K,1\], batch dims broadcast.
pub fn matmul_geom(a: &[usize], b: &[usize]) -> Result<MatMulGeom, String> {
    if a.is_empty() || b.is_empty() {
        return Err("MatMul operands must have rank >= 1".into());
    }
    let a2: Shape = if a.len() == 1 {
        vec![1, a[0]]
    } else {
        a.to_vec()
    };
    let b2: Shape = if b.len() == 1 {
        vec![b[0], 1]
    } else {
        b.to_vec()
    };
    let (m, k) = (a2[a2.len() - 2], a2[a2.len() - 1]);
    let (kb, n) = (b2[b2.len() - 2], b2[b2.len() - 1]);
    if k != kb {
        return Err(format!("MatMul inner dimensions differ: {a:?} x {b:?}"));
    }
    let (ab, bb) = (&a2[..a2.len() - 2], &b2[..b2.len() - 2]);
    let batch = broadcast_shapes(ab, bb)?;
    let a_bs: Vec<usize> = broadcast_strides(ab, &batch)
        .iter()
        .map(|s| s * m * k)
        .collect();
    let b_bs: Vec<usize> = broadcast_strides(bb, &batch)
        .iter()
        .map(|s| s * k * n)
        .collect();
    let mut out_shape = batch.clone();
    if a.len() > 1 {
        out_shape.push(m);
    }
    if b.len() > 1 {
        out_shape.push(n);
    }
    Ok(MatMulGeom {
        m,
        k,
        n,
        batch,
        a_batch_strides: a_bs,
        b_batch_strides: b_bs,
        out_shape,
    })
}

pub(crate) fn infer_matmul(
    inputs: &[(DType, &[usize])],
    e: &Epilogue,
) -> Result<Vec<(DType, Shape)>, String> {
    let want = 2 + e.bias as usize + e.residual as usize;
    arity(inputs, want, want)?;
    want_f32(inputs[0].0, "A")?;
    want_f32(inputs[1].0, "B")?;
    let g = matmul_geom(inputs[0].1, inputs[1].1)?;
    if e.bias {
        let b = inputs[2].1;
        let leading_ones = b.iter().rev().skip(1).all(|&d| d == 1);
        if b.last() != Some(&g.n) || !leading_ones {
            return Err(format!(
                "bias shape {b:?} is not [{}] (after leading ones)",
                g.n
            ));
        }
    }
    if !e.scale.is_finite() {
        return Err(format!("product scale {} is not finite", e.scale));
    }
    check_residual(inputs, e, &g.out_shape)?;
    Ok(vec![(DType::F32, g.out_shape)])
}

/// Conv and Gemm epilogues never scale the product (`Epilogue::scale` is MatMul's).
pub(crate) fn unscaled(e: &Epilogue) -> Result<(), String> {
    if e.scale != 1.0 {
        return Err(format!(
            "epilogue scale {} on an op other than MatMul",
            e.scale
        ));
    }
    Ok(())
}

fn check_residual(inputs: &[(DType, &[usize])], e: &Epilogue, out: &[usize]) -> Result<(), String> {
    if e.residual {
        let r = inputs.last().ok_or("missing residual input")?;
        if r.1 != out {
            return Err(format!(
                "residual shape {:?} differs from output shape {out:?}",
                r.1
            ));
        }
    }
    Ok(())
}

/// Applies an epilogue in place: residual (if any) then activation.
pub(crate) fn apply_epilogue(out: &mut [f32], e: &Epilogue, residual: Option<&[f32]>) {
    if let (true, Some(r)) = (e.residual, residual) {
        out.iter_mut().zip(r).for_each(|(o, r)| *o += r);
    }
    out.iter_mut().for_each(|o| *o = e.act.apply(*o));
}

pub(crate) fn eval_matmul(inputs: &[&Tensor], e: &Epilogue) -> Result<Vec<Tensor>, String> {
    let g = matmul_geom(&inputs[0].shape, &inputs[1].shape)?;
    let (a, b) = (f32s(inputs[0], "A")?, f32s(inputs[1], "B")?);
    let nb = numel(&g.batch);
    let mut out = vec![0.0f32; nb * g.m * g.n];
    let bst = strides(&g.batch);
    for bi in 0..nb {
        let (mut ao, mut bo) = (0, 0);
        for (d, (&st, &dim)) in bst.iter().zip(&g.batch).enumerate() {
            let i = (bi / st) % dim;
            ao += i * g.a_batch_strides[d];
            bo += i * g.b_batch_strides[d];
        }
        for i in 0..g.m {
            for j in 0..g.n {
                let mut acc = 0.0f32;
                for kk in 0..g.k {
                    acc += a[ao + i * g.k + kk] * b[bo + kk * g.n + j];
                }
                out[bi * g.m * g.n + i * g.n + j] =
                    if e.scale != 1.0 { acc * e.scale } else { acc };
            }
        }
    }
    if e.bias {
        let bias = f32s(inputs[2], "bias")?;
        for row in out.chunks_mut(g.n.max(1)) {
            row.iter_mut().zip(bias).for_each(|(o, b)| *o += b);
        }
    }
    let res = if e.residual {
        Some(f32s(inputs[inputs.len() - 1], "residual")?)
    } else {
        None
    };
    apply_epilogue(&mut out, e, res);
    Ok(vec![Tensor::f32(g.out_shape, out)])
}

/// (M, K, N) of a Gemm with the given operand shapes.
pub fn gemm_dims(
    a: &[usize],
    b: &[usize],
    attrs: &GemmAttrs,
) -> Result<(usize, usize, usize), String> {
    if a.len() != 2 || b.len() != 2 {
        return Err(format!("Gemm operands must be 2-D, got {a:?} and {b:?}"));
    }
    let (m, k) = if attrs.trans_a {
        (a[1], a[0])
    } else {
        (a[0], a[1])
    };
    let (kb, n) = if attrs.trans_b {
        (b[1], b[0])
    } else {
        (b[0], b[1])
    };
    if k != kb {
        return Err(format!("Gemm inner dimensions differ: A {a:?} B {b:?}"));
    }
    Ok((m, k, n))
}

pub(crate) fn infer_gemm(
    inputs: &[(DType, &[usize])],
    attrs: &GemmAttrs,
) -> Result<Vec<(DType, Shape)>, String> {
    let want = 2 + attrs.has_c as usize + attrs.epilogue.residual as usize;
    arity(inputs, want, want)?;
    if attrs.epilogue.bias {
        return Err("a bias epilogue on Gemm (C is its bias)".into());
    }
    want_f32(inputs[0].0, "A")?;
    want_f32(inputs[1].0, "B")?;
    let (m, _, n) = gemm_dims(inputs[0].1, inputs[1].1, attrs)?;
    if attrs.has_c {
        let c = inputs[2].1;
        if c.len() > 2 || broadcast_shapes(c, &[m, n])? != vec![m, n] {
            return Err(format!(
                "Gemm C of shape {c:?} does not broadcast to [{m}, {n}]"
            ));
        }
    }
    unscaled(&attrs.epilogue)?;
    check_residual(inputs, &attrs.epilogue, &[m, n])?;
    Ok(vec![(DType::F32, vec![m, n])])
}

pub(crate) fn eval_gemm(inputs: &[&Tensor], attrs: &GemmAttrs) -> Result<Vec<Tensor>, String> {
    let (m, k, n) = gemm_dims(&inputs[0].shape, &inputs[1].shape, attrs)?;
    let (a, b) = (f32s(inputs[0], "A")?, f32s(inputs[1], "B")?);
    let mut out = vec![0.0f32; m * n];
    for i in 0..m {
        for j in 0..n {
            let mut acc = 0.0f32;
            for kk in 0..k {
                let av = if attrs.trans_a {
                    a[kk * m + i]
                } else {
                    a[i * k + kk]
                };
                let bv = if attrs.trans_b {
                    b[j * k + kk]
                } else {
                    b[kk * n + j]
                };
                acc += av * bv;
            }
            out[i * n + j] = attrs.alpha * acc;
        }
    }
    if attrs.has_c {
        let c = inputs[2];
        let cv = f32s(c, "C")?;
        let cs = broadcast_strides(&c.shape, &[m, n]);
        for i in 0..m {
            for j in 0..n {
                out[i * n + j] += attrs.beta * cv[i * cs[0] + j * cs[1]];
            }
        }
    }
    let res = if attrs.epilogue.residual {
        Some(f32s(inputs[inputs.len() - 1], "residual")?)
    } else {
        None
    };
    apply_epilogue(&mut out, &attrs.epilogue, res);
    Ok(vec![Tensor::f32(vec![m, n], out)])
}

/// The dtype and shape of each output of this family's `op` (`ops::infer`).
pub fn infer(op: &Op, inputs: &[(DType, &[usize])]) -> Result<Vec<(DType, Shape)>, String> {
    match op {
        Op::MatMul(e) => infer_matmul(inputs, e),
        Op::Gemm(a) => infer_gemm(inputs, a),
        _ => Err(format!("{} is not in the linalg family", op.name())),
    }
}

/// Evaluates this family's `op` (`ops::eval`).
pub fn eval(op: &Op, inputs: &[&Tensor]) -> Result<Vec<Tensor>, String> {
    match op {
        Op::MatMul(e) => eval_matmul(inputs, e),
        Op::Gemm(a) => eval_gemm(inputs, a),
        _ => Err(format!("{} is not in the linalg family", op.name())),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn matmul_geometry_broadcasts_batches() {
        let g = matmul_geom(&[2, 1, 3, 4], &[5, 4, 6]).unwrap();
        assert_eq!(g.out_shape, vec![2, 5, 3, 6]);
        assert_eq!(g.a_batch_strides, vec![12, 0]);
        assert_eq!(g.b_batch_strides, vec![0, 24]);
        let v = matmul_geom(&[4], &[4, 6]).unwrap();
        assert_eq!(v.out_shape, vec![6]);
        assert!(matmul_geom(&[2, 3], &[4, 5]).is_err());
    }
}
