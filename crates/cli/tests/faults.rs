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

/// What a killed herd left behind, once it has had a moment to let go (a
/// closed hold, the death signal, the guard's thaw): adopted programs
/// stopped, frozen, or (given the mask they started with) still pinned,
/// and cgroups named `group`. Kills and reaps the programs after looking.
fn left_behind(what: &str, started_with: Option<&str>, group: &str) -> Vec<String> {
    std::thread::sleep(Duration::from_millis(300));
    let mut left = Vec::new();
    for (pid, cmd) in children() {
        if cmd.contains("__cgroup-guard") {
            continue;
        }
        if state_of(pid) == Some('T') || frozen(pid) {
            left.push(format!("{what}: {pid} {cmd} left {:?}", state_of(pid)));
        }
        if let Some(mine) = started_with {
            let pinned: Vec<_> = affinities(pid).into_iter().filter(|(_, a)| a != mine).collect();
            if !pinned.is_empty() {
                left.push(format!("{what}: {pid} {cmd} left pinned {pinned:?}"));
            }
        }
        // SAFETY: a signal to our own (adopted or started) child.
        unsafe { libc::kill(pid, libc::SIGKILL) };
    }
    settle();
    let groups = std::process::Command::new("find")
        .args(["/sys/fs/cgroup", "-maxdepth", "8", "-name", group])
        .output()
        .unwrap();
    let groups = String::from_utf8_lossy(&groups.stdout).trim().to_string();
    if !groups.is_empty() {
        left.push(format!("{what}: cgroups left: {groups}"));
    }
    left
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
                "--policy",
                &common::taking_turns(),
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
        stopped.extend(left_behind(
            &format!("try {i} ({pause})"),
            None,
            &format!("herd-{herd_pid}"),
        ));
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
    for policy in ["static:compact", "static:compact:cpus=1"] {
        kill_while_pinned(herd(), policy, None);
    }
}

/// The same with herd's binary deleted once herd has started, as an
/// upgrade or a rebuild replaces it during a run: the keeper still starts
/// (from the running binary, not its path). Before, it could not start
/// ("No such file or directory") and the killed run left threads pinned.
#[test]
fn a_binary_replaced_during_a_run_still_gets_its_keeper() {
    let dir = tempfile::tempdir().unwrap();
    let copy = dir.path().join("herd");
    std::fs::copy(env!("CARGO_BIN_EXE_herd"), &copy).unwrap();
    kill_while_pinned(common::herd_at(&copy), "static:compact", Some(&copy));
}

/// Runs a program of two working threads under `herd` (a command with
/// herd's test environment) and `policy`, deletes `delete` once herd has
/// started, kills herd once every thread is pinned, and checks every
/// thread has its mask back.
fn kill_while_pinned(mut herd: std::process::Command, policy: &str, delete: Option<&std::path::Path>) {
    let _turn = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    common::adopt_orphans();
    let mine = affinities(std::process::id() as i32)[0].1.clone();
    if !mine.contains(['-', ',']) {
        return; // One CPU: nothing to pin apart.
    }
    // The threads work (spin): the pinning policies place a thread once it
    // works, and the program is killed as soon as herd is.
    let program = "import threading, time\n\
                   def spin(s):\n    end = time.time() + s\n    while time.time() < end: pass\n\
                   ts = [threading.Thread(target=spin, args=(4,)) for _ in range(2)]\n\
                   [t.start() for t in ts]\n[t.join() for t in ts]";
    let mut h = herd
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
    // spawn returns once herd's exec has happened; herd pins (and starts
    // its keeper) only after its program has started, milliseconds later.
    if let Some(path) = delete {
        std::fs::remove_file(path).unwrap();
    }
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
    let mut left_pinned = Vec::new();
    for &pid in &pinned {
        let left = affinities(pid);
        if !left.iter().all(|(_, a)| *a == mine) {
            left_pinned.push(left);
        }
        // SAFETY: a signal to our own (adopted) child.
        unsafe { libc::kill(pid, libc::SIGKILL) };
    }
    settle();
    assert!(left_pinned.is_empty(), "{policy}: {left_pinned:?}, not {mine}");
}

