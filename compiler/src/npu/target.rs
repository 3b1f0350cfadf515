//! The NPU target description: the array geometry, local memories, the tile kinds' DMA registers (`tiles.rs`),
//! MAC rates, DMA and instruction bandwidth,
//! dispatch overhead, the host CPU figures the cost model compares against, and the ops the target accepts with
//! their limits. The default `vnpu` ships in `compiler/targets/vnpu.json`; `--npu FILE` reads another. Every field
//! is checked when the file is read and errors name the field (`ops[3].max_stride`). `docs/npu.md` documents it.

use crate::error::{Error, Result};
use serde::{Deserialize, Serialize};
use std::path::Path;

/// The shipped virtual NPU description.
pub const VNPU_JSON: &str = include_str!("../../targets/vnpu.json");

/// MAC rates per cycle by dtype.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MacRates {
    /// f32 multiply-accumulates per cycle.
    pub f32: u32,
    /// int8 multiply-accumulates per cycle.
    pub i8: u32,
}

/// The host CPU as the cost model sees it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HostModel {
    /// Clock in MHz.
    pub clock_mhz: u32,
    /// MACs per cycle (one core).
    pub macs_per_cycle: MacRates,
    /// Elementwise results per cycle.
    pub elements_per_cycle: u32,
    /// memcpy bytes per cycle (the staging copies at segment borders).
    pub copy_bytes_per_cycle: u32,
}

/// One op the target accepts, with its limits.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct OpSupport {
    /// ONNX op type.
    pub op: String,
    /// Accepted activation dtypes (`f32`, `u8`, `i8`).
    pub dtypes: Vec<String>,
    /// Largest kernel side (conv, pools).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_kernel: Option<u32>,
    /// Largest stride.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_stride: Option<u32>,
    /// Largest dilation.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_dilation: Option<u32>,
}

/// A target description.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NpuTarget {
    /// Device name (the recipe's kernel `instance`).
    pub name: String,
    /// Free text.
    #[serde(default)]
    pub description: String,
    /// Device generation byte of the transaction header.
    pub generation: u8,
    /// Total rows: shim row + memory-tile rows + core rows.
    pub rows: u8,
    /// Columns.
    pub cols: u8,
    /// Memory-tile rows (rows 1..=this).
    pub mem_tile_rows: u8,
    /// Data memory per core tile, bytes.
    pub local_memory_bytes: u32,
    /// Data memory per memory tile, bytes.
    pub mem_tile_bytes: u32,
    /// The tile kinds' DMA registers.
    pub tiles: super::tiles::Tiles,
    /// NPU clock, MHz.
    pub clock_mhz: u32,
    /// MACs per cycle per core tile.
    pub macs_per_cycle: MacRates,
    /// DDR bandwidth of the array's DMAs, bytes per cycle.
    pub dma_bytes_per_cycle: u32,
    /// Instruction (transaction) fetch bandwidth, bytes per cycle.
    pub instr_bytes_per_cycle: u32,
    /// Fixed cost of dispatching one segment, cycles.
    pub dispatch_overhead_cycles: u32,
    /// The host CPU the cost model compares with.
    pub host: HostModel,
    /// Accepted ops.
    pub ops: Vec<OpSupport>,
}

/// Longest device name (it becomes a file name and a recipe symbol).
pub const MAX_NAME: usize = 64;

/// An error message of at most about 512 bytes: a long one keeps its head and its tail (serde's `at line L
/// column C`), so a huge value in the file is not printed back.
fn clip(m: String) -> String {
    if m.len() <= 512 {
        return m;
    }
    let head = (0..=256)
        .rev()
        .find(|&i| m.is_char_boundary(i))
        .unwrap_or(0);
    let tail = (m.len() - 128..m.len())
        .find(|&i| m.is_char_boundary(i))
        .unwrap_or(m.len());
    format!("{} ... {}", &m[..head], &m[tail..])
}

