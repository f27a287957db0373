//! `cosched:fair`: gang time-slicing for batches with more threads than
//! CPUs. Each period the programs that have had the least CPU run, as many
//! as fit in the slots (threads <= CPUs by default); the rest pause. Every
//! program advances in turn, and never more run at once than the machine
//! holds. It knows nothing of bandwidth or NUMA: it is the plain
//! co-scheduler that S1's bandwidth-aware choice of co-runners refines.
//! When no program needs more than one CPU there is no gang to keep
//! together, and (unless `slots` is given) the kernel shares the CPUs.

use std::collections::BTreeMap;

use rustc_hash::{FxHashMap as HashMap, FxHashSet};

use herd_topo::CpuSet;

use crate::param::{Accepts, Entry, Param, Range, Value};
use crate::{JobId, Plan, Policy, Snapshot, TaskId, TaskState, TaskView, View};

/// Registry entry: `cosched:fair`.
pub(crate) const COSCHED_FAIR: Entry = Entry {
    name: "cosched:fair",
    about: "time-slice programs: the least-served run while their threads fit the CPUs, the rest pause (programs of one busy thread each are left to the kernel)",
    params: &[Param {
        key: "slots",
        default: Value::Word("cpus"),
        accepts: Accepts::Number {
            range: Range::whole(1, u64::MAX),
            words: &["cpus"],
        },
        about: "how many threads may run at once (default: one per CPU, and no turns when no program needs more than one; given, it holds for programs of one thread too)",
    }],
    build: |a| Box::new(CoschedFair::new(a.number("slots").map(|n| n as usize))),
    check: None,
};

/// Where a task was last told to be.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Slot {
    Paused,
    /// On this CPU alone.
    Cpu(u32),
    /// Anywhere the kernel likes.
    Any,
}

/// Time-slicing bookkeeping that co-schedulers share: how much CPU each
/// job has received, and where each task was last told to be, so a plan
/// names only the tasks whose place changes.
#[derive(Debug, Default)]
pub(crate) struct Turns {
    received_ns: ByJob<u64>,
    /// Where each task was last told to be, but for the changes `dirty`
    /// lists: kept for the tasks of another task list (one that leaves
    /// and comes back keeps its place).
    slots: HashMap<TaskId, Slot>,
    /// The last turn's tasks and their slots, in that turn's task order.
    aligned: Vec<(TaskId, Option<Slot>)>,
    /// Where in `aligned` a slot changed since `slots` last took them in:
    /// they go into the map when the task list changes, or once there are
    /// twice as many as tasks. A first sight, which places every task, costs no
    /// map inserts (inserting every task was a fifth of cosched:fair's
    /// first decision at 1,024 tasks); later on, one insert per move at
    /// most, as before.
    dirty: Vec<usize>,
    /// The CPUs each job kept busy the last time it ran: what it needs of
    /// the machine while it waits its turn.
    need: ByJob<usize>,
    /// What the last [`Turns::account`] summed from its snapshot's tasks,
    /// and that snapshot's time: a snapshot that repeats it one period on
    /// ([`Snapshot::repeats_last`]) sums to the same, so its pass over
    /// every task is skipped (half the simulator's snapshots repeat).
    summed: Option<Summed>,
    /// The last [`Turns::apply`] when it changed no task's slot: its
    /// snapshot's time and list's name, whether it pinned, and its runs of
    /// a job's tasks with their admissions. The same call again changes
    /// none either, when what the slots depend on is the same (see
    /// [`Turns::apply`]).
    quiet: Option<Quiet>,
}

/// See [`Turns::quiet`].
#[derive(Debug, Clone)]
struct Quiet {
    now_ns: u64,
    /// Its snapshot's [`Snapshot::tasks_epoch`].
    epoch: u64,
    pin: bool,
    /// Each run's job, its length and whether the job was admitted.
    runs: Vec<(JobId, usize, bool)>,
}

/// Each job's threads, in job order.
type Threads = Vec<(JobId, usize)>;
/// The CPUs each job that ran wanted, in job order.
type Wanted = Vec<(JobId, f64)>;

