//! Helpers shared by the integration tests.

/// The state letter of process `pid` from /proc (R, S, T, Z...), or `None` if it is gone.
#[allow(dead_code)]
pub fn state_of(pid: i32) -> Option<char> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    stat[stat.rfind(')')? + 1..]
        .split_whitespace()
        .next()?
        .chars()
        .next()
}

/// Pids of the processes whose parent is `parent`, leaving out herd's
/// cgroup guard (a child of herd that is not a managed program).
#[allow(dead_code)]
pub fn children_of(parent: u32) -> Vec<i32> {
    std::fs::read_to_string(format!("/proc/{parent}/task/{parent}/children"))
        .unwrap_or_default()
        .split_whitespace()
        .filter_map(|p| p.parse().ok())
        .filter(|p| {
            !std::fs::read_to_string(format!("/proc/{p}/cmdline")).is_ok_and(|c| c.contains("__cgroup-guard"))
        })
        .collect()
}

/// Whether process `pid` sits in a cgroup ordered frozen: frozen, or still
/// freezing (v1 `freezer.state` FREEZING, v2 `cgroup.freeze` 1). A task of
/// a freezing group that waits for a CPU shows state R until it runs, and
/// then freezes before it runs a line of its own: on a loaded machine that
/// wait outlasts herd's 50 ms wait for the freeze (seen in CI, where the
/// batch tests' busy programs run side by side on 2 CPUs).
#[allow(dead_code)]
pub fn frozen(pid: i32) -> bool {
    freezer_state(pid).is_some_and(|s| s != "THAWED")
}

/// The freezer state of the cgroup process `pid` sits in, v1's words
/// (THAWED, FREEZING, FROZEN) for v2 too; None outside any freezer.
#[allow(dead_code)]
pub fn freezer_state(pid: i32) -> Option<&'static str> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/cgroup")).ok()?;
    let read = |p: String| std::fs::read_to_string(p).ok();
    text.lines().find_map(|line| {
        let mut f = line.splitn(3, ':');
        let (id, controllers, path) = (
            f.next().unwrap_or(""),
            f.next().unwrap_or(""),
            f.next().unwrap_or(""),
        );
        let path = path.trim_start_matches('/');
        if id == "0" {
            let dir = ["/sys/fs/cgroup/unified", "/sys/fs/cgroup"]
                .into_iter()
                .map(|root| format!("{root}/{path}"))
                .find(|d| std::path::Path::new(&format!("{d}/cgroup.freeze")).exists())?;
            let events = read(format!("{dir}/cgroup.events")).unwrap_or_default();
            let ordered = read(format!("{dir}/cgroup.freeze")).is_some_and(|t| t.trim() == "1");
            Some(if events.lines().any(|l| l.trim() == "frozen 1") {
                "FROZEN"
            } else if ordered {
                "FREEZING"
            } else {
                "THAWED"
            })
        } else if controllers.split(',').any(|c| c == "freezer") {
            match read(format!("/sys/fs/cgroup/freezer/{path}/freezer.state"))?.trim() {
                "FROZEN" => Some("FROZEN"),
                "FREEZING" => Some("FREEZING"),
                _ => Some("THAWED"),
            }
        } else {
            None
        }
    })
}

/// The mechanisms `herd doctor --json` says herd will use: (cpuset, pause).
#[allow(dead_code)]
pub fn mechanisms() -> (String, String) {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_herd"))
        .args(["doctor", "--json"])
        .output()
        .unwrap();
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    (
        v["cpuset"].as_str().unwrap_or("").to_string(),
        v["pause"].as_str().unwrap_or("").to_string(),
    )
}

/// `herd`, with the profile database kept out of $HOME (runs are recorded).
#[allow(dead_code)]
pub fn herd() -> std::process::Command {
    herd_at(std::path::Path::new(env!("CARGO_BIN_EXE_herd")))
}

