//! The world as the engine sees it: Clock, Sensor and Actuator.

use herd_engine::{Actuator, Clock, Sensor};
use herd_policy::{
    JobId, JobView, Knowledge, Learned, Obs, Placement, Plan, Snapshot, SystemObs, TaskState, TaskView,
};

use super::motion::avx2_where_present;
use super::{Counters, World};

/// A counter delta as a whole number, rounded to nearest. This runs for
/// every field of every task every period, and Rust's saturating `as` casts
/// cost a dozen instructions each; adding 2^52 instead puts the rounded
/// integer in the low mantissa bits (exact for 0 <= x < 2^52, which the
/// clamp guarantees: no per-period counter gets near 4.5e15).
#[expect(
    clippy::manual_clamp,
    reason = "max/min compile to two instructions; clamp adds checks"
)]
fn whole(x: f64) -> u64 {
    const TWO_52: f64 = 4_503_599_627_370_496.0;
    debug_assert!(x.is_finite() && x > -1.0, "counter delta {x}");
    (x.max(0.0).min(TWO_52 - 1.0) + TWO_52).to_bits() - TWO_52.to_bits()
}

/// A task's view before any observation of it.
fn blank_view() -> TaskView {
    TaskView {
        id: 0,
        job: 0,
        rank: 0,
        state: TaskState::Runnable,
        cpu: None,
        obs: Obs::default(),
        heartbeats: None,
    }
}

/// A name for a snapshot's task list no world in this process gave before
/// (the first is 1). Only compared for equality: results do not depend on it.
fn next_tasks_epoch() -> u64 {
    static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(1);
    NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
}

impl Clock for World<'_> {
    fn now_ns(&self) -> u64 {
        self.now_ns
    }
    fn advance_to(&mut self, t_ns: u64) {
        self.run_until(t_ns);
    }
}

impl Sensor for World<'_> {
    fn observe(&mut self) -> &Snapshot {
        debug_assert!(!self.view.unread, "a run observes unread every turn or never");
        self.observe_as(true)
    }

    fn observe_unread(&mut self) -> &Snapshot {
        self.view.unread = true;
        self.observe_as(false)
    }

    fn leave_counters(&mut self) {
        debug_assert_eq!(
            self.view.observes, 0,
            "the counters are left before the first observation"
        );
        self.view.counters_read = false;
    }

    fn finished(&self) -> bool {
        self.all_done()
    }

    /// Exact solo profiles from the scenario: the solo BTR of the phase the
    /// job's first thread is in now, the job's solo time (as given by
    /// [`World::set_solo_times`]) and its total memory requests.
    fn observe_with_oracle(&mut self) -> (&Snapshot, Option<&Knowledge>) {
        self.observe();
        let request_ns = self.rates.mem.request_ns;
        if self.view.oracle_requests.is_empty() {
            // Each job's memory requests over a whole run: fixed, so once.
            self.view.oracle_requests = self
                .jobs
                .iter()
                .map(|job| {
                    let per_run: f64 = job
                        .phases
                        .iter()
                        .map(|p| {
                            let copies = match p.split {
                                crate::scenario::Split::PerThread => f64::from(job.threads),
                                _ => 1.0,
                            };
                            p.instructions * copies * p.requests_per_instr
                        })
                        .sum();
                    per_run * f64::from(job.loops)
                })
                .collect();
        }
        let mut k = std::mem::take(&mut self.view.oracle);
        k.peak_btr = Some(self.peak_btr());
        k.counters = true;
        k.jobs.clear();
        for (j, (job, st)) in self.jobs.iter().zip(&self.job_state).enumerate() {
            if !st.arrived || st.finished_ns.is_some() {
                continue;
            }
            let lead = &self.threads[st.first];
            let btr = |p: &crate::scenario::Phase| p.solo_btr(request_ns);
            k.jobs.insert(
                j as JobId,
                Learned {
                    phase: Some(lead.phase as u16),
                    predicted_btr: job.phases.get(lead.phase).map(btr),
                    last_btr: None,
                    coverage: 1.0,
                    runs: 1,
                    solo_time_s: self.view.solo_times_s.get(j).copied().filter(|t| t.is_finite()),
                    mem_requests: Some(self.view.oracle_requests[j]),
                    // Exact profiles, not progress: a run's progress is
                    // what the learn step counts, oracle or not.
                    requests_done: 0.0,
                    // S1's oracle is about memory; PALM learns its barriers.
                    barrier_beats: None,
                },
            );
        }
        self.view.oracle = k;
        (&self.view.snapshot, Some(&self.view.oracle))
    }
}

