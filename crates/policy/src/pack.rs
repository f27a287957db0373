//! Thread packing for a job given fewer cores than threads (S4: PALM, Park
//! et al., IPDPS'21), and its baselines.
//!
//! - `pack:palm`: every period, one thread group per allowed core, with the
//!   core's capacity (its kind's); each group gets one thread, then each
//!   remaining thread joins the group with the largest capacity per thread.
//!   Threads with the least progress go to the groups with the most
//!   capacity per thread, so laggards catch up; threads of like progress
//!   share a group (with spinning barriers, the threads already waiting
//!   share one core and burn only it). Progress is heartbeats where the
//!   program reports them, else CPU time (weaker: a thread spinning at a
//!   barrier gains CPU time without progress). The period starts at
//!   `min_period_us` (0.125 ms) and doubles after an epoch with more total
//!   progress per second than the one before, halves after one with less,
//!   within [min_period_us, max_period_ms].
//! - `pack:tp`: thread packing as the OS would do it: every thread may run
//!   on the K cores, and Linux balances.
//! - `pack:tr`: thread reduction: the job should run K threads. A program's
//!   thread count is set when it starts (`herd run --threads K` sets
//!   OMP_NUM_THREADS and `{threads}`); the policy pins like `pack:tp` and
//!   states the directive.
//!
//! The K cores are the first K of the machine's compact order (`cores=K`,
//! default every core). When an outside controller sets a budget while the
//! job runs ([`crate::Snapshot::budget_cores`]: `herd run --cores-from`, a
//! scenario's consolidation manager), K follows it: `pack:tp` and `pack:tr`
//! pin every thread again, PALM regroups and restarts its period
//! controller (the rate before the change is no yardstick for the rate
//! after it). `pack:tr` cannot change the thread count of a running
//! program: it keeps the threads it started with.

use herd_topo::CpuSet;
use rustc_hash::{FxHashMap, FxHashSet};

use crate::pack_plan::{BarrierLearner, BarrierPlan, plan_suits};
use crate::{JobDirective, JobId, Lane, Plan, Policy, TaskId, View};

/// The controller's shortest epoch by default, in µs. An epoch of one
/// 0.125 ms period holds a couple of heartbeats per thread and a fraction
/// of a barrier interval, so its progress rate is mostly noise (whole beats,
/// and whether a barrier wait fell inside it), and S4's compare-and-double
/// wanders off the best period. In simulation (scripts/s4-controller.py:
/// 12 variations of S4's job, barriers every 1e6 to 4e6 instructions on 9
/// to 15 cores) a 4 ms epoch with a 2% dead band (`DEFAULT_TOLERANCE`) was
/// shorter than S4's controller in 12 of the 12 and matched the static best
/// on s4-sync-15; `epoch_us=0,tolerance=0,epoch_beats=0,climb=0` is S4's
/// controller.
pub const DEFAULT_EPOCH_US: f64 = 4000.0;
/// The controller's dead band by default (see [`DEFAULT_EPOCH_US`]).
pub const DEFAULT_TOLERANCE: f64 = 0.02;
/// Heartbeats per worker thread an epoch waits for by default. A program
/// that beats rarely (the barrier benchmark: 16 beats a phase, one every
/// ~5 ms with long phases) gives a 4 ms epoch zero or one beat per thread,
/// and the controller compares rounding; eight keep the rounding near 10%.
/// Programs that beat often (S4's scenarios: every ~50 µs) are not slowed.
pub const DEFAULT_EPOCH_BEATS: u64 = 8;

/// PALM's period controller: the period's range and how epochs are
/// compared.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Controller {
    /// The period it starts at and never goes below.
    pub min_period_ns: u64,
    /// The longest period it doubles to (equal to the shortest: a fixed period).
    pub max_period_ns: u64,
    /// Shortest epoch: S4's is one period.
    pub min_epoch_ns: u64,
    /// Relative change in progress rate within which the period stays:
    /// S4's moves it on any change.
    pub tolerance: f64,
    /// Heartbeats per worker thread an epoch waits for: S4's waits for none.
    pub epoch_beats: u64,
    /// Hill climbing: a better epoch repeats the last move, a worse one
    /// undoes it, and the epoch after an undo holds if it is better (S4's
    /// rule always doubles when better: after a doubling that made things
    /// worse and the halving that undid it, the next epoch is better than
    /// the bad one and it doubles again; on s4-sync-15 it swung between
    /// 0.125 and 0.25 ms every epoch).
    pub climb: bool,
}