/// One snapshot's sums per job (see [`Turns::summed`]), in job order.
#[derive(Debug, Clone)]
struct Summed {
    now_ns: u64,
    received: Vec<(JobId, u64)>,
    /// What [`Turns::settle_need`] returned for them.
    counts: JobCounts,
}

/// A value per job in a vector sorted by job, read and written with the
/// present jobs in job order by one walk, not a hash lookup per job per
/// map per decision (with the changes beside it, a bw:* decision at 1,024
/// tasks fell from 729,283 instructions to 478,101).
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct ByJob<V>(Vec<(JobId, V)>);

impl<V> Default for ByJob<V> {
    fn default() -> Self {
        ByJob(Vec::new())
    }
}

/// Where `job` is in `entries` (sorted by job, one entry a job), for jobs
/// asked in ascending order: a walk on from `*at`, where the last one
/// stopped (a search for a job asked out of order).
#[inline]
fn seek<V>(entries: &[(JobId, V)], at: &mut usize, job: JobId) -> Option<usize> {
    while entries.get(*at).is_some_and(|e| e.0 < job) {
        *at += 1;
    }
    if entries.get(*at).is_some_and(|e| e.0 == job) {
        return Some(*at);
    }
    // Not here: a job asked out of order may be behind.
    if *at > 0 && entries[*at - 1].0 >= job {
        return entries.binary_search_by_key(&job, |e| e.0).ok();
    }
    None
}

impl<V: Copy> ByJob<V> {
    /// A job's value, if it has one, for jobs asked in ascending order
    /// ([`seek`]): read in place, not collected (a vector of them was 3%
    /// of a bw:* decision at 1,024 tasks).
    pub(crate) fn reader(&self) -> impl FnMut(JobId) -> Option<V> + '_ {
        let mut at = 0;
        move |job| seek(&self.0, &mut at, job).map(|i| self.0[i].1)
    }

    /// For each `(job, x)` of `items` (ascending, distinct), the job's
    /// value becomes `f(its value, x)`.
    pub(crate) fn update<X>(&mut self, items: &[(JobId, X)], f: impl Fn(Option<V>, &X) -> V) {
        let mut new = Vec::new();
        let mut i = 0;
        for (j, x) in items {
            while self.0.get(i).is_some_and(|e| e.0 < *j) {
                i += 1;
            }
            match self.0.get_mut(i) {
                Some(e) if e.0 == *j => e.1 = f(Some(e.1), x),
                _ => new.push((*j, f(None, x))),
            }
        }
        if !new.is_empty() {
            self.0.extend(new);
            self.0.sort_by_key(|e| e.0);
        }
    }

    pub(crate) fn len(&self) -> usize {
        self.0.len()
    }

    pub(crate) fn retain(&mut self, keep: impl Fn(JobId) -> bool) {
        self.0.retain(|e| keep(e.0));
    }

    #[cfg(test)]
    pub(crate) fn iter(&self) -> impl Iterator<Item = &(JobId, V)> + '_ {
        self.0.iter()
    }
}

/// How many CPUs each present job needs, in job order: a vector sorted by
/// job (one entry per job), read like a map.
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct JobCounts(Vec<(JobId, usize)>);

impl JobCounts {
    /// Where `job` is in job order.
    pub(crate) fn position(&self, job: &JobId) -> Option<usize> {
        self.0.binary_search_by_key(job, |(j, _)| *j).ok()
    }
    pub(crate) fn get(&self, job: &JobId) -> Option<usize> {
        let i = self.0.binary_search_by_key(job, |(j, _)| *j).ok()?;
        Some(self.0[i].1)
    }
    pub(crate) fn contains_key(&self, job: &JobId) -> bool {
        self.get(job).is_some()
    }
    pub(crate) fn keys(&self) -> impl Iterator<Item = &JobId> + '_ {
        self.0.iter().map(|(j, _)| j)
    }
    pub(crate) fn values(&self) -> impl Iterator<Item = &usize> + '_ {
        self.0.iter().map(|(_, n)| n)
    }
    /// (job, count) in job order.
    pub(crate) fn entries(&self) -> impl Iterator<Item = &(JobId, usize)> + '_ {
        self.0.iter()
    }
    /// Whether a job is flagged in `yes` (one flag per job, in job order),
    /// asked of jobs in order: a walk beside the counts, a search only for
    /// a job asked out of order (a search per job was a tenth of a bw:*
    /// decision at 1,024 tasks).
    pub(crate) fn flagged<'a>(&'a self, yes: &'a [bool]) -> impl FnMut(JobId) -> bool + 'a {
        let mut find = self.finder();
        move |job| find(job).is_some_and(|i| yes[i])
    }
    /// Where a job is in job order, for jobs asked in order ([`seek`]).
    pub(crate) fn finder(&self) -> impl FnMut(JobId) -> Option<usize> + '_ {
        let mut at = 0;
        move |job| seek(&self.0, &mut at, job)
    }
    /// How many jobs.
    pub(crate) fn len(&self) -> usize {
        self.0.len()
    }
    /// The `i`th (job, count) in job order.
    pub(crate) fn at(&self, i: usize) -> (JobId, usize) {
        self.0[i]
    }
}

