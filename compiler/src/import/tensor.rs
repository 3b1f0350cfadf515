//! Decoding ONNX `TensorProto`s (initializers, Constant values) into host tensors: raw little-endian data, the
//! typed repeated fields, and external data files next to the model. Every size is checked against the dims.

use crate::error::{Error, Result};
use crate::ir::types::{numel, DType, Data, Tensor};
use std::path::Path;
use tract_onnx::pb::TensorProto;

/// Decodes a tensor; `model_dir` resolves external data locations.
pub fn decode(t: &TensorProto, model_dir: Option<&Path>) -> Result<Tensor> {
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
    let n = numel(&shape);
    let external = t.data_location == Some(1);
    let raw: Option<Vec<u8>> = if external {
        Some(read_external(t, name, model_dir)?)
    } else if !t.raw_data.is_empty() {
        Some(t.raw_data.clone())
    } else {
        None
    };
    let data = match raw {
        Some(bytes) => {
            let want = n * dtype.size();
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
        None => {
            let data = match dtype {
                DType::F32 => Data::F32(t.float_data.clone()),
                DType::I64 => Data::I64(t.int64_data.clone()),
                _ => Data::I64(t.int32_data.iter().map(|&x| x as i64).collect()),
            };
            data
        }
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

fn read_external(t: &TensorProto, name: &str, model_dir: Option<&Path>) -> Result<Vec<u8>> {
    let get = |k: &str| {
        t.external_data
            .iter()
            .find(|e| e.key == k)
            .map(|e| e.value.clone())
    };
    let location =
        get("location").ok_or_else(|| Error::tensor(name, "external data without a location"))?;
    let dir = model_dir
        .ok_or_else(|| Error::tensor(name, "external data needs the model's directory"))?;
    if Path::new(&location).is_absolute() || location.contains("..") {
        return Err(Error::tensor(
            name,
            format!("external data location '{location}' must be a relative path"),
        ));
    }
    let path = dir.join(&location);
    let bytes = std::fs::read(&path).map_err(|e| Error::Io {
        path: path.display().to_string(),
        error: e,
    })?;
    let parse = |k: &str| -> Result<Option<usize>> {
        get(k)
            .map(|v| {
                v.parse::<usize>()
                    .map_err(|_| Error::tensor(name, format!("bad external {k} '{v}'")))
            })
            .transpose()
    };
    let offset = parse("offset")?.unwrap_or(0);
    let length = parse("length")?.unwrap_or(bytes.len().saturating_sub(offset));
    bytes
        .get(offset..offset.saturating_add(length))
        .map(|s| s.to_vec())
        .ok_or_else(|| {
            Error::tensor(
                name,
                format!("external data {offset}+{length} beyond end of '{location}'"),
            )
        })
}
