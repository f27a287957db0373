//! `herd batch` on this machine: co-scheduling keeps at most as many
//! programs running as there are CPUs, every program finishes, and neither
//! SIGINT nor SIGKILL of herd leaves a program stopped or a zombie behind.

mod common;
use common::{children_of, frozen, state_of};
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant};

use common::herd;

/// A batch of `n` single-threaded Python busy loops of `seconds` CPU time
/// each. Each says "started" in its log once Python has set up (from then
/// on a SIGINT is never lost: Python lost about 1 in 200 that came during
/// its start-up, here, with no herd involved).
fn batch(dir: &Path, n: usize, seconds: f64) -> PathBuf {
    let program = format!(
        "import time\\nprint('started', flush=True)\\nend = time.process_time() + {seconds}\\nwhile time.process_time() < end: pass\\nprint('done')"
    );
    let text = format!(
        "name = \"busy\"\n[[program]]\nname = \"busy\"\ncmd = [\"python3\", \"-c\", \"{program}\"]\ncopies = {n}\n"
    );
    let path = dir.join("busy.toml");
    std::fs::write(&path, text).unwrap();
    path
}

/// Whether this machine has a cgroup freezer herd can use; says so when not.
fn freezer_here() -> bool {
    let (_, pause) = common::mechanisms();
    if pause == "signals" {
        eprintln!("skipped: no cgroup freezer on this machine (herd doctor)");
    }
    pause != "signals"
}

/// Whether `pid` is waiting its turn: stopped by a signal (or the stop
/// sent), frozen (or freezing), or held before its start (herd's
/// trampoline, waiting on its pipe).
fn waiting(pid: i32) -> bool {
    state_of(pid) == Some('T')
        || herd_runtime::procfs::stop_pending(Path::new("/proc"), pid)
        || frozen(pid)
        || held(pid)
}

/// Whether `pid` is still herd's trampoline, not yet its program.
fn held(pid: i32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/cmdline")).is_ok_and(|c| c.contains("__exec-held"))
}

#[test]
fn programs_take_turns_stopped_by_signals_and_all_finish() {
    take_turns("signals");
}

#[test]
fn programs_take_turns_in_the_freezer_and_all_finish() {
    if freezer_here() {
        take_turns("freezer");
    }
}

/// Twice as many programs as CPUs under `--pause pause`.
fn take_turns(pause: &str) {
    let tmp = tempfile::tempdir().unwrap();
    let cpus = std::thread::available_parallelism().unwrap().get();
    let file = batch(tmp.path(), 2 * cpus, 0.6);
    let trace = tmp.path().join("trace.jsonl");
    let mut child = herd()
        .args([
            "batch",
            file.to_str().unwrap(),
            "--policy",
            &common::taking_turns(),
            "--period-ms",
            "50",
            // The mechanism under test, taking turns: the guard's probes
            // let every program run at once.
            "--guard",
            "off",
            "--trace",
            trace.to_str().unwrap(),
            "--json",
            "--pause",
            pause,
        ])
        .args(["--logs", tmp.path().join("logs").to_str().unwrap()])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // Sample the programs' states from /proc while the batch runs.
    let mut most_running = 0;
    // (pid, state (None with a stop pending), freezer state, held) of
    // each program when most ran.
    let mut seen_most = String::new();
    let mut samples = 0;
    while child.try_wait().unwrap().is_none() {
        // Two reads 2 ms apart that agree: a read taken while herd switches
        // programs (a stop signal in flight for microseconds) is discarded,
        // while a real excess, which lasts a whole 50 ms period, is caught.
        let pids = children_of(child.id());
        let read = || {
            pids.iter()
                .map(|&p| {
                    // A stop sent and not yet taken (herd's 50 ms wait for it
                    // can run out on a loaded machine) is no run: the process
                    // stops before it runs a line of its own.
                    let pending = herd_runtime::procfs::stop_pending(Path::new("/proc"), p);
                    let state = state_of(p).filter(|_| !pending);
                    (p, state, common::freezer_state(p), held(p))
                })
                .collect::<Vec<_>>()
        };
        let first = read();
        std::thread::sleep(Duration::from_millis(2));
        let second = read();
        if first == second {
            let running = first
                .iter()
                .filter(|(_, s, freezer, held)| {
                    matches!(s, Some('R') | Some('S') | Some('D'))
                        && freezer.is_none_or(|f| f == "THAWED")
                        && !held
                })
                .count();
            if running > most_running {
                most_running = running;
                seen_most = format!("{first:?}");
            }
            samples += 1;
        }
        std::thread::sleep(Duration::from_millis(7));
    }
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(samples > 20, "sampled the run");
    assert!(
        most_running <= cpus,
        "/proc saw {most_running} programs running at once: {seen_most}"
    );
    // herd's own trace agrees.
    let mut most_traced = 0;
    for v in common::json_lines(&trace) {
        most_traced = most_traced.max(v["running"].as_array().unwrap().len());
    }
    assert!(
        most_traced <= cpus,
        "the trace shows {most_traced} running at once"
    );
    let doc: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let mechanism = doc["runs"][0]["mechanism"].as_str().unwrap();
    let expected = if pause == "signals" {
        "pause=signals"
    } else {
        "freezer"
    };
    assert!(mechanism.contains(expected), "{mechanism}");
    let programs = doc["runs"][0]["programs"].as_array().unwrap();
    assert_eq!(programs.len(), 2 * cpus);
    assert!(
        programs.iter().all(|p| p["exit_code"] == 0),
        "all finished: {programs:?}"
    );
    let log = std::fs::read_to_string(programs[0]["log"].as_str().unwrap()).unwrap();
    assert_eq!(log.trim(), "started\ndone", "output goes to the log");
}