/// The path (`clock_mhz`, `host.clock_mhz`, `ops[3].max_kernel`) of the value serde_json was reading when it
/// failed at `line` (1-based) and `column` (bytes read on that line), found by re-scanning the text up to there.
/// A missing field (reported after its object's `}`) is appended to the object's path from the message.
fn field_at(text: &str, line: usize, column: usize, message: &str) -> Option<String> {
    enum Frame {
        Object { key: String, want_key: bool },
        Array { index: usize },
    }
    let start = match line {
        0 => return None,
        1 => 0,
        l => text.match_indices('\n').nth(l - 2)?.0 + 1,
    };
    let end = start.saturating_add(column).min(text.len());
    let b = text.as_bytes();
    let mut stack: Vec<Frame> = Vec::new();
    let mut i = 0;
    while i < end {
        match b[i] {
            b'{' => stack.push(Frame::Object {
                key: String::new(),
                want_key: true,
            }),
            b'[' => stack.push(Frame::Array { index: 0 }),
            b'}' | b']' => {
                stack.pop();
            }
            b',' => match stack.last_mut() {
                Some(Frame::Object { want_key, .. }) => *want_key = true,
                Some(Frame::Array { index }) => *index += 1,
                None => {}
            },
            b':' => {
                if let Some(Frame::Object { want_key, .. }) = stack.last_mut() {
                    *want_key = false;
                }
            }
            b'"' => {
                // Skip the string (escapes included); an object key is remembered, shortened.
                let from = i + 1;
                i += 1;
                while i < end && b[i] != b'"' {
                    i += if b[i] == b'\\' { 2 } else { 1 };
                }
                if let Some(Frame::Object {
                    key,
                    want_key: true,
                }) = stack.last_mut()
                {
                    let k = text.get(from..i.min(end)).unwrap_or("");
                    *key = match k.char_indices().nth(64) {
                        Some((cut, _)) => format!("{}...", &k[..cut]),
                        None => k.to_string(),
                    };
                }
            }
            _ => {}
        }
        i += 1;
    }
    let mut path = String::new();
    for f in &stack {
        match f {
            Frame::Object { key, .. } => {
                if !path.is_empty() {
                    path.push('.');
                }
                path.push_str(key);
            }
            Frame::Array { index } => path.push_str(&format!("[{index}]")),
        }
    }
    if let Some(rest) = message.strip_prefix("missing field `") {
        let name = rest.split('`').next().unwrap_or("");
        if !path.is_empty() {
            path.push('.');
        }
        path.push_str(name);
    }
    (!path.is_empty()).then_some(path)
}

fn bad(file: &str, field: impl Into<String>, message: impl Into<String>) -> Error {
    Error::NpuTarget {
        file: file.into(),
        field: field.into(),
        message: clip(message.into()),
    }
}

