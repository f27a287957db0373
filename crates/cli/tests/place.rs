//! `herd place`: the node a new job should run on, by S2's model.

use std::process::{Command, Output};

fn herd(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_herd"))
        .args(args)
        .env("XDG_DATA_HOME", "/nonexistent")
        .output()
        .expect("run herd")
}

const CLUSTER: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../../examples/cluster.toml");

fn choice(args: &[&str]) -> serde_json::Value {
    let mut all = vec!["place", CLUSTER, "--json"];
    all.extend_from_slice(args);
    let out = herd(&all);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    serde_json::from_slice(&out.stdout).unwrap()
}

#[test]
fn a_memory_heavy_job_avoids_the_memory_heavy_node_and_a_compute_job_barely_cares() {
    let heavy = choice(&["--threads", "8", "--hint", "high"]);
    assert_eq!(heavy["choice"]["node"], 1, "{heavy}");
    let scores = heavy["choice"]["scores"].as_array().unwrap();
    let ratio = |i: usize| scores[i]["slowdown_ratio"].as_f64().unwrap();
    assert!(ratio(0) > 1.2 && ratio(1) < 1.05, "{heavy}");
    assert_eq!(scores[2]["fits"], false, "n3 is full");
    let light = choice(&["--threads", "8", "--hint", "low"]);
    let scores = light["choice"]["scores"].as_array().unwrap();
    for s in &scores[..2] {
        assert!(s["slowdown_ratio"].as_f64().unwrap() < 1.02, "{light}");
    }
    // Slurm's order takes the first node with room, whatever runs there.
    assert_eq!(
        choice(&["--threads", "8", "--hint", "high", "--selector", "slurm"])["choice"]["node"],
        0
    );
    // Nowhere to go is an answer, not an error.
    let none = choice(&["--threads", "16", "--bw-gbps", "5"]);
    assert!(none["choice"]["node"].is_null());
    assert!(
        none["choice"]["reason"]
            .as_str()
            .unwrap()
            .contains("no node has 16 free CPUs")
    );
}

#[test]
fn the_table_explains_and_bad_input_is_exit_2() {
    let out = herd(&[
        "place",
        CLUSTER,
        "--threads",
        "8",
        "--program",
        "/opt/new-code --size 3",
    ]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(
        text.contains("T_cont/T_clean") && text.contains("no profile and no history"),
        "{text}"
    );
    let tmp = tempfile::tempdir().unwrap();
    let bad = tmp.path().join("bad.toml");
    std::fs::write(&bad, "machine = \"package:2 numa:1 core:4\"\n[[node]]\nname = \"n1\"\n[[node.job]]\nname = \"x\"\nthreads_per_numa = [4, 4]\nhint = \"high\"\nbw_gbps = 3\n").unwrap();
    let twice = tmp.path().join("twice.toml");
    std::fs::write(
        &twice,
        "machine = \"package:2 numa:1 core:4\"\n[[node]]\nname = \"n1\"\n[[node]]\nname = \"n1\"\n",
    )
    .unwrap();
    for (args, want) in [
        (
            vec!["place", CLUSTER, "--threads", "8"],
            "--bw-gbps, --hint or --program",
        ),
        (
            vec!["place", CLUSTER, "--threads", "40", "--hint", "low"],
            "more than a node's 16 CPUs",
        ),
        (
            vec!["place", CLUSTER, "--threads", "8", "--bw-gbps", "0"],
            "must be positive",
        ),
        (
            vec![
                "place",
                CLUSTER,
                "--threads",
                "8",
                "--hint",
                "low",
                "--selector",
                "x",
            ],
            "unknown selector",
        ),
        (
            vec!["place", "/nonexistent.toml", "--threads", "8", "--hint", "low"],
            "/nonexistent.toml",
        ),
        (
            vec!["place", bad.to_str().unwrap(), "--threads", "2", "--hint", "low"],
            "exactly one of bw_gbps, hint, program",
        ),
        (
            vec![
                "place",
                twice.to_str().unwrap(),
                "--threads",
                "2",
                "--hint",
                "low",
            ],
            "node n1 is listed twice",
        ),
    ] {
        let out = herd(&args);
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
        assert!(err.contains(want), "{args:?}: {err}");
    }
}
