//! The layering check of a crate's sources (`check`): file-level import edges resolved through re-exports to the
//! defining file (`parse.rs` reads the sources), circles between files (Tarjan), and imports between modules
//! that the rules do not allow. `tests/tests/layering.rs` holds the rules of bundlec and bundle-rt.

mod parse;

use parse::{absolute, load, Crate};
use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

/// Rules: a module path (`config/view` for a module below the top level; `""` the crate root) and the modules it
/// may import. A file takes the rule of the longest module path that holds it; an allowed module also allows
/// the modules below it that have rules of their own, unless written `=module`; `*` allows everything.
pub type Rules<'a> = &'a [(&'a str, &'a [&'a str])];

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
    if let Some(target) = m.uses.get(name) {
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

/// The problems of the crate whose sources are under `root` (named `dir` in the messages): every circle between
/// files and every import the rules do not allow, each naming file, line and path; leaves may be imported by all.
pub fn check(root: &Path, dir: &str, rules: Rules, leaves: &[&str]) -> Vec<String> {
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