impl std::ops::Index<&JobId> for JobCounts {
    type Output = usize;
    fn index(&self, job: &JobId) -> &usize {
        let i = self
            .0
            .binary_search_by_key(job, |(j, _)| *j)
            .unwrap_or_else(|_| panic!("job {job} has no count"));
        &self.0[i].1
    }
}

/// Whether a task needs a CPU of its own: runnable now, or it used at
/// least a tenth of the last period. Real programs keep threads that
/// mostly sleep (sysbench's main thread beside its worker, a runtime's
/// helpers); counting them as CPU users halves what fits.
pub(crate) fn is_busy(t: &TaskView, period_ns: u64) -> bool {
    t.state == TaskState::Runnable || t.obs.cpu_time_ns.saturating_mul(10) >= period_ns.max(1)
}

/// A wait for a CPU shorter than this, on average each time a task got
/// one, is a hand-off, not a want of a CPU. Two processes handing a pipe
/// back and forth (stress-ng's switch stressor) each wait about 1 us each
/// time the other passes the work over, while a thread sharing a CPU with
/// a busy one waits about a time slice (about 4 ms each time on this
/// 2-CPU VM; the kernel's smallest slice is 0.75 ms): counted as wanting a
/// CPU, the pair looked like two CPUs' worth (its CPU time plus its
/// waits, 1.5 periods in 1) and took turns that left a CPU idle.
const HANDOFF_WAIT_NS: u64 = 100_000;

/// The time a busy task wanted a CPU over the period: its CPU time, plus
/// its waits for one unless they were hand-offs ([`HANDOFF_WAIT_NS`]; a
/// sensor that does not count times on a CPU counts every wait).
fn wanted_ns(t: &TaskView) -> u64 {
    let handoffs = t
        .obs
        .timeslices
        .is_some_and(|n| n > 0 && t.obs.wait_ns < n.saturating_mul(HANDOFF_WAIT_NS));
    t.obs.cpu_time_ns + if handoffs { 0 } else { t.obs.wait_ns }
}

/// `cpus` (at least 0, at most a job's thread count) to the nearest whole
/// number, halves up, as `f64::round` gives it; without its call into the
/// maths library, which was 1.4% of a bw:* decision at 1,024 tasks
/// (x86-64's base instruction set has no rounding instruction). Exact:
/// the fraction below is the difference of two nearby floats.
fn round_cpus(cpus: f64) -> usize {
    // `as` truncates toward zero and saturates (NaN: 0).
    let whole = cpus as usize;
    whole.saturating_add(usize::from(cpus - whole as f64 >= 0.5))
}

