//! Scheduling on asymmetric cores (S3: Chen, Qi, Lin, Li).
//!
//! `amp:comprehensive` keeps one queue per core kind, fastest first. A task's
//! integrated behaviour IB (S3's monitor, `herd_profile::behaviour`: a
//! weighted mix of its whole-run and recent LLC miss rates) says how
//! memory-bound it is: low IB wants a fast core. Two rules hold between
//! every pair of adjacent kinds k (faster) and k + 1:
//! 1. every task on k has an IB no higher than any task on k + 1;
//! 2. tasks per core on k stay within [(1 - beta), 1 / (1 - beta)] times
//!    those on k + 1 (beta = 0: balanced; larger beta tolerates imbalance).
//!
//! A task is rescheduled only when its monitor reports a new stable phase
//! (or when it starts): it joins the kind whose IB range holds its IB, the
//! less loaded of two neighbours when it falls between them, and then the
//! queue heads move across the boundaries until rule 2 holds again. With two
//! kinds this is S3's procedure exactly; more kinds form a chain of such
//! pairs, ordered by capacity. Within a kind the kernel balances (S3 leaves
//! same-kind balancing to the OS): a task is confined to its kind's CPUs.
//!
//! `amp:ff` (the FF baseline S3 compares with): fast cores first, load in
//! proportion to capacity, no behaviour; a task keeps the kind and NUMA
//! node it started on (FF limits cross-node moves).
//!
//! Without LLC counters the monitor has nothing to sample: IB stays
//! alpha x GB with GB from the profile store's whole-run miss rate, else
//! from the memory hint (high 0.6, medium 0.3, low 0.05, none 0.3), and the
//! note says so.

use std::collections::BTreeMap;

use herd_profile::behaviour::{Event, Monitor, MonitorParams};
use herd_topo::CpuSet;

use crate::amp_queues::Queues;
use crate::param::{Accepts, Args, Entry, Param, Range, Value};
use crate::{Level, Plan, Policy, TaskId, View};

/// `interval_ms`, with what it sets.
pub(crate) const fn interval_ms(about: &'static str) -> Param {
    Param {
        key: "interval_ms",
        default: Value::Number(200.0),
        accepts: Accepts::Number {
            range: Range::POSITIVE,
            words: &[],
        },
        about,
    }
}

/// A number parameter in `range`.
const fn number(key: &'static str, default: f64, range: Range, about: &'static str) -> Param {
    Param {
        key,
        default: Value::Number(default),
        accepts: Accepts::Number { range, words: &[] },
        about,
    }
}

/// Registry entry: `amp:comprehensive`.
pub(crate) const AMP_COMPREHENSIVE: Entry = Entry {
    name: "amp:comprehensive",
    about: "S3: tasks on core kinds by integrated LLC-miss behaviour (IB), moved only on stable phase changes, load within beta",
    params: &[
        Param {
            key: "preset",
            default: Value::Word("none"),
            accepts: Accepts::Words(&["none", "uma", "numa1", "numa2"]),
            about: "S3's platforms: uma (alpha 0.3, beta 0), numa1 (0.8, 0.3), numa2 (0.6, 0.3); other keys override it",
        },
        number(
            "alpha",
            0.3,
            Range::UNIT,
            "weight of the whole-run miss rate GB in IB (1: history only, fewer migrations)",
        ),
        number(
            "beta",
            0.0,
            Range::UNIT_OPEN,
            "tolerated load imbalance between adjacent kinds, in [0, 1)",
        ),
        interval_ms("how often each task's LLC miss rate is sampled"),
        number(
            "threshold1",
            0.12,
            Range::POSITIVE,
            "relative change of LB that starts a new phase",
        ),
        number(
            "threshold2",
            0.05,
            Range::POSITIVE,
            "relative change under which a new phase is stable (two intervals)",
        ),
        Param {
            key: "keep_memory",
            default: Value::Number(1.0),
            accepts: Accepts::Number {
                range: Range::whole(0, 1),
                words: &[],
            },
            about: "1: a task whose memory lies near its cores moves away only when its IB differs from the task it would displace by more than threshold1, and rule 2 moves a task whose memory stays near first (herd's); 0: S3's rules as published",
        },
    ],
    build: build_comprehensive,
    check: None,
};

