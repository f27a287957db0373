//! The live world's actuator: applies a plan's placements and pauses to
//! real threads (affinity, cgroup cpusets, the freezer or stop signals).

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use herd_engine::Actuator;
use herd_policy::{Lane, Placement, Plan};
use herd_topo::CpuSet;

use super::{LiveWorld, Program, forked};
use crate::cgroup::Cgroups;
use crate::{control, procfs};

impl Actuator for LiveWorld {
    fn apply(&mut self, plan: &Plan) {
        self.apply_plan(plan);
        // Programs that started held run once a policy has had its say,
        // unless it paused them; a policy that says nothing lets them all go.
        for p in self.programs.iter_mut().filter(|p| !p.paused) {
            if let Some(h) = p.hold.take() {
                h.release();
            }
        }
    }
}

impl LiveWorld {
    /// Puts program `job` and the processes it forked into its groups, if
    /// herd started it, has groups and has not yet; returns whether it is
    /// in them. A program that cannot join is paused by signals and
    /// confined by affinity alone, and says so once.
    pub(super) fn adopt_for(&mut self, job: usize) -> bool {
        let (Some(cg), Some(p)) = (self.cgroups.as_mut(), self.programs.get(job)) else {
            return false;
        };
        if cg.has(job) {
            return true;
        }
        if p.child.is_none() || !p.alive() || self.adopt_failed.contains(&job) {
            return false;
        }
        // Its processes as they are now, not as of the last periodic scan:
        // one forked since would stay outside and keep running while its
        // program is frozen.
        let family = procfs::subtree(&self.proc_root, p.pid);
        if let Err(e) = cg.adopt_family(job, p.pid, &family) {
            eprintln!(
                "herd: program '{}' stays out of herd's cgroups ({e}): signals and affinity for it",
                p.name
            );
            self.adopt_failed.push(job);
            return false;
        }
        // Held programs join now too, a few at a time: a cgroup move soon
        // after another costs ~0.1 ms, one on its own an RCU grace period
        // (5-9 ms on the 2-CPU VM) in the loop; one by one, 200 programs of
        // 40 ms under cosched:fair lost 1.3 s to it. A held program has run
        // nothing, and a policy that confines one likely confines the rest.
        let held: Vec<(usize, i32)> = self
            .programs
            .iter()
            .enumerate()
            .filter(|(j, q)| {
                *j != job && q.held() && q.alive() && !cg.has(*j) && !self.adopt_failed.contains(j)
            })
            .map(|(j, q)| (j, q.pid))
            .take(JOIN_AHEAD)
            .collect();
        for (j, pid) in held {
            if cg.adopt(j, pid).is_err() {
                // Said when it is its turn.
                break;
            }
        }
        true
    }

    /// Has a keeper (`crate::keeper`, started from herd's binary `exe`)
    /// undo every pin and stop if herd dies without restoring them.
    pub fn keep_with(&mut self, exe: std::path::PathBuf) {
        self.keeper_exe = Some(exe);
    }

    /// Starts the keeper before the first act, once; a keeper that cannot
    /// start is said once and herd goes on without it.
    pub(super) fn ensure_keeper(&mut self) {
        if self.keeper.is_some() {
            return;
        }
        let Some(exe) = self.keeper_exe.take() else {
            return;
        };
        let guard = self.cgroups.as_ref().and_then(crate::cgroup::Cgroups::guard_pid);
        match crate::keeper::Keeper::start(&exe, &self.proc_root, guard) {
            Ok(k) => self.keeper = Some(k),
            Err(e) => eprintln!(
                "herd: warning: cannot start the keeper ({e}): if herd is killed, threads it pinned stay pinned"
            ),
        }
    }

