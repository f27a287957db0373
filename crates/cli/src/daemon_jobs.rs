//! The daemon's jobs: the book of who holds which CPUs (shared with the
//! socket's threads, which grant leases from it), one live session per
//! managed job on a thread of its own, and the records under the state
//! directory from which a restarted daemon adopts the jobs still running.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::thread::JoinHandle;

use herd_plan::share::{self, Ask, Held};
use herd_policy::{Plan, Policy, PolicySpec, View};
use herd_runtime::live::{Learn, LiveWorld, Program, Session};
use herd_topo::{CpuSet, Machine};
use serde::{Deserialize, Serialize};

use crate::daemon_wire::JobStatus;

/// What a job's policy did so far, counted as it decides (the metrics and
/// `status` read them while it runs).
#[derive(Debug, Default)]
pub struct Counters {
    /// Decisions.
    pub decisions: AtomicU64,
    /// Thread placements in its plans.
    pub placements: AtomicU64,
    /// CPU time its decisions took, in nanoseconds.
    pub decide_ns: AtomicU64,
    /// Moves of its threads between CPUs the sensor saw.
    pub migrations: AtomicU64,
}

/// Who holds which CPUs, and every job's status: one lock, so that a
/// lease and an admission never grant the same CPU.
#[derive(Debug)]
pub struct Book {
    /// The machine.
    pub machine: Machine,
    /// Every rule's reservation together.
    pub reserved: CpuSet,
    held: BTreeMap<u64, Held>,
    /// Jobs by id.
    pub jobs: BTreeMap<u64, JobStatus>,
    /// Counters of running jobs, by id.
    pub counters: BTreeMap<u64, Arc<Counters>>,
    next_id: u64,
}

impl Book {
    /// An empty book for `machine`.
    pub fn new(machine: Machine, reserved: CpuSet) -> Book {
        Book {
            machine,
            reserved,
            held: BTreeMap::new(),
            jobs: BTreeMap::new(),
            counters: BTreeMap::new(),
            next_id: 1,
        }
    }

    /// A new job id.
    pub fn next_id(&mut self) -> u64 {
        self.next_id += 1;
        self.next_id - 1
    }

    /// CPUs for `ask` (see `herd_plan::share`), held for job `id` at once.
    pub fn grant(&mut self, id: u64, ask: &Ask) -> Option<CpuSet> {
        let held: Vec<Held> = self.held.values().cloned().collect();
        let cpus = share::grant(&self.machine, ask, &self.reserved, &held)?;
        self.hold(id, cpus.clone(), ask.share);
        Some(cpus)
    }

    /// The CPUs job `id` would get asking `ask` were its own free, when
    /// that is more than it holds: a job whose busy threads outgrew what
    /// it was granted (a program that starts its workers after herd first
    /// saw it) grows. `None`: no more to give.
    pub fn regrant(&self, id: u64, ask: &Ask) -> Option<CpuSet> {
        let now = self.held.get(&id)?.cpus.len();
        let others: Vec<Held> = self
            .held
            .iter()
            .filter(|(j, _)| **j != id)
            .map(|(_, h)| h.clone())
            .collect();
        share::grant(&self.machine, ask, &self.reserved, &others).filter(|c| c.len() > now)
    }

    /// Job `id` holds `cpus` (an adopted job keeps what it held).
    pub fn hold(&mut self, id: u64, cpus: CpuSet, share: bool) {
        self.held.insert(id, Held { cpus, share });
    }

    /// Whether `cpus` are free of every non-sharing holder.
    pub fn free(&self, cpus: &CpuSet) -> bool {
        self.held.values().all(|h| !h.cpus.intersects(cpus))
    }

    /// Job `id` ended: its CPUs and status go.
    pub fn release(&mut self, id: u64) {
        self.held.remove(&id);
        self.jobs.remove(&id);
        self.counters.remove(&id);
    }

    /// Every CPU some job holds.
    pub fn all_held(&self) -> CpuSet {
        self.held
            .values()
            .fold(CpuSet::default(), |a, h| a.union(&h.cpus))
    }

    /// The CPUs the daemon's own sessions hold: not those leased to herd
    /// commands, which record what they hold themselves (and would read
    /// the daemon's record of their own CPUs as another herd's).
    pub fn held_by_sessions(&self) -> CpuSet {
        self.held
            .iter()
            .filter(|(id, _)| self.jobs.get(id).is_none_or(|j| j.source != "registered"))
            .fold(CpuSet::default(), |a, (_, h)| a.union(&h.cpus))
    }

