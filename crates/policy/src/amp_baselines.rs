//! The asymmetric-core baselines S3 compares `amp:comprehensive` with, each
//! as herd can build it from the signals it has.
//!
//! - `amp:hass-s` (Shelepov et al., HASS, 2009, static): an offline
//!   signature predicts each program's speedup on a fast core, and the
//!   assignment is fixed when the task starts. herd's signature is the
//!   program's whole-run LLC miss rate from the profile store (else its
//!   memory hint); fewer misses predict more speedup. Fast kinds take the
//!   tasks with the most predicted speedup, as many per core as the slower
//!   kinds hold.
//! - `amp:hass-d` (the same paper's dynamic variant, after Koufaty et al.):
//!   the same ranking from the miss rate measured online, recomputed every
//!   interval, with no filter: a task moves whenever its rank crosses a kind
//!   boundary.
//! - `amp:sample-run` (Becchi and Crowley, 2006): every `period` intervals,
//!   each task runs one interval on each kind (sampling), its instruction
//!   rate there is measured, and until the next sampling the tasks with the
//!   highest fast/slow rate ratio run on fast cores.
//!
//! All three confine a task to its kind's CPUs. The HASS variants leave
//! placement within a kind to the kernel; `amp:sample-run`, which moves
//! every task between kinds at each sampling, confines it to the kind's
//! CPUs on one NUMA node, as `amp:comprehensive` and `amp:ff` do
//! (`crate::amp::NodeDomains`: on S3's NUMA machines the kernel otherwise
//! trades tasks between a kind's nodes and strands their memory).

use std::collections::BTreeMap;

use crate::amp::{KindCache, Kinds, hint_gb};
use crate::param::{Accepts, Entry, Param, Range, Value};
use crate::view::SeenTasks;
use crate::{Plan, Policy, TaskId, View};

/// Registry entry: `amp:hass-s`.
pub(crate) const HASS_S: Entry = Entry {
    name: "amp:hass-s",
    about: "HASS static (S3's baseline): offline signature (whole-run LLC miss rate, else hint) fixes each task's core kind",
    params: &[],
    build: |_| Box::new(HassStatic::default()),
    check: None,
};

/// Registry entry: `amp:hass-d`.
pub(crate) const HASS_D: Entry = Entry {
    name: "amp:hass-d",
    about: "HASS dynamic (S3's baseline): the same ranking from the online miss rate, every interval, no stability filter",
    params: &[crate::amp::interval_ms("how often the ranking is recomputed")],
    build: |a| Box::new(HassDynamic::new(a.real("interval_ms"))),
    check: None,
};

/// Registry entry: `amp:sample-run`.
pub(crate) const SAMPLE_RUN: Entry = Entry {
    name: "amp:sample-run",
    about: "Sample-Run (S3's baseline): every task sampled on each kind, then the best fast/slow ratios run on fast cores",
    params: &[
        crate::amp::interval_ms("length of one sampling or run interval"),
        Param {
            key: "period",
            default: Value::Number(10.0),
            accepts: Accepts::Number {
                range: Range::whole(1, u64::MAX),
                words: &[],
            },
            about: "run intervals between samplings",
        },
    ],
    build: |a| Box::new(SampleRun::new(a.real("interval_ms"), a.real("period") as u32)),
    check: None,
};

/// Kind (index into fastest-first kinds) for each task ranked by `key`
/// ascending (lowest key to the fastest kind), tasks per CPU equal across
/// kinds as far as whole tasks allow.
fn assign_by_rank(ranked: &[(f64, TaskId)], cpus_per_kind: &[f64]) -> BTreeMap<TaskId, usize> {
    let total: f64 = cpus_per_kind.iter().sum();
    let n = ranked.len() as f64;
    let mut order: Vec<(f64, TaskId)> = ranked.to_vec();
    order.sort_by(|a, b| a.0.total_cmp(&b.0).then(a.1.cmp(&b.1)));
    let mut out = BTreeMap::new();
    let mut i = 0;
    let mut taken = 0.0;
    for (k, cpus) in cpus_per_kind.iter().enumerate() {
        // Round the cumulative share, so the counts sum to n exactly.
        taken += n * cpus / total;
        let upto = if k + 1 == cpus_per_kind.len() {
            order.len()
        } else {
            taken.round() as usize
        };
        while i < upto.min(order.len()) {
            out.insert(order[i].1, k);
            i += 1;
        }
    }
    out
}

