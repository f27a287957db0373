//! The simulated world: threads running phases on the modelled machine,
//! advanced from event to event, seen through the engine's Sensor,
//! Actuator and Clock traits.
//!
//! `engine_io` holds the Clock, Sensor and Actuator implementations.
//!
//! Rates are constant between events. Events are: decision boundaries
//! (the engine's `advance_to`), phase ends, barrier arrivals, the end of a
//! migration's cache warm-up, job arrivals, and kernel balancing ticks.
//! After any event that changes which threads run where, every rate is
//! recomputed: CPU shares, SMT sharing, core speed, and the memory
//! contention fixed point.

use rustc_hash::FxHashMap as HashMap;

use herd_model::{ModelParams, Stream, StreamClasses, Target, smt_share};
use herd_policy::{Snapshot, TaskId};
use herd_topo::{CpuSet, Machine};

mod balance;
mod busy;
mod engine_io;
mod follow;
mod jitter;
mod motion;
mod parts;
mod settle;
mod sync;
mod timeline;

pub use timeline::{MAX_SEGMENTS, Segment};

use motion::{Counters, Due, Motion};
use sync::phase_work;

use crate::kernel::Kernel;
use crate::scenario::{BarrierKind, Job, Memory, Scenario, SensorSpec};

#[derive(Debug, Clone)]
struct Thread {
    id: TaskId,
    job: usize,
    rank: u32,
    arrived: bool,
    done: bool,
    paused: bool,
    at_barrier: bool,
    /// Waiting at a shared or serial phase's end for the job's other threads.
    at_gate: bool,
    phase: usize,
    loops_left: u32,
    // Its debt, work left, CPU time and rates are in `Motion`.
    cpu: Option<usize>,
    last_cpu: Option<usize>,
    /// The job's heartbeat interval, copied here for the per-period observation.
    heartbeat_every: Option<f64>,
    /// Times the kernel or a plan moved it (its other counters are in
    /// `Motion`).
    migrations: u32,
    /// Its lane (`Plan::lanes`): on a shared CPU only the highest lane
    /// present runs, its members sharing equally (live these are SCHED_FIFO
    /// priorities, which herd gives one thread a CPU).
    lane: herd_policy::Lane,
    /// The node this run's first-touch memory is on: where the thread ran
    /// right after the first decision that saw it (`None` before, when its
    /// memory follows it). See `World::home_first_touch`.
    first_node: Option<usize>,
}

/// Below how many instructions left a stretch of `work` instructions (a
/// phase, the run to a barrier) has ended: a billionth of it and a
/// thousandth of an instruction, what rounding in the settling can leave.
fn done_below(work: f64) -> f64 {
    1e-9 * work + 1e-6
}

/// [`done_below`] for phase `phase` of `job`.
fn ends_below(job: &Job, phase: usize) -> f64 {
    done_below(job.phases[phase].instructions)
}

/// [`done_below`] for `job`'s barrier; -inf without one (never reached).
fn barrier_below(job: &Job) -> f64 {
    job.barrier
        .map_or(f64::NEG_INFINITY, |(every, _)| done_below(every))
}

#[derive(Debug, Clone, Default)]
struct JobState {
    first: usize,
    arrived: bool,
    live: u32,
    waiting: u32,
    /// Threads waiting at the gate that ends a shared or serial phase.
    gated: u32,
    run_started_ns: u64,
    finished_ns: Option<u64>,
    runs: u32,
}

/// Totals the metrics are computed from.
#[derive(Debug, Clone, Default)]
pub struct Totals {
    /// Energy used.
    pub energy_j: f64,
    /// Busy CPU time over all CPUs.
    pub busy_cpu_ns: f64,
    /// Migrations.
    pub migrations: u64,
    /// Migrations between LLC domains.
    pub migrations_cross_llc: u64,
    /// Migrations between NUMA nodes.
    pub migrations_cross_numa: u64,
    /// Migrations between core kinds (S3's measure of migration cost).
    pub migrations_cross_kind: u64,
    /// Memory-contention solves that did not converge.
    pub unconverged_solves: u64,
    /// Placements the actuator ignored because they named no CPU of the machine.
    pub ignored_placements: u64,
    /// Events the simulation stepped through.
    pub events: u64,
    /// Rate recomputations.
    pub recomputes: u64,
    /// Physical cores any thread ran on.
    pub cores_used: usize,
    /// Memory-contention solves, and the Gauss-Seidel sweeps they took.
    pub solves: u64,
    /// Sweeps over all solves.
    pub solve_sweeps: u64,
    /// Observations that reused the previous period's task counters
    /// (nothing changed over two periods of equal length).
    pub reused_observations: u64,
    /// Moves of a job's memory by herd's memory follower (`follow`).
    pub memory_moves: u64,
}