/// `amp:comprehensive` from its arguments: a preset sets alpha and beta
/// unless they are given too, and names the policy only when nothing
/// overrides it.
fn build_comprehensive(a: &Args) -> Box<dyn Policy> {
    let preset = PRESETS.iter().find(|(n, _, _)| Some(*n) == a.word("preset")).copied();
    let given_or = |key: &str, preset_value: Option<f64>| match preset_value {
        Some(v) if !a.given(key) => v,
        _ => a.real(key),
    };
    let monitor = MonitorParams {
        alpha: given_or("alpha", preset.map(|p| p.1)),
        threshold1: a.real("threshold1"),
        threshold2: a.real("threshold2"),
        ..Default::default()
    };
    let beta = given_or("beta", preset.map(|p| p.2));
    let named = preset.filter(|(_, pa, pb)| monitor.alpha == *pa && beta == *pb && a.given_count() == 1);
    let comprehensive = Comprehensive::new(monitor, beta, a.real("interval_ms"), named.map(|p| p.0));
    Box::new(comprehensive.keeping_memory(a.real("keep_memory") == 1.0))
}

/// Registry entry: `amp:ff`.
pub(crate) const AMP_FF: Entry = Entry {
    name: "amp:ff",
    about: "fast cores first, tasks per kind in proportion to its capacity (S3's FF baseline)",
    params: &[],
    build: |_| Box::new(FastFirst::default()),
    check: None,
};

/// S3's presets for its three platforms: (alpha, beta).
pub const PRESETS: [(&str, f64, f64); 3] = [("uma", 0.3, 0.0), ("numa1", 0.8, 0.3), ("numa2", 0.6, 0.3)];

/// Per-task state.
#[derive(Debug, Clone)]
struct TaskState {
    monitor: Monitor,
    kind: Option<usize>,
    /// LLC references and misses since the last interval boundary.
    refs: u64,
    misses: u64,
    interval_start_ns: u64,
}

/// `amp:comprehensive`.
#[derive(Debug)]
pub struct Comprehensive {
    params: MonitorParams,
    beta: f64,
    interval_ns: u64,
    preset: Option<&'static str>,
    tasks: BTreeMap<TaskId, TaskState>,
    noted_no_counters: bool,
    kinds: KindCache,
    domains: NodeDomains,
    /// Whether moves weigh the memory they leave behind ([`Strands`]).
    keep_memory: bool,
    seen: crate::view::SeenTasks,
}

impl Comprehensive {
    /// S3's algorithm with these parameters; `preset` only names them.
    pub fn new(params: MonitorParams, beta: f64, interval_ms: f64, preset: Option<&'static str>) -> Self {
        assert!((0.0..1.0).contains(&beta), "beta in [0, 1)");
        Comprehensive {
            params,
            beta,
            interval_ns: (interval_ms * 1e6) as u64,
            preset,
            tasks: BTreeMap::new(),
            noted_no_counters: false,
            kinds: KindCache::default(),
            domains: NodeDomains::default(),
            keep_memory: false,
            seen: crate::view::SeenTasks::default(),
        }
    }

    /// With `on`, a move weighs the memory it leaves behind ([`Strands`]);
    /// without, S3's rules as published.
    pub fn keeping_memory(mut self, on: bool) -> Self {
        self.keep_memory = on;
        self
    }
}

/// GB (a whole-run LLC miss rate) for a program with no history, from its
/// job's memory hint; the HASS baselines use it as their signature too.
pub(crate) fn hint_gb(h: Option<Level>) -> f64 {
    match h {
        Some(Level::High) => 0.6,
        Some(Level::Medium) | None => 0.3,
        Some(Level::Low) => 0.05,
    }
}

/// Core kinds fastest first, as (kind index, CPUs, CPU count).
pub(crate) type Kinds = std::sync::Arc<[(usize, CpuSet, f64)]>;

/// [`Kinds`] of the machine, worked out at the first decision: a policy
/// object lives on one machine, and decisions come every period.
#[derive(Debug, Default)]
pub(crate) struct KindCache(Option<Kinds>);

impl KindCache {
    pub(crate) fn get(&mut self, view: &View<'_>) -> Kinds {
        self.0
            .get_or_insert_with(|| {
                let mut k: Vec<(usize, CpuSet, f64)> = view
                    .machine
                    .kinds()
                    .iter()
                    .enumerate()
                    .filter(|(_, k)| !k.cpus.is_empty())
                    .map(|(i, k)| (i, k.cpus.clone(), k.cpus.len() as f64))
                    .collect();
                // Kinds are stored weakest first (a Machine invariant).
                k.reverse();
                k.into()
            })
            .clone()
    }
}

