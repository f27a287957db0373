//! `herd daemon`: herd for the whole machine (`docs/daemon.md`). It runs in
//! the foreground, one per machine (a lock in its state directory), finds
//! new processes by scanning /proc (told of forks and execs as they happen
//! by the kernel's proc connector where it may subscribe), gives those a rule takes their own CPUs
//! and a live session under the rule's policy, and leaves every other
//! process alone. `herd daemon status` asks a running one what it manages.
//!
//! Signals: SIGINT and SIGTERM end it, every job restored (unpinned) and
//! left running; SIGHUP reloads the config, and a config that does not
//! check is refused with the old one kept. A SIGKILL leaves the keepers of
//! its jobs to unpin them, and its records, from which it adopts the jobs
//! still running when it starts again.

use std::collections::BTreeMap;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use clap::{Args, Subcommand};
use herd_cli::daemon_config::{Config, Process, Rule, RulePolicy};
use herd_plan::share::Ask;
use herd_policy::PolicySpec;
use herd_runtime::proc_events::{Event, ProcEvents};
use herd_runtime::procscan::{self, Facts};
use herd_topo::CpuSet;

use crate::common::Failure;
use crate::daemon_jobs::{self as jobs, Book, Counters, Record, Running};
use crate::daemon_serve::{self as serve, Shared, lock};
use crate::daemon_wire::{self as wire, JobStatus, Status};

/// Arguments of `herd daemon`.
#[derive(Args, Debug)]
#[command(args_conflicts_with_subcommands = true)]
pub struct DaemonArgs {
    #[command(subcommand)]
    command: Option<DaemonCommand>,
    /// The rules (TOML, docs/daemon.md).
    #[arg(long, value_name = "FILE")]
    config: Option<PathBuf>,
    /// Where the lock, socket and job records live [default: /run/herd, or $HERD_RUN_DIR].
    #[arg(long, value_name = "DIR")]
    state_dir: Option<PathBuf>,
    /// Check the config and exit (0: good, 2: refused).
    #[arg(long)]
    check: bool,
    #[command(flatten)]
    looping: crate::common::LoopArgs,
}

#[derive(Subcommand, Debug)]
enum DaemonCommand {
    /// What a running daemon manages.
    Status {
        /// As JSON.
        #[arg(long)]
        json: bool,
        /// The daemon's state directory [default: /run/herd, or $HERD_RUN_DIR].
        #[arg(long, value_name = "DIR")]
        state_dir: Option<PathBuf>,
    },
    /// For Slurm's prolog and epilog (integrations/slurm/herd-prolog): register
    /// a job with the node's daemon, or say it ended. Exits 0 when no daemon
    /// runs (a failing prolog would drain the node), saying so.
    Slurm {
        /// The job [default: $SLURM_JOB_ID].
        #[arg(long)]
        job: Option<u64>,
        /// The job ended (the epilog).
        #[arg(long)]
        end: bool,
        /// The daemon's state directory [default: /run/herd, or $HERD_RUN_DIR].
        #[arg(long, value_name = "DIR")]
        state_dir: Option<PathBuf>,
    },
}

fn state_dir(arg: &Option<PathBuf>) -> PathBuf {
    arg.clone().unwrap_or_else(herd_runtime::peers::dir)
}

/// `herd daemon`.
pub fn run(args: &DaemonArgs) -> Result<u8, Failure> {
    match &args.command {
        Some(DaemonCommand::Status { json, state_dir: dir }) => {
            return crate::daemon_client::status(&state_dir(dir), *json);
        }
        Some(DaemonCommand::Slurm {
            job,
            end,
            state_dir: dir,
        }) => return crate::daemon_client::slurm(*job, *end, &state_dir(dir)),
        None => {}
    }
    let Some(path) = &args.config else {
        return Err(Failure::Input(anyhow::anyhow!(
            "herd daemon needs --config FILE (see docs/daemon.md)"
        )));
    };
    let machine = crate::common::this_machine()?;
    let config = load(path, machine.all_cpus()).map_err(Failure::Input)?;
    if args.check {
        println!("{}: {} rules, good", path.display(), config.rules.len());
        return Ok(0);
    }
    let loop_config = crate::common::period_config(&args.looping)?;
    Daemon::start(path, config, machine, &state_dir(&args.state_dir), loop_config)?.run()
}

