//! The real machine as the engine sees it: managed programs observed
//! through `/proc`, perf_event, RAPL and resctrl, and acted on with
//! `sched_setaffinity`, SIGSTOP/SIGCONT, and, where set up, a cgroup cpuset
//! and freezer per program ([`crate::cgroup`]).
//!
//! Safety rules this module keeps:
//! - a program herd paused is continued or thawed by [`LiveWorld::restore`],
//!   and, if herd dies without restoring, by the kernel (children are
//!   spawned with `PR_SET_PDEATHSIG = SIGCONT`, see [`spawn`]) or by herd's
//!   cgroup guard;
//! - affinities herd changed are put back by `restore`, and so are the
//!   normal policies of threads a plan put in lanes (SCHED_FIFO); if herd
//!   dies first, its cgroup guard resets every real-time thread in herd's
//!   groups;
//! - a thread or program that vanishes between two looks is skipped, never
//!   an error.

mod actuate;
mod births;
pub mod budget;
mod clock;
mod counters;
mod family;
mod kernel_times;
mod learned;
pub mod memory;
mod progress_turn;
mod quiet;
mod session;
mod stats;
mod thread_lists;
mod track;
mod waits;

pub use stats::LiveStats;
use track::Track;

pub use learned::db_path;
pub use session::{Finished, Learn, Session};

use std::collections::{BTreeMap, HashMap, HashSet};
use std::io;
use std::path::{Path, PathBuf};
use std::process::{Child, ExitStatus};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Instant;

use herd_engine::{Clock, Sensor};
use herd_policy::{JobView, Level, Obs, Snapshot, SystemObs, TaskState, TaskView};
use herd_topo::CpuSet;

use crate::cgroup::Cgroups;
use crate::control;
use crate::procfs::{self, ThreadSample};
use crate::rapl::Rapl;
use crate::resctrl::Mbm;
pub use crate::spawn::{
    HOLD_ARG, Hold, SpawnOptions, declared_threads, exec_held, omp_threads, resolve, spawn, spawn_with,
};

/// A program herd manages.
#[derive(Debug)]
pub struct Program {
    /// Its name in reports.
    pub name: String,
    /// Its profile key.
    pub program: String,
    /// The process id.
    pub pid: i32,
    /// The child handle, when herd started it (to reap it).
    pub child: Option<Child>,
    /// When it started, relative to the world's start.
    pub arrival_ns: u64,
    /// A memory-intensity hint.
    pub memory_hint: Option<Level>,
    /// The thread count the user declared for it, if any (see
    /// [`herd_policy::JobView::threads_declared`]).
    pub threads_declared: Option<u32>,
    /// Its exit status, once reaped.
    pub status: Option<ExitStatus>,
    /// Whether herd has it stopped.
    pub paused: bool,
    /// Whether that stop is a cgroup freeze (thawed, not continued).
    pub frozen: bool,
    /// When it exited, relative to the world's start.
    pub exited_ns: Option<u64>,
    /// Started held (waiting before its first instruction, see [`Hold`]):
    /// let go after the first decision unless that decision pauses it.
    pub hold: Option<Hold>,
}

impl Program {
    /// Records a started program's exit, and removes its heartbeat file in
    /// case a kill left one behind (the pid is not reused before this).
    fn reaped(&mut self, status: Option<ExitStatus>, now_ns: u64) {
        self.status = status;
        self.exited_ns = Some(now_ns);
        crate::heartbeats::remove_file_of(self.pid);
    }

    /// A program with process id `pid`, started now, neither paused nor held.
    pub fn new(name: String, program: String, pid: i32, child: Option<Child>) -> Program {
        Program {
            name,
            program,
            pid,
            child,
            arrival_ns: 0,
            memory_hint: None,
            threads_declared: None,
            status: None,
            paused: false,
            frozen: false,
            exited_ns: None,
            hold: None,
        }
    }

    /// Whether it is held: started, but not yet let go.
    pub fn held(&self) -> bool {
        self.hold.is_some()
    }

    /// Whether it is still running (or stopped), as far as herd last looked.
    pub fn alive(&self) -> bool {
        self.status.is_none() && self.exited_ns.is_none()
    }

