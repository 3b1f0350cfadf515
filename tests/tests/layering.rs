//! The layering of bundlec's and bundle-rt's sources, read with `syn`: no files import each other in a circle, and
//! every import between top-level modules goes in one of the directions docs/architecture.md states (`COMPILER`
//! and `RUNTIME` below). An import is a `use` or a path in code (`crate::`, `super::`, a child module, or a name a
//! `use` brought in), resolved through re-exports to the file that defines it; a re-export (`pub use`) is not
//! itself an import of the module that makes it. Test code (`#[cfg(test)]` items and modules) is left out.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use syn::visit::Visit;

/// Top-level modules of compiler/src and the top-level modules each may import (besides itself and `LEAVES`).
const COMPILER: &[(&str, &[&str])] = &[
    ("ir", &[]),
    ("import", &["ir"]),
    ("profile", &["ir"]),
    ("passes", &["ir", "profile"]),
    ("kernel", &["ir"]),
    ("x86", &["ir", "kernel"]),
    ("plan", &["ir", "kernel"]),
    ("lower", &["ir", "kernel", "x86", "plan"]),
    ("codegen", &["ir", "kernel", "x86", "plan", "lower"]),
    ("npu", &["ir"]),
    ("partition", &["ir", "npu"]),
    (
        "emit",
        &[
            "ir",
            "kernel",
            "x86",
            "plan",
            "lower",
            "codegen",
            "npu",
            "partition",
        ],
    ),
    ("pipeline", &["*"]),
    ("buildscript", &["*"]),
    ("cli", &["*"]),
    ("", &["*"]),
];
/// Modules anyone may import in compiler/src.
const COMPILER_LEAVES: &[&str] = &["error", "fsio"];

/// The same for bundle-rt/src. A rule may name a module below the top level (`config/view`): a file takes the
/// rule of the longest module path that holds it. An allowed module also allows the modules below it that have
/// rules of their own, unless written `=module`.
const RUNTIME: &[(&str, &[&str])] = &[
    ("format", &[]),
    ("cpu", &[]),
    ("log", &[]),
    ("superkernel", &[]),
    ("config", &["cpu"]),
    ("error", &["cpu", "=config"]),
    ("config/view", &["cpu", "config", "error"]),
    ("buf", &["error"]),
    ("aie", &["error"]),
    ("bundle", &["cpu", "config", "error", "buf"]),
    ("profile", &["config", "error", "bundle"]),
    ("npu", &["config", "error", "aie", "superkernel", "buf"]),
    (
        "exec",
        &["config", "error", "bundle", "profile", "npu", "buf"],
    ),
    (
        "instance",
        &["config", "error", "bundle", "profile", "npu", "buf", "exec"],
    ),
    (
        "engine",
        &[
            "config", "error", "bundle", "profile", "npu", "buf", "exec", "instance", "log", "cpu",
        ],
    ),
    (
        "runner",
        &[
            "config", "error", "bundle", "profile", "npu", "buf", "exec", "instance", "engine",
            "aie",
        ],
    ),
    ("capi", &["*"]),
    ("fixture", &["*"]),
    ("", &["*"]),
];
/// Modules anyone may import in bundle-rt/src.
const RUNTIME_LEAVES: &[&str] = &["format"];

/// A module: its path from the crate root and the file that holds it.
#[derive(Default)]
struct Module {
    file: usize,
    /// Child modules (file or inline).
    children: BTreeSet<String>,
    /// Items defined here by name.
    defined: BTreeSet<String>,
    /// `use` names: name -> absolute path, with whether it is a re-export (`pub`).
    uses: BTreeMap<String, (Vec<String>, bool)>,
    /// Glob `use` targets (absolute), re-exported or not.
    globs: Vec<Vec<String>>,
}

/// One import as written: the module it is in, the path, whether it is a `use` (counted on its own) and its line.
struct Reference {
    module: Vec<String>,
    path: Vec<String>,
    line: usize,
}

#[derive(Default)]
struct Crate {
    files: Vec<PathBuf>,
    modules: BTreeMap<Vec<String>, Module>,
    refs: Vec<Reference>,
}

fn is_test(attrs: &[syn::Attribute]) -> bool {
    attrs.iter().any(|a| match &a.meta {
        syn::Meta::List(l) if l.path.is_ident("cfg") => {
            let s = l.tokens.to_string();
            s.contains("test") && !s.contains("not (test")
        }
        _ => false,
    })
}