/// What every asymmetric-core policy answers to
/// [`Policy::reads_counters`]: the counters, on a machine of more than one
/// core kind; on any other it places nothing and reads nothing.
pub(crate) fn reads_counters_on(machine: &herd_topo::Machine) -> bool {
    machine.kinds().len() >= 2
}

impl Policy for Comprehensive {
    fn reads_counters(&self, machine: &herd_topo::Machine) -> bool {
        crate::amp::reads_counters_on(machine)
    }
    fn name(&self) -> String {
        if let Some(p) = self.preset.filter(|_| self.keep_memory) {
            return format!("amp:comprehensive:preset={p}");
        }
        let d = MonitorParams::default();
        let mut p = Vec::new();
        if self.params.alpha != d.alpha {
            p.push(format!("alpha={}", self.params.alpha));
        }
        if self.beta != 0.0 {
            p.push(format!("beta={}", self.beta));
        }
        if self.interval_ns != 200_000_000 {
            p.push(format!("interval_ms={}", self.interval_ns as f64 / 1e6));
        }
        if self.params.threshold1 != d.threshold1 {
            p.push(format!("threshold1={}", self.params.threshold1));
        }
        if self.params.threshold2 != d.threshold2 {
            p.push(format!("threshold2={}", self.params.threshold2));
        }
        if !self.keep_memory {
            p.push("keep_memory=0".into());
        }
        if p.is_empty() {
            "amp:comprehensive".into()
        } else {
            format!("amp:comprehensive:{}", p.join(","))
        }
    }

    fn decide(&mut self, view: &View<'_>) -> Plan {
        let mut plan = Plan::default();
        let kinds = self.kinds.get(view);
        if kinds.len() < 2 {
            if !self.noted_no_counters {
                self.noted_no_counters = true;
                plan.note = Some(
                    "amp:comprehensive: one core kind: nothing to match; the kernel places every task".into(),
                );
            }
            return plan;
        }
        let now = view.now_ns();
        // A task that left changes the loads: rule 2 is checked again. The
        // same tasks as last time (most periods): none left.
        let mut left = false;
        if self.seen.changed(view.snapshot) {
            let present: rustc_hash::FxHashSet<TaskId> = view.snapshot.tasks.iter().map(|t| t.id).collect();
            let before = self.tasks.len();
            self.tasks.retain(|id, _| present.contains(id));
            left = self.tasks.len() < before;
        }
        let mut reschedule: Vec<TaskId> = Vec::new();
        let mut counters = false;
        for t in &view.snapshot.tasks {
            // A task asleep when first seen takes no kind's share until it
            // asks for a CPU (`working::asks_for_cpu`).
            if !self.tasks.contains_key(&t.id) && !crate::working::asks_for_cpu(view.snapshot, t) {
                continue;
            }
            let st = self.tasks.entry(t.id).or_insert_with(|| {
                let job = view.snapshot.jobs.iter().find(|j| j.id == t.job);
                let history = job
                    .and_then(|j| view.estimates.get(&j.program))
                    .and_then(|e| e.llc_miss_rate);
                reschedule.push(t.id);
                TaskState {
                    monitor: Monitor::new(self.params, history, hint_gb(job.and_then(|j| j.memory_hint))),
                    kind: None,
                    refs: 0,
                    misses: 0,
                    interval_start_ns: now,
                }
            });
            if t.obs.migrations > 0 {
                st.monitor.migrated();
            }
            if let (Some(r), Some(m)) = (t.obs.llc_refs, t.obs.llc_misses) {
                counters = true;
                st.refs += r;
                st.misses += m;
            }
            if now.saturating_sub(st.interval_start_ns) >= self.interval_ns {
                st.interval_start_ns = now;
                if st.refs > 0 {
                    let rate = st.misses as f64 / st.refs as f64;
                    if st.monitor.sample(rate) == Event::Stable && st.kind.is_some() {
                        reschedule.push(t.id);
                    }
                }
                st.refs = 0;
                st.misses = 0;
            }
        }
        if reschedule.is_empty() && !left {
            return plan;
        }
        let old: BTreeMap<TaskId, Option<usize>> = self.tasks.iter().map(|(id, s)| (*id, s.kind)).collect();
        let strands = if self.keep_memory {
            Strands::new(view, &kinds)
        } else {
            Strands::default()
        };
        let mut queues = Queues::of(
            kinds.len(),
            self.tasks
                .iter()
                .filter_map(|(id, st)| Some((st.kind?, st.monitor.ib(), *id))),
        );
        for id in reschedule {
            self.insert(id, &kinds, &strands, &mut queues);
        }
        self.rebalance(&kinds, &strands, &mut queues);
        self.domains.refresh(&kinds, view);
        let home = NodeDomains::task_homes(view);
        for (id, st) in &self.tasks {
            let k = st.kind.expect("every task is in a queue after rebalance");
            if old.get(id).copied().flatten() != Some(k) {
                plan.run(
                    *id,
                    self.domains.place(*id, Some(k), home.get(id).copied()).clone(),
                    "amp: integrated behaviour matches this core kind",
                );
            }
        }
        if !counters && !self.noted_no_counters {
            self.noted_no_counters = true;
            plan.note = Some(
                "amp:comprehensive: no LLC counters: IB = alpha x GB from the profile store or the memory hint \
                 (high 0.6, medium 0.3, low 0.05, none 0.3); phases are not tracked"
                    .into(),
            );
        }
        plan
    }
}

