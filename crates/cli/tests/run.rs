//! `herd run` on this machine: placement read back from /proc, output and
//! exit code passed through, and safety when herd is signalled or killed.

mod common;
use common::{herd, realtime_allowed, state_of, threads_program, working_threads_program};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

#[test]
fn static_compact_puts_every_working_thread_on_its_cpu() {
    let out = herd()
        .args([
            "run",
            "--policy",
            "static:compact",
            "--period-ms",
            "20",
            // Where the policy places, not where a guard probe lets go.
            "--guard",
            "off",
            "--",
            &common::python(),
            "-c",
            &working_threads_program(0.6, 1.0),
        ])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(
        out.status.code(),
        Some(3),
        "the program's exit code passes through: {stderr}"
    );
    let machine = herd_topo::Machine::this_machine().unwrap();
    let order: Vec<u32> = {
        // Compact order: every sibling of a core, core after core, by topology.
        let mut cores: Vec<&herd_topo::Core> = machine.cores().iter().collect();
        cores.sort_by_key(|c| (c.package, c.cpus.first()));
        cores.iter().flat_map(|c| c.cpus.iter()).collect()
    };
    let lines: Vec<(u32, String)> = String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .map(|l| {
            let (tid, cpus) = l.split_once(' ').unwrap();
            (tid.parse().unwrap(), cpus.to_string())
        })
        .collect();
    assert_eq!(lines.len(), 4, "main thread and three workers: {lines:?}");
    // The main thread runs on the first CPU of the order, placed at first
    // sight; the workers take places as each is seen working, a CPU of
    // the order each, as many CPUs as there are workers (or every CPU).
    assert_eq!(lines[0].1, order[0].to_string(), "{lines:?}\n{stderr}");
    let workers: std::collections::BTreeSet<u32> = lines[1..]
        .iter()
        .map(|(_, c)| {
            c.parse()
                .unwrap_or_else(|_| panic!("one CPU each: {lines:?}\n{stderr}"))
        })
        .collect();
    assert!(workers.iter().all(|c| order.contains(c)), "{lines:?}");
    assert_eq!(workers.len(), 3.min(order.len()), "{lines:?}\n{stderr}");
    assert!(stderr.contains("4 placements"), "{stderr}");
}

#[test]
fn sigterm_restores_and_passes_the_signal_on() {
    let child = herd()
        .args([
            "run",
            "--period-ms",
            "20",
            "--",
            &common::python(),
            "-c",
            &threads_program(30.0, 30.0),
        ])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_millis(500));
    // SAFETY: kill has no memory-safety preconditions.
    unsafe { libc::kill(child.id() as i32, libc::SIGTERM) };
    let start = Instant::now();
    let out = child.wait_with_output().unwrap();
    assert!(
        start.elapsed() < Duration::from_secs(10),
        "herd and the program ended promptly"
    );
    // The program died of the forwarded SIGTERM: 128 + 15, as a shell reports.
    assert_eq!(
        out.status.code(),
        Some(143),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(String::from_utf8_lossy(&out.stderr).contains("passed the signal on"));
}

#[test]
fn a_stopped_program_continues_when_herd_is_killed() {
    let mut herd_proc = herd()
        .args(["run", "--period-ms", "20", "--", "sleep", "5"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_millis(300));
    // Find herd's child, stop it as a pausing policy would, then SIGKILL herd.
    let pid = *common::children_of(herd_proc.id())
        .first()
        .expect("herd has a child");
    // SAFETY: plain kill calls.
    unsafe { libc::kill(pid, libc::SIGSTOP) };
    std::thread::sleep(Duration::from_millis(100));
    assert_eq!(state_of(pid), Some('T'));
    herd_proc.kill().unwrap();
    herd_proc.wait().unwrap();
    // PR_SET_PDEATHSIG = SIGCONT: the kernel continues the orphan.
    let deadline = Instant::now() + Duration::from_secs(3);
    while state_of(pid) == Some('T') && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
    }
    let state = state_of(pid);
    // SAFETY: clean up the orphan.
    unsafe { libc::kill(pid, libc::SIGKILL) };
    assert_ne!(state, Some('T'), "the program was left stopped");
}

