//! Calibration samples: `.npy` tensors (the model's single input), `.npz` archives (one sample; keys are input
//! names) and PNG / JPEG images with explicit preprocessing — resize the shorter side, centre crop, pixel range
//! (Glow's `-image_mode`), optional per-channel mean / std, NCHW or NHWC layout. Directories expand to their
//! files in name order. Every mismatch (shape, dtype, missing key, undecodable file) is an error naming the file.

use crate::error::{Error, Result};
use crate::ir::{numel, DType, Data, Tensor};
use std::io::Read;
use std::path::{Path, PathBuf};

/// Pixel range of a decoded image before mean / std.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum ImageMode {
    /// x / 255
    #[value(name = "0to1")]
    ZeroToOne,
    /// x / 127.5 - 1
    #[value(name = "neg1to1")]
    NegOneToOne,
    /// x
    #[value(name = "0to255")]
    ZeroTo255,
    /// x - 128
    #[value(name = "neg128to127")]
    Neg128To127,
}

/// How images become input tensors.
#[derive(Debug, Clone)]
pub struct ImageOptions {
    /// Pixel range.
    pub mode: ImageMode,
    /// Resize the shorter side to this (0: no resize).
    pub resize: usize,
    /// Per-channel mean subtracted after the range mapping (RGB).
    pub mean: [f32; 3],
    /// Per-channel divisor after the mean.
    pub std: [f32; 3],
    /// Channels last.
    pub nhwc: bool,
}

/// One calibration sample: a value per model input, in input order.
pub type Sample = Vec<Tensor>;

fn err(path: &Path, m: impl std::fmt::Display) -> Error {
    Error::InvalidArgument {
        what: format!("calibration input '{}'", path.display()),
        message: m.to_string(),
    }
}

/// Expands directories into their `.npy` / `.npz` / `.png` / `.jpg` / `.jpeg` files, sorted.
pub fn expand(paths: &[PathBuf]) -> Result<Vec<PathBuf>> {
    let mut out = Vec::new();
    for p in paths {
        if p.is_dir() {
            let rd = std::fs::read_dir(p).map_err(|e| err(p, e))?;
            let mut v: Vec<PathBuf> = rd
                .filter_map(|e| e.ok().map(|e| e.path()))
                .filter(|f| {
                    let ext = f.extension().and_then(|e| e.to_str()).unwrap_or("");
                    matches!(
                        ext.to_ascii_lowercase().as_str(),
                        "npy" | "npz" | "png" | "jpg" | "jpeg"
                    )
                })
                .collect();
            v.sort();
            out.extend(v);
        } else {
            out.push(p.clone());
        }
    }
    if out.is_empty() {
        return Err(Error::InvalidArgument {
            what: "--inputs".into(),
            message: "no calibration files".into(),
        });
    }
    Ok(out)
}

/// Loads one sample for inputs `(name, shape, dtype)`.
pub fn load(
    path: &Path,
    inputs: &[(String, Vec<usize>, DType)],
    img: &ImageOptions,
) -> Result<Sample> {
    let ext = path
        .extension()
        .and_then(|e| e.to_str())
        .unwrap_or("")
        .to_ascii_lowercase();
    let single = || -> Result<&(String, Vec<usize>, DType)> {
        match inputs {
            [one] => Ok(one),
            _ => Err(err(
                path,
                format!(
                    "the model has {} inputs: give an .npz whose keys are the input names",
                    inputs.len()
                ),
            )),
        }
    };
    match ext.as_str() {
        "npy" => {
            let (_, shape, dtype) = single()?;
            let cap = (numel(shape) as u64)
                .saturating_mul(8)
                .saturating_add(NPY_HEADER_SLACK);
            let bytes =
                crate::fsio::read_bounded(path, cap, "an .npy sample of this model's input")?;
            Ok(vec![conform(
                path,
                parse_npy(&bytes).map_err(|m| err(path, m))?,
                shape,
                *dtype,
            )?])
        }
        "npz" => {
            let (f, _) = crate::fsio::open_regular(path)?;
            let mut z = zip::ZipArchive::new(f).map_err(|e| err(path, e))?;
            inputs
                .iter()
                .map(|(name, shape, dtype)| {
                    let mut entry = z
                        .by_name(&format!("{name}.npy"))
                        .map_err(|_| err(path, format!("no array named '{name}'")))?;
                    // The member may be at most the input's elements as f8 plus a generous header: a larger
                    // one (declared or decompressed) is refused before it is held in memory.
                    let cap = (numel(shape) as u64)
                        .saturating_mul(8)
                        .saturating_add(NPY_HEADER_SLACK);
                    let too_large = || {
                        err(
                            path,
                            format!(
                                "array '{name}' is larger than the model input needs ({cap} bytes at most)"
                            ),
                        )
                    };
                    if entry.size() > cap {
                        return Err(too_large());
                    }
                    let mut bytes = Vec::new();
                    (&mut entry)
                        .take(cap.saturating_add(1))
                        .read_to_end(&mut bytes)
                        .map_err(|e| err(path, format!("array '{name}': {e}")))?;
                    if bytes.len() as u64 > cap {
                        return Err(too_large());
                    }
                    let t = parse_npy(&bytes).map_err(|m| err(path, format!("'{name}': {m}")))?;
                    conform(path, t, shape, *dtype)
                })
                .collect()
        }
        "png" | "jpg" | "jpeg" => {
            let (_, shape, dtype) = single()?;
            if *dtype != DType::F32 || shape.len() != 4 {
                return Err(err(path, "images need a single f32 input of rank 4"));
            }
            Ok(vec![image(path, shape, img)?])
        }
        _ => Err(err(path, "unknown file type (.npy, .npz, .png, .jpg)")),
    }
}