    /// Moves the memory of jobs a policy has kept on other nodes than their
    /// pages' for a while (see [`super::memory`]): at most one move in
    /// flight, each job settled and rested first.
    fn follow_memory(&mut self) {
        let Some(f) = self.follower.as_mut() else { return };
        f.collect();
        let now_ns = self.start.elapsed().as_nanos() as u64;
        let numa = self.numa_memory.as_ref();
        let every = f.rule.every.clone();
        // A thread's CPU as last sampled: where the kernel runs one that
        // herd let go (a job handed back by the guard, whose memory herd's
        // placement decided).
        let runs_on = herd_engine::memory_follow::runs_on_by_job(
            self.programs.len(),
            self.tasks.values().map(|t| {
                (
                    t.job,
                    t.placed.as_ref(),
                    t.busy,
                    (t.last.state != char::default()).then_some(t.last.cpu),
                )
            }),
            &every,
        );
        let mut moved = None;
        for (job, p) in self.programs.iter().enumerate() {
            if !p.alive() || p.paused {
                continue;
            }
            let memory = numa
                .filter(|m| m.settled.get(job) == Some(&true))
                .and_then(|m| m.kb.get(job))
                .and_then(|m| m.as_deref());
            if let Some(herd_engine::memory_follow::Due { from, to, kb }) =
                f.due(job, &runs_on[job], memory, now_ns)
            {
                // herd keeps the mask it set as a thread's place and does
                // not read it back each turn; a program may have set its
                // own since (`os.sched_setaffinity`, an OpenMP runtime's
                // binding). Then the job does not run where herd pinned it,
                // and its memory is left where the program put it (a guest
                // run: herd pinned a Python program's main thread to node 1
                // just before the program bound itself to node 0 and
                // touched its memory there; following herd's record would
                // have taken that memory away from the program).
                let not_herds = self.tasks.iter().any(|(&tid, t)| {
                    t.job == job
                        && t.placed.as_ref().is_some_and(|c| {
                            !every.is_subset(c) && control::affinity(tid).is_ok_and(|now| &now != c)
                        })
                });
                if not_herds {
                    f.hold_off(job, now_ns);
                    continue;
                }
                let mut pids = vec![p.pid];
                pids.extend_from_slice(forked(&self.family, job));
                f.start(
                    super::memory::Move {
                        job,
                        pids,
                        from,
                        to,
                        kb,
                    },
                    now_ns,
                );
                moved = Some(job);
            }
        }
        // Its reading is of before the move: the next move waits for one
        // taken after it.
        if let (Some(job), Some(m)) = (moved, self.numa_memory.as_mut()) {
            m.settled[job] = false;
        }
    }

    fn apply_plan(&mut self, plan: &Plan) {
        self.follow_memory();
        // The keeper starts with the first pin or pause, not with a plan
        // that lets every thread keep its mask.
        let acts = plan.tasks.iter().any(|(id, p)| match p {
            Placement::Pause { .. } => true,
            Placement::Run { cpus, .. } => self
                .tasks
                .get(&(*id as i32))
                .is_some_and(|t| !leaves_as_is(t, cpus, self.cgroups.as_ref().is_some_and(|c| c.has(t.job)))),
        });
        if acts || !plan.lanes.is_empty() {
            self.ensure_keeper();
        }
        // A held thread leaves the front before anything moves, and the
        // runners take it last: at no moment do more threads run first than
        // the plan has cores for.
        self.set_lanes(plan, |l| l != Lane::Front);
        self.apply_placements(plan);
        self.set_lanes(plan, |l| l == Lane::Front);
        if !plan.tasks.is_empty() {
            self.record_held();
        }
    }

    /// Records for other herd instances the CPUs this run's threads are
    /// pinned to ([`crate::peers`]); said once if it cannot.
    fn record_held(&mut self) {
        let Some(claim) = self.claim.as_mut() else {
            return;
        };
        let held: CpuSet = self
            .tasks
            .values()
            .filter_map(|t| t.placed.as_ref())
            .fold(CpuSet::default(), |a, c| a.union(c));
        // A thread let run everywhere holds nothing in particular.
        let held = if self.own_cpus.as_ref() == Some(&held) {
            CpuSet::default()
        } else {
            held
        };
        let changed = match claim.hold(&held) {
            Ok(changed) => changed,
            Err(e) => {
                eprintln!(
                    "herd: warning: cannot record the CPUs this run holds for other herd instances: {e}"
                );
                self.claim = None;
                return;
            }
        };
        // Only when this run's CPUs changed: PALM plans every 0.125 ms, and
        // reading the other records each time is a cost its loop pays.
        if changed && !self.stats.overlap_warned {
            let others = claim.overlapping(&held);
            if !others.is_empty() {
                let who: Vec<String> = others
                    .iter()
                    .map(|(pid, c)| format!("herd {pid} on {c}"))
                    .collect();
                eprintln!(
                    "herd: warning: another herd manages CPUs this run takes ({}): start `herd daemon` to divide the machine between them",
                    who.join(", ")
                );
                self.stats.overlap_warned = true;
            }
        }
    }