/// The simulated machine and workload. Its own fields are the kernel model
/// (threads, queues, jobs, time); the solver, the sensor's view and the
/// accounting are parts of their own (`parts`, which says why the split
/// is there).
pub struct World<'a> {
    machine: &'a Machine,
    model: &'a ModelParams,
    sensor: SensorSpec,
    /// Within-phase variation of the reported LLC misses.
    jitter: jitter::Jitter,
    jobs: &'a [Job],
    kernel: Kernel,
    threads: Vec<Thread>,
    /// What settling reads and writes of each thread (`motion`).
    motion: Motion,
    allowed: Vec<CpuSet>,
    /// Whether a plan set each thread's mask (live: herd's, not the
    /// program's or the user's): the memory follower's pinned threads.
    plan_placed: Vec<bool>,
    /// herd's memory follower (`follow`), where it has anything to move.
    follower: Option<Box<follow::Follower>>,
    job_state: Vec<JobState>,
    index_of: HashMap<TaskId, usize>,
    next_id: TaskId,
    now_ns: u64,
    dirty: bool,
    last_balance_ns: u64,
    last_fairness_ns: u64,
    /// When the CPUs' turns next pass (with `timeslice_ms`).
    next_turn_ns: u64,
    /// Jobs by arrival time, and how many of them have arrived.
    arrival_order: Vec<usize>,
    arrived_jobs: usize,
    /// Jobs that do not restart and have not finished (when every job
    /// restarts: jobs whose first run has not finished).
    unfinished: usize,
    /// Whether the set of present jobs changed since the last observation.
    jobs_changed: bool,
    /// Whether any job runs once (else the run ends when every job has
    /// finished its first run).
    has_fixed_jobs: bool,
    /// Whether any job's memory is first-touch: only then does each
    /// decision look for runs whose memory is still to be fixed.
    has_first_touch: bool,
    /// Threads' counters are accounted up to this time. Rates are constant
    /// between changes, so counters are brought up to date lazily: before
    /// anything changes a thread (`settle_all`) and when they are observed,
    /// not at every step.
    settled_ns: u64,
    /// Intervals, in order, up to `settled_ns` that no thread has settled
    /// yet (`settle_later`); empty unless the run is unread.
    unsettled_dts: Vec<f64>,
    /// Each thread's memory traffic in the interval an observed run
    /// settles (reused: it is filled at every settling).
    traffic_buf: Vec<f64>,
    /// Whether any job emits heartbeats (cumulative counts change every
    /// period, so its observations are never reused).
    has_heartbeats: bool,
    /// Whether any job has a shared phase (whose pool `share_pools` keeps).
    has_shared: bool,
    /// Whether a plan ever put a thread in the `Front` lane: until one
    /// does, there is nothing to push (`push_front_lanes`, whose pass over
    /// every queue's threads was 1.5% of a `linux` hour).
    fronts_ever: bool,
    /// The last periodic balance (without fairness rotation) moved nothing,
    /// and no queue or affinity changed since: balancing again is a no-op.
    balanced: bool,
    /// Totals for metrics.
    pub totals: Totals,
    /// The consolidation study the jobs follow (`follow_consolidation`),
    /// the jobs' cumulative useful instructions at each of its intervals'
    /// first observation (mark i: interval i, which starts at i x interval).
    consolidation: Option<&'a crate::consolidation::Consolidation>,
    marks: Vec<(u64, f64)>,
    /// The contention solver's state (see `parts`).
    rates: parts::Rates,
    /// What the sensor last showed and when it may be shown again.
    view: parts::SensorView,
    /// What the run has used, for the totals and the timeline.
    acct: parts::Accounting,
}

const EVENT_LIMIT: u64 = 50_000_000;

