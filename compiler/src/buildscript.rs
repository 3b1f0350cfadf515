//! Compiling models from Cargo build scripts: `BuildScript` compiles an ONNX file into `OUT_DIR` (object,
//! weights, header, recipe), archives the object as `lib<NAME>.a` with the system `ar`, prints the
//! `cargo:rustc-link-*` and `cargo:rerun-if-changed` directives, and writes `<NAME>.rs`, a typed Rust module
//! (include it with `include!(concat!(env!("OUT_DIR"), "/NAME.rs"))`) that names the inputs and outputs with
//! their shapes and builds a `bundle_rt::Bundle` with the weights embedded.

use crate::error::{Error, Result};
use crate::import::InputSpec;
use crate::ir::DType;
use crate::pipeline::{compile_file, Options};
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::Command;

/// A model to compile from `build.rs`.
#[derive(Debug, Clone)]
pub struct BuildScript {
    model: PathBuf,
    opts: Options,
}

/// What `BuildScript::compile` produced.
#[derive(Debug, Clone)]
pub struct Generated {
    /// The directory holding the bundle files (`OUT_DIR`).
    pub dir: PathBuf,
    /// The generated Rust module.
    pub module: PathBuf,
}

fn io(p: &Path, e: std::io::Error) -> Error {
    Error::Io {
        path: p.display().to_string(),
        error: e,
    }
}

/// Rust keywords (strict and reserved, 2021 edition) and the generated module's own items: a tensor-derived
/// function name equal to one of them gets a `_` suffix.
const RESERVED: &[&str] = &[
    "as", "break", "const", "continue", "crate", "else", "enum", "extern", "false", "fn", "for",
    "if", "impl", "in", "let", "loop", "match", "mod", "move", "mut", "pub", "ref", "return",
    "self", "static", "struct", "super", "trait", "true", "type", "unsafe", "use", "where",
    "while", "async", "await", "dyn", "abstract", "become", "box", "do", "final", "macro",
    "override", "priv", "typeof", "unsized", "virtual", "yield", "try", "gen", "_", "bundle",
    "entry", "config", "weights", "inputs", "outputs",
];

/// Legal, unique Rust function names for tensor names: ASCII alphanumerics kept (lower-cased), anything else
/// `_`, a name that is empty or starts with a digit prefixed with `_`, keywords and the module's own items
/// suffixed with `_`, and repeats numbered (`_2`, `_3`, ...).
#[derive(Default)]
struct Idents {
    used: std::collections::HashSet<String>,
}

impl Idents {
    fn get(&mut self, prefix: &str, tensor: &str) -> String {
        let mut id: String = tensor
            .chars()
            .map(|c| {
                if c.is_ascii_alphanumeric() {
                    c.to_ascii_lowercase()
                } else {
                    '_'
                }
            })
            .collect();
        if id.is_empty() || id.starts_with(|c: char| c.is_ascii_digit()) {
            id.insert(0, '_');
        }
        let mut id = format!("{prefix}{id}");
        if RESERVED.contains(&id.as_str()) {
            id.push('_');
        }
        let base = id.clone();
        let mut n = 2;
        while !self.used.insert(id.clone()) {
            id = format!("{base}_{n}");
            n += 1;
        }
        id
    }
}

/// A tensor name for a `///` comment: control characters (a newline would end the comment) escaped.
fn doc_name(s: &str) -> String {
    s.chars().flat_map(char::escape_default).take(200).collect()
}

impl BuildScript {
    /// Compiles `model` as bundle `name` (a C identifier) for the crate being built.
    pub fn new(model: impl Into<PathBuf>, name: &str) -> BuildScript {
        BuildScript {
            model: model.into(),
            opts: Options::new(name),
        }
    }
    /// Fixes an input's shape and type, as `--input` does.
    pub fn input(mut self, spec: &str) -> Result<BuildScript> {
        self.opts.inputs.push(spec.parse::<InputSpec>()?);
        Ok(self)
    }
    /// Sets the `--cpu` features.
    pub fn cpu(mut self, cpu: &str) -> BuildScript {
        self.opts.cpu = cpu.into();
        self
    }
    /// Compiles into `OUT_DIR` and prints the cargo directives. Uses `TARGET` as the target triple.
    pub fn compile(mut self) -> Result<Generated> {
        let env = |k: &str| {
            std::env::var(k).map_err(|_| Error::InvalidArgument {
                what: k.into(),
                message: "not set: call this from a build script".into(),
            })
        };
        let dir = PathBuf::from(env("OUT_DIR")?);
        let target = env("TARGET")?;
        if target != env("HOST")? {
            self.opts.target = Some(target);
            if self.opts.cpu == Options::new("x").cpu && !target_is_x86(&self.opts.target) {
                self.opts.cpu = "generic".into();
            }
        }
        println!("cargo:rerun-if-changed={}", self.model.display());
        let b = compile_file(&self.model, &self.opts)?;
        b.write(&dir)?;
        let name = &self.opts.name;
        let lib = dir.join(format!("lib{name}.a"));
        let _ = std::fs::remove_file(&lib);
        let ar = std::env::var("AR").unwrap_or_else(|_| "ar".into());
        let st = Command::new(&ar)
            .arg("crs")
            .arg(&lib)
            .arg(dir.join(format!("{name}.o")))
            .status()
            .map_err(|e| io(Path::new(&ar), e))?;
        if !st.success() {
            return Err(Error::InvalidArgument {
                what: "ar".into(),
                message: format!("{ar} failed to archive {name}.o"),
            });
        }
        println!("cargo:rustc-link-search=native={}", dir.display());
        println!("cargo:rustc-link-lib=static={name}");
        let module = dir.join(format!("{name}.rs"));
        std::fs::write(&module, rust_module(name, &b)).map_err(|e| io(&module, e))?;
        Ok(Generated { dir, module })
    }
}

