//! The profile database's S1 side on this machine: `herd calibrate` stores
//! a peak bandwidth, runs and batches learn profiles into the database and
//! start from them, and `herd db forget|export` manage what it holds.

use std::path::Path;
use std::process::{Command, Output};

fn herd(db: &Path, args: &[&str]) -> Output {
    let mut c = Command::new(env!("CARGO_BIN_EXE_herd"));
    c.env("XDG_DATA_HOME", db.parent().unwrap());
    // --db right after the subcommand: before any `--` that ends herd's flags.
    c.arg(args[0])
        .args(["--db", db.to_str().unwrap()])
        .args(&args[1..]);
    c.output().unwrap()
}

fn json(out: &Output) -> serde_json::Value {
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    serde_json::from_slice(&out.stdout).unwrap()
}

#[test]
fn calibrate_stores_a_peak_that_export_shows() {
    let tmp = tempfile::tempdir().unwrap();
    let db = tmp.path().join("herd.db");
    let quick = ["--rounds", "2", "--round-s", "0.05", "--buffer-mib", "8"];
    let out = herd(&db, &[&["calibrate", "--json"][..], &quick].concat());
    let v = json(&out);
    let peak = v["peak_btr"].as_f64().unwrap();
    assert!(peak > 0.16, "{v}");
    assert_eq!(v["probe"]["rounds_btr"].as_array().unwrap().len(), 2);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("round 2/2"), "progress: {stderr}");
    let export = json(&herd(&db, &["db", "export"]));
    let stored = |name: &str| {
        export["calibrations"]
            .as_array()
            .unwrap()
            .iter()
            .find(|c| c["name"] == name)
            .and_then(|c| c["value"].as_f64())
    };
    assert_eq!(stored("peak_btr"), Some(peak));
    // Two CPUs busy against one (issue 26): on siblings S0's sigma, on
    // separate cores (this VM) the pair's own measure.
    if let Some(pair) = v["cpu_pair"].as_object() {
        let name = if pair["siblings"] == true {
            "smt_sigma"
        } else {
            "core_pair_sigma"
        };
        let sigma = pair["sigma"].as_f64().unwrap();
        assert!((0.0..=1.0).contains(&sigma), "{v}");
        assert_eq!(stored(name), Some(sigma));
    }
    assert_eq!(export["schema_version"], 4);
    // --no-store measures without touching the database.
    let other = tmp.path().join("other.db");
    json(&herd(
        &other,
        &[&["calibrate", "--json", "--no-store"][..], &quick].concat(),
    ));
    assert!(!other.exists());
}

#[test]
fn bad_calibrate_flags_are_exit_2() {
    let tmp = tempfile::tempdir().unwrap();
    let db = tmp.path().join("herd.db");
    for bad in [
        &["calibrate", "--rounds", "0"][..],
        &["calibrate", "--round-s", "-1"],
        &["calibrate", "--round-s", "nan"],
        &["calibrate", "--buffer-mib", "0"],
    ] {
        let out = herd(&db, bad);
        assert_eq!(out.status.code(), Some(2), "{bad:?}");
        assert!(String::from_utf8_lossy(&out.stderr).contains("--"), "{bad:?}");
    }
}

/// Whether every program of a `herd db export` has a profile learned from `runs` runs.
fn learned_runs(export: &serde_json::Value) -> Vec<(String, u64)> {
    export["programs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| {
            (
                p["program"].as_str().unwrap().to_string(),
                p["profile"]["runs"].as_u64().unwrap(),
            )
        })
        .collect()
}