/// [`herd`] from the binary at `path` (a copy).
#[allow(dead_code)]
pub fn herd_at(path: &std::path::Path) -> std::process::Command {
    let mut c = std::process::Command::new(path);
    // Each herd its own record of held CPUs: tests run side by side, and
    // one test's herd would otherwise place around another's. And its own
    // default database: `herd batch` remembers a batch's runs (the guard
    // across runs), so two tests running the same programs would
    // otherwise see each other's runs. A test that needs runs to carry
    // over passes --db.
    static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let own = |what: &str| {
        std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("{what}-{}-{n}", std::process::id()))
    };
    c.env("XDG_DATA_HOME", own("data"));
    c.env("HERD_RUN_DIR", own("peers"));
    c
}

/// The environment [`herd`] gives its command, for a shell that starts
/// herd itself (`exec "$0"`): its own database and record of held CPUs.
#[allow(dead_code)]
pub fn envs_of(c: &std::process::Command) -> Vec<(std::ffi::OsString, std::ffi::OsString)> {
    c.get_envs()
        .filter_map(|(k, v)| Some((k.to_os_string(), v?.to_os_string())))
        .collect()
}

/// Whether SCHED_FIFO is allowed here, as herd doctor's probe says (root
/// alone is not enough in a cgroup without a real-time budget).
#[allow(dead_code)]
pub fn realtime_allowed() -> bool {
    let doctor = herd().args(["doctor", "--json"]).output().unwrap();
    let report: serde_json::Value = serde_json::from_slice(&doctor.stdout).unwrap();
    report["capabilities"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["name"] == "realtime")
        .map(|c| c["available"] == true)
        .expect("doctor reports realtime")
}

/// The JSON lines of a trace file, finished or still being written: every
/// line that ends in a newline must parse; a last line cut mid-write is
/// left out.
#[allow(dead_code)] // Each test binary uses a different part of this module.
pub fn json_lines(path: &std::path::Path) -> Vec<serde_json::Value> {
    let text = std::fs::read_to_string(path).unwrap();
    let whole = &text[..text.rfind('\n').map_or(0, |i| i + 1)];
    whole
        .lines()
        .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap())
        // A trace's header (one a run) is no decision.
        .filter(|v| v.get("herd_trace").is_none())
        .collect()
}

/// The Python interpreter itself, not a wrapper in front of it (pyenv's
/// `python3` is a shell script that forks helpers before it execs
/// Python, and herd sees and places a program's forked processes).
#[allow(dead_code)]
pub fn python() -> String {
    let out = std::process::Command::new("python3")
        .args(["-c", "import sys; print(sys.executable)"])
        .output()
        .expect("python3 runs");
    String::from_utf8(out.stdout).unwrap().trim().to_string()
}

/// Makes this test process the subreaper of the orphans of its children
/// (herd's programs once herd is killed), so a test can find and reap them.
#[allow(dead_code)]
pub fn adopt_orphans() {
    // SAFETY: prctl with these arguments only marks this process.
    let marked = unsafe { libc::prctl(libc::PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) };
    assert_eq!(marked, 0, "PR_SET_CHILD_SUBREAPER");
}

/// `herd run --policy pack:palm:cores=2 --period-ms 20 EXTRA --trace TRACE
/// -- python3 -c PROGRAM`, run to the end.
#[allow(dead_code)]
pub fn palm_python(
    mut herd: std::process::Command,
    extra: &[&std::ffi::OsStr],
    trace: &std::path::Path,
    program: &str,
) -> std::process::Output {
    // PALM's own turns, which a guard probe would interrupt.
    herd.args([
        "run",
        "--policy",
        "pack:palm:cores=2",
        "--period-ms",
        "20",
        "--guard",
        "off",
    ])
    .args(extra)
    .arg("--trace")
    .arg(trace)
    .args(["--", &python(), "-c", program])
    .output()
    .unwrap()
}

/// Each decision's beating threads and their summed beats, from a trace.
#[allow(dead_code)]
pub fn beats_in_trace(trace: &std::path::Path) -> Vec<(usize, u64)> {
    json_lines(trace)
        .into_iter()
        .map(|v| {
            let beats: Vec<u64> = v["tasks"]
                .as_array()
                .unwrap()
                .iter()
                .filter_map(|t| t["beats"].as_u64())
                .collect();
            (beats.len(), beats.iter().sum())
        })
        .collect()
}

