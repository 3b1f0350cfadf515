//! `NAME.h`, rendered from `templates/bundle.h.tmpl`: model summary, one comment line per tensor, the area
//! size macros, an offset and size macro per input and output (names legalised for C), the config structs,
//! and the `extern` config and entry prototype.

use super::config::Symbol;
use super::ident::{comment_text, Case, Idents};
use crate::ir::shape_str;

const TEMPLATE: &str = include_str!("../../../templates/bundle.h.tmpl");

/// Values substituted into the template.
pub struct HeaderInfo<'a> {
    /// Bundle name (a C identifier).
    pub name: &'a str,
    /// Source model path.
    pub model: &'a str,
    /// Symbols (inputs, outputs, constants).
    pub symbols: &'a [Symbol],
    /// Area sizes: constants, mutables, activations.
    pub sizes: [usize; 3],
    /// Max live activation bytes.
    pub max_live: usize,
    /// Planner efficiency.
    pub efficiency: f64,
    /// Weights checksum.
    pub checksum: u64,
    /// Kernel and layer counts.
    pub ops_layers: [usize; 2],
    /// Target triple and cpu.
    pub target: [&'a str; 2],
    /// NPU segments.
    pub segments: &'a [super::segments::SegmentLayout],
    /// NPU target name.
    pub npu: Option<&'a str>,
    /// CPU features the kernels need (`NAME_cpu_supported` checks them).
    pub features: &'a [&'static str],
    /// Nodes computed in int8.
    pub int8: &'a [String],
    /// Integer inputs / outputs (`--quantized-io`): name, scale, zero point.
    pub quantized_io: &'a [(String, f32, i32)],
    /// `--embed-weights`: the object exports `NAME_weights`.
    pub embedded_weights: bool,
    /// `--inputs-in-activations`: input/output offsets are into the activation area.
    pub io_in_activations: bool,
}

/// The macros the template defines after `PREFIX_`: no tensor-derived macro may equal one of them.
const OWN_MACROS: &[&str] = &[
    "CONSTANT_MEM_SIZE",
    "MUTABLE_MEM_SIZE",
    "ACTIVATIONS_MEM_SIZE",
    "MEM_ALIGN",
    "WEIGHTS_CHECKSUM",
    "NUM_NPU_SEGMENTS",
    "IO_IN_ACTIVATIONS",
    "WEIGHTS_EMBEDDED",
];

/// The suffixes each input or output macro is used with.
const IO_SUFFIXES: &[&str] = &["_OFFSET", "_SIZE", "_SCALE", "_ZERO_POINT"];

/// Upper-case C macro form of the bundle name (already a checked identifier).
pub fn macro_name(s: &str) -> String {
    Idents::new(Case::Upper).legal("", s)
}