impl World<'_> {
    /// An observation; with `read` false, nobody will read the tasks'
    /// observations or the job list (`Sensor::observe_unread`), so they are
    /// not made, while the world moves exactly as a full observation moves
    /// it (the same settling, so the same arithmetic: results stay
    /// byte-for-byte the same).
    fn observe_as(&mut self, read: bool) -> &Snapshot {
        self.observe_with(read, Self::read_pass)
    }

    /// [`World::observe_as`] with `pass` reading the threads into the
    /// snapshot (a test gives each copy of [`World::read_pass`] its turn).
    fn observe_with(&mut self, read: bool, pass: fn(&mut Self, u32)) -> &Snapshot {
        self.consolidation_step();
        self.arrive_jobs();
        self.kernel_balance();
        if self.dirty {
            self.recompute();
        }
        let mut relisted = false;
        if self.view.tasks_changed && read {
            // The reused observations' reports belong to the threads then
            // present: added before the list changes.
            self.add_repeats_unseen();
            self.view.tasks_changed = false;
            // Rewritten in place, not built anew: a restart changes a few
            // of a thousand tasks, and a new list (and its 232-byte views'
            // defaults, which the pass below overwrites) was 3% of a
            // guarded hour whose jobs restart. Only the fields the pass
            // leaves are written here.
            let threads = &self.threads;
            let present = &mut self.view.present;
            present.clear();
            present.extend((0..threads.len()).filter(|&t| threads[t].arrived && !threads[t].done));
            let tasks = &mut self.view.snapshot.tasks;
            tasks.resize_with(present.len(), blank_view);
            for (view, &t) in tasks.iter_mut().zip(present.iter()) {
                let th = &threads[t];
                (view.id, view.job, view.rank) = (th.id, th.job as u32, th.rank);
            }
            relisted = true;
            // A new name for a new list, never given before in this process
            // (so a policy that saw another world's snapshots cannot take
            // this list for one of those; 0 vouches for nothing).
            self.view.snapshot.tasks_epoch = next_tasks_epoch();
        }
        let bw = self.sensor.mem_bandwidth;
        let period_ns = self.now_ns - self.view.last_observe_ns;
        // This observation covers period n; the snapshot holds period n-1's.
        // With no change in either, no warm-up being paid and equal lengths,
        // every task's counters moved exactly as before: reuse them.
        let n = self.view.observes + 1;
        let unchanged = self.view.last_change_period + 2 <= n
            && self.view.debt_paid_ns <= self.view.before_last_observe_ns as f64
            && period_ns == self.view.snapshot.period_ns
            && (!self.view.tasks_changed || !read)
            && !self.jobs_changed
            && !self.has_heartbeats
            && !self.jitter.active()
            && n > 2;
        self.view.observes = n;
        self.view.before_last_observe_ns = self.view.last_observe_ns;
        if unchanged {
            self.totals.reused_observations += 1;
            if relisted {
                // A new list reports nothing of its tasks yet, as when it
                // was built anew. (Not met in the scenarios or the bench: a
                // new list comes with a change of rates, which makes the
                // observation full.)
                for view in &mut self.view.snapshot.tasks {
                    *view = TaskView {
                        id: view.id,
                        job: view.job,
                        rank: view.rank,
                        ..blank_view()
                    };
                }
            }
            // What this observation reports has happened: the next full one
            // must not report it again (added to `seen` when it is needed).
            if read {
                self.view.repeats_unseen += 1;
            }
            let mem = self.view.snapshot.system.mem_bytes;
            self.view.seen_mem_bytes += mem.unwrap_or(0) as f64;
            self.view.snapshot.system.energy_j = self
                .sensor
                .energy
                .then_some(self.totals.energy_j - self.view.seen_energy_j);
            self.view.seen_energy_j = self.totals.energy_j;
            self.view.snapshot.now_ns = self.now_ns;
            self.view.snapshot.repeats_last = read;
            self.view.last_observe_ns = self.now_ns;
            return &self.view.snapshot;
        }
        self.view.snapshot.repeats_last = false;
        if read {
            self.settle_all();
        } else {
            self.settle_later();
        }
        // A read adds the reused observations' reports thread by thread in
        // its pass below (one pass over the threads, not two).
        let repeats = if read {
            std::mem::take(&mut self.view.repeats_unseen)
        } else {
            self.add_repeats_unseen();
            self.view.tasks_changed = false;
            self.jobs_changed = false;
            0
        };
        if read {
            pass(self, repeats);
        }
        if self.jobs_changed {
            self.jobs_changed = false;
            self.view.snapshot.jobs = (0..self.jobs.len())
                .filter(|&j| {
                    let st = &self.job_state[j];
                    st.arrived && (st.finished_ns.is_none() || self.jobs[j].restart)
                })
                .map(|j| JobView {
                    id: j as u32,
                    name: self.jobs[j].name.clone(),
                    program: self.jobs[j].program.clone(),
                    arrival_ns: self.jobs[j].arrival_ns,
                    memory_hint: self.jobs[j].memory_hint,
                    memory_kb: self.memory_kb(j),
                    threads_declared: None,
                })
                .collect();
        }
        let mem_total = self.acct.mem_bytes_total;
        let system = SystemObs {
            mem_bytes: bw.then_some((mem_total - self.view.seen_mem_bytes) as u64),
            energy_j: self
                .sensor
                .energy
                .then_some(self.totals.energy_j - self.view.seen_energy_j),
            idle_ns_by_cpu: None,
        };
        self.view.seen_mem_bytes = mem_total;
        self.view.seen_energy_j = self.totals.energy_j;
        self.view.snapshot.now_ns = self.now_ns;
        self.view.snapshot.period_ns = period_ns;
        self.view.snapshot.system = system;
        self.view.last_observe_ns = self.now_ns;
        &self.view.snapshot
    }
}

