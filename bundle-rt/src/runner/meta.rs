//! [`DdMeta`]: DynamicDispatch's meta JSON of a fused segment (`NAME.<segment>.meta.json`, version 1.x),
//! read and checked as its loader reads it, then against a bundle's segment by
//! [`Runner::check_meta`](super::Runner::check_meta).
//!
//! What holds once a `DdMeta` exists: `dd_meta_major_version` is 1 and `dd_meta_minor_version` is
//! present; `fused_tensors` has exactly the five buffers `in`, `out`, `scratch`, `const`,
//! `super_instr` with `xrt_arg_id` 0..4 (the DDR_PATCH argidx), each `packed_tensors` name an entry of
//! `tensor_map` in that buffer; every `tensor_map` entry has a known buffer label and its `xrt_arg_id`,
//! a dtype DynamicDispatch knows, `size_in_bytes` = the shape's elements × the dtype's size (`uint8`
//! blobs of NPU-layout constants included), and lies inside its buffer; every `op_list` entry has a
//! `name`, a `type` and `in_args`, `const_args`, `out_args` naming `tensor_map` entries. Errors are
//! [`Error::BadMeta`] naming the field and the entry; numbers are JSON numbers, as its loader reads them.

use alloc::string::{String, ToString};
use alloc::vec::Vec;

use serde_json::{Map, Value};

use crate::error::{Error, MetaWhy, Name};
use crate::Result;

/// The five fused buffers, in `xrt_arg_id` order.
pub const META_BUFFERS: [&str; 5] = ["in", "out", "scratch", "const", "super_instr"];

/// DynamicDispatch's dtype names and their sizes in bytes (its `get_size_of_type`).
const DTYPES: [(&str, u64); 13] = [
    ("int8", 1),
    ("uint8", 1),
    ("int16", 2),
    ("uint16", 2),
    ("int32", 4),
    ("uint32", 4),
    ("int64", 8),
    ("uint64", 8),
    ("bfloat16", 2),
    ("float32", 4),
    ("float", 4),
    ("double", 8),
    ("float64", 8),
];

/// A checked meta document; see the module docs for what holds.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DdMeta {
    /// (`dd_meta_major_version`, `dd_meta_minor_version`).
    pub version: (u64, u64),
    /// `buffer_size` of `in`, `out`, `scratch`, `const`, `super_instr`.
    pub buffer_sizes: [u64; 5],
    /// `tensor_map`, in document order.
    pub tensors: Vec<MetaTensor>,
    /// `op_list`.
    pub ops: Vec<MetaOp>,
}

/// One entry of `tensor_map`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MetaTensor {
    /// The tensor's name (the key).
    pub name: String,
    /// Its buffer: an index into [`META_BUFFERS`].
    pub buffer: usize,
    /// `dtype`.
    pub dtype: String,
    /// `shape`.
    pub shape: Vec<u64>,
    /// `size_in_bytes`.
    pub size: u64,
    /// `offset` in the buffer.
    pub offset: u64,
}

/// One entry of `op_list`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MetaOp {
    /// `name`.
    pub name: String,
    /// `type` (the ONNX op).
    pub op_type: String,
    /// `in_args`, `const_args`, `out_args`.
    pub args: [Vec<String>; 3],
}

fn bad(field: &'static str, name: &str, why: MetaWhy) -> Error {
    Error::BadMeta {
        field,
        name: Name::new(name),
        why,
    }
}

/// Key `key` of `obj`, required.
fn get<'v>(obj: &'v Map<String, Value>, key: &'static str, name: &str) -> Result<&'v Value> {
    obj.get(key).ok_or_else(|| bad(key, name, MetaWhy::Missing))
}

fn object<'v>(v: &'v Value, field: &'static str, name: &str) -> Result<&'v Map<String, Value>> {
    let expected = "an object";
    v.as_object()
        .ok_or_else(|| bad(field, name, MetaWhy::WrongType { expected }))
}

fn array<'v>(v: &'v Value, field: &'static str, name: &str) -> Result<&'v Vec<Value>> {
    let expected = "an array";
    v.as_array()
        .ok_or_else(|| bad(field, name, MetaWhy::WrongType { expected }))
}

fn text(v: &Value, field: &'static str, name: &str) -> Result<String> {
    let expected = "a string";
    v.as_str()
        .map(str::to_string)
        .ok_or_else(|| bad(field, name, MetaWhy::WrongType { expected }))
}

fn number(v: &Value, field: &'static str, name: &str) -> Result<u64> {
    let expected = "a non-negative integer";
    v.as_u64()
        .ok_or_else(|| bad(field, name, MetaWhy::WrongType { expected }))
}