/// One command of the fault harness: what it runs, and whether it has a
/// database of runs to check.
struct Victim {
    name: &'static str,
    /// Builds herd's command for try `i`, given the program to attach to
    /// (`attach` only) and the database.
    command: fn(
        i: u64,
        attached: Option<i32>,
        db: &std::path::Path,
        dir: &std::path::Path,
    ) -> std::process::Command,
    /// Whether the command records runs in the database.
    records: bool,
}

/// A program with two sleeping helper threads (CPU work would make the
/// test slow on two CPUs; placement and pausing act on sleepers too).
const THREADS: &str = "import threading, time\n\
                       ts = [threading.Thread(target=time.sleep, args=(0.5,)) for _ in range(2)]\n\
                       [t.start() for t in ts]\n[t.join() for t in ts]";

/// The delay before the kill in try `i`: spread from 2 ms to 1 s, so kills
/// land in start-up, the first decision, pauses, and the end (the programs
/// take about 0.5 s; later kills find herd done, and its run recorded).
fn delay_of(i: u64) -> Duration {
    // A fixed LCG: the same moments on every run of the suite.
    let x = i
        .wrapping_mul(6364136223846793005)
        .wrapping_add(1442695040888963407)
        >> 33;
    let ms = 2.0 * (500f64).powf((x % 1000) as f64 / 1000.0);
    Duration::from_micros((ms * 1000.0) as u64)
}

/// The fault harness (issue 25): SIGKILL of `herd run`, `batch` and
/// `attach` at spread moments; after each, nothing is left stopped, frozen,
/// pinned or confined, and the database holds every run that finished.
#[test]
fn sigkill_at_any_moment_of_run_batch_or_attach_leaves_the_machine_clean() {
    let _turn = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    common::adopt_orphans();
    let mine = affinities(std::process::id() as i32)[0].1.clone();
    let dir = tempfile::tempdir().unwrap();
    let batch = dir.path().join("b.toml");
    std::fs::write(
        &batch,
        format!(
            "[[program]]\nname = \"t\"\ncmd = [{:?}, \"-c\", {THREADS:?}]\ncopies = 3\n",
            common::python()
        ),
    )
    .unwrap();
    let victims = [
        Victim {
            name: "run",
            command: |i, _, db, _| {
                let policy = ["static:compact", "static:compact:cpus=1", "cosched:fair"][i as usize % 3];
                let mut c = herd();
                c.args(["run", "--policy", policy, "--period-ms", "20", "--db"])
                    .arg(db)
                    .args(["--", &common::python(), "-c", THREADS]);
                c
            },
            records: true,
        },
        Victim {
            name: "batch",
            command: |i, _, db, dir| {
                let pause = if i % 2 == 0 { "signals" } else { "freezer" };
                let mut c = herd();
                c.arg("batch")
                    .arg(dir.join("b.toml"))
                    .args(["--policy", &common::taking_turns()])
                    .args(["--period-ms", "20", "--pause", pause, "--db"])
                    .arg(db)
                    .arg("--logs")
                    .arg(dir.join("logs"));
                c
            },
            records: true,
        },
        Victim {
            name: "attach",
            command: |i, attached, _, _| {
                let policy = ["static:compact:cpus=1", "static:compact"][i as usize % 2];
                let mut c = herd();
                c.args(["attach", "--policy", policy, "--period-ms", "20"])
                    .arg(attached.unwrap().to_string());
                c
            },
            records: false,
        },
    ];
    let tries = 12;
    let mut left = Vec::new();
    let mut finished = 0;
    for v in &victims {
        let db = dir.path().join(format!("{}.db", v.name));
        let mut completed = 0;
        for i in 0..tries {
            let attached = (v.name == "attach").then(|| {
                std::process::Command::new(common::python())
                    .args(["-c", THREADS])
                    .spawn()
                    .unwrap()
            });
            let mut h = (v.command)(i, attached.as_ref().map(|c| c.id() as i32), &db, dir.path())
                .stdout(std::process::Stdio::null())
                .stderr(std::process::Stdio::null())
                .spawn()
                .unwrap();
            std::thread::sleep(delay_of(i));
            let herd_pid = h.id();
            // Whether herd had finished by itself before the kill.
            if h.try_wait().unwrap().is_some_and(|st| st.success()) {
                completed += 1;
            }
            let _ = h.kill();
            h.wait().unwrap();
            let what = format!("{} try {i} ({:?})", v.name, delay_of(i));
            left.extend(left_behind(&what, Some(&mine), &format!("herd-{herd_pid}")));
        }
        finished += completed;
        if v.records {
            let out = herd()
                .args(["db", "--db"])
                .arg(&db)
                .arg("export")
                .output()
                .unwrap();
            assert!(
                out.status.success(),
                "{}: database unreadable: {}",
                v.name,
                String::from_utf8_lossy(&out.stderr)
            );
            let export: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
            // What was learned: every finished run is counted in its
            // program's profile (a batch counts each copy).
            let runs: u64 = export["programs"]
                .as_array()
                .map(|ps| {
                    ps.iter()
                        .map(|p| p["profile"]["runs"].as_u64().unwrap_or(0))
                        .sum()
                })
                .unwrap_or(0);
            let per = if v.name == "batch" { 3 } else { 1 };
            println!(
                "{}: {completed} of {tries} finished before the kill, {runs} runs learned",
                v.name
            );
            assert!(
                runs >= completed * per,
                "{}: {completed} finished, {runs} runs recorded",
                v.name
            );
        }
    }
    assert!(
        left.is_empty(),
        "{} problems after {} kills: {left:#?}",
        left.len(),
        tries * 3
    );
    // The spread reaches the end of some runs (else the database check
    // checked nothing).
    assert!(finished > 0, "no run finished before its kill");
}

