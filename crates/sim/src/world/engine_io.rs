//! The world as the engine sees it: Clock, Sensor and Actuator.

use herd_engine::{Actuator, Clock, Sensor};
use herd_policy::{JobView, Obs, Placement, Plan, Snapshot, SystemObs, TaskState, TaskView};

use super::World;

/// A counter value as a whole number. Counters are finite, non-negative and
/// far below 2^63, so the cheap signed conversion is exact enough; `as u64`
/// from f64 costs several times more and this runs for every task every
/// period.
fn whole(x: f64) -> u64 {
    debug_assert!(x.is_finite() && x > -1.0, "counter delta {x}");
    x.max(0.0) as i64 as u64
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
        self.arrive_jobs();
        self.kernel_balance();
        if self.dirty {
            self.recompute();
        }
        if self.tasks_changed {
            self.tasks_changed = false;
            self.present = (0..self.threads.len())
                .filter(|&t| self.threads[t].arrived && !self.threads[t].done)
                .collect();
            self.snapshot.tasks = self
                .present
                .iter()
                .map(|&t| TaskView {
                    id: self.threads[t].id,
                    job: self.threads[t].job as u32,
                    rank: self.threads[t].rank,
                    state: TaskState::Runnable,
                    cpu: None,
                    obs: Obs::default(),
                    heartbeats: None,
                })
                .collect();
        }
        let hw = self.sensor.hw_counters;
        let bw = self.sensor.mem_bandwidth;
        let period_ns = self.now_ns - self.last_observe_ns;
        // This observation covers period n; the snapshot holds period n-1's.
        // With no change in either, no warm-up being paid and equal lengths,
        // every task's counters moved exactly as before: reuse them.
        let n = self.observes + 1;
        let unchanged = self.last_change_period + 2 <= n
            && self.debt_paid_ns <= self.before_last_observe_ns as f64
            && period_ns == self.snapshot.period_ns
            && !self.tasks_changed
            && !self.jobs_changed
            && !self.has_heartbeats
            && n > 2;
        self.observes = n;
        self.before_last_observe_ns = self.last_observe_ns;
        if unchanged {
            self.totals.reused_observations += 1;
            let mem = self.snapshot.system.mem_bytes;
            self.seen_mem_bytes += mem.unwrap_or(0) as f64;
            self.snapshot.system.energy_j = self
                .sensor
                .energy
                .then_some(self.totals.energy_j - self.seen_energy_j);
            self.seen_energy_j = self.totals.energy_j;
            self.snapshot.now_ns = self.now_ns;
            self.last_observe_ns = self.now_ns;
            return &self.snapshot;
        }
        self.settle_all();
        // Update in place: this runs every decision for every task.
        let threads = &mut self.threads;
        let os = &self.kernel.os;
        for (view, &t) in self.snapshot.tasks.iter_mut().zip(&self.present) {
            let th = &mut threads[t];
            let (d, s) = (&th.total, &th.seen);
            view.state = if th.paused {
                TaskState::Paused
            } else if th.cpu.is_some() {
                TaskState::Runnable
            } else {
                TaskState::Blocked
            };
            view.cpu = th.last_cpu.map(|p| os[p]);
            let mem = d.mem_bytes - s.mem_bytes;
            view.obs = Obs {
                cpu_time_ns: whole(d.cpu_ns - s.cpu_ns),
                wait_ns: whole(d.wait_ns - s.wait_ns),
                instructions: hw.then(|| whole(d.instr - s.instr)),
                cycles: hw.then(|| whole(d.cycles - s.cycles)),
                llc_refs: hw.then(|| whole(d.llc_refs - s.llc_refs)),
                llc_misses: hw.then(|| whole(mem / herd_model::params::LINE_BYTES)),
                mem_bytes: bw.then(|| whole(mem)),
                migrations: d.migrations - s.migrations,
            };
            view.heartbeats = th.heartbeat_every.map(|k| whole(d.instr / k));
            th.seen = th.total;
        }
        if self.jobs_changed {
            self.jobs_changed = false;
            self.snapshot.jobs = (0..self.jobs.len())
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
                })
                .collect();
        }
        let mem_total = self.mem_bytes_total;
        let system = SystemObs {
            mem_bytes: bw.then_some((mem_total - self.seen_mem_bytes) as u64),
            energy_j: self
                .sensor
                .energy
                .then_some(self.totals.energy_j - self.seen_energy_j),
        };
        self.seen_mem_bytes = mem_total;
        self.seen_energy_j = self.totals.energy_j;
        self.snapshot.now_ns = self.now_ns;
        self.snapshot.period_ns = period_ns;
        self.snapshot.system = system;
        self.last_observe_ns = self.now_ns;
        &self.snapshot
    }

    fn finished(&self) -> bool {
        self.all_done()
    }
}

impl Actuator for World<'_> {
    fn apply(&mut self, plan: &Plan) {
        if !plan.tasks.is_empty() {
            self.settle_all();
        }
        for (id, placement) in &plan.tasks {
            let Some(&t) = self.index_of.get(id) else {
                continue;
            };
            match placement {
                Placement::Run { cpus, .. } => {
                    let cpus = cpus.intersection(self.machine.all_cpus());
                    if cpus.is_empty() {
                        self.totals.ignored_placements += 1;
                        continue;
                    }
                    self.allowed[t] = cpus;
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
    }
}
