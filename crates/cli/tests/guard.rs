//! The guard, live. Alone in its test binary: cargo runs binaries one at
//! a time, so no other test's programs take the second CPU that the
//! crowded program is denied (with the machine busy, crowding costs
//! nothing and there is nothing to catch).

mod common;
use common::herd;

/// `herd run` of a two-thread barrier program (`phases` rounds) crowded
/// onto one CPU by `static:compact:cpus=1`, with `extra` flags.
fn crowded(extra: &[&str], phases: &str) -> (bool, String) {
    let barrier = concat!(env!("CARGO_MANIFEST_DIR"), "/../../target/workloads/barrier");
    let out = herd()
        .args(["run", "--policy", "static:compact:cpus=1", "--period-ms", "50"])
        .args(extra)
        .args([
            "--",
            barrier,
            "--threads",
            "2",
            "--mode",
            "block",
            "--phases",
            phases,
        ])
        .output()
        .unwrap();
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// The guard, live: a placement that crowds both threads of a program onto
/// one CPU (`static:compact:cpus=1`) halves its progress; the first probe
/// sees it from CPU time alone (no counters here) and hands the program
/// back to the kernel, and the summary and trace say so.
#[test]
fn the_guard_hands_back_a_program_a_policy_crowds_onto_one_cpu() {
    if std::thread::available_parallelism().unwrap().get() < 2 {
        return; // Nothing to crowd.
    }
    let dir = tempfile::tempdir().unwrap();
    let trace = dir.path().join("t.jsonl");
    // ~2.3 s alone on the 2-CPU VM; crowded, twice that.
    let (ok, err) = crowded(&["--trace", trace.to_str().unwrap()], "1000");
    assert!(ok, "{err}");
    assert!(
        err.contains("backed off 1 time(s): the kernel had the workload back at the end"),
        "{err}"
    );
    let lines = common::json_lines(&trace);
    let notes: Vec<&str> = lines.iter().filter_map(|l| l["guard"].as_str()).collect();
    assert!(
        notes.iter().any(|n| n.starts_with("guard: backed off")),
        "{notes:?}"
    );
    // With the guard off the crowding stays to the end.
    let (ok, err) = crowded(&["--guard", "off"], "200");
    assert!(ok && !err.contains("guard:"), "{err}");
}
