//! `bundlec inspect NAME.o`: reads a bundle object back (ELF, Mach-O or COFF, through the `object` crate) and
//! decodes its `NAME_config` table (docs/bundle-format.md) the way `config.rs` wrote it: areas, symbols with
//! dtype and shape, the op table with its arguments, BSP layers, NPU segments, target and CPU features. Pointers
//! in an unlinked object are relocations, so every pointer field is resolved through the relocation at its
//! offset to a (section, offset) place, and every read is bounds-checked: a truncated, foreign or hostile object
//! gives an [`Error::BadObject`] naming the field, never a panic or an out-of-bounds read.

use crate::error::{Error, Result};
use object::{Object, ObjectSection, ObjectSymbol, RelocationTarget, SectionIndex};
use serde::Serialize;
use std::collections::HashMap;

/// Table sizes above this are refused before anything is read (a hostile count).
const MAX_ENTRIES: u64 = 1 << 24;

/// A place in the object: a section and a byte offset in it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Place {
    section: SectionIndex,
    offset: u64,
}

/// What a pointer field points to.
#[derive(Debug, Clone)]
enum Target {
    Data(Place),
    Function(String),
}

/// The object with its sections' bytes and relocations indexed by place.
struct Reader<'d> {
    file: String,
    data: HashMap<SectionIndex, &'d [u8]>,
    relocs: HashMap<(SectionIndex, u64), Target>,
}

impl<'d> Reader<'d> {
    fn new(file: &str, obj: &object::File<'d>) -> Result<Self> {
        let mut r = Reader {
            file: file.to_string(),
            data: HashMap::new(),
            relocs: HashMap::new(),
        };
        for sec in obj.sections() {
            let bytes = sec
                .data()
                .map_err(|e| r.bad(sec.name().unwrap_or("?"), e))?;
            r.data.insert(sec.index(), bytes);
        }
        for sec in obj.sections() {
            for (off, rel) in sec.relocations() {
                let implicit = if rel.has_implicit_addend() {
                    r.u64(Place {
                        section: sec.index(),
                        offset: off,
                    })
                    .unwrap_or(0) as i64
                } else {
                    0
                };
                let addend = rel.addend().wrapping_add(implicit);
                let target = match rel.target() {
                    RelocationTarget::Symbol(si) => {
                        let Ok(sym) = obj.symbol_by_index(si) else {
                            continue;
                        };
                        match sym.section_index() {
                            Some(_) if sym.kind() == object::SymbolKind::Text => {
                                Target::Function(sym.name().unwrap_or("?").to_string())
                            }
                            Some(s) => {
                                let base =
                                    obj.section_by_index(s).map(|x| x.address()).unwrap_or(0);
                                let at =
                                    sym.address().wrapping_sub(base).wrapping_add(addend as u64);
                                Target::Data(Place {
                                    section: s,
                                    offset: at,
                                })
                            }
                            None => Target::Function(sym.name().unwrap_or("?").to_string()),
                        }
                    }
                    RelocationTarget::Section(s) => {
                        let Ok(sec) = obj.section_by_index(s) else {
                            continue;
                        };
                        let at = (addend as u64).wrapping_sub(sec.address());
                        if sec.kind() == object::SectionKind::Text {
                            Target::Function(format!("{}+{at:#x}", sec.name().unwrap_or("?")))
                        } else {
                            Target::Data(Place {
                                section: s,
                                offset: at,
                            })
                        }
                    }
                    _ => continue,
                };
                r.relocs.insert((sec.index(), off), target);
            }
        }
        Ok(r)
    }

    fn bad(&self, field: &str, message: impl std::fmt::Display) -> Error {
        Error::BadObject {
            file: self.file.clone(),
            field: field.to_string(),
            message: message.to_string(),
        }
    }