impl Default for Controller {
    /// S4's range (0.125 ms to 64 ms) with herd's epochs.
    fn default() -> Self {
        Controller {
            min_period_ns: 125_000,
            max_period_ns: 64_000_000,
            min_epoch_ns: (DEFAULT_EPOCH_US * 1e3) as u64,
            tolerance: DEFAULT_TOLERANCE,
            epoch_beats: DEFAULT_EPOCH_BEATS,
            climb: true,
        }
    }
}

impl Controller {
    /// S4's own controller: an epoch is one period and any change in
    /// progress rate moves the period.
    pub fn s4() -> Self {
        Controller {
            min_epoch_ns: 0,
            tolerance: 0.0,
            epoch_beats: 0,
            climb: false,
            ..Controller::default()
        }
    }

    /// One fixed period (S4's static best, once the period is known).
    pub fn fixed(period_ns: u64) -> Self {
        Controller {
            min_period_ns: period_ns,
            max_period_ns: period_ns,
            ..Controller::default()
        }
    }

    /// The periods the controller can take, in µs: the shortest, doubling
    /// up to the longest (what S4's static best tries offline).
    pub fn periods_us(&self) -> Vec<f64> {
        std::iter::successors(Some(self.min_period_ns.max(1)), |p| p.checked_mul(2))
            .take_while(|&p| p <= self.max_period_ns)
            .map(|p| p as f64 / 1e3)
            .collect()
    }

    /// Its settings that differ from the defaults, as `key=value`.
    fn params(&self) -> Vec<String> {
        let d = Controller::default();
        if self.min_period_ns == self.max_period_ns {
            return vec![format!("period_us={}", self.min_period_ns as f64 / 1e3)];
        }
        let mut p = Vec::new();
        if self.min_period_ns != d.min_period_ns {
            p.push(format!("min_period_us={}", self.min_period_ns as f64 / 1e3));
        }
        if self.max_period_ns != d.max_period_ns {
            p.push(format!("max_period_ms={}", self.max_period_ns as f64 / 1e6));
        }
        if self.min_epoch_ns != d.min_epoch_ns {
            p.push(format!("epoch_us={}", self.min_epoch_ns as f64 / 1e3));
        }
        if self.tolerance != d.tolerance {
            p.push(format!("tolerance={}", self.tolerance));
        }
        if self.epoch_beats != d.epoch_beats {
            p.push(format!("epoch_beats={}", self.epoch_beats));
        }
        if self.climb != d.climb {
            p.push(format!("climb={}", u8::from(self.climb)));
        }
        p
    }
}

/// Which packing.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Packing {
    /// PALM.
    Palm,
    /// Thread packing: all threads on the K cores, Linux balances.
    Tp,
    /// Thread reduction: K threads.
    Tr,
}

/// The group of a thread the plan lets use all K cores.
const PLANNED: usize = usize::MAX - 1;

/// Turns with heartbeats before PALM plans from what an earlier run found.
pub(crate) const SEED_AFTER_TURNS: u32 = 8;

/// The K cores as (CPUs, capacity), and all their CPUs.
/// The K cores (CPUs, capacity), their union, and whether the cores are
/// alike (one capacity): worked out once per budget.
type Allowed = std::sync::Arc<(Vec<(CpuSet, f64)>, CpuSet, bool)>;