#[test]
fn threads_flag_sets_omp_and_the_template() {
    let out = herd()
        .args([
            "run",
            "--threads",
            "3",
            "--",
            "sh",
            "-c",
            "echo $OMP_NUM_THREADS {threads}",
        ])
        .output()
        .unwrap();
    assert!(out.status.success());
    assert_eq!(String::from_utf8_lossy(&out.stdout).trim(), "3 3");
    let bad = herd()
        .args(["run", "--threads", "0", "--", "true"])
        .output()
        .unwrap();
    assert_eq!(bad.status.code(), Some(2));
}

#[test]
fn bad_run_input_is_exit_2() {
    for args in [
        vec!["run", "--", "/nonexistent/program"],
        vec!["run", "--policy", "nope", "--", "true"],
        vec!["run", "--period-ms", "0", "--", "true"],
        vec!["run", "--loop-share", "0", "--", "true"],
        vec!["run", "--loop-share", "150", "--", "true"],
        vec!["run"],
        // Simulation only: exact solo profiles exist only there.
        vec!["run", "--policy", "bw:oracle", "--", "true"],
        vec!["batch", "--policy", "bw:oracle", "/dev/null"],
        vec!["run", "--policy", "pack:palm:cores=2,cores=3", "--", "true"],
        vec!["run", "--policy", "pack:palm:cores=99999", "--", "true"],
    ] {
        let out = herd().args(&args).output().unwrap();
        assert_eq!(
            out.status.code(),
            Some(2),
            "{args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
}

#[test]
fn completed_runs_are_recorded_and_survive_a_killed_herd() {
    let tmp = tempfile::tempdir().unwrap();
    let db = tmp.path().join("herd.db");
    let db_arg = db.to_str().unwrap();
    for code in ["0", "5"] {
        let out = herd()
            .args(["run", "--db", db_arg, "--", "sh", "-c", &format!("exit {code}")])
            .output()
            .unwrap();
        assert_eq!(out.status.code().unwrap().to_string(), code);
    }
    // Kill herd in the middle of a third run: the two completed runs stay.
    let mut child = herd()
        .args(["run", "--db", db_arg, "--", "sleep", "5"])
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_millis(300));
    let orphan: Option<i32> = std::fs::read_to_string(format!("/proc/{0}/task/{0}/children", child.id()))
        .ok()
        .and_then(|c| c.split_whitespace().next()?.parse().ok());
    child.kill().unwrap();
    child.wait().unwrap();
    if let Some(pid) = orphan {
        // SAFETY: plain kill of the program herd left behind.
        unsafe { libc::kill(pid, libc::SIGKILL) };
    }
    assert!(herd_store::integrity_ok(&db));
    let store = herd_store::SqliteStore::open(&db).unwrap();
    let programs = store.programs().unwrap();
    assert_eq!(programs.len(), 2, "{programs:?}");
    use herd_store::ProfileStore;
    let codes: Vec<Option<i32>> = programs
        .iter()
        .flat_map(|(p, _)| store.runs(p).unwrap())
        .map(|r| r.exit_code)
        .collect();
    assert_eq!(codes, vec![Some(0), Some(5)]);
}

/// A program that churns: threads created and joined in a tight loop, and
/// children forked and exec'd constantly, for about 1.5 s; exits 7.
const CHURN: &str = "import os, threading, time, subprocess\n\
end = time.time() + 1.5\n\
n = 0\n\
while time.time() < end:\n\
\x20   ts = [threading.Thread(target=lambda: None) for _ in range(8)]\n\
\x20   [t.start() for t in ts]\n\
\x20   [t.join() for t in ts]\n\
\x20   if n % 20 == 0:\n\
\x20       subprocess.run(['true'])\n\
\x20       pid = os.fork()\n\
\x20       if pid == 0:\n\
\x20           os._exit(0)\n\
\x20       os.waitpid(pid, 0)\n\
\x20   n += 1\n\
os._exit(7)\n";

#[test]
fn churning_programs_never_crash_herd() {
    for policy in ["static:compact", "static:scatter:places=cores", "linux"] {
        let out = herd()
            .args([
                "run",
                "--policy",
                policy,
                "--period-ms",
                "5",
                "--",
                &common::python(),
                "-c",
                CHURN,
            ])
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(7), "{policy}: {err}");
        assert!(!err.contains("panicked"), "{policy}: {err}");
    }
}