impl Comprehensive {
    /// S3's reschedule(t): the kind whose IB range holds t's IB, the less
    /// loaded neighbour when it falls between two ranges. A task whose
    /// memory sits by its present kind's cores stays there unless the move
    /// is worth the memory it would leave behind ([`Strands`]).
    fn insert(&mut self, id: TaskId, kinds: &[(usize, CpuSet, f64)], strands: &Strands, q: &mut Queues) {
        let Some(st) = self.tasks.get_mut(&id) else {
            return;
        };
        let ib = st.monitor.ib();
        let current = st.kind.take();
        if let Some(c) = current {
            q.remove(c, ib, id);
        }
        let load = |k: usize| q.len(k) as f64 / kinds[k].2;
        let last = kinds.len() - 1;
        let mut target = last;
        for k in 0..last {
            if ib < q.max_ib(k) {
                target = k; // region a of the pair (k, k + 1)
                break;
            }
            if ib <= q.min_ib(k + 1) {
                // Region b: between the two kinds' ranges (or one is empty).
                target = if load(k) > load(k + 1) { k + 1 } else { k };
                break;
            }
        }
        if let Some(cur) = current.filter(|&c| c != target && strands.moving(id, c, target)) {
            // The IB the task would displace: the highest of a faster
            // kind, the lowest of a slower one (none: nobody to displace).
            let rival = if target < cur { q.max_ib(target) } else { q.min_ib(target) };
            let gap = if rival.is_finite() {
                (ib - rival).abs() / ib.max(rival).max(f64::MIN_POSITIVE)
            } else {
                f64::INFINITY
            };
            // A difference below what S3 counts as a phase change does not
            // pay for memory made remote for the rest of the run (S3's ND
            // set on NUMA: identical programs swapped packages on every
            // phase change, 1.17-1.22x linux).
            if gap < self.params.threshold1 {
                target = cur;
            }
        }
        st.kind = Some(target);
        q.add(target, ib, id);
    }

    /// Rule 2 between adjacent kinds: move queue heads across until the
    /// loads per core are within beta. Each move strictly narrows one
    /// pair's imbalance; the sweep is bounded by tasks x kinds. Of the
    /// tasks in line to move, the first whose memory stays near goes
    /// ([`Strands`]; a restarted run has none placed yet), else the head.
    fn rebalance(&mut self, kinds: &[(usize, CpuSet, f64)], strands: &Strands, q: &mut Queues) {
        let bound = (self.tasks.len() + 1) * kinds.len() * 2;
        for _ in 0..bound {
            let mut moved = None;
            for k in 0..kinds.len() - 1 {
                let (tf, f) = (q.len(k) as f64, kinds[k].2);
                let (ts, s) = (q.len(k + 1) as f64, kinds[k + 1].2);
                if tf / f > ts / ((1.0 - self.beta) * s)
                    && (tf - 1.0) / f >= (ts + 1.0) / s * (1.0 - self.beta)
                {
                    // The faster kind is overloaded: its highest-IB task goes down.
                    if let Some(id) = q.head(k, true, |id| strands.moving(id, k, k + 1)) {
                        moved = Some((id, k, k + 1));
                        break;
                    }
                } else if tf / f < (1.0 - self.beta) * ts / s
                    && (tf + 1.0) / f <= (ts - 1.0) / s / (1.0 - self.beta)
                {
                    // The faster kind is underused: the slower kind's lowest IB comes up.
                    if let Some(id) = q.head(k + 1, false, |id| strands.moving(id, k + 1, k)) {
                        moved = Some((id, k + 1, k));
                        break;
                    }
                }
            }
            let Some((id, from, to)) = moved else {
                return;
            };
            let st = self.tasks.get_mut(&id).expect("queued");
            let ib = st.monitor.ib();
            q.remove(from, ib, id);
            q.add(to, ib, id);
            st.kind = Some(to);
        }
    }
}

