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

/// The follower: the rule, and what it read of each thread at the last
/// turn, so that a turn in which no thread came or went, was placed or
/// changed CPU takes where each job runs from that turn, and asks the rule
/// only of the jobs handed back. Worked out every turn, where each job
/// runs and the rule's look at each job were 36% of the instructions of
/// `herd sim scenarios/s3-numa2-hd1.toml` (S3's NUMA2, whose policies keep
/// most threads on one CPU for long stretches).
pub(super) struct Follower {
    rule: Rule,
    /// Per thread, what [`runs_on_by_job`] read of it at the last turn.
    seen: Vec<Seen>,
    /// Where each job ran at the last turn.
    runs_on: Vec<RunsOn>,
}

/// What [`runs_on_by_job`] reads of a thread, besides its mask (which only
/// a plan changes): whether it is in the run, whether a plan placed it,
/// whether it works, and its CPU.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
struct Seen {
    live: bool,
    placed: bool,
    works: bool,
    cpu: Option<u32>,
}

impl World<'_> {
    /// The follower for this machine and workload: `None` with one NUMA
    /// node or no first-touch memory (nothing it could move).
    pub(super) fn new_follower(&self) -> Option<Box<Follower>> {
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
        Some(Box::new(Follower {
            rule: Rule::new(nodes, 0)?,
            seen: Vec::new(),
            runs_on: Vec::new(),
        }))
    }

    /// Once a turn, after the plan (`placed`: it set some thread's mask):
    /// moves the memory of each job the rule says is due onto the nodes it
    /// runs on. The copy costs each of the job's threads
    /// `model.migration.pages_ms` of its progress.
    pub(super) fn follow_memory(&mut self, placed: bool) {
        // Taken out while the world is read (boxed: one word to move);
        // put back below.
        let Some(mut f) = self.follower.take() else {
            return;
        };
        let live = |th: &super::Thread| th.arrived && !th.done;
        let seen = |t: usize, th: &super::Thread| Seen {
            live: live(th),
            placed: self.plan_placed[t],
            works: !th.paused && th.cpu.is_some(),
            cpu: th.cpu.map(|pos| self.kernel.os[pos]),
        };
        // Every thread read as the last turn read it, and no mask set since:
        // each job runs where it ran then.
        let mut same = !placed && f.seen.len() == self.threads.len();
        f.seen.resize(self.threads.len(), Seen::default());
        for (t, th) in self.threads.iter().enumerate() {
            let now = seen(t, th);
            same &= f.seen[t] == now;
            f.seen[t] = now;
        }
        let runs_on_now = || {
            runs_on_by_job(
                self.jobs.len(),
                f.seen.iter().enumerate().filter(|(_, s)| s.live).map(|(t, s)| {
                    let th = &self.threads[t];
                    (th.job, s.placed.then_some(&self.allowed[t]), s.works, s.cpu)
                }),
                &f.rule.every,
            )
        };
        if !same {
            f.runs_on = runs_on_now();
        }
        debug_assert!(
            !same || f.runs_on == runs_on_now(),
            "a job's CPUs changed with no thread read differently"
        );
        let mut due = Vec::new();
        for (j, on) in f.runs_on.iter().enumerate() {
            // The rule sees every job (it must know which herd pinned);
            // only a handed-back job's memory moves here (see above), so
            // only its memory is read. A job that runs where the rule saw
            // it at the last turn, not handed back, tells it nothing new:
            // its nodes and whether herd pinned it are noted already.
            let handed_back = matches!(on, RunsOn::Kernel(_));
            if same && !handed_back {
                continue;
            }
            let st = &self.job_state[j];
            let threads = st.first..st.first + self.jobs[j].threads as usize;
            // A paused job runs nowhere (live: its program is stopped).
            if self.threads[threads].iter().any(|th| live(th) && th.paused) {
                continue;
            }
            let memory = || handed_back.then(|| self.memory_kb(j)).flatten();
            if let Some(d) = f
                .rule
                .due_with(j, on, memory, self.now_ns, true)
                .filter(|_| handed_back)
            {
                f.rule.rest(j, self.now_ns);
                due.push((j, d));
            }
        }
        self.follower = Some(f);
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