fn strings(v: &Value, field: &'static str, name: &str) -> Result<Vec<String>> {
    array(v, field, name)?
        .iter()
        .map(|s| text(s, field, name))
        .collect()
}

impl DdMeta {
    /// Parses and checks `json`.
    pub fn parse(json: &str) -> Result<DdMeta> {
        let doc: Value = serde_json::from_str(json).map_err(|e| {
            let text = e.to_string();
            let message = text.split(" at line ").next().unwrap_or("");
            let (line, column) = (e.line() as u64, e.column() as u64);
            bad("", message, MetaWhy::Syntax { line, column })
        })?;
        let doc = object(&doc, "", "")?;
        let major = number(
            get(doc, "dd_meta_major_version", "")?,
            "dd_meta_major_version",
            "",
        )?;
        if major != 1 {
            let name = Name::from_display(major);
            let why = MetaWhy::Unsupported;
            let field = "dd_meta_major_version";
            return Err(Error::BadMeta { field, name, why });
        }
        let minor = number(
            get(doc, "dd_meta_minor_version", "")?,
            "dd_meta_minor_version",
            "",
        )?;
        let tensors = tensor_map(doc)?;
        let buffer_sizes = fused_tensors(doc, &tensors)?;
        for t in &tensors {
            let limit = buffer_sizes[t.buffer];
            let end = t.offset.saturating_add(t.size);
            if end > limit {
                let why = MetaWhy::OutOfRange { end, limit };
                return Err(bad("tensor_map.offset", &t.name, why));
            }
        }
        let ops = op_list(doc, &tensors)?;
        Ok(DdMeta {
            version: (major, minor),
            buffer_sizes,
            tensors,
            ops,
        })
    }

    /// The entry of `tensor_map` called `name`.
    pub fn tensor(&self, name: &str) -> Option<&MetaTensor> {
        self.tensors.iter().find(|t| t.name == name)
    }
}

/// `tensor_map`: every entry checked on its own.
fn tensor_map(doc: &Map<String, Value>) -> Result<Vec<MetaTensor>> {
    let map = object(get(doc, "tensor_map", "")?, "tensor_map", "")?;
    let mut tensors = Vec::with_capacity(map.len());
    for (name, v) in map {
        let e = object(v, "tensor_map", name)?;
        let label = text(
            get(e, "packed_buffer_label", name)?,
            "tensor_map.packed_buffer_label",
            name,
        )?;
        let Some(buffer) = META_BUFFERS.iter().position(|b| *b == label) else {
            let why = MetaWhy::UnknownValue {
                expected: "in, out, scratch, const, super_instr",
            };
            return Err(bad("tensor_map.packed_buffer_label", name, why));
        };
        let arg = number(get(e, "xrt_arg_id", name)?, "tensor_map.xrt_arg_id", name)?;
        if arg != buffer as u64 {
            let why = MetaWhy::Mismatch {
                expected: buffer as u64,
                got: arg,
            };
            return Err(bad("tensor_map.xrt_arg_id", name, why));
        }
        let dtype = text(get(e, "dtype", name)?, "tensor_map.dtype", name)?;
        let Some(&(_, width)) = DTYPES.iter().find(|(d, _)| *d == dtype) else {
            let why = MetaWhy::UnknownValue {
                expected: "int8, uint8, int16, uint16, int32, uint32, int64, uint64, bfloat16, float32, float, double, float64",
            };
            return Err(bad("tensor_map.dtype", name, why));
        };
        let shape: Vec<u64> = array(get(e, "shape", name)?, "tensor_map.shape", name)?
            .iter()
            .map(|d| number(d, "tensor_map.shape", name))
            .collect::<Result<_>>()?;
        let size = number(
            get(e, "size_in_bytes", name)?,
            "tensor_map.size_in_bytes",
            name,
        )?;
        let bytes = shape
            .iter()
            .try_fold(width, |acc, &d| acc.checked_mul(d))
            .unwrap_or(u64::MAX);
        if size != bytes {
            let why = MetaWhy::Mismatch {
                expected: bytes,
                got: size,
            };
            return Err(bad("tensor_map.size_in_bytes", name, why));
        }
        let offset = number(get(e, "offset", name)?, "tensor_map.offset", name)?;
        if let Some(f) = e.get("file_name") {
            text(f, "tensor_map.file_name", name)?;
        }
        if let Some(f) = e.get("file_size") {
            number(f, "tensor_map.file_size", name)?;
        }
        tensors.push(MetaTensor {
            name: name.clone(),
            buffer,
            dtype,
            shape,
            size,
            offset,
        });
    }
    Ok(tensors)
}