/// Room for an `.npy` header in an `.npz` member, beyond the array data itself.
const NPY_HEADER_SLACK: u64 = 64 << 10;

/// Largest image file read as a calibration sample.
pub const MAX_IMAGE_FILE_BYTES: u64 = 256 << 20;

/// Largest `--resize` (pixels on the shorter side).
pub const MAX_RESIZE: usize = 1 << 14;

/// Most pixels an image may have after `--resize` (2^28, 768 MiB as RGB).
pub const MAX_RESIZED_PIXELS: f64 = (1u64 << 28) as f64;

fn conform(path: &Path, t: Tensor, shape: &[usize], dtype: DType) -> Result<Tensor> {
    if t.shape != shape {
        return Err(err(
            path,
            format!("shape {:?}, the model input is {shape:?}", t.shape),
        ));
    }
    if t.dtype == dtype {
        return Ok(t);
    }
    if dtype == DType::F32 && t.dtype != DType::Bool {
        return Ok(Tensor::f32(t.shape.clone(), t.to_f32_vec()));
    }
    Err(err(path, format!("{} data for a {dtype} input", t.dtype)))
}

/// Parses a `.npy` (version 1–3, C order, little-endian f4/f8/i1/u1/i4/i8/b1).
pub fn parse_npy(b: &[u8]) -> std::result::Result<Tensor, String> {
    if b.len() < 10 || &b[..6] != b"\x93NUMPY" {
        return Err("not an .npy file".into());
    }
    let (hlen, at): (usize, usize) = match b[6] {
        1 => (u16::from_le_bytes([b[8], b[9]]) as usize, 10),
        2 | 3 if b.len() >= 12 => (u32::from_le_bytes([b[8], b[9], b[10], b[11]]) as usize, 12),
        v => return Err(format!("unsupported .npy version {v}")),
    };
    let header = b
        .get(at..at.saturating_add(hlen))
        .ok_or("truncated header")?;
    let header = std::str::from_utf8(header).map_err(|_| "header is not text")?;
    let field = |key: &str| -> Option<&str> {
        let i = header.find(&format!("'{key}'"))? + key.len() + 2;
        let rest = header[i..].trim_start().strip_prefix(':')?.trim_start();
        Some(rest)
    };
    let descr = field("descr").ok_or("no descr")?;
    let descr = descr
        .strip_prefix('\'')
        .and_then(|d| d.split('\'').next())
        .ok_or("bad descr")?;
    if field("fortran_order").is_some_and(|f| f.starts_with("True")) {
        return Err("Fortran-order arrays are not supported".into());
    }
    let shape_s = field("shape").ok_or("no shape")?;
    let shape_s = shape_s
        .strip_prefix('(')
        .and_then(|s| s.split(')').next())
        .ok_or("bad shape")?;
    let shape = shape_s
        .split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(|s| {
            s.parse::<usize>()
                .map_err(|_| format!("bad dimension '{s}'"))
        })
        .collect::<std::result::Result<Vec<_>, _>>()?;
    crate::ir::types::check_size(DType::F32, &shape)?;
    let n = numel(&shape);
    let data = &b[at + hlen..];
    let (size, dtype) = match descr {
        "<f4" => (4, DType::F32),
        "<f8" => (8, DType::F32),
        "|u1" => (1, DType::U8),
        "|i1" => (1, DType::I8),
        "<i4" => (4, DType::I32),
        "<i8" => (8, DType::I64),
        "|b1" => (1, DType::Bool),
        d => return Err(format!("unsupported dtype '{d}'")),
    };
    if data.len() != n * size {
        return Err(format!(
            "{} data bytes for shape {shape:?} of {descr} ({} expected)",
            data.len(),
            n * size
        ));
    }
    let c = data.chunks_exact(size);
    let t = match descr {
        "<f4" => Tensor::f32(
            shape,
            c.map(|x| f32::from_le_bytes(x.try_into().unwrap_or([0; 4])))
                .collect(),
        ),
        "<f8" => Tensor::f32(
            shape,
            c.map(|x| f64::from_le_bytes(x.try_into().unwrap_or([0; 8])) as f32)
                .collect(),
        ),
        _ => Tensor {
            dtype,
            shape,
            data: Data::I64(
                c.map(|x| match descr {
                    "|u1" | "|b1" => x[0] as i64,
                    "|i1" => x[0] as i8 as i64,
                    "<i4" => i32::from_le_bytes(x.try_into().unwrap_or([0; 4])) as i64,
                    _ => i64::from_le_bytes(x.try_into().unwrap_or([0; 8])),
                })
                .collect(),
            ),
        },
    };
    Ok(t)
}

