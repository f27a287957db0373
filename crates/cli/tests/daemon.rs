//! `herd daemon`: rules place the processes they match and leave the rest
//! alone; a SIGKILL leaves nothing pinned, stopped or confined; a daemon
//! started again adopts what still runs; a bad config is refused at start
//! and at SIGHUP; `herd run` takes CPUs from it; its metrics pass promtool;
//! a job that starts more busy threads later gets more CPUs; a herd
//! installed under another name is still seen by the others.

mod common;

use common::allowed;

use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

fn cgroup(pid: u32) -> String {
    std::fs::read_to_string(format!("/proc/{pid}/cgroup")).unwrap()
}

/// A process no one else runs: `sleep` with a number only this test uses.
fn marked(n: u64) -> Child {
    Command::new("sleep").arg(n.to_string()).spawn().unwrap()
}

fn until(what: &str, secs: u64, mut ok: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(secs);
    while !ok() {
        assert!(Instant::now() < deadline, "timed out waiting for: {what}");
        std::thread::sleep(Duration::from_millis(25));
    }
}

struct Daemon {
    child: Child,
    dir: PathBuf,
}

impl Daemon {
    fn start(config: &Path, dir: &Path) -> Daemon {
        let child = Command::new(env!("CARGO_BIN_EXE_herd"))
            .args(["daemon", "--config"])
            .arg(config)
            .arg("--state-dir")
            .arg(dir)
            .env("HERD_RUN_DIR", dir)
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let d = Daemon {
            child,
            dir: dir.to_path_buf(),
        };
        until("the daemon's socket", 10, || d.status().is_some());
        d
    }

    fn status(&self) -> Option<serde_json::Value> {
        let out = Command::new(env!("CARGO_BIN_EXE_herd"))
            .args(["daemon", "status", "--json", "--state-dir"])
            .arg(&self.dir)
            .output()
            .unwrap();
        out.status
            .success()
            .then(|| serde_json::from_slice(&out.stdout).unwrap())
    }

    fn job(&self, pid: u32) -> Option<serde_json::Value> {
        self.status()?["jobs"]
            .as_array()?
            .iter()
            .find(|j| j["pid"] == pid)
            .cloned()
    }

    fn signal(&self, s: i32) {
        // SAFETY: plain kill of our child.
        unsafe { libc::kill(self.child.id() as i32, s) };
    }

    fn end(mut self, s: i32) -> (std::process::ExitStatus, String) {
        self.signal(s);
        let status = self.child.wait().unwrap();
        let mut err = String::new();
        self.child
            .stderr
            .take()
            .unwrap()
            .read_to_string(&mut err)
            .unwrap();
        (status, err)
    }
}

impl Drop for Daemon {
    /// A test that fails halfway leaves no daemon behind (SIGTERM: it lets
    /// go of its jobs), nor one holding the test's output pipes open.
    fn drop(&mut self) {
        if matches!(self.child.try_wait(), Ok(None)) {
            self.signal(libc::SIGTERM);
            let _ = self.child.wait();
        }
    }
}

/// A `static:compact` rule named `name` for command lines matching `cmdline`.
fn rule_for(name: &str, cmdline: &str) -> String {
    format!(
        "[[rule]]\nname = \"{name}\"\npolicy = \"static:compact\"\n[rule.match]\ncmdline = \"{cmdline}\"\n"
    )
}

fn rule(name: &str, n: u64) -> String {
    rule_for(name, &format!("^sleep {n}$"))
}

