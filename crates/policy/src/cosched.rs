//! `cosched:fair`: gang time-slicing for batches with more threads than
//! CPUs. Each period the programs that have had the least CPU run, as many
//! as fit in the slots (threads <= CPUs by default); the rest pause. Every
//! program advances in turn, and never more run at once than the machine
//! holds. It knows nothing of bandwidth or NUMA: it is the plain
//! co-scheduler that S1's bandwidth-aware choice of co-runners refines.

use std::collections::BTreeMap;

use rustc_hash::{FxHashMap as HashMap, FxHashSet};

use crate::{JobId, Plan, Policy, TaskId, View};

/// See the module docs.
#[derive(Debug, Default)]
pub struct CoschedFair {
    slots: Option<usize>,
    received_ns: HashMap<JobId, u64>,
    running: HashMap<TaskId, bool>,
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
        let tasks = &view.snapshot.tasks;
        // Threads per job, in job order (BTreeMap: deterministic).
        let mut threads: BTreeMap<JobId, usize> = BTreeMap::new();
        for t in tasks {
            *self.received_ns.entry(t.job).or_insert(0) += t.obs.cpu_time_ns;
            *threads.entry(t.job).or_insert(0) += 1;
        }
        let capacity = self.slots.unwrap_or(view.machine.cpus().len()).max(1);
        let mut order: Vec<JobId> = threads.keys().copied().collect();
        order.sort_by_key(|j| (self.received_ns.get(j).copied().unwrap_or(0), *j));
        let mut admitted = Vec::new();
        let mut used = 0;
        for j in order {
            // The least-served program always runs, even if it alone is wider than the machine.
            if admitted.is_empty() || used + threads[&j] <= capacity {
                used += threads[&j];
                admitted.push(j);
            }
        }
        let mut plan = Plan::default();
        let all = view.machine.all_cpus();
        for t in tasks {
            let run = admitted.contains(&t.job);
            if self.running.get(&t.id) == Some(&run) {
                continue;
            }
            self.running.insert(t.id, run);
            if run {
                plan.run(
                    t.id,
                    all.clone(),
                    "cosched: among the least-served programs that fit the CPUs",
                );
            } else {
                plan.pause(t.id, "cosched: waits its turn; the CPUs are full");
            }
        }
        // Forget tasks that left, so the map does not grow without bound.
        if self.running.len() > 2 * tasks.len() + 64 {
            let present: FxHashSet<TaskId> = tasks.iter().map(|t| t.id).collect();
            self.running.retain(|id, _| present.contains(id));
        }
        plan
    }
}