fn load(path: &Path, cpus: &CpuSet) -> Result<Config, anyhow::Error> {
    let text = std::fs::read_to_string(path).map_err(|e| anyhow::anyhow!("{}: {e}", path.display()))?;
    Config::parse(&text, &path.display().to_string(), cpus).map_err(Into::into)
}

/// What the daemon knows of a process it has seen.
enum Seen {
    /// Not for the rules: herd itself or its programs, a managed job's
    /// descendants (`managed`: their descendants are not for the rules
    /// either), or a process the daemon may not touch (whose descendants
    /// may be: a user's shell under a root-owned sshd).
    Ignored { start: u64, ppid: i32, managed: bool },
    /// No rule takes it: load. `fresh` at its first sighting: it is
    /// looked at once more at the next scan, in case it was a shell
    /// between its fork and its exec.
    Load { start: u64, ppid: i32, fresh: bool },
    /// A rule takes it; admitted once it has run one scan (its busy
    /// threads are counted over that scan).
    Candidate {
        facts: Box<Facts>,
        rule: String,
        ticks: BTreeMap<i32, u64>,
        at: Instant,
    },
    /// A job (managed, or waiting for CPUs).
    Job { start: u64, ppid: i32 },
}

impl Seen {
    fn start(&self) -> u64 {
        match self {
            Seen::Ignored { start, .. } | Seen::Load { start, .. } | Seen::Job { start, .. } => *start,
            Seen::Candidate { facts, .. } => facts.start_ticks,
        }
    }
    fn ppid(&self) -> i32 {
        match self {
            Seen::Ignored { ppid, .. } | Seen::Load { ppid, .. } | Seen::Job { ppid, .. } => *ppid,
            Seen::Candidate { facts, .. } => facts.ppid,
        }
    }
}

struct Daemon {
    config_path: PathBuf,
    config: Config,
    dir: PathBuf,
    loop_config: herd_engine::Config,
    shared: Arc<Shared>,
    seen: BTreeMap<i32, Seen>,
    running: Vec<Running>,
    /// Jobs a rule took that wait for CPUs, by id.
    waiting: BTreeMap<u64, Pending>,
    /// Each running job as begun, its threads' CPU ticks and when they were
    /// read: how many threads it keeps busy now (`grow`).
    watched: BTreeMap<u64, (Pending, BTreeMap<i32, u64>, Instant)>,
    /// Records left by a daemon before this one: adopted when their
    /// process is seen still running.
    adoptable: BTreeMap<i32, Record>,
    stop: Arc<AtomicBool>,
    reload: Arc<AtomicBool>,
    /// The kernel's process events, where the proc connector is open.
    events: Option<std::sync::mpsc::Receiver<Result<Vec<Event>, String>>>,
    proc_root: PathBuf,
    me: i32,
    root: bool,
    clk_tck: u64,
    _lock: std::fs::File,
    claim: herd_runtime::peers::Claim,
}

fn reserved(config: &Config) -> CpuSet {
    config
        .rules
        .iter()
        .filter_map(|r| r.reserve.as_ref())
        .fold(CpuSet::default(), |a, r| a.union(r))
}