#[test]
fn batches_and_runs_learn_into_the_database_and_forget_removes_it() {
    let tmp = tempfile::tempdir().unwrap();
    let db = tmp.path().join("herd.db");
    let file = tmp.path().join("two.toml");
    std::fs::write(
        &file,
        "[[program]]\nname = \"a\"\ncmd = [\"sleep\", \"0.2\"]\ncopies = 2\n\
         [[program]]\nname = \"b\"\ncmd = [\"sh\", \"-c\", \"sleep 0.1\"]\n",
    )
    .unwrap();
    let logs = tmp.path().join("logs");
    let out = herd(
        &db,
        &[
            "batch",
            file.to_str().unwrap(),
            "--policy",
            "bw:iabw",
            "--repeat",
            "2",
            "--logs",
            logs.to_str().unwrap(),
        ],
    );
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let text = String::from_utf8_lossy(&out.stdout);
    // Not calibrated here: the batch says what that costs.
    assert!(text.contains("herd calibrate"), "{text}");
    let export = json(&herd(&db, &["db", "export"]));
    let learned = learned_runs(&export);
    // Two copies of sleep share one profile: two runs of the batch, two
    // copies each, four runs learned. The keys are resolved executables.
    assert_eq!(learned.len(), 2, "{learned:?}");
    let sleep = learned.iter().find(|(k, _)| k.ends_with("sleep 0.2")).unwrap();
    assert!(sleep.0.starts_with('/'), "{sleep:?}");
    assert_eq!(sleep.1, 4);
    assert!(
        learned
            .iter()
            .any(|(k, n)| k.ends_with("sh -c sleep 0.1") && *n == 2)
    );
    // A herd run of the same program continues the same profile.
    let out = herd(&db, &["run", "--", "sleep", "0.2"]);
    assert!(out.status.success());
    let export = json(&herd(&db, &["db", "export"]));
    let learned = learned_runs(&export);
    assert!(
        learned.iter().any(|(k, n)| k.ends_with("sleep 0.2") && *n == 5),
        "{learned:?}"
    );
    // db show prints the profile; forget removes runs and profile.
    let out = herd(&db, &["db", "show", "sleep 0.2"]);
    let shown = String::from_utf8_lossy(&out.stdout);
    assert!(shown.contains("learned profile: 5 runs"), "{shown}");
    let forgot = json(&herd(&db, &["db", "--json", "forget", "sleep 0.2"]));
    assert_eq!(
        (forgot["runs"].as_u64(), forgot["profile"].as_bool()),
        (Some(1), Some(true))
    );
    let export = json(&herd(&db, &["db", "export"]));
    assert_eq!(learned_runs(&export).len(), 1);
    let out = herd(&db, &["db", "forget", "sleep 0.2"]);
    assert_eq!(out.status.code(), Some(2));
}

#[test]
fn export_writes_a_file_or_names_the_one_it_cannot() {
    let tmp = tempfile::tempdir().unwrap();
    let db = tmp.path().join("herd.db");
    assert!(herd(&db, &["run", "--", "true"]).status.success());
    let out_file = tmp.path().join("export.json");
    let out = herd(&db, &["db", "export", "--out", out_file.to_str().unwrap()]);
    assert!(out.status.success());
    let v: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&out_file).unwrap()).unwrap();
    assert_eq!(v["programs"][0]["runs"].as_array().unwrap().len(), 1);
    let out = herd(&db, &["db", "export", "--out", "/nonexistent-dir/x.json"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("/nonexistent-dir/x.json"));
}

/// Ten runs of one program at once on a new database: every run is
/// recorded and every one counts in the program's profile. Before, the
/// schema's creation raced ("table run already exists; learning from this
/// run alone") and each run overwrote the profile it had read at its start,
/// which then said one run.
#[test]
fn ten_concurrent_runs_all_count_in_the_profile() {
    let tmp = tempfile::tempdir().unwrap();
    let db = tmp.path().join("herd.db");
    let children: Vec<_> = (0..10)
        .map(|_| {
            Command::new(env!("CARGO_BIN_EXE_herd"))
                .env("XDG_DATA_HOME", tmp.path())
                .args(["run", "--db", db.to_str().unwrap(), "--", "sleep", "0.3"])
                .stderr(std::process::Stdio::piped())
                .spawn()
                .unwrap()
        })
        .collect();
    for c in children {
        let out = c.wait_with_output().unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success() && !err.contains("warning"), "{err}");
    }
    let export = json(&herd(&db, &["db", "export"]));
    let learned = learned_runs(&export);
    assert_eq!(learned.len(), 1, "{learned:?}");
    assert_eq!(learned[0].1, 10, "{learned:?}");
    assert_eq!(export["programs"][0]["runs"].as_array().unwrap().len(), 10);
}