    fn bytes(&self, p: Place, len: u64) -> Option<&'d [u8]> {
        let d = self.data.get(&p.section)?;
        let end = p.offset.checked_add(len)?;
        d.get(usize::try_from(p.offset).ok()?..usize::try_from(end).ok()?)
    }

    fn u64(&self, p: Place) -> Option<u64> {
        Some(u64::from_le_bytes(self.bytes(p, 8)?.try_into().ok()?))
    }

    fn u32(&self, p: Place) -> Option<u32> {
        Some(u32::from_le_bytes(self.bytes(p, 4)?.try_into().ok()?))
    }

    fn at(p: Place, off: u64) -> Place {
        Place {
            section: p.section,
            offset: p.offset.wrapping_add(off),
        }
    }

    fn field_u64(&self, p: Place, off: u64, field: &str) -> Result<u64> {
        self.u64(Self::at(p, off))
            .ok_or_else(|| self.bad(field, "outside its section (truncated object?)"))
    }

    fn field_u32(&self, p: Place, off: u64, field: &str) -> Result<u32> {
        self.u32(Self::at(p, off))
            .ok_or_else(|| self.bad(field, "outside its section (truncated object?)"))
    }

    /// The pointer field at `p + off`: `None` for NULL (no relocation and zero bytes).
    fn ptr(&self, p: Place, off: u64, field: &str) -> Result<Option<Target>> {
        let q = Self::at(p, off);
        if let Some(t) = self.relocs.get(&(q.section, q.offset)) {
            return Ok(Some(t.clone()));
        }
        match self.field_u64(p, off, field)? {
            0 => Ok(None),
            v => Err(self.bad(field, format!("holds {v:#x} without a relocation"))),
        }
    }

    fn data_ptr(&self, p: Place, off: u64, field: &str) -> Result<Option<Place>> {
        match self.ptr(p, off, field)? {
            None => Ok(None),
            Some(Target::Data(q)) => Ok(Some(q)),
            Some(Target::Function(f)) => Err(self.bad(field, format!("points to code ({f})"))),
        }
    }

    /// A table of `n` entries of `size` bytes at the pointer field `p + off`.
    fn table(&self, p: Place, off: u64, n: u64, size: u64, field: &str) -> Result<Option<Place>> {
        if n > MAX_ENTRIES {
            return Err(self.bad(
                field,
                format!("{n} entries exceed the limit of {MAX_ENTRIES}"),
            ));
        }
        let Some(q) = self.data_ptr(p, off, field)? else {
            return if n == 0 {
                Ok(None)
            } else {
                Err(self.bad(field, format!("NULL with {n} entries")))
            };
        };
        if self.bytes(q, n * size).is_none() {
            return Err(self.bad(
                field,
                format!("{n} entries of {size} bytes run past the section"),
            ));
        }
        Ok(Some(q))
    }

    fn string(&self, p: Place, off: u64, field: &str) -> Result<String> {
        let q = self
            .data_ptr(p, off, field)?
            .ok_or_else(|| self.bad(field, "NULL name"))?;
        let d = self.data.get(&q.section).copied().unwrap_or(&[]);
        let rest = usize::try_from(q.offset)
            .ok()
            .and_then(|o| d.get(o..))
            .ok_or_else(|| self.bad(field, "points outside its section"))?;
        let len = rest
            .iter()
            .take(4096)
            .position(|&b| b == 0)
            .ok_or_else(|| self.bad(field, "no NUL within 4096 bytes"))?;
        String::from_utf8(rest[..len].to_vec()).map_err(|_| self.bad(field, "not UTF-8"))
    }
}

/// One symbol of the table, with its tensor descriptor.
#[derive(Debug, Clone, Serialize)]
pub struct SymbolInfo {
    /// Tensor name.
    pub name: String,
    /// `input`, `output` or `constant`.
    pub role: &'static str,
    /// ONNX dtype name.
    pub dtype: String,
    /// Shape.
    pub shape: Vec<u64>,
    /// Area offset.
    pub offset: u64,
    /// Bytes.
    pub bytes: u64,
}

/// One tensor argument of an op.
#[derive(Debug, Clone, Serialize)]
pub struct ArgInfo {
    /// `constant`, `mutable` or `activations`.
    pub area: &'static str,
    /// Offset in it.
    pub offset: u64,
    /// Bytes.
    pub size: u64,
}