    /// A running process herd did not start, for `herd attach`. Refuses
    /// processes the caller could not signal anyway.
    pub fn attach(pid: i32) -> io::Result<Program> {
        control::may_signal(pid)?;
        let name = std::fs::read_to_string(format!("/proc/{pid}/comm")).map(|c| c.trim().to_string())?;
        let program =
            std::fs::read_link(format!("/proc/{pid}/exe")).map_or(name.clone(), |e| e.display().to_string());
        let mut p = Program::new(name, program, pid, None);
        // What it was started with, where it says (its environment is
        // readable by whoever may signal it).
        p.threads_declared = std::fs::read(format!("/proc/{pid}/environ"))
            .ok()
            .and_then(|env| {
                env.split(|b| *b == 0)
                    .find_map(|kv| kv.strip_prefix(b"OMP_NUM_THREADS=").map(<[u8]>::to_vec))
            })
            .and_then(|v| omp_threads(&String::from_utf8_lossy(&v)));
        Ok(p)
    }
}

/// Per job, how many of its threads herd tracks (`observe`).
type Census = HashMap<usize, u32>;

/// Bytes per LLC miss: a cache line (memory traffic = misses x line size).
const LINE_BYTES: u64 = 64;

/// Managed programs on this machine, behind the engine's traits.
pub struct LiveWorld {
    proc_root: PathBuf,
    programs: Vec<Program>,
    tasks: BTreeMap<i32, Track>,
    snapshot: Snapshot,
    start: Instant,
    stop: Arc<AtomicBool>,
    buf: Vec<u8>,
    perf: counters::PerfBudget,
    /// The open-file limit (soft) when the world was made.
    fd_limit: usize,
    /// This run's record of the CPUs it holds, for other herd instances.
    claim: Option<crate::peers::Claim>,
    /// Which programs were alive when `snapshot.jobs` was built.
    jobs_alive: Vec<bool>,
    /// One pidfd per program (`None` where the kernel has none): the clock
    /// sleeps on them, waking at the deadline or the moment one exits.
    pidfds: Vec<Option<std::os::fd::OwnedFd>>,
    /// herd's cgroups for the programs it started, when it uses any.
    cgroups: Option<Cgroups>,
    /// RAPL energy counters, where the machine has them.
    rapl: Option<Rapl>,
    /// resctrl bandwidth monitoring, where mounted; `mbm_tried[j]` once
    /// program j was offered to it.
    mbm: Option<Mbm>,
    mbm_tried: Vec<bool>,
    /// Each program's memory per NUMA node and when it was read; `None`
    /// on a machine with one node, where it says nothing.
    numa_memory: Option<memory::NumaMemory>,
    /// Moves a job's memory onto the nodes a policy keeps it on
    /// (`--memory-follow`); `None` when off or with one node.
    follower: Option<memory::Follower>,
    /// Each CPU's idle ticks at the last full snapshot (`/proc/stat`).
    idle_ticks: Option<Vec<(u32, u64)>>,
    /// Progress from programs that report heartbeats (S4).
    heartbeats: crate::heartbeats::Heartbeats,
    /// The core budget's file, when a controller sets one.
    budget: Option<budget::BudgetFile>,
    /// When the last full snapshot was taken.
    full_ns: u64,
    /// Whether a plan's lanes may be applied: only when herd's loop runs
    /// under SCHED_FIFO above them (`--realtime`), or a thread held back
    /// behind spinning ones would wait for a loop that never runs.
    lanes_allowed: bool,
    /// Each program's processes below it (forked workers), as last found,
    /// and when: found again every [`family::FAMILY_RESCAN_NS`].
    family: Vec<Vec<i32>>,
    family_ns: Option<u64>,
    /// The kernel's last process id, which programs were looked at and
    /// how many thread lists had been made, when the family was last found
    /// (see [`family`]).
    family_key: Option<(i32, Vec<bool>, u64)>,
    /// Programs that could not join herd's cgroups (said once).
    adopt_failed: Vec<usize>,
    /// The CPUs herd itself may use: a program allowed all of them needs
    /// no cpuset.
    own_cpus: Option<CpuSet>,
    /// The keeper (`crate::keeper`), told of every pin and stop, once the
    /// first plan acts; `keeper_exe` is herd's binary to start it from
    /// (`None`: no keeper, as in tests of the world alone).
    keeper: Option<crate::keeper::Keeper>,
    keeper_exe: Option<std::path::PathBuf>,
    /// The watched processes' thread ids, listed again only when changed.
    thread_lists: thread_lists::ThreadLists,
    /// Per job, every mask herd has given one of its threads this run: a
    /// new thread found on one inherited it from its creator, even after
    /// herd moved the creator on (its current mask alone misses that). A
    /// thread its program set to such a mask itself is taken for one that
    /// inherited it: at the end it gets its program's mask, not that one.
    pins_given: HashMap<usize, HashSet<CpuSet>>,
    /// The kernel's fork events, once herd pins: children born on a pin
    /// are given their program's mask at birth.
    births: births::Births,
    /// Processes none of whose threads ran since the last turn.
    quiet: quiet::QuietGroups,
    /// Threads' times from herd's eBPF program, once loaded.
    kernel: kernel_times::KernelTimes,
    /// Full snapshots taken.
    turns: u64,
    /// Threads' lists of the processes they forked, as last read.
    children_seen: procfs::ChildrenSeen,
    /// What herd did.
    pub stats: LiveStats,
}