    /// The statuses with their counters read now.
    pub fn statuses(&self) -> Vec<JobStatus> {
        self.jobs
            .values()
            .map(|j| {
                let mut j = j.clone();
                if let Some(c) = self.counters.get(&j.id) {
                    j.decisions = c.decisions.load(Ordering::Relaxed);
                    j.placements = c.placements.load(Ordering::Relaxed);
                    j.decide_s = c.decide_ns.load(Ordering::Relaxed) as f64 / 1e9;
                    j.migrations = c.migrations.load(Ordering::Relaxed);
                }
                j
            })
            .collect()
    }
}

/// A job's policy, counted and kept within the job's CPUs: the guard's
/// kernel probes then let its threads run on those CPUs, not on others'.
struct Watched {
    inner: Box<dyn Policy>,
    cpus: CpuSet,
    counters: Arc<Counters>,
}

impl Policy for Watched {
    fn name(&self) -> String {
        self.inner.name()
    }
    fn decide(&mut self, view: &View<'_>) -> Plan {
        // CPU time, not wall time: with busy programs beside it the
        // daemon's thread may wait to run in the middle of a decision.
        let mut meter = herd_runtime::meter::CpuMeter::default();
        herd_engine::CostMeter::start(&mut meter);
        let plan = self.inner.decide(view);
        let c = &self.counters;
        c.decide_ns
            .fetch_add(herd_engine::CostMeter::stop(&mut meter), Ordering::Relaxed);
        c.decisions.fetch_add(1, Ordering::Relaxed);
        c.placements.fetch_add(plan.tasks.len() as u64, Ordering::Relaxed);
        plan
    }
    fn prepare(&mut self, machine: &herd_topo::Machine) {
        self.inner.prepare(machine);
    }
    fn wants_learning(&self) -> bool {
        self.inner.wants_learning()
    }
    fn progress_suffices(&self) -> bool {
        self.inner.progress_suffices()
    }
    fn timed_turns(&self) -> bool {
        self.inner.timed_turns()
    }
    fn shares_cpus_by_design(&self) -> bool {
        self.inner.shares_cpus_by_design()
    }
    fn follows_budget(&self) -> bool {
        self.inner.follows_budget()
    }
    fn allowed_cpus(&self) -> Option<CpuSet> {
        Some(
            self.inner
                .allowed_cpus()
                .map_or_else(|| self.cpus.clone(), |a| a.intersection(&self.cpus)),
        )
    }
}

/// How a job's session ended.
#[derive(Debug)]
pub struct Ended {
    /// Times the guard handed the job back to the kernel.
    pub backoffs: u32,
    /// What it did, for the log.
    pub summary: String,
}

/// A job whose session runs on its own thread.
pub struct Running {
    /// Its id in the book.
    pub id: u64,
    /// Its process.
    pub pid: i32,
    /// Ends its session (the daemon stopping).
    pub stop: Arc<AtomicBool>,
    thread: JoinHandle<Ended>,
}

impl Running {
    /// Whether its session has ended (its program exited, or stop).
    pub fn ended(&self) -> bool {
        self.thread.is_finished()
    }

    /// Waits for its session's end.
    pub fn join(self) -> Ended {
        self.thread.join().unwrap_or_else(|_| Ended {
            backoffs: 0,
            summary: "its session panicked; the machine was restored on the way out".into(),
        })
    }
}