/// One op of the schedule.
#[derive(Debug, Clone, Serialize)]
pub struct OpInfo {
    /// Op name.
    pub name: String,
    /// The kernel function's symbol.
    pub function: String,
    /// BSP layer.
    pub layer: u32,
    /// Tasks.
    pub tasks: u32,
    /// `pairing`: 0, or an interleaved pair's `G << 8 | 1` (its op) / `G << 8 | 2` (one of its kernels alone).
    pub pairing: u32,
    /// Arguments.
    pub args: Vec<ArgInfo>,
}

/// One NPU segment.
#[derive(Debug, Clone, Serialize)]
pub struct SegmentInfo {
    /// `npu0`, ...
    pub name: String,
    /// Transaction bytes.
    pub txn_bytes: u64,
    /// First layer replaced.
    pub first_layer: u32,
    /// Layers replaced.
    pub num_layers: u32,
    /// `[offset, size]` of the `in`, `out`, `scratch` staging buffers (activation area).
    pub staging: [[u64; 2]; 3],
    /// `[offset, size]` of the NPU constants and the parameter blocks (constant area).
    pub constants: [[u64; 2]; 2],
    /// Copy-ins and copy-outs.
    pub copies: [u32; 2],
    /// Estimated cycles: instruction, data, compute.
    pub est_cycles: [u64; 3],
}

/// Everything `inspect` reads from a bundle object.
#[derive(Debug, Clone, Serialize)]
pub struct Inspection {
    /// Object file format and architecture, e.g. `Elf x86_64`.
    pub object: String,
    /// The config symbol.
    pub config_symbol: String,
    /// Model (bundle) name.
    pub name: String,
    /// Format version.
    pub version: u32,
    /// `flags` (1: inputs and outputs in the activation area).
    pub flags: u32,
    /// Constant, mutable and activation area bytes.
    pub areas: [u64; 3],
    /// Alignment.
    pub alignment: u64,
    /// FNV-1a 64 of the weights image.
    pub weights_checksum: String,
    /// CPU features the kernels need.
    pub cpu_features: Vec<String>,
    /// A fat bundle's `fastOps` kernel set: the CPU features its kernels need (`None`: no `fastOps` table).
    pub fast_cpu_features: Option<Vec<String>>,
    /// Exported functions (entry, `NAME_cpu_supported`).
    pub exports: Vec<String>,
    /// Symbols.
    pub symbols: Vec<SymbolInfo>,
    /// Ops in schedule order.
    pub ops: Vec<OpInfo>,
    /// `[firstOp, numOps]` per layer.
    pub layers: Vec<[u32; 2]>,
    /// NPU segments.
    pub segments: Vec<SegmentInfo>,
    /// `--embed-weights`: the exported `NAME_weights` checked against the config (`Ok` or the mismatch); `None`
    /// when the weights are a separate file.
    pub embedded_weights: Option<std::result::Result<(), String>>,
}

fn area_name(a: u32) -> &'static str {
    match a {
        0 => "constant",
        1 => "mutable",
        2 => "activations",
        _ => "invalid",
    }
}

fn dtype_name(code: u32) -> String {
    match code {
        1 => "f32".into(),
        2 => "u8".into(),
        3 => "i8".into(),
        6 => "i32".into(),
        7 => "i64".into(),
        9 => "bool".into(),
        c => format!("onnx-dtype-{c}"),
    }
}