/// Which moves between kinds would leave a task's memory behind: its job's
/// memory (as `numa_maps` shows it live, or the simulator places it) lies
/// mostly on one NUMA node, near the cores of the kind it is on and not
/// near those of the kind it would go to. Without memory placement (one
/// node, memory that follows the thread) no move strands anything.
#[derive(Default)]
pub(crate) struct Strands {
    /// Each task's job's home node (OS index), where it has one.
    home: rustc_hash::FxHashMap<TaskId, u32>,
    /// The OS nodes local to each kind's cores.
    near: Vec<Vec<u32>>,
}

impl Strands {
    fn new(view: &View<'_>, kinds: &[(usize, CpuSet, f64)]) -> Strands {
        let m = view.machine;
        let near = kinds
            .iter()
            .map(|(_, cpus, _)| {
                let mut nodes: Vec<u32> =
                    cpus.iter().filter_map(|c| m.cpu(c)).map(|c| m.numa_nodes()[c.numa].os).collect();
                nodes.sort_unstable();
                nodes.dedup();
                nodes
            })
            .collect();
        Strands {
            home: NodeDomains::task_homes(view),
            near,
        }
    }

    /// Whether moving `task` from kind `from` to kind `to` takes it away
    /// from its memory.
    fn moving(&self, task: TaskId, from: usize, to: usize) -> bool {
        self.home
            .get(&task)
            .is_some_and(|n| self.near[from].contains(n) && !self.near[to].contains(n))
    }
}

/// The CPUs of each kind split by NUMA node ("domains"), and the domain
/// each task is confined to. Policies that leave placement within a kind
/// to the kernel let it trade tasks between the kind's nodes for fairness
/// when a kind spans nodes (S3's NUMA machines: one core per package),
/// each trade leaving the task's memory behind; confined to a domain, a
/// task moves between nodes only when its policy moves it.
#[derive(Debug, Default)]
pub(crate) struct NodeDomains {
    /// (CPUs, weight = CPUs x capacity, index into the policy's kinds, OS
    /// node), fastest kind first; worked out at the first decision.
    sets: Vec<(CpuSet, f64, usize, u32)>,
    of: rustc_hash::FxHashMap<TaskId, usize>,
    /// Tasks per domain: `of` counted, kept up to date because `place`
    /// runs once per placed task (a recount each time is O(tasks^2) a
    /// decision).
    count: Vec<f64>,
}

impl NodeDomains {
    /// Forgets tasks that are gone; works out the domains once.
    pub(crate) fn refresh(&mut self, kinds: &[(usize, CpuSet, f64)], view: &View<'_>) {
        if self.sets.is_empty() {
            let m = view.machine;
            for (k, (i, cpus, _)) in kinds.iter().enumerate() {
                let mut by_node: BTreeMap<u32, CpuSet> = BTreeMap::new();
                for c in cpus.iter() {
                    let node = m.cpu(c).map_or(0, |c| m.numa_nodes()[c.numa].os);
                    by_node.entry(node).or_default().insert(c);
                }
                for (node, set) in by_node {
                    let w = set.len() as f64 * m.kinds()[*i].capacity;
                    self.sets.push((set, w, k, node));
                }
            }
            self.count = vec![0.0; self.sets.len()];
        }
        let present: rustc_hash::FxHashSet<TaskId> = view.snapshot.tasks.iter().map(|t| t.id).collect();
        let count = &mut self.count;
        self.of.retain(|id, d| {
            let keep = present.contains(id);
            if !keep {
                count[*d] -= 1.0;
            }
            keep
        });
    }

