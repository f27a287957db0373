//! Fault injection (issue 25): herd killed with SIGKILL at random early
//! moments of a batch never leaves a program stopped or frozen, and a
//! killed `herd run` leaves no thread pinned. Alone in its binary: the test
//! process makes itself the subreaper of herd's orphans, and must not adopt
//! another test's programs; its tests take turns (`ONE_AT_A_TIME`).

mod common;
use common::{frozen, herd, state_of};
use std::time::{Duration, Instant};

/// Pids of this process's children (herd's orphans land here once this
/// process is their subreaper), with their command lines.
fn children() -> Vec<(i32, String)> {
    let me = std::process::id();
    std::fs::read_to_string(format!("/proc/{me}/task/{me}/children"))
        .unwrap_or_default()
        .split_whitespace()
        .filter_map(|p| p.parse().ok())
        .map(|p: i32| {
            let cmd = std::fs::read_to_string(format!("/proc/{p}/cmdline")).unwrap_or_default();
            (p, cmd.replace('\0', " "))
        })
        .collect()
}

/// The tests here share this process's orphans: one at a time.
static ONE_AT_A_TIME: std::sync::Mutex<()> = std::sync::Mutex::new(());

/// Waits (5 s at most) until every adopted child is gone, the guards
/// having finished their cleanup, and reaps them.
fn settle() {
    let deadline = Instant::now() + Duration::from_secs(5);
    while Instant::now() < deadline && !children().is_empty() {
        reap();
        std::thread::sleep(Duration::from_millis(10));
    }
    reap();
}

/// Reaps every child that has exited.
fn reap() {
    // SAFETY: waitpid with a null status pointer and WNOHANG only reaps.
    while unsafe { libc::waitpid(-1, std::ptr::null_mut(), libc::WNOHANG) } > 0 {}
}

#[test]
fn sigkill_of_a_starting_batch_never_leaves_a_program_stopped() {
    let _turn = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    common::adopt_orphans();
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("b.toml");
    std::fs::write(
        &file,
        "[[program]]\nname = \"s\"\ncmd = [\"sleep\", \"3\"]\ncopies = 4\n",
    )
    .unwrap();
    let mut stopped = Vec::new();
    let tries = 40;
    for i in 0..tries {
        let pause = if i % 2 == 0 { "signals" } else { "freezer" };
        let mut h = herd()
            .args([
                "batch",
                file.to_str().unwrap(),
                "--period-ms",
                "20",
                "--pause",
                pause,
            ])
            .args(["--logs", dir.path().join("logs").to_str().unwrap()])
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .unwrap();
        // 5-30 ms: starting the programs held, the first decision, the
        // first pauses.
        std::thread::sleep(Duration::from_millis(5 + (i * 7 % 26) as u64));
        let herd_pid = h.id();
        h.kill().unwrap();
        h.wait().unwrap();
        // What herd left behind has a moment to be let go: a closed hold,
        // the death signal, the cgroup guard's thaw.
        std::thread::sleep(Duration::from_millis(300));
        for (pid, cmd) in children() {
            if cmd.contains("__cgroup-guard") {
                continue;
            }
            if state_of(pid) == Some('T') || frozen(pid) {
                stopped.push(format!("try {i} ({pause}): {pid} {cmd} left {:?}", state_of(pid)));
            }
            // SAFETY: a signal to our own (adopted) child.
            unsafe { libc::kill(pid, libc::SIGKILL) };
        }
        settle();
        // And no group of herd's is left.
        let groups = std::process::Command::new("find")
            .args([
                "/sys/fs/cgroup",
                "-maxdepth",
                "8",
                "-name",
                &format!("herd-{herd_pid}"),
            ])
            .output()
            .unwrap();
        let groups = String::from_utf8_lossy(&groups.stdout).trim().to_string();
        if !groups.is_empty() {
            stopped.push(format!("try {i} ({pause}): cgroups left: {groups}"));
        }
    }
    assert!(
        stopped.is_empty(),
        "{} of {tries} kills left programs stopped or groups behind: {stopped:#?}",
        stopped.len()
    );
}

/// The affinity of every thread of `pid`.
fn affinities(pid: i32) -> Vec<(i32, String)> {
    std::fs::read_dir(format!("/proc/{pid}/task"))
        .map(|d| {
            d.flatten()
                .filter_map(|t| {
                    let tid: i32 = t.file_name().to_str()?.parse().ok()?;
                    let status = std::fs::read_to_string(t.path().join("status")).ok()?;
                    let list = status
                        .lines()
                        .find_map(|l| l.strip_prefix("Cpus_allowed_list:"))?;
                    Some((tid, list.trim().to_string()))
                })
                .collect()
        })
        .unwrap_or_default()
}

/// SIGKILL of `herd run` while it pins a program's threads one to a CPU:
/// herd's keeper gives every thread its program's mask back (issue 25:
/// orphans kept their single-CPU pins), threads created after herd pinned
/// their creator included.
#[test]
fn sigkill_of_herd_run_leaves_no_thread_pinned() {
    let _turn = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    common::adopt_orphans();
    let mine = affinities(std::process::id() as i32)[0].1.clone();
    if !mine.contains(['-', ',']) {
        return; // One CPU: nothing to pin apart.
    }
    let program = "import threading, time\n\
                   ts = [threading.Thread(target=time.sleep, args=(4,)) for _ in range(2)]\n\
                   [t.start() for t in ts]\n[t.join() for t in ts]";
    for policy in ["static:compact", "static:compact:cpus=1"] {
        let mut h = herd()
            .args([
                "run",
                "--policy",
                policy,
                "--guard",
                "off",
                "--period-ms",
                "20",
                "--",
            ])
            .args([&common::python(), "-c", program])
            .stderr(std::process::Stdio::null())
            .spawn()
            .unwrap();
        // Long enough for the threads to start and be pinned.
        let deadline = Instant::now() + Duration::from_secs(5);
        let pinned = loop {
            let kids = common::children_of(h.id());
            let threads: Vec<(i32, String)> = kids.iter().flat_map(|&k| affinities(k)).collect();
            if threads.len() >= 3 && threads.iter().all(|(_, a)| *a != mine) {
                break kids;
            }
            assert!(Instant::now() < deadline, "{policy}: never pinned: {threads:?}");
            std::thread::sleep(Duration::from_millis(20));
        };
        h.kill().unwrap();
        h.wait().unwrap();
        std::thread::sleep(Duration::from_millis(300));
        for &pid in &pinned {
            let left = affinities(pid);
            assert!(
                left.iter().all(|(_, a)| *a == mine),
                "{policy}: {left:?}, not {mine}"
            );
            // SAFETY: a signal to our own (adopted) child.
            unsafe { libc::kill(pid, libc::SIGKILL) };
        }
        settle();
    }
}