/// Reads the bundle object `bytes` (named `file` in errors).
pub fn inspect(file: &str, bytes: &[u8]) -> Result<Inspection> {
    let bad = |field: &str, m: String| Error::BadObject {
        file: file.to_string(),
        field: field.to_string(),
        message: m,
    };
    let obj = object::File::parse(bytes)
        .map_err(|e| bad("header", format!("not an object file: {e}")))?;
    let r = Reader::new(file, &obj)?;
    let candidates: Vec<_> = obj
        .symbols()
        .filter(|s| s.is_global() && s.name().is_ok_and(|n| n.ends_with("_config")))
        .filter_map(|s| {
            let sec = s.section_index()?;
            let base = obj.section_by_index(sec).ok()?.address();
            let p = Place {
                section: sec,
                offset: s.address().wrapping_sub(base),
            };
            (r.u64(Reader::at(p, 48)) == Some(super::config::MAGIC))
                .then(|| (s.name().unwrap_or_default().to_string(), p))
        })
        .collect();
    let (config_symbol, c) = match candidates.as_slice() {
        [one] => one.clone(),
        [] => {
            return Err(bad(
                "NAME_config",
                "no exported *_config symbol with the bundlec magic (not a bundle object?)".into(),
            ))
        }
        many => {
            let names: Vec<_> = many.iter().map(|(n, _)| n.as_str()).collect();
            return Err(bad(
                "NAME_config",
                format!("several bundle configs: {}", names.join(", ")),
            ));
        }
    };
    let f = |off: u64, name: &str| r.field_u64(c, off, name);
    let version = r.field_u32(c, 56, "version")?;
    if version != super::config::VERSION {
        return Err(r.bad(
            "version",
            format!(
                "{version}; this bundlec reads version {}",
                super::config::VERSION
            ),
        ));
    }
    let num_symbols = f(32, "numSymbols")?;
    let num_ops = f(96, "numOps")?;
    let num_layers = f(112, "numLayers")?;
    let num_segments = f(128, "numNpuSegments")?;
    let features = f(152, "cpuFeatures")?;
    let fast_features = match r.data_ptr(c, 160, "fastOps")? {
        Some(_) => {
            r.table(c, 160, num_ops, 40, "fastOps")?;
            Some(f(168, "fastCpuFeatures")?)
        }
        None => None,
    };
    let symtab = r.table(c, 40, num_symbols, 32, "symbolTable")?;
    let tensors = r.table(c, 72, num_symbols, 88, "tensors")?;
    let ops = r.table(c, 104, num_ops, 40, "ops")?;
    let layers = r.table(c, 120, num_layers, 8, "layers")?;
    let segtab = r.table(c, 136, num_segments, 152, "npuSegments")?;

    let mut symbols = Vec::new();
    if let (Some(st), Some(td)) = (symtab, tensors) {
        for i in 0..num_symbols {
            let e = Reader::at(st, i * 32);
            let t = Reader::at(td, i * 88);
            let fname = |n: &str| format!("symbolTable[{i}].{n}");
            let rank = r.field_u32(t, 4, &format!("tensors[{i}].rank"))?.min(8);
            let mut shape = Vec::new();
            for d in 0..u64::from(rank) {
                shape.push(r.field_u64(t, 16 + 8 * d, &format!("tensors[{i}].dims"))?);
            }
            let role = match r.field_u32(t, 8, &format!("tensors[{i}].role"))? {
                0 => "constant",
                1 => "input",
                2 => "output",
                _ => "invalid",
            };
            symbols.push(SymbolInfo {
                name: r.string(e, 0, &fname("name"))?,
                role,
                dtype: dtype_name(r.field_u32(t, 0, &format!("tensors[{i}].dtype"))?),
                shape,
                offset: r.field_u64(e, 8, &fname("offset"))?,
                bytes: r.field_u64(t, 80, &format!("tensors[{i}].sizeBytes"))?,
            });
        }
    }
    let mut op_infos = Vec::new();
    if let Some(ot) = ops {
        for i in 0..num_ops {
            let o = Reader::at(ot, i * 40);
            let fname = |n: &str| format!("ops[{i}].{n}");
            let function = match r.ptr(o, 0, &fname("fn"))? {
                Some(Target::Function(s)) => s,
                _ => return Err(r.bad(&fname("fn"), "not a function")),
            };
            let nargs = u64::from(r.field_u32(o, 20, &fname("numArgs"))?);
            let mut args = Vec::new();
            if let Some(at) = r.table(o, 24, nargs, 24, &fname("args"))? {
                for a in 0..nargs {
                    let p = Reader::at(at, a * 24);
                    let an = format!("ops[{i}].args[{a}]");
                    args.push(ArgInfo {
                        area: area_name(r.field_u32(p, 0, &an)?),
                        offset: r.field_u64(p, 8, &an)?,
                        size: r.field_u64(p, 16, &an)?,
                    });
                }
            }
            op_infos.push(OpInfo {
                name: r.string(o, 8, &fname("name"))?,
                function,
                tasks: r.field_u32(o, 16, &fname("numTasks"))?,
                layer: r.field_u32(o, 32, &fname("layer"))?,
                pairing: r.field_u32(o, 36, &fname("pairing"))?,
                args,
            });
        }
    }
    let mut layer_v = Vec::new();
    if let Some(lt) = layers {
        for i in 0..num_layers {
            let p = Reader::at(lt, i * 8);
            let n = format!("layers[{i}]");
            layer_v.push([r.field_u32(p, 0, &n)?, r.field_u32(p, 4, &n)?]);
        }
    }
    let mut segments = Vec::new();
    if let Some(sg) = segtab {
        for i in 0..num_segments {
            let p = Reader::at(sg, i * 152);
            let n = format!("npuSegments[{i}]");
            let g = |off: u64| r.field_u64(p, off, &n);
            segments.push(SegmentInfo {
                name: r.string(p, 0, &format!("{n}.name"))?,
                txn_bytes: g(16)?,
                first_layer: r.field_u32(p, 24, &n)?,
                num_layers: r.field_u32(p, 28, &n)?,
                staging: [[g(32)?, g(40)?], [g(48)?, g(56)?], [g(64)?, g(72)?]],
                constants: [[g(80)?, g(88)?], [g(96)?, g(104)?]],
                copies: [r.field_u32(p, 112, &n)?, r.field_u32(p, 116, &n)?],
                est_cycles: [g(128)?, g(136)?, g(144)?],
            });
        }
    }
    let exports = obj
        .symbols()
        .filter(|s| s.is_global() && s.is_definition())
        .filter_map(|s| s.name().ok().map(str::to_string))
        .collect();
    let name = r.string(c, 144, "modelName")?;
    let const_bytes = f(0, "constantWeightVarsMemSize")?;
    let checksum = format!("{:#018x}", f(64, "weightsChecksum")?);
    let embedded_weights = obj
        .symbols()
        .find(|s| s.is_global() && s.name() == Ok(format!("{name}_weights").as_str()))
        .map(|s| {
            let sec = s.section_index().ok_or("NAME_weights is undefined")?;
            let base = obj.section_by_index(sec).map(|x| x.address()).unwrap_or(0);
            let p = Place {
                section: sec,
                offset: s.address().wrapping_sub(base),
            };
            let w = r
                .bytes(p, const_bytes)
                .ok_or("NAME_weights is shorter than constantWeightVarsMemSize")?;
            let sum = format!("{:#018x}", super::weights::checksum64(w));
            if sum == checksum {
                Ok(())
            } else {
                Err(format!(
                    "NAME_weights checksum {sum} differs from the config's {checksum}"
                ))
            }
        });
    Ok(Inspection {
        object: format!("{:?} {:?}", obj.format(), obj.architecture()),
        config_symbol,
        name,
        version,
        flags: r.field_u32(c, 60, "flags")?,
        areas: [
            f(0, "constantWeightVarsMemSize")?,
            f(8, "mutableWeightVarsMemSize")?,
            f(16, "activationsMemSize")?,
        ],
        alignment: f(24, "alignment")?,
        weights_checksum: checksum,
        cpu_features: crate::x86::cpu_check::feature_names(features)
            .into_iter()
            .map(str::to_string)
            .collect(),
        fast_cpu_features: fast_features.map(|bits| {
            crate::x86::cpu_check::feature_names(bits)
                .into_iter()
                .map(str::to_string)
                .collect()
        }),
        exports,
        symbols,
        ops: op_infos,
        layers: layer_v,
        segments,
        embedded_weights,
    })
}
