//! The fuzzer's seeds and every input it ever crashed on (fuzz/regressions/,
//! one file per crash, first byte the format) through every parser of
//! herd's input (`herd_cli::fuzz::one`): no panic, and no input takes long.
//! The fuzzing itself is `make fuzz` (cargo-fuzz, nightly).

use std::path::Path;
use std::time::{Duration, Instant};

/// Time one input may take, in this test's debug build (release parses
/// the largest scenario in milliseconds).
const BOUND: Duration = Duration::from_secs(5);

fn files_in(dir: &Path) -> Vec<std::path::PathBuf> {
    let mut files: Vec<_> = std::fs::read_dir(dir)
        .map(|d| d.flatten().map(|e| e.path()).filter(|p| p.is_file()).collect())
        .unwrap_or_default();
    files.sort();
    files
}

fn check(what: &str, data: &[u8]) {
    let started = Instant::now();
    herd_cli::fuzz::one(data);
    if started.elapsed() > Duration::from_millis(200) {
        println!("{what}: {:?}", started.elapsed());
    }
    assert!(started.elapsed() < BOUND, "{what} took {:?}", started.elapsed());
}

#[test]
fn every_repository_input_through_every_parser() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let mut n = 0;
    for folder in ["scenarios", "examples", "integrations/systemd"] {
        for file in files_in(&root.join(folder)) {
            let text = std::fs::read(&file).unwrap();
            for (k, format) in herd_cli::fuzz::FORMATS.iter().enumerate() {
                // Cluster scenarios as themselves are read (and run) by
                // crates/sim/tests and crates/cli/tests/sim.rs; a 1000-node
                // one takes 20 s to derive in this debug build.
                if *format == "cluster-scenario" && text.windows(9).any(|w| w == b"[cluster]") {
                    continue;
                }
                let mut data = vec![k as u8];
                data.extend_from_slice(&text);
                check(&format!("{} as {format}", file.display()), &data);
                n += 1;
            }
        }
    }
    assert!(n > 100, "only {n} inputs: are scenarios/ and examples/ there?");
}

#[test]
fn every_input_the_fuzzer_crashed_on_is_handled() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fuzz/regressions");
    for file in files_in(&dir) {
        check(&file.display().to_string(), &std::fs::read(&file).unwrap());
    }
}