/// Emits run placements for tasks whose kind changed.
fn apply(
    kinds: &Kinds,
    now: &BTreeMap<TaskId, usize>,
    before: &mut BTreeMap<TaskId, usize>,
    why: &'static str,
) -> Plan {
    let mut plan = Plan::default();
    for (id, k) in now {
        if before.get(id) != Some(k) {
            plan.run(*id, kinds[*k].1.clone(), why);
        }
    }
    *before = now.clone();
    plan
}

/// `amp:hass-s`.
#[derive(Debug, Default)]
pub struct HassStatic {
    /// Each task's signature, fixed at its start.
    signature: BTreeMap<TaskId, f64>,
    kind: BTreeMap<TaskId, usize>,
    kinds: KindCache,
}

impl Policy for HassStatic {
    fn reads_counters(&self, machine: &herd_topo::Machine) -> bool {
        crate::amp::reads_counters_on(machine)
    }
    fn name(&self) -> String {
        "amp:hass-s".into()
    }

    fn decide(&mut self, view: &View<'_>) -> Plan {
        let kinds = self.kinds.get(view);
        if kinds.len() < 2 {
            return Plan::default();
        }
        let present: rustc_hash::FxHashSet<TaskId> = view.snapshot.tasks.iter().map(|t| t.id).collect();
        self.signature.retain(|id, _| present.contains(id));
        self.kind.retain(|id, _| present.contains(id));
        let (mut new, mut hinted) = (false, 0usize);
        for t in &view.snapshot.tasks {
            // A task asleep when first seen is ranked once it asks for a
            // CPU (`working::asks_for_cpu`).
            if !self.signature.contains_key(&t.id) && !crate::working::asks_for_cpu(view.snapshot, t) {
                continue;
            }
            self.signature.entry(t.id).or_insert_with(|| {
                new = true;
                let job = view.snapshot.jobs.iter().find(|j| j.id == t.job);
                job.and_then(|j| view.estimates.get(&j.program))
                    .and_then(|e| e.llc_miss_rate)
                    .unwrap_or_else(|| {
                        hinted += 1;
                        hint_gb(job.and_then(|j| j.memory_hint))
                    })
            });
        }
        if !new {
            return Plan::default();
        }
        // Placed tasks keep their kind (static); new ones fill what is left
        // in rank order.
        let ranked: Vec<(f64, TaskId)> = self.signature.iter().map(|(id, s)| (*s, *id)).collect();
        let ideal = assign_by_rank(&ranked, &kinds.iter().map(|k| k.2).collect::<Vec<_>>());
        let mut now = self.kind.clone();
        for (id, k) in ideal {
            now.entry(id).or_insert(k);
        }
        let mut plan = apply(
            &kinds,
            &now,
            &mut self.kind,
            "amp:hass-s: offline signature ranks this task here",
        );
        // Live, the signature is what earlier runs with counters stored;
        // without one the hint stands in, and the plan says so.
        if hinted > 0 {
            plan.note = Some(
                format!(
                    "amp:hass-s: {hinted} new task(s) have no stored whole-run LLC miss rate (no earlier run \
                     with counters): their memory hint stands in for the offline signature"
                )
                .into(),
            );
        }
        plan
    }
}

/// `amp:hass-d`.
#[derive(Debug)]
pub struct HassDynamic {
    interval_ns: u64,
    last_ns: Option<u64>,
    /// Each task's miss rate: measured over the last interval, else its
    /// signature.
    rate: BTreeMap<TaskId, f64>,
    counts: BTreeMap<TaskId, (u64, u64)>,
    kind: BTreeMap<TaskId, usize>,
    kinds: KindCache,
    seen: SeenTasks,
    /// A task was left out asleep at the last look for new ones.
    asleep: bool,
}

impl HassDynamic {
    /// Recomputed every `interval_ms`.
    pub fn new(interval_ms: f64) -> Self {
        HassDynamic {
            interval_ns: (interval_ms * 1e6) as u64,
            last_ns: None,
            rate: BTreeMap::new(),
            counts: BTreeMap::new(),
            kind: BTreeMap::new(),
            kinds: KindCache::default(),
            seen: SeenTasks::default(),
            asleep: false,
        }
    }
}

impl Policy for HassDynamic {
    fn reads_counters(&self, machine: &herd_topo::Machine) -> bool {
        crate::amp::reads_counters_on(machine)
    }
    fn name(&self) -> String {
        if self.interval_ns == 200_000_000 {
            "amp:hass-d".into()
        } else {
            format!("amp:hass-d:interval_ms={}", self.interval_ns as f64 / 1e6)
        }
    }