/// Renders the header.
pub fn render(h: &HeaderInfo) -> String {
    let prefix = macro_name(h.name);
    let mut comments = String::new();
    let mut io = String::new();
    let mut ids = Idents::new(Case::Upper);
    for m in OWN_MACROS {
        ids.reserve(format!("{prefix}_{m}"));
    }
    ids.reserve(format!("BUNDLEC_{prefix}_H"));
    for s in h.symbols {
        let role = ["constant", "input", "output"][s.role as usize];
        let area = match (s.role, h.io_in_activations) {
            (0, _) => "constant",
            (_, false) => "mutable",
            (_, true) => "activations",
        };
        comments.push_str(&format!(
            " *   {role:<8} {:<40} {} {:<16} {:>10} bytes  {area}+{}\n",
            comment_text(&s.name),
            s.dtype,
            shape_str(&s.shape),
            s.elems * s.dtype.size(),
            s.offset
        ));
        if s.role != 0 {
            let m = ids.unique(&format!("{prefix}_"), &s.name, IO_SUFFIXES);
            io.push_str(&format!(
                "/* {role} '{}': {} {} */\n",
                comment_text(&s.name),
                s.dtype,
                shape_str(&s.shape)
            ));
            io.push_str(&format!(
                "#define {m}_OFFSET {}\n#define {m}_SIZE {}\n",
                s.offset, s.elems
            ));
            if let Some((_, scale, zp)) = h.quantized_io.iter().find(|q| q.0 == s.name) {
                io.push_str(&format!(
                    "/* real value = {m}_SCALE * (q - {m}_ZERO_POINT) */\n#define {m}_SCALE {scale:e}f\n#define {m}_ZERO_POINT {zp}\n"
                ));
            }
        }
    }
    let npu_summary = match (h.npu, h.segments.len()) {
        (None, _) => "none (CPU only)".to_string(),
        (Some(t), n) => format!("{n} on {t}; the entry function runs their CPU fallback kernels"),
    };
    let mut npu_lines = String::new();
    for sg in h.segments {
        npu_lines.push_str(&format!(
            " *     {:<6} {} ops, layers {}..{}, txn {} B, in {} B, out {} B, const {} B, est. cycles {} (instr {} data {} compute {})\n",
            sg.id,
            sg.nodes,
            sg.layers.0,
            sg.layers.0 + sg.layers.1,
            sg.txn.len(),
            sg.staging[0].size,
            sg.staging[1].size,
            sg.consts.1,
            sg.total_cycles,
            sg.cycles[0],
            sg.cycles[1],
            sg.cycles[2]
        ));
    }
    let int8 = if h.int8.is_empty() {
        "none (all f32)\n".to_string()
    } else {
        let mut t = format!("{} ops\n", h.int8.len());
        for n in h.int8 {
            t.push_str(&format!(" *     {}\n", comment_text(n)));
        }
        t
    };
    let n = h.name;
    let (weights_where, weights_decl, const_area) = if h.embedded_weights {
        (
            format!("embedded in {n}.o as {n}_weights"),
            format!(
                "\n/* --embed-weights: the constant area image is inside the object. Pass NULL (or {n}_weights) as {n}'s\n * constantWeight; bundle-rt takes {n}_weights as the weights. */\n#define {prefix}_WEIGHTS_EMBEDDED 1\nextern const uint8_t {n}_weights[{prefix}_CONSTANT_MEM_SIZE];\n"
            ),
            format!("the contents of {n}_weights, or pass NULL for the embedded copy"),
        )
    } else {
        (
            format!("file {n}.weights"),
            format!("#define {prefix}_WEIGHTS_EMBEDDED 0\n"),
            format!("the contents of {n}.weights"),
        )
    };
    let io_area = if h.io_in_activations {
        format!("#define {prefix}_IO_IN_ACTIVATIONS 1\n/* --inputs-in-activations: inputs and outputs live in the ACTIVATION area; the offsets below are into it,\n * and the mutable area is empty. A run overwrites the inputs once they are consumed: write them before every call. */")
    } else {
        format!("#define {prefix}_IO_IN_ACTIVATIONS 0\n/* Inputs and outputs: byte offsets into the mutable area, element counts. */")
    };
    let vars = [
        ("IO_AREA", io_area),
        ("WEIGHTS_WHERE", weights_where),
        ("WEIGHTS_DECL", weights_decl),
        ("CONST_AREA", const_area),
        ("INT8_OPS", int8),
        ("NPU_SUMMARY", npu_summary),
        ("NPU_SEGMENTS", npu_lines),
        ("NUM_SEGMENTS", h.segments.len().to_string()),
        (
            "FEATURES",
            if h.features.is_empty() {
                "baseline".to_string()
            } else {
                h.features.join(" ")
            },
        ),
        ("GUARD", format!("BUNDLEC_{prefix}_H")),
        ("NAME", h.name.to_string()),
        ("PREFIX", prefix.clone()),
        ("VERSION", env!("CARGO_PKG_VERSION").to_string()),
        ("MODEL", comment_text(h.model)),
        ("CONST_SIZE", h.sizes[0].to_string()),
        ("MUTABLE_SIZE", h.sizes[1].to_string()),
        ("ACT_SIZE", h.sizes[2].to_string()),
        ("MAX_LIVE", h.max_live.to_string()),
        ("EFFICIENCY", format!("{:.3}", h.efficiency)),
        ("CHECKSUM", format!("0x{:016x}", h.checksum)),
        ("NUM_OPS", h.ops_layers[0].to_string()),
        ("NUM_LAYERS", h.ops_layers[1].to_string()),
        ("TARGET", comment_text(h.target[0])),
        ("CPU", comment_text(h.target[1])),
        ("ALIGN", crate::plan::ALIGN.to_string()),
        ("TENSOR_COMMENTS", comments),
        ("IO_MACROS", io),
    ];
    substitute(TEMPLATE, &vars)
}

/// Replaces each `{{KEY}}` of `template` with its value in one pass: a value is never scanned again, so text
/// from a model that looks like a placeholder stays text.
fn substitute(template: &str, vars: &[(&str, String)]) -> String {
    let mut out = String::with_capacity(template.len() * 2);
    let mut rest = template;
    while let Some(at) = rest.find("{{") {
        out.push_str(&rest[..at]);
        let after = &rest[at + 2..];
        match after.find("}}").and_then(|end| {
            vars.iter()
                .find(|(k, _)| *k == &after[..end])
                .map(|kv| (end, kv))
        }) {
            Some((end, (_, v))) => {
                out.push_str(v);
                rest = &after[end + 2..];
            }
            None => {
                out.push_str("{{");
                rest = after;
            }
        }
    }
    out.push_str(rest);
    out
}