impl NpuTarget {
    /// The shipped `vnpu`.
    pub fn vnpu() -> NpuTarget {
        // The shipped file is checked by a unit test; failing here would be a build defect.
        NpuTarget::parse(VNPU_JSON, "vnpu").unwrap_or_else(|e| panic!("shipped vnpu.json: {e}"))
    }
    /// `vnpu` or a JSON file path.
    pub fn load(spec: &str) -> Result<NpuTarget> {
        if spec == "vnpu" {
            return NpuTarget::parse(VNPU_JSON, "vnpu");
        }
        let text = crate::fsio::read_text_bounded(
            Path::new(spec),
            crate::fsio::MAX_TEXT_BYTES,
            "an NPU target description",
        )?;
        NpuTarget::parse(&text, spec)
    }
    /// Parses and checks a description; `file` names it in errors. A value of the wrong type, an unknown, missing
    /// or repeated field is named by its path (`host.clock_mhz`, `ops[3].max_kernel`); a syntax error by its
    /// line and column.
    pub fn parse(text: &str, file: &str) -> Result<NpuTarget> {
        let t: NpuTarget = serde_json::from_str(text).map_err(|e| {
            let message = clip(e.to_string());
            let at = format!("line {} column {}", e.line(), e.column());
            let field = if e.is_data() {
                field_at(text, e.line(), e.column(), &message).unwrap_or(at)
            } else {
                at
            };
            bad(file, field, message)
        })?;
        t.check(file)?;
        Ok(t)
    }
    fn check(&self, file: &str) -> Result<()> {
        let pos = |v: u64, f: &str| -> Result<()> {
            if v == 0 {
                Err(bad(file, f, "must be at least 1"))
            } else {
                Ok(())
            }
        };
        if self.name.is_empty()
            || self.name.len() > MAX_NAME
            || !self
                .name
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
        {
            return Err(bad(
                file,
                "name",
                format!("must be 1 to {MAX_NAME} characters [A-Za-z0-9_-]"),
            ));
        }
        if !bundle_rt::TXN_GENERATIONS.contains(&self.generation) {
            let known: Vec<String> = bundle_rt::TXN_GENERATIONS
                .iter()
                .map(|g| format!("{g} (0x{g:02x})"))
                .collect();
            return Err(bad(
                file,
                "generation",
                format!(
                    "{} is not a device generation bundle-rt's transaction decoder reads (known: {})",
                    self.generation,
                    known.join(", ")
                ),
            ));
        }
        pos(self.cols as u64, "cols")?;
        if self.cols > 64 {
            return Err(bad(
                file,
                "cols",
                "at most 64 (register addresses hold 7 column bits)",
            ));
        }
        if self.rows > 31 || (self.rows as u32) < self.mem_tile_rows as u32 + 2 {
            return Err(bad(
                file,
                "rows",
                "must count the shim row, the memory-tile rows and at least one core row, and be at most 31",
            ));
        }
        if !(1024..=(1 << 18)).contains(&self.local_memory_bytes)
            || !self.local_memory_bytes.is_multiple_of(64)
        {
            return Err(bad(
                file,
                "local_memory_bytes",
                "must be a multiple of 64 in 1 KiB..=256 KiB",
            ));
        }
        if self.mem_tile_bytes > (1 << 19) * 2 || !self.mem_tile_bytes.is_multiple_of(64) {
            return Err(bad(
                file,
                "mem_tile_bytes",
                "must be a multiple of 64, at most 1 MiB",
            ));
        }
        if self.mem_tile_rows > 0 && self.mem_tile_bytes == 0 {
            return Err(bad(
                file,
                "mem_tile_bytes",
                format!(
                    "must be at least 64 when mem_tile_rows is {} (a memory tile needs memory)",
                    self.mem_tile_rows
                ),
            ));
        }
        // The data movement's routes (`npu/dma.rs`): a transfer stages in the memory tile of row 1, whose 6 S2MM and
        // 6 MM2S channels serve the loads and stores of at most 4 core rows, each with its own staging area for
        // each direction.
        if self.mem_tile_rows == 0 {
            return Err(bad(
                file,
                "mem_tile_rows",
                "must be at least 1: every transfer stages in a memory tile",
            ));
        }
        let cores = u32::from(self.rows) - u32::from(self.mem_tile_rows) - 1;
        if cores > 4 {
            return Err(bad(
                file,
                "rows",
                format!(
                    "{} core rows per column; a memory tile's channels serve at most 4",
                    cores
                ),
            ));
        }
        if u64::from(self.mem_tile_bytes) < 8 * u64::from(self.local_memory_bytes) {
            return Err(bad(
                file,
                "mem_tile_bytes",
                format!(
                    "{} B cannot hold the 8 staging areas of local_memory_bytes ({} B each) that transfers pass through",
                    self.mem_tile_bytes, self.local_memory_bytes
                ),
            ));
        }
        self.tiles.check().map_err(|(f, m)| bad(file, f, m))?;
        pos(self.clock_mhz as u64, "clock_mhz")?;
        pos(self.macs_per_cycle.f32 as u64, "macs_per_cycle.f32")?;
        pos(self.macs_per_cycle.i8 as u64, "macs_per_cycle.i8")?;
        pos(self.dma_bytes_per_cycle as u64, "dma_bytes_per_cycle")?;
        pos(self.instr_bytes_per_cycle as u64, "instr_bytes_per_cycle")?;
        pos(self.host.clock_mhz as u64, "host.clock_mhz")?;
        pos(
            self.host.macs_per_cycle.f32 as u64,
            "host.macs_per_cycle.f32",
        )?;
        pos(self.host.macs_per_cycle.i8 as u64, "host.macs_per_cycle.i8")?;
        pos(
            self.host.elements_per_cycle as u64,
            "host.elements_per_cycle",
        )?;
        pos(
            self.host.copy_bytes_per_cycle as u64,
            "host.copy_bytes_per_cycle",
        )?;
        for (i, o) in self.ops.iter().enumerate() {
            if !KNOWN_OPS.contains(&o.op.as_str()) {
                return Err(bad(
                    file,
                    format!("ops[{i}].op"),
                    format!(
                        "'{}' is not in the NPU op library ({})",
                        o.op,
                        KNOWN_OPS.join(", ")
                    ),
                ));
            }
            // After the op-name check: known names are few, so a repeat shows up within the first dozen.
            if let Some(first) = self.ops[..i].iter().position(|p| p.op == o.op) {
                return Err(bad(
                    file,
                    format!("ops[{i}].op"),
                    format!(
                        "'{}' is already listed at ops[{first}] (one entry per op)",
                        o.op
                    ),
                ));
            }
            for (j, d) in o.dtypes.iter().enumerate() {
                if !matches!(d.as_str(), "f32" | "u8" | "i8") {
                    return Err(bad(
                        file,
                        format!("ops[{i}].dtypes[{j}]"),
                        format!("'{d}': expected f32, u8 or i8"),
                    ));
                }
            }
            for (v, f) in [
                (o.max_kernel, "max_kernel"),
                (o.max_stride, "max_stride"),
                (o.max_dilation, "max_dilation"),
            ] {
                if v == Some(0) {
                    return Err(bad(file, format!("ops[{i}].{f}"), "must be at least 1"));
                }
            }
        }
        Ok(())
    }
    /// Core tiles as (col, row), column-major.
    pub fn core_tiles(&self) -> Vec<(u8, u8)> {
        let mut v = Vec::new();
        for row in self.mem_tile_rows + 1..self.rows {
            for col in 0..self.cols {
                v.push((col, row));
            }
        }
        v
    }
    /// The support entry of an ONNX op, if the target accepts it.
    pub fn op(&self, onnx_op: &str) -> Option<&OpSupport> {
        self.ops.iter().find(|o| o.op == onnx_op)
    }
    /// Host seconds per cycle ratio: converts host cycles to NPU cycles.
    pub fn host_to_npu_cycles(&self, host_cycles: f64) -> f64 {
        host_cycles * self.clock_mhz as f64 / self.host.clock_mhz as f64
    }
}