/// See the module docs.
#[derive(Debug)]
pub struct Pack {
    kind: Packing,
    cores: Option<usize>,
    controller: Controller,
    period_ns: u64,
    /// Each task's progress so far (heartbeats, or CPU time summed) and
    /// group (core index) as last placed, in the snapshot's order.
    slots: Slots,
    /// When the epoch started and the summed progress then.
    epoch: Option<(u64, u64)>,
    last_rate: Option<f64>,
    /// The K cores (CPUs, capacity) and all their CPUs, for the K they
    /// were computed for.
    allowed: Option<(usize, Allowed)>,
    /// The tasks of the last snapshot, in order: when the next has the
    /// same, the records above hold no task that left.
    last_ids: crate::view::SeenTasks,
    noted: bool,
    /// Whether the last view had heartbeats: PALM then needs no more.
    beats: bool,
    /// The job whose threads beat, when they are all one job's (kept while
    /// none beats), and the beats between its barriers an earlier run
    /// found.
    job: Option<JobId>,
    seed: Option<u64>,
    /// The controller's last move: +1 doubled, -1 halved, 0 held; and
    /// whether that move undid the one before (it had made things worse).
    last_step: i8,
    undid: bool,
    /// `barrier_beats` as given (0: off or learned) and the plan it drives.
    barrier_beats: u64,
    planned: Option<BarrierPlan>,
    /// `barrier_beats=auto`: what the heartbeats teach about the barriers,
    /// and the last thing said about it (the beats, whether the plan runs;
    /// 0 beats: that nothing could be learned).
    learner: Option<BarrierLearner>,
    told: Option<(u64, bool)>,
    /// The tasks the plan put in a lane other than `Fair`, and that lane.
    lanes: FxHashMap<TaskId, Lane>,
    /// The last [`group_sizes`] and what follows from it alone (the same
    /// every turn while the cores and workers hold; a third of a decision
    /// at 1,024 threads, its order and classes a ninth of what was left).
    sizes: Option<Sizing>,
    /// Each group's threads' wanted classes, kept between decisions so
    /// that a decision does not allocate one vector per core again.
    current: Vec<Vec<u64>>,
    /// The last decision's threads by progress, as positions in its list
    /// of workers: where the next sort starts.
    order: Vec<u32>,
}

/// PALM's group sizes for one set of cores and count of workers, and what
/// follows from them alone.
#[derive(Debug, Clone)]
struct Sizing {
    /// The cores' capacities and the workers it is for.
    caps: Vec<f64>,
    threads: usize,
    /// [`group_sizes`]' thread count per core.
    base: Vec<usize>,
    /// The cores by capacity per thread at those sizes, most first.
    order: Vec<usize>,
    /// Slot by slot in that order, each slot's class (capacity per thread,
    /// as bits): the threads with the least progress take them in turn,
    /// which decides each thread's class, not its core.
    wants: Vec<u64>,
}

impl Sizing {
    fn new(caps: Vec<f64>, threads: usize) -> Sizing {
        let base = group_sizes(&caps, threads);
        let order = most_per_thread_first(&caps, &base);
        let wants = order
            .iter()
            .flat_map(|&g| std::iter::repeat_n(class_key(caps[g], base[g]), base[g]))
            .collect();
        Sizing { caps, threads, base, order, wants }
    }
}

impl Pack {
    /// A packing on `cores` cores (all when `None`); `controller` sets
    /// PALM's period (the baselines have none).
    pub fn new(kind: Packing, cores: Option<usize>, controller: Controller) -> Self {
        let controller = Controller {
            max_period_ns: controller.max_period_ns.max(controller.min_period_ns),
            ..controller
        };
        Pack {
            kind,
            cores,
            controller,
            period_ns: controller.min_period_ns,
            slots: Slots::default(),
            epoch: None,
            last_rate: None,
            allowed: None,
            last_ids: Default::default(),
            noted: false,
            beats: false,
            job: None,
            seed: None,
            last_step: 0,
            undid: false,
            barrier_beats: 0,
            planned: None,
            learner: None,
            told: None,
            lanes: FxHashMap::default(),
            sizes: None,
            current: Vec::new(),
            order: Vec::new(),
        }
    }

    /// PALM with a plan for threads that beat `n` times between barriers
    /// (0: off; see `pack_plan`).
    pub fn with_barrier_beats(mut self, n: u64) -> Self {
        self.barrier_beats = if self.kind == Packing::Palm { n } else { 0 };
        self.learner = None;
        self
    }

    /// PALM with a plan where it suits, for the beats between barriers the
    /// heartbeats show (`barrier_beats=auto`, see
    /// `pack_plan::BarrierLearner` and `pack_plan::plan_suits`): only
    /// where lanes take effect ([`crate::Snapshot::lanes_apply`]).
    pub fn with_learned_barriers(mut self) -> Self {
        self.barrier_beats = 0;
        self.learner = (self.kind == Packing::Palm).then(BarrierLearner::default);
        self
    }

