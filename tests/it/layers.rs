//! The crate's layering, checked on its source: modules only look down
//! (units/util → yaml → model, hardware → quant → cost → workload → sim, analytic → plan →
//! outcome → search → calibrate → report → error → cli → interactive), no source file reaches itself
//! through `crate::` or `super::` paths (a module's `mod.rs` naming its own submodules, its
//! `pub use child::X` facade, is not counted as an import), and no source file grows past 800
//! lines.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// Top-level modules from the bottom layer up; a module may import only from modules listed
/// before it (modules on the same line are peers and may not import each other).
const LAYERS: &[&[&str]] = &[
    &["units", "util"],
    &["yaml"],
    &["model", "hardware"],
    &["quant"],
    &["cost"],
    &["workload"],
    &["sim", "analytic"],
    &["plan"],
    &["outcome"],
    &["search"],
    &["calibrate"],
    &["report"],
    &["error"],
    &["cli"],
    &["interactive"],
];

fn rank(module: &str) -> Option<usize> {
    LAYERS.iter().position(|l| l.contains(&module))
}

fn sources(dir: &Path, out: &mut Vec<PathBuf>) {
    for e in std::fs::read_dir(dir).unwrap().flatten() {
        let p = e.path();
        if p.is_dir() {
            sources(&p, out);
        } else if p.extension().is_some_and(|x| x == "rs") {
            out.push(p);
        }
    }
}

/// The module path of a file: `src/sim/mod.rs` → [sim], `src/sim/kv.rs` → [sim, kv].
fn module_of(src: &Path, file: &Path) -> Vec<String> {
    let rel = file.strip_prefix(src).unwrap().with_extension("");
    let mut v: Vec<String> = rel.iter().map(|s| s.to_string_lossy().into_owned()).collect();
    if v.last().is_some_and(|l| l == "mod" || l == "lib" || l == "main") {
        v.pop();
    }
    v
}

/// Source without comments and without the trailing inline test module.
fn code(text: &str) -> String {
    let cut = text.find("#[cfg(test)]\nmod tests {").unwrap_or(text.len());
    text[..cut].lines().map(|l| l.split("//").next().unwrap_or("")).collect::<Vec<_>>().join("\n")
}

/// Every path a file names: `use` trees expanded, plus inline `crate::`/`super::` paths.
fn named_paths(code: &str) -> Vec<String> {
    fn expand(prefix: &str, tree: &str, out: &mut Vec<String>) {
        let tree = tree.trim();
        let Some(open) = tree.find('{') else {
            out.push(format!("{prefix}{tree}"));
            return;
        };
        let head = format!("{prefix}{}", &tree[..open]);
        let close = tree.rfind('}').filter(|c| *c > open).unwrap_or(tree.len());
        let body = &tree[open + 1..close];
        let (mut depth, mut start) = (0, 0);
        for (i, c) in body.char_indices() {
            match c {
                '{' => depth += 1,
                '}' => depth -= 1,
                ',' if depth == 0 => {
                    expand(&head, &body[start..i], out);
                    start = i + 1;
                }
                _ => {}
            }
        }
        if !body[start..].trim().is_empty() {
            expand(&head, &body[start..], out);
        }
    }
    let mut out = Vec::new();
    let mut lines = code.lines();
    while let Some(line) = lines.next() {
        let t = line.trim_start();
        let t = t.strip_prefix("pub(crate) ").or_else(|| t.strip_prefix("pub ")).unwrap_or(t);
        let Some(rest) = t.strip_prefix("use ") else { continue };
        let mut stmt = rest.to_string();
        while !stmt.contains(';') {
            match lines.next() {
                Some(l) => stmt += l,
                None => break,
            }
        }
        expand("", stmt.split(';').next().unwrap_or(""), &mut out);
    }
    let bytes = code.as_bytes();
    for key in ["crate::", "super::"] {
        let mut from = 0;
        while let Some(i) = code[from..].find(key) {
            let start = from + i;
            let mut end = start;
            while end < bytes.len() && (bytes[end].is_ascii_alphanumeric() || bytes[end] == b'_' || bytes[end] == b':') {
                end += 1;
            }
            out.push(code[start..end].to_string());
            from = end.max(start + 1);
        }
    }
    out
}

struct Graph {
    files: BTreeMap<Vec<String>, PathBuf>,
    edges: BTreeMap<PathBuf, BTreeSet<PathBuf>>,
}

