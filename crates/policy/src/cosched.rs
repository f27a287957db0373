//! `cosched:fair`: gang time-slicing for batches with more threads than
//! CPUs. Each period the programs that have had the least CPU run, as many
//! as fit in the slots (threads <= CPUs by default); the rest pause. Every
//! program advances in turn, and never more run at once than the machine
//! holds. It knows nothing of bandwidth or NUMA: it is the plain
//! co-scheduler that S1's bandwidth-aware choice of co-runners refines.

use std::collections::BTreeMap;

use rustc_hash::{FxHashMap as HashMap, FxHashSet};

use herd_topo::CpuSet;

use crate::param::{Accepts, Entry, Param, Range, Value};
use crate::{JobId, Plan, Policy, TaskId, TaskView, View};

/// Registry entry: `cosched:fair`.
pub(crate) const COSCHED_FAIR: Entry = Entry {
    name: "cosched:fair",
    about: "time-slice programs: the least-served run while their threads fit the CPUs, the rest pause",
    params: &[Param {
        key: "slots",
        default: Value::Word("cpus"),
        accepts: Accepts::Number {
            range: Range::whole(1, u64::MAX),
            words: &["cpus"],
        },
        about: "how many threads may run at once (default: one per CPU)",
    }],
    build: |a| Box::new(CoschedFair::new(a.number("slots").map(|n| n as usize))),
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
    received_ns: HashMap<JobId, u64>,
    slots: HashMap<TaskId, Slot>,
}

impl Turns {
    /// Adds the last period's CPU time; returns each present job's thread
    /// count, in job order (BTreeMap: deterministic).
    pub(crate) fn account(&mut self, tasks: &[TaskView]) -> BTreeMap<JobId, usize> {
        let mut threads = BTreeMap::new();
        for t in tasks {
            *self.received_ns.entry(t.job).or_insert(0) += t.obs.cpu_time_ns;
            *threads.entry(t.job).or_insert(0) += 1;
        }
        threads
    }

    /// The present jobs, least-served first (ties: job order).
    pub(crate) fn least_served(&self, threads: &BTreeMap<JobId, usize>) -> Vec<JobId> {
        let mut order: Vec<JobId> = threads.keys().copied().collect();
        order.sort_by_key(|j| (self.received_ns.get(j).copied().unwrap_or(0), *j));
        order
    }

    /// Runs the tasks of jobs `admitted` says yes to and pauses the rest;
    /// the plan names only tasks whose place changes. With `pin`, each
    /// running task gets a CPU of its own (a task that keeps running keeps
    /// its CPU; a resumed one takes a free one), because a resumed task
    /// the kernel stacks on a busy CPU waits for the next load balance,
    /// a loss every slice; without, running tasks go anywhere.
    pub(crate) fn apply(
        &mut self,
        view: &View<'_>,
        admitted: impl Fn(JobId) -> bool,
        pin: bool,
        run_why: &'static str,
        pause_why: &'static str,
    ) -> Plan {
        let tasks = &view.snapshot.tasks;
        let mut held: FxHashSet<u32> = FxHashSet::default();
        if pin {
            for t in tasks {
                if admitted(t.job)
                    && let Some(Slot::Cpu(c)) = self.slots.get(&t.id)
                {
                    held.insert(*c);
                }
            }
        }
        let mut free = view
            .machine
            .cpus()
            .iter()
            .map(|c| c.os)
            .filter(|c| !held.contains(c));
        let mut plan = Plan::default();
        for t in tasks {
            let old = self.slots.get(&t.id).copied();
            let new = if !admitted(t.job) {
                Slot::Paused
            } else if !pin {
                Slot::Any
            } else {
                match old {
                    Some(Slot::Cpu(c)) => Slot::Cpu(c),
                    _ => free.next().map_or(Slot::Any, Slot::Cpu),
                }
            };
            if old == Some(new) {
                continue;
            }
            self.slots.insert(t.id, new);
            match new {
                Slot::Paused => plan.pause(t.id, pause_why),
                Slot::Cpu(c) => plan.run(t.id, CpuSet::single(c), run_why),
                Slot::Any => plan.run(t.id, view.machine.all_cpus().clone(), run_why),
            }
        }
        // Forget tasks that left, so the map does not grow without bound.
        if self.slots.len() > 2 * tasks.len() + 64 {
            let present: FxHashSet<TaskId> = tasks.iter().map(|t| t.id).collect();
            self.slots.retain(|id, _| present.contains(id));
        }
        plan
    }
}

/// The jobs of `order` that fit `capacity` threads, taken in order; the
/// first always runs, even if it alone is wider than the machine.
pub(crate) fn admit(
    order: impl IntoIterator<Item = JobId>,
    threads: &BTreeMap<JobId, usize>,
    capacity: usize,
) -> FxHashSet<JobId> {
    let mut admitted = FxHashSet::default();
    let mut used = 0;
    for j in order {
        if admitted.is_empty() || used + threads[&j] <= capacity {
            used += threads[&j];
            admitted.insert(j);
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
    fn name(&self) -> String {
        match self.slots {
            Some(s) => format!("cosched:fair:slots={s}"),
            None => "cosched:fair".into(),
        }
    }

    fn decide(&mut self, view: &View<'_>) -> Plan {
        let threads = self.turns.account(&view.snapshot.tasks);
        let capacity = self.slots.unwrap_or(view.machine.cpus().len()).max(1);
        let admitted = admit(self.turns.least_served(&threads), &threads, capacity);
        self.turns.apply(
            view,
            |j| admitted.contains(&j),
            true,
            "cosched: among the least-served programs that fit the CPUs",
            "cosched: waits its turn; the CPUs are full",
        )
    }
}