    /// Records the CPUs this run pins threads to under `dir` (see
    /// [`crate::peers`]), so that herd instances started later place
    /// around them.
    pub fn record_in(&mut self, dir: &std::path::Path) {
        self.claim = Some(crate::peers::Claim::new(dir));
    }

    /// Applies `plan`'s lanes that `which` selects: SCHED_FIFO priorities
    /// (Front 2, Back 1) or the normal policy (Fair).
    fn set_lanes(&mut self, plan: &Plan, which: impl Fn(Lane) -> bool) {
        if !self.lanes_allowed {
            self.stats.lanes_ignored += plan.lanes.iter().filter(|(_, l)| which(*l)).count() as u64;
            return;
        }
        for &(id, lane) in plan.lanes.iter().filter(|(_, l)| which(*l)) {
            let tid = id as i32;
            let Some(track) = self.tasks.get_mut(&tid) else {
                continue;
            };
            if track.lane == lane {
                continue;
            }
            let priority = match lane {
                Lane::Front => control::LANE_FRONT,
                Lane::Back => control::LANE_BACK,
                Lane::Fair => 0,
            };
            match control::set_thread_priority(tid, priority) {
                Ok(()) => {
                    track.lane = lane;
                    self.stats.lane_changes += 1;
                }
                Err(e) if e.raw_os_error() == Some(libc::ESRCH) => {}
                Err(_) => self.stats.failed_placements += 1,
            }
        }
    }

    /// Every thread herd put in a lane back under the normal policy: at the
    /// end of a run, so no thread of the program outlives it at real-time
    /// priority.
    pub(crate) fn reset_lanes(&mut self) {
        for (&tid, track) in self.tasks.iter_mut().filter(|(_, t)| t.lane != Lane::Fair) {
            if control::set_thread_priority(tid, 0).is_ok() {
                track.lane = Lane::Fair;
            }
        }
    }