/// A clock tick of `/proc/stat`'s CPU times, in ns.
fn tick_ns() -> u64 {
    // SAFETY: sysconf has no preconditions.
    1_000_000_000 / unsafe { libc::sysconf(libc::_SC_CLK_TCK) }.max(1) as u64
}

/// Program `job`'s mask: its main thread's (`main`) first, else (a main
/// thread that has exited) another of its threads' first that is none of
/// herd's `pins` (a free function: callers hold other fields mutably).
fn program_mask(
    tasks: &BTreeMap<i32, Track>,
    pins: Option<&HashSet<CpuSet>>,
    main: i32,
    job: usize,
) -> Option<CpuSet> {
    tasks.get(&main).and_then(|m| m.original.clone()).or_else(|| {
        tasks
            .values()
            .filter(|t| t.job == job)
            .filter_map(|t| t.original.as_ref())
            .find(|o| !pins.is_some_and(|p| p.contains(*o)))
            .cloned()
    })
}

/// The processes program `job` forked, as `LiveWorld::family` last found
/// them (a free function: callers hold other fields of the world mutably).
fn forked(family: &[Vec<i32>], job: usize) -> &[i32] {
    family.get(job).map_or(&[], Vec::as_slice)
}

/// Where resctrl is mounted, if it is.
fn resctrl_mount() -> Option<PathBuf> {
    let mounts = std::fs::read_to_string("/proc/self/mounts").ok()?;
    crate::doctor::parse_mounts(&mounts)
        .into_iter()
        .find(|m| m.fstype == "resctrl")
        .map(|m| m.dir)
}

impl LiveWorld {
    /// A world managing `programs`; `stop` ends the loop when set (signal handlers set it).
    pub fn new(programs: Vec<Program>, stop: Arc<AtomicBool>) -> Self {
        let pidfds = programs.iter().map(|p| control::pidfd(p.pid)).collect();
        LiveWorld {
            pidfds,
            perf: counters::PerfBudget::new(),
            claim: None,
            fd_limit: crate::fds::limits().map_or(1024, |(soft, _)| soft.min(usize::MAX as u64) as usize),
            jobs_alive: Vec::new(),
            heartbeats: crate::heartbeats::Heartbeats::new(programs.len()),
            numa_memory: std::path::Path::new("/sys/devices/system/node/node1")
                .exists()
                .then(|| memory::NumaMemory::new(programs.len())),
            idle_ticks: None,
            follower: memory::Follower::new(memory::numa_nodes(Path::new("/sys"))),
            proc_root: PathBuf::from("/proc"),
            programs,
            tasks: BTreeMap::new(),
            snapshot: Snapshot::default(),
            start: Instant::now(),
            stop,
            buf: Vec::new(),
            cgroups: None,
            rapl: Rapl::discover(Path::new("/sys")),
            mbm: resctrl_mount().and_then(|dir| Mbm::discover(&dir)),
            mbm_tried: Vec::new(),
            stats: LiveStats::default(),
            budget: None,
            full_ns: 0,
            lanes_allowed: false,
            family: Vec::new(),
            family_ns: None,
            family_key: None,
            adopt_failed: Vec::new(),
            own_cpus: control::affinity(std::process::id() as i32).ok(),
            keeper: None,
            keeper_exe: None,
            thread_lists: thread_lists::ThreadLists::default(),
            pins_given: HashMap::new(),
            births: births::Births::default(),
            quiet: quiet::QuietGroups::default(),
            kernel: kernel_times::KernelTimes::new(true),
            turns: 0,
            children_seen: procfs::ChildrenSeen::default(),
        }
    }

    /// Program `j` reports progress through `file` (`herd run --progress-from`).
    pub fn follow_progress(&mut self, j: usize, file: crate::progress::ProgressFile) {
        self.heartbeats.follow_file(j, file);
    }