/// The CPUs process (or thread) `pid` may run on, as the kernel lists them.
#[allow(dead_code)]
pub fn allowed(pid: u32) -> String {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .unwrap()
        .lines()
        .find_map(|l| l.strip_prefix("Cpus_allowed_list:"))
        .unwrap()
        .trim()
        .to_string()
}

/// A child process that is ended when dropped: SIGTERM (herd then ends
/// its programs and restores the machine), SIGKILL if it has not gone in
/// 5 s. A test that fails halfway unwinds through it, so it leaves no busy
/// program behind to slow every later test (one left a barrier program
/// spinning for 26 minutes of a CI run).
#[allow(dead_code)]
pub struct EndOnDrop(Option<std::process::Child>);

#[allow(dead_code)]
impl EndOnDrop {
    pub fn new(child: std::process::Child) -> Self {
        EndOnDrop(Some(child))
    }
    pub fn id(&self) -> u32 {
        self.0.as_ref().map_or(0, std::process::Child::id)
    }
    /// The child, no longer ended on drop.
    pub fn take(mut self) -> std::process::Child {
        self.0.take().expect("taken once")
    }
}

impl Drop for EndOnDrop {
    fn drop(&mut self) {
        let Some(mut child) = self.0.take() else { return };
        // SAFETY: kill has no memory-safety preconditions.
        unsafe { libc::kill(child.id() as i32, libc::SIGTERM) };
        let start = std::time::Instant::now();
        while start.elapsed() < std::time::Duration::from_secs(5) {
            if matches!(child.try_wait(), Ok(Some(_))) {
                return;
            }
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
        let _ = child.kill();
        let _ = child.wait();
    }
}

/// A Python program with three worker threads. After `delay` seconds it
/// prints "tid cpus" for each of its threads (from /proc) in creation
/// order, which is the order herd discovers and ranks them (sorting thread
/// ids would not do: ids wrap around), then waits for
/// its workers (which sleep for `life` seconds) and exits with code 3.
/// A worker done before the main thread has read it waits for that read:
/// on a loaded machine the main thread can wake after the workers' `life`,
/// and a thread's status cannot be read once it has exited (a CI run's
/// `trace_writes_a_line_per_decision` failed so, with "No such process").
#[allow(dead_code)]
pub fn threads_program(delay: f64, life: f64) -> String {
    python_threads("time.sleep", delay, life)
}

/// [`threads_program`] with workers that work (spin) for `life` seconds:
/// the pinning policies place a thread once it works.
#[allow(dead_code)]
pub fn working_threads_program(delay: f64, life: f64) -> String {
    python_threads("spin", delay, life)
}

#[allow(dead_code)]
fn python_threads(target: &str, delay: f64, life: f64) -> String {
    format!(
        "import os, threading, time, sys\n\
         read = threading.Event()\n\
         def spin(s):\n\
         \x20   end = time.time() + s\n\
         \x20   while time.time() < end: pass\n\
         def work(s):\n\
         \x20   {target}(s)\n\
         \x20   read.wait()\n\
         ts = [threading.Thread(target=work, args=({life},)) for _ in range(3)]\n\
         [t.start() for t in ts]\n\
         time.sleep({delay})\n\
         pid = os.getpid()\n\
         for tid in [pid] + [t.native_id for t in ts]:\n\
         \x20   status = open(f'/proc/{{pid}}/task/{{tid}}/status').read()\n\
         \x20   print(tid, [l.split(':')[1].strip() for l in status.splitlines() if l.startswith('Cpus_allowed_list')][0], flush=True)\n\
         read.set()\n\
         [t.join() for t in ts]\n\
         sys.exit(3)\n"
    )
}

/// `cosched:fair` with its cap given (one thread per CPU here): programs of
/// one thread then take turns too, where by default they are left to the
/// kernel. For tests of pausing and of what a killed herd leaves behind.
#[allow(dead_code)]
pub fn taking_turns() -> String {
    let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
    format!("cosched:fair:slots={cpus}")
}