impl Daemon {
    fn start(
        path: &Path,
        config: Config,
        machine: herd_topo::Machine,
        dir: &Path,
        loop_config: herd_engine::Config,
    ) -> Result<Daemon, Failure> {
        std::fs::create_dir_all(dir)
            .map_err(|e| Failure::Internal(anyhow::anyhow!("state directory {}: {e}", dir.display())))?;
        let lockfile = take_lock(dir)?;
        let sock = wire::socket_path(dir);
        // The lock is ours, so a socket there was left by a daemon that died.
        let _ = std::fs::remove_file(&sock);
        let listener = std::os::unix::net::UnixListener::bind(&sock)
            .map_err(|e| Failure::Internal(anyhow::anyhow!("socket {}: {e}", sock.display())))?;
        // Only the daemon's user may ask it for CPUs or read what it manages.
        std::fs::set_permissions(&sock, std::fs::Permissions::from_mode(0o600))?;
        let stop = Arc::new(AtomicBool::new(false));
        let reload = Arc::new(AtomicBool::new(false));
        for s in [signal_hook::consts::SIGINT, signal_hook::consts::SIGTERM] {
            signal_hook::flag::register(s, Arc::clone(&stop)).map_err(|e| Failure::Internal(e.into()))?;
        }
        signal_hook::flag::register(signal_hook::consts::SIGHUP, Arc::clone(&reload))
            .map_err(|e| Failure::Internal(e.into()))?;
        let me = std::process::id() as i32;
        let shared = Arc::new(Shared {
            book: Mutex::new(Book::new(machine, reserved(&config))),
            slurm: Mutex::new(Default::default()),
            status: Mutex::new(Status {
                pid: me,
                config: path.display().to_string(),
                discovery: format!("/proc scan every {} ms", config.scan_interval_ms),
                ..Status::default()
            }),
        });
        if let Some(addr) = config.metrics_listen {
            let server = tiny_http::Server::http(addr)
                .map_err(|e| Failure::Internal(anyhow::anyhow!("metrics.listen {addr}: {e}")))?;
            let s = Arc::clone(&shared);
            std::thread::Builder::new()
                .name("herd-metrics".into())
                .spawn(move || serve::serve_metrics(server, s))?;
            eprintln!("herd daemon: metrics at http://{addr}/metrics");
        }
        let s = Arc::clone(&shared);
        std::thread::Builder::new()
            .name("herd-socket".into())
            .spawn(move || serve::serve_socket(listener, s))?;
        let (events, discovery) = match ProcEvents::open() {
            Ok(ev) => {
                let (tx, rx) = std::sync::mpsc::channel();
                std::thread::Builder::new()
                    .name("herd-proc-events".into())
                    .spawn(move || forward_events(ev, &tx))?;
                (
                    Some(rx),
                    format!(
                        "netlink proc connector, and a /proc scan every {} ms",
                        config.scan_interval_ms
                    ),
                )
            }
            Err(e) => (
                None,
                format!(
                    "/proc scan every {} ms (no proc connector: {e})",
                    config.scan_interval_ms
                ),
            ),
        };
        lock(&shared.status).discovery = discovery;
        // Records of processes gone (or a pid reused) are dropped now.
        let adoptable = jobs::read_records(dir)
            .into_iter()
            .filter(|r| {
                let alive =
                    herd_runtime::procfs::start_time(Path::new("/proc"), r.pid) == Some(r.start_ticks);
                if !alive {
                    jobs::remove_record(dir, r.pid);
                }
                alive
            })
            .map(|r| (r.pid, r))
            .collect();
        // SAFETY: sysconf and geteuid cannot fail.
        let (clk_tck, root) = unsafe {
            (
                libc::sysconf(libc::_SC_CLK_TCK).max(1) as u64,
                libc::geteuid() == 0,
            )
        };
        eprintln!(
            "herd daemon (pid {me}): {} rules from {}; state in {}; {}",
            config.rules.len(),
            path.display(),
            dir.display(),
            lock(&shared.status).discovery
        );
        Ok(Daemon {
            config_path: path.to_path_buf(),
            config,
            dir: dir.to_path_buf(),
            loop_config,
            shared,
            seen: BTreeMap::new(),
            running: Vec::new(),
            waiting: BTreeMap::new(),
            watched: BTreeMap::new(),
            adoptable,
            stop,
            reload,
            events,
            proc_root: PathBuf::from("/proc"),
            me,
            root,
            clk_tck,
            _lock: lockfile,
            claim: herd_runtime::peers::Claim::new(&herd_runtime::peers::dir()),
        })
    }