impl World<'_> {
    avx2_where_present! {
        /// A full observation's pass over the present tasks: each view's
        /// state, CPU and counters since the last full one, after adding
        /// the `repeats` reused observations' reports thread by thread.
        /// Compiled for AVX2 where present, as the motion's passes are:
        /// a guarded minute at a thousand tasks took 3.6% fewer
        /// instructions (amp:ff), 1-3% less time, results the same.
        fn read_pass, read_pass_avx2 => read_pass_any(&mut self, repeats: u32)
    }

    #[inline(always)]
    fn read_pass_any(&mut self, repeats: u32) {
        // One loop for each, so a task's turn does not ask which.
        if self.view.counters_read {
            self.read_threads::<true>(repeats);
        } else {
            self.read_threads::<false>(repeats);
        }
    }

    /// [`World::read_pass`]'s loop, making the counters beyond CPU time,
    /// waits and instructions if `COUNTERS`.
    #[inline(always)]
    fn read_threads<const COUNTERS: bool>(&mut self, repeats: u32) {
        let hw = self.sensor.hw_counters;
        let bw = self.sensor.mem_bandwidth;
        // Update in place: this runs every decision for every task.
        let threads = &self.threads[..];
        let n = threads.len();
        // Sliced to the threads' count: one bounds check a thread, not one
        // a column.
        let m = &self.motion;
        let (instr, cpu_ns, wait_ns) = (&m.instr[..n], &m.cpu_ns[..n], &m.wait_ns[..n]);
        let (mem_bytes, llc_refs, cycles) = (&m.mem_bytes[..n], &m.llc_refs[..n], &m.cycles[..n]);
        // Sliced to the same count: the one bounds check of `threads[t]`
        // then covers `seen[t]` too (its length was reloaded and checked
        // for every thread).
        let seen = &mut self.view.seen[..n];
        let os = &self.kernel.os;
        let now_ns = self.now_ns;
        for (view, &t) in self.view.snapshot.tasks.iter_mut().zip(&self.view.present) {
            let th = &threads[t];
            let s = &mut seen[t];
            for _ in 0..repeats {
                if COUNTERS {
                    s.upto = s.upto.plus(&s.last);
                } else {
                    s.upto.add_read(&s.last);
                }
            }
            // Counters nobody reads are not read here either (they stay 0).
            let d = Counters {
                instr: instr[t],
                cpu_ns: cpu_ns[t],
                wait_ns: wait_ns[t],
                mem_bytes: if COUNTERS { mem_bytes[t] } else { 0.0 },
                llc_refs: if COUNTERS { llc_refs[t] } else { 0.0 },
                cycles: if COUNTERS { cycles[t] } else { 0.0 },
                migrations: if COUNTERS { th.migrations } else { 0 },
            };
            view.state = if th.paused {
                TaskState::Paused
            } else if th.cpu.is_some() {
                TaskState::Runnable
            } else {
                TaskState::Blocked
            };
            view.cpu = th.last_cpu.map(|p| os[p]);
            let u = &s.upto;
            if !COUNTERS {
                // Only what the loop reads (`Sensor::leave_counters`): the
                // rest stays as the blank view has it. The others were
                // 10-17% of a guarded minute's instructions at a thousand
                // tasks (every policy whose decisions read none).
                view.obs.cpu_time_ns = whole(d.cpu_ns - u.cpu_ns);
                view.obs.wait_ns = whole(d.wait_ns - u.wait_ns);
                view.obs.instructions = hw.then(|| whole(d.instr - u.instr));
            } else {
                let mem = d.mem_bytes - u.mem_bytes;
                view.obs = Obs {
                    cpu_time_ns: whole(d.cpu_ns - u.cpu_ns),
                    wait_ns: whole(d.wait_ns - u.wait_ns),
                    instructions: hw.then(|| whole(d.instr - u.instr)),
                    cycles: hw.then(|| whole(d.cycles - u.cycles)),
                    llc_refs: hw.then(|| whole(d.llc_refs - u.llc_refs)),
                    llc_misses: hw
                        .then(|| whole(mem / herd_model::params::LINE_BYTES * self.jitter.factor(t, now_ns))),
                    mem_bytes: bw.then(|| whole(mem)),
                    migrations: d.migrations - u.migrations,
                    // The simulator models rates, not each wake-up: how often a
                    // thread got a CPU is not known here.
                    timeslices: None,
                    // The simulator models rates, not code: phases are found
                    // from the counters, as where IP sampling is refused.
                    code_samples: None,
                };
            }
            // Heartbeats happen at whole multiples of k: floor, not round.
            view.heartbeats = th.heartbeat_every.map(|k| whole((d.instr / k).floor()));
            if COUNTERS {
                s.last = d.minus(&s.upto);
                s.upto = d;
            } else {
                // The others are 0 in `d` and stay 0 in `seen`.
                s.last.instr = d.instr - s.upto.instr;
                s.last.cpu_ns = d.cpu_ns - s.upto.cpu_ns;
                s.last.wait_ns = d.wait_ns - s.upto.wait_ns;
                (s.upto.instr, s.upto.cpu_ns, s.upto.wait_ns) = (d.instr, d.cpu_ns, d.wait_ns);
            }
        }
    }

    /// Adds each reused observation's report to `seen`, thread by thread
    /// in the order the observations came (the same additions as one
    /// pass per observation).
    fn add_repeats_unseen(&mut self) {
        let k = std::mem::take(&mut self.view.repeats_unseen);
        if k == 0 {
            return;
        }
        let seen = &mut self.view.seen;
        let all = self.view.counters_read;
        for &t in &self.view.present {
            let s = &mut seen[t];
            for _ in 0..k {
                if all {
                    s.upto = s.upto.plus(&s.last);
                } else {
                    s.upto.add_read(&s.last);
                }
            }
        }
    }
}