fn graph() -> Graph {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut paths = Vec::new();
    sources(&src, &mut paths);
    paths.retain(|p| !p.ends_with("main.rs"));
    let files: BTreeMap<Vec<String>, PathBuf> = paths.iter().map(|p| (module_of(&src, p), p.clone())).collect();
    let resolve = |segs: &[String]| (0..=segs.len()).rev().find_map(|k| files.get(&segs[..k]));
    let mut edges = BTreeMap::new();
    for (me, file) in &files {
        let text = code(&std::fs::read_to_string(file).unwrap());
        let mut out = BTreeSet::new();
        for p in named_paths(&text) {
            let p = p.split(" as ").next().unwrap_or("").trim().to_string();
            let segs: Vec<String> = p.split("::").filter(|s| !s.is_empty()).map(String::from).collect();
            let target: Vec<String> = match segs.first().map(String::as_str) {
                Some("crate") => segs[1..].to_vec(),
                Some("super") => {
                    let ups = segs.iter().take_while(|s| *s == "super").count();
                    let base = &me[..me.len().saturating_sub(ups)];
                    base.iter().chain(&segs[ups..]).cloned().collect()
                }
                _ => continue,
            };
            if let Some(t) = resolve(&target) {
                if t != file {
                    out.insert(t.clone());
                }
            }
        }
        edges.insert(file.clone(), out);
    }
    Graph { files, edges }
}

fn top(src_rel: &Path) -> String {
    let s = src_rel.iter().next().map(|s| s.to_string_lossy().into_owned()).unwrap_or_default();
    s.trim_end_matches(".rs").to_string()
}

#[test]
fn modules_only_look_down() {
    // Mutation: add `use crate::search::Candidate;` to src/sim/mod.rs (or let sim/ name
    // `crate::plan::Plan`) and this test names the offending file.
    let g = graph();
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut bad = Vec::new();
    for (file, targets) in &g.edges {
        let from = top(file.strip_prefix(&src).unwrap());
        let Some(rf) = rank(&from) else { continue };
        for t in targets {
            let to = top(t.strip_prefix(&src).unwrap());
            if to == from || to == "lib" {
                continue;
            }
            match rank(&to) {
                Some(rt) if rt < rf => {}
                _ => {
                    bad.push(format!("{} imports {}", file.strip_prefix(&src).unwrap().display(), t.strip_prefix(&src).unwrap().display()))
                }
            }
        }
    }
    assert!(g.files.len() > 40, "the source walk found too few files");
    assert!(bad.is_empty(), "imports that look up or sideways:\n{}", bad.join("\n"));
}

#[test]
fn no_file_reaches_itself() {
    // Mutation: add `use crate::search::Phase;` back into src/outcome.rs (search imports
    // outcome) and this test reports the cycle.
    let g = graph();
    let mut state: BTreeMap<&PathBuf, u8> = BTreeMap::new();
    fn visit<'a>(v: &'a PathBuf, g: &'a Graph, state: &mut BTreeMap<&'a PathBuf, u8>, stack: &mut Vec<&'a PathBuf>) -> Option<String> {
        state.insert(v, 1);
        stack.push(v);
        for w in &g.edges[v] {
            match state.get(w) {
                Some(1) => {
                    let i = stack.iter().position(|s| *s == w).unwrap_or(0);
                    let names: Vec<String> = stack[i..].iter().map(|p| p.display().to_string()).collect();
                    return Some(format!("{} -> {}", names.join(" -> "), w.display()));
                }
                Some(_) => {}
                None => {
                    if let Some(c) = visit(w, g, state, stack) {
                        return Some(c);
                    }
                }
            }
        }
        stack.pop();
        state.insert(v, 2);
        None
    }
    for v in g.edges.keys() {
        if !state.contains_key(v) {
            let mut stack = Vec::new();
            if let Some(cycle) = visit(v, &g, &mut state, &mut stack) {
                panic!("import cycle: {cycle}");
            }
        }
    }
}

/// Most lines a source file under src/ may hold, its inline tests included (files whose names
/// end in `tests.rs` hold only tests and are not counted).
const MAX_FILE_LINES: usize = 800;

#[test]
fn no_source_file_is_over_800_lines() {
    // Mutation: append 800 blank lines to any file under src/ (or raise a split file back to
    // its pre-split size) and this test names it.
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut paths = Vec::new();
    sources(&src, &mut paths);
    let mut long: Vec<String> = paths
        .iter()
        .filter(|p| !p.to_string_lossy().ends_with("tests.rs"))
        .filter_map(|p| {
            let n = std::fs::read_to_string(p).unwrap().lines().count();
            (n > MAX_FILE_LINES).then(|| format!("{} ({n} lines)", p.strip_prefix(&src).unwrap().display()))
        })
        .collect();
    long.sort();
    assert!(paths.len() > 40, "the source walk found too few files");
    assert!(long.is_empty(), "files over {MAX_FILE_LINES} lines (split them by responsibility):\n{}", long.join("\n"));
}