impl<'a> World<'a> {
    /// A world for `scenario` restricted to `jobs` (all of the scenario's, or
    /// one for a solo run). `trace` records the CPU timeline.
    pub fn new(scenario: &'a Scenario, jobs: &'a [Job], trace: bool) -> Self {
        let machine = &scenario.machine;
        let mut kernel = Kernel::new(machine);
        kernel.era = scenario.model.kernel;
        let mut threads = Vec::new();
        let mut motion = Motion::default();
        let mut allowed = Vec::new();
        let mut job_state = Vec::new();
        for (j, job) in jobs.iter().enumerate() {
            job_state.push(JobState {
                first: threads.len(),
                ..JobState::default()
            });
            let pinned: Vec<u32> = job.cpus.iter().collect();
            for rank in 0..job.threads {
                motion.push(
                    phase_work(job, 0, rank),
                    job.barrier.map_or(f64::INFINITY, |b| b.0),
                    (ends_below(job, 0), barrier_below(job)),
                );
                threads.push(Thread {
                    id: 0,
                    job: j,
                    rank,
                    arrived: false,
                    done: false,
                    paused: false,
                    at_barrier: false,
                    at_gate: false,
                    phase: 0,
                    loops_left: job.loops,
                    cpu: None,
                    last_cpu: None,
                    heartbeat_every: job.heartbeat_every,
                    migrations: 0,
                    lane: herd_policy::Lane::Fair,
                    first_node: None,
                });
                allowed.push(if job.pin_threads {
                    CpuSet::single(pinned[rank as usize % pinned.len()])
                } else {
                    job.cpus.clone()
                });
            }
        }
        let mut arrival_order: Vec<usize> = (0..jobs.len()).collect();
        arrival_order.sort_by_key(|&j| (jobs[j].arrival_ns, j));
        let speed_of_kind = (0..machine.kinds().len())
            .map(|k| scenario.model.kind_speed(machine, k))
            .collect();
        let widest_core = kernel.core_cpus.iter().map(Vec::len).max().unwrap_or(0);
        let smt_share_by_busy = (0..=widest_core)
            .map(|busy| smt_share(busy, scenario.model.smt_sigma))
            .collect();
        let n = kernel.len();
        let thread_count = threads.len();
        let mut world = World {
            machine,
            model: &scenario.model,
            sensor: scenario.sensor.clone(),
            jitter: jitter::Jitter::new(scenario.sensor.llc_jitter, 0),
            jobs,
            kernel,
            threads,
            motion,
            allowed,
            plan_placed: vec![false; thread_count],
            follower: None,
            job_state,
            index_of: HashMap::default(),
            next_id: 1,
            now_ns: 0,
            dirty: true,
            last_balance_ns: 0,
            last_fairness_ns: 0,
            next_turn_ns: u64::MAX,
            arrival_order,
            arrived_jobs: 0,
            unfinished: if jobs.iter().all(|j| j.restart) {
                jobs.len()
            } else {
                jobs.iter().filter(|j| !j.restart).count()
            },
            jobs_changed: true,
            has_fixed_jobs: jobs.iter().any(|j| !j.restart),
            has_first_touch: jobs.iter().any(|j| {
                j.phases
                    .first()
                    .is_some_and(|p| matches!(p.memory, Memory::FirstTouch | Memory::Shared(_)))
            }),
            settled_ns: 0,
            unsettled_dts: Vec::new(),
            traffic_buf: Vec::new(),
            has_heartbeats: jobs.iter().any(|j| j.heartbeat_every.is_some()),
            has_shared: jobs
                .iter()
                .any(|j| j.phases.iter().any(|p| p.split == crate::scenario::Split::Shared)),
            fronts_ever: false,
            balanced: false,
            totals: Totals::default(),
            consolidation: None,
            marks: Vec::new(),
            rates: parts::Rates {
                mem: scenario.model.mem_system(machine),
                next_event_ns: 0.0,
                last_solution: None,
                classes: StreamClasses::default(),
                class_ns_per_instr: Vec::new(),
                streams: vec![None; thread_count],
                // The first recompute builds every thread's stream and
                // counts every core's busy CPUs.
                touched_threads: (0..thread_count).collect(),
                touched_cpus: (0..n).collect(),
                rebuilt: Vec::new(),
                smt_buf: vec![1.0; n],
                speed_of_kind,
                smt_share_by_busy,
            },
            view: parts::SensorView {
                solo_times_s: Vec::new(),
                oracle: herd_policy::Knowledge::default(),
                oracle_requests: Vec::new(),
                last_change_period: 0,
                debt_paid_ns: 0.0,
                observes: 0,
                before_last_observe_ns: 0,
                snapshot: Snapshot {
                    lanes_apply: true,
                    ..Snapshot::default()
                },
                last_observe_ns: 0,
                seen_energy_j: 0.0,
                seen_mem_bytes: 0.0,
                present: Vec::new(),
                tasks_changed: true,
                seen: vec![parts::Seen::default(); thread_count],
                repeats_unseen: 0,
                unread: false,
                counters_read: true,
            },
            acct: parts::Accounting {
                power_w: scenario.model.power.idle_w,
                busy: busy::BusyCores::new(machine),
                core_used: vec![false; machine.cores().len()],
                mem_bytes_total: 0.0,
                trace: trace.then(Vec::new),
                open_segments: vec![None; n],
            },
        };
        world.follower = world.new_follower();
        world
    }