impl Actuator for World<'_> {
    fn apply(&mut self, plan: &Plan) {
        if !plan.tasks.is_empty() || !plan.lanes.is_empty() {
            self.settle_all();
        }
        for (id, lane) in &plan.lanes {
            if let Some(&t) = self.index_of.get(id) {
                self.threads[t].lane = *lane;
                self.fronts_ever |= *lane == herd_policy::Lane::Front;
                // Every thread on its CPU gets a new share.
                if let Some(pos) = self.threads[t].cpu {
                    self.rates.touched_cpus.push(pos);
                }
                self.touch(t);
            }
        }
        for (id, placement) in &plan.tasks {
            let Some(&t) = self.index_of.get(id) else {
                continue;
            };
            // Affinities change: the next balance must look again.
            self.balanced = false;
            match placement {
                Placement::Run { cpus, .. } => {
                    if !cpus.intersects(self.machine.all_cpus()) {
                        self.totals.ignored_placements += 1;
                        continue;
                    }
                    self.allowed[t].assign_intersection(cpus, self.machine.all_cpus());
                    self.plan_placed[t] = true;
                    self.threads[t].paused = false;
                    if let Some(pos) = self.threads[t].cpu {
                        if !self.allowed[t].contains(self.kernel.os[pos]) {
                            self.dequeue(t);
                        }
                    }
                    self.enqueue(t);
                }
                Placement::Pause { .. } => {
                    self.threads[t].paused = true;
                    self.dequeue(t);
                }
            }
            self.dirty = true;
        }
        if !plan.lanes.is_empty() || !plan.tasks.is_empty() {
            self.push_front_lanes();
        }
        self.home_first_touch();
        self.follow_memory(!plan.tasks.is_empty());
    }
}

