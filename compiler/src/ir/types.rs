//! Element types and tensor values: `DType`, `Shape` helpers and `Tensor`, the plain host tensor that constant
//! folding, the reference semantics and the tests compute with.

use std::fmt;

/// Element type of a tensor. The numeric codes are ONNX's `TensorProto.DataType`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum DType {
    /// 32-bit float (ONNX 1).
    F32,
    /// Unsigned byte (ONNX 2).
    U8,
    /// Signed byte (ONNX 3).
    I8,
    /// 32-bit signed integer (ONNX 6).
    I32,
    /// 64-bit signed integer (ONNX 7).
    I64,
    /// Boolean, one byte (ONNX 9).
    Bool,
}

impl DType {
    /// The ONNX `TensorProto.DataType` code.
    pub fn onnx_code(self) -> u32 {
        match self {
            DType::F32 => 1,
            DType::U8 => 2,
            DType::I8 => 3,
            DType::I32 => 6,
            DType::I64 => 7,
            DType::Bool => 9,
        }
    }
    /// Parses an ONNX `TensorProto.DataType` code.
    pub fn from_onnx(code: i32) -> Option<DType> {
        Some(match code {
            1 => DType::F32,
            2 => DType::U8,
            3 => DType::I8,
            6 => DType::I32,
            7 => DType::I64,
            9 => DType::Bool,
            _ => return None,
        })
    }
    /// Parses the short name used on the command line (`f32`, `i64`, ...).
    pub fn from_name(s: &str) -> Option<DType> {
        Some(match s {
            "f32" | "float" | "float32" => DType::F32,
            "u8" | "uint8" => DType::U8,
            "i8" | "int8" => DType::I8,
            "i32" | "int32" => DType::I32,
            "i64" | "int64" => DType::I64,
            "bool" => DType::Bool,
            _ => return None,
        })
    }
    /// Size of one element in bytes.
    pub fn size(self) -> usize {
        match self {
            DType::F32 | DType::I32 => 4,
            DType::I64 => 8,
            DType::U8 | DType::I8 | DType::Bool => 1,
        }
    }
    /// Short lower-case name.
    pub fn name(self) -> &'static str {
        match self {
            DType::F32 => "f32",
            DType::U8 => "u8",
            DType::I8 => "i8",
            DType::I32 => "i32",
            DType::I64 => "i64",
            DType::Bool => "bool",
        }
    }
}

impl fmt::Display for DType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// A static shape.
pub type Shape = Vec<usize>;

/// Largest tensor a model may describe, in bytes (2^40): every shape from a model is checked against it with
/// checked arithmetic before anything is sized from it.
pub const MAX_TENSOR_BYTES: u128 = 1 << 40;
/// Largest rank.
pub const MAX_RANK: usize = 8;

/// Checks that a tensor of `shape` and `dtype` has at least one element, at most [`MAX_RANK`] dims and at most
/// [`MAX_TENSOR_BYTES`] bytes; the error is a plain message for the caller to attach a name to.
pub fn check_size(dtype: DType, shape: &[usize]) -> Result<(), String> {
    check_bytes(dtype, shape)?;
    if shape.contains(&0) {
        return Err(format!(
            "shape {shape:?} has no elements (zero-sized tensors are not supported)"
        ));
    }
    Ok(())
}

/// The rank and byte limits of [`check_size`] alone (compile-time constants may be empty, e.g. folded shape
/// arithmetic).
pub fn check_bytes(dtype: DType, shape: &[usize]) -> Result<(), String> {
    if shape.len() > MAX_RANK {
        return Err(format!(
            "rank {} exceeds the limit of {MAX_RANK}",
            shape.len()
        ));
    }
    let mut n: u128 = 1;
    for &d in shape {
        n = n.saturating_mul(d as u128);
    }
    if n.saturating_mul(dtype.size() as u128) > MAX_TENSOR_BYTES {
        return Err(format!(
            "shape {shape:?} of {} is larger than the limit of 2^40 bytes",
            dtype.name()
        ));
    }
    Ok(())
}

/// Largest total of compile-time constant data held at once, in host bytes (2^31): initializers, `Constant`
/// nodes and every folded result together, counted as the host holds them (4 bytes per `f32`, 8 per integer).
pub const MAX_CONST_BYTES: u64 = 1 << 31;

/// The one budget for compile-time constants ([`MAX_CONST_BYTES`]). The importer starts one at zero and charges
/// every initializer and fold to it; a pass that folds starts one from the graph's current constants
/// (`Graph::const_budget`), so the total never exceeds the limit whatever the mix.
#[derive(Debug, Clone, Default)]
pub struct ConstBudget {
    used: u64,
}