    /// The beats between barriers the plan runs on this turn, if any:
    /// as given, or as learned where the plan suits. Says once what it
    /// learned and whether the plan runs.
    fn plan_beats(
        &mut self,
        plan: &mut Plan,
        totals: &[(u64, u32, TaskId)],
        cores: usize,
        alike: bool,
        lanes: bool,
    ) -> Option<u64> {
        if self.barrier_beats > 0 {
            return Some(self.barrier_beats);
        }
        let learner = self.learner.as_mut()?;
        if !self.beats {
            return None;
        }
        if self.job.is_none() {
            // Threads of several jobs do not meet at the same barriers: what
            // the learner would see is their drift, or worse, a period they
            // happen to keep together (two copies of the benchmark on 4
            // simulated cores taught it 32, then 96, then 112 for 16).
            *learner = BarrierLearner::default();
            if self.told != Some((0, false)) {
                self.told = Some((0, false));
                plan.note = Some("pack:palm: threads of several jobs beat; the plan is for one job's barriers: PALM's groups".into());
            }
            return None;
        }
        let counts: Vec<(TaskId, u64)> = totals.iter().map(|t| (t.2, t.0)).collect();
        learner.observe(&counts);
        if learner.gave_up() && self.told.is_none() {
            self.told = Some((0, false));
            plan.note = Some(
                "pack:palm: the heartbeats show no fixed number of beats between barriers; PALM's groups"
                    .into(),
            );
        }
        // What this run learned, else what an earlier one found, until the
        // threads refute it; the latter only a few turns in: herd's first
        // turns can be far apart (15 ms between the first two in a run of
        // the barrier benchmark here), and a thread held through such a
        // gap starves while the others spin at the barrier (1.117x thread
        // reduction's time against 1.086x without the earlier finding).
        let settled = learner.seen() >= SEED_AFTER_TURNS;
        let seed = self.seed.filter(|&s| settled && !learner.refuted(s));
        let (n, source) = match (learner.learned(), seed) {
            (Some(n), _) => (n, "learned"),
            (None, Some(s)) => (s, "from earlier runs"),
            (None, None) => return None,
        };
        let suits = lanes && alike && plan_suits(totals.len(), cores, n);
        // Said when the plan starts, stops or changes, not each time the
        // guess changes while the plan stays off; and said after a note
        // that nothing could be learned (told as 0 beats).
        if self
            .told
            .is_none_or(|(m, s)| m == 0 || s != suits || (suits && m != n))
        {
            self.told = Some((n, suits));
            let outcome = if suits {
                "running the plan".to_string()
            } else if !lanes {
                "the plan needs lanes (herd run --realtime): PALM's groups".to_string()
            } else if !alike {
                "the plan is for cores alike: PALM's groups".to_string()
            } else {
                format!(
                    "{} threads on {cores} cores is no shape for the plan: PALM's groups",
                    totals.len()
                )
            };
            plan.note = Some(format!("pack:palm: {n} beats between barriers, {source}; {outcome}").into());
        }
        suits.then_some(n)
    }

    /// Sets `task`'s lane in `plan` if it changes.
    fn set_lane(&mut self, plan: &mut Plan, task: TaskId, lane: Lane) {
        let was = if lane == Lane::Fair {
            self.lanes.remove(&task)
        } else {
            self.lanes.insert(task, lane)
        };
        if was.unwrap_or_default() != lane {
            plan.lane(task, lane);
        }
    }

    /// The plan's turn, when it applies: PALM's threads with heartbeats,
    /// more of them than cores, all cores alike.
    fn planned_turn(
        &mut self,
        plan: &mut Plan,
        now_ns: u64,
        (totals, at): (&[(u64, u32, TaskId)], &[u32]),
        (cores, all, alike): (&[(CpuSet, f64)], &CpuSet, bool),
        lanes: bool,
    ) -> bool {
        let n = self.plan_beats(plan, totals, cores.len(), alike, lanes);
        let Some(n) = n.filter(|_| self.beats && totals.len() > cores.len() && alike) else {
            self.planned = None;
            for task in std::mem::take(&mut self.lanes).into_keys() {
                plan.lane(task, Lane::Fair);
            }
            return false;
        };
        let workers: Vec<(TaskId, u64, u32)> = totals.iter().map(|&(p, rank, id)| (id, p, rank)).collect();
        if self.planned.as_ref().is_some_and(|p| p.beats_per_barrier() != n) {
            self.planned = None;
        }
        let turn =
            self.planned
                .get_or_insert_with(|| BarrierPlan::new(n))
                .turn(now_ns, &workers, cores.len());
        // Every worker may use all K cores: the kernel's real-time balancing
        // gives each Front thread a core of its own at once (it pushes one
        // to a core running a lower priority), which costs herd no move.
        let slots = self.slots.records();
        for (&(_, _, id), &i) in totals.iter().zip(at) {
            if slots[i as usize].group.replace(PLANNED) != Some(PLANNED) {
                plan.run(
                    id,
                    all.clone(),
                    "pack:palm: the plan runs it on any of the K cores",
                );
            }
        }
        // A held thread leaves the front before a runner takes it (the
        // actuator keeps that order too): never more runners than cores.
        for &h in &turn.held {
            self.set_lane(plan, h, Lane::Back);
        }
        for &r in &turn.runners {
            self.set_lane(plan, r, Lane::Front);
        }
        let c = self.controller;
        plan.next_period_ns = Some(
            turn.next_ns
                .unwrap_or(c.min_period_ns)
                .clamp(c.min_period_ns, c.max_period_ns),
        );
        true
    }
}