impl Turns {
    /// Adds the last period's CPU time; returns how many CPUs each present
    /// job needs, in job order (BTreeMap: deterministic): where it ran last
    /// period, the CPUs its threads kept busy (each thread's CPU time plus
    /// its wait for a CPU over the period ([`wanted_ns`]: not the short
    /// waits of work handed between its own threads), at most one, summed and rounded
    /// to the nearest, at least one: a helper's occasional wake-up and the
    /// waits other programs cause do not add a CPU); else
    /// what it needed when it last ran; else one per thread (a job not
    /// seen running yet). Counting threads instead halves what fits for
    /// programs with helpers that sleep (sysbench's main thread) and
    /// serialises processes that hand work to each other (stress-ng's
    /// switch stressor: 5.3x plain Linux when its two copies took turns).
    pub(crate) fn account(&mut self, snap: &Snapshot) -> JobCounts {
        let (tasks, period_ns) = (&snap.tasks, snap.period_ns);
        if let Some(last) = self.summed.take()
            && snap.repeats(last.now_ns)
        {
            // The same tasks, the same readings: the same sums, added again;
            // the same needs, which `settle_need` sets from the wants alone
            // (it would write what it wrote last turn, and only it writes
            // them), so the same counts.
            self.received_ns.update(&last.received, |had, &ns| had.unwrap_or(0) + ns);
            let counts = last.counts.clone();
            self.summed = Some(Summed {
                now_ns: snap.now_ns,
                ..last
            });
            return counts;
        }
        // A job's tasks come together in a snapshot: sums run over each run
        // of one job's tasks, one entry per run (maps touched per task were
        // a third of a decision at 1,024 tasks, maps per job half of what
        // was left). Each sum is the same, added in the same order, unless
        // a job's tasks come in two runs: those are added as maps would.
        // Sized at once, not grown push by push (a tenth of this function
        // at 256 jobs): for the jobs seen so far, or at a first sight one
        // entry a run of a job's tasks (counting them every turn costs
        // more than the growth it saves).
        let jobs = match self.received_ns.len() {
            0 => 1 + tasks.windows(2).filter(|w| w[0].job != w[1].job).count(),
            seen => seen,
        };
        let mut threads: Vec<(JobId, usize)> = Vec::with_capacity(jobs);
        let mut wanted: Vec<(JobId, f64)> = Vec::with_capacity(jobs);
        let mut received: Vec<(JobId, u64)> = Vec::with_capacity(jobs);
        let period = period_ns.max(1) as f64;
        for run in tasks.chunk_by(|a, b| a.job == b.job) {
            let job = run[0].job;
            // One pass over the run for all three.
            let (mut ns, mut w, mut any) = (0u64, 0.0, false);
            for t in run {
                ns += t.obs.cpu_time_ns;
                if t.state != TaskState::Paused {
                    any = true;
                    w += (wanted_ns(t) as f64 / period).min(1.0);
                }
            }
            received.push((job, ns));
            threads.push((job, run.len()));
            if any {
                wanted.push((job, w));
            }
        }
        if !received.is_sorted_by(|a, b| a.0 < b.0) {
            // Sums of integers: any order adds up the same.
            received.sort_by_key(|(j, _)| *j);
            received.dedup_by(|b, a| {
                let same = a.0 == b.0;
                if same {
                    a.1 += b.1;
                }
                same
            });
        }
        self.received_ns.update(&received, |had, &ns| had.unwrap_or(0) + ns);
        if !threads.is_sorted_by(|a, b| a.0 < b.0) {
            threads.sort_by_key(|(j, _)| *j);
            if threads.windows(2).any(|w| w[0].0 == w[1].0) {
                let (threads, wanted) = Self::scattered(tasks, period_ns);
                return self.settle_summed(snap.now_ns, received, threads, wanted);
            }
            wanted.sort_by_key(|(j, _)| *j);
        }
        self.settle_summed(snap.now_ns, received, threads, wanted)
    }

    /// [`Turns::settle_need`] on this snapshot's sums, kept for a snapshot
    /// that repeats it.
    fn settle_summed(
        &mut self,
        now_ns: u64,
        received: Vec<(JobId, u64)>,
        threads: Threads,
        wanted: Wanted,
    ) -> JobCounts {
        let counts = self.settle_need(JobCounts(threads), &wanted);
        self.summed = Some(Summed {
            now_ns,
            received,
            counts: counts.clone(),
        });
        counts
    }