/// Kills herd with `signal` in the middle of a batch paused with `pause`;
/// returns herd's pid and the programs' pids.
fn kill_mid_batch(signal: i32, pause: &str) -> (u32, Vec<i32>) {
    let tmp = tempfile::tempdir().unwrap();
    let file = batch(tmp.path(), 4, 30.0);
    let mut child = herd()
        .args([
            "batch",
            file.to_str().unwrap(),
            "--policy",
            &common::taking_turns(),
            "--period-ms",
            "30",
            // Programs must be paused when the signal comes: no guard probe.
            "--guard",
            "off",
            "--pause",
            pause,
        ])
        .args(["--logs", tmp.path().join("logs").to_str().unwrap()])
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(tmp.path().join("herd.err")).unwrap())
        .spawn()
        .unwrap();
    // Every program past its start-up (the signal must not meet Python
    // setting up its handlers), and taking turns.
    let logs = tmp.path().join("logs");
    let deadline = Instant::now() + Duration::from_secs(10);
    while started(&logs) < 4 && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
    }
    assert_eq!(started(&logs), 4, "every program started");
    std::thread::sleep(Duration::from_millis(100));
    let pids = children_of(child.id());
    assert_eq!(pids.len(), 4, "the batch started");
    assert!(
        pids.iter().any(|&p| waiting(p)),
        "some programs were waiting their turn"
    );
    // SAFETY: plain kill.
    unsafe { libc::kill(child.id() as i32, signal) };
    let deadline = Instant::now() + Duration::from_secs(10);
    while child.try_wait().unwrap().is_none() && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
    }
    if child.try_wait().unwrap().is_none() {
        // What herd and its programs were doing, for a failure seen once
        // in a loaded suite and not reproduced since.
        let herd_pid = child.id();
        let threads: Vec<String> = std::fs::read_dir(format!("/proc/{herd_pid}/task"))
            .map(|d| {
                d.flatten()
                    .map(|t| {
                        let tid = t.file_name().to_string_lossy().into_owned();
                        let wchan = std::fs::read_to_string(t.path().join("wchan")).unwrap_or_default();
                        format!("{tid} {:?} {wchan}", state_of(tid.parse().unwrap_or(0)))
                    })
                    .collect()
            })
            .unwrap_or_default();
        let programs: Vec<String> = pids
            .iter()
            .map(|&p| format!("{p} {:?} frozen={}", state_of(p), frozen(p)))
            .collect();
        let err = std::fs::read_to_string(tmp.path().join("herd.err")).unwrap_or_default();
        let _ = child.kill();
        panic!(
            "herd did not end 10 s after signal {signal}\nherd threads: {threads:?}\nprograms: {programs:?}\nherd said:\n{err}"
        );
    }
    (child.id(), pids)
}