impl Policy for Pack {
    /// Its decisions read CPU time, waits, states and heartbeats, never
    /// the counters.
    fn reads_counters(&self, _machine: &herd_topo::Machine) -> bool {
        false
    }
    fn name(&self) -> String {
        let base = match self.kind {
            Packing::Palm => "pack:palm",
            Packing::Tp => "pack:tp",
            Packing::Tr => "pack:tr",
        };
        let mut p = Vec::new();
        if let Some(k) = self.cores {
            p.push(format!("cores={k}"));
        }
        if self.kind == Packing::Palm {
            p.extend(self.controller.params());
            if self.barrier_beats > 0 {
                p.push(format!("barrier_beats={}", self.barrier_beats));
            } else if self.learner.is_none() {
                p.push("barrier_beats=0".into());
            }
        }
        if p.is_empty() {
            base.into()
        } else {
            format!("{base}:{}", p.join(","))
        }
    }

    fn launch_threads(&self, machine: &herd_topo::Machine) -> Option<u32> {
        // Thread reduction: one thread per allowed core.
        (self.kind == Packing::Tr).then(|| {
            let cores = machine.cores().len().max(1);
            self.cores.unwrap_or(cores).clamp(1, cores) as u32
        })
    }

    fn findings(&self) -> Vec<(JobId, crate::Finding)> {
        // What the learner settled on, for the next run; or that what an
        // earlier run found was refuted.
        let (Some(job), Some(learner)) = (self.job, self.learner.as_ref()) else {
            return Vec::new();
        };
        match (learner.learned(), self.seed) {
            (Some(n), _) => vec![(job, crate::Finding::BarrierBeats(Some(n)))],
            (None, Some(s)) if learner.refuted(s) => vec![(job, crate::Finding::BarrierBeats(None))],
            _ => Vec::new(),
        }
    }

    fn follows_budget(&self) -> bool {
        true
    }

    fn allowed_cpus(&self) -> Option<CpuSet> {
        self.allowed.as_ref().map(|(_, a)| a.1.clone())
    }

    fn timed_turns(&self) -> bool {
        // The plan's turns are when its schedule changes.
        self.planned.is_some()
    }

    fn shares_cpus_by_design(&self) -> bool {
        true
    }

    fn progress_suffices(&self) -> bool {
        // Heartbeats are the progress; CPU time would need /proc each turn.
        self.kind == Packing::Palm && self.beats
    }

