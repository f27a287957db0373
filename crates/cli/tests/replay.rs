//! Parity on live runs (issue 24): traces recorded by `herd run --trace`
//! and `herd batch --trace` on real kernels (this 2-CPU VM, and an
//! emulated two-socket guest with SMT and two NUMA nodes; recorded by
//! `scripts/record-traces.py`, kept in `fixtures/traces/`) are replayed
//! through a fresh copy of each policy via the engine; every decision must
//! come out as it did live.

use std::path::{Path, PathBuf};

use herd_cli::trace;

fn herd() -> std::process::Command {
    std::process::Command::new(env!("CARGO_BIN_EXE_herd"))
}

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
    // The trace as written, and the fixture as kept, gzipped: read as it
    // is (it was refused as "not valid UTF-8").
    let [same, zipped] = [trace.clone(), dir.join("smt-spn.jsonl.gz")].map(|t| {
        let out = herd(&[t.to_str().unwrap(), "--input", xml.to_str().unwrap()]);
        assert_eq!(
            out.status.code(),
            Some(0),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        out
    });
    assert!(String::from_utf8_lossy(&same.stdout).contains("decisions the same"));
    assert_eq!(zipped.stdout, same.stdout);
    let other = herd(&[trace.to_str().unwrap(), "--synthetic", "core:2"]);
    assert_eq!(other.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&other.stdout).contains("first difference"));
    let bad = tmp.path().join("bad.jsonl");
    std::fs::write(&bad, "not json\n").unwrap();
    let refused = herd(&[bad.to_str().unwrap()]);
    assert_eq!(refused.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&refused.stderr).contains("bad.jsonl: line 1"));
}

/// `herd sim --from-trace` (issue 26): a recorded run becomes a scenario
/// holding the work the trace saw, and simulates. The barrier program's
/// main thread only waits: a helper, left out; its three workers' CPU
/// time is the scenario's work (IPC 1 at 2.5 GHz: no counters there).
#[test]
fn a_recorded_trace_becomes_a_scenario_with_the_work_it_saw() {
    let dir = tempfile::tempdir().unwrap();
    for (machine, policy) in [("host-2cpu", "linux"), ("guest-2s2c2t", "numa-model")] {
        let fixture = fixtures().join(machine);
        let text = read(&fixture.join(format!("{policy}.jsonl.gz")));
        let path = dir.path().join(format!("{machine}-{policy}.jsonl"));
        std::fs::write(&path, &text).unwrap();
        let out = dir.path().join(format!("{machine}-{policy}.toml"));
        let run = herd()
            .args(["sim", "--from-trace"])
            .arg(&path)
            .arg("--input")
            .arg(fixture.join("machine.xml"))
            .arg("--scenario-out")
            .arg(&out)
            .args(["--json", "--no-timing"])
            .output()
            .unwrap();
        assert!(run.status.success(), "{}", String::from_utf8_lossy(&run.stderr));
        // The CPU time per task the trace recorded.
        let runs = trace::parse(&text).unwrap();
        let mut cpu_s: std::collections::BTreeMap<u64, f64> = Default::default();
        for (s, _) in &runs[0].turns {
            for t in &s.tasks {
                *cpu_s.entry(t.id).or_default() += t.obs.cpu_time_ns as f64 * 1e-9;
            }
        }
        let busiest = cpu_s.values().copied().fold(0.0, f64::max);
        let workers: Vec<f64> = cpu_s.values().copied().filter(|&c| c >= 0.1 * busiest).collect();
        let scenario = std::fs::read_to_string(&out).unwrap();
        assert!(
            scenario.contains(&format!("threads = {}", workers.len())),
            "{scenario}"
        );
        let s = herd_sim::Scenario::parse(&scenario, "t", &|x| {
            herd_topo::Machine::from_path(Path::new(x)).map_err(|e| e.to_string())
        })
        .unwrap();
        let job = &s.jobs[0];
        let work_s: f64 =
            job.phases.iter().map(|p| p.instructions).sum::<f64>() * job.threads as f64 / (2.5e9);
        let seen: f64 = workers.iter().sum();
        assert!(
            (work_s - seen).abs() < 0.01 * seen,
            "{machine}: {work_s} s of work, {seen} s seen"
        );
        // Simulated: no sooner than the work over the CPUs it may use.
        let v: serde_json::Value = serde_json::from_slice(&run.stdout).unwrap();
        let makespan = v["policies"][0]["makespan_s"].as_f64().unwrap();
        let cpus = s.machine.cpus().len().min(job.threads as usize) as f64;
        assert!(
            makespan >= 0.99 * seen / cpus,
            "{machine}: {makespan} s for {seen} s of CPU on {cpus}"
        );
    }
}

#[test]
fn from_trace_refuses_what_is_no_trace_with_exit_2() {
    let dir = tempfile::tempdir().unwrap();
    let bad = dir.path().join("bad.jsonl");
    std::fs::write(&bad, "not json\n").unwrap();
    for path in [bad, dir.path().join("missing.jsonl")] {
        let run = herd().args(["sim", "--from-trace"]).arg(&path).output().unwrap();
        assert_eq!(
            run.status.code(),
            Some(2),
            "{}",
            String::from_utf8_lossy(&run.stderr)
        );
        let err = String::from_utf8_lossy(&run.stderr);
        assert!(err.contains(&path.display().to_string()), "{err}");
    }
    // A machine for a scenario that names its own is refused, not ignored.
    let scenario = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../scenarios/smt-mix.toml");
    let run = herd()
        .args(["sim", "--synthetic", "core:4"])
        .arg(&scenario)
        .output()
        .unwrap();
    assert_eq!(
        run.status.code(),
        Some(2),
        "{}",
        String::from_utf8_lossy(&run.stderr)
    );
}
