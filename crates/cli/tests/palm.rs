//! PALM's plan on this machine: lanes (SCHED_FIFO) only under
//! `--realtime`, the beats between barriers learned and remembered.

mod common;
use common::{herd, realtime_allowed};

/// The barrier benchmark (it beats 16 times a phase).
const BENCH: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../../target/workloads/barrier-hb");

/// Runs `herd run ARGS --policy POLICY -- BENCH` with 3 spinning threads,
/// TOTAL work and PHASES phases; it must succeed. Its stderr.
fn run_ok(args: &[&std::ffi::OsStr], policy: &str, total: &str, phases: &str) -> String {
    let job = [
        "--threads",
        "3",
        "--total",
        total,
        "--phases",
        phases,
        "--mode",
        "spin",
    ];
    let out = herd()
        .arg("run")
        .args(args)
        .args(["--policy", policy, "--", BENCH])
        .args(job)
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(out.status.success(), "{err}");
    err
}

/// PALM with a plan (`barrier_beats`) puts threads in lanes (SCHED_FIFO)
/// only when herd's loop runs above them (`--realtime`), and says so when
/// it cannot; under `--realtime` the trace shows front and back lanes.
#[test]
fn palm_with_a_plan_uses_lanes_only_under_realtime() {
    let tmp = tempfile::tempdir().unwrap();
    let trace = tmp.path().join("t.jsonl");
    let policy = "pack:palm:cores=2,barrier_beats=16";
    let err = run_ok(&[], policy, "1e6", "100");
    assert!(err.contains("run with --realtime; they were ignored"), "{err}");
    if !realtime_allowed() {
        eprintln!("skipped the --realtime half: SCHED_FIFO is not allowed here");
        return;
    }
    let err = run_ok(
        &["--realtime".as_ref(), "--trace".as_ref(), trace.as_os_str()],
        policy,
        "1e6",
        "100",
    );
    assert!(err.contains("lane changes") && !err.contains("ignored"), "{err}");
    let text = std::fs::read_to_string(&trace).unwrap();
    assert!(text.contains(r#""lane":"front""#) && text.contains(r#""lane":"back""#));
}

/// PALM by default learns the beats between barriers from the heartbeats
/// and runs its plan only where lanes apply: without `--realtime` it says
/// the plan needs them and changes no lane (so nothing is ignored). What it
/// learned goes into the program's profile, so the next run (here under
/// `--realtime`) plans from its start, and says so.
#[test]
fn palm_learns_the_barriers_runs_its_plan_only_under_realtime_and_remembers() {
    let tmp = tempfile::tempdir().unwrap();
    let db = tmp.path().join("herd.db");
    let policy = "pack:palm:cores=2";
    let first = ["--db".as_ref(), db.as_os_str(), "--explain".as_ref()];
    let err = run_ok(&first, policy, "2e6", "150");
    assert!(
        err.contains("16 beats between barriers, learned; the plan needs lanes"),
        "{err}"
    );
    assert!(!err.contains("lane changes") && !err.contains("ignored"), "{err}");
    let show = herd()
        .args(["db", "--db"])
        .arg(&db)
        .args(["show", "barrier-hb"])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&show.stdout);
    assert!(
        text.contains("16 heartbeats per thread between barriers"),
        "{text}"
    );
    if !realtime_allowed() {
        eprintln!("skipped the --realtime half: SCHED_FIFO is not allowed here");
        let err = run_ok(&first, policy, "2e6", "150");
        assert!(
            err.contains("16 beats between barriers, from earlier runs; the plan needs lanes"),
            "{err}"
        );
        return;
    }
    let second = [
        "--db".as_ref(),
        db.as_os_str(),
        "--explain".as_ref(),
        "--realtime".as_ref(),
    ];
    let err = run_ok(&second, policy, "2e6", "150");
    // From the earlier run once a few turns are in; on a loaded machine
    // (tests in parallel) the run may learn it itself first.
    assert!(
        err.contains("16 beats between barriers, from earlier runs; running the plan")
            || err.contains("16 beats between barriers, learned; running the plan"),
        "{err}"
    );
    assert!(err.contains("lane changes"), "{err}");
}
