//! Inside each crate, modules use each other one way: a module that another
//! uses does not use it back, through any chain. (Between crates, the
//! layering is `.ci/deps-check`'s.) A module's own submodules and its
//! ancestors do not count: a parent and its children are one unit, and
//! items of a crate's root are everyone's.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

/// Each module of a crate (`cmd::run`) with the text it was read from,
/// comments and test modules left out.
fn modules(src: &Path) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    let mut dirs = vec![src.to_path_buf()];
    while let Some(d) = dirs.pop() {
        for e in std::fs::read_dir(&d).unwrap() {
            let p = e.unwrap().path();
            if p.is_dir() {
                dirs.push(p);
                continue;
            }
            if p.extension().map_or(true, |x| x != "rs") {
                continue;
            }
            let rel = p.strip_prefix(src).unwrap().with_extension("");
            let mut parts: Vec<String> = rel
                .iter()
                .map(|s| s.to_string_lossy().into_owned())
                .collect();
            if matches!(
                parts.last().map(String::as_str),
                Some("mod" | "lib" | "main")
            ) {
                parts.pop();
            }
            let text = std::fs::read_to_string(&p).unwrap();
            let code = text.split("#[cfg(test)]\nmod tests").next().unwrap_or("");
            let code: Vec<&str> = code
                .lines()
                .filter(|l| !l.trim_start().starts_with("//"))
                .collect();
            out.insert(parts.join("::"), code.join("\n"));
        }
    }
    out
}

/// The paths a module's code names after `prefix` (`crate::`, `super::`).
fn paths_after<'a>(code: &'a str, prefix: &str) -> Vec<Vec<&'a str>> {
    code.match_indices(prefix)
        .filter(|(i, _)| {
            // `crate::` itself, not `plumb_crate::`.
            code[..*i]
                .chars()
                .next_back()
                .map_or(true, |c| !(c.is_alphanumeric() || c == '_'))
        })
        .map(|(i, _)| {
            let rest = &code[i + prefix.len()..];
            let end = rest
                .find(|c: char| !(c.is_alphanumeric() || c == '_' || c == ':'))
                .unwrap_or(rest.len());
            rest[..end].split("::").filter(|s| !s.is_empty()).collect()
        })
        .collect()
}

/// Which modules each module uses.
fn uses(mods: &BTreeMap<String, String>) -> BTreeMap<&str, BTreeSet<&str>> {
    let mut edges: BTreeMap<&str, BTreeSet<&str>> = BTreeMap::new();
    for (m, code) in mods {
        let here: Vec<&str> = m.split("::").filter(|s| !s.is_empty()).collect();
        let mut named: Vec<Vec<&str>> = paths_after(code, "crate::");
        for p in paths_after(code, "super::") {
            let mut full: Vec<&str> = here[..here.len().saturating_sub(1)].to_vec();
            full.extend(p);
            named.push(full);
        }
        let set = edges.entry(m.as_str()).or_default();
        for path in named {
            // The longest prefix of the path that is a module.
            let Some(target) = (1..=path.len())
                .rev()
                .map(|k| path[..k].join("::"))
                .find(|c| mods.contains_key(c))
            else {
                continue;
            };
            let (t, _) = mods.get_key_value(&target).unwrap();
            let ancestor = m == t || m.starts_with(&format!("{t}::"));
            if !ancestor {
                set.insert(t.as_str());
            }
        }
    }
    edges
}

/// A chain of modules that leads from `from` back to it, if one does.
fn circle<'a>(edges: &BTreeMap<&'a str, BTreeSet<&'a str>>, from: &'a str) -> Option<Vec<&'a str>> {
    let mut seen = BTreeSet::new();
    let mut stack = vec![vec![from]];
    while let Some(path) = stack.pop() {
        let last = *path.last().unwrap();
        for &next in edges.get(last).into_iter().flatten() {
            if next == from {
                return Some([path.clone(), vec![from]].concat());
            }
            if seen.insert(next) {
                stack.push([path.clone(), vec![next]].concat());
            }
        }
    }
    None
}

#[test]
fn no_module_uses_one_that_uses_it_back() {
    let crates = Path::new(env!("CARGO_MANIFEST_DIR")).join("crates");
    let mut circles = Vec::new();
    let mut count = 0;
    for c in std::fs::read_dir(&crates).unwrap() {
        let src = c.unwrap().path().join("src");
        let mods = modules(&src);
        count += mods.len();
        let edges = uses(&mods);
        for m in mods.keys() {
            if let Some(chain) = circle(&edges, m) {
                circles.push(format!("{}: {}", src.display(), chain.join(" -> ")));
            }
        }
    }
    assert!(
        count > 100,
        "only {count} modules found under {}",
        crates.display()
    );
    assert!(
        circles.is_empty(),
        "modules in a circle:\n{}",
        circles.join("\n")
    );
}

#[test]
fn a_circle_is_found() {
    let mods: BTreeMap<String, String> = [
        ("a".to_string(), "use crate::b::X;".to_string()),
        ("b".to_string(), "fn f() { super::a::g() }".to_string()),
        ("c".to_string(), "use crate::a;".to_string()),
        (
            "a::d".to_string(),
            "use super::X; use crate::a::Y;".to_string(),
        ),
    ]
    .into();
    let edges = uses(&mods);
    assert_eq!(circle(&edges, "a"), Some(vec!["a", "b", "a"]));
    assert_eq!(circle(&edges, "c"), None);
    // A child naming its parent is not a circle.
    assert_eq!(circle(&edges, "a::d"), None);
}
