//! Helpers every op family's shape inference and reference evaluation shares: the input-count check, the f32
//! views and dtype checks that name the argument, the shapes of evaluated inputs, and the row-major index step.

use crate::ir::types::{DType, Tensor};

/// The (dtype, shape) of each input tensor, as `infer` takes them.
pub(crate) fn types_of<'a>(inputs: &[&'a Tensor]) -> Vec<(DType, &'a [usize])> {
    inputs
        .iter()
        .map(|t| (t.dtype, t.shape.as_slice()))
        .collect()
}

/// Steps a row-major multi-index `idx` over `shape` to the next position (wrapping to all zeros at the end).
pub(crate) fn advance(idx: &mut [usize], shape: &[usize]) {
    for d in (0..shape.len()).rev() {
        idx[d] += 1;
        if idx[d] < shape[d] {
            return;
        }
        idx[d] = 0;
    }
}

/// Checks the input count.
pub(crate) fn arity<T>(inputs: &[T], min: usize, max: usize) -> Result<(), String> {
    if inputs.len() < min || inputs.len() > max {
        if min == max {
            return Err(format!("expects {min} input(s), got {}", inputs.len()));
        }
        return Err(format!(
            "expects {min} to {max} inputs, got {}",
            inputs.len()
        ));
    }
    Ok(())
}

/// The f32 values of an input, or an error naming its position.
pub(crate) fn f32s<'a>(t: &'a Tensor, what: &str) -> Result<&'a [f32], String> {
    t.as_f32()
        .ok_or_else(|| format!("{what} must be f32, got {}", t.dtype))
}

/// Requires an f32 input type.
pub(crate) fn want_f32(dt: DType, what: &str) -> Result<(), String> {
    if dt != DType::F32 {
        return Err(format!("{what} must be f32, got {dt}"));
    }
    Ok(())
}
