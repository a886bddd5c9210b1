//! Import cycles in the host crate, for `./x lint`: between its top-level modules, and
//! between the files of `src/modules/`. A dependency is a `crate::`, `super::` or `self::`
//! path in a `use` declaration or inline, outside comments and outside the file's test
//! module (everything after its first `#[cfg(test)]`), resolved to the longest module it
//! names. A state machine's states may share types with it: only these two levels count.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use anyhow::Result;

type Module = Vec<String>;

type Graph = BTreeMap<Module, BTreeSet<Module>>;

/// Which module imports which, file by file.
fn imports(src: &Path) -> Result<Graph> {
    let modules = modules(src, src)?;
    let mut edges = Graph::new();
    for (module, text) in &modules {
        for path in paths(module, text) {
            if let Some(target) = resolve(&path, &modules)
                && &target != module
            {
                edges.entry(module.clone()).or_default().insert(target);
            }
        }
    }
    Ok(edges)
}

/// The same between top-level modules.
fn top_level(edges: &Graph) -> Graph {
    let mut top = Graph::new();
    for (from, tos) in edges {
        for to in tos {
            if let (Some(a), Some(b)) = (from.first(), to.first())
                && a != b
            {
                top.entry(vec![a.clone()])
                    .or_default()
                    .insert(vec![b.clone()]);
            }
        }
    }
    top
}

/// Imports against the layer order: `tiers` lists the top-level modules from the bottom
/// up, and a module may import only modules of lower tiers. A module in no tier is a
/// violation too (a new module takes its place in the order deliberately).
pub(crate) fn layer_violations(src: &Path, tiers: &[&[&str]]) -> Result<Vec<String>> {
    let tier_of = |m: &str| tiers.iter().position(|t| t.contains(&m));
    let mut found = Vec::new();
    for (from, tos) in top_level(&imports(src)?) {
        let from = &from[0];
        let Some(low) = tier_of(from) else {
            found.push(format!("{from}: in no layer"));
            continue;
        };
        for to in tos {
            match tier_of(&to[0]) {
                Some(tier) if tier < low => {}
                _ => found.push(format!("{from} imports {}, which is not below it", to[0])),
            }
        }
    }
    Ok(found)
}

/// The cycles of the crate whose source is `src`, one line each (empty: none).
pub(crate) fn find(src: &Path, dirs: &[&str]) -> Result<Vec<String>> {
    let edges = imports(src)?;
    let top = top_level(&edges);
    let mut found = Vec::new();
    for cycle in strongly_connected(&top) {
        found.push(format!("top-level: {}", names(&cycle)));
    }
    for dir in dirs {
        let inside = |m: &Module| m.first().is_some_and(|f| f == dir);
        let local: Graph = edges
            .iter()
            .filter(|(m, _)| inside(m))
            .map(|(m, tos)| {
                (
                    m.clone(),
                    tos.iter().filter(|t| inside(t)).cloned().collect(),
                )
            })
            .collect();
        for cycle in strongly_connected(&local) {
            found.push(format!("{dir}/: {}", names(&cycle)));
        }
    }
    Ok(found)
}

fn names(cycle: &[Module]) -> String {
    cycle
        .iter()
        .map(|m| m.join("::"))
        .collect::<Vec<_>>()
        .join(" <-> ")
}

/// Every `.rs` file under `dir`: its module path (a `mod.rs`, `lib.rs` or `main.rs` is its
/// directory's module) and its text without tests and comments.
fn modules(src: &Path, dir: &Path) -> Result<BTreeMap<Module, String>> {
    let mut out = BTreeMap::new();
    for entry in std::fs::read_dir(dir)? {
        let path = entry?.path();
        if path.is_dir() {
            out.extend(modules(src, &path)?);
            continue;
        }
        if path.extension().is_none_or(|e| e != "rs") {
            continue;
        }
        let rel = path.strip_prefix(src)?.with_extension("");
        let mut module: Module = rel
            .components()
            .map(|c| c.as_os_str().to_string_lossy().into_owned())
            .collect();
        if matches!(
            module.last().map(String::as_str),
            Some("mod" | "lib" | "main")
        ) {
            module.pop();
        }
        let text = std::fs::read_to_string(&path)?;
        let text = text.split("#[cfg(test)]").next().unwrap_or_default();
        out.insert(module, without_comments(text));
    }
    Ok(out)
}

