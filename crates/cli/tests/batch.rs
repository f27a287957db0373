//! `herd batch` on this machine: co-scheduling keeps at most as many
//! programs running as there are CPUs, every program finishes, and neither
//! SIGINT nor SIGKILL of herd leaves a program stopped or a zombie behind.

mod common;
use common::state_of;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

fn herd() -> Command {
    Command::new(env!("CARGO_BIN_EXE_herd"))
}

/// A batch of `n` single-threaded Python busy loops of `seconds` CPU time each.
fn batch(dir: &Path, n: usize, seconds: f64) -> PathBuf {
    let program = format!(
        "import time\\nend = time.process_time() + {seconds}\\nwhile time.process_time() < end: pass\\nprint('done')"
    );
    let text = format!(
        "name = \"busy\"\n[[program]]\nname = \"busy\"\ncmd = [\"python3\", \"-c\", \"{program}\"]\ncopies = {n}\n"
    );
    let path = dir.join("busy.toml");
    std::fs::write(&path, text).unwrap();
    path
}

/// Pids of the processes whose parent is `parent`.
fn children_of(parent: u32) -> Vec<i32> {
    std::fs::read_to_string(format!("/proc/{parent}/task/{parent}/children"))
        .unwrap_or_default()
        .split_whitespace()
        .filter_map(|p| p.parse().ok())
        .collect()
}

#[test]
fn four_programs_on_the_cpus_take_turns_and_all_finish() {
    let tmp = tempfile::tempdir().unwrap();
    let cpus = std::thread::available_parallelism().unwrap().get();
    let file = batch(tmp.path(), 2 * cpus, 0.6);
    let trace = tmp.path().join("trace.jsonl");
    let mut child = herd()
        .args([
            "batch",
            file.to_str().unwrap(),
            "--period-ms",
            "50",
            "--trace",
            trace.to_str().unwrap(),
            "--json",
        ])
        .args(["--logs", tmp.path().join("logs").to_str().unwrap()])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // Sample the programs' states from /proc while the batch runs.
    let mut most_running = 0;
    let mut samples = 0;
    while child.try_wait().unwrap().is_none() {
        // Two reads 2 ms apart that agree: a read taken while herd switches
        // programs (a stop signal in flight for microseconds) is discarded,
        // while a real excess, which lasts a whole 50 ms period, is caught.
        let pids = children_of(child.id());
        let read = || pids.iter().map(|&p| state_of(p)).collect::<Vec<_>>();
        let first = read();
        std::thread::sleep(Duration::from_millis(2));
        let second = read();
        if first == second {
            let running = first
                .iter()
                .filter(|s| matches!(s, Some('R') | Some('S') | Some('D')))
                .count();
            most_running = most_running.max(running);
            samples += 1;
        }
        std::thread::sleep(Duration::from_millis(7));
    }
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(samples > 20, "sampled the run");
    assert!(
        most_running <= cpus,
        "/proc saw {most_running} programs running at once"
    );
    // herd's own trace agrees.
    let mut most_traced = 0;
    for line in std::fs::read_to_string(&trace).unwrap().lines() {
        let v: serde_json::Value = serde_json::from_str(line).unwrap();
        most_traced = most_traced.max(v["running"].as_array().unwrap().len());
    }
    assert!(
        most_traced <= cpus,
        "the trace shows {most_traced} running at once"
    );
    let doc: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let programs = doc["runs"][0]["programs"].as_array().unwrap();
    assert_eq!(programs.len(), 2 * cpus);
    assert!(
        programs.iter().all(|p| p["exit_code"] == 0),
        "all finished: {programs:?}"
    );
    let log = std::fs::read_to_string(programs[0]["log"].as_str().unwrap()).unwrap();
    assert_eq!(log.trim(), "done", "output goes to the log");
}

fn kill_mid_batch(signal: i32) -> Vec<i32> {
    let tmp = tempfile::tempdir().unwrap();
    let file = batch(tmp.path(), 4, 30.0);
    let mut child = herd()
        .args(["batch", file.to_str().unwrap(), "--period-ms", "30"])
        .args(["--logs", tmp.path().join("logs").to_str().unwrap()])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_millis(600));
    let pids = children_of(child.id());
    assert_eq!(pids.len(), 4, "the batch started");
    assert!(
        pids.iter().any(|&p| state_of(p) == Some('T')),
        "some programs were waiting their turn"
    );
    // SAFETY: plain kill.
    unsafe { libc::kill(child.id() as i32, signal) };
    let deadline = Instant::now() + Duration::from_secs(10);
    while child.try_wait().unwrap().is_none() && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
    }
    assert!(child.try_wait().unwrap().is_some(), "herd ended");
    pids
}

#[test]
fn sigint_mid_batch_leaves_nothing_stopped_or_unreaped() {
    let pids = kill_mid_batch(libc::SIGINT);
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
    // Orphans come to us, so we can check for zombies and reap them.
    // SAFETY: prctl on ourselves.
    unsafe { libc::prctl(libc::PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) };
    let pids = kill_mid_batch(libc::SIGKILL);
    // PR_SET_PDEATHSIG = SIGCONT: the kernel continued every stopped program.
    let deadline = Instant::now() + Duration::from_secs(3);
    while pids.iter().any(|&p| state_of(p) == Some('T')) && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
    }
    let states: Vec<Option<char>> = pids.iter().map(|&p| state_of(p)).collect();
    for &pid in &pids {
        // SAFETY: end the orphans and reap them.
        unsafe {
            libc::kill(pid, libc::SIGKILL);
            libc::waitpid(pid, std::ptr::null_mut(), 0);
        }
    }
    assert!(
        states.iter().all(|s| *s != Some('T')),
        "stopped programs left behind: {states:?}"
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
