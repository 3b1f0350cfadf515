//! Names on their way into generated source: the one place that decides what a name from a model or the command
//! line may become in `NAME.h`, the `build.rs` Rust module and the config. The bundle name (`--name`) must be a
//! C and Rust identifier that clashes with nothing the header, `<stdint.h>`, C, C++ or Rust define; tensor names
//! become macro or function names only through [`Idents`] (legalised, never equal to a reserved or earlier
//! name, suffixed forms included), and text in comments only through [`comment_text`]. Model names never become
//! code any other way.

use std::collections::HashSet;

/// Longest bundle name (it is also a file stem and a symbol prefix).
pub const MAX_BUNDLE_NAME: usize = 128;

/// Keywords of C (C89 to C23) and C++ (the header is `extern "C"` for C++ callers).
const C_KEYWORDS: &[&str] = &[
    "auto",
    "break",
    "case",
    "char",
    "const",
    "continue",
    "default",
    "do",
    "double",
    "else",
    "enum",
    "extern",
    "float",
    "for",
    "goto",
    "if",
    "inline",
    "int",
    "long",
    "register",
    "restrict",
    "return",
    "short",
    "signed",
    "sizeof",
    "static",
    "struct",
    "switch",
    "typedef",
    "union",
    "unsigned",
    "void",
    "volatile",
    "while",
    "alignas",
    "alignof",
    "bool",
    "constexpr",
    "false",
    "nullptr",
    "static_assert",
    "thread_local",
    "true",
    "typeof",
    "typeof_unqual",
    "asm",
    "fortran",
    "class",
    "namespace",
    "template",
    "this",
    "new",
    "delete",
    "operator",
    "private",
    "protected",
    "public",
    "virtual",
    "friend",
    "try",
    "catch",
    "throw",
    "using",
    "typename",
    "explicit",
    "mutable",
    "and",
    "or",
    "not",
    "xor",
    "bitand",
    "bitor",
    "compl",
    "and_eq",
    "or_eq",
    "not_eq",
    "xor_eq",
    "wchar_t",
    "char8_t",
    "char16_t",
    "char32_t",
    "co_await",
    "co_return",
    "co_yield",
    "concept",
    "requires",
    "export",
    "decltype",
    "noexcept",
    "const_cast",
    "dynamic_cast",
    "reinterpret_cast",
    "static_cast",
    "typeid",
    "consteval",
    "constinit",
    "import",
    "module",
];

/// Names `<stdint.h>`, `<stddef.h>` and common C headers define as macros or types, and C library functions
/// the exported entry symbol would clash with when linked.
const C_LIBRARY: &[&str] = &[
    "NULL", "EOF", "errno", "assert", "offsetof", "stdin", "stdout", "stderr", "INFINITY", "NAN",
    "main", "abs", "labs", "exp", "exp2", "expm1", "log", "log2", "log10", "log1p", "pow", "sqrt",
    "cbrt", "sin", "cos", "tan", "asin", "acos", "atan", "atan2", "sinh", "cosh", "tanh", "erf",
    "erfc", "floor", "ceil", "round", "trunc", "fabs", "fmod", "fmin", "fmax", "fma", "rint",
    "lround", "gamma", "lgamma", "tgamma", "j0", "j1", "y0", "y1", "div", "rand", "srand",
    "malloc", "calloc", "realloc", "free", "exit", "abort", "atexit", "memcpy", "memmove",
    "memset", "memcmp", "strlen", "strcpy", "strcmp", "printf", "fprintf", "sprintf", "puts",
    "putchar", "getchar", "read", "write", "open", "close", "time", "clock", "signal", "raise",
    "select", "poll", "index", "link", "send", "recv", "connect", "socket", "remove", "rename",
    "system", "qsort", "bsearch", "atoi", "atof", "sleep", "kill", "wait", "fork", "pipe", "dup",
    "stat",
];

/// What the bundle header itself declares, and what the generated Rust module's `pub mod NAME` would shadow.
const OWN_NAMES: &[&str] = &[
    "SymbolTableEntry",
    "BundleTensorDesc",
    "BundleArg",
    "BundleOpFn",
    "BundleOp",
    "BundleLayer",
    "NpuCopy",
    "NpuSegment",
    "BundleConfig",
    "BUNDLEC_BUNDLE_TYPES",
    "bundle_rt",
    "core",
    "std",
    "alloc",
];

/// Rust keywords (strict and reserved, 2021 and 2024 editions).
const RUST_KEYWORDS: &[&str] = &[
    "as", "break", "const", "continue", "crate", "else", "enum", "extern", "false", "fn", "for",
    "if", "impl", "in", "let", "loop", "match", "mod", "move", "mut", "pub", "ref", "return",
    "self", "Self", "static", "struct", "super", "trait", "true", "type", "unsafe", "use", "where",
    "while", "async", "await", "dyn", "abstract", "become", "box", "do", "final", "macro",
    "override", "priv", "typeof", "unsized", "virtual", "yield", "try", "gen", "_",
];