    fn run(mut self) -> Result<u8, Failure> {
        while !self.stop.load(Ordering::Relaxed) {
            if self.reload.swap(false, Ordering::Relaxed) {
                self.reload_config();
            }
            self.scan();
            let until = Instant::now() + Duration::from_millis(self.config.scan_interval_ms);
            while Instant::now() < until && !self.stop.load(Ordering::Relaxed) {
                let step = Duration::from_millis(20).min(until.saturating_duration_since(Instant::now()));
                match &self.events {
                    Some(rx) => match rx.recv_timeout(step) {
                        Ok(got) => self.on_events(got),
                        Err(std::sync::mpsc::RecvTimeoutError::Timeout) => {}
                        Err(std::sync::mpsc::RecvTimeoutError::Disconnected) => {
                            eprintln!("herd daemon: the proc connector closed: /proc scans alone from now");
                            self.events = None;
                        }
                    },
                    None => std::thread::sleep(step),
                }
                if self.running.iter().any(Running::ended) {
                    break;
                }
            }
        }
        let n = self.running.len();
        for r in &self.running {
            r.stop.store(true, Ordering::Relaxed);
        }
        for r in std::mem::take(&mut self.running) {
            let (id, pid) = (r.id, r.pid);
            let ended = r.join();
            lock(&self.shared.book).release(id);
            eprintln!("herd daemon: let go of process {pid}: {}", ended.summary);
        }
        let _ = std::fs::remove_file(wire::socket_path(&self.dir));
        eprintln!(
            "herd daemon: stopped; {n} jobs restored and left running (their records stay, for a daemon started again)"
        );
        Ok(0)
    }

    fn reload_config(&mut self) {
        let cpus = lock(&self.shared.book).machine.all_cpus().clone();
        match load(&self.config_path, &cpus) {
            Ok(c) => {
                eprintln!(
                    "herd daemon: SIGHUP: {} rules from {} (running jobs keep their rule until they end)",
                    c.rules.len(),
                    self.config_path.display()
                );
                lock(&self.shared.book).reserved = reserved(&c);
                self.config = c;
                // Processes left as load are matched afresh.
                self.seen.retain(|_, s| !matches!(s, Seen::Load { .. }));
            }
            Err(e) => {
                lock(&self.shared.status).reloads_refused += 1;
                eprintln!("herd daemon: SIGHUP: config refused, the old one stays in force: {e}");
            }
        }
    }

    /// A process forked, exec'd or ended: it is looked at afresh at the
    /// next scan (a job's session follows its own process). Events the
    /// kernel dropped: every process is.
    fn on_events(&mut self, got: Result<Vec<Event>, String>) {
        match got {
            Ok(events) => {
                for e in events {
                    let (Event::Fork { pid, .. } | Event::Exec { pid } | Event::Exit { pid }) = e else {
                        continue;
                    };
                    if !matches!(self.seen.get(&pid), Some(Seen::Job { .. })) {
                        self.seen.remove(&pid);
                    }
                }
            }
            Err(e) => {
                eprintln!("herd daemon: process events lost ({e}): every process is looked at afresh");
                self.seen.retain(|_, s| matches!(s, Seen::Job { .. }));
            }
        }
    }

    /// Whether `ppid`'s line up to init holds a herd or a managed job.
    fn under_managed(&self, mut ppid: i32) -> bool {
        for _ in 0..64 {
            match self.seen.get(&ppid) {
                Some(Seen::Job { .. }) => return true,
                Some(Seen::Ignored { managed: true, .. }) => return true,
                Some(s) => ppid = s.ppid(),
                None => return false,
            }
            if ppid <= 1 {
                return false;
            }
        }
        false
    }