    /// Each task's home node (its job's memory's node, OS index), where it
    /// has one.
    pub(crate) fn task_homes(view: &View<'_>) -> rustc_hash::FxHashMap<TaskId, u32> {
        let job_home: rustc_hash::FxHashMap<u32, u32> = view
            .snapshot
            .jobs
            .iter()
            .filter_map(|j| Some((j.id, j.home_node()?)))
            .collect();
        view.snapshot
            .tasks
            .iter()
            .filter_map(|t| Some((t.id, *job_home.get(&t.job)?)))
            .collect()
    }

    /// Whether the task has a domain already.
    pub(crate) fn has(&self, task: TaskId) -> bool {
        self.of.contains_key(&task)
    }

    /// Confines `task` to a domain of kind `kind` (any kind for `None`):
    /// the one it has if that is of the kind; else the one where its share
    /// of capacity is largest once it joins, on a tie the one on `home`
    /// (its memory's node), then the fastest. (Home first regardless of
    /// load piled tasks onto one node: S3 NUMA2 HD1 1.258x linux.)
    pub(crate) fn place(&mut self, task: TaskId, kind: Option<usize>, home: Option<u32>) -> &CpuSet {
        let fits = |d: usize| kind.is_none_or(|k| self.sets[d].2 == k);
        let d = match self.of.get(&task) {
            Some(&d) if fits(d) => d,
            _ => {
                let share = |d: usize| (self.count[d] + 1.0) / self.sets[d].1;
                let away = |d: usize| home.is_some_and(|n| self.sets[d].3 != n);
                let d = (0..self.sets.len())
                    .filter(|&d| fits(d))
                    .min_by(|&a, &b| {
                        share(a)
                            .total_cmp(&share(b))
                            .then(away(a).cmp(&away(b)))
                            .then(a.cmp(&b))
                    })
                    .expect("every kind has CPUs");
                if let Some(old) = self.of.insert(task, d) {
                    self.count[old] -= 1.0;
                }
                self.count[d] += 1.0;
                d
            }
        };
        &self.sets[d].0
    }
}

/// `amp:ff`: fast cores first, load proportional to capacity, no
/// cross-node moves.
#[derive(Debug, Default)]
pub struct FastFirst {
    domains: NodeDomains,
    kinds: KindCache,
}

impl Policy for FastFirst {
    fn reads_counters(&self, machine: &herd_topo::Machine) -> bool {
        crate::amp::reads_counters_on(machine)
    }
    fn name(&self) -> String {
        "amp:ff".into()
    }

