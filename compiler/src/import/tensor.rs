//! Decoding ONNX `TensorProto`s (initializers, Constant values) into host tensors: raw little-endian data, the
//! typed repeated fields, and external data files next to the model. Every size is checked against the dims.

use crate::error::{Error, Result};
use crate::ir::types::{check_bytes, numel, ConstBudget, DType, Data, Tensor};
use std::path::Path;
use tract_onnx::pb::TensorProto;

/// Decodes a tensor; `model_dir` resolves external data locations, and `budget` is charged before any data is
/// copied.
pub fn decode(
    t: &TensorProto,
    model_dir: Option<&Path>,
    budget: &mut ConstBudget,
) -> Result<Tensor> {
    let name = if t.name.is_empty() {
        "<unnamed constant>"
    } else {
        t.name.as_str()
    };
    let dtype = DType::from_onnx(t.data_type).ok_or_else(|| {
        Error::tensor(name, format!("unsupported ONNX data type {}", t.data_type))
    })?;
    let mut shape = Vec::with_capacity(t.dims.len());
    for &d in &t.dims {
        if d < 0 {
            return Err(Error::tensor(name, format!("negative dimension {d}")));
        }
        shape.push(d as usize);
    }
    check_bytes(dtype, &shape).map_err(|m| Error::tensor(name, m))?;
    let n = numel(&shape);
    let want = n * dtype.size();
    budget.take(n, dtype).map_err(|m| Error::tensor(name, m))?;
    let external = t.data_location == Some(1);
    let raw: Option<Vec<u8>> = if external {
        Some(read_external(t, name, model_dir, want as u64)?)
    } else if !t.raw_data.is_empty() {
        Some(t.raw_data.clone())
    } else {
        None
    };
    let data = match raw {
        Some(bytes) => {
            if bytes.len() != want {
                return Err(Error::tensor(
                    name,
                    format!(
                        "holds {} bytes of data, shape {shape:?} needs {want}",
                        bytes.len()
                    ),
                ));
            }
            from_raw(dtype, &bytes)
        }
        None => match dtype {
            DType::F32 => Data::F32(t.float_data.clone()),
            DType::I64 => Data::I64(t.int64_data.clone()),
            _ => Data::I64(typed_int32(name, dtype, &t.int32_data)?),
        },
    };
    let len = match &data {
        Data::F32(v) => v.len(),
        Data::I64(v) => v.len(),
    };
    if len != n {
        return Err(Error::tensor(
            name,
            format!("holds {len} values, shape {shape:?} needs {n}"),
        ));
    }
    Ok(Tensor { dtype, shape, data })
}

/// The `int32_data` field of an INT32, INT8, UINT8 or BOOL tensor, every value checked against the dtype's range
/// (the field is wider than the type it carries).
fn typed_int32(name: &str, dtype: DType, v: &[i32]) -> Result<Vec<i64>> {
    let (lo, hi) = match dtype {
        DType::I8 => (i8::MIN as i32, i8::MAX as i32),
        DType::U8 => (0, u8::MAX as i32),
        DType::Bool => (0, 1),
        _ => (i32::MIN, i32::MAX),
    };
    if let Some((i, x)) = v.iter().enumerate().find(|(_, &x)| x < lo || x > hi) {
        return Err(Error::tensor(
            name,
            format!("int32_data[{i}] = {x} is out of range for {dtype} ({lo}..={hi})"),
        ));
    }
    Ok(v.iter().map(|&x| x as i64).collect())
}

fn from_raw(dtype: DType, b: &[u8]) -> Data {
    match dtype {
        DType::F32 => Data::F32(
            b.chunks_exact(4)
                .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
                .collect(),
        ),
        DType::I64 => Data::I64(
            b.chunks_exact(8)
                .map(|c| i64::from_le_bytes([c[0], c[1], c[2], c[3], c[4], c[5], c[6], c[7]]))
                .collect(),
        ),
        DType::I32 => Data::I64(
            b.chunks_exact(4)
                .map(|c| i32::from_le_bytes([c[0], c[1], c[2], c[3]]) as i64)
                .collect(),
        ),
        DType::I8 => Data::I64(b.iter().map(|&x| x as i8 as i64).collect()),
        DType::U8 | DType::Bool => Data::I64(b.iter().map(|&x| x as i64).collect()),
    }
}

/// Reads a tensor's external data: `location` resolved inside the model's directory (symlinks included), the
/// `offset`/`length` range checked against the file and against the `want` bytes the dims need before anything is
/// read, and only that range read.
fn read_external(
    t: &TensorProto,
    name: &str,
    model_dir: Option<&Path>,
    want: u64,
) -> Result<Vec<u8>> {
    let get = |k: &str| {
        t.external_data
            .iter()
            .find(|e| e.key == k)
            .map(|e| e.value.as_str())
    };
    let location =
        get("location").ok_or_else(|| Error::tensor(name, "external data without a location"))?;
    let dir = model_dir
        .ok_or_else(|| Error::tensor(name, "external data needs the model's directory"))?;
    let path = crate::fsio::contained(dir, location).map_err(|m| Error::tensor(name, m))?;
    let parse = |k: &str| -> Result<Option<u64>> {
        get(k)
            .map(|v| {
                v.parse::<u64>()
                    .map_err(|_| Error::tensor(name, format!("bad external data {k} '{v}'")))
            })
            .transpose()
    };
    let offset = parse("offset")?.unwrap_or(0);
    let length = parse("length")?.unwrap_or(want);
    if length != want {
        return Err(Error::tensor(
            name,
            format!(
                "external data length {length} does not match the {want} bytes its shape needs"
            ),
        ));
    }
    crate::fsio::read_range(&path, offset, length)
}