/// How many programs' logs in `logs` say they started.
fn started(logs: &Path) -> usize {
    std::fs::read_dir(logs).map_or(0, |d| {
        d.flatten()
            .filter(|f| std::fs::read_to_string(f.path()).is_ok_and(|t| t.contains("started")))
            .count()
    })
}

#[test]
fn a_signal_ends_the_programs_still_held_without_starting_them() {
    // A period longer than the test: the programs past the CPUs stay held
    // before their start until the signal.
    let tmp = tempfile::tempdir().unwrap();
    let cpus = std::thread::available_parallelism().unwrap().get();
    let file = batch(tmp.path(), cpus + 2, 30.0);
    let logs = tmp.path().join("logs");
    let mut child = herd()
        .args([
            "batch",
            file.to_str().unwrap(),
            "--period-ms",
            "60000",
            "--policy",
            &common::taking_turns(),
        ])
        .args(["--guard", "off", "--logs", logs.to_str().unwrap()])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(10);
    while started(&logs) < cpus && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
    }
    let pids = children_of(child.id());
    let held: Vec<i32> = pids.iter().copied().filter(|&p| held(p)).collect();
    assert_eq!(held.len(), 2, "two programs wait before their start: {pids:?}");
    // SAFETY: plain kill.
    unsafe { libc::kill(child.id() as i32, libc::SIGINT) };
    let deadline = Instant::now() + Duration::from_secs(10);
    while child.try_wait().unwrap().is_none() && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
    }
    let ended = child.try_wait().unwrap().is_some();
    let _ = child.kill();
    let out = child.wait_with_output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(ended, "herd ended after the signal: {err}");
    assert_eq!(started(&logs), cpus, "the held programs never started: {err}");
    for pid in pids {
        assert_eq!(state_of(pid), None, "program {pid} is gone: {err}");
    }
}

#[test]
fn sigint_mid_batch_leaves_nothing_stopped_or_unreaped() {
    sigint_mid_batch("signals");
}

#[test]
fn sigint_mid_batch_leaves_nothing_frozen_or_unreaped() {
    if freezer_here() {
        sigint_mid_batch("freezer");
    }
}

fn sigint_mid_batch(pause: &str) {
    let (_, pids) = kill_mid_batch(libc::SIGINT, pause);
    // herd passed SIGINT on and reaped every program: none is left at all.
    for pid in pids {
        assert_eq!(
            state_of(pid),
            None,
            "program {pid} still exists in state {:?}",
            state_of(pid)
        );
    }
}

#[test]
fn sigkill_mid_batch_leaves_nothing_stopped() {
    // PR_SET_PDEATHSIG = SIGCONT: the kernel continues every stopped program.
    sigkill_mid_batch("signals");
}

#[test]
fn sigkill_mid_batch_leaves_nothing_frozen() {
    // herd's guard sees herd's pipe close, thaws and removes the groups.
    if freezer_here() {
        sigkill_mid_batch("freezer");
    }
}

fn sigkill_mid_batch(pause: &str) {
    // Orphans come to us, so we can check for zombies and reap them.
    common::adopt_orphans();
    let (herd_pid, pids) = kill_mid_batch(libc::SIGKILL, pause);
    let deadline = Instant::now() + Duration::from_secs(3);
    while pids.iter().any(|&p| waiting(p)) && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
    }
    let left_waiting: Vec<i32> = pids.iter().copied().filter(|&p| waiting(p)).collect();
    let states: Vec<Option<char>> = pids.iter().map(|&p| state_of(p)).collect();
    for &pid in &pids {
        // SAFETY: end the orphans and reap them.
        unsafe {
            libc::kill(pid, libc::SIGKILL);
            libc::waitpid(pid, std::ptr::null_mut(), 0);
        }
    }
    for mount in [
        "/sys/fs/cgroup/unified",
        "/sys/fs/cgroup",
        "/sys/fs/cgroup/cpuset",
        "/sys/fs/cgroup/freezer",
    ] {
        let dir = Path::new(mount).join(format!("herd-{herd_pid}"));
        let deadline = Instant::now() + Duration::from_secs(3);
        while dir.exists() && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(20));
        }
        assert!(!dir.exists(), "{} was left behind", dir.display());
    }
    assert!(
        left_waiting.is_empty(),
        "stopped or frozen programs left behind: {left_waiting:?} in {states:?}"
    );
    assert!(states.iter().all(|s| *s != Some('Z')), "zombies: {states:?}");
    for pid in pids {
        assert_eq!(state_of(pid), None, "reaped");
    }
}