impl ConstBudget {
    /// Host bytes of `n` elements of `dtype`.
    fn host_bytes(n: usize, dtype: DType) -> u64 {
        let per = if dtype == DType::F32 { 4 } else { 8 };
        (n as u64).saturating_mul(per)
    }
    /// Charges a constant of `n` elements of `dtype` before it is built; the error is a plain message for the
    /// caller to attach the tensor's or node's name to.
    pub fn take(&mut self, n: usize, dtype: DType) -> Result<(), String> {
        let add = Self::host_bytes(n, dtype);
        match self.used.checked_add(add) {
            Some(total) if total <= MAX_CONST_BYTES => {
                self.used = total;
                Ok(())
            }
            _ => Err(format!(
                "compile-time constants would take {} MiB in all, over the limit of {} MiB (this constant: {} \
                 elements of {dtype})",
                self.used.saturating_add(add) >> 20,
                MAX_CONST_BYTES >> 20,
                n
            )),
        }
    }
}

/// Number of elements of a shape, or `None` where the product overflows `usize`.
pub fn checked_numel(shape: &[usize]) -> Option<usize> {
    shape.iter().try_fold(1usize, |a, &d| a.checked_mul(d))
}

/// Number of elements of a shape.
pub fn numel(shape: &[usize]) -> usize {
    shape.iter().product()
}

/// Row-major strides (in elements) of a shape.
pub fn strides(shape: &[usize]) -> Vec<usize> {
    let mut s = vec![1; shape.len()];
    for i in (0..shape.len().saturating_sub(1)).rev() {
        s[i] = s[i + 1] * shape[i + 1];
    }
    s
}

/// Formats a shape as `1x3x224x224`.
pub fn shape_str(shape: &[usize]) -> String {
    if shape.is_empty() {
        return "scalar".into();
    }
    shape
        .iter()
        .map(|d| d.to_string())
        .collect::<Vec<_>>()
        .join("x")
}

/// Element storage of a host tensor. Integer and boolean tensors are held as `i64`.
#[derive(Debug, Clone, PartialEq)]
pub enum Data {
    /// Float elements.
    F32(Vec<f32>),
    /// Integer or boolean elements (booleans are 0/1).
    I64(Vec<i64>),
}

/// A host tensor: dtype, shape and values in row-major order.
#[derive(Debug, Clone, PartialEq)]
pub struct Tensor {
    /// Element type.
    pub dtype: DType,
    /// Shape.
    pub shape: Shape,
    /// Values; `F32` for `DType::F32`, `I64` otherwise.
    pub data: Data,
}

impl Tensor {
    /// An integer tensor of `dtype` (its values in `I64`). The caller guarantees `values.len() == numel(shape)`.
    pub fn ints(dtype: DType, shape: Shape, values: Vec<i64>) -> Tensor {
        Tensor {
            dtype,
            shape,
            data: Data::I64(values),
        }
    }
    /// A float tensor. The caller guarantees `values.len() == numel(shape)`.
    pub fn f32(shape: Shape, values: Vec<f32>) -> Tensor {
        Tensor {
            dtype: DType::F32,
            shape,
            data: Data::F32(values),
        }
    }
    /// An i64 tensor.
    pub fn i64(shape: Shape, values: Vec<i64>) -> Tensor {
        Tensor {
            dtype: DType::I64,
            shape,
            data: Data::I64(values),
        }
    }
    /// Number of elements.
    pub fn len(&self) -> usize {
        match &self.data {
            Data::F32(v) => v.len(),
            Data::I64(v) => v.len(),
        }
    }
    /// Whether the tensor has no elements.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
    /// Float values, if this is a float tensor.
    pub fn as_f32(&self) -> Option<&[f32]> {
        match &self.data {
            Data::F32(v) => Some(v),
            Data::I64(_) => None,
        }
    }
    /// Values converted to f32 (integers are cast).
    pub fn to_f32_vec(&self) -> Vec<f32> {
        match &self.data {
            Data::F32(v) => v.clone(),
            Data::I64(v) => v.iter().map(|&x| x as f32).collect(),
        }
    }
    /// Values converted to i64 (floats are truncated).
    pub fn to_i64_vec(&self) -> Vec<i64> {
        match &self.data {
            Data::F32(v) => v.iter().map(|&x| x as i64).collect(),
            Data::I64(v) => v.clone(),
        }
    }
    /// Little-endian bytes in the dtype's storage format.
    pub fn to_bytes(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(self.len() * self.dtype.size());
        match (&self.data, self.dtype) {
            (Data::F32(v), _) => v
                .iter()
                .for_each(|x| out.extend_from_slice(&x.to_le_bytes())),
            (Data::I64(v), DType::I64) => v
                .iter()
                .for_each(|x| out.extend_from_slice(&x.to_le_bytes())),
            (Data::I64(v), DType::I32) => v
                .iter()
                .for_each(|&x| out.extend_from_slice(&(x as i32).to_le_bytes())),
            (Data::I64(v), _) => v.iter().for_each(|&x| out.push(x as u8)),
        }
        out
    }
}