fn without_comments(text: &str) -> String {
    text.lines()
        .map(|line| line.split("//").next().unwrap_or_default())
        .collect::<Vec<_>>()
        .join("\n")
}

/// The module paths `text` (of `module`) names, absolute.
fn paths(module: &Module, text: &str) -> Vec<Module> {
    let mut out = Vec::new();
    for (start, _) in text.match_indices("use ") {
        let before = text[..start].chars().last();
        if before.is_some_and(|c| c.is_alphanumeric() || c == '_') {
            continue;
        }
        let rest = &text[start + 4..];
        let Some(end) = rest.find(';') else { continue };
        let body = rest[..end].split_whitespace().collect::<Vec<_>>().join(" ");
        if let Some((anchor, tail)) = anchored(body.trim()) {
            for path in expand(tail) {
                out.push([base(module, &anchor), path].concat());
            }
        }
    }
    for anchor in ["crate::", "super::"] {
        for (start, _) in text.match_indices(anchor) {
            let before = text[..start].chars().last();
            if before.is_some_and(|c| c.is_alphanumeric() || c == '_' || c == ':') {
                continue;
            }
            let tail: String = text[start..]
                .chars()
                .take_while(|c| c.is_alphanumeric() || *c == '_' || *c == ':')
                .collect();
            if let Some((anchor, rest)) = anchored(&tail) {
                let path: Module = rest
                    .split("::")
                    .filter(|s| !s.is_empty())
                    .map(str::to_string)
                    .collect();
                out.push([base(module, &anchor), path].concat());
            }
        }
    }
    out
}

/// `crate::a::b` → (["crate"], "a::b"); `super::super::x` → (["super", "super"], "x").
fn anchored(path: &str) -> Option<(Vec<String>, &str)> {
    let mut anchor = Vec::new();
    let mut rest = path;
    while let Some((head, tail)) = rest.split_once("::")
        && matches!(head, "crate" | "super" | "self")
    {
        anchor.push(head.to_string());
        rest = tail;
    }
    (!anchor.is_empty()).then_some((anchor, rest))
}

fn base(module: &Module, anchor: &[String]) -> Module {
    let mut base = module.clone();
    for part in anchor {
        match part.as_str() {
            "crate" => base.clear(),
            "super" => {
                base.pop();
            }
            _ => {}
        }
    }
    base
}

/// `a::{b, c::{d, e}}` → [[a, b], [a, c, d], [a, c, e]]; `*` and `self` name the module.
fn expand(body: &str) -> Vec<Module> {
    let body = body.trim();
    let (head, tail) = match body.find('{') {
        Some(i) if body.ends_with('}') => (&body[..i], Some(&body[i + 1..body.len() - 1])),
        _ => (body, None),
    };
    let prefix: Module = head
        .split("::")
        .map(|s| s.split(" as ").next().unwrap_or(s).trim())
        .filter(|s| !s.is_empty() && *s != "*" && *s != "self")
        .map(str::to_string)
        .collect();
    let Some(inner) = tail else {
        return vec![prefix];
    };
    let (mut parts, mut depth, mut part) = (Vec::new(), 0, String::new());
    for c in inner.chars() {
        match c {
            ',' if depth == 0 => parts.push(std::mem::take(&mut part)),
            '{' => (depth, part) = (depth + 1, part + "{"),
            '}' => (depth, part) = (depth - 1, part + "}"),
            c => part.push(c),
        }
    }
    parts.push(part);
    parts
        .iter()
        .filter(|p| !p.trim().is_empty())
        .flat_map(|p| expand(p))
        .map(|p| [prefix.clone(), p].concat())
        .collect()
}