    fn decide(&mut self, view: &View<'_>) -> Plan {
        let kinds = self.kinds.get(view);
        if kinds.len() < 2 {
            return Plan::default();
        }
        // The same tasks as last time (most periods): none gone, none new.
        let changed = self.seen.changed(view.snapshot);
        if changed {
            let present: rustc_hash::FxHashSet<TaskId> = view.snapshot.tasks.iter().map(|t| t.id).collect();
            self.rate.retain(|id, _| present.contains(id));
            self.counts.retain(|id, _| present.contains(id));
            self.kind.retain(|id, _| present.contains(id));
        }
        let mut new = false;
        // New tasks are looked for when the list changed, or while a task
        // asleep when first seen waits to ask for a CPU.
        let look = changed || std::mem::take(&mut self.asleep);
        for t in &view.snapshot.tasks {
            if look && !self.rate.contains_key(&t.id) {
                if crate::working::asks_for_cpu(view.snapshot, t) {
                    new = true;
                    let job = view.snapshot.jobs.iter().find(|j| j.id == t.job);
                    self.rate.insert(t.id, hint_gb(job.and_then(|j| j.memory_hint)));
                } else {
                    self.asleep = true;
                    continue;
                }
            }
            if let (Some(r), Some(m)) = (t.obs.llc_refs, t.obs.llc_misses) {
                let c = self.counts.entry(t.id).or_default();
                c.0 += r;
                c.1 += m;
            }
        }
        let now_ns = view.now_ns();
        let due = self
            .last_ns
            .is_none_or(|l| now_ns.saturating_sub(l) >= self.interval_ns);
        if due {
            self.last_ns = Some(now_ns);
            // Counts start again at zero, kept in place: a map rebuilt
            // every interval allocated every entry again.
            for (id, c) in &mut self.counts {
                let (r, m) = std::mem::take(c);
                if r > 0 {
                    self.rate.insert(*id, m as f64 / r as f64);
                }
            }
        }
        if !(due || new) {
            return Plan::default();
        }
        let ranked: Vec<(f64, TaskId)> = self.rate.iter().map(|(id, s)| (*s, *id)).collect();
        let now = assign_by_rank(&ranked, &kinds.iter().map(|k| k.2).collect::<Vec<_>>());
        apply(
            &kinds,
            &now,
            &mut self.kind,
            "amp:hass-d: online miss rate ranks this task here",
        )
    }
}

/// `amp:sample-run`.
#[derive(Debug)]
pub struct SampleRun {
    interval_ns: u64,
    /// Run intervals between samplings.
    period: u32,
    /// Where each interval of the cycle stands: 0..kinds = sampling kind k,
    /// then `period` run intervals.
    step: u32,
    last_ns: Option<u64>,
    /// Instructions per ns of CPU time on each kind, from the last sampling.
    rate: BTreeMap<TaskId, Vec<Option<f64>>>,
    /// Counts over the current interval.
    counts: BTreeMap<TaskId, (u64, u64)>,
    kind: BTreeMap<TaskId, usize>,
    kinds: KindCache,
    domains: crate::amp::NodeDomains,
    seen: SeenTasks,
}

impl SampleRun {
    /// Sampling every `period` run intervals of `interval_ms`.
    pub fn new(interval_ms: f64, period: u32) -> Self {
        SampleRun {
            interval_ns: (interval_ms * 1e6) as u64,
            period: period.max(1),
            step: 0,
            last_ns: None,
            rate: BTreeMap::new(),
            counts: BTreeMap::new(),
            kind: BTreeMap::new(),
            kinds: KindCache::default(),
            domains: crate::amp::NodeDomains::default(),
            seen: SeenTasks::default(),
        }
    }
}

impl Policy for SampleRun {
    fn reads_counters(&self, machine: &herd_topo::Machine) -> bool {
        crate::amp::reads_counters_on(machine)
    }
    fn name(&self) -> String {
        let mut p = Vec::new();
        if self.interval_ns != 200_000_000 {
            p.push(format!("interval_ms={}", self.interval_ns as f64 / 1e6));
        }
        if self.period != 10 {
            p.push(format!("period={}", self.period));
        }
        if p.is_empty() {
            "amp:sample-run".into()
        } else {
            format!("amp:sample-run:{}", p.join(","))
        }
    }

