//! Parity on live runs (issue 24): traces recorded by `herd run --trace`
//! and `herd batch --trace` on real kernels (this 2-CPU VM, and an
//! emulated two-socket guest with SMT and two NUMA nodes; recorded by
//! `scripts/record-traces.py`, kept in `fixtures/traces/`) are replayed
//! through a fresh copy of each policy via the engine; every decision must
//! come out as it did live.

use std::path::{Path, PathBuf};

use herd_cli::trace;

fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fixtures/traces")
}

/// A fixture's text (they are kept gzipped: a few kB each).
fn read(path: &Path) -> String {
    let mut text = String::new();
    std::io::Read::read_to_string(
        &mut flate2::read::GzDecoder::new(std::fs::File::open(path).unwrap()),
        &mut text,
    )
    .unwrap();
    text
}

/// Every policy family the fixtures must cover, on every machine.
const FAMILIES: [&str; 8] = ["linux", "static", "smt", "numa", "amp", "pack", "cosched", "bw"];

#[test]
fn recorded_live_runs_replay_to_the_same_decisions() {
    let mut machines = 0;
    for dir in std::fs::read_dir(fixtures()).unwrap().flatten().map(|e| e.path()) {
        let machine = herd_topo::Machine::from_path(&dir.join("machine.xml")).unwrap();
        let mut families = std::collections::BTreeSet::new();
        for file in std::fs::read_dir(&dir).unwrap().flatten().map(|e| e.path()) {
            if !file.to_string_lossy().ends_with(".jsonl.gz") {
                continue;
            }
            let text = read(&file);
            for run in trace::parse(&text).unwrap() {
                let (turns, mismatches) = trace::replay(&run, &machine).unwrap();
                assert!(
                    turns >= 5,
                    "{}: {turns} decisions: too short to show anything",
                    file.display()
                );
                assert!(
                    mismatches.is_empty(),
                    "{}: {} of {turns} decisions differ; first: {:?}",
                    file.display(),
                    mismatches.len(),
                    mismatches[0]
                );
                families.insert(run.header.policy.split(':').next().unwrap().to_string());
            }
        }
        for f in FAMILIES {
            assert!(
                families.contains(f),
                "{}: no trace of the {f} family",
                dir.display()
            );
        }
        machines += 1;
    }
    assert!(machines >= 2, "traces from this VM and a NUMA/SMT guest");
}

/// The comparison can fail: the same views under another policy, or a
/// recorded plan changed, are told apart.
#[test]
fn a_different_decision_is_caught() {
    let dir = fixtures().join("guest-2s2c2t");
    let machine = herd_topo::Machine::from_path(&dir.join("machine.xml")).unwrap();
    let text = read(&dir.join("static-compact.jsonl.gz"));
    let mut run = trace::parse(&text).unwrap().remove(0);
    run.header.policy = "static:scatter".into();
    let (_, mismatches) = trace::replay(&run, &machine).unwrap();
    assert!(
        !mismatches.is_empty(),
        "compact and scatter place differently on two sockets"
    );
    let mut run = trace::parse(&text).unwrap().remove(0);
    let placed = run
        .turns
        .iter_mut()
        .find(|(_, p)| !p["tasks"].as_array().unwrap().is_empty())
        .unwrap();
    placed.1["tasks"][0][1]["cpus"] = serde_json::json!([7]);
    let (_, mismatches) = trace::replay(&run, &machine).unwrap();
    assert_eq!(mismatches.len(), 1);
}

#[test]
fn traces_that_cannot_be_replayed_say_why() {
    let old = r#"{"t_s":0.1,"tasks":[],"placed":[]}"#;
    let e = trace::parse(old).unwrap_err().to_string();
    assert!(e.contains("line 1") && e.contains("before any header"), "{e}");
    let newer = r#"{"herd_trace":9,"policy":"linux","period_ns":1,"min_period_ns":1,"max_period_ns":1,"seed":0,"guard":false,"learning":null}"#;
    assert!(trace::parse(newer).unwrap_err().to_string().contains("format 9"));
    assert!(trace::parse("").unwrap_err().to_string().contains("no run"));
}

/// `herd replay`: 0 when every decision matches, 1 when one differs (here
/// a guest's trace replayed on a 2-CPU machine), 2 for a file that is not a
/// trace; never a panic, also when its reader goes away.
#[test]
fn herd_replay_says_whether_decisions_match_by_its_exit_code() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = fixtures().join("guest-2s2c2t");
    let trace = tmp.path().join("t.jsonl");
    std::fs::write(&trace, read(&dir.join("smt-spn.jsonl.gz"))).unwrap();
    let herd = |args: &[&str]| {
        std::process::Command::new(env!("CARGO_BIN_EXE_herd"))
            .arg("replay")
            .args(args)
            .output()
            .unwrap()
    };
    let xml = dir.join("machine.xml");
    let same = herd(&[trace.to_str().unwrap(), "--input", xml.to_str().unwrap()]);
    assert_eq!(
        same.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&same.stderr)
    );
    assert!(String::from_utf8_lossy(&same.stdout).contains("decisions the same"));
    let other = herd(&[trace.to_str().unwrap(), "--synthetic", "core:2"]);
    assert_eq!(other.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&other.stdout).contains("first difference"));
    let bad = tmp.path().join("bad.jsonl");
    std::fs::write(&bad, "not json\n").unwrap();
    let refused = herd(&[bad.to_str().unwrap()]);
    assert_eq!(refused.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&refused.stderr).contains("bad.jsonl: line 1"));
}
