//! The guard handing the workload back to the kernel for a span: the
//! span's first turn ([`Guard::release`]) and its second
//! ([`Guard::widen`]). Apart from `guard` for its length alone.

use herd_policy::{JobId, Lane, Plan, TaskId, TaskState, View};
use herd_topo::CpuSet;
use rustc_hash::FxHashMap as HashMap;

use super::Guard;

impl Guard {
    /// Lets go of every present task the policy placed, paused or put in a
    /// lane: each may run on every CPU (every CPU the user allowed, see
    /// [`herd_policy::Policy::allowed_cpus`]), in the fair lane. On a machine with
    /// several NUMA nodes, a busy task first goes to one node's CPUs for
    /// the span's first turn:
    /// - the node that holds most of its job's memory, as Linux's NUMA
    ///   balancing (on by default) steers a task to its memory, as far as
    ///   the node's share of the load allows (such a task stays there for
    ///   the span). A probe cannot move memory back, so without this a
    ///   policy that stranded a job's memory would be compared with a
    ///   kernel that inherits the stranding (S3's ND set on NUMA: 1.2x
    ///   behind Linux while every probe read even);
    /// - else the least loaded node for its CPUs, which spreads each job
    ///   over the nodes as Linux spreads a program's threads when they
    ///   start on an idle machine; the next turn lets it go
    ///   ([`Guard::widen`]). Only let go, a task the policy packed onto
    ///   one node stays there when every CPU is busy (nothing is
    ///   imbalanced), and the probe compares the policy with itself
    ///   (`s2-node`'s static:compact read 0.996-1.000 at 1.03x Linux's
    ///   time).
    pub(super) fn release(&mut self, view: &View<'_>, allowed: Option<CpuSet>) -> Plan {
        let mut plan = Plan::default();
        let m = view.machine;
        let restricted = allowed.is_some();
        let all = &allowed.unwrap_or_else(|| m.all_cpus().clone());
        let snap = view.snapshot;
        // Every placed task gets a placement: sized once (see `restore`).
        plan.tasks.reserve(self.intended.len().min(snap.tasks.len()));
        // Within a budget the user set, Linux balances over its CPUs alone.
        let nodes: Vec<(u32, &CpuSet)> = m
            .numa_nodes()
            .iter()
            .filter(|n| !n.cpus.is_empty())
            .map(|n| (n.os, &n.cpus))
            .collect();
        let several_nodes = nodes.len() > 1 && !restricted;
        let home_of: HashMap<JobId, u32> = if several_nodes {
            snap.jobs
                .iter()
                .filter_map(|j| Some((j.id, j.home_node()?)))
                .collect()
        } else {
            HashMap::default()
        };
        // Busy: runnable now or a tenth of the last period on a CPU. A
        // thread that sleeps (a program's waiting main thread, a helper)
        // takes no share of a node and is let go at once: it wakes where
        // the kernel puts it. Counted by the instant's state, a sleeping
        // main thread took its node's one slot near the memory and sent a
        // busy worker off it (the 2-socket guest's static:compact trace).
        let busy_now = self.was_busy.of(snap);
        let busy_at = |i: usize| {
            busy_now
                .get(i)
                .copied()
                .unwrap_or(snap.tasks[i].state != TaskState::Blocked)
        };
        let busy = (0..snap.tasks.len())
            .filter(|&i| busy_at(i) && home_of.contains_key(&snap.tasks[i].job))
            .count();
        let total_cpus = all.len().max(1);
        // Each node's CPUs counted once, not per task (a thousand tasks'
        // counts were a third of a release's cost).
        let node_cpus: Vec<usize> = nodes.iter().map(|(_, cpus)| cpus.len()).collect();
        // Busy tasks on each node (by index into `nodes`): those the
        // policy never placed where they run now, then as placed here.
        let mut load = vec![0usize; nodes.len()];
        let node_at = |cpu: u32| nodes.iter().position(|(_, cpus)| cpus.contains(cpu));
        if several_nodes {
            for (i, t) in snap.tasks.iter().enumerate() {
                if busy_at(i)
                    && !self.intended.contains_key(&t.id)
                    && let Some(k) = t.cpu.and_then(node_at)
                {
                    load[k] += 1;
                }
            }
        }
        // Linux balances load before locality: a node takes as many of the
        // tasks whose memory it holds as its share of the machine's busy
        // tasks (by its CPUs); the rest may run anywhere. (S2's node: a job
        // compact on one of two nodes stayed there at 1.03x Linux's time
        // while a node could take as many tasks as it had CPUs.)
        // Per node (by index into `nodes`): the tasks placed near their
        // memory there, and how many it may take.
        let mut taken = vec![0usize; nodes.len()];
        let quota: Vec<usize> = node_cpus
            .iter()
            .map(|&n| (busy * n).div_ceil(total_cpus))
            .collect();
        let mut unplaced = Vec::new();
        // Jobs with a busy task near their memory, and with one sent away.
        let mut near_jobs: Vec<JobId> = Vec::new();
        self.sent_away.clear();
        for (i, t) in snap.tasks.iter().enumerate() {
            if self.intended.contains_key(&t.id) {
                let near = home_of.get(&t.job).filter(|_| busy_at(i)).and_then(|&h| {
                    let k = nodes.iter().position(|(os, _)| *os == h)?;
                    (taken[k] < quota[k]).then(|| {
                        taken[k] += 1;
                        load[k] += 1;
                        nodes[k].1
                    })
                });
                match near {
                    Some(cpus) => {
                        near_jobs.push(t.job);
                        plan.run(t.id, cpus.clone(), "guard: the kernel places it, near its memory")
                    }
                    None if several_nodes && busy_at(i) => {
                        if home_of.contains_key(&t.job) {
                            self.sent_away.push(t.job);
                        }
                        unplaced.push(t.id);
                    }
                    None => plan.run(t.id, all.clone(), "guard: the kernel places it"),
                }
            }
            if self.lanes.get(&t.id).is_some_and(|l| *l != Lane::Fair) {
                plan.lane(t.id, Lane::Fair);
            }
        }
        self.sent_away.sort_unstable();
        self.sent_away.dedup();
        near_jobs.sort_unstable();
        self.sent_away.retain(|j| near_jobs.binary_search(j).is_err());
        for id in unplaced {
            // The least share (load + 1) / CPUs, compared in whole numbers:
            // the same order as the quotients' (two different fractions of
            // counts below 2^26 differ by far more than a float's rounding),
            // without a division per node per task (44% of a release's
            // instructions at a thousand tasks on four nodes).
            let less = |a: usize, b: usize| {
                ((load[a] + 1) * node_cpus[b])
                    .cmp(&((load[b] + 1) * node_cpus[a]))
                    .then(a.cmp(&b))
            };
            let i = (0..nodes.len())
                .min_by(|&a, &b| less(a, b))
                .expect("several nodes");
            load[i] += 1;
            plan.run(
                id,
                nodes[i].1.clone(),
                "guard: the kernel starts it on the least loaded node",
            );
            self.spread.push(id);
        }
        plan
    }

    /// The kernel span's second turn: lets go of the tasks [`Guard::release`]
    /// started on one node.
    pub(super) fn widen(&mut self, view: &View<'_>, allowed: Option<CpuSet>) -> Plan {
        let mut plan = Plan::default();
        if self.spread.is_empty() {
            return plan;
        }
        let all = allowed.unwrap_or_else(|| view.machine.all_cpus().clone());
        let spread: rustc_hash::FxHashSet<TaskId> = std::mem::take(&mut self.spread).into_iter().collect();
        plan.tasks.reserve(spread.len());
        for t in view.snapshot.tasks.iter().filter(|t| spread.contains(&t.id)) {
            plan.run(t.id, all.clone(), "guard: the kernel places it");
        }
        plan
    }
}