    fn decide(&mut self, view: &View<'_>) -> Plan {
        let kinds = self.kinds.get(view);
        if kinds.len() < 2 {
            return Plan::default();
        }
        let nk = kinds.len() as u32;
        // The same tasks as last time (most periods): none gone.
        if self.seen.changed(view.snapshot) {
            let present: rustc_hash::FxHashSet<TaskId> = view.snapshot.tasks.iter().map(|t| t.id).collect();
            self.rate.retain(|id, _| present.contains(id));
            self.counts.retain(|id, _| present.contains(id));
            self.kind.retain(|id, _| present.contains(id));
        }
        for t in &view.snapshot.tasks {
            if let Some(i) = t.obs.instructions {
                let c = self.counts.entry(t.id).or_default();
                c.0 += i;
                c.1 += t.obs.cpu_time_ns;
            }
        }
        let now_ns = view.now_ns();
        if self
            .last_ns
            .is_some_and(|l| now_ns.saturating_sub(l) < self.interval_ns)
        {
            return Plan::default();
        }
        // An interval ended: a sampling interval's rates are recorded for
        // the kind each task ran on.
        if self.last_ns.is_some() && self.step < nk {
            for (id, (i, ns)) in &self.counts {
                if let (Some(k), true) = (self.kind.get(id), *ns > 0) {
                    let r = self.rate.entry(*id).or_insert_with(|| vec![None; nk as usize]);
                    r[*k] = Some(*i as f64 / *ns as f64);
                }
            }
        }
        // Counts start again at zero, kept in place (a count of zero CPU
        // time records nothing, as no count did).
        self.counts.values_mut().for_each(|c| *c = (0, 0));
        if self.last_ns.is_some() {
            self.step = (self.step + 1) % (nk + self.period);
        }
        self.last_ns = Some(now_ns);
        // A task asleep when first seen takes no kind's share until it asks
        // for a CPU (`working::asks_for_cpu`); a placed one keeps its turn.
        let ids: Vec<TaskId> = view
            .snapshot
            .tasks
            .iter()
            .filter(|t| self.kind.contains_key(&t.id) || crate::working::asks_for_cpu(view.snapshot, t))
            .map(|t| t.id)
            .collect();
        let now: BTreeMap<TaskId, usize> = if self.step < nk {
            // Sampling: task i on kind (i + step) mod kinds, so over the
            // sampling intervals every task visits every kind and each kind
            // keeps its share of tasks.
            ids.iter()
                .enumerate()
                .map(|(i, id)| (*id, (i + self.step as usize) % nk as usize))
                .collect()
        } else {
            // Run: the highest fast/slowest rate ratio on the fastest kinds;
            // tasks not sampled yet count as average.
            let ratio = |id: &TaskId| {
                self.rate
                    .get(id)
                    .and_then(|r| Some(r.first().copied()?? / r.last().copied()??))
                    .filter(|x| x.is_finite())
            };
            let known: Vec<f64> = ids.iter().filter_map(ratio).collect();
            let mean = known.iter().sum::<f64>() / known.len().max(1) as f64;
            // Highest ratio first: rank by its negative.
            let ranked: Vec<(f64, TaskId)> = ids.iter().map(|id| (-ratio(id).unwrap_or(mean), *id)).collect();
            assign_by_rank(&ranked, &kinds.iter().map(|k| k.2).collect::<Vec<_>>())
        };
        let why = if self.step < nk {
            "amp:sample-run: sampling this core kind"
        } else {
            "amp:sample-run: fast/slow instruction-rate ratio ranks this task here"
        };
        // Within a kind, one NUMA node: the job's memory's where the kind
        // has CPUs there (see NodeDomains).
        self.domains.refresh(&kinds, view);
        let home = crate::amp::NodeDomains::task_homes(view);
        let mut plan = Plan::default();
        for t in &view.snapshot.tasks {
            let Some(&k) = now.get(&t.id) else { continue };
            if self.kind.get(&t.id) != Some(&k) {
                let cpus = self.domains.place(t.id, Some(k), home.get(&t.id).copied()).clone();
                plan.run(t.id, cpus, why);
            }
        }
        self.kind = now;
        plan
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Issue 24: live, amp:hass-s said "offline signature" while it had
    /// none (live runs passed no estimates). With a stored miss rate it
    /// ranks by it; without, the plan says the hint stood in.
    #[test]
    fn hass_s_says_when_a_hint_stands_in_for_the_offline_signature() {
        let m = herd_topo::Machine::synthetic("core:2 capacity:1.0 + core:2 capacity:0.5").unwrap();
        let snap = crate::testkit::beats_snapshot(0, &[None, None]);
        let mut snap = snap;
        snap.jobs = vec![crate::JobView {
            id: 0,
            name: "p".into(),
            program: "p".into(),
            arrival_ns: 0,
            memory_hint: None,
            memory_kb: None,
            threads_declared: None,
        }];
        let plan = crate::testkit::decide_once(&mut HassStatic::default(), &m, &snap);
        let note = plan.note.as_deref().unwrap_or("");
        assert!(note.contains("2 new task(s) have no stored whole-run LLC miss rate"), "{note}");
        let mut est = crate::Estimates::default();
        est.insert(
            "p".into(),
            crate::Estimate {
                llc_miss_rate: Some(0.3),
                ..Default::default()
            },
        );
        let know = crate::Knowledge::default();
        let plan = HassStatic::default().decide(&View {
            machine: &m,
            snapshot: &snap,
            estimates: &est,
            learned: &know,
            oracle: None,
            seed: 1,
            decision: 0,
        });
        assert!(plan.note.is_none(), "{:?}", plan.note);
        assert_eq!(plan.tasks.len(), 2);
    }

    /// A program's main thread asleep in join, seen first, takes no share
    /// of a core kind from its workers under any amp policy: with two
    /// fast and two slow CPUs, it would have taken a fast CPU's place
    /// (amp:ff), or a kind by its rank. Once it asks for a CPU, it gets one.
    #[test]
    fn a_thread_asleep_when_first_seen_takes_no_place_until_it_asks_for_a_cpu() {
        let m = herd_topo::Machine::synthetic("package:1 core:2 capacity:0.5 kind:slow + core:2 capacity:1.0 kind:fast")
            .unwrap();
        let period_ns = 50_000_000;
        // Task 1 the main thread, 2 and 3 its workers.
        let snap = |turn: u64, main_works: bool| {
            let mut s = crate::testkit::beats_snapshot(turn * period_ns, &[None, None, None]);
            s.period_ns = if turn == 0 { 0 } else { period_ns };
            for t in &mut s.tasks {
                let works = t.id != 1 || main_works;
                t.state = if works { crate::TaskState::Runnable } else { crate::TaskState::Blocked };
                t.obs.cpu_time_ns = if works && turn > 0 { period_ns } else { 0 };
            }
            s
        };
        for spec in ["amp:ff", "amp:comprehensive", "amp:hass-s", "amp:hass-d", "amp:sample-run"] {
            let mut p = crate::build(spec).unwrap();
            let mut decide = |s: &crate::Snapshot| crate::testkit::decide_once(p.as_mut(), &m, s);
            // Asleep in the first snapshot (nothing measured) and over the
            // next three periods (600 ms: past every interval's end).
            let mut placed: Vec<(TaskId, crate::Placement)> = Vec::new();
            for turn in 0..4 {
                placed.extend(decide(&snap(turn * 4, false)).tasks);
            }
            assert!(
                placed.iter().all(|(id, _)| *id != 1),
                "{spec}: the sleeping main thread was placed"
            );
            assert!(
                [2, 3].iter().all(|w| placed.iter().any(|(id, _)| id == w)),
                "{spec}: {placed:?}"
            );
            if spec == "amp:ff" {
                // Both workers on the fast kind (capacity 1.0), as without
                // the main thread: two tasks, two fast CPUs' share.
                let fast = |cpus: &herd_topo::CpuSet| {
                    cpus.iter()
                        .all(|c| m.kinds()[m.cpu(c).unwrap().kind].capacity == 1.0)
                };
                for (id, p) in &placed {
                    let crate::Placement::Run { cpus, .. } = p else { panic!("paused") };
                    assert!(fast(cpus), "amp:ff: worker {id} on {cpus}");
                }
            }
            let mut placed_main = false;
            for turn in 4..8 {
                let plan = decide(&snap(turn * 4, true));
                placed_main |= plan.tasks.iter().any(|(id, _)| *id == 1);
            }
            assert!(placed_main, "{spec}: the main thread, once it works, got no place");
        }
    }

    #[test]
    fn ranks_fill_kinds_in_proportion_to_their_cpus() {
        let ranked: Vec<(f64, TaskId)> =
            [(0.9, 1), (0.1, 2), (0.5, 3), (0.2, 4), (0.7, 5), (0.3, 6)].to_vec();
        let a = assign_by_rank(&ranked, &[2.0, 2.0]);
        let fast: Vec<TaskId> = a.iter().filter(|(_, k)| **k == 0).map(|(id, _)| *id).collect();
        assert_eq!(fast, vec![2, 4, 6], "the three lowest miss rates");
        let a = assign_by_rank(&ranked, &[1.0, 2.0, 3.0]);
        let counts: Vec<usize> = (0..3).map(|k| a.values().filter(|v| **v == k).count()).collect();
        assert_eq!(counts, vec![1, 2, 3]);
    }
}
