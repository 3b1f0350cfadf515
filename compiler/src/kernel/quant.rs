//! QuantizeLinear / DequantizeLinear kernels' geometry, and the integer GlobalAveragePool's work units.

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

/// Planes per work unit of an integer GlobalAveragePool of `size`-element planes: about 4096 elements each.
pub fn qgap_planes_per_unit(size: usize) -> usize {
    (4096 / size.max(1)).max(1)
}