/// A cgroup of `controller` for one test, v1 or v2, with `file` set to
/// `value`; `None` where this machine has no such controller to use.
fn limited_group(controller: &str, files: [&str; 2], value: &str) -> Option<std::path::PathBuf> {
    let name = format!("herd-test-{}-{controller}", std::process::id());
    let (dir, file) = if std::path::Path::new(&format!("/sys/fs/cgroup/{controller}")).is_dir() {
        (
            std::path::PathBuf::from(format!("/sys/fs/cgroup/{controller}/{name}")),
            files[0],
        )
    } else if std::fs::read_to_string("/sys/fs/cgroup/cgroup.subtree_control")
        .is_ok_and(|c| c.split_whitespace().any(|x| x == controller))
    {
        (
            std::path::PathBuf::from(format!("/sys/fs/cgroup/{name}")),
            files[1],
        )
    } else {
        return None;
    };
    std::fs::create_dir_all(&dir).ok()?;
    std::fs::write(dir.join(file), value).ok()?;
    Some(dir)
}

/// Removes a test's cgroup once its last task is gone (a task killed by
/// the OOM killer leaves the group a moment after its parent reaps it).
fn remove_group(dir: &std::path::Path) {
    for _ in 0..50 {
        if std::fs::remove_dir(dir).is_ok() || !dir.exists() {
            return;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// `herd ARGS` started inside cgroup `dir` (and its programs with it).
fn herd_in(dir: &std::path::Path, args: &[&str]) -> std::process::Output {
    let h = herd();
    let script = format!("echo $$ > {}/cgroup.procs && exec \"$0\" \"$@\"", dir.display());
    std::process::Command::new("sh")
        .envs(common::envs_of(&h))
        .args(["-c", &script, h.get_program().to_str().unwrap()])
        .args(args)
        .output()
        .unwrap()
}

/// Out of processes (a cgroup's `pids.max`): herd says what it could not
/// start and exits 3, the machine's state, not 2, bad input (issue 25,
/// item 8: `herd run` said 2), leaving nothing behind.
#[test]
fn out_of_processes_is_exit_3_with_the_reason() {
    let _turn = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    // herd itself (one task; its threads count too) and nothing else.
    let Some(dir) = limited_group("pids", ["pids.max", "pids.max"], "1") else {
        eprintln!("no pids controller here: skipped");
        return;
    };
    let run = herd_in(&dir, &["run", "--", "true"]);
    let batch_dir = tempfile::tempdir().unwrap();
    let batch = batch_dir.path().join("b.toml");
    std::fs::write(
        &batch,
        "[[program]]\nname = \"c\"\ncmd = [\"true\"]\ncopies = 2\n",
    )
    .unwrap();
    let logs = batch_dir.path().join("logs");
    let batched = herd_in(
        &dir,
        &["batch", batch.to_str().unwrap(), "--logs", logs.to_str().unwrap()],
    );
    remove_group(&dir);
    for (what, out) in [("run", run), ("batch", batched)] {
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(3), "{what}: {stderr}");
        assert!(
            stderr.contains("cannot run") && stderr.contains("Resource temporarily unavailable"),
            "{what}: {stderr}"
        );
    }
}

/// A program of 300 threads under an open-file limit of 256: herd sees
/// every thread (it raises its own soft limit to the hard one; where it
/// cannot, it reads the rest by path and says so), and the program keeps
/// the limit it was given. Before, herd silently watched 123 of the 301.
#[test]
fn a_low_open_file_limit_loses_no_thread() {
    let _turn = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let program = "import threading, time, resource\n\
                   print('soft', resource.getrlimit(resource.RLIMIT_NOFILE)[0], flush=True)\n\
                   ts = [threading.Thread(target=time.sleep, args=(3,)) for _ in range(300)]\n\
                   [t.start() for t in ts]\n[t.join() for t in ts]";
    let h = herd();
    for (ulimit, warned) in [("-Sn 256", false), ("-n 256", true)] {
        let out = std::process::Command::new("sh")
            .envs(common::envs_of(&h))
            .args([
                "-c",
                &format!("ulimit {ulimit} && exec \"$0\" run --policy static:compact --period-ms 50 -- \"$1\" -c \"$2\""),
                h.get_program().to_str().unwrap(),
                &common::python(),
                program,
            ])
            .output()
            .unwrap();
        let (stdout, stderr) = (
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr),
        );
        assert!(out.status.success(), "{ulimit}: {stderr}");
        assert!(
            stdout.contains("soft 256"),
            "{ulimit}: the program's limit: {stdout}"
        );
        assert!(stderr.contains("up to 301 threads"), "{ulimit}: {stderr}");
        assert_eq!(
            stderr.contains("for want of descriptors"),
            warned,
            "{ulimit}: {stderr}"
        );
    }
    // A batch says the same in its `--json`: each run's `degraded`.
    let dir = tempfile::tempdir().unwrap();
    let batch = dir.path().join("b.toml");
    std::fs::write(
        &batch,
        format!(
            "[[program]]\nname = \"t\"\ncmd = [{:?}, \"-c\", {program:?}]\n",
            common::python()
        ),
    )
    .unwrap();
    let out = std::process::Command::new("sh")
        .envs(common::envs_of(&h))
        .args([
            "-c",
            "ulimit -n 256 && exec \"$0\" batch \"$1\" --json --logs \"$2\"",
            h.get_program().to_str().unwrap(),
            batch.to_str().unwrap(),
            dir.path().join("logs").to_str().unwrap(),
        ])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let doc: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let degraded = doc["runs"][0]["degraded"].as_array().unwrap();
    assert!(
        degraded
            .iter()
            .any(|d| d.as_str().unwrap().contains("read by path")),
        "{degraded:?}"
    );
}

/// Whether a process here may lower its OOM score (what herd's guard asks).
fn may_lower_oom_score() -> bool {
    std::process::Command::new("sh")
        .args(["-c", "echo -1 > /proc/self/oom_score_adj"])
        .stderr(std::process::Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

/// herd in a cgroup whose memory limit cannot hold its batch: the kernel's
/// out-of-memory killer ends herd (or a program); afterwards nothing is
/// stopped, frozen or confined, and no group of herd's is left.
#[test]
fn the_oom_killer_taking_herd_leaves_nothing_behind() {
    let _turn = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    common::adopt_orphans();
    let Some(dir) = limited_group(
        "memory",
        ["memory.limit_in_bytes", "memory.max"],
        &(6 << 20).to_string(),
    ) else {
        eprintln!("no memory controller here: skipped");
        return;
    };
    let _ = std::fs::write(dir.join("memory.swappiness"), "0");
    let tmp = tempfile::tempdir().unwrap();
    let batch = tmp.path().join("b.toml");
    std::fs::write(
        &batch,
        "[[program]]\nname = \"s\"\ncmd = [\"sleep\", \"2\"]\ncopies = 20\n",
    )
    .unwrap();
    let logs = tmp.path().join("logs");
    let mut outcomes = Vec::new();
    for pause in ["signals", "freezer"] {
        let out = herd_in(
            &dir,
            &[
                "batch",
                batch.to_str().unwrap(),
                "--policy",
                &common::taking_turns(),
                "--pause",
                pause,
                "--period-ms",
                "20",
                "--logs",
                logs.to_str().unwrap(),
            ],
        );
        outcomes.push(out.status);
        let mut left = left_behind(pause, None, "herd-[0-9]*");
        // Where herd may not lower its guard's OOM score (a container, as
        // here), the OOM killer can take the guard with herd: the groups
        // are left, empty, and the next herd releases them.
        if !left.is_empty() && !may_lower_oom_score() {
            let next = herd()
                // The freezer: a run sweeps the hierarchies it uses.
                .args(["batch", batch.to_str().unwrap(), "--pause", "freezer", "--logs"])
                .arg(&logs)
                .output()
                .unwrap();
            assert!(next.status.success(), "{}", String::from_utf8_lossy(&next.stderr));
            left = left_behind(pause, None, "herd-[0-9]*");
        }
        assert!(left.is_empty(), "{left:#?}");
    }
    remove_group(&dir);
    println!("outcomes under 6 MiB: {outcomes:?}");
}

/// A killed herd's keeper gives masks back only once the cgroup guard has
/// ended: a mask given while the guard moved the thread out of its cpuset
/// could end on the cpuset's CPUs. A `sleep` stands for the guard here.
#[test]
fn the_keeper_gives_masks_back_after_the_cgroup_guard() {
    // One at a time, as the module says: the other tests take what they
    // find among this process's children and orphans for their own.
    let _turn = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    use herd_runtime::{control, procfs};
    use std::io::Write;
    let all = control::affinity(std::process::id() as i32).unwrap();
    let first = all.iter().next().unwrap();
    let one = herd_topo::CpuSet::single(first);
    let mut target = std::process::Command::new("sleep").arg("30").spawn().unwrap();
    let pid = target.id() as i32;
    control::set_affinity(pid, &one).unwrap();
    let start = procfs::start_time(std::path::Path::new("/proc"), pid).unwrap();
    let mut guard = std::process::Command::new("sleep").arg("1").spawn().unwrap();
    let mut keeper = herd()
        .args([
            herd_runtime::cgroup::GUARD_ARG,
            herd_runtime::keeper::AFTER_ARG,
            &guard.id().to_string(),
        ])
        .stdin(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut pipe = keeper.stdin.take().unwrap();
    writeln!(pipe, "pin {pid} {start} {all}").unwrap();
    // herd's end closes without `done`: as when herd is killed.
    drop(pipe);
    std::thread::sleep(Duration::from_millis(400));
    let meanwhile = control::affinity(pid).unwrap();
    guard.wait().unwrap();
    let kept = keeper.wait().unwrap();
    let after = control::affinity(pid).unwrap();
    let _ = target.kill();
    target.wait().unwrap();
    assert!(kept.success());
    assert_eq!(meanwhile, one, "the keeper acted before the guard ended");
    assert_eq!(after, all, "the keeper did not give the mask back");
}