fn flatten_use(
    tree: &syn::UseTree,
    prefix: &mut Vec<String>,
    out: &mut Vec<(Vec<String>, Option<String>)>,
) {
    match tree {
        syn::UseTree::Path(p) => {
            prefix.push(p.ident.to_string());
            flatten_use(&p.tree, prefix, out);
            prefix.pop();
        }
        syn::UseTree::Name(n) => {
            let mut p = prefix.clone();
            let name = n.ident.to_string();
            if name == "self" {
                let last = p.last().cloned();
                out.push((p, last));
            } else {
                p.push(name.clone());
                out.push((p, Some(name)));
            }
        }
        syn::UseTree::Rename(r) => {
            let mut p = prefix.clone();
            if r.ident != "self" {
                p.push(r.ident.to_string());
            }
            out.push((p, Some(r.rename.to_string())));
        }
        syn::UseTree::Glob(_) => out.push((prefix.clone(), None)),
        syn::UseTree::Group(g) => {
            for t in &g.items {
                flatten_use(t, prefix, out);
            }
        }
    }
}

/// Collects paths in code: every `syn::Path` and `crate::`/`super::` sequences inside macro tokens.
struct Paths<'a> {
    out: &'a mut Vec<(Vec<String>, usize)>,
}

impl<'ast> Visit<'ast> for Paths<'_> {
    fn visit_path(&mut self, p: &'ast syn::Path) {
        let segs: Vec<String> = p.segments.iter().map(|s| s.ident.to_string()).collect();
        let line = p
            .segments
            .first()
            .map_or(0, |s| s.ident.span().start().line);
        self.out.push((segs, line));
        syn::visit::visit_path(self, p);
    }
    fn visit_macro(&mut self, m: &'ast syn::Macro) {
        let toks: Vec<proc_macro2::TokenTree> = m.tokens.clone().into_iter().collect();
        macro_paths(&toks, self.out);
        syn::visit::visit_macro(self, m);
    }
    fn visit_visibility(&mut self, _: &'ast syn::Visibility) {}
    fn visit_item(&mut self, i: &'ast syn::Item) {
        if !item_is_test(i) {
            syn::visit::visit_item(self, i);
        }
    }
    fn visit_impl_item_fn(&mut self, f: &'ast syn::ImplItemFn) {
        if !is_test(&f.attrs) {
            syn::visit::visit_impl_item_fn(self, f);
        }
    }
}

fn macro_paths(toks: &[proc_macro2::TokenTree], out: &mut Vec<(Vec<String>, usize)>) {
    use proc_macro2::TokenTree as T;
    let mut i = 0;
    while i < toks.len() {
        match &toks[i] {
            T::Group(g) => {
                let inner: Vec<T> = g.stream().into_iter().collect();
                macro_paths(&inner, out);
                i += 1;
            }
            T::Ident(id) if matches!(id.to_string().as_str(), "crate" | "super") => {
                let line = id.span().start().line;
                let mut segs = vec![id.to_string()];
                let mut j = i + 1;
                while j + 2 < toks.len() + 1 {
                    match (&toks.get(j), &toks.get(j + 1), &toks.get(j + 2)) {
                        (Some(T::Punct(a)), Some(T::Punct(b)), Some(T::Ident(n)))
                            if a.as_char() == ':' && b.as_char() == ':' =>
                        {
                            segs.push(n.to_string());
                            j += 3;
                        }
                        _ => break,
                    }
                }
                out.push((segs, line));
                i = j;
            }
            _ => i += 1,
        }
    }
}

fn item_is_test(i: &syn::Item) -> bool {
    let attrs: &[syn::Attribute] = match i {
        syn::Item::Mod(m) => &m.attrs,
        syn::Item::Fn(f) => &f.attrs,
        syn::Item::Use(u) => &u.attrs,
        syn::Item::Impl(x) => &x.attrs,
        syn::Item::Struct(x) => &x.attrs,
        syn::Item::Enum(x) => &x.attrs,
        syn::Item::Const(x) => &x.attrs,
        syn::Item::Static(x) => &x.attrs,
        syn::Item::Macro(x) => &x.attrs,
        syn::Item::Trait(x) => &x.attrs,
        _ => &[],
    };
    is_test(attrs)
}

