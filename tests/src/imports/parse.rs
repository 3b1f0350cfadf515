//! Reading a crate's sources for the layering check: from lib.rs along `mod` declarations, each file parsed with
//! `syn`; per module its children, the items it defines, its `use` names and globs,
//! and every path its non-test code writes (also inside macro token streams).

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use syn::visit::Visit;

/// A module: its path from the crate root and the file that holds it.
#[derive(Default)]
pub(super) struct Module {
    pub(super) file: usize,
    /// Child modules (file or inline).
    pub(super) children: BTreeSet<String>,
    /// Items defined here by name.
    pub(super) defined: BTreeSet<String>,
    /// `use` names (re-exported or not): name -> absolute path.
    pub(super) uses: BTreeMap<String, Vec<String>>,
    /// Glob `use` targets (absolute), re-exported or not.
    pub(super) globs: Vec<Vec<String>>,
}

/// One import as written: the module it is in, the path and its line. A `pub use` is not one.
pub(super) struct Reference {
    pub(super) module: Vec<String>,
    pub(super) path: Vec<String>,
    pub(super) line: usize,
}

#[derive(Default)]
pub(super) struct Crate {
    pub(super) files: Vec<PathBuf>,
    pub(super) modules: BTreeMap<Vec<String>, Module>,
    pub(super) refs: Vec<Reference>,
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
                while let (Some(T::Punct(a)), Some(T::Punct(b)), Some(T::Ident(n))) =
                    (toks.get(j), toks.get(j + 1), toks.get(j + 2))
                {
                    if a.as_char() != ':' || b.as_char() != ':' {
                        break;
                    }
                    segs.push(n.to_string());
                    j += 3;
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
                            module.uses.insert(n, abs);
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

/// The absolute path of `path` as written in module `m` (None: another crate, a prelude name or a local item).
pub(super) fn absolute(c: &Crate, m: &[String], path: &[String]) -> Option<Vec<String>> {
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
            let target = module.uses.get(first)?;
            let mut b = target.clone();
            b.extend(path[1..].iter().cloned());
            return Some(b);
        }
    };
    base.extend(path[1..].iter().cloned());
    Some(base)
}

pub(super) fn load(src: &Path) -> Crate {
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