#[test]
fn bad_batch_files_are_exit_2() {
    let tmp = tempfile::tempdir().unwrap();
    for (name, text) in [
        ("empty.toml", ""),
        (
            "unknown.toml",
            "[[program]]\nname = \"a\"\ncmd = [\"true\"]\nspeed = 1\n",
        ),
        ("nocmd.toml", "[[program]]\nname = \"a\"\ncmd = []\n"),
        (
            "missing.toml",
            "[[program]]\nname = \"a\"\ncmd = [\"/no/such/program\"]\n",
        ),
    ] {
        let path = tmp.path().join(name);
        std::fs::write(&path, text).unwrap();
        let out = herd()
            .args([
                "batch",
                path.to_str().unwrap(),
                "--logs",
                tmp.path().to_str().unwrap(),
            ])
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{name}: {err}");
        assert!(
            err.contains(name) || err.contains("/no/such/program"),
            "{name}: {err}"
        );
    }
}

#[test]
fn pausing_churning_programs_never_crashes_herd() {
    // Threads created and joined constantly, children forked and exec'd,
    // while cosched:fair stops and continues the programs every 5 ms.
    let tmp = tempfile::tempdir().unwrap();
    let script = tmp.path().join("churn.py");
    std::fs::write(
        &script,
        "import os, threading, time, subprocess\nend = time.time() + 1.0\nn = 0\n\
         while time.time() < end:\n    ts = [threading.Thread(target=lambda: None) for _ in range(8)]\n\
         \x20   [t.start() for t in ts]\n    [t.join() for t in ts]\n    if n % 20 == 0:\n\
         \x20       subprocess.run(['true'])\n    n += 1\nos._exit(7)\n",
    )
    .unwrap();
    let file = tmp.path().join("churn.toml");
    let text = format!(
        "[[program]]\nname = \"churn\"\ncmd = [\"python3\", \"{}\"]\ncopies = 4\n",
        script.display()
    );
    std::fs::write(&file, text).unwrap();
    let out = herd()
        .args(["batch", file.to_str().unwrap(), "--period-ms", "5", "--json"])
        .args(["--policy", &common::taking_turns()])
        .args(["--logs", tmp.path().join("logs").to_str().unwrap()])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(
        out.status.code(),
        Some(1),
        "programs that exit 7 are failures: {err}"
    );
    assert!(!err.contains("panicked"), "{err}");
    let doc: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let codes: Vec<i64> = doc["runs"][0]["programs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["exit_code"].as_i64().unwrap())
        .collect();
    assert_eq!(codes, vec![7, 7, 7, 7]);
}

/// Two copies of sysbench's CPU test (a program no one here wrote: a main
/// thread that sleeps beside one busy worker) fit a 2-CPU machine side by
/// side: cosched:fair counts the threads that run, not the ones that
/// sleep, so neither copy waits for the other. `make test` installs
/// sysbench.
#[test]
fn sleeping_helper_threads_do_not_take_turns_from_workers() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("sb.toml");
    std::fs::write(
        &path,
        "[[program]]\nname = \"sb\"\ncmd = [\"sysbench\", \"cpu\", \"--threads=1\", \"--events=6000\", \"--time=0\", \"run\"]\ncopies = 2\n",
    )
    .unwrap();
    let trace = dir.path().join("t.jsonl");
    let out = herd()
        .args(["batch", "--period-ms", "50", "--trace"])
        .arg(&trace)
        .arg("--logs")
        .arg(dir.path())
        .arg(&path)
        .output()
        .expect("run herd");
    assert!(
        out.status.success(),
        "sysbench under herd batch (is sysbench installed? make test installs it): {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let turns = common::json_lines(&trace);
    // Past the first two turns (where the sleeping thread is not yet told
    // apart), both copies run at once whenever both are there.
    let both_there: Vec<&serde_json::Value> = turns
        .iter()
        .skip(2)
        .filter(|t| t["running"].as_array().unwrap().len() + t["waiting"].as_array().unwrap().len() == 2)
        .collect();
    assert!(
        both_there.len() >= 4,
        "{} turns with both copies",
        both_there.len()
    );
    let together = both_there
        .iter()
        .filter(|t| t["running"].as_array().unwrap().len() == 2)
        .count();
    assert!(
        together * 10 >= both_there.len() * 9,
        "both ran together in {together} of {} turns",
        both_there.len()
    );
}

/// `cd dir && herd batch ok.toml`: a batch file named without a folder is
/// in the current one, and so are its programs' paths.
#[test]
fn a_batch_file_without_a_folder_part_runs_from_the_current_one() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("ok.toml"),
        "[[program]]\nname = \"t\"\ncmd = [\"/bin/true\"]\n",
    )
    .unwrap();
    let out = herd()
        .current_dir(dir.path())
        .args(["batch", "ok.toml"])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
}