/// Starts managing process `pid` under `spec` on `cpus` of `machine`,
/// with the loop `config`; `counters` count its decisions.
pub fn start(
    id: u64,
    pid: i32,
    spec: &PolicySpec,
    machine: &Machine,
    cpus: &CpuSet,
    config: herd_engine::Config,
    counters: Arc<Counters>,
) -> Result<Running, String> {
    let program = Program::attach(pid).map_err(|e| format!("cannot manage process {pid}: {e}"))?;
    let inner = crate::common::live_policy(spec).map_err(|e| format!("{e:?}"))?;
    let machine = machine
        .restricted(cpus)
        .map_err(|e| format!("cannot give process {pid} CPUs {cpus}: {e}"))?;
    let stop = Arc::new(AtomicBool::new(false));
    let mut world = LiveWorld::new(vec![program], Arc::clone(&stop));
    // The keeper undoes every pin if the daemon is killed outright.
    match herd_runtime::keeper::own_binary() {
        Ok(exe) => world.keep_with(exe),
        Err(e) => eprintln!(
            "herd daemon: warning: no keeper for process {pid} ({e}): a SIGKILL would leave it pinned"
        ),
    }
    let mut policy = Watched {
        inner,
        cpus: cpus.clone(),
        counters,
    };
    let thread = std::thread::Builder::new()
        .name(format!("job-{id}"))
        .spawn(move || {
            let (mut session, _) = Session::start(world, Learn::Off);
            let seen = Arc::clone(&policy.counters);
            session.run(&mut policy, &machine, &config, |view, _| {
                let moved: u64 = view
                    .snapshot
                    .tasks
                    .iter()
                    .map(|t| u64::from(t.obs.migrations))
                    .sum();
                seen.migrations.fetch_add(moved, Ordering::Relaxed);
            });
            let done = session.finish();
            let st = &done.world.stats;
            Ended {
                backoffs: done.guard.as_ref().map_or(0, |g| g.backoffs),
                summary: format!(
                    "{} placements, {} migrations, {} decisions{}",
                    st.placements,
                    st.migrations,
                    done.overhead.decisions,
                    done.guard
                        .as_ref()
                        .map(|g| format!("; {}", g.summary()))
                        .unwrap_or_default()
                ),
            }
        })
        .map_err(|e| format!("cannot start a thread for process {pid}: {e}"))?;
    Ok(Running {
        id,
        pid,
        stop,
        thread,
    })
}

/// What a daemon records of a job it manages, so that a daemon restarted
/// after being killed adopts it with the same CPUs.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Record {
    /// The process.
    pub pid: i32,
    /// Its start, in clock ticks since boot (a reused pid is not it).
    pub start_ticks: u64,
    /// The rule that took it.
    pub rule: String,
    /// The policy it ran under.
    pub policy: String,
    /// The CPUs it held.
    pub cpus: String,
}

fn records_dir(state_dir: &Path) -> PathBuf {
    state_dir.join("jobs")
}

fn record_path(state_dir: &Path, pid: i32) -> PathBuf {
    records_dir(state_dir).join(format!("{pid}.json"))
}

/// Writes `r` (atomically: a daemon killed mid-write leaves the old one).
pub fn write_record(state_dir: &Path, r: &Record) -> std::io::Result<()> {
    std::fs::create_dir_all(records_dir(state_dir))?;
    let path = record_path(state_dir, r.pid);
    let tmp = path.with_extension("tmp");
    std::fs::write(&tmp, serde_json::to_string(r).map_err(std::io::Error::other)?)?;
    std::fs::rename(tmp, path)
}

/// Removes job `pid`'s record.
pub fn remove_record(state_dir: &Path, pid: i32) {
    let _ = std::fs::remove_file(record_path(state_dir, pid));
}

/// Every record left under `state_dir`, unreadable ones removed.
pub fn read_records(state_dir: &Path) -> Vec<Record> {
    let Ok(entries) = std::fs::read_dir(records_dir(state_dir)) else {
        return Vec::new();
    };
    let mut out = Vec::new();
    for e in entries.flatten() {
        let path = e.path();
        match std::fs::read_to_string(&path)
            .ok()
            .and_then(|t| serde_json::from_str::<Record>(&t).ok())
        {
            Some(r) => out.push(r),
            None => {
                let _ = std::fs::remove_file(&path);
            }
        }
    }
    out.sort_by_key(|r| r.pid);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn records_round_trip_and_a_torn_one_is_dropped() {
        let dir = tempfile::tempdir().unwrap();
        let r = Record {
            pid: 42,
            start_ticks: 7,
            rule: "a".into(),
            policy: "static:compact".into(),
            cpus: "1".into(),
        };
        write_record(dir.path(), &r).unwrap();
        std::fs::write(dir.path().join("jobs/43.json"), "{\"pid\":").unwrap();
        assert_eq!(read_records(dir.path()), vec![r]);
        assert!(!dir.path().join("jobs/43.json").exists());
        remove_record(dir.path(), 42);
        assert!(read_records(dir.path()).is_empty());
    }

    #[test]
    fn the_book_never_grants_a_held_cpu_twice() {
        let m = Machine::synthetic("package:1 core:2 pu:1").unwrap();
        let mut b = Book::new(m, CpuSet::default());
        let ask = Ask {
            want: 1,
            max: None,
            reserve: None,
            share: false,
        };
        let (x, y) = (b.next_id(), b.next_id());
        let a = b.grant(x, &ask).unwrap();
        let c = b.grant(y, &ask).unwrap();
        assert!(!a.intersects(&c));
        let z = b.next_id();
        assert_eq!(b.grant(z, &ask), None);
        b.release(x);
        assert_eq!(b.grant(z, &ask), Some(a));
    }
}