    fn apply_placements(&mut self, plan: &Plan) {
        self.confine(plan);
        // A thread given other CPUs than its own first mask: a child it
        // makes is born on them, and is freed at birth from now on.
        let narrows = plan.tasks.iter().any(|(id, p)| match p {
            Placement::Run { cpus, .. } => self
                .tasks
                .get(&(*id as i32))
                .is_some_and(|t| t.original.as_ref() != Some(cpus)),
            Placement::Pause { .. } => false,
        });
        if narrows {
            self.watch_births();
        }
        let places = plan.tasks.iter().any(|(_, p)| matches!(p, Placement::Run { .. }));
        // Programs this plan pauses that are running now (a held one keeps
        // waiting on its hold, no freeze or stop needed).
        let pausing: std::collections::BTreeSet<usize> = plan
            .tasks
            .iter()
            .filter(|(_, p)| matches!(p, Placement::Pause { .. }))
            .filter_map(|(id, _)| self.tasks.get(&(*id as i32)).map(|t| t.job))
            .filter(|&job| {
                self.programs
                    .get(job)
                    .is_some_and(|p| !p.paused && !p.held() && p.alive())
            })
            .collect();
        let freezes = self.cgroups.as_ref().is_some_and(|c| c.freezes());
        for job in pausing {
            // It joins its freezer group first; one that cannot, or that
            // herd has no freezer for, is stopped by signals with the
            // processes it has now, not as of the last periodic scan (one
            // forked since would run on beside those whose turn it is).
            if freezes && self.adopt_for(job) {
                continue;
            }
            let pid = self.programs[job].pid;
            if let Some(f) = self.family.get_mut(job) {
                *f = procfs::subtree(&self.proc_root, pid);
            }
        }
        // Pauses first, then runs: a co-scheduler's limit on how many
        // programs run at once holds even while a plan is being applied.
        let pauses = plan
            .tasks
            .iter()
            .filter(|(_, p)| matches!(p, Placement::Pause { .. }));
        let runs = plan
            .tasks
            .iter()
            .filter(|(_, p)| matches!(p, Placement::Run { .. }));
        let ordered: Vec<_> = pauses.chain(runs).collect();
        let n_pauses = ordered
            .iter()
            .filter(|(_, p)| matches!(p, Placement::Pause { .. }))
            .count();
        let mut stopping = Vec::new();
        let mut freezing = Vec::new();
        for (i, (id, placement)) in ordered.into_iter().enumerate() {
            if i == n_pauses && !(stopping.is_empty() && freezing.is_empty()) {
                // A stop signal to a runnable process waiting for a CPU is
                // only acted on once it is scheduled, and a freeze once each
                // task returns to user space; continuing others before then
                // would let more run than the plan allows.
                let waiting = Instant::now();
                wait_stopped(&self.proc_root, &stopping, &freezing, self.cgroups.as_ref());
                self.stats.pause_wait_ns += waiting.elapsed().as_nanos() as u64;
            }
            let tid = *id as i32;
            let Some(track) = self.tasks.get_mut(&tid) else {
                continue;
            };
            let job = track.job;
            let Some(p) = self.programs.get_mut(job) else {
                continue;
            };
            // The processes it forked pause and resume with it.
            let family = forked(&self.family, job);
            match placement {
                Placement::Run { cpus, .. } => {
                    if p.paused {
                        resume(p, family, job, self.cgroups.as_mut());
                    }
                    if track.placed.as_ref() == Some(cpus) {
                        continue;
                    }
                    let in_group = self.cgroups.as_ref().is_some_and(|c| c.has(job));
                    if leaves_as_is(track, cpus, in_group) {
                        track.placed = Some(cpus.clone());
                        continue;
                    }
                    // The keeper learns the first mask before herd moves the
                    // thread off it: placed nowhere yet, or placed where it
                    // was (`leaves_as_is`, no call and no word then). Keyed
                    // on "placed nowhere" alone, a thread first left on its
                    // mask and pinned later went untold, and a SIGKILLed
                    // herd left a program pinned to one CPU (vm-test's
                    // `sigkill`, cosched:fair on 2s2c2t). Told again after a
                    // return to its first mask, the keeper keeps the first.
                    let at_first = track
                        .placed
                        .as_ref()
                        .is_none_or(|c| Some(c) == track.original.as_ref());
                    if let (true, Some(original), Some(k)) = (at_first, &track.original, self.keeper.as_mut())
                    {
                        k.pinned(tid, original);
                    }
                    // Noted before the call: a thread the program makes
                    // meanwhile may inherit the mask even if the call fails.
                    self.pins_given.entry(job).or_default().insert(cpus.clone());
                    match control::set_affinity(tid, cpus) {
                        Ok(()) => {
                            track.placed = Some(cpus.clone());
                            self.stats.placements += 1;
                        }
                        Err(e) if e.raw_os_error() == Some(libc::ESRCH) => {}
                        Err(_) => self.stats.failed_placements += 1,
                    }
                }
                // A pause stops a whole process (SIGSTOP) or its whole
                // cgroup: pausing one of its tasks pauses the program.
                Placement::Pause { .. } => {
                    if p.held() {
                        // Not started yet: it keeps waiting on its hold.
                        if !p.paused {
                            p.paused = true;
                            self.stats.pauses += 1;
                        }
                    } else if !p.paused {
                        let freezer = self.cgroups.as_mut().filter(|c| c.freezes() && c.has(job));
                        if let Some(cg) = freezer {
                            if cg.freeze(job, true).is_ok() {
                                p.paused = true;
                                p.frozen = true;
                                self.stats.pauses += 1;
                                freezing.push(job);
                            }
                        } else if stop(self.keeper.as_mut(), p.pid) {
                            p.paused = true;
                            self.stats.pauses += 1;
                            stopping.push(p.pid);
                            for &pid in family {
                                if stop(self.keeper.as_mut(), pid) {
                                    stopping.push(pid);
                                }
                            }
                        }
                    }
                }
            }
        }
        // Only a placement changes which processes have a pinned thread
        // (one that has gone since only widens the filter): a turn that
        // places nothing does not look over every task for it.
        if places {
            self.filter_births();
        }
    }