    fn decide(&mut self, view: &View<'_>) -> Plan {
        let mut plan = Plan::default();
        let kinds = self.kinds.get(view);
        if kinds.len() < 2 {
            return plan;
        }
        self.domains.refresh(&kinds, view);
        for t in &view.snapshot.tasks {
            // Placed once; a task asleep when first seen takes no share of
            // a kind until it asks for a CPU (`working::asks_for_cpu`).
            if self.domains.has(t.id) || !crate::working::asks_for_cpu(view.snapshot, t) {
                continue;
            }
            // A task stays in the domain it starts in: FF limits
            // cross-node moves. Left to the kernel within a kind, tasks on
            // S3's NUMA1 ND set traded nodes 400 times a minute, each
            // leaving its memory behind (1.149x linux), and rounding each
            // kind's quota up gave the fast kind more than its share.
            let cpus = self.domains.place(t.id, None, None).clone();
            plan.run(
                t.id,
                cpus,
                "amp:ff: fastest kind with room in proportion to its capacity, on one NUMA node",
            );
        }
        plan
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{JobView, Obs, Snapshot, TaskState as State, TaskView};
    use herd_topo::Machine;

    fn snapshot(hints: &[Level], now_ns: u64) -> Snapshot {
        Snapshot {
            now_ns,
            period_ns: 50_000_000,
            tasks: (0..hints.len())
                .map(|i| TaskView {
                    id: i as u64 + 1,
                    job: i as u32,
                    rank: 0,
                    state: State::Runnable,
                    cpu: None,
                    obs: Obs::default(),
                    heartbeats: None,
                })
                .collect(),
            jobs: hints
                .iter()
                .enumerate()
                .map(|(i, h)| JobView {
                    id: i as u32,
                    name: format!("j{i}"),
                    program: format!("p{i}"),
                    arrival_ns: 0,
                    memory_hint: Some(*h),
                    memory_kb: None,
                    threads_declared: None,
                })
                .collect(),
            ..Snapshot::default()
        }
    }

    fn decide(p: &mut dyn Policy, m: &Machine, snap: &Snapshot) -> Plan {
        crate::testkit::decide_once(p, m, snap)
    }

    fn kind_of(m: &Machine, plan: &Plan, task: TaskId) -> Option<usize> {
        plan.tasks
            .iter()
            .find(|(t, _)| *t == task)
            .and_then(|(_, p)| match p {
                crate::Placement::Run { cpus, .. } => m.cpu(cpus.iter().next()?).map(|c| c.kind),
                crate::Placement::Pause { .. } => None,
            })
    }

    #[test]
    fn compute_bound_tasks_get_the_fast_cores_and_loads_stay_balanced() {
        let m = Machine::synthetic("package:1 core:2 capacity:0.5 kind:slow + core:2 capacity:1.0 kind:fast")
            .unwrap();
        let fast = m.kinds().len() - 1;
        let mut p = Comprehensive::new(MonitorParams::default(), 0.0, 200.0, None);
        let hints = [Level::High, Level::Low, Level::High, Level::Low];
        let plan = decide(&mut p, &m, &snapshot(&hints, 0));
        for (i, h) in hints.iter().enumerate() {
            let k = kind_of(&m, &plan, i as u64 + 1).expect("every task placed");
            assert_eq!(k == fast, *h == Level::Low, "task {i} ({h:?}) on kind {k}");
        }
        assert!(plan.note.as_deref().unwrap().contains("no LLC counters"));
        // Nothing changes: nothing moves.
        assert!(decide(&mut p, &m, &snapshot(&hints, 10_000_000)).tasks.is_empty());
        // Eight tasks, six memory-bound: beta = 0 keeps 4 and 4, so two
        // memory-bound tasks take fast cores, the least memory-bound first.
        let mut p = Comprehensive::new(MonitorParams::default(), 0.0, 200.0, None);
        let eight = [
            Level::High,
            Level::High,
            Level::High,
            Level::Medium,
            Level::High,
            Level::Low,
            Level::High,
            Level::Low,
        ];
        let plan = decide(&mut p, &m, &snapshot(&eight, 0));
        let on_fast: Vec<u64> = (1..=8).filter(|&t| kind_of(&m, &plan, t) == Some(fast)).collect();
        assert_eq!(on_fast.len(), 4, "{on_fast:?}");
        assert!(
            on_fast.contains(&4) && on_fast.contains(&6) && on_fast.contains(&8),
            "{on_fast:?}"
        );
    }

    #[test]
    fn beta_tolerates_imbalance_and_three_kinds_form_a_chain() {
        let m = Machine::synthetic(
            "package:1 core:2 capacity:0.4 kind:little + core:2 capacity:0.7 kind:mid + core:2 capacity:1.0 kind:big",
        )
        .unwrap();
        let mut p = Comprehensive::new(MonitorParams::default(), 0.0, 200.0, None);
        let hints = [
            Level::Low,
            Level::Medium,
            Level::High,
            Level::Low,
            Level::Medium,
            Level::High,
        ];
        let plan = decide(&mut p, &m, &snapshot(&hints, 0));
        let kinds: Vec<usize> = (1..=6).map(|t| kind_of(&m, &plan, t).unwrap()).collect();
        // Kinds are weakest first: low IB on the biggest, high on the littlest.
        assert_eq!(kinds, vec![2, 1, 0, 2, 1, 0]);
        // Two kinds; four compute-bound tasks, one medium, one memory-bound.
        // Equal IBs fall between the kinds' ranges and go to the less loaded
        // kind (S3's region b), so insertion leaves 2 fast and 4 slow, IBs in
        // order. beta = 0 then brings the lowest slow IB up (3 and 3); with
        // beta = 0.5, 1 task per fast core against 2 per slow core is within
        // bounds and nothing moves.
        let two =
            Machine::synthetic("package:1 core:2 capacity:0.5 kind:slow + core:2 capacity:1.0 kind:fast")
                .unwrap();
        let mix = [
            Level::Low,
            Level::Low,
            Level::Low,
            Level::Low,
            Level::Medium,
            Level::High,
        ];
        for (beta, want) in [(0.0, 3), (0.5, 2)] {
            let mut p = Comprehensive::new(MonitorParams::default(), beta, 200.0, None);
            let plan = decide(&mut p, &two, &snapshot(&mix, 0));
            let on_fast: Vec<u64> = (1..=6).filter(|&t| kind_of(&two, &plan, t) == Some(1)).collect();
            assert_eq!(on_fast.len(), want, "beta {beta}: {on_fast:?}");
            assert!(
                on_fast.iter().all(|&t| t <= 4),
                "only compute-bound tasks on fast cores"
            );
        }
        let name = |spec: &str| crate::build(spec).unwrap().name();
        assert_eq!(
            name("amp:comprehensive:preset=numa1"),
            "amp:comprehensive:preset=numa1"
        );
        assert_eq!(
            name("amp:comprehensive:preset=numa1,beta=0.1"),
            "amp:comprehensive:alpha=0.8,beta=0.1"
        );
        assert!(crate::build("amp:comprehensive:beta=1").is_err());
        assert!(crate::build("amp:comprehensive:preset=smp").is_err());
    }

    #[test]
    fn fast_first_fills_kinds_in_proportion_to_capacity() {
        let m = Machine::synthetic("package:1 core:2 capacity:0.5 kind:slow + core:2 capacity:1.0 kind:fast")
            .unwrap();
        let fast = m.kinds().len() - 1;
        let mut p = FastFirst::default();
        let plan = decide(&mut p, &m, &snapshot(&[Level::High; 6], 0));
        let on_fast = (1..=6).filter(|&t| kind_of(&m, &plan, t) == Some(fast)).count();
        // Weights 2 x 1.0 and 2 x 0.5: 4 of 6 on the fast kind.
        assert_eq!(on_fast, 4);
    }

    #[test]
    fn fast_first_never_gives_the_fast_kind_more_than_its_share() {
        // S3's NUMA2: two cores at 1.5 GHz and two at 2.7. Eight tasks by
        // weight (2 x 1.0 against 2 x 0.556) are 5.14 : 2.86; 5 : 3 gives
        // each task 0.40 or 0.37 of a fast core, where 6 : 2 gave 0.33 or
        // 0.56 (the fast kind's quota rounded up).
        let m = Machine::synthetic("package:1 core:2 capacity:0.556 kind:slow + core:2 capacity:1.0 kind:fast")
            .unwrap();
        let fast = m.kinds().len() - 1;
        let mut p = FastFirst::default();
        let plan = decide(&mut p, &m, &snapshot(&[Level::High; 8], 0));
        let on_fast = (1..=8).filter(|&t| kind_of(&m, &plan, t) == Some(fast)).count();
        assert_eq!(on_fast, 5);
    }

    #[test]
    fn fast_first_keeps_each_task_on_one_numa_node() {
        // S3's NUMA1: four packages of one core, each its own node, two
        // at 2.0 GHz and two at 2.7. A kind spans two nodes; left to the
        // kernel within the kind, tasks traded nodes and left their memory.
        let m = Machine::synthetic(
            "package:2 numa:1 l3:1 core:1 capacity:0.74 kind:slow | package:2 numa:1 l3:1 core:1 capacity:1.0 kind:fast",
        )
        .unwrap();
        let mut p = FastFirst::default();
        let plan = decide(&mut p, &m, &snapshot(&[Level::High; 8], 0));
        let mut per_cpu = BTreeMap::new();
        for (_, place) in &plan.tasks {
            let crate::Placement::Run { cpus, .. } = place else {
                panic!("ff pauses nothing");
            };
            let nodes: std::collections::BTreeSet<usize> =
                cpus.iter().map(|c| m.cpu(c).unwrap().numa).collect();
            assert_eq!(nodes.len(), 1, "{cpus:?} spans nodes {nodes:?}");
            *per_cpu.entry(cpus.iter().next().unwrap()).or_insert(0) += 1;
        }
        // 8 tasks by weight (1, 1, 0.74, 0.74): two on each core.
        assert_eq!(per_cpu.values().copied().collect::<Vec<_>>(), vec![2, 2, 2, 2]);
    }
}