    fn scan(&mut self) {
        self.reap();
        self.grow();
        let slurm_jobs = {
            let mut s = lock(&self.shared.slurm);
            if std::mem::take(&mut s.1) {
                // A job just registered: its processes may have been seen.
                self.seen.retain(|_, e| !matches!(e, Seen::Load { .. }));
            }
            s.0.clone()
        };
        let pids = procscan::pids(&self.proc_root);
        let leased: std::collections::BTreeSet<i32> = lock(&self.shared.book)
            .jobs
            .values()
            .filter(|j| j.source == "registered")
            .map(|j| j.pid)
            .collect();
        let mut load = 0;
        for &pid in &pids {
            let second = match self.seen.get(&pid) {
                None => false,
                Some(Seen::Load { fresh: true, .. }) => true,
                Some(s) => {
                    load += usize::from(matches!(s, Seen::Load { .. }));
                    continue;
                }
            };
            let Some(f) = procscan::facts(&self.proc_root, pid) else {
                continue;
            };
            let (start, ppid) = (f.start_ticks, f.ppid);
            // herd itself, and a process a herd command leased CPUs for.
            let herd = f.comm == "herd" || pid == self.me || leased.contains(&pid);
            let may = self.root || herd_runtime::control::may_signal(pid).is_ok();
            let managed = herd || self.under_managed(ppid);
            let entry = if managed || !may {
                Seen::Ignored { start, ppid, managed }
            } else if let Some(rule) = self.config.rule_for(&process(&f, &slurm_jobs, &self.proc_root)) {
                Seen::Candidate {
                    rule: rule.name.clone(),
                    ticks: procscan::thread_ticks(&self.proc_root, pid),
                    facts: Box::new(f),
                    at: Instant::now(),
                }
            } else {
                load += 1;
                Seen::Load {
                    start,
                    ppid,
                    fresh: !second,
                }
            };
            self.seen.insert(pid, entry);
        }
        // Forget what is gone. A pid reused between two scans is caught by
        // the proc connector's events; without it, only for the processes
        // that matter (jobs and candidates), by their start time.
        let alive: std::collections::BTreeSet<i32> = pids.into_iter().collect();
        let proc_root = self.proc_root.clone();
        self.seen.retain(|pid, s| {
            alive.contains(pid)
                && match s {
                    Seen::Job { .. } | Seen::Candidate { .. } => {
                        herd_runtime::procfs::start_time(&proc_root, *pid) == Some(s.start())
                    }
                    _ => true,
                }
        });
        // Jobs left to the kernel have no session to end: gone when their process is.
        let gone: Vec<(u64, i32)> = lock(&self.shared.book)
            .jobs
            .values()
            .filter(|j| j.source != "registered" && !self.seen.contains_key(&j.pid))
            .filter(|j| !self.running.iter().any(|r| r.id == j.id))
            .map(|j| (j.id, j.pid))
            .collect();
        for (id, pid) in gone {
            lock(&self.shared.book).release(id);
            self.waiting.remove(&id);
            jobs::remove_record(&self.dir, pid);
        }
        self.admit();
        let mut st = lock(&self.shared.status);
        st.scans += 1;
        st.unmanaged = load;
        drop(st);
        let held = lock(&self.shared.book).held_by_sessions();
        let _ = self.claim.hold(&held);
    }

    /// Collects the jobs whose sessions ended.
    fn reap(&mut self) {
        let (ended, still): (Vec<Running>, Vec<Running>) = std::mem::take(&mut self.running)
            .into_iter()
            .partition(Running::ended);
        self.running = still;
        for r in ended {
            let (id, pid) = (r.id, r.pid);
            self.watched.remove(&id);
            let e = r.join();
            lock(&self.shared.book).release(id);
            jobs::remove_record(&self.dir, pid);
            let mut st = lock(&self.shared.status);
            st.jobs_ended += 1;
            st.guard_backoffs += u64::from(e.backoffs);
            drop(st);
            eprintln!("herd daemon: process {pid} ended: {}", e.summary);
        }
    }