impl World<'_> {
    /// Fixes the node of each new run's first-touch memory (`memory =
    /// "first-touch"`) where its thread runs once the policy has placed it.
    /// Live, `herd batch` holds programs until the first decision, and S3's
    /// in-kernel scheduler placed tasks at fork, so a program touches its
    /// memory where the policy put it, not where the kernel first would
    /// have; until then the simulated memory follows the thread.
    fn home_first_touch(&mut self) {
        if !self.has_first_touch {
            return;
        }
        let mut leads_homed = Vec::new();
        for (t, th) in self.threads.iter_mut().enumerate() {
            if th.first_node.is_none() && th.arrived && !th.done {
                th.first_node = th.cpu.map(|pos| self.kernel.numa[pos]);
                // Its numa_maps now has pages to show (`memory_kb`).
                self.jobs_changed |= th.first_node.is_some();
                if th.first_node.is_some() && self.job_state[th.job].first == t {
                    leads_homed.push(th.job);
                }
            }
        }
        // A job's shared data (`memory = { shared = F }`) is where its
        // first thread first ran: every thread's stream follows that.
        for j in leads_homed {
            if self.jobs[j]
                .phases
                .iter()
                .any(|p| matches!(p.memory, crate::scenario::Memory::Shared(_)))
            {
                let first = self.job_state[j].first;
                for t in first..first + self.jobs[j].threads as usize {
                    self.touch(t);
                }
            }
        }
    }

    /// Where job `j`'s memory is, as `/proc/PID/numa_maps` would show it:
    /// a phase bound to a node or interleaved says so (in relative units);
    /// local memory is where the threads will run, which a policy placing
    /// them decides, so like a fresh process it shows nothing; first-touch
    /// memory shows a share on each node where one of the job's threads
    /// touched its memory, once it has.
    pub(super) fn memory_kb(&self, j: usize) -> Option<Vec<(u32, u64)>> {
        let nodes = self.machine.numa_nodes();
        let phase = self.jobs[j].phases.first()?;
        match phase.memory {
            crate::scenario::Memory::Node(k) => Some(vec![(nodes.get(k)?.os, 1)]),
            crate::scenario::Memory::Interleaved => Some(nodes.iter().map(|n| (n.os, 1)).collect()),
            crate::scenario::Memory::Local => None,
            crate::scenario::Memory::FirstTouch | crate::scenario::Memory::Shared(_) => {
                let first = self.job_state[j].first;
                let mut kb: Vec<(u32, u64)> = Vec::new();
                for th in &self.threads[first..first + self.jobs[j].threads as usize] {
                    let Some(os) = th.first_node.and_then(|k| nodes.get(k)).map(|n| n.os) else {
                        continue;
                    };
                    match kb.iter_mut().find(|(o, _)| *o == os) {
                        Some((_, n)) => *n += 1,
                        None => kb.push((os, 1)),
                    }
                }
                (!kb.is_empty()).then_some(kb)
            }
        }
    }
}