    fn decide(&mut self, view: &View<'_>) -> Plan {
        let mut plan = Plan::default();
        // The K cores and their union, once per budget: the machine does not
        // change and PALM decides every 0.125 ms at first.
        let k = view
            .snapshot
            .budget_cores
            .map(|b| b as usize)
            .or(self.cores)
            .unwrap_or(usize::MAX)
            .clamp(1, view.machine.cores().len().max(1));
        let changed = self.allowed.as_ref().is_some_and(|(was, _)| *was != k);
        if self.allowed.as_ref().is_none_or(|(was, _)| *was != k) {
            let cores = allowed_cores(view, Some(k));
            let mut all = CpuSet::new();
            for (c, _) in &cores {
                all.union_with(c);
            }
            let alike = cores.windows(2).all(|w| w[0].1 == w[1].1);
            self.allowed = Some((k, std::sync::Arc::new((cores, all, alike))));
        }
        if changed {
            // Everything is placed again on the new cores.
            self.slots.forget_groups();
            self.epoch = None;
            self.last_rate = None;
            self.last_step = 0;
            self.undid = false;
            self.period_ns = self.controller.min_period_ns;
            plan.note = Some(format!("{}: the budget is now {k} cores", self.name()).into());
        }
        let allowed = self.allowed.as_ref().expect("just set").1.clone();
        let (cores, all, alike) = &*allowed;
        let alike = *alike;
        let tasks = &view.snapshot.tasks;
        // pack:tp and pack:tr pin each task once, when it first comes (or
        // every task on new cores): the tasks the last list lacked.
        let mut fresh: Vec<TaskId> = Vec::new();
        let ids_changed = self.last_ids.changed_noting(view.snapshot, |t| fresh.push(t.id), |_| {});
        // (Nothing to forget on a first sight: no set of every task then.)
        if ids_changed && !self.lanes.is_empty() {
            let present: FxHashSet<TaskId> = tasks.iter().map(|t| t.id).collect();
            self.lanes.retain(|t, _| present.contains(t));
        }
        if self.kind != Packing::Palm {
            if changed {
                fresh = tasks.iter().map(|t| t.id).collect();
            }
            for id in fresh {
                plan.run(id, all.clone(), "pack: every thread on the K cores; Linux balances");
            }
            if self.kind == Packing::Tr && !self.noted {
                self.noted = true;
                let jobs: Vec<JobId> = view.snapshot.jobs.iter().map(|j| j.id).collect();
                for job in jobs {
                    plan.jobs.push(JobDirective {
                        job,
                        cores: Some(cores.len() as u32),
                        threads: Some(cores.len() as u32),
                        why: "pack:tr: one thread per core (set at start: herd run --threads K)".into(),
                    });
                }
            }
            return plan;
        }
        // Progress: heartbeats where any task reports them (tasks that do
        // not are left out of the groups), else CPU time, summed over periods.
        let beats = view.snapshot.tasks.iter().any(|t| t.heartbeats.is_some());
        self.beats = beats;
        let mut totals: Vec<(u64, u32, TaskId)> = Vec::with_capacity(tasks.len());
        // Each worker's position in the snapshot (and in `slots`).
        let mut at: Vec<u32> = Vec::with_capacity(tasks.len());
        let slots = self.slots.follow(tasks.iter().map(|t| t.id), ids_changed);
        // Every task's progress summed, for the period controller (of
        // integers, saturating: the same in any order).
        let mut sum = 0u64;
        // The least and greatest job with a worker: one job when they agree.
        let mut jobs: Option<(JobId, JobId)> = None;
        let measured = crate::working::measured(view.snapshot);
        for (i, (t, slot)) in tasks.iter().zip(slots.iter_mut()).enumerate() {
            let p = &mut slot.progress;
            match (beats, t.heartbeats) {
                (true, Some(b)) => *p = b,
                (true, None) => {}
                (false, _) => *p = p.saturating_add(t.obs.cpu_time_ns),
            }
            sum = sum.saturating_add(*p);
            // Not a worker: with heartbeats, a thread that reports none (a
            // main thread waiting in join); without, a thread that neither
            // ran nor waited for a CPU a tenth of the period (a parent
            // waiting for its children, a sleeping helper), or ran in short
            // bursts (it hands work on: `crate::working::runs_in_bursts`).
            // It may run on any of the K cores and takes no group's place:
            // with the least progress it would take a core of its own for
            // good and pair the workers (stress-ng's two workers shared one
            // CPU of two behind their sleeping parent, 0.44x the kernel's
            // progress until the guard took them back).
            let idle = if beats {
                t.heartbeats.is_none()
            } else {
                measured
                    && (!crate::working::wants_cpu_over(view.snapshot.period_ns, t)
                        || crate::working::runs_in_bursts(t))
            };
            if idle {
                let why = if beats {
                    "pack:palm: reports no progress; any of the K cores"
                } else {
                    "pack:palm: wants no CPU of its own; any of the K cores"
                };
                // Placed already where it may run (a group whose core is
                // all K, K = 1): no move.
                let was = slot.group.replace(usize::MAX);
                let there = was.is_some_and(|g| g == usize::MAX || cores.get(g).is_some_and(|c| c.0 == *all));
                if !there {
                    plan.run(t.id, all.clone(), why);
                }
                continue;
            }
            totals.push((*p, t.rank, t.id));
            at.push(i as u32);
            jobs = Some(jobs.map_or((t.job, t.job), |(lo, hi)| (lo.min(t.job), hi.max(t.job))));
        }
        let now = view.now_ns();
        // Kept when no thread beats (at the end, after the job's threads
        // are gone): the findings are asked for then.
        if let Some((lo, hi)) = jobs {
            self.job = (lo == hi).then_some(lo);
            self.seed = self
                .job
                .and_then(|j| view.learned.jobs.get(&j))
                .and_then(|l| l.barrier_beats);
        }
        if self.planned_turn(
            &mut plan,
            now,
            (&totals, &at),
            (cores, all, alike),
            view.snapshot.lanes_apply,
        ) {
            return plan;
        }
        // The period controller: once per epoch (one current period),
        // compare total progress per second with the epoch before.
        let (start_ns, start_sum) = *self.epoch.get_or_insert((now, sum));
        // With heartbeats, an epoch also waits for enough of them: a rate
        // from a beat or two per thread is mostly rounding.
        let c = self.controller;
        let enough = !beats || sum.saturating_sub(start_sum) >= c.epoch_beats * totals.len().max(1) as u64;
        if now.saturating_sub(start_ns) >= self.period_ns.max(c.min_epoch_ns) && enough {
            let rate = sum.saturating_sub(start_sum) as f64 / (now - start_ns) as f64;
            if let Some(prev) = self.last_rate {
                let (better, worse) = (
                    rate >= prev * (1.0 + c.tolerance),
                    rate < prev * (1.0 - c.tolerance),
                );
                // +1: double, -1: halve, 0: hold.
                let step: i8 = if !c.climb {
                    // S4: double when better, halve when worse.
                    if better {
                        1
                    } else if worse {
                        -1
                    } else {
                        0
                    }
                } else if better {
                    // A move that helped is repeated; the recovery from
                    // undoing one that hurt is not a reason to move on.
                    if self.undid {
                        0
                    } else if self.last_step != 0 {
                        self.last_step
                    } else {
                        1
                    }
                } else if worse {
                    // Undo a move that hurt; otherwise look shorter.
                    if self.last_step != 0 && !self.undid {
                        -self.last_step
                    } else {
                        -1
                    }
                } else {
                    0
                };
                self.undid = c.climb && worse && self.last_step != 0 && !self.undid;
                self.period_ns = match step {
                    1 => (self.period_ns * 2).min(c.max_period_ns),
                    -1 => (self.period_ns / 2).max(c.min_period_ns),
                    _ => self.period_ns,
                };
                self.last_step = step;
            }
            self.last_rate = Some(rate);
            self.epoch = Some((now, sum));
        }
        // Least progress first; ties by rank (locality: neighbours stay
        // together), then the snapshot's order. As one integer per thread
        // (progress, rank, position): a sort of the triples through a
        // closure was a third of a decision at 1,024 threads. The keys are
        // unique, so any input order gives the same result; they go in in
        // the last decision's order, so that where the order by progress
        // holds from one decision to the next the sort (which finds runs)
        // is one pass.
        let key = |i: usize| {
            let (p, rank, _) = totals[i];
            (u128::from(p) << 64) | (u128::from(rank) << 32) | i as u128
        };
        let mut keyed: Vec<u128> = if self.order.len() == totals.len() {
            self.order.iter().map(|&i| key(i as usize)).collect()
        } else {
            (0..totals.len()).map(key).collect()
        };
        keyed.sort();
        self.order.clear();
        self.order.extend(keyed.iter().map(|&k| k as u32));
        let totals: Vec<(u64, u32, TaskId)> = self.order.iter().map(|&i| totals[i as usize]).collect();
        let at: Vec<u32> = self.order.iter().map(|&i| at[i as usize]).collect();
        let caps_now = || cores.iter().map(|(_, c)| *c);
        if self
            .sizes
            .as_ref()
            .is_none_or(|s| s.threads != totals.len() || !s.caps.iter().copied().eq(caps_now()))
        {
            self.sizes = Some(Sizing::new(caps_now().collect(), totals.len()));
        }
        let sizing = self.sizes.take().expect("just set");
        let (caps, base, wants) = (&sizing.caps, &sizing.base, &sizing.wants);
        // Each thread's group, looked up once for both passes below.
        let slots = self.slots.records();
        let had: Vec<Option<usize>> = at.iter().map(|&i| slots[i as usize].group).collect();
        // Which of the cores of one capacity shares its core among more
        // threads is free: give the sizes to the cores whose threads already
        // want them, so fewer threads move (locality, and fewer migrations:
        // with 3 threads on 2 cores, one move a turn instead of two).
        let mut current = std::mem::take(&mut self.current);
        current.resize_with(cores.len(), Vec::new);
        current.iter_mut().for_each(Vec::clear);
        for (&had, &want) in had.iter().zip(wants) {
            if let Some(g) = had.filter(|&g| g < cores.len()) {
                current[g].push(want);
            }
        }
        let sizes = arrange_sizes(caps, base, &current);
        self.current = current;
        // Each core's class at its size, worked out once.
        let class: Vec<u64> = (0..sizes.len()).map(|g| class_key(caps[g], sizes[g])).collect();
        // (The sizes' order is the base's when nothing was rearranged.)
        let rearranged;
        let order = if sizes == *base {
            &sizing.order
        } else {
            rearranged = most_per_thread_first(caps, &sizes);
            &rearranged
        };
        // A thread whose class its group still has stays; the others fill
        // what is left.
        let mut room = sizes.clone();
        let first_sight = had.iter().all(Option::is_none);
        let mut pending: Vec<(TaskId, u32, u64)> = Vec::with_capacity(if first_sight { totals.len() } else { 0 });
        for ((((_, _, id), &i), &had), &want) in totals.iter().zip(&at).zip(&had).zip(wants) {
            match had {
                Some(g) if g < room.len() && class[g] == want && room[g] > 0 => room[g] -= 1,
                _ => pending.push((*id, i, want)),
            }
        }
        // Each class's groups in `order`, and how far its slots are taken:
        // rooms only shrink, so a thread's group is the first of its
        // class's still with room, found without searching every core
        // per thread (1,024 threads on 192 cores: most of a decision).
        let mut by_class: rustc_hash::FxHashMap<u64, (Vec<usize>, usize)> = rustc_hash::FxHashMap::default();
        for &g in order {
            by_class.entry(class[g]).or_default().0.push(g);
        }
        for (id, i, want) in pending {
            let (groups, next) = by_class
                .get_mut(&want)
                .expect("every class has as many slots as threads assigned to it");
            while groups.get(*next).is_some_and(|&g| room[g] == 0) {
                *next += 1;
            }
            let g = *groups
                .get(*next)
                .expect("every class has as many slots as threads assigned to it");
            room[g] -= 1;
            if slots[i as usize].group.replace(g) != Some(g) {
                plan.run(
                    id,
                    cores[g].0.clone(),
                    "pack:palm: least progress to the most capacity per thread",
                );
            }
        }
        self.sizes = Some(sizing);
        // Nothing to rotate (no worker, or a core each and the cores
        // alike): the groups cannot change with progress, and a turn every
        // fraction of a millisecond only disturbs the programs. Two
        // stress-ng switch pairs, left to the kernel as they hand work
        // on, took 1.55x plain Linux's time under turns 0.125 ms apart
        // (herd waking on their CPUs parts each pair), 0.98x under
        // pack:tp's 100 ms. A budget set from outside may shrink at any
        // turn: PALM keeps its pace while there is one (S4's consolidation
        // study: 6% less batch throughput at the longest period).
        let rotates = view.snapshot.budget_cores.is_some()
            || !totals.is_empty() && (totals.len() > cores.len() || !alike);
        plan.next_period_ns = Some(if rotates {
            self.period_ns
        } else {
            self.controller.max_period_ns
        });
        if !self.noted {
            self.noted = true;
            let groups = format!(
                "pack:palm: {} threads in {} groups; progress from {}; period from {:.3} ms",
                totals.len(),
                cores.len(),
                if beats {
                    "heartbeats"
                } else {
                    "CPU time (no heartbeats: spinning counts as progress)"
                },
                self.controller.min_period_ns as f64 / 1e6
            );
            // The plan's note of this turn, if any, follows.
            plan.note = Some(match plan.note.take() {
                Some(plan_note) => format!("{groups}. {plan_note}").into(),
                None => groups.into(),
            });
        }
        plan
    }
}

mod entries;
mod groups;
mod slots;
pub(crate) use entries::{PACK_PALM, PACK_TP, PACK_TR};
pub use groups::{arrange_sizes, group_sizes};
use groups::{allowed_cores, class_key, most_per_thread_first};
use slots::Slots;
pub use entries::static_best_periods_us;

#[cfg(test)]
mod tests;