/// Decodes, resizes (shorter side), centre-crops to the input's spatial size and normalises an image.
fn image(path: &Path, shape: &[usize], o: &ImageOptions) -> Result<Tensor> {
    let bytes = crate::fsio::read_bounded(path, MAX_IMAGE_FILE_BYTES, "a calibration image")?;
    let img = image::ImageReader::new(std::io::Cursor::new(bytes))
        .with_guessed_format()
        .map_err(|e| err(path, e))?
        .decode()
        .map_err(|e| err(path, e))?
        .to_rgb8();
    let (c, h, w) = if o.nhwc {
        (shape[3], shape[1], shape[2])
    } else {
        (shape[1], shape[2], shape[3])
    };
    if c != 3 {
        return Err(err(
            path,
            format!("the input has {c} channels; images give 3"),
        ));
    }
    let img = if o.resize > 0 {
        if o.resize > MAX_RESIZE {
            return Err(Error::InvalidArgument {
                what: format!("--resize {}", o.resize),
                message: format!("expected 1 to {MAX_RESIZE} pixels"),
            });
        }
        let (iw, ih) = img.dimensions();
        let s = o.resize as f64 / iw.min(ih).max(1) as f64;
        let (fw, fh) = (
            (iw as f64 * s).round().max(1.0),
            (ih as f64 * s).round().max(1.0),
        );
        if fw * fh > MAX_RESIZED_PIXELS {
            return Err(err(
                path,
                format!(
                    "--resize {}: the {iw}x{ih} image would become {fw}x{fh}, more than 2^28 pixels",
                    o.resize
                ),
            ));
        }
        image::imageops::resize(
            &img,
            fw as u32,
            fh as u32,
            image::imageops::FilterType::Triangle,
        )
    } else {
        img
    };
    let (iw, ih) = img.dimensions();
    if (iw as usize) < w || (ih as usize) < h {
        return Err(err(
            path,
            format!("{iw}x{ih} image is smaller than the {w}x{h} input (use --resize)"),
        ));
    }
    let (x0, y0) = ((iw as usize - w) / 2, (ih as usize - h) / 2);
    let mut v = vec![0f32; shape.iter().product()];
    for y in 0..h {
        for x in 0..w {
            let px = img.get_pixel((x0 + x) as u32, (y0 + y) as u32);
            for ch in 0..3 {
                let p = px[ch] as f32;
                let r = match o.mode {
                    ImageMode::ZeroToOne => p / 255.0,
                    ImageMode::NegOneToOne => p / 127.5 - 1.0,
                    ImageMode::ZeroTo255 => p,
                    ImageMode::Neg128To127 => p - 128.0,
                };
                let r = (r - o.mean[ch]) / o.std[ch];
                let i = if o.nhwc {
                    (y * w + x) * 3 + ch
                } else {
                    (ch * h + y) * w + x
                };
                v[i] = r;
            }
        }
    }
    Ok(Tensor::f32(shape.to_vec(), v))
}

#[cfg(test)]
mod tests {
    use super::parse_npy;

    fn npy(descr: &str, shape: &str, data: &[u8]) -> Vec<u8> {
        let h = format!("{{'descr': '{descr}', 'fortran_order': False, 'shape': {shape}, }}\n");
        let mut b = b"\x93NUMPY\x01\x00".to_vec();
        b.extend_from_slice(&(h.len() as u16).to_le_bytes());
        b.extend_from_slice(h.as_bytes());
        b.extend_from_slice(data);
        b
    }

    #[test]
    fn parses_and_rejects() {
        let d: Vec<u8> = [1.5f32, -2.0]
            .iter()
            .flat_map(|x| x.to_le_bytes())
            .collect();
        let t = parse_npy(&npy("<f4", "(1, 2)", &d)).unwrap();
        assert_eq!(t.shape, vec![1, 2]);
        assert_eq!(t.as_f32().unwrap(), &[1.5, -2.0]);
        assert!(parse_npy(&npy("<f4", "(1, 3)", &d))
            .unwrap_err()
            .contains("data bytes"));
        assert!(parse_npy(&npy("<c8", "(1,)", &d)).is_err());
        assert!(parse_npy(&npy("<f4", "(99999999999, 99999999999)", &d)).is_err());
        assert!(parse_npy(b"\x93NUMPY\x01\x00\xff\xff").is_err());
    }
}