    /// A job that keeps more threads busy than it has CPUs (a program that
    /// starts its workers after it was admitted) gets more where they are
    /// free: its session ends, which lets its threads go, and it begins
    /// again on the larger grant. Else a policy would keep them all on the
    /// CPUs its first sight asked for.
    fn grow(&mut self) {
        let settle = Duration::from_millis(self.config.scan_interval_ms.min(1000) * 9 / 10);
        let ids: Vec<u64> = self.watched.keys().copied().collect();
        for id in ids {
            let Some((p, ticks, at)) = self
                .watched
                .get_mut(&id)
                .filter(|(_, _, at)| at.elapsed() >= settle)
            else {
                continue;
            };
            let now = procscan::thread_ticks(&self.proc_root, p.pid);
            let interval_ticks = (at.elapsed().as_secs_f64() * self.clk_tck as f64) as u64;
            let busy = procscan::busy_threads(ticks, &now, interval_ticks);
            (*ticks, *at) = (now, Instant::now());
            let Some(r) = self.config.rules.iter().find(|r| r.name == p.rule) else {
                continue;
            };
            let ask = ask_of(r, busy);
            let Some(cpus) = lock(&self.shared.book).regrant(id, &ask) else {
                continue;
            };
            let Some(i) = self.running.iter().position(|r| r.id == id) else {
                continue;
            };
            let running = self.running.remove(i);
            running.stop.store(true, Ordering::Relaxed);
            let ended = running.join();
            lock(&self.shared.book).release(id);
            let (mut p, _, _) = self.watched.remove(&id).expect("watched above");
            eprintln!(
                "herd daemon: process {} ({}) keeps {busy} threads busy, more than its CPUs: it grows to {} ({})",
                p.pid,
                p.name,
                cpus.len(),
                ended.summary
            );
            p.ask = ask;
            self.begin(id, p, Some(cpus));
        }
    }

    /// Admits the candidates that have run one scan, and retries the
    /// jobs waiting for CPUs.
    fn admit(&mut self) {
        // One scan, or a second where scans are rarer: enough to tell a
        // busy thread from a sleeping helper.
        let settle_ms = self.config.scan_interval_ms.min(1000) * 9 / 10;
        let ready: Vec<i32> = self
            .seen
            .iter()
            .filter(|(_, s)| matches!(s, Seen::Candidate { at, .. } if at.elapsed().as_millis() as u64 >= settle_ms))
            .map(|(p, _)| *p)
            .collect();
        for pid in ready {
            let Some(Seen::Candidate {
                facts,
                rule,
                ticks,
                at,
            }) = self.seen.remove(&pid)
            else {
                continue;
            };
            // Its rule went at a reload, or a herd command registered it
            // meanwhile (`herd attach`): looked at afresh at the next scan.
            let leased = lock(&self.shared.book).jobs.values().any(|j| j.pid == pid);
            let Some(r) = self
                .config
                .rules
                .iter()
                .find(|r| r.name == rule)
                .filter(|_| !leased)
            else {
                continue;
            };
            let after = procscan::thread_ticks(&self.proc_root, pid);
            let interval_ticks = (at.elapsed().as_secs_f64() * self.clk_tck as f64) as u64;
            let busy = procscan::busy_threads(&ticks, &after, interval_ticks).max(1);
            let id = lock(&self.shared.book).next_id();
            self.seen.insert(
                pid,
                Seen::Job {
                    start: facts.start_ticks,
                    ppid: facts.ppid,
                },
            );
            let (spec, reason) = self.policy_for(r, &facts);
            let adopted = self
                .adoptable
                .remove(&pid)
                .filter(|rec| rec.start_ticks == facts.start_ticks && rec.rule == r.name);
            let pending = Pending {
                pid,
                start_ticks: facts.start_ticks,
                name: facts.comm.clone(),
                rule: r.name.clone(),
                ask: ask_of(r, busy),
                spec,
                reason,
                source: if adopted.is_some() { "adopted" } else { "rule" },
            };
            let cpus = adopted.and_then(|rec| CpuSet::parse_list(&rec.cpus).ok());
            self.begin(id, pending, cpus);
        }
        for (id, p) in std::mem::take(&mut self.waiting) {
            if herd_runtime::procfs::start_time(&self.proc_root, p.pid) == Some(p.start_ticks) {
                self.begin(id, p, None);
            } else {
                lock(&self.shared.book).release(id);
            }
        }
    }