/// `fused_tensors`: the five buffers' sizes; their packed tensors are `tensor_map` entries of theirs.
fn fused_tensors(doc: &Map<String, Value>, tensors: &[MetaTensor]) -> Result<[u64; 5]> {
    let fused = object(get(doc, "fused_tensors", "")?, "fused_tensors", "")?;
    if let Some(other) = fused.keys().find(|k| !META_BUFFERS.contains(&k.as_str())) {
        let why = MetaWhy::UnknownValue {
            expected: "in, out, scratch, const, super_instr",
        };
        return Err(bad("fused_tensors", other, why));
    }
    let mut sizes = [0u64; 5];
    for (k, label) in META_BUFFERS.iter().enumerate() {
        let b = object(get(fused, label, label)?, "fused_tensors", label)?;
        sizes[k] = number(
            get(b, "buffer_size", label)?,
            "fused_tensors.buffer_size",
            label,
        )?;
        let arg = number(
            get(b, "xrt_arg_id", label)?,
            "fused_tensors.xrt_arg_id",
            label,
        )?;
        if arg != k as u64 {
            let why = MetaWhy::Mismatch {
                expected: k as u64,
                got: arg,
            };
            return Err(bad("fused_tensors.xrt_arg_id", label, why));
        }
        let packed = get(b, "packed_tensors", label)?;
        for name in strings(packed, "fused_tensors.packed_tensors", label)? {
            if !tensors.iter().any(|t| t.name == name && t.buffer == k) {
                return Err(bad(
                    "fused_tensors.packed_tensors",
                    &name,
                    MetaWhy::NotDeclared,
                ));
            }
        }
    }
    Ok(sizes)
}

/// `op_list`: every argument a `tensor_map` entry.
fn op_list(doc: &Map<String, Value>, tensors: &[MetaTensor]) -> Result<Vec<MetaOp>> {
    let list = array(get(doc, "op_list", "")?, "op_list", "")?;
    let mut ops = Vec::with_capacity(list.len());
    for v in list {
        let e = object(v, "op_list", "")?;
        let name = text(get(e, "name", "")?, "op_list.name", "")?;
        let op_type = text(get(e, "type", &name)?, "op_list.type", &name)?;
        let mut args: [Vec<String>; 3] = Default::default();
        for (slot, key) in args.iter_mut().zip(["in_args", "const_args", "out_args"]) {
            let field = match key {
                "in_args" => "op_list.in_args",
                "const_args" => "op_list.const_args",
                _ => "op_list.out_args",
            };
            *slot = strings(get(e, key, &name)?, field, &name)?;
            if let Some(missing) = slot.iter().find(|a| !tensors.iter().any(|t| &t.name == *a)) {
                return Err(bad(field, missing, MetaWhy::NotDeclared));
            }
        }
        ops.push(MetaOp {
            name,
            op_type,
            args,
        });
    }
    Ok(ops)
}

impl DdMeta {
    /// Checks the document against the bundle's segment `seg`: the five buffer sizes are the
    /// segment's, and the `in` and `out` tensors are exactly the segment's copy-ins and copy-outs
    /// (same fused offset and size).
    pub fn check_segment(&self, seg: &crate::config::NpuSegmentInfo<'_>) -> Result<()> {
        let sizes = [
            seg.input.size,
            seg.output.size,
            seg.scratch.size,
            seg.constants.size,
            seg.params.size,
        ];
        for ((label, &want), &got) in META_BUFFERS.iter().zip(&sizes).zip(&self.buffer_sizes) {
            if want as u64 != got {
                let why = MetaWhy::Mismatch {
                    expected: want as u64,
                    got,
                };
                return Err(bad("fused_tensors.buffer_size", label, why));
            }
        }
        let copies = |buffer: usize| -> Vec<(u64, u64)> {
            let list: Vec<crate::config::NpuCopyInfo> = if buffer == 0 {
                seg.copies_in().collect()
            } else {
                seg.copies_out().collect()
            };
            list.iter()
                .map(|c| (c.fused_offset as u64, c.bytes.size as u64))
                .collect()
        };
        for buffer in [0, 1] {
            let copied = copies(buffer);
            let placed: Vec<&MetaTensor> =
                self.tensors.iter().filter(|t| t.buffer == buffer).collect();
            let field = "tensor_map.offset";
            for &(offset, size) in &copied {
                if !placed.iter().any(|t| t.offset == offset && t.size == size) {
                    let label = META_BUFFERS[buffer];
                    return Err(bad(field, label, MetaWhy::NoCopy { offset }));
                }
            }
            if let Some(t) = placed
                .iter()
                .find(|t| !copied.contains(&(t.offset, t.size)))
            {
                let why = MetaWhy::NoCopy { offset: t.offset };
                return Err(bad(field, &t.name, why));
            }
        }
        Ok(())
    }
}
