//! Repository hygiene that the compiler does not check by itself.
//!
//! - Every crate opts into the workspace lints, which deny missing docs, so
//!   every public item is documented.
//! - No source file grows past MAX_LINES: past that, split it.
//! - Crates marked pure (`[package.metadata.herd] pure = true`) do no I/O and
//!   read no clock: ARCHITECTURE.md's pure-core invariant, checked by text.
//! - No two files of a crate import each other, directly or through others.

use std::path::{Path, PathBuf};

const MAX_LINES: usize = 900;

const IMPURE: [&str; 8] = [
    "std::fs",
    "std::process",
    "std::env",
    "std::net",
    "Instant::now",
    "SystemTime",
    "File::open",
    "thread::sleep",
];

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap().flatten() {
        let p = entry.path();
        if p.is_dir() {
            rust_files(&p, out);
        } else if p.extension().is_some_and(|e| e == "rs") {
            out.push(p);
        }
    }
}

fn crates() -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = std::fs::read_dir(root().join("crates"))
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.is_dir())
        .collect();
    v.sort();
    v
}

#[test]
fn workspace_denies_missing_docs() {
    let ws = std::fs::read_to_string(root().join("Cargo.toml")).unwrap();
    assert!(
        ws.contains("missing_docs = \"deny\""),
        "workspace lints must deny missing docs"
    );
    for c in crates() {
        let manifest = std::fs::read_to_string(c.join("Cargo.toml")).unwrap();
        assert!(
            manifest.contains("[lints]\nworkspace = true"),
            "{} must use the workspace lints",
            c.display()
        );
    }
}

#[test]
fn no_source_file_is_too_long() {
    let mut files = Vec::new();
    for c in crates() {
        rust_files(&c, &mut files);
    }
    assert!(files.len() > 5);
    for f in files {
        let n = std::fs::read_to_string(&f).unwrap().lines().count();
        assert!(
            n <= MAX_LINES,
            "{} has {n} lines (limit {MAX_LINES}): split it",
            f.display()
        );
    }
}

#[test]
fn pure_crates_do_no_io() {
    for c in crates() {
        let manifest = std::fs::read_to_string(c.join("Cargo.toml")).unwrap();
        if !manifest.contains("[package.metadata.herd]\npure = true") {
            continue;
        }
        let mut files = Vec::new();
        rust_files(&c.join("src"), &mut files);
        for f in files {
            let text = std::fs::read_to_string(&f).unwrap();
            // Unit tests may touch files; the rule is for the code itself.
            let code = text.split("#[cfg(test)]").next().unwrap();
            for bad in IMPURE {
                assert!(
                    !code.contains(bad),
                    "{} is in a pure crate but uses {bad}",
                    f.display()
                );
            }
        }
    }
}

/// The module a file is, as a path from its crate root (`[]` for the root).
fn module_of(src: &Path, file: &Path) -> Vec<String> {
    let rel = file.strip_prefix(src).unwrap().with_extension("");
    let mut parts: Vec<String> = rel.iter().map(|p| p.to_string_lossy().into_owned()).collect();
    if matches!(parts.last().map(String::as_str), Some("mod" | "lib" | "main")) {
        parts.pop();
    }
    parts
}

/// The paths a file's code names through `crate::` and `super::`, as
/// module paths from the crate root (groups `{a, b::c}` expanded one level).
fn named_paths(code: &str, me: &[String], is_dir_module: bool) -> Vec<Vec<String>> {
    let ident = |s: &str| -> Vec<String> {
        s.split("::")
            .map(str::trim)
            .take_while(|p| !p.is_empty() && p.chars().all(|c| c.is_alphanumeric() || c == '_'))
            .map(String::from)
            .collect()
    };
    let mut out = Vec::new();
    for line in code.lines().filter(|l| !l.trim_start().starts_with("//")) {
        for (prefix, base) in [
            ("crate::", Vec::new()),
            ("super::", {
                // `super` of a file module is its parent; of a dir module
                // (mod.rs), the parent of the directory.
                let mut b = me.to_vec();
                if !is_dir_module || !b.is_empty() {
                    b.pop();
                }
                b
            }),
        ] {
            for (i, _) in line.match_indices(prefix) {
                if prefix == "crate::" && line[..i].ends_with("super::") {
                    continue;
                }
                let rest = &line[i + prefix.len()..];
                let heads: Vec<String> = if let Some(group) = rest.strip_prefix('{') {
                    let end = group.find('}').unwrap_or(group.len());
                    group[..end].split(',').map(|s| s.trim().to_string()).collect()
                } else {
                    let end = rest
                        .find(|c: char| !(c.is_alphanumeric() || c == '_' || c == ':'))
                        .unwrap_or(rest.len());
                    vec![rest[..end].to_string()]
                };
                for h in heads {
                    let mut p = base.clone();
                    p.extend(ident(&h));
                    out.push(p);
                }
            }
        }
    }
    out
}

#[test]
fn no_file_imports_loop_within_a_crate() {
    // A loop between two files of one crate means neither can be read,
    // changed or moved without the other; the crate root (lib.rs) only
    // declares and re-exports, so edges to it do not count.
    let mut loops = Vec::new();
    for c in crates() {
        let src = c.join("src");
        let mut files = Vec::new();
        rust_files(&src, &mut files);
        let modules: Vec<Vec<String>> = files.iter().map(|f| module_of(&src, f)).collect();
        let mut edges: Vec<(usize, usize)> = Vec::new();
        for (i, f) in files.iter().enumerate() {
            let text = std::fs::read_to_string(f).unwrap();
            let code = text.split("#[cfg(test)]").next().unwrap();
            let dir_module = f.file_name().is_some_and(|n| n == "mod.rs");
            for path in named_paths(code, &modules[i], dir_module) {
                // The longest module the path starts with.
                let target = (0..modules.len())
                    .filter(|&j| !modules[j].is_empty() && path.starts_with(&modules[j]))
                    .max_by_key(|&j| modules[j].len());
                if let Some(j) = target.filter(|&j| j != i && !modules[i].starts_with(&modules[j])) {
                    edges.push((i, j));
                }
            }
        }
        for &(a, b) in &edges {
            // A two-file loop, or a longer one through a third file.
            let reach = |from: usize, to: usize| {
                let mut seen = vec![false; files.len()];
                let mut stack = vec![from];
                while let Some(x) = stack.pop() {
                    if x == to {
                        return true;
                    }
                    if !std::mem::replace(&mut seen[x], true) {
                        stack.extend(edges.iter().filter(|e| e.0 == x).map(|e| e.1));
                    }
                }
                false
            };
            if reach(b, a) {
                let name = |i: usize| {
                    files[i]
                        .strip_prefix(root())
                        .unwrap_or(&files[i])
                        .display()
                        .to_string()
                };
                loops.push(format!("{} -> {}", name(a), name(b)));
            }
        }
    }
    assert!(
        loops.is_empty(),
        "files that import each other (directly or through other files):\n{}",
        loops.join("\n")
    );
}