/// Whether `s` is an identifier of ASCII letters, digits and `_` that does not start with a digit.
pub fn is_identifier(s: &str) -> bool {
    !s.is_empty()
        && s.bytes().all(|c| c.is_ascii_alphanumeric() || c == b'_')
        && !s.starts_with(|c: char| c.is_ascii_digit())
}

/// Why `name` is reserved, if it is: a C, C++ or Rust keyword, a name the C library, `<stdint.h>` or the header
/// defines, a C reserved identifier (`_` then upper case or `_`), or a `*_t` type name (POSIX reserves them).
pub fn reserved(name: &str) -> Option<&'static str> {
    if C_KEYWORDS.contains(&name) {
        return Some("a C or C++ keyword");
    }
    if RUST_KEYWORDS.contains(&name) {
        return Some("a Rust keyword (the bundle name is also a Rust module's name)");
    }
    if C_LIBRARY.contains(&name) {
        return Some("a C library name the entry symbol would clash with");
    }
    if OWN_NAMES.contains(&name) {
        return Some("a name the bundle header or its Rust module already uses");
    }
    let b = name.as_bytes();
    if b.first() == Some(&b'_')
        && b.get(1)
            .is_some_and(|c| c.is_ascii_uppercase() || *c == b'_')
    {
        return Some(
            "a reserved C identifier (it starts with '_' and an upper-case letter or '_')",
        );
    }
    if name.ends_with("_t") {
        return Some(
            "a type name (POSIX reserves names ending in '_t'; <stdint.h> defines uint8_t, ...)",
        );
    }
    let upper = name.to_ascii_uppercase();
    let std_prefix = [
        "INT",
        "UINT",
        "SIZE",
        "PTRDIFF",
        "SIG_ATOMIC",
        "WCHAR",
        "WINT",
    ];
    let std_suffix = ["_MAX", "_MIN", "_C", "_WIDTH"];
    if std_prefix.iter().any(|p| upper.starts_with(p))
        && std_suffix.iter().any(|s| upper.ends_with(s))
        && name == upper
    {
        return Some("a <stdint.h> macro");
    }
    None
}

/// Checks a bundle name (`--name`): an identifier of at most [`MAX_BUNDLE_NAME`] characters that is not
/// [`reserved`]. The error is a plain message for the caller to attach the flag to.
pub fn check_bundle_name(name: &str) -> Result<(), String> {
    if !is_identifier(name) || name.len() > MAX_BUNDLE_NAME {
        return Err(format!(
            "'{}' is not a C identifier of 1 to {MAX_BUNDLE_NAME} characters [A-Za-z0-9_], not starting with \
             a digit",
            comment_text(name)
        ));
    }
    if let Some(why) = reserved(name) {
        return Err(format!(
            "'{name}' is {why}; the header or the program linking the bundle would not compile or would \
             clash with it (try '{}_net')",
            name.trim_start_matches('_')
        ));
    }
    Ok(())
}