/// When a program exits, the co-scheduler fills its place at once, not at
/// the next period: with one slot and a 2 s period, the second of two
/// short programs starts when the first ends.
#[test]
fn a_program_that_exits_hands_its_place_on_at_once() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("short.toml");
    std::fs::write(
        &path,
        "[[program]]\nname = \"s\"\ncmd = [\"sleep\", \"0.2\"]\ncopies = 2\n",
    )
    .unwrap();
    let out = herd()
        .args([
            "batch",
            "--policy",
            "cosched:fair:slots=1",
            "--period-ms",
            "2000",
            "--json",
        ])
        .arg("--logs")
        .arg(dir.path())
        .arg(&path)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let doc: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let makespan = doc["runs"][0]["makespan_s"].as_f64().unwrap();
    assert!(makespan < 1.5, "the second waited for the period: {makespan} s");
}

/// A batch whose later program cannot start starts none (issue 25: the
/// first ran on under PID 1 after herd exited 2), and says which file,
/// line and program, before any run. So does a folder that is not there
/// and a name used twice.
#[test]
fn a_batch_with_a_program_that_cannot_start_starts_none() {
    let dir = tempfile::tempdir().unwrap();
    let marker = dir.path().join("ran");
    let cases = [
        (
            "cmd = [\"./nosuch\"]",
            ":4:",
            "program 'b': cannot run './nosuch'",
        ),
        ("cmd = [\"true\"]\ncwd = \"gone\"", ":4:", "is not a folder"),
    ];
    for (b, line, why) in cases {
        let path = dir.path().join("two.toml");
        std::fs::write(
            &path,
            format!(
                "[[program]]\nname = \"a\"\ncmd = [\"sh\", \"-c\", \"touch {}; sleep 5\"]\n\
                 [[program]]\nname = \"b\"\n{b}\n",
                marker.display()
            ),
        )
        .unwrap();
        let out = herd()
            .current_dir(dir.path())
            .args(["batch", path.to_str().unwrap()])
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{err}");
        assert!(
            !dir.path().join("herd-logs").exists(),
            "a refused batch left herd-logs/"
        );
        assert!(
            err.contains(&format!("two.toml{line}")) && err.contains(why),
            "{err}"
        );
        assert!(!err.contains("run 1 of"), "refused before any run: {err}");
        std::thread::sleep(Duration::from_millis(200));
        assert!(!marker.exists(), "program a ran");
    }
    let path = dir.path().join("twice.toml");
    std::fs::write(
        &path,
        "[[program]]\nname = \"a\"\ncmd = [\"true\"]\n[[program]]\nname = \"a\"\ncmd = [\"true\"]\n",
    )
    .unwrap();
    let out = herd().args(["batch", path.to_str().unwrap()]).output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(
        err.contains("twice.toml:4:") && err.contains("a name used twice"),
        "{err}"
    );
}