#[test]
fn memory_traffic_is_reported_only_where_the_machine_measures_it() {
    let doctor = herd().args(["doctor", "--json"]).output().unwrap();
    let v: serde_json::Value = serde_json::from_slice(&doctor.stdout).unwrap();
    let has = |name: &str| {
        v["capabilities"]
            .as_array()
            .unwrap()
            .iter()
            .any(|c| c["name"] == name && c["available"] == true)
    };
    let measured = has("hw_counters.llc_misses") || has("resctrl.mbm");
    // A program that ends before herd sees a thread, and one that it sees.
    for cmd in [&["true"][..], &["sleep", "0.3"][..]] {
        let out = herd()
            .args(["run", "--period-ms", "20", "--"])
            .args(cmd)
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        if !measured {
            assert!(!stderr.contains("memory traffic"), "{cmd:?}: {stderr}");
        }
    }
}

/// Whether this machine has no SMT and one package: then S0's two orders
/// coincide.
fn no_smt_one_package() -> bool {
    let cpus = std::fs::read_dir("/sys/devices/system/cpu")
        .unwrap()
        .filter_map(|e| e.ok())
        .filter(|e| {
            let n = e.file_name().to_string_lossy().into_owned();
            n.strip_prefix("cpu").is_some_and(|d| d.parse::<u32>().is_ok())
        })
        .map(|e| e.path().join("topology"))
        .filter(|t| t.exists())
        .collect::<Vec<_>>();
    let read = |p: std::path::PathBuf| std::fs::read_to_string(p).unwrap_or_default().trim().to_string();
    let single_threads = cpus
        .iter()
        .all(|t| !read(t.join("thread_siblings_list")).contains([',', '-']));
    let packages: std::collections::BTreeSet<String> =
        cpus.iter().map(|t| read(t.join("physical_package_id"))).collect();
    single_threads && packages.len() == 1
}

#[test]
fn smt_policies_run_here_and_explain_why_they_place_alike() {
    let mut placements = Vec::new();
    for policy in ["smt:speed", "smt:spn"] {
        let out = herd()
            .args([
                "run",
                "--policy",
                policy,
                "--period-ms",
                "20",
                "--guard",
                "off",
                "--explain",
                "--",
                &common::python(),
                "-c",
                &threads_program(0.5, 0.8),
            ])
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(3), "{policy}: {stderr}");
        assert!(
            stderr.contains("unit 1 of"),
            "{policy} explains each placement: {stderr}"
        );
        if no_smt_one_package() {
            assert!(
                stderr.contains("place alike") && stderr.contains("no core has SMT siblings"),
                "{policy}: {stderr}"
            );
        }
        let cpus: Vec<String> = String::from_utf8_lossy(&out.stdout)
            .lines()
            .map(|l| l.split_whitespace().nth(1).unwrap_or("").to_string())
            .collect();
        assert_eq!(cpus.len(), 4, "{policy}: {stderr}");
        placements.push(cpus);
    }
    if no_smt_one_package() {
        assert_eq!(placements[0], placements[1], "alike orders place alike");
    }
}

/// `herd run --period-ms PERIOD --policy POLICY --guard off --trace TRACE
/// -- CMD`: what the policy places, which a guard back-off during a loaded
/// start-up would cut short (CI, twice; the guard has its own tests).
fn traced_run(trace: &std::path::Path, period_ms: &str, policy: &str, cmd: &[&str]) -> std::process::Output {
    herd()
        .args([
            "run",
            "--period-ms",
            period_ms,
            "--policy",
            policy,
            "--guard",
            "off",
            "--trace",
        ])
        .arg(trace)
        .arg("--")
        .args(cmd)
        .output()
        .unwrap()
}