    /// [`Turns::account`]'s threads and wants per job for a snapshot in
    /// which some job's tasks are not together: each job's sums accumulate
    /// task by task in task order.
    #[cold]
    fn scattered(tasks: &[TaskView], period_ns: u64) -> (Threads, Wanted) {
        let mut threads: BTreeMap<JobId, usize> = BTreeMap::new();
        let mut wanted: BTreeMap<JobId, f64> = BTreeMap::new();
        // (`received_ns` is counted already.)
        for run in tasks.chunk_by(|a, b| a.job == b.job) {
            let job = run[0].job;
            *threads.entry(job).or_insert(0) += run.len();
            let mut busy = run.iter().filter(|t| t.state != TaskState::Paused).peekable();
            if busy.peek().is_some() {
                let w = wanted.entry(job).or_insert(0.0);
                for t in busy {
                    let ns = wanted_ns(t) as f64;
                    *w += (ns / period_ns.max(1) as f64).min(1.0);
                }
            }
        }
        (threads.into_iter().collect(), wanted.into_iter().collect())
    }

    /// Records what each job that ran wanted and caps each job's count by
    /// what it needs.
    fn settle_need(&mut self, mut threads: JobCounts, wanted: &[(JobId, f64)]) -> JobCounts {
        // A job that slept throughout still holds a place: it is between
        // bursts, not done.
        self.need.update(wanted, |_, cpus| round_cpus(*cpus).max(1));
        {
            // (An opaque reader may hold its borrow to the end of its scope.)
            let mut need_of = self.need.reader();
            for (j, n) in &mut threads.0 {
                if let Some(need) = need_of(*j) {
                    *n = need.min(*n);
                }
            }
        }
        if self.need.len() > 2 * threads.0.len() + 64 {
            self.need.retain(|j| threads.contains_key(&j));
        }
        threads
    }

    /// The present jobs, least-served first (ties: job order), as their
    /// positions in `threads` (so callers read counts without a search).
    pub(crate) fn least_served(&self, threads: &JobCounts) -> Vec<usize> {
        // Each job's key looked up once, not at every comparison; keys are
        // unique (the position breaks ties, in job order), so an unstable
        // sort gives the order.
        let mut received = self.received_ns.reader();
        let mut keyed: Vec<(u64, usize)> = threads
            .keys()
            .enumerate()
            .map(|(i, &j)| (received(j).unwrap_or(0), i))
            .collect();
        keyed.sort_unstable();
        keyed.into_iter().map(|(_, i)| i).collect()
    }