/// ONNX ops the library implements (a target may list a subset).
pub const KNOWN_OPS: &[&str] = &[
    "Conv",
    "MatMul",
    "Gemm",
    "Add",
    "Mul",
    "Relu",
    "Clip",
    "MaxPool",
    "AveragePool",
    "GlobalAveragePool",
    "Concat",
    "Reshape",
];

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shipped_vnpu_parses() {
        let t = NpuTarget::vnpu();
        assert_eq!(t.core_tiles().len(), 16);
    }

    #[test]
    fn bad_fields_are_named() {
        let mut v: serde_json::Value = serde_json::from_str(VNPU_JSON).unwrap();
        v["ops"][2]["max_stride"] = 0.into();
        let e = NpuTarget::parse(&v.to_string(), "t.json")
            .unwrap_err()
            .to_string();
        assert!(e.contains("ops[2].max_stride"), "{e}");
        v["ops"][2]["max_stride"] = 2.into();
        v["rows"] = 1.into();
        let e = NpuTarget::parse(&v.to_string(), "t.json")
            .unwrap_err()
            .to_string();
        assert!(e.contains("rows"), "{e}");
        let e = NpuTarget::parse("{\"name\": 3}", "t.json")
            .unwrap_err()
            .to_string();
        assert!(e.contains("t.json"), "{e}");
        v["rows"] = 6.into();
        v["ops"][0]["op"] = "GridSample".into();
        let e = NpuTarget::parse(&v.to_string(), "t.json")
            .unwrap_err()
            .to_string();
        assert!(e.contains("ops[0].op") && e.contains("GridSample"), "{e}");
    }

    #[test]
    fn type_errors_name_the_field_path() {
        let mut v: serde_json::Value = serde_json::from_str(VNPU_JSON).unwrap();
        let field = |v: &serde_json::Value| {
            let text = serde_json::to_string_pretty(v).unwrap();
            match NpuTarget::parse(&text, "t.json").unwrap_err() {
                Error::NpuTarget { field, .. } => field,
                e => panic!("{e}"),
            }
        };
        v["clock_mhz"] = "fast".into();
        assert_eq!(field(&v), "clock_mhz");
        v["clock_mhz"] = 1000.into();
        v["host"]["copy_bytes_per_cycle"] = (-1).into();
        assert_eq!(field(&v), "host.copy_bytes_per_cycle");
        v["host"]["copy_bytes_per_cycle"] = 16.into();
        v["ops"][1]["max_kernel"] = "big".into();
        assert_eq!(field(&v), "ops[1].max_kernel");
        v["ops"][1].as_object_mut().unwrap().remove("max_kernel");
        v["host"].as_object_mut().unwrap().remove("clock_mhz");
        assert_eq!(field(&v), "host.clock_mhz");
        v["host"]["clock_mhz"] = 3000.into();
        v["ops"][3] = v["ops"][0].clone();
        assert_eq!(field(&v), "ops[3].op");
        v["ops"][3]["op"] = "Add".into();
        v["mem_tile_bytes"] = 0.into();
        assert_eq!(field(&v), "mem_tile_bytes");
        v["mem_tile_bytes"] = 64.into();
        assert_eq!(field(&v), "mem_tile_bytes");
        v["mem_tile_bytes"] = 524288.into();
        v["mem_tile_rows"] = 0.into();
        assert_eq!(field(&v), "mem_tile_rows");
        v["mem_tile_rows"] = 1.into();
        v["rows"] = 7.into();
        assert_eq!(field(&v), "rows");
        v["rows"] = 6.into();
        v["name"] = "v".repeat(65).into();
        assert_eq!(field(&v), "name");
        v["name"] = "vnpu".into();
        assert!(NpuTarget::parse(&v.to_string(), "t.json").is_ok());
    }

    /// The tile kinds' registers must be AIE-ML's: a different value, a malformed offset or a missing map is
    /// named by its path.
    #[test]
    fn tile_registers_are_checked() {
        let v: serde_json::Value = serde_json::from_str(VNPU_JSON).unwrap();
        let field = |f: &dyn Fn(&mut serde_json::Value)| {
            let mut v = v.clone();
            f(&mut v);
            let text = serde_json::to_string_pretty(&v).unwrap();
            match NpuTarget::parse(&text, "t.json").unwrap_err() {
                Error::NpuTarget { field, message, .. } => (field, message),
                e => panic!("{e}"),
            }
        };
        let (f, m) = field(&|v| v["tiles"]["core"]["lock_base"] = "0x1F100".into());
        assert_eq!(f, "tiles.core.lock_base");
        assert!(m.contains("0x1F100") && m.contains("0x1F000"), "{m}");
        let (f, _) = field(&|v| v["tiles"]["mem_tile"]["bds"] = 47.into());
        assert_eq!(f, "tiles.mem_tile.bds");
        let (f, m) = field(&|v| v["tiles"]["shim"]["bd_base"] = "1D000".into());
        assert_eq!(f, "tiles.shim.bd_base", "{m}");
        let (f, _) = field(&|v| v["tiles"]["shim"]["mm2s_ctrl"] = "0x100000".into());
        assert_eq!(f, "tiles.shim.mm2s_ctrl");
        let (f, _) = field(&|v| {
            v.as_object_mut().unwrap().remove("tiles");
        });
        assert_eq!(f, "tiles");
    }
}