/// The guard across runs: a batch run again is compared with itself under
/// the kernel. Its second run is the kernel's (herd places nothing), and
/// once the policy's recorded makespans are beyond the margin the kernel
/// keeps the batch and the report says why. `--guard off` and `--compare`
/// never hand a run over.
#[test]
fn a_batch_run_again_is_judged_against_the_kernel_by_its_makespan() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("b.toml");
    std::fs::write(
        &file,
        "name = \"naps\"\n[[program]]\nname = \"nap\"\ncmd = [\"sleep\", \"0.2\"]\ncopies = 2\n",
    )
    .unwrap();
    let db = dir.path().join("herd.db");
    let run = |extra: &[&str]| -> serde_json::Value {
        let out = herd()
            .args([
                "batch",
                file.to_str().unwrap(),
                "--json",
                "--period-ms",
                "20",
                "--db",
                db.to_str().unwrap(),
            ])
            .args(extra)
            .output()
            .unwrap();
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        serde_json::from_slice(&out.stdout).unwrap()
    };
    let first = run(&[]);
    let r = &first["runs"][0];
    assert_eq!(
        (r["across_runs"]["by"].as_str(), r["across_runs"]["why"].as_str()),
        (Some("policy"), Some("first_run"))
    );
    assert!(r["guard"].is_object(), "{r}");
    let second = run(&[]);
    let r = &second["runs"][0];
    assert_eq!(
        (r["across_runs"]["by"].as_str(), r["across_runs"]["why"].as_str()),
        (Some("kernel"), Some("no_baseline"))
    );
    // The policy's run, placed by the kernel: no loop, no in-run guard.
    assert_eq!(
        (r["variant"].as_str(), r["decisions"].as_u64()),
        (Some("cosched:fair"), Some(0))
    );
    assert!(r["guard"].is_null(), "{r}");
    // Neither of these is handed over, and --guard off records nothing.
    let off = run(&["--guard", "off"]);
    assert!(off["runs"][0]["across_runs"].is_null() && off["runs"][0]["decisions"].as_u64() > Some(0));
    let compared = run(&["--compare", "linux"]);
    assert!(
        compared["runs"]
            .as_array()
            .unwrap()
            .iter()
            .all(|r| r["across_runs"].is_null())
    );
    // Both of --compare's runs were recorded: 2 under the policy, 2 under
    // the kernel. Now make the policy's recorded runs ten times as long.
    // Scales the policy's recorded makespans in the database.
    let scale_policy_runs = |by: &str| {
        let sql = format!(
            "import sqlite3, sys; c = sqlite3.connect(sys.argv[1]); \
             c.execute('UPDATE batch_run SET makespan_s = makespan_s {by} WHERE by_kernel = 0'); c.commit()"
        );
        let st = std::process::Command::new(common::python())
            .args(["-c", &sql, db.to_str().unwrap()])
            .status()
            .unwrap();
        assert!(st.success());
    };
    scale_policy_runs("* 10");
    let judged = run(&[]);
    let a = &judged["runs"][0]["across_runs"];
    assert_eq!(
        (a["by"].as_str(), a["why"].as_str()),
        (Some("kernel"), Some("loses")),
        "{a}"
    );
    assert_eq!(
        (a["policy_runs"].as_u64(), a["kernel_runs"].as_u64()),
        (Some(2), Some(2))
    );
    assert!(a["ratio"].as_f64().unwrap() > 5.0, "{a}");
    // The table says so too.
    let out = herd()
        .args([
            "batch",
            file.to_str().unwrap(),
            "--period-ms",
            "20",
            "--db",
            db.to_str().unwrap(),
        ])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(
        text.contains("cosched:fair run 1: guard across runs: the kernel places this run: the policy's last runs ended +"),
        "{text}"
    );
    // Now make them a thousandth as long: the makespans, two runs of each,
    // vouch for the policy, which places the run with no in-run probe.
    scale_policy_runs("/ 1000");
    let vouched = run(&[]);
    let r = &vouched["runs"][0];
    let a = &r["across_runs"];
    assert_eq!(
        (a["by"].as_str(), a["why"].as_str(), a["in_run_probes"].as_bool()),
        (Some("policy"), Some("trusted"), Some(false)),
        "{a}"
    );
    assert!(a["ratio"].as_f64().unwrap() < 0.5, "{a}");
    assert!(r["decisions"].as_u64() > Some(0), "{r}");
    assert_eq!(
        (
            r["guard"]["kernel_ns"].as_u64(),
            r["guard"]["comparisons"].as_array().map(Vec::len)
        ),
        (Some(0), Some(0)),
        "{r}"
    );
}