    /// What went wrong with progress files, one line each.
    pub fn progress_problems(&mut self) -> Vec<String> {
        self.heartbeats.problems()
    }

    /// Follows a core budget an outside controller writes to a file
    /// (`herd run --cores-from`): each snapshot carries it.
    pub fn follow_budget(&mut self, budget: budget::BudgetFile) {
        self.budget = Some(budget);
    }

    /// Manages the programs herd started through `cgroups`: each moves into
    /// its own groups now (a held program before its first instruction).
    /// Returns the programs that could not be moved; they fall back to
    /// signals and per-thread affinity.
    pub fn use_cgroups(&mut self, cgroups: Cgroups) {
        // Programs join their groups when a plan first pauses or confines
        // them (`adopt_for`): a group costs even when it holds a program
        // nothing is done to (sysbench's threads test ran 1.061x plain
        // Linux inside one, 0.998x outside), and most plans that let every
        // program run everywhere never need it.
        self.cgroups = Some(cgroups);
    }

    /// The managed programs.
    pub fn programs(&self) -> &[Program] {
        &self.programs
    }

    fn reap(&mut self) {
        let now = self.start.elapsed().as_nanos() as u64;
        for p in &mut self.programs {
            if p.status.is_none() {
                match p.child.as_mut() {
                    Some(child) => {
                        if let Ok(Some(status)) = child.try_wait() {
                            p.reaped(Some(status), now);
                        }
                    }
                    // Not our child (attached): gone when /proc says so.
                    None if p.exited_ns.is_none() => {
                        if matches!(procfs::state(&self.proc_root, p.pid), None | Some('Z' | 'X')) {
                            p.exited_ns = Some(now);
                        }
                    }
                    None => {}
                }
            }
        }
    }

    /// Leaves every job's memory where it is (`--memory-follow off`): the
    /// simulator's `first-touch` memory, on a kernel that does not balance.
    pub fn without_memory_follow(mut self) -> Self {
        self.follower = None;
        self
    }

    /// Lets plans put threads in lanes (SCHED_FIFO priorities): call once
    /// herd's loop runs under SCHED_FIFO above them.
    pub fn allow_lanes(&mut self) {
        self.lanes_allowed = true;
    }

    /// Continues every program herd stopped, gives every thread whose
    /// affinity herd changed its original affinity back, and puts every
    /// thread herd gave a lane back under the normal policy.
    pub fn restore(&mut self) {
        if let Some(f) = self.follower.as_mut() {
            f.finish();
            (self.stats.memory_moves, self.stats.memory_moved_kb) = (f.moves, f.moved_kb);
            (self.stats.memory_pages_left, self.stats.memory_moves_refused) = (f.pages_left, f.refused);
            self.stats.memory_held_off = f.held_off;
        }
        self.reset_lanes();
        // Out of herd's groups first: that thaws frozen programs, and in v1
        // resets affinities, which the loop below then puts back.
        if let Some(cg) = self.cgroups.as_mut() {
            cg.release();
        }
        if let Some(mbm) = self.mbm.as_mut() {
            mbm.release();
        }
        for (job, p) in self.programs.iter_mut().enumerate() {
            if p.frozen {
                p.paused = false;
                p.frozen = false;
            }
            if p.paused && !p.held() && p.alive() {
                let _ = control::signal(p.pid, libc::SIGCONT);
                for &pid in forked(&self.family, job) {
                    let _ = control::signal(pid, libc::SIGCONT);
                }
            }
            p.paused = false;
            if let Some(h) = p.hold.take() {
                h.release();
            }
        }
        for (&tid, track) in &mut self.tasks {
            if let (Some(_), Some(original)) = (&track.placed, &track.original) {
                // A thread that exited meanwhile fails with ESRCH: nothing to restore.
                let _ = control::set_affinity(tid, original);
                track.placed = None;
            }
        }
        if let Some(k) = self.keeper.take() {
            k.done();
        }
    }
}