/// `--trace` writes one JSON line per decision with every thread and the
/// placements made; a path that cannot be written is refused before the
/// program starts.
#[test]
fn trace_writes_a_line_per_decision() {
    let dir = tempfile::tempdir().unwrap();
    let trace = dir.path().join("t.jsonl");
    let out = traced_run(
        &trace,
        "20",
        "static:scatter",
        &[
            common::python().as_str(),
            "-c",
            &working_threads_program(0.2, 0.8),
        ],
    );
    assert_eq!(
        out.status.code(),
        Some(3),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let lines = common::json_lines(&trace);
    assert!(lines.len() >= 5, "{} lines", lines.len());
    let most = lines
        .iter()
        .map(|l| l["tasks"].as_array().unwrap().len())
        .max()
        .unwrap();
    assert_eq!(most, 4, "the main thread and three workers");
    let placed: usize = lines.iter().map(|l| l["placed"].as_array().unwrap().len()).sum();
    assert!(
        placed >= 4,
        "static:scatter pinned every thread: {placed}; {}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        lines
            .windows(2)
            .all(|w| w[0]["t_s"].as_f64() < w[1]["t_s"].as_f64())
    );
    let bad = herd()
        .args(["run", "--trace", "/nonexistent/dir/t.jsonl", "--", "true"])
        .output()
        .unwrap();
    assert_eq!(bad.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&bad.stderr).contains("--trace /nonexistent/dir/t.jsonl"));
}

/// `--realtime` raises herd's loop only: the program it starts runs under
/// the normal policy (SCHED_RESET_ON_FORK), whether or not the machine
/// allows SCHED_FIFO (if it does not, herd says so and goes on).
#[test]
fn realtime_never_reaches_the_program() {
    let out = herd()
        .args(["run", "--realtime", "--", "sh", "-c", "chrt -p $$"])
        .output()
        .unwrap();
    let (stdout, stderr) = (
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr),
    );
    assert!(out.status.success(), "{stderr}");
    assert!(stdout.contains("SCHED_OTHER"), "{stdout}");
    assert_eq!(!stderr.contains("--realtime:"), realtime_allowed(), "{stderr}");
}

/// The power model's average is over the window its energy covers: a run of
/// 50 ms of an idle program reads about the node's idle power, not the
/// energy of herd's set-up divided by the program's 50 ms. (`sleep`, not
/// `true`: in a fresh-clone CI run, with other test binaries beside it,
/// the summary said `true` used 0.01 s of CPU in a 0.00 s run, and the
/// model read 103.5 W: over a window that short, `true` was the load.)
#[test]
fn a_short_idle_run_reads_idle_power() {
    let out = herd().args(["run", "--", "sleep", "0.05"]).output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    let w: f64 = stderr
        .split("J (")
        .nth(1)
        .and_then(|rest| rest.split(" W)").next())
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| panic!("no power in: {stderr}"));
    // S0's Dell C6100 preset: 76.11 W idle, and `true` barely runs.
    assert!((76.0..100.0).contains(&w), "{w} W: {stderr}");
}