#[test]
fn rules_place_what_they_match_a_kill_leaves_nothing_and_a_restart_adopts() {
    let dir = tempfile::tempdir().unwrap();
    let base = 7_100_000 + u64::from(std::process::id() % 1000) * 10;
    let config = dir.path().join("herd.toml");
    std::fs::write(
        &config,
        format!(
            "[daemon]\nscan_interval_ms = 100\n{}{}",
            rule("a", base + 1),
            rule("b", base + 2)
        ),
    )
    .unwrap();
    let mut progs = [marked(base + 1), marked(base + 2), marked(base + 3)];
    let ids: Vec<u32> = progs.iter().map(Child::id).collect();
    let before: Vec<(String, String)> = ids.iter().map(|&p| (allowed(p), cgroup(p))).collect();
    let d = Daemon::start(&config, &dir.path().join("state"));
    until("both matched processes placed", 15, || {
        ids[..2]
            .iter()
            .all(|&p| d.job(p).is_some_and(|j| j["state"] == "managed"))
            && ids[..2].iter().all(|&p| allowed(p) != before[0].0)
    });
    let placed: Vec<String> = ids[..2].iter().map(|&p| allowed(p)).collect();
    let (a, b) = (&placed[0], &placed[1]);
    // static:compact puts a one-thread job on one CPU; the two are disjoint.
    assert!(!a.contains(['-', ',']) && !b.contains(['-', ',']), "{a} / {b}");
    assert_ne!(a, b, "two rules' jobs share no CPU");
    let status = d.status().unwrap();
    assert_eq!(d.job(ids[0]).unwrap()["rule"], "a");
    assert_eq!(d.job(ids[1]).unwrap()["rule"], "b");
    assert!(d.job(ids[2]).is_none(), "{status}");
    assert_eq!(allowed(ids[2]), before[2].0, "an unmatched process is untouched");

    // `herd attach` leaves a process the daemon manages to the daemon.
    let attach = Command::new(env!("CARGO_BIN_EXE_herd"))
        .args(["attach", &ids[0].to_string()])
        .env("HERD_RUN_DIR", dir.path().join("state"))
        .output()
        .unwrap();
    let said = String::from_utf8_lossy(&attach.stderr);
    assert_eq!(attach.status.code(), Some(2), "{said}");
    assert!(
        said.contains("managed by the herd daemon already (rule 'a'"),
        "{said}"
    );

    // SIGKILL: the keepers give every thread its affinity back.
    let (st, _) = d.end(libc::SIGKILL);
    assert!(!st.success());
    until("affinities given back after the kill", 10, || {
        ids.iter().zip(&before).all(|(&p, b)| allowed(p) == b.0)
    });
    for (&p, b) in ids.iter().zip(&before) {
        assert_eq!(cgroup(p), b.1, "process {p} left in a cgroup");
        assert!(
            matches!(common::state_of(p as i32), Some('S' | 'R')),
            "process {p} stopped"
        );
    }

    // A daemon started again adopts them: the same CPUs, the same processes.
    let d = Daemon::start(&config, &dir.path().join("state"));
    until("both adopted", 15, || {
        ids[..2]
            .iter()
            .zip(&placed)
            .all(|(&p, c)| d.job(p).is_some_and(|j| j["source"] == "adopted") && &allowed(p) == c)
    });
    assert_eq!(allowed(ids[2]), before[2].0);
    let (st, err) = d.end(libc::SIGTERM);
    assert!(st.success(), "{err}");
    assert!(err.contains("adopted"), "{err}");
    for (&p, b) in ids.iter().zip(&before) {
        assert_eq!(allowed(p), b.0, "a stopped daemon restores process {p}");
    }
    for p in &mut progs {
        assert!(
            p.try_wait().unwrap().is_none(),
            "no program was restarted or ended"
        );
        p.kill().unwrap();
        p.wait().unwrap();
    }
}