    /// When each job finished its first run (`None`: not within the run).
    pub fn finish_times(&self) -> Vec<Option<u64>> {
        self.job_state.iter().map(|s| s.finished_ns).collect()
    }

    fn queued(&self, t: usize) -> bool {
        let th = &self.threads[t];
        let blocked = th.at_barrier && matches!(self.jobs[th.job].barrier, Some((_, BarrierKind::Block)));
        th.arrived && !th.done && !th.paused && !blocked && !th.at_gate
    }

    fn progressing(&self, t: usize) -> bool {
        let th = &self.threads[t];
        th.cpu.is_some() && !th.at_barrier
    }

    fn enqueue(&mut self, t: usize) {
        if self.threads[t].cpu.is_some() || !self.queued(t) {
            return;
        }
        let prev = self.threads[t].last_cpu;
        let Some(pos) = self.kernel.select(&self.allowed[t], prev) else {
            return;
        };
        if let Some(p) = prev {
            self.note_migration(t, p, pos);
        }
        self.kernel.enqueue(t, pos);
        self.threads[t].cpu = Some(pos);
        self.threads[t].last_cpu = Some(pos);
        self.rates.touched_cpus.push(pos);
        self.balanced = false;
        self.touch(t);
    }

    fn dequeue(&mut self, t: usize) {
        if let Some(pos) = self.threads[t].cpu.take() {
            self.kernel.dequeue(t, pos);
            self.rates.touched_cpus.push(pos);
            self.balanced = false;
            self.touch(t);
        }
    }

    /// Marks thread `t`'s stream for rebuilding at the next recompute.
    fn touch(&mut self, t: usize) {
        self.rates.touched_threads.push(t);
        self.dirty = true;
    }

    /// Thread `t` owes what it would retire alone in `ns` (a move's
    /// warm-up, a memory copy): time lost without an event of its own.
    fn owe(&mut self, t: usize, ns: f64) {
        let th = &self.threads[t];
        let phase = &self.jobs[th.job].phases[th.phase];
        let solo_ns = phase.core_ns_per_instr + phase.requests_per_instr * self.model.request_ns;
        self.motion.debt[t] += ns / solo_ns;
    }

    fn note_migration(&mut self, t: usize, from: usize, to: usize) {
        if from == to {
            return;
        }
        let (a, b) = (self.kernel.os[from], self.kernel.os[to]);
        let cost = self.model.migration.cost_ns(self.machine, a, b);
        self.owe(t, cost as f64);
        let th = &mut self.threads[t];
        th.migrations += 1;
        self.totals.migrations += 1;
        // Without LLC information (both None) no boundary is known.
        if self.kernel.llc[from] != self.kernel.llc[to] {
            self.totals.migrations_cross_llc += 1;
        }
        if self.kernel.numa[from] != self.kernel.numa[to] {
            self.totals.migrations_cross_numa += 1;
        }
        if self.kernel.kind[from] != self.kernel.kind[to] {
            self.totals.migrations_cross_kind += 1;
        }
    }

    fn apply_moves(&mut self, moves: Vec<(usize, usize, usize)>) {
        for (t, from, to) in moves {
            self.note_migration(t, from, to);
            self.threads[t].cpu = Some(to);
            self.threads[t].last_cpu = Some(to);
            self.rates.touched_cpus.extend([from, to]);
            self.balanced = false;
            self.touch(t);
        }
    }

    fn arrive_jobs(&mut self) {
        while let Some(&j) = self.arrival_order.get(self.arrived_jobs) {
            if self.jobs[j].arrival_ns > self.now_ns {
                break;
            }
            self.settle_all();
            self.arrived_jobs += 1;
            self.job_state[j].arrived = true;
            self.jobs_changed = true;
            self.start_run(j);
        }
    }