fn item_name(i: &syn::Item) -> Option<String> {
    Some(match i {
        syn::Item::Fn(f) => f.sig.ident.to_string(),
        syn::Item::Struct(x) => x.ident.to_string(),
        syn::Item::Enum(x) => x.ident.to_string(),
        syn::Item::Const(x) => x.ident.to_string(),
        syn::Item::Static(x) => x.ident.to_string(),
        syn::Item::Type(x) => x.ident.to_string(),
        syn::Item::Trait(x) => x.ident.to_string(),
        syn::Item::Union(x) => x.ident.to_string(),
        syn::Item::Macro(x) => x.ident.as_ref()?.to_string(),
        _ => return None,
    })
}

/// The absolute path of `path` as written in module `m` (None: another crate, a prelude name or a local item).
fn absolute(c: &Crate, m: &[String], path: &[String]) -> Option<Vec<String>> {
    let first = path.first()?;
    let mut base: Vec<String> = match first.as_str() {
        "crate" => vec![],
        "self" => m.to_vec(),
        "super" => {
            let mut b = m.to_vec();
            let mut rest = path;
            while rest.first().is_some_and(|s| s == "super") {
                b.pop()?;
                rest = &rest[1..];
            }
            b.extend(rest.iter().cloned());
            return Some(b);
        }
        _ => {
            let module = c.modules.get(m)?;
            if module.children.contains(first) {
                let mut b = m.to_vec();
                b.extend(path.iter().cloned());
                return Some(b);
            }
            let (target, _) = module.uses.get(first)?;
            let mut b = target.clone();
            b.extend(path[1..].iter().cloned());
            return Some(b);
        }
    };
    base.extend(path[1..].iter().cloned());
    Some(base)
}

/// The module that defines what absolute path `p` names, following re-exports.
fn defining(c: &Crate, p: &[String], depth: usize) -> Option<Vec<String>> {
    let n = (0..=p.len())
        .rev()
        .find(|&n| c.modules.contains_key(&p[..n]))?;
    let (module, rest) = (&p[..n], &p[n..]);
    let Some(name) = rest.first() else {
        return Some(module.to_vec());
    };
    let m = &c.modules[module];
    if m.defined.contains(name) || depth > 8 {
        return Some(module.to_vec());
    }
    if let Some((target, _)) = m.uses.get(name) {
        let mut t = target.clone();
        t.extend(rest[1..].iter().cloned());
        return defining(c, &t, depth + 1).or(Some(module.to_vec()));
    }
    for g in &m.globs {
        let mut t = g.clone();
        t.extend(rest.iter().cloned());
        if let Some(d) = defining(c, &t, depth + 1) {
            if c.modules
                .get(&d)
                .is_some_and(|dm| rest.first().is_some_and(|r| dm.defined.contains(r)))
            {
                return Some(d);
            }
        }
    }
    Some(module.to_vec())
}

fn load_items(
    c: &mut Crate,
    items: &[syn::Item],
    m: Vec<String>,
    file: usize,
    dir: &Path,
    pending: &mut Vec<(Vec<String>, PathBuf, PathBuf)>,
) {
    c.modules.entry(m.clone()).or_default().file = file;
    let mut code_paths = Vec::new();
    for item in items {
        if item_is_test(item) {
            continue;
        }
        if let Some(name) = item_name(item) {
            c.modules.get_mut(&m).unwrap().defined.insert(name);
        }
        match item {
            syn::Item::Mod(md) => {
                let name = md.ident.to_string();
                c.modules.get_mut(&m).unwrap().children.insert(name.clone());
                let mut child = m.clone();
                child.push(name.clone());
                match &md.content {
                    Some((_, inner)) => {
                        load_items(c, inner, child, file, &dir.join(&name), pending)
                    }
                    None => {
                        let a = dir.join(format!("{name}.rs"));
                        let b = dir.join(&name).join("mod.rs");
                        let path = if a.exists() { a } else { b };
                        pending.push((child, path, dir.join(&name)));
                    }
                }
            }
            syn::Item::Use(u) => {
                let public = !matches!(u.vis, syn::Visibility::Inherited);
                let mut flat = Vec::new();
                flatten_use(&u.tree, &mut Vec::new(), &mut flat);
                let line = u.use_token.span.start().line;
                for (path, name) in flat {
                    let Some(abs) = absolute(c, &m, &path) else {
                        continue;
                    };
                    let module = c.modules.get_mut(&m).unwrap();
                    match name {
                        Some(n) => {
                            module.uses.insert(n, (abs, public));
                        }
                        None => module.globs.push(abs),
                    }
                    if !public {
                        c.refs.push(Reference {
                            module: m.clone(),
                            path: path.clone(),
                            line,
                        });
                    }
                }
            }
            other => {
                let mut v = Paths {
                    out: &mut code_paths,
                };
                v.visit_item(other);
            }
        }
    }
    for (path, line) in code_paths {
        c.refs.push(Reference {
            module: m.clone(),
            path,
            line,
        });
    }
}

