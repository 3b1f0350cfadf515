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

use super::op::{Family, Op};
use super::types::{DType, Shape, Tensor};

/// The dtype and shape of each output of `op` applied to inputs of the given types. Errors are plain messages;
/// the caller adds the node name.
pub fn infer(op: &Op, inputs: &[(DType, &[usize])]) -> Result<Vec<(DType, Shape)>, String> {
    match op.family() {
        Family::Elementwise => elementwise::infer(op, inputs),
        Family::Linalg => linalg::infer(op, inputs),
        Family::Cnn => cnn::infer(op, inputs),
        Family::Deconv => deconv::infer(op, inputs),
        Family::Nn => nn::infer(op, inputs),
        Family::Shape => shape::infer(op, inputs),
        Family::Index => index::infer(op, inputs),
        Family::Reduce => reduce::infer(op, inputs),
        Family::Resize => resize::infer(op, inputs),
        Family::Logic => logic::infer(op, inputs),
        Family::Quant => quant::infer(op, inputs),
    }
}

/// Evaluates `op` on host tensors. Float ops require f32 inputs; data-movement ops accept any dtype.
pub fn eval(op: &Op, inputs: &[&Tensor]) -> Result<Vec<Tensor>, String> {
    match op.family() {
        Family::Elementwise => elementwise::eval(op, inputs),
        Family::Linalg => linalg::eval(op, inputs),
        Family::Cnn => cnn::eval(op, inputs),
        Family::Deconv => deconv::eval(op, inputs),
        Family::Nn => nn::eval(op, inputs),
        Family::Shape => shape::eval(op, inputs),
        Family::Index => index::eval(op, inputs),
        Family::Reduce => reduce::eval(op, inputs),
        Family::Resize => resize::eval(op, inputs),
        Family::Logic => logic::eval(op, inputs),
        Family::Quant => quant::eval(op, inputs),
    }
}