#[test]
fn a_bad_config_is_refused_at_start_and_at_sighup_keeping_the_old_one() {
    let dir = tempfile::tempdir().unwrap();
    let bad = dir.path().join("bad.toml");
    for (text, says) in [
        (
            "[[rule]]\nname = \"x\"\npolicy = \"numa:magic\"\n[rule.match]\ncomm = \"a\"\n",
            "policy",
        ),
        (
            "[[rule]]\nname = \"x\"\npolicy = \"linux\"\n[rule.match]\ncomm = \"[a\"\n",
            "bad glob",
        ),
        (
            "[[rule]]\nname = \"x\"\npolicy = \"linux\"\n[rule.match]\ncmdline = \"(a\"\n",
            "bad regex",
        ),
        (
            "[[rule]]\nname = \"x\"\npolicy = \"linux\"\nreserve_cpus = \"0\"\n[rule.match]\ncomm = \"a\"\n\
             [[rule]]\nname = \"y\"\npolicy = \"linux\"\nreserve_cpus = \"0\"\n[rule.match]\ncomm = \"b\"\n",
            "overlaps rule 'x'",
        ),
    ] {
        std::fs::write(&bad, text).unwrap();
        let out = Command::new(env!("CARGO_BIN_EXE_herd"))
            .args(["daemon", "--config"])
            .arg(&bad)
            .arg("--state-dir")
            .arg(dir.path().join("never"))
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{err}");
        assert!(err.contains(says) && err.contains("bad.toml"), "{says}: {err}");
        assert!(!dir.path().join("never/daemon.sock").exists());
    }
    // Running: a bad config at SIGHUP is refused, the old rules go on.
    let n = 7_200_000 + u64::from(std::process::id() % 1000) * 10;
    let config = dir.path().join("herd.toml");
    std::fs::write(
        &config,
        format!("[daemon]\nscan_interval_ms = 100\n{}", rule("a", n)),
    )
    .unwrap();
    let mut prog = marked(n);
    let d = Daemon::start(&config, &dir.path().join("state"));
    until("placed", 15, || d.job(prog.id()).is_some());
    // One per machine: a second daemon on the same state is refused.
    let second = Command::new(env!("CARGO_BIN_EXE_herd"))
        .args(["daemon", "--config"])
        .arg(&config)
        .arg("--state-dir")
        .arg(dir.path().join("state"))
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&second.stderr);
    assert_eq!(second.status.code(), Some(2), "{err}");
    assert!(err.contains("another herd daemon"), "{err}");
    let check = Command::new(env!("CARGO_BIN_EXE_herd"))
        .args(["daemon", "--check", "--config"])
        .arg(&config)
        .output()
        .unwrap();
    assert!(
        check.status.success(),
        "{}",
        String::from_utf8_lossy(&check.stderr)
    );
    std::fs::write(&config, "[[rule]]\nname = \"x\"\npolicy = \"nope\"\n").unwrap();
    d.signal(libc::SIGHUP);
    until("the reload refused", 10, || {
        d.status().is_some_and(|s| s["reloads_refused"] == 1)
    });
    let mut late = marked(n);
    until("the old rule takes a new process", 15, || {
        d.job(late.id()).is_some()
    });
    let (st, err) = d.end(libc::SIGTERM);
    assert!(st.success(), "{err}");
    assert!(
        err.contains("config refused, the old one stays in force"),
        "{err}"
    );
    for p in [&mut prog, &mut late] {
        p.kill().unwrap();
        p.wait().unwrap();
    }
}

fn run_compact(dir: &Path, secs: &str) -> Child {
    Command::new(env!("CARGO_BIN_EXE_herd"))
        .args([
            "run",
            "--policy",
            "static:compact",
            "--period-ms",
            "20",
            "--",
            "sleep",
            secs,
        ])
        .env("HERD_RUN_DIR", dir)
        .env("XDG_DATA_HOME", dir)
        .stderr(Stdio::piped())
        .spawn()
        .unwrap()
}

fn stderr_of(c: Child) -> String {
    let out = c.wait_with_output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8_lossy(&out.stderr).into_owned()
}

#[test]
fn two_runs_get_disjoint_cpus_from_the_daemon_and_warn_without_it() {
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("herd.toml");
    std::fs::write(&config, "[daemon]\nscan_interval_ms = 100\n").unwrap();
    let state = dir.path().join("state");
    let d = Daemon::start(&config, &state);
    let (a, b) = (run_compact(&state, "1.5"), run_compact(&state, "1.5"));
    until("both registered", 10, || {
        d.status().is_some_and(|s| {
            s["jobs"]
                .as_array()
                .unwrap()
                .iter()
                .filter(|j| j["source"] == "registered")
                .count()
                == 2
        })
    });
    let granted = |err: &str| {
        err.lines()
            .find_map(|l| l.strip_prefix("herd: the herd daemon gives this run CPUs "))
            .map(str::to_string)
            .unwrap_or_else(|| panic!("no grant in: {err}"))
    };
    let (ea, eb) = (stderr_of(a), stderr_of(b));
    let (ca, cb) = (granted(&ea), granted(&eb));
    for e in [&ea, &eb] {
        assert!(!e.contains("another herd manages"), "a leased run warned: {e}");
    }
    let set = |s: &str| herd_topo::CpuSet::parse_list(s).unwrap();
    assert!(!set(&ca).intersects(&set(&cb)), "{ca} and {cb}");
    until("leases given back", 10, || {
        d.status()
            .is_some_and(|s| s["jobs"].as_array().unwrap().is_empty())
    });
    let (st, err) = d.end(libc::SIGTERM);
    assert!(st.success(), "{err}");

    // Without a daemon, two runs started together both start from CPU 0;
    // the later to record its CPUs says another herd holds them.
    let (a, b) = (run_compact(&state, "1.5"), run_compact(&state, "1.5"));
    let (ea, eb) = (stderr_of(a), stderr_of(b));
    let warned = [&ea, &eb]
        .iter()
        .any(|e| e.contains("another herd manages CPUs this run takes"));
    let around = [&ea, &eb]
        .iter()
        .any(|e| e.contains("other herd instances run here"));
    assert!(warned || around, "neither said the other is there:\n{ea}\n{eb}");
}