fn load(src: &Path) -> Crate {
    let mut c = Crate::default();
    let mut pending = vec![(vec![], src.join("lib.rs"), src.to_path_buf())];
    while let Some((m, path, dir)) = pending.pop() {
        let text =
            std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        let file = syn::parse_file(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        c.files.push(path);
        let id = c.files.len() - 1;
        load_items(&mut c, &file.items, m, id, &dir, &mut pending);
    }
    c
}

/// File-level edges `from -> to` with the first line that makes each.
fn edges(c: &Crate) -> BTreeMap<(usize, usize), (Vec<String>, usize)> {
    let mut e = BTreeMap::new();
    for r in &c.refs {
        // A path that reaches a use alias inside the same module was counted at the `use`.
        let Some(abs) = absolute(c, &r.module, &r.path) else {
            continue;
        };
        let Some(def) = defining(c, &abs, 0) else {
            continue;
        };
        let (from, to) = (c.modules[&r.module].file, c.modules[&def].file);
        if from != to {
            e.entry((from, to)).or_insert((r.path.clone(), r.line));
        }
    }
    e
}

fn sccs(n: usize, adj: &[Vec<usize>]) -> Vec<Vec<usize>> {
    // Tarjan, iterative enough for a few hundred files.
    struct S<'a> {
        adj: &'a [Vec<usize>],
        index: Vec<Option<usize>>,
        low: Vec<usize>,
        on: Vec<bool>,
        stack: Vec<usize>,
        next: usize,
        out: Vec<Vec<usize>>,
    }
    fn go(s: &mut S, v: usize) {
        s.index[v] = Some(s.next);
        s.low[v] = s.next;
        s.next += 1;
        s.stack.push(v);
        s.on[v] = true;
        for &w in &s.adj[v] {
            match s.index[w] {
                None => {
                    go(s, w);
                    s.low[v] = s.low[v].min(s.low[w]);
                }
                Some(i) if s.on[w] => s.low[v] = s.low[v].min(i),
                _ => {}
            }
        }
        if Some(s.low[v]) == s.index[v] {
            let mut comp = Vec::new();
            loop {
                let w = s.stack.pop().unwrap();
                s.on[w] = false;
                comp.push(w);
                if w == v {
                    break;
                }
            }
            s.out.push(comp);
        }
    }
    let mut s = S {
        adj,
        index: vec![None; n],
        low: vec![0; n],
        on: vec![false; n],
        stack: vec![],
        next: 0,
        out: vec![],
    };
    for v in 0..n {
        if s.index[v].is_none() {
            go(&mut s, v);
        }
    }
    s.out
}

fn check(dir: &str, rules: &[(&str, &[&str])], leaves: &[&str]) -> Vec<String> {
    check_at(
        &Path::new(env!("CARGO_MANIFEST_DIR")).join("..").join(dir),
        dir,
        rules,
        leaves,
    )
}