impl<'a> World<'a> {
    /// The jobs follow `c`'s core budget, and the run lasts until its trace
    /// ends.
    pub fn follow_consolidation(&mut self, c: &'a crate::consolidation::Consolidation) {
        self.consolidation = Some(c);
        self.marks.clear();
    }

    /// The budget for this observation, and a mark when an interval began
    /// since the last one: the budget changes at observations (as a real
    /// controller's file is read), so each interval's work is counted from
    /// the observation that first saw it.
    fn consolidation_step(&mut self) {
        let Some(c) = self.consolidation else { return };
        self.view.snapshot.budget_cores = Some(c.budget_at(self.now_ns));
        // An observation that skipped whole intervals (a policy deciding
        // less often than the manager) marks each at the same instant: they
        // count no time and no work, and the next interval takes both.
        // Interval i starts at i x interval_ns; mark i is its first look.
        let next_mark_ns = |marks: &[(u64, f64)]| marks.len() as u64 * c.interval_ns;
        while self.now_ns >= next_mark_ns(&self.marks) && next_mark_ns(&self.marks) < c.end_ns() {
            self.settle_all();
            self.marks.push((self.now_ns, self.useful_instructions()));
        }
    }

    fn useful_instructions(&self) -> f64 {
        self.motion.instr.iter().sum()
    }

    /// The marks of the consolidation study, closed with one at the run's
    /// end: `(ns, cumulative useful instructions)`.
    pub fn consolidation_marks(&mut self) -> Vec<(u64, f64)> {
        self.settle_all();
        let mut marks = self.marks.clone();
        marks.push((self.now_ns, self.useful_instructions()));
        marks
    }
}

impl Counters {
    /// Field by field, `self + o`.
    fn plus(&self, o: &Counters) -> Counters {
        Counters {
            instr: self.instr + o.instr,
            cpu_ns: self.cpu_ns + o.cpu_ns,
            wait_ns: self.wait_ns + o.wait_ns,
            mem_bytes: self.mem_bytes + o.mem_bytes,
            llc_refs: self.llc_refs + o.llc_refs,
            cycles: self.cycles + o.cycles,
            migrations: self.migrations + o.migrations,
        }
    }

    /// [`Counters::plus`] in place, of the counters the loop reads alone
    /// (CPU time, waits, instructions): where nothing reads the others
    /// (`Sensor::leave_counters`) they are 0 on both sides.
    fn add_read(&mut self, o: &Counters) {
        self.instr += o.instr;
        self.cpu_ns += o.cpu_ns;
        self.wait_ns += o.wait_ns;
    }

    /// Field by field, `self - o` (counters only grow: `o` is older).
    fn minus(&self, o: &Counters) -> Counters {
        Counters {
            instr: self.instr - o.instr,
            cpu_ns: self.cpu_ns - o.cpu_ns,
            wait_ns: self.wait_ns - o.wait_ns,
            mem_bytes: self.mem_bytes - o.mem_bytes,
            llc_refs: self.llc_refs - o.llc_refs,
            cycles: self.cycles - o.cycles,
            migrations: self.migrations.saturating_sub(o.migrations),
        }
    }
}

#[cfg(test)]
mod tests {
    use herd_engine::{Clock, Sensor};

    use super::{Counters, World, whole};
    use crate::Scenario;