    /// Sets each cgrouped program's cpuset to the union of its threads'
    /// placements after `plan`, before any thread is placed (a thread cannot
    /// be given CPUs outside its cpuset). A program in its group with a
    /// thread herd has not placed gets every CPU herd was given back, so
    /// that thread is not squeezed: the kernel places it; so does one that
    /// has forked processes, or made a child on a pin since the last turn. (A thread born
    /// into a cpuset narrowed to its siblings' CPUs ran there: a Python
    /// program's three new threads shared its main thread's one CPU under
    /// static:compact, which places a thread once it works.)
    fn confine(&mut self, plan: &Plan) {
        if !self.cgroups.as_ref().is_some_and(|c| c.confines()) {
            return;
        }
        let named: BTreeMap<i32, &Placement> = plan.tasks.iter().map(|(id, p)| (*id as i32, p)).collect();
        let mut want: Vec<Option<Option<CpuSet>>> = vec![Some(None); self.programs.len()];
        for (&tid, track) in &self.tasks {
            let Some(slot) = want.get_mut(track.job) else {
                continue;
            };
            let placed = match named.get(&tid) {
                Some(Placement::Run { cpus, .. }) => Some(cpus),
                _ => track.placed.as_ref(),
            };
            // A job that made a child on one of herd's pins since the
            // last turn counts as having an unplaced thread: a shell that
            // forks a command every few ms is seldom seen with one, and a
            // cpuset narrowed to its own CPU held each new child there
            // until the next turn (`make -j2` under static:compact, 1.08x
            // plain Linux's time with cpusets against 1.01x without).
            let placed = placed.filter(|_| !self.births.born_lately(track.job, self.turns));
            match (slot.as_mut(), placed) {
                (Some(acc), Some(cpus)) => *acc = Some(acc.take().map_or(cpus.clone(), |a| a.union(cpus))),
                (Some(_), None) => *slot = None,
                (None, _) => {}
            }
        }
        for (job, union) in want.into_iter().enumerate() {
            let joined = self.cgroups.as_ref().is_some_and(|c| c.has(job));
            // A program that has forked processes keeps every CPU herd was
            // given: any of them may fork again at any moment, most from a
            // process herd has not pinned (make, a `cc` driver), and a
            // child born into a cpuset narrowed to the pins of the moment
            // ran there until the next turn (`make -j2` under
            // static:compact: 1.04-1.09x plain Linux's time with cpusets,
            // 0.98x with affinity alone). Its threads keep their pins.
            let tree = !forked(&self.family, job).is_empty();
            let cpus = match union {
                _ if tree => match &self.own_cpus {
                    Some(all) => all.clone(),
                    None => continue,
                },
                Some(Some(cpus)) => cpus,
                None if joined => match &self.own_cpus {
                    Some(all) => all.clone(),
                    None => continue,
                },
                _ => continue,
            };
            // A program its plan lets run everywhere needs no cpuset; one
            // confined for the first time joins its group now. But one
            // still held (it has run nothing, made no thread or child) is
            // pinned by affinity alone, which its threads and children
            // inherit, and joins at a later turn, while it runs: the first
            // cgroup move waits an RCU grace period (11 ms under strace
            // here), and a held program waits it out with the CPUs it
            // would use idle. Under bw:iabw, two streams and two compute
            // loops lost 30-50 ms of CPU in the first turn, against 4-7 ms
            // under cosched:fair, which confines nothing there.
            let held = self.programs.get(job).is_some_and(Program::held);
            if !joined && (self.own_cpus.as_ref() == Some(&cpus) || held || !self.adopt_for(job)) {
                continue;
            }
            // Those in the plan are placed by apply_plan.
            self.set_job_cpus(job, &cpus, |tid| named.contains_key(&tid));
        }
    }

