//! herd's memory follower in the simulated world, in part: the rule live
//! herd follows (`herd_engine::memory_follow`), with the move made on the
//! simulated first-touch memory, for the jobs herd pinned and then handed
//! to the kernel (the guard backing a policy off). Without it the
//! simulated guard could only hand back a stranded memory layout that live
//! herd moves (`--memory-follow`, on by default).
//!
//! Not modelled: live herd also moves the memory of a job a policy keeps
//! pinned away from it. The seeds' algorithms were published on
//! first-touch memory that stays (S3's kernel), and following it changes
//! their figures (measured: `s3-numa1-hd1` amp:hass-d with the guard off,
//! 1.028 of Linux's completion -> 0.947; `docs/results.md`, issue 23's
//! thirty-first session); which of the two the simulator should show for
//! a policy that pins is left open. `linux` is untouched either way: the
//! rule follows only jobs herd pinned.

use herd_engine::memory_follow::{Due, Rule, RunsOn, runs_on_by_job};

use super::World;

impl World<'_> {
    /// The follower for this machine and workload: `None` with one NUMA
    /// node or no first-touch memory (nothing it could move).
    pub(super) fn new_follower(&self) -> Option<Rule> {
        if !self.has_first_touch {
            return None;
        }
        let nodes = self
            .machine
            .numa_nodes()
            .iter()
            .filter(|n| !n.cpus.is_empty())
            .map(|n| (n.os, n.cpus.clone()))
            .collect();
        // The simulated readings count one unit per thread: no floor.
        Rule::new(nodes, 0)
    }

    /// Once a turn, after the plan: moves the memory of each job the rule
    /// says is due onto the nodes it runs on. The copy costs each of the
    /// job's threads `model.migration.pages_ms` of its progress.
    pub(super) fn follow_memory(&mut self) {
        let Some(rule) = self.follower.as_mut() else {
            return;
        };
        let live = |th: &super::Thread| th.arrived && !th.done;
        let runs_on = runs_on_by_job(
            self.jobs.len(),
            self.threads
                .iter()
                .enumerate()
                .filter(|(_, th)| live(th))
                .map(|(t, th)| {
                    let placed = self.plan_placed[t].then_some(&self.allowed[t]);
                    let works = !th.paused && th.cpu.is_some();
                    (th.job, placed, works, th.cpu.map(|pos| self.kernel.os[pos]))
                }),
            &rule.every,
        );
        let mut due = Vec::new();
        for (j, on) in runs_on.iter().enumerate() {
            let st = &self.job_state[j];
            let threads = st.first..st.first + self.jobs[j].threads as usize;
            // A paused job runs nowhere (live: its program is stopped).
            if self.threads[threads].iter().any(|th| live(th) && th.paused) {
                continue;
            }
            // The rule sees every job (it must know which herd pinned);
            // only a handed-back job's memory moves here (see above), so
            // only its memory is read.
            let handed_back = matches!(on, RunsOn::Kernel(_));
            let memory = if handed_back { self.memory_kb(j) } else { None };
            let rule = self.follower.as_mut().expect("checked above");
            if let Some(d) = rule
                .due(j, on, memory.as_deref(), self.now_ns, true)
                .filter(|_| handed_back)
            {
                rule.rest(j, self.now_ns);
                due.push((j, d));
            }
        }
        if due.is_empty() {
            return;
        }
        self.settle_all();
        for (j, Due { to, .. }) in due {
            self.move_memory(j, &to);
        }
    }

    /// Moves job `j`'s first-touch memory onto nodes `to` (OS numbers): each
    /// thread's onto its own node if that is one of them, else onto the
    /// first (`migrate_pages` maps the nodes it leaves onto those it goes
    /// to; with the one node most moves have, every page goes there).
    fn move_memory(&mut self, j: usize, to: &[u32]) {
        let nodes = self.machine.numa_nodes();
        let index = |os: u32| nodes.iter().position(|n| n.os == os);
        let Some(first) = to.first().copied().and_then(index) else {
            return;
        };
        let st = &self.job_state[j];
        let pages_ns = self.model.migration.pages_ms * 1e6;
        for t in st.first..st.first + self.jobs[j].threads as usize {
            let th = &mut self.threads[t];
            if !th.arrived || th.done || th.first_node.is_none() {
                continue;
            }
            let here = th.cpu.map(|pos| self.kernel.numa[pos]);
            let node = here
                .filter(|k| to.iter().any(|&os| index(os) == Some(*k)))
                .unwrap_or(first);
            if th.first_node == Some(node) {
                continue;
            }
            th.first_node = Some(node);
            self.owe(t, pages_ns);
            self.touch(t);
        }
        self.totals.memory_moves += 1;
        // Its numa_maps shows the pages on their new node.
        self.jobs_changed = true;
    }
}
