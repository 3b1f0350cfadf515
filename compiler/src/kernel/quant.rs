//! QuantizeLinear / DequantizeLinear kernels' geometry.

use crate::ir::DType;

/// One QuantizeLinear / DequantizeLinear kernel over `[planes / n, n, inner]`: args x, scale (f32 \[n\]), zero
/// point (i32 \[n\]), y.
#[derive(Debug, Clone, PartialEq)]
pub struct QuantSpec {
    /// Outer count times `n`: one unit per (outer, slice).
    pub planes: usize,
    /// Slices (1 per tensor).
    pub n: usize,
    /// Elements per plane.
    pub inner: usize,
    /// Dequantize (else quantize).
    pub dequantize: bool,
    /// The integer side's dtype.
    pub dtype: DType,
}