    fn next_arrival_ns(&self) -> u64 {
        self.arrival_order
            .get(self.arrived_jobs)
            .map_or(u64::MAX, |&j| self.jobs[j].arrival_ns)
    }

    fn start_run(&mut self, j: usize) {
        let job = &self.jobs[j];
        let first = self.job_state[j].first;
        self.job_state[j].live = job.threads;
        self.job_state[j].waiting = 0;
        self.job_state[j].gated = 0;
        self.job_state[j].run_started_ns = self.now_ns;
        for t in first..first + job.threads as usize {
            let id = self.next_id;
            self.next_id += 1;
            let th = &mut self.threads[t];
            self.index_of.remove(&th.id);
            th.id = id;
            th.arrived = true;
            th.done = false;
            th.at_barrier = false;
            th.at_gate = false;
            // A new thread starts in the normal class, as live (lanes set
            // SCHED_RESET_ON_FORK): the slot's last thread's lane is not its.
            th.lane = herd_policy::Lane::Fair;
            th.first_node = None;
            th.phase = 0;
            th.loops_left = job.loops;
            self.motion.ends_below[t] = ends_below(job, 0);
            self.motion.left[t] = phase_work(job, 0, th.rank);
            self.motion.to_barrier[t] = job.barrier.map_or(f64::INFINITY, |b| b.0);
            self.index_of.insert(id, t);
            self.view.tasks_changed = true;
            self.touch(t);
            self.enqueue(t);
        }
        self.dirty = true;
    }

    /// What the run's seed decides in the world: the kernel's placement
    /// ties (with `ModelParams::seeded_placement`) and the sensor's jitter.
    pub fn set_seed(&mut self, seed: u64) {
        if self.model.seeded_placement {
            self.kernel.shuffle_ties(seed);
        }
        self.jitter = jitter::Jitter::new(self.sensor.llc_jitter, seed);
    }

    /// Gives the oracle each job's solo time (index = job).
    pub fn set_solo_times(&mut self, solo_s: &[f64]) {
        self.view.solo_times_s = solo_s.to_vec();
    }

    /// The machine's peak memory bandwidth in transactions (64-byte lines)
    /// per µs: every node's controller at full rate.
    pub fn peak_btr(&self) -> f64 {
        self.rates.mem.node_mu.iter().sum::<f64>() * 1e3
    }

    /// Whether every job that does not restart has finished; when every
    /// job restarts (S3's method: finished programs run again so the load
    /// stays), whether every job has finished its first run.
    fn all_done(&self) -> bool {
        // A consolidation study runs until its trace ends (the horizon).
        self.unfinished == 0 && self.consolidation.is_none()
    }