    /// The policy rule `r` gives process `f`, and why.
    fn policy_for(&self, r: &Rule, f: &Facts) -> (PolicySpec, String) {
        match &r.policy {
            RulePolicy::Spec(s) => (s.clone(), format!("rule '{}'", r.name)),
            RulePolicy::Auto => {
                let key = std::iter::once(f.exe.as_str())
                    .chain(f.cmdline.split(' ').skip(1))
                    .collect::<Vec<_>>()
                    .join(" ");
                let store = herd_runtime::live::db_path(None)
                    .filter(|p| p.exists())
                    .and_then(|p| herd_store::SqliteStore::open(&p).ok());
                let profile = store.as_ref().and_then(|s| {
                    use herd_store::ProfileStore;
                    s.profiles([key.as_str()]).ok()?.remove(&key)
                });
                let peak = store
                    .as_ref()
                    .and_then(|s| s.calibration(herd_store::PEAK_BTR).ok().flatten())
                    .map(|c| c.value * 64.0 * 1e6);
                let machine = lock(&self.shared.book).machine.clone();
                let (name, why) = herd_plan::auto::choose(profile.as_ref(), &machine, peak);
                // Every name `choose` gives is in the catalogue (its test).
                let spec = PolicySpec::parse(name).unwrap_or_else(|_| PolicySpec::linux());
                (spec, format!("auto: {why}"))
            }
        }
    }

    /// Gives job `id` its CPUs (`cpus`: the ones an adopted job held, if
    /// still free) and starts its session; or leaves it waiting.
    fn begin(&mut self, id: u64, p: Pending, cpus: Option<CpuSet>) {
        let mut status = JobStatus {
            id,
            pid: p.pid,
            name: p.name.clone(),
            rule: p.rule.clone(),
            policy: p.spec.name().to_string(),
            reason: p.reason.clone(),
            source: p.source.into(),
            state: "managed".into(),
            cpus: String::new(),
            threads: p.ask.want,
            decisions: 0,
            placements: 0,
            decide_s: 0.0,
            migrations: 0,
        };
        // Under `linux` the job is the kernel's: it holds no CPU.
        if p.spec.is_baseline() {
            lock(&self.shared.book).jobs.insert(id, status);
            eprintln!(
                "herd daemon: process {} ({}): {}, left to the kernel",
                p.pid, p.name, p.reason
            );
            return;
        }
        let granted = {
            let mut book = lock(&self.shared.book);
            match cpus.filter(|c| book.free(c)) {
                Some(c) => {
                    book.hold(id, c.clone(), p.ask.share);
                    Some(c)
                }
                None => book.grant(id, &p.ask),
            }
        };
        let Some(cpus) = granted else {
            status.state = "waiting".into();
            if !lock(&self.shared.book).jobs.contains_key(&id) {
                eprintln!(
                    "herd daemon: process {} ({}) waits: rule '{}' finds no CPU free; the kernel places it meanwhile",
                    p.pid, p.name, p.rule
                );
            }
            lock(&self.shared.book).jobs.insert(id, status);
            self.waiting.insert(id, p);
            return;
        };
        status.cpus = cpus.to_string();
        let machine = lock(&self.shared.book).machine.clone();
        let counters = Arc::new(Counters::default());
        match jobs::start(
            id,
            p.pid,
            &p.spec,
            &machine,
            &cpus,
            self.loop_config,
            Arc::clone(&counters),
        ) {
            Ok(running) => {
                let ticks = procscan::thread_ticks(&self.proc_root, p.pid);
                self.watched.insert(id, (p.clone(), ticks, Instant::now()));
                let record = Record {
                    pid: p.pid,
                    start_ticks: p.start_ticks,
                    rule: p.rule.clone(),
                    policy: p.spec.name().to_string(),
                    cpus: cpus.to_string(),
                };
                if let Err(e) = jobs::write_record(&self.dir, &record) {
                    eprintln!(
                        "herd daemon: warning: cannot record job {} ({e}): a restarted daemon would not adopt it",
                        p.pid
                    );
                }
                eprintln!(
                    "herd daemon: process {} ({}) {}: {} on CPUs {cpus} ({})",
                    p.pid,
                    p.name,
                    if p.source == "adopted" {
                        "adopted"
                    } else {
                        "managed"
                    },
                    p.spec.name(),
                    p.reason
                );
                let mut book = lock(&self.shared.book);
                book.jobs.insert(id, status);
                book.counters.insert(id, counters);
                drop(book);
                self.running.push(running);
            }
            Err(e) => {
                lock(&self.shared.book).release(id);
                eprintln!("herd daemon: {e}");
            }
        }
    }
}

