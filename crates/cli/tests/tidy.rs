//! Repository hygiene that the compiler does not check by itself.
//!
//! - Every crate opts into the workspace lints, which deny missing docs, so
//!   every public item is documented.
//! - No source file grows past MAX_LINES: past that, split it.
//! - Crates marked pure (`[package.metadata.herd] pure = true`) do no I/O and
//!   read no clock: DESIGN.md's pure-core rule, checked by text.

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
