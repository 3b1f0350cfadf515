//! The `--input` and `--freeze` specs: `NAME:SHAPExDTYPE` fixes an input's type, `NAME:SHAPExDTYPE=v,v,...` also
//! freezes it into a compile-time constant. Values are checked against the declared type and size, and errors
//! name the flag and the spec.

use crate::error::{Error, Result};
use crate::ir::{self, DType};

/// A user-fixed input type: `--input data:1x3x224x224xf32`.
#[derive(Debug, Clone, PartialEq)]
pub struct InputSpec {
    /// ONNX input name.
    pub name: String,
    /// Static shape.
    pub shape: Vec<usize>,
    /// Element type.
    pub dtype: DType,
    /// A compile-time value that freezes the input into a constant (`--freeze NAME:SHAPExDTYPE=v,v,...`).
    pub value: Option<ir::Tensor>,
}

impl std::str::FromStr for InputSpec {
    type Err = Error;
    /// `NAME:SHAPExDTYPE` (an `--input`) or `NAME:SHAPExDTYPE=v,v,...` (a `--freeze`); errors name the flag
    /// by the form.
    fn from_str(s: &str) -> Result<Self> {
        let flag = if s.contains('=') {
            "--freeze"
        } else {
            "--input"
        };
        let bad = |m: &str| Error::InvalidArgument {
            what: format!("{flag} '{s}'"),
            message: m.to_string(),
        };
        let Some((spec, values)) = s.split_once('=') else {
            return parse_type(s, &bad);
        };
        let mut sp = parse_type(spec, &bad)?;
        // The declared size is checked before anything is sized from it (numel would overflow).
        ir::types::check_bytes(sp.dtype, &sp.shape).map_err(|m| bad(&m))?;
        let vals: Vec<&str> = values
            .split(',')
            .map(str::trim)
            .filter(|v| !v.is_empty())
            .collect();
        if vals.len() != ir::numel(&sp.shape) {
            return Err(bad(&format!(
                "{} values for shape {:?}",
                vals.len(),
                sp.shape
            )));
        }
        sp.value = Some(if sp.dtype == DType::F32 {
            let v = vals
                .iter()
                .map(|v| {
                    v.parse::<f32>()
                        .map_err(|_| bad(&format!("'{v}' is not a number")))
                })
                .collect::<Result<Vec<f32>>>()?;
            ir::Tensor::f32(sp.shape.clone(), v)
        } else {
            let (lo, hi) = int_range(sp.dtype);
            let v = vals
                .iter()
                .map(|v| -> Result<i64> {
                    let x = parse_int(v).ok_or_else(|| {
                        bad(&format!("'{v}' is not an integer ({})", sp.dtype.name()))
                    })?;
                    if x < lo || x > hi {
                        return Err(bad(&format!(
                            "'{v}' is out of range for {} ({lo} to {hi})",
                            sp.dtype.name()
                        )));
                    }
                    Ok(x)
                })
                .collect::<Result<Vec<i64>>>()?;
            let mut t = ir::Tensor::i64(sp.shape.clone(), v);
            t.dtype = sp.dtype;
            t
        });
        Ok(sp)
    }
}

/// The flag a spec came from, for errors.
pub(super) fn flag(spec: &InputSpec) -> &'static str {
    if spec.value.is_some() {
        "--freeze"
    } else {
        "--input"
    }
}

/// Refuses specs that name the same input twice: a repeated `--input` or `--freeze`, or both for one input.
pub fn check_unique(specs: &[InputSpec]) -> Result<()> {
    let mut seen: std::collections::HashMap<&str, &InputSpec> = std::collections::HashMap::new();
    for s in specs {
        if let Some(first) = seen.insert(s.name.as_str(), s) {
            let (a, b) = (flag(first), flag(s));
            let message = if a == b {
                format!("{a} is given twice for input '{}'", s.name)
            } else {
                format!(
                    "--input and --freeze both name input '{}': an input is either fixed or frozen",
                    s.name
                )
            };
            return Err(Error::InvalidArgument {
                what: format!("{b} {}", s.name),
                message,
            });
        }
    }
    Ok(())
}

/// The `NAME:DIMxDIM...xDTYPE` part of an input spec; `bad` names the flag in errors.
fn parse_type(s: &str, bad: &dyn Fn(&str) -> Error) -> Result<InputSpec> {
    let (name, rest) = s
        .rsplit_once(':')
        .ok_or_else(|| bad("expected NAME:DIMxDIM...xDTYPE"))?;
    let mut parts: Vec<&str> = rest.split('x').collect();
    let dtype = match parts.last().and_then(|p| DType::from_name(p)) {
        Some(d) => {
            parts.pop();
            d
        }
        None => DType::F32,
    };
    let shape = parts
        .iter()
        .filter(|p| !p.is_empty())
        .map(|p| {
            p.parse::<usize>()
                .map_err(|_| bad(&format!("'{p}' is not a dimension")))
        })
        .collect::<Result<Vec<_>>>()?;
    if name.is_empty() {
        return Err(bad("empty input name"));
    }
    Ok(InputSpec {
        name: name.to_string(),
        shape,
        dtype,
        value: None,
    })
}

/// An integer `--freeze` value: a decimal integer, or a number with no fractional part (`4.0`, `1e3`) that
/// fits an i64; `None` for anything else (`4.7`, `1e300`, `nan`).
fn parse_int(v: &str) -> Option<i64> {
    if let Ok(x) = v.parse::<i64>() {
        return Some(x);
    }
    let f = v.parse::<f64>().ok()?;
    // 2^63 is exact in f64, and every integral f64 below it in magnitude converts to i64 exactly.
    (f.is_finite() && f.fract() == 0.0 && f.abs() < 2f64.powi(63)).then_some(f as i64)
}

/// The values an integer dtype holds (inclusive).
fn int_range(dtype: DType) -> (i64, i64) {
    match dtype {
        DType::U8 => (0, u8::MAX as i64),
        DType::I8 => (i8::MIN as i64, i8::MAX as i64),
        DType::I32 => (i32::MIN as i64, i32::MAX as i64),
        DType::Bool => (0, 1),
        DType::I64 | DType::F32 => (i64::MIN, i64::MAX),
    }
}
