//! Reference semantics of every IR op: shape rules (`infer`) and evaluation on host tensors (`eval`). This is the
//! single source of truth that constant folding, the generated code's tests and the emulator are checked against.
//! One file per op family.

pub mod args;
pub mod cnn;
pub mod deconv;
pub mod elementwise;
pub mod index;
pub mod linalg;
pub mod logic;
pub mod nn;
pub mod quant;
pub mod reduce;
pub mod resize;
pub mod shape;

use super::op::Op;
use super::types::{DType, Shape, Tensor};
use args::arity;

/// The dtype and shape of each output of `op` applied to inputs of the given types. Errors are plain messages;
/// the caller adds the node name.
pub fn infer(op: &Op, inputs: &[(DType, &[usize])]) -> Result<Vec<(DType, Shape)>, String> {
    match op {
        Op::Binary(_) => elementwise::infer_binary(inputs),
        Op::Unary(_) => elementwise::infer_unary(inputs),
        Op::MatMul(e) => linalg::infer_matmul(inputs, e),
        Op::Gemm(a) => linalg::infer_gemm(inputs, a),
        Op::Conv(a) => cnn::infer_conv(inputs, a),
        Op::ConvTranspose(a) => deconv::infer_deconv(inputs, a),
        Op::Pool(_, a) => cnn::infer_pool(inputs, a),
        Op::GlobalAveragePool => cnn::infer_global_pool(inputs),
        Op::BatchNorm { .. } => nn::infer_batchnorm(inputs),
        Op::Softmax { axis, .. } => nn::infer_softmax(inputs, *axis),
        Op::Reshape(s) => shape::infer_reshape(inputs, s),
        Op::Transpose(p) => shape::infer_transpose(inputs, p),
        Op::Concat(axis) => shape::infer_concat(inputs, *axis),
        Op::Cast(to) => {
            arity(inputs, 1, 1)?;
            Ok(vec![(*to, inputs[0].1.to_vec())])
        }
        Op::Slice { .. } | Op::Pad { .. } | Op::Expand(_) | Op::Tile(_) => {
            index::infer_mapped(op, inputs)
        }
        Op::Gather { axis } => index::infer_gather(inputs, *axis),
        Op::Reduce { axes, keepdims, .. } => reduce::infer_reduce(inputs, axes, *keepdims),
        Op::ArgReduce { axis, keepdims, .. } => reduce::infer_arg(inputs, *axis, *keepdims),
        Op::LayerNorm { axis, .. } => nn::infer_layernorm(inputs, *axis),
        Op::InstanceNorm { .. } => nn::infer_instancenorm(inputs),
        Op::Lrn(_) => nn::infer_lrn(inputs),
        Op::Resize(a) => resize::infer_resize(inputs, a),
        Op::Compare(_) | Op::Logic(_) | Op::Not | Op::Where => logic::infer_logic(op, inputs),
        Op::Quantize(q) => quant::infer_quantize(inputs, q, false),
        Op::Dequantize(q) => quant::infer_quantize(inputs, q, true),
        Op::QConv(a, p) => quant::infer_qconv(inputs, a, p),
        Op::QMatMul(p) => quant::infer_qmatmul(inputs, p),
        Op::QAdd(p) => quant::infer_qadd(inputs, p),
    }
}

/// Evaluates `op` on host tensors. Float ops require f32 inputs; data-movement ops accept any dtype.
pub fn eval(op: &Op, inputs: &[&Tensor]) -> Result<Vec<Tensor>, String> {
    match op {
        Op::Binary(b) => elementwise::eval_binary(*b, inputs),
        Op::Unary(u) => elementwise::eval_unary(*u, inputs),
        Op::MatMul(e) => linalg::eval_matmul(inputs, e),
        Op::Gemm(a) => linalg::eval_gemm(inputs, a),
        Op::Conv(a) => cnn::eval_conv(inputs, a),
        Op::ConvTranspose(a) => deconv::eval_deconv(inputs, a),
        Op::Pool(k, a) => cnn::eval_pool(*k, inputs, a),
        Op::GlobalAveragePool => cnn::eval_global_pool(inputs),
        Op::BatchNorm { epsilon } => nn::eval_batchnorm(inputs, *epsilon),
        Op::Softmax {
            axis,
            flatten_tail,
            log,
        } => nn::eval_softmax(inputs, *axis, *flatten_tail, *log),
        Op::Reshape(s) => shape::eval_reshape(inputs, s),
        Op::Transpose(p) => shape::eval_transpose(inputs, p),
        Op::Concat(axis) => shape::eval_concat(inputs, *axis),
        Op::Cast(to) => elementwise::eval_cast(inputs, *to),
        Op::Slice { .. } | Op::Pad { .. } | Op::Expand(_) | Op::Tile(_) => {
            index::eval_mapped(op, inputs)
        }
        Op::Gather { axis } => index::eval_gather(inputs, *axis),
        Op::Reduce {
            kind,
            axes,
            keepdims,
        } => reduce::eval_reduce(inputs, *kind, axes, *keepdims),
        Op::ArgReduce {
            max,
            axis,
            keepdims,
            select_last,
        } => reduce::eval_arg(inputs, *max, *axis, *keepdims, *select_last),
        Op::LayerNorm { axis, epsilon, rms } => nn::eval_layernorm(inputs, *axis, *epsilon, *rms),
        Op::InstanceNorm { epsilon } => nn::eval_instancenorm(inputs, *epsilon),
        Op::Lrn(a) => nn::eval_lrn(inputs, a),
        Op::Resize(a) => resize::eval_resize(inputs, a),
        Op::Compare(_) | Op::Logic(_) | Op::Not | Op::Where => logic::eval_logic(op, inputs),
        Op::Quantize(q) => quant::eval_quantize(inputs, q),
        Op::Dequantize(q) => quant::eval_dequantize(inputs, q),
        Op::QConv(a, p) => quant::eval_qconv(inputs, a, p),
        Op::QMatMul(p) => quant::eval_qmatmul(inputs, p),
        Op::QAdd(p) => quant::eval_qadd(inputs, p),
    }
}