fn target_is_x86(t: &Option<String>) -> bool {
    t.as_deref().is_some_and(|t| t.starts_with("x86_64"))
}

/// The typed module for a bundle.
fn rust_module(name: &str, b: &crate::Bundle) -> String {
    let mut s = String::new();
    let _ = writeln!(
        s,
        "// Generated by bundlec for bundle `{name}`. Do not edit."
    );
    // bundle-rt's Error is a fixed-size no_std value (128 bytes), larger than clippy's result_large_err limit.
    let _ = writeln!(
        s,
        "#[allow(dead_code, non_upper_case_globals, clippy::result_large_err)]\npub mod {name} {{"
    );
    let _ = writeln!(s, "    extern \"C\" {{\n        #[link_name = \"{name}_config\"]\n        static CONFIG: bundle_rt::BundleConfig;\n        #[link_name = \"{name}\"]\n        fn entry(c: *mut u8, m: *mut u8, a: *mut u8) -> i32;\n    }}");
    let _ = writeln!(
        s,
        "    /// The constant area image (`{name}.weights`), embedded."
    );
    let _ = writeln!(s, "    pub static WEIGHTS: &[u8] = include_bytes!(concat!(env!(\"OUT_DIR\"), \"/{name}.weights\"));");
    for (role, list) in [("INPUTS", &b.inputs), ("OUTPUTS", &b.outputs)] {
        let _ = writeln!(
            s,
            "    /// (name, shape) of each model {}.",
            role.to_lowercase().trim_end_matches('s')
        );
        let items: Vec<String> = list
            .iter()
            .map(|(n, sh, _)| format!("({n:?}, &{sh:?})"))
            .collect();
        let _ = writeln!(
            s,
            "    pub const {role}: &[(&str, &[usize])] = &[{}];",
            items.join(", ")
        );
    }
    let mut ids = Idents::default();
    for (n, sh, _) in b.inputs.iter().filter(|t| t.2 == DType::F32) {
        let len: usize = sh.iter().product();
        let _ = writeln!(
            s,
            "    /// Sets input `{}` (shape {sh:?}, {len} f32).",
            doc_name(n)
        );
        let _ = writeln!(s, "    pub fn {}(i: &mut bundle_rt::Instance<'_>, v: &[f32; {len}]) -> bundle_rt::Result<()> {{ i.set_input({n:?}, v) }}", ids.get("set_", n));
    }
    for (n, sh, _) in b.outputs.iter().filter(|t| t.2 == DType::F32) {
        let _ = writeln!(s, "    /// Output `{}` (shape {sh:?}).", doc_name(n));
        let _ = writeln!(s, "    pub fn {}<'i>(i: &'i bundle_rt::Instance<'_>) -> bundle_rt::Result<&'i [f32]> {{ i.output({n:?}) }}", ids.get("", n));
    }
    let _ = writeln!(s, "    /// The bundle, with its weights checked.");
    let _ = writeln!(s, "    pub fn bundle() -> bundle_rt::Result<bundle_rt::Bundle<'static>> {{\n        // SAFETY: CONFIG and entry are the symbols of the bundle this module was generated for.\n        unsafe {{ bundle_rt::Bundle::new(&*core::ptr::addr_of!(CONFIG), entry, WEIGHTS) }}\n    }}\n}}");
    s
}

#[cfg(test)]
mod tests {
    use super::{doc_name, Idents};

    #[test]
    fn idents_are_legal_and_unique() {
        let mut ids = Idents::default();
        let got: Vec<String> = [
            "type", "a.b", "a_b", "A-B", "7up", "", "_", "bundle", "x", "x", "é",
        ]
        .iter()
        .map(|n| ids.get("", n))
        .collect();
        assert_eq!(
            got,
            [
                "type_", "a_b", "a_b_2", "a_b_3", "_7up", "__", "___2", "bundle_", "x", "x_2",
                "___3"
            ]
        );
        assert_eq!(ids.get("set_", "self"), "set_self");
        assert_eq!(doc_name("a\n}fn x(){"), "a\\n}fn x(){");
        assert_eq!(doc_name("a\nb"), "a\\nb");
    }
}
