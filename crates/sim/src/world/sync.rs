//! How a job's threads wait for each other: barriers every K instructions,
//! and the gates that end shared and serial phases together, with the work
//! pool of a shared phase.

use super::World;
use crate::scenario::{BarrierKind, Job, Split};

/// The work thread `rank` starts `phase` with: its own instructions, all of
/// a serial phase for the first thread and none for the rest, or an equal
/// part of a shared phase's pool (rebalanced by `share_pools`).
pub(super) fn phase_work(job: &Job, phase: usize, rank: u32) -> f64 {
    let p = &job.phases[phase];
    match p.split {
        Split::PerThread => p.instructions,
        Split::Serial if rank == 0 => p.instructions,
        Split::Serial => 0.0,
        Split::Shared => p.instructions / f64::from(job.threads.max(1)),
    }
}

impl World<'_> {
    /// Thread `t` finished its phase's work: it moves on, or, in a shared
    /// or serial phase, waits at the phase's gate for the job's other threads.
    pub(super) fn end_phase(&mut self, t: usize) {
        let spec = &self.jobs[self.threads[t].job];
        if spec.phases[self.threads[t].phase].split == Split::PerThread {
            self.advance_phase(t);
            return;
        }
        let j = self.threads[t].job;
        self.threads[t].at_gate = true;
        self.job_state[j].gated += 1;
        self.dequeue(t);
        self.touch(t);
        self.maybe_open_gate(j);
    }

    /// Opens job `j`'s phase gate once every live thread waits at it.
    pub(super) fn maybe_open_gate(&mut self, j: usize) {
        let st = &self.job_state[j];
        if st.gated == 0 || st.gated < st.live {
            return;
        }
        self.job_state[j].gated = 0;
        let first = self.job_state[j].first;
        for t in first..first + self.jobs[j].threads as usize {
            if self.threads[t].at_gate {
                self.threads[t].at_gate = false;
                self.advance_phase(t);
                if !self.threads[t].done {
                    self.enqueue(t);
                }
            }
        }
    }

    /// Moves thread `t` to its next phase (or loop, or the end).
    fn advance_phase(&mut self, t: usize) {
        let spec = &self.jobs[self.threads[t].job];
        self.touch(t);
        let th = &mut self.threads[t];
        th.phase += 1;
        if th.phase == spec.phases.len() {
            th.loops_left -= 1;
            th.phase = 0;
            if th.loops_left == 0 {
                th.done = true;
                self.view.tasks_changed = true;
                self.dequeue(t);
                self.thread_done(t);
                return;
            }
        }
        self.motion.ends_below[t] = super::ends_below(spec, th.phase);
        self.motion.left[t] = phase_work(spec, th.phase, th.rank);
    }

    pub(super) fn reach_barrier(&mut self, t: usize) {
        let j = self.threads[t].job;
        let (every, kind) = self.jobs[j].barrier.expect("barrier event without a barrier");
        self.threads[t].at_barrier = true;
        self.motion.to_barrier[t] = every;
        self.touch(t);
        self.job_state[j].waiting += 1;
        if kind == BarrierKind::Block {
            self.dequeue(t);
        }
        self.maybe_release(j);
    }

    pub(super) fn maybe_release(&mut self, j: usize) {
        let st = &self.job_state[j];
        if st.live == 0 || st.waiting < st.live {
            return;
        }
        self.job_state[j].waiting = 0;
        let first = self.job_state[j].first;
        for t in first..first + self.jobs[j].threads as usize {
            if self.threads[t].at_barrier {
                self.threads[t].at_barrier = false;
                self.touch(t);
                self.enqueue(t);
            }
        }
    }

    /// Rebalances every shared phase's remaining work over the threads
    /// drawing from it, in proportion to their rates, so they all finish
    /// at once as threads taking work from one queue do. Runs whenever
    /// rates change (rates are constant in between). A thread paying off a
    /// migration's warm-up draws less than its rate until it is paid; the
    /// next change rebalances that.
    pub(super) fn share_pools(&mut self) {
        if !self.has_shared {
            return;
        }
        for j in 0..self.jobs.len() {
            let first = self.job_state[j].first;
            let ts = first..first + self.jobs[j].threads as usize;
            // Borrows only the jobs, so the work left can be written below.
            let jobs = self.jobs;
            let drawing = |th: &super::Thread| {
                th.arrived && !th.done && !th.at_gate && jobs[j].phases[th.phase].split == Split::Shared
            };
            // Threads of one job can be in different phases only between
            // gates, so at most one shared phase is open: its pool is every
            // drawing thread's remaining work.
            let (mut pool, mut rate) = (0.0, 0.0);
            for t in ts.clone().filter(|&t| drawing(&self.threads[t])) {
                pool += self.motion.left[t];
                rate += self.motion.rate[t];
            }
            if rate <= 0.0 {
                continue;
            }
            for t in ts.filter(|&t| drawing(&self.threads[t])) {
                self.motion.left[t] = pool * self.motion.rate[t] / rate;
            }
        }
    }
}