/// A job admitted but not yet running: waiting for CPUs.
#[derive(Clone)]
struct Pending {
    pid: i32,
    start_ticks: u64,
    name: String,
    rule: String,
    ask: Ask,
    spec: PolicySpec,
    reason: String,
    source: &'static str,
}

fn ask_of(r: &Rule, busy: usize) -> Ask {
    Ask {
        want: busy,
        max: r.max_cpus.map(|m| m as usize),
        reserve: r.reserve.clone(),
        share: r.share,
    }
}

/// What the rules see of a process: with `slurm_jobs` registered, the
/// Slurm job in its environment (not slurmstepd's own: its job's tasks are).
fn process(f: &Facts, slurm_jobs: &std::collections::BTreeSet<u64>, proc_root: &Path) -> Process {
    let slurm_job = if slurm_jobs.is_empty() || f.comm == "slurmstepd" {
        None
    } else {
        procscan::environ_var(proc_root, f.pid, "SLURM_JOB_ID")
            .and_then(|v| v.parse().ok())
            .filter(|j| slurm_jobs.contains(j))
    };
    Process {
        slurm_job,
        cgroup: f.cgroup.clone(),
        unit: f.unit.clone(),
        user: procscan::user_name(f.uid),
        uid: f.uid,
        exe: f.exe.clone(),
        comm: f.comm.clone(),
        cmdline: f.cmdline.clone(),
    }
}

/// Passes the kernel's process events to the daemon's loop until it is gone.
fn forward_events(mut ev: ProcEvents, tx: &std::sync::mpsc::Sender<Result<Vec<Event>, String>>) {
    loop {
        let got = match ev.recv(Duration::from_millis(500)) {
            // A new thread is no new process: the daemon's rules match
            // processes (its sessions follow their own threads).
            Ok(mut v) => {
                v.retain(|e| !matches!(e, Event::Thread { .. }));
                if v.is_empty() {
                    continue;
                }
                Ok(v)
            }
            // ENOBUFS: the kernel dropped events; the subscription goes on.
            Err(e) if e.raw_os_error() == Some(libc::ENOBUFS) => Err(e.to_string()),
            Err(e) => {
                eprintln!("herd daemon: the proc connector failed ({e})");
                return;
            }
        };
        if tx.send(got).is_err() {
            return;
        }
    }
}

/// Takes the daemon's lock in `dir`, or says which daemon holds it.
fn take_lock(dir: &Path) -> Result<std::fs::File, Failure> {
    use std::io::Write;
    use std::os::fd::AsRawFd;
    let path = dir.join("daemon.lock");
    let mut f = std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .read(true)
        .write(true)
        .open(&path)
        .map_err(|e| Failure::Internal(anyhow::anyhow!("{}: {e}", path.display())))?;
    // SAFETY: flock on a descriptor this function owns.
    if unsafe { libc::flock(f.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) } != 0 {
        let holder = std::fs::read_to_string(&path).unwrap_or_default();
        return Err(Failure::Input(anyhow::anyhow!(
            "another herd daemon (pid {}) runs with state directory {}: one per machine",
            holder.trim(),
            dir.display()
        )));
    }
    f.set_len(0)?;
    writeln!(f, "{}", std::process::id())?;
    Ok(f)
}