    fn recompute(&mut self) {
        self.settle_all();
        self.dirty = false;
        self.view.last_change_period = self.view.observes + 1;
        self.totals.recomputes += 1;
        // Per core: its busy CPUs give each of them an SMT share (S0) and
        // feed the power model. Only the cores of CPUs whose queue changed
        // are counted again; the shares of the others stand.
        let mut smt = std::mem::take(&mut self.rates.smt_buf);
        for &pos in &self.rates.touched_cpus {
            let c = self.kernel.core[pos];
            let cpus = &self.kernel.core_cpus[c];
            let b = cpus
                .iter()
                .filter(|&&p| !self.kernel.queues[p].is_empty())
                .count();
            self.acct.busy.set(c, &self.machine.cores()[c], b);
            let share = self.rates.smt_share_by_busy[b];
            cpus.iter().for_each(|&p| smt[p] = share);
        }
        #[cfg(debug_assertions)]
        self.check_busy(&smt);
        let busy = &self.acct.busy;
        self.acct.power_w = self
            .model
            .power
            .power_w(busy.packages(), &busy.by_kind, busy.extra);
        let mut rebuilt = std::mem::take(&mut self.rates.rebuilt);
        rebuilt.clear();
        rebuilt.resize(self.threads.len(), false);
        let mut todo = std::mem::take(&mut self.rates.touched_threads);
        for &pos in &self.rates.touched_cpus {
            for &p in &self.kernel.core_cpus[self.kernel.core[pos]] {
                todo.extend_from_slice(&self.kernel.queues[p]);
            }
        }
        self.rates.touched_cpus.clear();
        for &t in &todo {
            if std::mem::replace(&mut rebuilt[t], true) {
                continue;
            }
            let stream = self.stream_of(t, &smt);
            if self.rates.streams[t] != stream {
                if let Some(c) = self.motion.set_class(t, None) {
                    self.rates.classes.leave(c);
                }
                let class = stream.as_ref().map(|s| self.rates.classes.join(s));
                self.motion.set_class(t, class);
                self.rates.streams[t] = stream;
            }
        }
        todo.clear();
        self.rates.touched_threads = todo;
        // The bookkeeping above must miss nothing: in debug builds, check
        // that every other thread's stream is what a rebuild would give.
        #[cfg(debug_assertions)]
        for (t, _) in rebuilt.iter().enumerate().filter(|(_, r)| !**r) {
            let before = (self.motion.share[t], self.rates.streams[t]);
            let again = self.stream_of(t, &smt);
            assert_eq!(
                before,
                (self.motion.share[t], again),
                "thread {t}'s stream changed without being touched"
            );
        }
        self.rates.rebuilt = rebuilt;
        if self.rates.classes.is_changed() {
            let sol = self
                .rates
                .classes
                .solve(&self.rates.mem, self.rates.last_solution.as_ref());
            if !sol.converged {
                self.totals.unconverged_solves += 1;
            }
            self.totals.solves += 1;
            self.totals.solve_sweeps += u64::from(sol.sweeps);
            self.rates.class_ns_per_instr.clone_from(&sol.ns_per_instr);
            self.rates.last_solution = Some(sol);
        }
        self.rates.smt_buf = smt;
        let mut due = Due::new(self.now_ns as f64);
        // Without shared pools, rates and the next event in one pass over
        // the threads (the same arithmetic in the same order as two).
        let pools = self.has_shared;
        let ns_per_instr = &self.rates.class_ns_per_instr;
        self.motion.set_rates(ns_per_instr, (!pools).then_some(&mut due));
        if pools {
            self.share_pools();
            self.motion.due(&mut due);
        }
        self.rates.next_event_ns = due.now + due.next;
        self.view.debt_paid_ns = due.paid;
        self.record_timeline();
    }

    /// Sets thread `t`'s share and per-instruction figures from its CPU and
    /// phase, and returns its memory stream, if it is making progress.
    /// `smt` holds each CPU's SMT share of its core.
    fn stream_of(&mut self, t: usize, smt: &[f64]) -> Option<Stream> {
        let progressing = self.progressing(t);
        self.motion.rate[t] = 0.0;
        let Some(pos) = self.threads[t].cpu else {
            self.motion.share[t] = 0.0;
            self.motion.idle_share[t] = 0.0;
            return None;
        };
        let queue = &self.kernel.queues[pos];
        let rank = |t: usize| match self.threads[t].lane {
            herd_policy::Lane::Front => 2,
            herd_policy::Lane::Back => 1,
            herd_policy::Lane::Fair => 0,
        };
        let top = queue.iter().map(|&q| rank(q)).max().unwrap_or(0);
        let share = if top > 0 {
            // Lanes: the highest present runs, shared among its members.
            if rank(t) == top {
                1.0 / queue.iter().filter(|&&q| rank(q) == top).count() as f64
            } else {
                0.0
            }
        } else if self.model.timeslice_ms.is_some() {
            // Turns: only the head of the queue runs now.
            if queue[0] == t { 1.0 } else { 0.0 }
        } else {
            1.0 / queue.len() as f64
        };
        let th = &mut self.threads[t];
        let phase = &self.jobs[th.job].phases[th.phase];
        let m = &mut self.motion;
        m.share[t] = share;
        m.idle_share[t] = 1.0 - share;
        m.bytes_per_instr[t] = phase.requests_per_instr * herd_model::params::LINE_BYTES;
        m.refs_per_instr[t] = if phase.llc_miss_rate > 0.0 {
            phase.requests_per_instr / phase.llc_miss_rate
        } else {
            0.0
        };
        let kind_speed = self.rates.speed_of_kind[self.kernel.kind[pos]];
        m.cycles_per_ns[t] = self.model.freq_ghz * kind_speed;
        if !progressing {
            return None;
        }
        let speed = kind_speed * smt[pos];
        let home = self.kernel.numa[pos];
        let first_node = th.first_node.unwrap_or(home);
        // A job's shared data: first touched where its first thread ran.
        let lead = self.job_state[th.job].first;
        let shared_node = self.threads[lead].first_node.unwrap_or(first_node);
        Some(Stream {
            compute_ns_per_instr: phase.core_ns_per_instr / speed,
            requests_per_instr: phase.requests_per_instr,
            cpu_share: share,
            home,
            target: match phase.memory {
                Memory::Local => Target::Node(home),
                Memory::Interleaved => Target::Interleaved,
                Memory::Node(k) => Target::Node(k),
                Memory::FirstTouch => Target::Node(first_node),
                Memory::Shared(share_ppm) => Target::Shared {
                    node: shared_node,
                    share_ppm,
                },
            },
        })
    }