/// A name as text inside a C `/* */` comment, a `//` comment or a Rust `///` doc comment: printable ASCII is
/// kept except `*`, `\` (a backslash-newline splices lines before comments are removed), `?` (trigraphs) and
/// `%`; every other byte, and those, become `%XX`. Nothing in the result can end the comment or the line.
/// Long names are cut at 200 bytes, marked with `...`.
pub fn comment_text(s: &str) -> String {
    let mut out = String::with_capacity(s.len().min(256));
    for (i, b) in s.bytes().enumerate() {
        if i >= 200 {
            out.push_str("...");
            break;
        }
        if (0x20..0x7f).contains(&b) && !matches!(b, b'*' | b'\\' | b'?' | b'%') {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

/// Whether `id` may not be used as an identifier of this case: a Rust keyword for Rust names, anything
/// [`reserved`] for C macros.
fn keyword(case: Case, id: &str) -> bool {
    match case {
        Case::Lower => RUST_KEYWORDS.contains(&id),
        Case::Upper => reserved(id).is_some(),
    }
}

/// Case of the identifiers an [`Idents`] makes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Case {
    /// `NET_INPUT_1` (C macros).
    Upper,
    /// `set_input_1` (Rust functions).
    Lower,
}

/// Legal, unique identifiers for names from a model. ASCII letters and digits are kept (in the chosen case),
/// anything else becomes `_`, and a name that would start with a digit or be empty gets a leading `_`. An
/// identifier is taken together with every suffixed form it will be used in (`_OFFSET`, `_SIZE`, ...): when
/// any of them equals a keyword (Rust's for lower case, anything [`reserved`] for C macros) or a name taken
/// before, the base is numbered (`_2`, `_3`, ...) until none does.
#[derive(Debug)]
pub struct Idents {
    case: Case,
    used: HashSet<String>,
}

impl Idents {
    /// An empty set making identifiers in `case`.
    pub fn new(case: Case) -> Idents {
        Idents {
            case,
            used: HashSet::new(),
        }
    }
    /// Marks a name as taken (the header's own macros, keywords).
    pub fn reserve(&mut self, name: impl Into<String>) {
        self.used.insert(name.into());
    }
    /// The legal form of `name` with `prefix` (not itself legalised), before uniqueness.
    pub fn legal(&self, prefix: &str, name: &str) -> String {
        let mut id: String = name
            .chars()
            .map(|c| match (c.is_ascii_alphanumeric(), self.case) {
                (true, Case::Upper) => c.to_ascii_uppercase(),
                (true, Case::Lower) => c.to_ascii_lowercase(),
                (false, _) => '_',
            })
            .collect();
        if id.is_empty() || (prefix.is_empty() && id.starts_with(|c: char| c.is_ascii_digit())) {
            id.insert(0, '_');
        }
        format!("{prefix}{id}")
    }
    /// A unique identifier for `name`: `prefix` + its legal form, numbered until neither it nor any of
    /// `suffixes` appended to it is reserved, a keyword or taken; all of those forms are then taken.
    pub fn unique(&mut self, prefix: &str, name: &str, suffixes: &[&str]) -> String {
        let base = self.legal(prefix, name);
        let case = self.case;
        let free = |id: &str, used: &HashSet<String>| {
            std::iter::once("")
                .chain(suffixes.iter().copied())
                .map(|s| format!("{id}{s}"))
                .all(|f| !used.contains(&f) && !keyword(case, &f))
        };
        let mut id = base.clone();
        let mut n = 2u64;
        while !free(&id, &self.used) {
            id = format!("{base}_{n}");
            n += 1;
        }
        self.used.insert(id.clone());
        for s in suffixes {
            self.used.insert(format!("{id}{s}"));
        }
        id
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bundle_names() {
        for ok in ["net", "resnet50", "Net_2", "x"] {
            assert!(check_bundle_name(ok).is_ok(), "{ok}");
        }
        for bad in [
            "",
            "1net",
            "a-b",
            "a b",
            "int",
            "_Bool",
            "typeof",
            "uint8_t",
            "INT8_MAX",
            "UINT64_C",
            "SIZE_MAX",
            "size_t",
            "__x",
            "_X",
            "fn",
            "mod",
            "self",
            "main",
            "BundleConfig",
            "bundle_rt",
            "class",
            "net\n",
            "é",
        ] {
            assert!(check_bundle_name(bad).is_err(), "{bad:?}");
        }
        assert!(check_bundle_name(&"a".repeat(MAX_BUNDLE_NAME + 1)).is_err());
    }

    #[test]
    fn comment_text_cannot_end_a_comment() {
        let nasty = "a*/ int x; /*\\\n*/\\\r\n??/ %41 \u{0}é";
        let t = comment_text(nasty);
        assert!(t.bytes().all(|b| (0x20..0x7f).contains(&b)), "{t}");
        for bad in ["*", "\\", "?", "\n", "\r"] {
            assert!(!t.contains(bad), "{t}");
        }
        assert_eq!(comment_text("conv1/Relu:0"), "conv1/Relu:0");
        assert!(comment_text(&"x".repeat(300)).ends_with("..."));
    }

    #[test]
    fn idents_avoid_reserved_and_suffixed_collisions() {
        let mut ids = Idents::new(Case::Upper);
        ids.reserve("NET_CONSTANT_MEM_SIZE");
        let sfx = ["_OFFSET", "_SIZE"];
        assert_eq!(
            ids.unique("NET_", "constant_mem", &sfx),
            "NET_CONSTANT_MEM_2"
        );
        assert_eq!(ids.unique("NET_", "a.b", &sfx), "NET_A_B");
        assert_eq!(ids.unique("NET_", "a-b", &sfx), "NET_A_B_2");
        assert_eq!(ids.unique("NET_", "a_b_2", &sfx), "NET_A_B_2_2");
        assert_eq!(ids.unique("NET_", "", &sfx), "NET__");
        // A name whose base form equals another's suffixed form.
        let mut ids = Idents::new(Case::Upper);
        assert_eq!(ids.unique("N_", "x", &sfx), "N_X");
        assert_eq!(ids.unique("N_", "x_size", &sfx), "N_X_SIZE_2");
        let mut rs = Idents::new(Case::Lower);
        let got: Vec<String> = ["type", "a.b", "a_b", "7up", "", "x", "x", "self"]
            .iter()
            .map(|n| rs.unique("", n, &[]))
            .collect();
        // `_` alone is a Rust keyword.
        assert_eq!(
            got,
            ["type_2", "a_b", "a_b_2", "_7up", "__2", "x", "x_2", "self_2"]
        );
    }
}