/// The longest known module `path` starts with.
fn resolve(path: &Module, modules: &BTreeMap<Module, String>) -> Option<Module> {
    (1..=path.len())
        .rev()
        .map(|n| path[..n].to_vec())
        .find(|p| modules.contains_key(p))
}

/// Tarjan's strongly connected components with more than one member.
fn strongly_connected(graph: &Graph) -> Vec<Vec<Module>> {
    struct State<'a> {
        graph: &'a Graph,
        index: BTreeMap<Module, usize>,
        low: BTreeMap<Module, usize>,
        stack: Vec<Module>,
        out: Vec<Vec<Module>>,
    }
    fn visit(s: &mut State<'_>, v: &Module) {
        let i = s.index.len();
        s.index.insert(v.clone(), i);
        s.low.insert(v.clone(), i);
        s.stack.push(v.clone());
        for w in s.graph.get(v).into_iter().flatten() {
            if !s.index.contains_key(w) {
                visit(s, w);
                let low = s.low[v].min(s.low[w]);
                s.low.insert(v.clone(), low);
            } else if s.stack.contains(w) {
                let low = s.low[v].min(s.index[w]);
                s.low.insert(v.clone(), low);
            }
        }
        if s.low[v] == s.index[v] {
            let at = s.stack.iter().position(|m| m == v).unwrap_or(0);
            let mut component = s.stack.split_off(at);
            if component.len() > 1 {
                component.sort();
                s.out.push(component);
            }
        }
    }
    let mut s = State {
        graph,
        index: BTreeMap::new(),
        low: BTreeMap::new(),
        stack: Vec::new(),
        out: Vec::new(),
    };
    for v in graph.keys() {
        if !s.index.contains_key(v) {
            visit(&mut s, v);
        }
    }
    s.out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tree(files: &[(&str, &str)]) -> tempfile::TempDir {
        let dir = tempfile::tempdir().unwrap();
        for (path, text) in files {
            let path = dir.path().join(path);
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            std::fs::write(path, text).unwrap();
        }
        dir
    }

    /// A planted cycle is found at both levels; test modules and comments do not count.
    #[test]
    fn a_planted_cycle_is_found() {
        let dir = tree(&[
            ("lib.rs", "pub mod a;\npub mod modules;\n"),
            ("a.rs", "use crate::modules::{x::{One, Two as T}, y};\n"),
            ("modules/mod.rs", "mod x;\nmod y;\n"),
            ("modules/x.rs", "use super::y::Thing;\n"),
            (
                "modules/y.rs",
                "pub fn f() { super::x::g(); crate::a::h() }\n",
            ),
        ]);
        let found = find(dir.path(), &["modules"]).unwrap();
        assert_eq!(
            found,
            vec![
                "top-level: a <-> modules".to_string(),
                "modules/: modules::x <-> modules::y".to_string()
            ]
        );
    }

    #[test]
    fn an_import_upwards_breaks_the_layers() {
        let dir = tree(&[
            ("lib.rs", "pub mod low;\npub mod high;\npub mod new;\n"),
            ("low.rs", "use crate::high::X;\n"),
            ("high.rs", "use crate::low::Y;\n"),
            ("new.rs", "use crate::low::Z;\n"),
        ]);
        let found = layer_violations(dir.path(), &[&["low"], &["high"]]).unwrap();
        assert_eq!(
            found,
            vec![
                "low imports high, which is not below it".to_string(),
                "new: in no layer".to_string()
            ]
        );
    }

    #[test]
    fn tests_and_comments_make_no_cycle() {
        let dir = tree(&[
            ("lib.rs", "pub mod a;\npub mod b;\n"),
            ("a.rs", "use crate::b::X;\n"),
            (
                "b.rs",
                "// see crate::a::Y\n#[cfg(test)]\nmod tests { use crate::a::Y; }\n",
            ),
        ]);
        assert!(find(dir.path(), &["modules"]).unwrap().is_empty());
    }
}