impl Sensor for LiveWorld {
    fn observe(&mut self) -> &Snapshot {
        self.reap();
        let now_ns = self.now_ns();
        self.turns += 1;
        self.kernel.turn(self.tasks.keys().copied());
        // Read first: whether threads wait in run queues decides which
        // threads' samples may be kept (below).
        let proc_stat = std::fs::read_to_string(self.proc_root.join("stat")).ok();
        let idle_ns_by_cpu = proc_stat.as_deref().and_then(|text| self.idle_since_last(text));
        let rule = waits::KeepRule::new(
            proc_stat.as_deref().and_then(procfs::parse_runnable),
            idle_ns_by_cpu.as_deref(),
            now_ns.saturating_sub(self.full_ns),
        );
        let mut tasks = Vec::new();
        let (boot_now_ns, tick, period_ns) =
            (clock::boot_ns(), tick_ns(), now_ns.saturating_sub(self.full_ns));
        // Each process's threads, listed once a turn, here; and which
        // processes had no thread run, asked before the look for forked
        // processes reads any thread.
        let mut listed: HashMap<i32, Vec<i32>> = HashMap::new();
        for (job, p) in self.programs.iter().enumerate().filter(|(_, p)| p.alive()) {
            for pid in std::iter::once(p.pid).chain(forked(&self.family, job).iter().copied()) {
                listed.insert(pid, self.thread_lists.of(&self.proc_root, pid));
            }
        }
        let counts: Vec<(i32, usize)> = listed.iter().map(|(pid, tids)| (*pid, tids.len())).collect();
        self.quiet.turn(&counts);
        self.rescan_family_if_due(now_ns);
        // Descriptors for watching threads: the limit less what the rest
        // of herd needs; those the threads alive last period hold.
        let fd_room = self
            .fd_limit
            .saturating_sub(counters::RESERVED_FDS + 3 * self.programs.len());
        let mut used: usize = self.tasks.values().map(Track::descriptors).sum();
        let mut live_pids = HashSet::new();
        // Per job, its tracks (a new thread's rank is their count), counted
        // at the first new thread of a turn and kept up to date after, not
        // searched per new thread (4,096 new threads: 16 million steps).
        let mut census: Option<Census> = None;
        for (job, p) in self.programs.iter().enumerate() {
            if !p.alive() {
                continue;
            }
            let beats = self.heartbeats.read(job, p.pid, now_ns);
            // The program's own threads, then those of the processes it forked.
            let family = forked(&self.family, job);
            let mut threads = Vec::new();
            for pid in std::iter::once(p.pid).chain(family.iter().copied()) {
                live_pids.insert(pid);
                let quiet = self.quiet.is_quiet(pid);
                // A process the look for forked ones found is listed now.
                let tids = listed
                    .remove(&pid)
                    .unwrap_or_else(|| self.thread_lists.of(&self.proc_root, pid));
                threads.extend(tids.into_iter().map(|tid| (pid, tid, quiet)));
            }
            // Whether each of its processes has a stop pending, asked at
            // most once a turn and only of a paused one seen not stopped.
            let mut stopping: HashMap<i32, bool> = HashMap::new();
            // A second pass, over the threads of processes the first found
            // listed out of date (`thread_lists`), not yet seen this turn;
            // not a third (a process that keeps starting threads could keep
            // a turn going): what the second finds is listed next turn.
            for pass in 0..2 {
                let mut pids: Vec<i32> = threads.iter().map(|&(pid, _, _)| pid).collect();
                pids.dedup();
                for (pid, tid, quiet) in std::mem::take(&mut threads) {
                    // Tracks stay where they are, marked with the turn that saw
                    // them (moving each between maps every turn was a tenth of
                    // a turn at 1,024 threads).
                    if !self.tasks.contains_key(&tid) {
                        let track = {
                            // Kept files where there is room, else read by path.
                            let files = if used + 2 <= fd_room {
                                match procfs::ThreadFiles::open(&self.proc_root, pid, tid) {
                                    Some(f) => f,
                                    None => continue,
                                }
                            } else {
                                procfs::ThreadFiles::by_path(&self.proc_root, pid, tid)
                            };
                            if files.descriptors() == 0 {
                                self.perf.uncached += 1;
                            }
                            used += files.descriptors();
                            // Its rank in its job; and whether it inherited a
                            // pin herd gave the thread (or process) that made
                            // it: then its original is its program's mask, so
                            // that a restore (or the keeper) does not keep it.
                            let own = control::affinity(tid).ok();
                            let tracks_of = census.get_or_insert_with(|| {
                                let mut c = Census::new();
                                for t in self.tasks.values() {
                                    *c.entry(t.job).or_default() += 1;
                                }
                                c
                            });
                            let rank = tracks_of.get(&job).copied().unwrap_or(0);
                            let inherited = own
                                .as_ref()
                                .is_some_and(|o| self.pins_given.get(&job).is_some_and(|p| p.contains(o)));
                            // A thread born inside herd's cpuset has that
                            // cpuset's mask, not one its program chose: its
                            // original is its program's too (a killed herd's
                            // keeper restored such threads to the cpuset's one
                            // CPU after the guard had moved them home).
                            let confined = self.cgroups.as_ref().is_some_and(|c| c.has(job));
                            // The program's mask: its main thread's first, else
                            // (a main thread that has exited) another of its
                            // threads' that is no pin of herd's.
                            let program_mask =
                                || program_mask(&self.tasks, self.pins_given.get(&job), p.pid, job);
                            let original = (inherited || confined)
                                .then(program_mask)
                                .flatten()
                                .or_else(|| own.clone());
                            // An inherited pin is herd's doing, and not a
                            // placement of this thread: it gets its program's
                            // mask at once, and the kernel places it until the
                            // policy does (`make -j2` under static:compact ran
                            // each compiler it forked on make's one CPU, 1.3x
                            // plain Linux's time). Where that fails, the pin is
                            // restored at the end like one herd set, and the
                            // keeper told now.
                            let freed = inherited
                                && original.as_ref().is_some_and(|o| {
                                    own.as_ref() != Some(o) && control::set_affinity(tid, o).is_ok()
                                });
                            let placed = own.filter(|o| inherited && !freed && original.as_ref() != Some(o));
                            if let (Some(_), Some(original), Some(k)) =
                                (&placed, &original, self.keeper.as_mut())
                            {
                                k.pinned(tid, original);
                            }
                            Track {
                                job,
                                pid,
                                switch_mark: (0, 0),
                                counters_due: true,
                                rank,
                                files,
                                counters: Vec::new(),
                                sampler: None,
                                last: ThreadSample {
                                    tid,
                                    ..ThreadSample::default()
                                },
                                original,
                                placed,
                                lane: herd_policy::Lane::Fair,
                                seen_turn: 0,
                                pre_times: None,
                                busy: false,
                            }
                        };
                        self.tasks.insert(tid, track);
                        self.kernel.watch(tid);
                        if let Some(tracks_of) = census.as_mut() {
                            *tracks_of.entry(job).or_default() += 1;
                        }
                    }
                    let Some(track) = self.tasks.get_mut(&tid) else {
                        continue;
                    };
                    // A thread that neither ran nor waited since it was last
                    // seen asleep may keep that sample (`waits`).
                    let allowed = track.placed.as_ref().or(track.original.as_ref());
                    let keep = (track.last.run_ns > 0 && rule.keeps(self.turns, tid, allowed))
                        .then_some(&track.last);
                    // In a process none of whose threads ran, its schedstat
                    // is the last one read: not read again.
                    let looked = track.pre_times.take();
                    let unread = quiet && keep.is_some();
                    let pre = if unread { Some(track.last.times()) } else { looked };
                    // From the kernel's program where it has the thread.
                    let got = match self.kernel.sample(tid, &track.last) {
                        Some(got) => {
                            self.stats.threads_from_kernel += 1;
                            Some(got)
                        }
                        None => {
                            let got = track.files.sample_or_keep(&mut self.buf, keep, pre);
                            // A sample kept unread costs next to nothing.
                            if got.is_some_and(|(_, read)| read) {
                                self.kernel.read_from_proc();
                            }
                            got
                        }
                    };
                    let Some((sample, read)) = got else {
                        self.thread_lists.vanished(pid);
                        continue;
                    };
                    if read {
                        self.thread_lists.counted(pid, sample.threads);
                    }
                    if matches!(sample.state, 'Z' | 'X' | 'x') {
                        continue;
                    }
                    let prev = track.last;
                    let counted = if read {
                        counters::CountedObs::read(&mut track.counters)
                    } else {
                        self.stats.threads_kept += 1;
                        self.stats.threads_unread += u64::from(unread);
                        counters::CountedObs::still(&track.counters)
                    };
                    // The kernel's count when perf gives it; otherwise a changed
                    // last CPU is at least one migration (a lower bound: several
                    // moves within one period count once).
                    let migrations = counted
                        .migrations
                        .unwrap_or_else(|| u64::from(prev.run_ns > 0 && sample.cpu != prev.cpu));
                    self.stats.migrations += migrations;
                    track.last = sample;
                    let state = match sample.state {
                        // A held program waits on its pipe, asleep, not stopped.
                        _ if p.held() => TaskState::Paused,
                        'T' | 't' if p.paused => TaskState::Paused,
                        // Stopped but not yet taken: it waits for a CPU.
                        _ if p.paused
                            && !p.frozen
                            && *stopping
                                .entry(pid)
                                .or_insert_with(|| procfs::stop_pending(&self.proc_root, pid)) =>
                        {
                            TaskState::Paused
                        }
                        // A frozen task shows as sleeping: herd's own record says why.
                        _ if p.frozen => TaskState::Paused,
                        'R' => TaskState::Runnable,
                        _ => TaskState::Blocked,
                    };
                    // First seen: the period's share of its times since it started.
                    let first = (prev.run_ns == 0 && prev.slices == 0)
                        .then(|| clock::first_sight_share(sample.start_ticks, tick, boot_now_ns, period_ns))
                        .flatten();
                    let slices = clock::scaled(sample.slices.saturating_sub(prev.slices), first);
                    match counters::judge_switches(&mut track.switch_mark, sample.slices, now_ns) {
                        Some(true)
                            if track.counters_due
                                || !track.counters.is_empty()
                                || track.sampler.is_some() =>
                        {
                            track.counters_due = false;
                            track.counters.clear();
                            track.sampler = None;
                            self.stats.switchy_threads += 1;
                        }
                        Some(false) if track.counters_due => {
                            track.counters_due = false;
                            let (counters, sampler) = self.perf.open_for(tid, fd_room.saturating_sub(used));
                            used += counters.len() + usize::from(sampler.is_some());
                            (track.counters, track.sampler) = (counters, sampler);
                        }
                        _ => {}
                    }
                    tasks.push(TaskView {
                        id: tid as u64,
                        job: job as u32,
                        rank: track.rank,
                        state,
                        cpu: Some(sample.cpu),
                        obs: Obs {
                            cpu_time_ns: clock::scaled(sample.run_ns.saturating_sub(prev.run_ns), first),
                            wait_ns: clock::scaled(sample.wait_ns.saturating_sub(prev.wait_ns), first),
                            // Where the kernel counts them (a third schedstat field).
                            timeslices: (sample.slices > 0).then_some(slices),
                            migrations: migrations as u32,
                            // Hardware signals the PMU does not give stay None.
                            instructions: counted.instructions,
                            cycles: counted.cycles,
                            llc_refs: counted.llc_refs,
                            llc_misses: counted.llc_misses,
                            mem_bytes: counted.llc_misses.map(|m| m * LINE_BYTES),
                            code_samples: track.sampler.as_mut().map(|s| s.drain()),
                        },
                        // Sorted by thread id: one search per thread, not a scan.
                        heartbeats: beats
                            .as_ref()
                            .and_then(|b| b.binary_search_by_key(&tid, |&(t, _)| t).ok().map(|i| b[i].1)),
                    });
                    track.busy = tasks
                        .last()
                        .is_some_and(|t| herd_policy::wants_cpu_over(period_ns, t));
                    track.seen_turn = self.turns;
                }
                pids.retain(|&pid| pass == 0 && self.thread_lists.is_stale(pid));
                for pid in pids {
                    let tids = self.thread_lists.of(&self.proc_root, pid);
                    let turn = self.turns;
                    let unseen = tids
                        .into_iter()
                        .filter(|t| self.tasks.get(t).is_none_or(|k| k.seen_turn != turn));
                    threads.extend(unseen.map(|tid| (pid, tid, false)));
                }
            }
        }
        // Tracks not seen again are threads that exited.
        let turn = self.turns;
        let kernel = &mut self.kernel;
        self.tasks.retain(|&tid, t| {
            let alive = t.seen_turn == turn;
            if !alive {
                kernel.forget(tid);
            }
            alive
        });
        self.thread_lists.retain(&live_pids);
        self.stats.max_threads = self.stats.max_threads.max(tasks.len());
        (
            self.stats.uncounted_threads,
            self.stats.uncached_threads,
            self.stats.refused_threads,
        ) = (self.perf.uncounted, self.perf.uncached, self.perf.refused);
        // Job views change only when a program exits: rebuild them then,
        // not every period.
        let alive: Vec<bool> = self.programs.iter().map(Program::alive).collect();
        let rebuilt = alive != self.jobs_alive;
        let mut jobs = if !rebuilt {
            std::mem::take(&mut self.snapshot.jobs)
        } else {
            self.jobs_alive = alive;
            self.programs
                .iter()
                .enumerate()
                .filter(|(_, p)| p.alive())
                .map(|(j, p)| JobView {
                    id: j as u32,
                    name: p.name.clone(),
                    program: p.program.clone(),
                    arrival_ns: p.arrival_ns,
                    memory_hint: p.memory_hint,
                    memory_kb: None,
                    threads_declared: p.threads_declared,
                })
                .collect()
        };
        self.refresh_numa_memory(now_ns, &mut jobs, rebuilt);
        let system = self.measure_memory_and_energy(&mut tasks, idle_ns_by_cpu);
        // Since the last full snapshot: progress-only ones between add no
        // observations.
        let period_ns = now_ns.saturating_sub(self.full_ns);
        self.full_ns = now_ns;
        self.snapshot = Snapshot {
            now_ns,
            period_ns,
            tasks,
            jobs,
            system,
            budget_cores: self.budget.as_mut().and_then(|b| b.poll(now_ns)),
            progress_only: false,
            lanes_apply: self.lanes_allowed,
            repeats_last: false,
            // Live task lists are read afresh each turn: a policy compares them.
            tasks_epoch: 0,
        };
        &self.snapshot
    }