    /// Runs the tasks of jobs `admitted` says yes to and pauses the rest;
    /// the plan names only tasks whose place changes. With `pin`, each
    /// busy running task ([`is_busy`]) gets a CPU of its own (a task that
    /// keeps running keeps its CPU; a resumed one takes a free one),
    /// because a resumed task the kernel stacks on a busy CPU waits for the
    /// next load balance, a loss every slice; a task that sleeps may run
    /// anywhere and takes no CPU from a busy one. Without `pin`, running
    /// tasks go anywhere.
    pub(crate) fn apply(
        &mut self,
        view: &View<'_>,
        mut admitted: impl FnMut(JobId) -> bool,
        pin: bool,
        run_why: &'static str,
        pause_why: &'static str,
    ) -> Plan {
        let tasks = &view.snapshot.tasks;
        let period_ns = view.snapshot.period_ns;
        // A task that has just been resumed shows no CPU time yet: its place
        // counts as busy until it has had a period to show otherwise.
        let busy = |t: &TaskView, old: Option<Slot>| {
            is_busy(t, period_ns) || matches!(old, Some(Slot::Paused) | None)
        };
        let snap = view.snapshot;
        let quiet = self.quiet.take();
        // Whether the sensor vouches that the tasks are the quiet turn's,
        // in the same order and jobs: the same list, or the same snapshot.
        let listed = quiet.as_ref().is_some_and(|q| {
            (snap.tasks_epoch != 0 && q.epoch == snap.tasks_epoch)
                || snap.repeats(q.now_ns)
        });
        // A job's admission is asked once for its run of tasks (a job's
        // tasks come together in a snapshot); on a list the sensor vouches
        // for, of the runs found last time, without a pass over the tasks.
        let runs: Vec<(JobId, usize, bool)> = match quiet.as_ref().filter(|_| listed) {
            Some(q) => q.runs.iter().map(|&(j, len, _)| (j, len, admitted(j))).collect(),
            None => tasks
                .chunk_by(|a, b| a.job == b.job)
                .map(|run| (run[0].job, run.len(), admitted(run[0].job)))
                .collect(),
        };
        // A turn that changed nothing left its slots as it found them, and
        // nothing else writes them: a turn with the same admissions and the
        // same pinning, given what its slots depend on, is that one again
        // and changes nothing. With pins, a slot depends on its task's
        // readings: the same tasks in the same states (a snapshot that
        // repeats that turn's). Without, on its job's admission alone: the
        // same tasks, in the same order. (bw:iabw's turns at 1,000 tasks,
        // each a pass over every task: half repeat; nearly all leave the
        // kernel to place while its profiles are short of the gate.)
        let again = quiet.is_some_and(|q| {
            q.pin == pin
                && q.runs == runs
                && if pin {
                    snap.repeats(q.now_ns)
                } else {
                    listed || same_tasks(&self.aligned, tasks)
                }
        });
        if again {
            self.quiet = Some(Quiet {
                now_ns: snap.now_ns,
                epoch: snap.tasks_epoch,
                pin,
                runs,
            });
            return Plan::default();
        }
        // One lookup of each task's slot and one of each job's admission,
        // not two of each per task: this function was a third of a bw:*
        // decision at 1,024 tasks.
        // While the task list stays the same, last turn's slots in task
        // order stand for the map: no lookup at all.
        let mut aligned = std::mem::take(&mut self.aligned);
        let first_sight = aligned.is_empty() && self.slots.is_empty();
        if !same_tasks(&aligned, tasks) {
            self.take_in(&aligned);
            // Forget tasks that left, so the map does not grow without bound.
            if self.slots.len() > 2 * tasks.len() + 64 {
                let present: FxHashSet<TaskId> = tasks.iter().map(|t| t.id).collect();
                self.slots.retain(|id, _| present.contains(id));
            }
            aligned.clear();
            aligned.extend(tasks.iter().map(|t| (t.id, self.slots.get(&t.id).copied())));
        }
        // Each task's old slot is now beside it, in task order.
        let mut held = CpuSet::new();
        if pin {
            let mut at = 0;
            for &(_, len, yes) in &runs {
                if yes {
                    for (t, &(_, old)) in tasks[at..at + len].iter().zip(&aligned[at..at + len]) {
                        if let Some(Slot::Cpu(c)) = old
                            && busy(t, old)
                        {
                            held.insert(c);
                        }
                    }
                }
                at += len;
            }
        }
        let mut free = view
            .machine
            .cpus()
            .iter()
            .map(|c| c.os)
            .filter(|&c| !held.contains(c));
        // The slots first, then the plan sized to their changes: grown push
        // by push, its copying was a thirtieth of an unguarded cosched:fair
        // turn at 1,000 tasks (about 400 changes a turn as jobs take turns).
        if first_sight {
            // A first sight changes every task's slot: sized at once.
            self.dirty.reserve(tasks.len());
        }
        let changed_from = self.dirty.len();
        let mut at = 0;
        for &(_, len, yes) in &runs {
            for (k, (t, slot)) in tasks[at..at + len].iter().zip(&mut aligned[at..at + len]).enumerate() {
                let old = slot.1;
                let new = if !yes {
                    Slot::Paused
                } else if !pin || !busy(t, old) {
                    Slot::Any
                } else {
                    match old {
                        Some(Slot::Cpu(c)) => Slot::Cpu(c),
                        _ => free.next().map_or(Slot::Any, Slot::Cpu),
                    }
                };
                slot.1 = Some(new);
                if old != Some(new) {
                    self.dirty.push(at + k);
                }
            }
            at += len;
        }
        let changed = &self.dirty[changed_from..];
        let mut plan = Plan::default();
        plan.tasks.reserve_exact(changed.len());
        for &i in changed {
            // Every slot was set in the pass above.
            let (Some(new), id) = (aligned[i].1, tasks[i].id) else { continue };
            match new {
                Slot::Paused => plan.pause(id, pause_why),
                Slot::Cpu(c) => plan.run(id, CpuSet::single(c), run_why),
                Slot::Any => plan.run(id, view.machine.all_cpus().clone(), run_why),
            }
        }
        // Bounded, and not at a first sight (as many moves as tasks).
        if self.dirty.len() > 2 * aligned.len() {
            self.take_in(&aligned);
        }
        self.aligned = aligned;
        self.quiet = plan.tasks.is_empty().then_some(Quiet {
            now_ns: snap.now_ns,
            epoch: snap.tasks_epoch,
            pin,
            runs,
        });
        plan
    }

