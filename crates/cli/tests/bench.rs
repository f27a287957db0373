//! A short run of the live A/B harness (`scripts/bench.py`) on a real
//! program (sysbench, which `make test` installs): it runs, alternates
//! policy and Linux, and reports a ratio with an interval and a figure;
//! and its rounds pool across runs; and `make run`'s demo, as the
//! Makefile states it, runs with two rounds.
//! The harness's figures themselves are measurements, not tests.

use std::path::{Path, PathBuf};
use std::process::Command;

/// The repository's root.
fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// `scripts/bench.py` about to run this build's herd.
fn bench_py() -> Command {
    let mut c = Command::new("python3");
    c.arg(root().join("scripts/bench.py"))
        .env("HERD", env!("CARGO_BIN_EXE_herd"));
    c
}

#[test]
fn the_bench_harness_runs_a_workload_a_b_and_reports_an_interval() {
    let tmp = tempfile::tempdir().unwrap();
    let (json, svg) = (tmp.path().join("b.json"), tmp.path().join("b.svg"));
    let out = bench_py()
        .args(["--workloads"])
        .arg(root().join("bench/smoke.toml"))
        .args(["--policy", "cosched:fair", "--repeat", "2", "--json"])
        .arg(&json)
        .arg("--svg")
        .arg(&svg)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(String::from_utf8_lossy(&out.stdout).contains("95% interval"));
    let rows: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    let row = &rows[0];
    assert_eq!(row["rounds"], 2);
    let (lo, r, hi) = (
        row["ratio_lo"].as_f64().unwrap(),
        row["ratio"].as_f64().unwrap(),
        row["ratio_hi"].as_f64().unwrap(),
    );
    assert!(lo <= r && r <= hi && r > 0.0, "{row}");
    assert!(std::fs::read_to_string(&svg).unwrap().contains("sysbench-cpu"));
    // Its rounds are kept, so runs can be pooled: the file twice is twice
    // the rounds, the same ratio.
    let pooled = tmp.path().join("p.json");
    let out = bench_py()
        .arg("--pool")
        .arg(&json)
        .arg("--pool")
        .arg(&json)
        .arg("--json")
        .arg(&pooled)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let pool: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&pooled).unwrap()).unwrap();
    assert_eq!(pool[0]["rounds"], 4);
    assert!((pool[0]["ratio"].as_f64().unwrap() - r).abs() < 1e-9, "{pool}");
    let bad = bench_py().args(["--repeat", "1"]).output().unwrap();
    assert!(!bad.status.success() && String::from_utf8_lossy(&bad.stderr).contains("--repeat"));
}

/// `make run`'s demo, as the Makefile runs it but with two rounds: the
/// workload it names exists and its programs (a build and a compressor,
/// which `make test` installs like `make run`) run A/B to a ratio. The
/// main job a new user sees must not rot unseen.
#[test]
fn make_runs_demo_runs_as_the_makefile_states_it() {
    let makefile = std::fs::read_to_string(root().join("Makefile")).unwrap();
    let line = makefile
        .lines()
        .skip_while(|l| !l.starts_with("run:"))
        .take_while(|l| !l.is_empty())
        .find(|l| l.contains("scripts/bench.py"))
        .expect("`make run` runs scripts/bench.py");
    let mut args: Vec<String> = line.split_whitespace().skip(2).map(String::from).collect();
    let at = args
        .iter()
        .position(|a| a == "--repeat")
        .expect("the demo states its rounds");
    args[at + 1] = "2".into();
    let out = bench_py().args(&args).current_dir(root()).output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{line}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        stdout.contains("95% interval") && stdout.contains("2 rounds"),
        "{stdout}"
    );
}