fn check_at(root: &Path, dir: &str, rules: &[(&str, &[&str])], leaves: &[&str]) -> Vec<String> {
    let root = root.to_path_buf();
    let c = load(&root);
    let rel = |f: usize| {
        c.files[f]
            .strip_prefix(&root)
            .unwrap()
            .display()
            .to_string()
    };
    // The rule a file falls under: the longest rule path that holds its module path.
    let key = |f: usize| -> String {
        let r = rel(f);
        let path: Vec<&str> = r
            .trim_end_matches(".rs")
            .split('/')
            .filter(|s| *s != "mod" && *s != "lib")
            .collect();
        let mut best = String::new();
        for (name, _) in rules
            .iter()
            .map(|(n, a)| (*n, *a))
            .chain(leaves.iter().map(|l| (*l, &[][..])))
        {
            let parts: Vec<&str> = name.split('/').filter(|s| !s.is_empty()).collect();
            if parts.len() <= path.len()
                && parts[..] == path[..parts.len()]
                && name.len() > best.len()
            {
                best = name.to_string();
            }
        }
        best
    };
    let e = edges(&c);
    let mut problems = Vec::new();
    let mut adj = vec![Vec::new(); c.files.len()];
    for (&(a, b), (path, line)) in &e {
        adj[a].push(b);
        let (ta, tb) = (key(a), key(b));
        if ta == tb || leaves.contains(&tb.as_str()) {
            continue;
        }
        match rules.iter().find(|(m, _)| *m == ta) {
            None => problems.push(format!(
                "{dir}/{}: module `{ta}` has no layering rule",
                rel(a)
            )),
            Some((_, allowed))
                if allowed.iter().any(|a| {
                    *a == "*"
                        || a.strip_prefix('=') == Some(tb.as_str())
                        || (*a == tb || tb.starts_with(&format!("{a}/")))
                }) => {}
            Some(_) => problems.push(format!(
                "{dir}/{}:{line}: `{}` imports {dir}/{} (`{ta}` may not import `{tb}`)",
                rel(a),
                path.join("::"),
                rel(b)
            )),
        }
    }
    for comp in sccs(c.files.len(), &adj) {
        if comp.len() > 1 {
            let set: BTreeSet<usize> = comp.iter().copied().collect();
            let mut lines = Vec::new();
            for (&(a, b), (path, line)) in &e {
                if set.contains(&a) && set.contains(&b) {
                    lines.push(format!(
                        "    {}:{line} -> {} (`{}`)",
                        rel(a),
                        rel(b),
                        path.join("::")
                    ));
                }
            }
            problems.push(format!(
                "{dir}: import circle of {} files:\n{}",
                comp.len(),
                lines.join("\n")
            ));
        }
    }
    problems
}

#[test]
fn compiler_layers() {
    let p = check("compiler/src", COMPILER, COMPILER_LEAVES);
    assert!(
        p.is_empty(),
        "{} layering problems:\n{}",
        p.len(),
        p.join("\n")
    );
}

#[test]
fn runtime_layers() {
    let p = check("bundle-rt/src", RUNTIME, RUNTIME_LEAVES);
    assert!(
        p.is_empty(),
        "{} layering problems:\n{}",
        p.len(),
        p.join("\n")
    );
}

/// The checker itself: a small crate with a circle through a re-export, an import against the rules, a child
/// that imports its parent's own item, and test code that may do anything.
#[test]
fn checker_finds_circles_and_wrong_directions() {
    let dir = std::env::temp_dir().join(format!("bundlec-layering-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let files: &[(&str, &str)] = &[
        ("lib.rs", "pub mod low;\npub mod high;\npub mod fam;\npub use high::H;\n"),
        ("low.rs", "use crate::H;\npub struct L(pub H);\n"),
        ("high.rs", "use crate::low::L;\npub struct H;\npub fn f(_: L) {}\n"),
        ("fam/mod.rs", "mod child;\npub struct Shared;\npub fn run() { child::go() }\n"),
        (
            "fam/child.rs",
            "pub fn go() { let _ = super::Shared; }\n#[cfg(test)]\nmod tests { use crate::high::H; }\n",
        ),
    ];
    for (name, text) in files {
        let p = dir.join(name);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, text).unwrap();
    }
    let rules: &[(&str, &[&str])] = &[("low", &[]), ("high", &["low"]), ("fam", &[]), ("", &["*"])];
    let p = check_at(&dir, "t", rules, &[]);
    let _ = std::fs::remove_dir_all(&dir);
    let all = p.join("\n");
    assert!(
        all.contains("low.rs:1: `crate::H` imports t/high.rs (`low` may not import `high`)"),
        "{all}"
    );
    assert!(
        all.contains("import circle of 2 files:\n    high.rs:1 -> low.rs")
            || all.contains("low.rs:1 -> high.rs"),
        "{all}"
    );
    assert!(
        all.contains("fam/child.rs:1 -> fam/mod.rs (`super::Shared`)"),
        "{all}"
    );
    assert_eq!(p.len(), 3, "{all}");
}