    fn finished(&self) -> bool {
        self.stop.load(Ordering::Relaxed) || self.programs.iter().all(|p| !p.alive())
    }

    fn observe_progress(&mut self) -> &Snapshot {
        if self.progress_turn() {
            &self.snapshot
        } else {
            self.observe()
        }
    }
}

impl LiveWorld {
    /// Each CPU's idle time (ns, by CPU number) since the last full
    /// snapshot, from `/proc/stat`'s `text` now; `None` at the first.
    fn idle_since_last(&mut self, text: &str) -> Option<Vec<u64>> {
        let now = procfs::parse_cpu_idle(text);
        let before = self.idle_ticks.replace(now.clone())?;
        let tick_ns = tick_ns();
        let n = now.iter().map(|(c, _)| *c as usize + 1).max().unwrap_or(0);
        let mut idle = vec![0u64; n];
        for ((c, t), (c0, t0)) in now.iter().zip(&before) {
            if c == c0 {
                idle[*c as usize] = t.saturating_sub(*t0) * tick_ns;
            }
        }
        Some(idle)
    }

    /// Per-program bandwidth from resctrl (split over a program's threads by
    /// their CPU time this period, which is what the counters cannot tell
    /// apart) and the machine's energy and traffic this period.
    fn measure_memory_and_energy(
        &mut self,
        tasks: &mut [TaskView],
        idle_ns_by_cpu: Option<Vec<u64>>,
    ) -> SystemObs {
        // Each CPU's idle time since the last full snapshot (the guard tells
        // CPUs idle from CPUs other programs use).
        let mut system = SystemObs {
            idle_ns_by_cpu,
            ..SystemObs::default()
        };
        if let Some(rapl) = self.rapl.as_mut() {
            let j = rapl.delta_j();
            system.energy_j = Some(j);
            *self.stats.energy_j.get_or_insert(0.0) += j;
        }
        if let Some(mbm) = self.mbm.as_mut() {
            self.mbm_tried.resize(self.programs.len(), false);
            for (job, p) in self.programs.iter().enumerate() {
                if !self.mbm_tried[job] && p.alive() {
                    self.mbm_tried[job] = true;
                    let tids = procfs::threads(&self.proc_root, p.pid);
                    let _ = mbm.adopt(job, p.pid, &tids);
                }
                if !mbm.monitors(job) {
                    continue;
                }
                let bytes = mbm.job_delta(job);
                let (cpu, n) = tasks
                    .iter()
                    .filter(|t| t.job as usize == job)
                    .fold((0u64, 0usize), |(c, n), t| (c + t.obs.cpu_time_ns, n + 1));
                let n = n.max(1) as f64;
                for t in tasks.iter_mut().filter(|t| t.job as usize == job) {
                    t.obs.mem_bytes = bytes.map(|b| {
                        let share = if cpu > 0 {
                            t.obs.cpu_time_ns as f64 / cpu as f64
                        } else {
                            1.0 / n
                        };
                        (b as f64 * share).round() as u64
                    });
                }
            }
            system.mem_bytes = mbm.system_delta();
        }
        // Summing no Options gives Some(0): a period with no tasks says nothing.
        let ours: Option<u64> = tasks.iter().map(|t| t.obs.mem_bytes).sum();
        if let (Some(b), false) = (ours, tasks.is_empty()) {
            *self.stats.mem_bytes.get_or_insert(0) += b;
        }
        system
    }
}

#[cfg(test)]
mod tests;