    /// Puts the slots `dirty` lists (of `aligned`, the last turn's) into
    /// the map.
    fn take_in(&mut self, aligned: &[(TaskId, Option<Slot>)]) {
        for &i in &self.dirty {
            if let Some(&(id, Some(slot))) = aligned.get(i) {
                self.slots.insert(id, slot);
            }
        }
        self.dirty.clear();
    }
}

/// Whether `aligned` (a turn's tasks and slots) holds `tasks`, in order.
fn same_tasks(aligned: &[(TaskId, Option<Slot>)], tasks: &[TaskView]) -> bool {
    aligned.len() == tasks.len() && aligned.iter().zip(tasks).all(|(a, t)| a.0 == t.id)
}

/// Which jobs of `order` (positions in `threads`) fit `capacity` threads,
/// taken in order: a yes or no for each position in `threads`. The first
/// always runs, even if it alone is wider than the machine. (A flag per
/// position, not a set of jobs: inserting some 200 jobs into a hash set
/// was 6% of a bw:* decision at 1,024 tasks.)
pub(crate) fn admit(
    order: impl IntoIterator<Item = usize>,
    threads: &JobCounts,
    capacity: usize,
) -> Vec<bool> {
    let mut admitted = vec![false; threads.len()];
    let mut used = 0;
    let mut any = false;
    for i in order {
        let n = threads.at(i).1;
        if !any || used + n <= capacity {
            any = true;
            used += n;
            admitted[i] = true;
        }
    }
    admitted
}

/// See the module docs.
#[derive(Debug, Default)]
pub struct CoschedFair {
    slots: Option<usize>,
    turns: Turns,
}

impl CoschedFair {
    /// At most `slots` threads run at once (`None`: one per CPU).
    pub fn new(slots: Option<usize>) -> Self {
        CoschedFair {
            slots,
            ..Self::default()
        }
    }
}

impl Policy for CoschedFair {
    /// Its decisions read CPU time, waits, states and heartbeats, never
    /// the counters.
    fn reads_counters(&self, _machine: &herd_topo::Machine) -> bool {
        false
    }
    fn name(&self) -> String {
        match self.slots {
            Some(s) => format!("cosched:fair:slots={s}"),
            None => "cosched:fair".into(),
        }
    }

    fn decide(&mut self, view: &View<'_>) -> Plan {
        let threads = self.turns.account(view.snapshot);
        let capacity = self.slots.unwrap_or(view.machine.cpus().len()).max(1);
        // A gang of one is no gang. When no program needs more than one
        // CPU, turns keep no threads together; they only hand the kernel's
        // finer sharing over to whole periods, and identical programs then
        // end far apart (one of two stress-ng stream copies beside two
        // sysbench copies ran alone on the 2-CPU VM for the last 1.2 s:
        // 1.00-1.14x plain Linux's makespan in 6 runs). They all run, as
        // under the kernel. A `slots` the user gives is a cap: it holds.
        let solo = self.slots.is_none() && threads.values().all(|&n| n <= 1);
        let admitted = if solo {
            vec![true; threads.len()]
        } else {
            admit(self.turns.least_served(&threads), &threads, capacity)
        };
        // Pinning is for taking turns: a program resumed onto CPUs the
        // kernel has stacked waits for its next balance. When every
        // program fits there are no turns, and pinning only takes the
        // kernel's placement away (a program's own threads that hand work
        // to each other, sysbench's threads test or hackbench, ran 1.11x
        // and 1.18x plain Linux pinned); as bw:* does, it lets them go.
        let everyone = admitted.iter().all(|&yes| yes);
        self.turns.apply(
            view,
            threads.flagged(&admitted),
            !everyone,
            if solo && threads.keys().count() > capacity {
                "cosched: no program needs more than one CPU: no gang to keep together; the kernel shares the CPUs"
            } else if everyone {
                "cosched: every program fits the CPUs: the kernel places them"
            } else {
                "cosched: among the least-served programs that fit the CPUs"
            },
            "cosched: waits its turn; the CPUs are full",
        )
    }
}

#[cfg(test)]
mod tests;