/// A herd installed under another file name (`herd-dev`) is still a herd
/// to the others: a run started beside it places around the CPUs it holds.
/// Before, the others knew herd by its process name, which the kernel
/// takes from the file's, and took the copy's record for a dead herd's.
#[test]
fn a_renamed_herd_is_seen_by_the_others() {
    let dir = tempfile::tempdir().unwrap();
    let copy = dir.path().join("herd-dev");
    std::fs::copy(env!("CARGO_BIN_EXE_herd"), &copy).unwrap();
    let state = dir.path().join("state");
    // A working thread: the pinning policies place a thread once it works.
    let spin = "import time\nend = time.time() + 4\nwhile time.time() < end: pass";
    let mut first = Command::new(&copy)
        .args(["run", "--policy", "static:compact", "--period-ms", "20", "--"])
        .args([&common::python(), "-c", spin])
        .env("HERD_RUN_DIR", &state)
        .env("XDG_DATA_HOME", &state)
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let record = state.join(format!("{}.cpus", first.id()));
    until("the renamed herd holds CPUs", 10, || record.exists());
    let second = run_compact(&state, "0.1");
    let err = stderr_of(second);
    first.kill().unwrap();
    first.wait().unwrap();
    // "run here (PID holds ...)", or "hold every CPU (PID holds ...)" on
    // a machine of one CPU.
    assert!(
        err.contains(&format!("({} holds", first.id())),
        "the run did not see the renamed herd:\n{err}"
    );
}