    /// Every field of `c`, as bits.
    fn bits(c: &Counters) -> [u64; 7] {
        let f = [c.instr, c.cpu_ns, c.wait_ns, c.mem_bytes, c.llc_refs, c.cycles];
        let mut out = [u64::from(c.migrations); 7];
        for (o, x) in out.iter_mut().zip(f) {
            *o = x.to_bits();
        }
        out
    }

    /// Where this CPU has AVX2, the read pass's copy for it writes the
    /// views and what was seen bit for bit as the copy built for any
    /// x86-64 (elsewhere both are one): two worlds alike, one observing
    /// with each, through phases, migrations, jitter, heartbeats, a
    /// finished thread and reused observations.
    #[test]
    fn both_copies_of_the_read_pass_give_the_same_bits() {
        // With jitter and heartbeats every observation is full; without,
        // most are reused, and a full one adds their reports first; and a
        // run whose counters nobody reads.
        for (jitter, beats, counters) in [(0.05, true, true), (0.0, false, true), (0.05, false, false)] {
            let mut text = format!(
                "name = \"t\"\nperiod_ms = 10\nhorizon_s = 3\n[sensor]\nllc_jitter = {jitter}\n\
                 [machine]\nsynthetic = \"package:2 core:2 pu:2\"\n",
            );
            for j in 0..5 {
                text.push_str(&format!(
                    "[[job]]\nname = \"j{j}\"\nthreads = {}\narrival_s = {}\n{}\
                     [[job.phase]]\ninstructions = {}\nipc = 1.2\nbw_gbps = 0.1\n\
                     [[job.phase]]\ninstructions = 4e8\nipc = 0.5\nbw_gbps = {}\n",
                    1 + j % 3,
                    f64::from(j) * 0.2,
                    if beats && j == 1 {
                        "heartbeat_every = 1e6\n"
                    } else {
                        ""
                    },
                    3e8 * f64::from(1 + j),
                    1.0 + f64::from(j),
                ));
            }
            let s = Scenario::parse(&text, "t", &|_| Err("no xml".into())).expect("parses");
            let world = || {
                let mut w = World::new(&s, &s.jobs, false);
                w.set_seed(7);
                w
            };
            let (mut wide, mut any) = (world(), world());
            if !counters {
                wide.leave_counters();
                any.leave_counters();
            }
            let (mut full, mut beaten, mut made) = (0, false, false);
            for turn in 1..300u64 {
                let now = turn * 10_000_000;
                wide.advance_to(now);
                any.advance_to(now);
                wide.observe();
                any.observe_with(true, World::read_pass_any);
                // (Each new task list has a name of its own in the process.)
                let mut other = any.view.snapshot.clone();
                other.tasks_epoch = wide.view.snapshot.tasks_epoch;
                assert_eq!(wide.view.snapshot, other, "turn {turn}");
                let seen = |w: &World| {
                    w.view
                        .seen
                        .iter()
                        .map(|s| (bits(&s.upto), bits(&s.last)))
                        .collect::<Vec<_>>()
                };
                assert_eq!(seen(&wide), seen(&any), "turn {turn}");
                full += usize::from(!wide.view.snapshot.repeats_last);
                made |= wide
                    .view
                    .snapshot
                    .tasks
                    .iter()
                    .any(|t| t.obs.llc_misses.is_some());
                beaten |= wide
                    .view
                    .snapshot
                    .tasks
                    .iter()
                    .any(|t| t.heartbeats.is_some_and(|b| b > 0));
                if wide.finished() {
                    break;
                }
            }
            let reused = wide.totals.reused_observations;
            assert_eq!(made, counters);
            assert!(full > 10 && beaten == beats, "{full} full, beats seen: {beaten}");
            assert!(beats || jitter > 0.0 || reused > 10, "{reused} reused");
        }
    }

    #[test]
    fn whole_rounds_to_nearest_and_clamps() {
        assert_eq!(whole(0.0), 0);
        assert_eq!(whole(-0.4), 0);
        assert_eq!(whole(2.4), 2);
        assert_eq!(whole(2.6), 3);
        assert_eq!(whole(1e12 + 0.7), 1_000_000_000_001);
        assert_eq!(whole(9.0e15), (1u64 << 52) - 1);
    }
}