    /// When the next thread event is due, from the threads' settled state.
    fn next_thread_event_ns(&self) -> f64 {
        let best = self.motion.next_event_in();
        self.now_ns as f64 + best
    }

    /// Machine-wide accounting over `dt` ns at the current rates.
    fn account(&mut self, dt: f64) {
        if dt > 0.0 {
            self.totals.cores_used += self.acct.busy.mark_used(&mut self.acct.core_used);
        }
        self.totals.busy_cpu_ns += dt * self.acct.busy.cpus as f64;
        self.totals.energy_j += self.acct.power_w * dt * 1e-9;
    }

    /// Handles every thread event due now.
    fn thread_events(&mut self) {
        self.settle_all();
        // Only a thread past a threshold can have an event: the columns
        // find the next one (read afresh after each event, which may have
        // started or stopped other threads, as a look at each in turn did).
        let mut from = 0;
        while let Some(t) = self.motion.past_threshold(from) {
            from = t + 1;
            let th = &self.threads[t];
            let m = &self.motion;
            if th.cpu.is_none() || th.at_barrier || m.debt[t] > 1e-6 {
                continue;
            }
            // The kept thresholds are what the job says (debug builds).
            debug_assert_eq!(
                (m.ends_below[t], m.barrier_below[t]),
                (
                    ends_below(&self.jobs[th.job], th.phase),
                    barrier_below(&self.jobs[th.job])
                ),
                "thread {t}'s thresholds are stale"
            );
            if m.left[t] <= m.ends_below[t] {
                self.end_phase(t);
            } else if m.to_barrier[t] <= m.barrier_below[t] {
                self.reach_barrier(t);
            }
        }
    }

    fn thread_done(&mut self, t: usize) {
        let j = self.threads[t].job;
        self.job_state[j].live -= 1;
        if self.job_state[j].live > 0 {
            self.maybe_release(j);
            self.maybe_open_gate(j);
            return;
        }
        let st = &mut self.job_state[j];
        st.runs += 1;
        if st.finished_ns.is_none() {
            st.finished_ns = Some(self.now_ns);
            if !self.jobs[j].restart || !self.has_fixed_jobs {
                self.unfinished -= 1;
            }
        }
        if self.jobs[j].restart && !self.all_done() {
            self.start_run(j);
        } else {
            self.jobs_changed = true;
            let first = self.job_state[j].first;
            for t in first..first + self.jobs[j].threads as usize {
                let id = self.threads[t].id;
                self.index_of.remove(&id);
            }
        }
    }

    /// Runs events until `t_end` or until everything is done.
    fn run_until(&mut self, t_end: u64) {
        let mut events = 0u64;
        while self.now_ns < t_end && !self.all_done() {
            events += 1;
            self.totals.events += 1;
            assert!(
                events < EVENT_LIMIT,
                "simulation made no progress: {events} events without reaching {t_end} ns"
            );
            self.arrive_jobs();
            self.kernel_balance();
            self.take_turns();
            if self.dirty {
                self.recompute();
            }
            let horizon = t_end.min(self.next_arrival_ns()).min(self.next_turn_ns);
            let dt_thread = self.rates.next_event_ns - self.now_ns as f64;
            let step_ns = (horizon - self.now_ns) as f64;
            if dt_thread < step_ns {
                // Whole nanoseconds keep time exact; a sub-ns event rounds up.
                let dt_ns = (dt_thread.ceil().max(0.0) as u64).max(1);
                self.account(dt_ns as f64);
                self.now_ns += dt_ns;
                self.thread_events();
                if !self.dirty {
                    // Rounding left the event a hair short: look again.
                    self.rates.next_event_ns = self.next_thread_event_ns();
                }
            } else {
                self.account(step_ns);
                self.now_ns = horizon;
            }
        }
    }
}