#[test]
fn the_metrics_pass_promtool_and_list_every_managed_job() {
    if Command::new("promtool").arg("--version").output().is_err() {
        panic!("promtool is missing: `make deps` installs Debian's prometheus package");
    }
    let dir = tempfile::tempdir().unwrap();
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let n = 7_300_000 + u64::from(std::process::id() % 1000) * 10;
    let config = dir.path().join("herd.toml");
    std::fs::write(
        &config,
        format!(
            "[daemon]\nscan_interval_ms = 100\n[metrics]\nlisten = \"127.0.0.1:{port}\"\n{}",
            rule("a", n)
        ),
    )
    .unwrap();
    let mut prog = marked(n);
    let d = Daemon::start(&config, &dir.path().join("state"));
    until("placed", 15, || d.job(prog.id()).is_some());
    let mut conn = std::net::TcpStream::connect(("127.0.0.1", port)).unwrap();
    conn.write_all(b"GET /metrics HTTP/1.0\r\nHost: x\r\n\r\n")
        .unwrap();
    let mut reply = String::new();
    conn.read_to_string(&mut reply).unwrap();
    let body = reply.split_once("\r\n\r\n").unwrap().1.to_string();
    assert!(body.contains(&format!("pid=\"{}\"", prog.id())), "{body}");
    let mut check = Command::new("promtool")
        .args(["check", "metrics"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    check.stdin.take().unwrap().write_all(body.as_bytes()).unwrap();
    let out = check.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "promtool: {}{}\n{body}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    // `herd top` shows the job and which CPU it holds.
    let top = Command::new(env!("CARGO_BIN_EXE_herd"))
        .args(["top", "--once", "--interval-ms", "100", "--state-dir"])
        .arg(dir.path().join("state"))
        .output()
        .unwrap();
    let frame = String::from_utf8_lossy(&top.stdout);
    assert!(top.status.success(), "{}", String::from_utf8_lossy(&top.stderr));
    assert!(
        frame.contains(&prog.id().to_string()) && frame.contains("static:compact"),
        "{frame}"
    );
    assert!(frame.contains(" j1"), "the CPU the job holds is marked: {frame}");
    let (st, err) = d.end(libc::SIGTERM);
    assert!(st.success(), "{err}");
    prog.kill().unwrap();
    prog.wait().unwrap();
}

#[test]
fn a_process_that_execs_a_matched_program_late_is_taken() {
    // A shell seen as load, that execs the matched program half a second
    // later: the proc connector's exec event (as root), else the second
    // look a /proc scan gives every new process, finds it.
    let dir = tempfile::tempdir().unwrap();
    let n = 7_400_000 + u64::from(std::process::id() % 1000) * 10;
    let config = dir.path().join("herd.toml");
    std::fs::write(
        &config,
        format!("[daemon]\nscan_interval_ms = 100\n{}", rule("a", n)),
    )
    .unwrap();
    let d = Daemon::start(&config, &dir.path().join("state"));
    // SAFETY: geteuid has no preconditions.
    let delay = if unsafe { libc::geteuid() } == 0 {
        "0.5"
    } else {
        "0.05"
    };
    let mut sh = Command::new("sh")
        .args(["-c", &format!("sleep {delay}; exec sleep {n}")])
        .spawn()
        .unwrap();
    until("the exec'd program placed", 15, || {
        d.job(sh.id())
            .is_some_and(|j| j["state"] == "managed" && j["cpus"] != "")
    });
    let status = d.status().unwrap();
    assert!(
        status["discovery"].as_str().unwrap().contains(if delay == "0.5" {
            "proc connector"
        } else {
            "/proc scan"
        }),
        "{status}"
    );
    let (st, err) = d.end(libc::SIGTERM);
    assert!(st.success(), "{err}");
    sh.kill().unwrap();
    sh.wait().unwrap();
}

/// One thread busy for 2.5 s, then two: each hashes in a loop (hashlib lets
/// go of Python's lock while it hashes, so both threads run at once).
const GROWING: &str = r#"import hashlib, sys, threading, time
b = bytes(1 << 22)
def spin(secs):
    t0 = time.time()
    while time.time() - t0 < secs:
        hashlib.sha256(b).digest()
spin(2.5)
threading.Thread(target=spin, args=(20,), daemon=True).start()
spin(20)
"#;

#[test]
fn a_job_that_starts_more_busy_threads_later_gets_more_cpus() {
    // Admitted with the one busy thread it has then, it would keep its
    // second worker on that CPU with the other idle: it grows instead.
    let dir = tempfile::tempdir().unwrap();
    let n = 7_600_000 + u64::from(std::process::id() % 1000) * 10;
    let config = dir.path().join("herd.toml");
    std::fs::write(
        &config,
        format!(
            "[daemon]\nscan_interval_ms = 200\n{}",
            rule_for("grow", &format!("(?s)grow-{n}$"))
        ),
    )
    .unwrap();
    let d = Daemon::start(&config, &dir.path().join("state"));
    let mut py = Command::new(common::python())
        .args(["-c", GROWING, &format!("grow-{n}")])
        .spawn()
        .unwrap();
    let cpus_of = |d: &Daemon| {
        d.job(py.id())
            .map(|j| j["cpus"].as_str().unwrap_or("").to_string())
    };
    until("the job placed on one CPU", 15, || {
        cpus_of(&d).is_some_and(|c| !c.is_empty() && !c.contains(['-', ',']))
    });
    until("the job grown to two CPUs", 20, || {
        cpus_of(&d).is_some_and(|c| c.contains(['-', ',']))
    });
    let (st, err) = d.end(libc::SIGTERM);
    assert!(st.success(), "{err}");
    assert!(
        err.contains("keeps 2 threads busy, more than its CPUs: it grows to 2"),
        "{err}"
    );
    py.kill().unwrap();
    py.wait().unwrap();
}