    /// Sets cgrouped job `job`'s cpuset to `cpus`. A v1 cpuset write
    /// resets every task's affinity to the cpuset: the job's placed
    /// threads are placed again, but those `placed_later` says the caller
    /// places itself.
    pub(super) fn set_job_cpus(&mut self, job: usize, cpus: &CpuSet, placed_later: impl Fn(i32) -> bool) {
        let Some(cg) = self.cgroups.as_mut() else {
            return;
        };
        if !matches!(cg.set_cpus(job, cpus), Ok(true)) {
            return;
        }
        for (&tid, track) in self.tasks.iter_mut().filter(|(_, t)| t.job == job) {
            let Some(cpus) = track.placed.take() else {
                continue;
            };
            if !placed_later(tid) && control::set_affinity(tid, &cpus).is_ok() {
                track.placed = Some(cpus);
            }
        }
    }
}

/// Whether placing `track` on `cpus` changes nothing: it is there, or
/// herd has not placed it and `cpus` is the mask it had when herd first
/// saw it (cosched:fair lets every thread run everywhere). Then there is
/// no call to make and no pin to tell the keeper of or undo: 80 hackbench
/// processes each cost a call and a message to the keeper. In herd's
/// cgroup a thread's mask is the cpuset's, which may differ, so there it
/// is placed as asked.
fn leaves_as_is(track: &super::Track, cpus: &CpuSet, in_group: bool) -> bool {
    track.placed.as_ref() == Some(cpus)
        || (track.placed.is_none() && track.original.as_ref() == Some(cpus) && !in_group)
}

/// Stops process `pid` by SIGSTOP, the keeper told first (so that a herd
/// killed right after leaves nothing stopped); whether the signal went.
pub(super) fn stop(keeper: Option<&mut crate::keeper::Keeper>, pid: i32) -> bool {
    if let Some(k) = keeper {
        k.stopped(pid);
    }
    control::signal(pid, libc::SIGSTOP).is_ok()
}

/// Lets a paused program run again, the way it was paused.
fn resume(p: &mut Program, family: &[i32], job: usize, cgroups: Option<&mut Cgroups>) {
    if let Some(h) = p.hold.take() {
        // Paused before it started: it starts now.
        h.release();
        p.paused = false;
    } else if p.frozen {
        if let Some(cg) = cgroups {
            if cg.freeze(job, false).is_ok() {
                p.paused = false;
                p.frozen = false;
            }
        }
    } else if control::signal(p.pid, libc::SIGCONT).is_ok() {
        p.paused = false;
        for &pid in family {
            let _ = control::signal(pid, libc::SIGCONT);
        }
    }
}

/// Waits until every process in `pids` shows state T (stopped) or is gone
/// and every job in `jobs` is frozen, for at most STOP_WAIT: a process that
/// ignores the wait (it cannot block SIGSTOP, but it may be in
/// uninterruptible sleep) does not hold herd up.
fn wait_stopped(proc_root: &std::path::Path, pids: &[i32], jobs: &[usize], cgroups: Option<&Cgroups>) {
    let deadline = Instant::now() + STOP_WAIT;
    while Instant::now() < deadline {
        let pending = pids.iter().any(
            |&pid| matches!(procfs::state(proc_root, pid), Some(st) if !matches!(st, 'T' | 't' | 'Z' | 'X')),
        ) || cgroups.is_some_and(|cg| jobs.iter().any(|&j| !cg.is_frozen(j)));
        if !pending {
            return;
        }
        std::thread::sleep(Duration::from_micros(200));
    }
}

/// The longest `apply` waits for stop signals to take effect.
const STOP_WAIT: Duration = Duration::from_millis(50);

/// Held programs that join herd's cgroups with one that must (`adopt_for`).
const JOIN_AHEAD: usize = 16;
