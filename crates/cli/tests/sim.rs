//! `herd sim` and `herd policies` as a user runs them.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn herd(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_herd"))
        .args(args)
        .output()
        .expect("run herd")
}

fn scenarios() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../scenarios")
}

fn write(dir: &Path, name: &str, text: &str) -> String {
    let p = dir.join(name);
    std::fs::write(&p, text).unwrap();
    p.to_str().unwrap().to_string()
}

/// The JSON a successful run printed.
fn json_of(out: &Output, path: &Path) -> serde_json::Value {
    assert!(
        out.status.success(),
        "{}: {}",
        path.display(),
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

/// Every `key` of `v` is a finite number.
fn assert_finite(v: &serde_json::Value, keys: &[&str], path: &Path) {
    for key in keys {
        assert!(
            v[key].as_f64().is_some_and(f64::is_finite),
            "{}: {key}",
            path.display()
        );
    }
}

const GOOD: &str = "[machine]\nsynthetic = \"core:2\"\n[[job]]\nname = \"a\"\n[[job.phase]]\ninstructions = 1e8\nipc = 1.0\n";

#[test]
fn every_shipped_scenario_runs_and_compares_against_linux() {
    let mut ran = 0;
    for entry in std::fs::read_dir(scenarios()).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_none_or(|e| e != "toml") {
            continue;
        }
        if std::fs::read_to_string(&path).unwrap().contains("\n[cluster]") {
            // A cluster scenario (S2): Slurm's order only, which is cheap
            // even in a debug build at 1,000 nodes; crates/sim/tests/s2.rs
            // checks the model's placement.
            let out = herd(&["sim", path.to_str().unwrap(), "--json", "--policy", "slurm"]);
            let doc = json_of(&out, &path);
            let p = &doc["placements"][0];
            assert_eq!(p["placement"], "slurm");
            assert_eq!(
                p["jobs"].as_array().unwrap().len(),
                doc["jobs"].as_array().unwrap().len()
            );
            assert_eq!(p["unconverged_solves"], 0, "{}", path.display());
            assert_finite(
                p,
                &[
                    "run_mean_s",
                    "makespan_s",
                    "node_bw_mean_gbps",
                    "node_bw_std_gbps",
                ],
                &path,
            );
            ran += 1;
            continue;
        }
        // One run each: S1's learning scenarios' 40 runs are for release builds.
        let out = herd(&[
            "sim",
            path.to_str().unwrap(),
            "--json",
            "--no-timing",
            "--runs",
            "1",
        ]);
        let doc = json_of(&out, &path);
        let policies = doc["policies"].as_array().unwrap();
        assert_eq!(policies[0]["name"], "linux", "{}", path.display());
        for p in policies {
            assert_finite(
                p,
                &[
                    "makespan_s",
                    "throughput",
                    "energy_j",
                    "avg_power_w",
                    "migrations",
                ],
                &path,
            );
            for j in p["jobs"].as_array().unwrap() {
                assert!(j["turnaround_s"].as_f64().is_some() && j["slowdown"].as_f64().is_some());
            }
        }
        ran += 1;
    }
    assert!(ran >= 4);
}

#[test]
fn json_is_byte_identical_across_runs_without_timing() {
    let path = scenarios().join("smt-mix.toml");
    let args = [
        "sim",
        path.to_str().unwrap(),
        "--json",
        "--no-timing",
        "--seed",
        "3",
    ];
    let (a, b) = (herd(&args), herd(&args));
    assert!(a.status.success());
    assert_eq!(a.stdout, b.stdout);
    // With timing on, overhead is measured: a number, not null.
    let timed = herd(&["sim", path.to_str().unwrap(), "--json"]);
    let doc: serde_json::Value = serde_json::from_slice(&timed.stdout).unwrap();
    assert!(doc["policies"][1]["decision_overhead_pct"].as_f64().is_some());
}

/// Runs made at once print what runs made one by one print: the JSON
/// byte for byte, and `--explain`'s plans and notes in the policies' order
/// (each run notes its own as it goes, in whatever order they finish).
#[test]
fn runs_made_at_once_print_what_runs_made_in_turn_print() {
    let path = scenarios().join("s3-numa2-hd1.toml");
    let path = path.to_str().unwrap();
    for extra in [&["--json"][..], &["--explain"][..]] {
        let with =
            |jobs: &str| sim_at_once(path, jobs, &[&["--seed", "1", "--seed", "2"][..], extra].concat());
        let one = with("1");
        assert!(!one.is_empty());
        for jobs in ["2", "5"] {
            assert!(
                with(jobs) == one,
                "{extra:?} at --jobs {jobs} differs from --jobs 1"
            );
        }
    }
    let zero = herd(&["sim", path, "--jobs", "0"]);
    assert_eq!(zero.status.code(), Some(2), "--jobs 0 is a usage error");
}

/// `herd sim PATH --no-timing --jobs JOBS EXTRA...`'s output; it must succeed.
fn sim_at_once(path: &str, jobs: &str, extra: &[&str]) -> Vec<u8> {
    let mut args = vec!["sim", path, "--no-timing", "--jobs", jobs];
    args.extend_from_slice(extra);
    let out = herd(&args);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    out.stdout
}

/// A learning scenario's chains of runs (one per policy, `linux`'s first)
/// and a unit sweep's runs, made at once, print what they print made in
/// turn.
#[test]
fn learning_runs_and_sweeps_made_at_once_print_what_they_print_in_turn() {
    for (name, extra) in [
        ("s1-wl01.toml", &["--runs", "3", "--train-runs", "2"][..]),
        ("s0-ht-energy.toml", &[][..]),
    ] {
        let path = scenarios().join(name);
        let with = |jobs: &str| sim_at_once(path.to_str().unwrap(), jobs, &[&["--json"][..], extra].concat());
        let one = with("1");
        let text = String::from_utf8_lossy(&one);
        assert!(
            text.contains(if name.starts_with("s1") {
                "\"learning\": {"
            } else {
                "\"sweep\": {"
            }),
            "{name}: {text}"
        );
        assert!(with("3") == one, "{name} at --jobs 3 differs from --jobs 1");
    }
}

#[test]
fn table_report_and_explain() {
    let tmp = tempfile::tempdir().unwrap();
    let report = tmp.path().join("r.html");
    let path = scenarios().join("numa-two-socket.toml");
    let out = herd(&[
        "sim",
        path.to_str().unwrap(),
        "--report",
        report.to_str().unwrap(),
        "--explain",
    ]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let text = String::from_utf8(out.stdout).unwrap();
    for needle in [
        "makespan_s",
        "static:compact",
        "(",
        "x)",
        "slowdown reservoir",
        "Why",
        "compact: next hardware thread",
    ] {
        assert!(text.contains(needle), "missing {needle:?} in:\n{text}");
    }
    let html = std::fs::read_to_string(&report).unwrap();
    assert!(html.contains("<svg") && html.contains("Timeline") && html.contains("Makespan"));
    assert!(!html.contains("Consolidation"));
}

#[test]
fn several_seeds_end_with_their_means_and_completion_against_linux() {
    let path = scenarios().join("s3-uma-hd1.toml");
    let sim = |seeds: &[&str]| {
        let mut args = vec!["sim", path.to_str().unwrap(), "--policy", "amp:hass-s"];
        for s in seeds {
            args.extend(["--seed", s]);
        }
        let out = herd(&args);
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        String::from_utf8(out.stdout).unwrap()
    };
    let text = sim(&["1", "2", "3"]);
    let summary = text
        .split("means over 3 seeds")
        .nth(1)
        .unwrap_or_else(|| panic!("no summary in:\n{text}"));
    let row = summary
        .lines()
        .find(|l| l.starts_with("completion_vs_linux "))
        .expect("a completion row");
    let cells: Vec<f64> = row
        .split_whitespace()
        .skip(1)
        .map(|c| c.parse().unwrap())
        .collect();
    assert_eq!(cells.len(), 2, "{row}");
    assert_eq!(cells[0], 1.0);
    assert!(cells[1] < 1.0, "hass-s beats linux on HD1: {row}");
    // One seed: no summary.
    assert!(!sim(&["1"]).contains("means over"));
}

#[test]
fn the_consolidation_study_prints_its_service_and_draws_its_batch_work() {
    let tmp = tempfile::tempdir().unwrap();
    let report = tmp.path().join("c.html");
    let path = scenarios().join("s4-consolidation.toml");
    let out = herd(&[
        "sim",
        path.to_str().unwrap(),
        "--report",
        report.to_str().unwrap(),
    ]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let text = String::from_utf8(out.stdout).unwrap();
    for needle in [
        "slo_violations",
        "of 40 intervals (p99 <= 1 ms)",
        "batch_ginstr_per_s",
        "kv: load, cores and p99 latency per interval",
        "overload!",
        "note (linux): linux does not follow a core budget",
    ] {
        assert!(text.contains(needle), "missing {needle:?} in:\n{text}");
    }
    let html = std::fs::read_to_string(&report).unwrap();
    assert!(html.contains("Consolidation: batch work per interval"));
    assert!(html.contains("pack:palm (") && html.contains("missed the p99 objective"));
}

#[test]
fn bad_scenarios_name_file_line_and_field() {
    let tmp = tempfile::tempdir().unwrap();
    let cases = [
        (
            "unknown.toml",
            GOOD.replace("ipc = 1.0", "ipc = 1.0\nspeed = 3"),
            ":8",
            "speed",
        ),
        (
            "negative.toml",
            GOOD.replace("name = \"a\"", "name = \"a\"\nthreads = -4"),
            ":5",
            "threads",
        ),
        ("nan.toml", GOOD.replace("ipc = 1.0", "ipc = nan"), ":7", "ipc"),
        (
            "pinned.toml",
            GOOD.replace(
                "name = \"a\"",
                "name = \"a\"\nthreads = 3\ncpus = \"0-1\"\npin_threads = true",
            ),
            ":7",
            "pin_threads",
        ),
        (
            "nomachine.toml",
            GOOD.replace("[machine]\nsynthetic = \"core:2\"\n", ""),
            "",
            "machine",
        ),
        (
            "badspec.toml",
            GOOD.replace("core:2", "core:0"),
            ":2",
            "machine.synthetic",
        ),
        (
            "greedy.toml",
            GOOD.replace("ipc = 1.0", "ipc = 1.0\nbw_gbps = 40"),
            ":8",
            "bw_gbps",
        ),
        (
            "nocpu.toml",
            GOOD.replace("name = \"a\"", "name = \"a\"\ncpus = \"7\""),
            ":5",
            "cpus",
        ),
        (
            "policy.toml",
            format!("policies = [\"nope\"]\n{GOOD}"),
            "",
            "policies",
        ),
    ];
    for (name, text, line, field) in cases {
        let path = write(tmp.path(), name, &text);
        let out = herd(&["sim", &path]);
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{name}: {err}");
        assert!(
            err.contains(&format!("{path}{line}")),
            "{name}: file and line in {err}"
        );
        assert!(err.contains(field), "{name}: field {field} in {err}");
        assert_eq!(err.lines().count(), 1, "{name}: one line: {err}");
        assert!(!err.contains("panicked"));
    }
    let out = herd(&["sim", tmp.path().join("missing.toml").to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(2));
    let good = write(tmp.path(), "good.toml", GOOD);
    let out = herd(&["sim", &good, "--policy", "static:compact:places=sockets"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("expected one of threads, cores"));
}

#[test]
fn policies_lists_every_policy_with_parameters() {
    let out = herd(&["policies"]);
    let text = String::from_utf8(out.stdout).unwrap();
    for needle in [
        "linux",
        "static:compact",
        "static:scatter",
        "places=threads (default)",
    ] {
        assert!(text.contains(needle), "{text}");
    }
    let json: serde_json::Value = serde_json::from_slice(&herd(&["policies", "--json"]).stdout).unwrap();
    assert!(
        json.as_array()
            .unwrap()
            .iter()
            .any(|p| p["name"] == "static:scatter")
    );
}

#[test]
fn cluster_scenarios_compare_placements_and_name_bad_fields() {
    let path = scenarios().join("s2-cluster.toml");
    let out = herd(&["sim", path.to_str().unwrap(), "--explain"]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let text = String::from_utf8_lossy(&out.stdout);
    for want in [
        "one-per-node",
        "worst",
        "numa:model",
        "mean vs worst",
        "T_cont/T_clean",
        "std GB/s",
    ] {
        assert!(text.contains(want), "{want}: {text}");
    }
    let tmp = tempfile::tempdir().unwrap();
    let head = "[cluster]\nnodes = 2\nmachine = \"package:2 numa:1 core:4\"\n";
    let cases = [
        (
            format!("{head}[[job]]\nname = \"a\"\nthreads = 4\nsolo_time_s = 10\nbw_gbps = 900\n"),
            ":8: field 'job 'a'.bw_gbps'",
            "at most",
        ),
        (
            format!("{head}[[job]]\nname = \"a\"\nthreads = 40\nsolo_time_s = 10\nbw_gbps = 1\n"),
            "field 'job 'a'.threads'",
            "8 CPUs",
        ),
        (
            format!(
                "selectors = [\"fifo\"]\n{head}[[job]]\nname = \"a\"\nthreads = 4\nsolo_time_s = 10\nbw_gbps = 1\n"
            ),
            "field 'selectors'",
            "unknown placement 'fifo'",
        ),
        (head.to_string(), "field 'job'", "no [[job]]"),
        (
            format!(
                "{head}[stream]\njobs = 3\ninterarrival_s = 1\nthreads = [2]\nsolo_time_s = [1, 2]\nbw_gbps = [3, 1]\n"
            ),
            "field 'stream.bw_gbps'",
            "[low, high]",
        ),
    ];
    for (i, (text, field, why)) in cases.iter().enumerate() {
        let f = write(tmp.path(), &format!("c{i}.toml"), text);
        let out = herd(&["sim", &f]);
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{text}: {err}");
        assert!(err.contains(field) && err.contains(why), "{text}: {err}");
    }
    let f = write(
        tmp.path(),
        "ok.toml",
        &cases[1].0.replace("threads = 40", "threads = 4"),
    );
    let out = herd(&["sim", &f, "--runs", "3"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("cluster scenario"));
}

#[test]
fn plot_draws_a_figure_from_json_and_names_bad_input() {
    let tmp = tempfile::tempdir().unwrap();
    let fig = tmp.path().join("fig.json");
    std::fs::write(
        &fig,
        r#"{"title": "t", "y_desc": "completion vs linux (x)", "reference": 1.0,
            "series": ["a", "b"],
            "panels": [{"name": "UMA", "groups": [["HD1", [0.9, null]], ["LD1", [1.1, 0.95]]]}]}"#,
    )
    .unwrap();
    let out = herd(&["plot", fig.to_str().unwrap()]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let svg = String::from_utf8(out.stdout).unwrap();
    assert!(svg.starts_with("<svg") && svg.contains("LD1") && svg.contains("completion vs linux (x)"));
    std::fs::write(&fig, r#"{"title": "t"}"#).unwrap();
    let bad = herd(&["plot", fig.to_str().unwrap()]);
    let err = String::from_utf8_lossy(&bad.stderr);
    assert_eq!(bad.status.code(), Some(2), "{err}");
    assert!(err.contains("fig.json") && err.contains("missing field"), "{err}");
}

/// Inputs whose cost would run away are refused up front, in well under a
/// second, naming the field and the bound (issue 25: 10^6 jobs were killed
/// by the kernel at 24 GB; `period_ms = 1e-9` spun with no output).
#[test]
fn runaway_scenarios_are_refused_at_once_with_the_bound() {
    let tmp = tempfile::tempdir().unwrap();
    let cases = [
        (
            "copies",
            GOOD.replace("name = \"a\"", "name = \"a\"\ncopies = 1000000"),
            "10000",
        ),
        (
            "threads",
            GOOD.replace("name = \"a\"", "name = \"a\"\nthreads = 4000000000"),
            "100000",
        ),
        (
            "arrival",
            GOOD.replace("name = \"a\"", "name = \"a\"\narrival_s = 1e30"),
            "periods",
        ),
        ("period", format!("period_ms = 1e-9\n{GOOD}"), "at least"),
        ("work", GOOD.replace("1e8", "1e300"), "periods"),
    ];
    for (name, text, bound) in cases {
        let path = write(tmp.path(), &format!("{name}.toml"), &text);
        let started = std::time::Instant::now();
        let out = herd(&["sim", &path]);
        let took = started.elapsed();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{name}: {err}");
        assert!(err.contains(bound), "{name}: {err}");
        assert!(took < std::time::Duration::from_secs(1), "{name}: {took:?}");
    }
}