/// The last `--trace` line that satisfies `ok`, waiting up to 20 s for it.
fn wait_for_trace(path: &std::path::Path, ok: impl Fn(&serde_json::Value) -> bool) -> serde_json::Value {
    let start = Instant::now();
    loop {
        let text = std::fs::read_to_string(path).unwrap_or_default();
        // The last whole line (the writer may be mid-line).
        if let Some(v) = text
            .lines()
            .rev()
            .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
            .filter(|v| v.get("herd_trace").is_none())
            .find(|v| ok(v))
        {
            return v;
        }
        assert!(
            start.elapsed() < Duration::from_secs(20),
            "no such trace line in {text:.2000}"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[test]
fn a_core_budget_from_a_file_moves_every_thread_and_a_bad_file_is_survived() {
    let tmp = tempfile::tempdir().unwrap();
    let (budget, trace) = (tmp.path().join("budget"), tmp.path().join("trace.jsonl"));
    let bench = concat!(env!("CARGO_MANIFEST_DIR"), "/../../target/workloads/barrier-hb");
    // Refused before anything runs: a policy that ignores budgets, a missing
    // or bad file.
    std::fs::write(&budget, "2\n").unwrap();
    for (policy, file, want) in [
        ("linux", budget.clone(), "does not follow a core budget"),
        ("pack:tp", tmp.path().join("none"), "No such file"),
    ] {
        let out = herd()
            .args(["run", "--policy", policy, "--cores-from"])
            .arg(&file)
            .args(["--", "true"])
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{err}");
        assert!(err.contains(want), "{err}");
    }
    let child = common::EndOnDrop::new(
        herd()
            .args([
                "run",
                "--policy",
                "pack:palm:cores=2",
                "--period-ms",
                "5",
                "--guard",
                "off",
                "--explain",
                "--cores-from",
            ])
            .arg(&budget)
            .arg("--trace")
            .arg(&trace)
            .args([
                "--",
                bench,
                "--threads",
                "3",
                "--phases",
                "1000000",
                "--mode",
                "block",
            ])
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap(),
    );
    let workers_on = |v: &serde_json::Value| -> Vec<String> {
        // Where the workers (threads that beat) were last placed.
        v["placed"]
            .as_array()
            .unwrap()
            .iter()
            .filter_map(|p| p["cpus"].as_str().map(str::to_string))
            .collect()
    };
    // Every thread seen first: PALM's turns between full observations
    // (100 ms apart) see only the threads the last one saw, and a budget
    // changed before the workers were all seen placed only those (CI, once).
    let all_seen = |v: &serde_json::Value| v["tasks"].as_array().is_some_and(|t| t.len() == 4);
    wait_for_trace(&trace, |v| {
        v["budget_cores"] == 2 && !workers_on(v).is_empty() && all_seen(v)
    });
    // The controller takes a core away (atomically, as documented).
    std::fs::write(tmp.path().join("next"), "1").unwrap();
    std::fs::rename(tmp.path().join("next"), &budget).unwrap();
    wait_for_trace(&trace, |v| v["budget_cores"] == 1 && !workers_on(v).is_empty());
    // The turn that saw the change (a later turn may move one thread alone,
    // and a loaded machine polls the trace later).
    let after = common::json_lines(&trace)
        .into_iter()
        .find(|v| v["budget_cores"] == 1 && !workers_on(v).is_empty())
        .expect("the turn wait_for_trace saw");
    let cpus = workers_on(&after);
    assert_eq!(cpus.len(), 4, "every thread placed again: {after}");
    assert!(
        cpus.iter().all(|c| c == &cpus[0] && !c.contains(['-', ','])),
        "one CPU: {after}"
    );
    // A bad file: a warning, and the budget stays.
    std::fs::write(&budget, "lots").unwrap();
    std::thread::sleep(Duration::from_millis(300));
    // SAFETY: kill has no memory-safety preconditions.
    unsafe { libc::kill(child.id() as i32, libc::SIGTERM) };
    let out = child.take().wait_with_output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("the core budget is now 1"), "{err}");
    assert!(
        err.contains("'lots' is not a whole number of cores; the budget stays 1"),
        "{err}"
    );
    let last = wait_for_trace(&trace, |_| true);
    assert_eq!(last["budget_cores"], 1, "{last}");
}

/// Three Python threads that beat through $HERD_PROGRESS for `secs` seconds.
const PROGRESS_PROGRAM: &str = "import os, threading, time\n\
fd = os.open(os.environ['HERD_PROGRESS'], os.O_WRONLY | os.O_APPEND)\n\
def work():\n\
\x20   tid, n, end = threading.get_native_id(), 0, time.time() + 1.5\n\
\x20   while time.time() < end:\n\
\x20       sum(range(2000)); n += 1\n\
\x20       os.write(fd, f'{tid} {n}\\n'.encode())\n\
ts = [threading.Thread(target=work) for _ in range(3)]\n\
[t.start() for t in ts]; [t.join() for t in ts]\n\
os.write(fd, b'not a report\\n')\n";

#[test]
fn the_python_heartbeat_module_reaches_palm_through_shared_memory() {
    let tmp = tempfile::tempdir().unwrap();
    let trace = tmp.path().join("trace.jsonl");
    let program = "import threading, time, herd_heartbeat\n\
def work():\n\
\x20   end = time.time() + 1.5\n\
\x20   while time.time() < end:\n\
\x20       sum(range(2000)); herd_heartbeat.beat()\n\
ts = [threading.Thread(target=work) for _ in range(3)]\n\
[t.start() for t in ts]; [t.join() for t in ts]\n";
    let mut cmd = herd();
    cmd.env("HERD_HEARTBEAT_DIR", tmp.path()).env(
        "PYTHONPATH",
        concat!(env!("CARGO_MANIFEST_DIR"), "/../../integrations/python"),
    );
    let out = common::palm_python(cmd, &[], &trace, program);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let seen = common::beats_in_trace(&trace);
    assert!(seen.iter().any(|(n, _)| *n == 3), "three threads beat: {seen:?}");
    assert!(seen.windows(2).any(|w| w[1].1 > w[0].1), "{seen:?}");
    // The power model's estimate covers the run once: energy over average
    // power is the run's length (progress-only turns counted twice once).
    let err = String::from_utf8_lossy(&out.stderr);
    let num_before = |text: &str, unit: &str| -> f64 {
        let at = text.find(unit).unwrap_or_else(|| panic!("no {unit:?} in {text}"));
        let start = text[..at].rfind(' ').map_or(0, |i| i + 1);
        text[start..at].trim().trim_start_matches('(').parse().unwrap()
    };
    let run_s = num_before(&err[err.find(" for ").unwrap() + 5..], " s:");
    let tail = &err[err.find("estimates").unwrap()..];
    let (energy_j, power_w) = (num_before(tail, " J"), num_before(tail, " W)"));
    assert!(
        energy_j / power_w < run_s * 1.3 + 0.05,
        "{energy_j} J at {power_w} W over {run_s} s"
    );
    // Once PALM sees heartbeats, turns read only them; the full turns
    // between still carry every thread's CPU time (3 threads sharing one
    // GIL for 1.5 s: about 1.5 s).
    let lines = common::json_lines(&trace);
    let cheap: Vec<_> = lines.iter().filter(|l| l["progress_only"] == true).collect();
    // How many depends on the loop's cost cap, which a loaded test machine
    // moves; alone on the 2-CPU VM it was 3396 of 3586.
    assert!(
        !cheap.is_empty(),
        "none of {} turns was progress-only",
        lines.len()
    );
    let cpu_ns = |l: &serde_json::Value| -> u64 {
        l["tasks"]
            .as_array()
            .unwrap()
            .iter()
            .filter_map(|t| t["cpu_ns"].as_u64())
            .sum()
    };
    assert!(cheap.iter().all(|l| cpu_ns(l) == 0));
    let total_s = lines.iter().map(cpu_ns).sum::<u64>() as f64 * 1e-9;
    // Against the kernel's count of the program's CPU time (the summary),
    // not a fixed share of the 1.5 s: on a loaded machine the program gets
    // less CPU (0.74 s in a loaded suite), and a bound on it failed there.
    // The trace misses at most what ran after its last full turn (full
    // turns are at most 100 ms apart: one CPU's worth) and the exit.
    let program_cpu_s = num_before(&err[err.find(" s: ").unwrap() + 4..], " s CPU");
    assert!(
        total_s > 0.3 && total_s >= program_cpu_s - 0.15,
        "{total_s} s of CPU in the trace, {program_cpu_s} s by the kernel"
    );
    let left: Vec<_> = std::fs::read_dir(tmp.path())
        .unwrap()
        .filter_map(|e| e.ok())
        .filter(|e| e.file_name().to_string_lossy().starts_with("herd-hb."))
        .collect();
    assert!(left.is_empty(), "the module removed its file at exit");
}

#[test]
fn the_python_module_marks_a_thread_exited_when_it_ends_and_not_from_a_fork() {
    let tmp = tempfile::tempdir().unwrap();
    let program = "import os, struct, threading, herd_heartbeat as hb\n\
def work():\n\
\x20   for _ in range(10): hb.beat()\n\
t = threading.Thread(target=work); t.start(); t.join()\n\
stay, go = threading.Event(), threading.Event()\n\
def live():\n\
\x20   hb.beat(); stay.set(); go.wait()\n\
u = threading.Thread(target=live); u.start(); stay.wait()\n\
flag = lambda slot: struct.unpack_from('=I', hb._state[0], 64 * (1 + slot) + 4)[0]\n\
pid = os.fork()\n\
if pid == 0: os._exit(0)\n\
os.waitpid(pid, 0)\n\
print('exited', flag(0), 'live', flag(1))\n\
go.set(); u.join()\n\
print('after', flag(1))\n";
    let out = Command::new("python3")
        .args(["-c", program])
        .env("HERD_HEARTBEAT_DIR", tmp.path())
        .env(
            "PYTHONPATH",
            concat!(env!("CARGO_MANIFEST_DIR"), "/../../integrations/python"),
        )
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert_eq!(text, "exited 1 live 0\nafter 1\n");
}

#[test]
fn progress_written_to_a_pipe_or_file_reaches_palm() {
    let tmp = tempfile::tempdir().unwrap();
    for (kind, path) in [
        ("pipe", tmp.path().join("progress")),
        ("file", tmp.path().join("log")),
    ] {
        if kind == "file" {
            std::fs::write(&path, "").unwrap();
        }
        let trace = tmp.path().join(format!("{kind}.jsonl"));
        let from = [std::ffi::OsStr::new("--progress-from"), path.as_os_str()];
        let out = common::palm_python(herd(), &from, &trace, PROGRESS_PROGRAM);
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(0), "{kind}: {err}");
        assert!(
            err.contains("1 line(s) ignored, the first 'not a report'"),
            "{kind}: {err}"
        );
        // Some decision saw three threads beating, growing from one to the next.
        let seen = common::beats_in_trace(&trace);
        assert!(seen.iter().any(|(n, _)| *n == 3), "{kind}: {seen:?}");
        assert!(seen.windows(2).any(|w| w[1].1 > w[0].1), "{kind}: {seen:?}");
        assert_eq!(
            path.exists(),
            kind == "file",
            "{kind}: a pipe herd made is removed, a file kept"
        );
    }
}

/// A program whose work runs in a process it forked (stress-ng's stressors,
/// a shell's commands): herd sees that process's thread, counts its CPU
/// time and places it.
#[test]
fn work_in_a_forked_process_is_seen_and_placed() {
    let dir = tempfile::tempdir().unwrap();
    let trace = dir.path().join("t.jsonl");
    let out = traced_run(
        &trace,
        "50",
        "static:compact",
        &[
            "sh",
            "-c",
            "(while :; do :; done) & child=$!; sleep 1.2; kill $child; wait",
        ],
    );
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let lines = common::json_lines(&trace);
    // The shell sleeps; its child spins. Somewhere past the first turns a
    // task used most of a 50 ms period, and herd placed it.
    let busy: Vec<u64> = lines
        .iter()
        .flat_map(|l| l["tasks"].as_array().unwrap().iter())
        .filter(|t| t["cpu_ns"].as_u64().unwrap_or(0) > 20_000_000)
        .map(|t| t["id"].as_u64().unwrap())
        .collect();
    assert!(!busy.is_empty(), "the forked worker is a task herd sees");
    let placed: Vec<u64> = lines
        .iter()
        .flat_map(|l| l["placed"].as_array().unwrap().iter())
        .filter_map(|p| p["id"].as_u64())
        .collect();
    assert!(
        busy.iter().any(|id| placed.contains(id)),
        "and places: {placed:?}"
    );
}

/// A program that ignores SIGINT: the first one herd passes on and waits;
/// a second makes herd leave it running, restored, and say so (issue 25:
/// only SIGKILL stopped herd).
#[test]
fn a_second_sigint_leaves_a_program_that_ignores_it_running() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("err");
    // A file, not a pipe: the program left running keeps herd's stderr open.
    let mut child = herd()
        .args([
            "run",
            "--policy",
            "static:compact",
            "--",
            "sh",
            "-c",
            "trap '' INT TERM; sleep 8",
        ])
        .stderr(std::fs::File::create(&log).unwrap())
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_millis(500));
    let program = common::children_of(child.id())[0];
    for _ in 0..2 {
        // SAFETY: a plain signal to our own child.
        unsafe { libc::kill(child.id() as i32, libc::SIGINT) };
        std::thread::sleep(Duration::from_millis(300));
    }
    let started = Instant::now();
    while child.try_wait().unwrap().is_none() {
        assert!(started.elapsed() < Duration::from_secs(3), "herd still waits");
        std::thread::sleep(Duration::from_millis(20));
    }
    let err = std::fs::read_to_string(&log).unwrap();
    assert!(err.contains("a second signal: leaving 1 running"), "{err}");
    assert!(
        matches!(state_of(program), Some('S' | 'R')),
        "{:?}",
        state_of(program)
    );
    // SAFETY: end the program herd left.
    unsafe { libc::kill(program, libc::SIGKILL) };
}
