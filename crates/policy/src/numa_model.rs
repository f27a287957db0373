//! `numa:model` (S2): where a multithreaded program's threads go on one
//! NUMA machine, compact (and on which NUMA nodes) or scatter, chosen by the
//! predicted time from S2's queueing model given what already runs.
//!
//! When a job first appears, every layout that fits the CPUs no other job
//! holds is predicted with `herd_model::numa` (controllers and links as
//! M/M/1 queues), together with the jobs already placed; the job takes the
//! layout with the least predicted time, the lesser harm to the others on a
//! tie, and keeps it for its life (moving threads costs warm caches, and
//! S2 places jobs once). Threads go to free CPUs of the chosen NUMA nodes
//! in the machine's scatter order, one CPU each. A node that has more
//! threads than CPUs has none pinned: each of its threads may run on any
//! of its CPUs, so that the kernel shares them fairly (one-CPU pins left
//! the threads that shared a CPU half of one while the others had a whole
//! CPU each, and a batch or a barrier waits for the slowest). It stays so
//! while any of those threads lives.
//!
//! Only threads that want a CPU count and are pinned ([`wants_cpu`]): a
//! shell waiting for the program it started, a main thread in join or a
//! pool's sleeping helpers take no place in the layout and are the
//! kernel's to place. Counted, a 2-thread Python program started by a
//! shell was laid out as a 4-thread job over both nodes of a 2-socket
//! guest (`scripts/vm/checks.py`'s `numa-model-memory-tree`).
//!
//! A job's memory traffic comes from what the loop learned (its predicted
//! or last bandwidth, per thread) or, without counters, from its memory
//! hint (60% / 25% / 3% of what its threads can draw alone; no hint counts
//! as low); the machine's bandwidth from `herd calibrate`'s peak (the
//! simulator's model in simulation), else `node_bw_gbps`. The note says
//! which, and every choice is explained.

use std::collections::BTreeMap;

use herd_model::numa::{self, Placed, Prediction};
use herd_model::{Contention, MemSystem, ModelParams};
use herd_topo::{CpuSet, Machine};
use rustc_hash::FxHashMap;

use crate::param::{Accepts, Entry, Param, Range, Value};
use crate::view::SeenTasks;
use crate::working::wants_cpu;
use crate::{JobId, Level, Plan, Policy, TaskId, View};

/// Registry entry: `numa:model`.
pub(crate) const NUMA_MODEL: Entry = Entry {
    name: "numa:model",
    about: "S2: each multithreaded job compact (on which NUMA nodes) or scatter, by the NUMA queueing model's predicted time given what runs",
    params: &[
        Param {
            key: "node_bw_gbps",
            default: Value::Number(DEFAULT_NODE_BW_GBPS),
            accepts: Accepts::Number {
                range: Range::POSITIVE,
                words: &[],
            },
            about: "bandwidth per NUMA node when herd calibrate has stored no peak",
        },
        Param {
            key: "shared",
            default: Value::Number(DEFAULT_SHARED),
            accepts: Accepts::Number {
                range: Range::UNIT,
                words: &[],
            },
            about: "share of a job's accesses to data all its threads share (the rest is local)",
        },
    ],
    build: |a| Box::new(NumaModel::new(a.real("node_bw_gbps"), a.real("shared"))),
    check: None,
};

/// See the module docs.
#[derive(Debug)]
pub struct NumaModel {
    /// Per NUMA node, when no peak bandwidth is known.
    node_bw_gbps: f64,
    /// Share of a job's accesses to data all its threads share.
    shared_fraction: f64,
    /// Placed jobs: threads per NUMA node and their characteristics.
    placed: BTreeMap<JobId, Placed>,
    /// Each placed task's CPU.
    cpu_of: FxHashMap<TaskId, u32>,
    /// Placed tasks let run on any CPU of their NUMA node (by index): those
    /// of a node with more threads than CPUs.
    node_of: FxHashMap<TaskId, usize>,
    /// The machine's scatter order, once.
    order: Option<std::sync::Arc<[u32]>>,
    noted_single_node: bool,
    /// After a decision that laid out every job and pinned every task: the
    /// tasks and each job's declared thread count it saw. A snapshot with
    /// the same has nothing new to place (most periods; at a thousand
    /// tasks, going through them all cost 170 µs a period). Threads it
    /// left unpinned because they slept are kept by their index in the
    /// snapshot: the same snapshot has something to place only once one
    /// of them wants a CPU (a sleeping thread in every job cost 126-160 µs
    /// a decision at 1,024 tasks when each decision went through them all).
    settled: Option<Seen>,
    /// Placed jobs alike are scored as one program standing for copies
    /// ([`kinds`]); off only in the test that compares the two.
    group_kinds: bool,
}

/// The tasks of a snapshot, each job's declared thread count, in order,
/// and the indices of the tasks left unpinned because they slept.
type Seen = (SeenTasks, Vec<(JobId, Option<u32>)>, Vec<usize>);

impl NumaModel {
    /// Lets every pinned thread of a node with more threads than CPUs
    /// (`shared`, by node index) run on any of its CPUs, or those sharing a
    /// CPU would get half of one beside others with a whole one. A thread
    /// pinned earlier in `plan` is placed once, on its node. Nothing to do
    /// on most decisions, which share no node.
    fn unpin_shared_nodes(&mut self, m: &Machine, shared: &[bool], plan: &mut Plan) {
        if !shared.contains(&true) {
            return;
        }
        let mut unpin: Vec<(TaskId, usize)> = self
            .cpu_of
            .iter()
            .filter_map(|(&t, &c)| {
                let k = m.cpu(c)?.numa;
                shared.get(k).copied().unwrap_or(false).then_some((t, k))
            })
            .collect();
        if unpin.is_empty() {
            return;
        }
        unpin.sort_unstable();
        let gone: rustc_hash::FxHashSet<TaskId> = unpin.iter().map(|&(t, _)| t).collect();
        plan.tasks.retain(|(t, _)| !gone.contains(t));
        let nodes = m.numa_nodes();
        for (t, k) in unpin {
            self.cpu_of.remove(&t);
            self.node_of.insert(t, k);
            plan.run(
                t,
                nodes[k].cpus.clone(),
                SHARED_WHY,
            );
        }
    }

    /// Whether task `t` has its place: a CPU, or its node's CPUs.
    fn placed_task(&self, t: TaskId) -> bool {
        self.cpu_of.contains_key(&t) || self.node_of.contains_key(&t)
    }

    /// The policy with `node_bw_gbps` as the fallback bandwidth and
    /// `shared_fraction` for every job.
    pub fn new(node_bw_gbps: f64, shared_fraction: f64) -> Self {
        NumaModel {
            node_bw_gbps,
            shared_fraction,
            placed: BTreeMap::new(),
            cpu_of: FxHashMap::default(),
            node_of: FxHashMap::default(),
            order: None,
            noted_single_node: false,
            settled: None,
            group_kinds: true,
        }
    }

    fn mem(&self, view: &View<'_>) -> (MemSystem, String) {
        let m = view.machine;
        let nodes = m.numa_nodes().len().max(1) as f64;
        let (node_bw, source) = match view.learned.peak_btr {
            // Transactions per µs x 64 B = bytes per µs; / 1000 = GB/s.
            Some(p) if p > 0.0 => (
                p * herd_model::params::LINE_BYTES / 1000.0 / nodes,
                "the known peak (herd calibrate, or the simulator's model)",
            ),
            _ => (self.node_bw_gbps, "node_bw_gbps"),
        };
        let params = ModelParams {
            node_bw_gbps: node_bw,
            // S2's machine: QPI carries 1/1.6 of a controller each way;
            // the link queue carries both ways.
            link_bw_gbps: node_bw * 2.0 / 1.6,
            contention: Contention::MM1,
            ..ModelParams::default()
        };
        (
            params.mem_system(m),
            format!("{node_bw:.1} GB/s per NUMA node from {source}"),
        )
    }
}

/// Per thread GB/s of a job, and where it came from.
fn traffic(view: &View<'_>, job: JobId) -> Option<(f64, &'static str)> {
    let l = view.learned.jobs.get(&job)?;
    let btr = l.predicted_btr.or(l.last_btr)?;
    // Transactions per µs of CPU time: x 64 B / 1000 = GB/s per busy thread.
    Some((btr * herd_model::params::LINE_BYTES / 1000.0, "learned"))
}

impl Policy for NumaModel {
    /// Its decisions read what learning made of the counters, never the
    /// counters themselves (learning reads them, so the loop asks for them).
    fn reads_counters(&self, _machine: &herd_topo::Machine) -> bool {
        false
    }
    fn name(&self) -> String {
        let mut p = Vec::new();
        if self.node_bw_gbps != DEFAULT_NODE_BW_GBPS {
            p.push(format!("node_bw_gbps={}", self.node_bw_gbps));
        }
        if self.shared_fraction != DEFAULT_SHARED {
            p.push(format!("shared={}", self.shared_fraction));
        }
        if p.is_empty() {
            "numa:model".into()
        } else {
            format!("numa:model:{}", p.join(","))
        }
    }

    fn wants_learning(&self) -> bool {
        true
    }

    fn decide(&mut self, view: &View<'_>) -> Plan {
        let m = view.machine;
        let mut plan = Plan::default();
        if m.numa_nodes().len() < 2 {
            if !self.noted_single_node {
                self.noted_single_node = true;
                plan.note = Some(
                    "numa:model: one NUMA node: compact and scatter use the same memory; the kernel places every task"
                        .into(),
                );
            }
            return plan;
        }
        let snap = view.snapshot;
        if let Some((tasks, declared, asleep)) = &self.settled
            && tasks.same(snap)
            && snap.jobs.iter().map(|j| (j.id, j.threads_declared)).eq(declared.iter().copied())
            && !asleep.iter().any(|&i| wants_cpu(snap, &snap.tasks[i]))
        {
            return plan;
        }
        // Whether every job gets a layout and every task that wants a CPU
        // gets one; the tasks left unpinned because they sleep.
        let mut complete = true;
        let mut asleep = Vec::new();
        // Each task as (job, rank, id, position), in job order and within
        // a job by rank: one sorted list, not a map of a list per job (the
        // map and its lists, and a set of working ids below, cost a tenth
        // of a simulated hour of 250 restarting jobs: every restart makes
        // a new task list, and this pass runs again).
        let mut threads: Vec<(JobId, u32, TaskId, usize)> =
            snap.tasks.iter().enumerate().map(|(i, t)| (t.job, t.rank, t.id, i)).collect();
        threads.sort_unstable();
        // Jobs gone: free their CPUs.
        self.placed
            .retain(|j, _| threads.binary_search_by_key(j, |x| x.0).is_ok());
        let present: rustc_hash::FxHashSet<TaskId> = view.snapshot.tasks.iter().map(|t| t.id).collect();
        self.cpu_of.retain(|t, _| present.contains(t));
        self.node_of.retain(|t, _| present.contains(t));
        // Nodes whose threads share all of its CPUs: no thread is pinned
        // there, a new one included.
        let mut shared = vec![false; m.numa_nodes().len()];
        for &k in self.node_of.values() {
            shared[k] = true;
        }
        // The threads that want a CPU, pinned or not: a pinned one that
        // shares its CPU with others waits more than it runs, and counts.
        // (By position in the snapshot: a flag a task.)
        let works: Vec<bool> = snap.tasks.iter().map(|t| wants_cpu(snap, t)).collect();
        let order = self
            .order
            .get_or_insert_with(|| crate::order::scatter(m).into())
            .clone();
        // The memory system only when a new job is to be placed: most
        // periods place nothing.
        let mut mem: Option<(MemSystem, String)> = None;
        let mut notes = Vec::new();
        // One map, not a search of the jobs per job (10k jobs a period).
        let declared: BTreeMap<JobId, u32> = view
            .snapshot
            .jobs
            .iter()
            .filter_map(|j| Some((j.id, j.threads_declared?)))
            .collect();
        // Threads pinned to each CPU, kept as pins come and go: a set of
        // every pinned CPU made afresh per thread was quadratic in threads.
        let slots = m
            .cpus()
            .iter()
            .map(|c| c.os)
            .chain(self.cpu_of.values().copied())
            .map(|c| c as usize + 1)
            .max()
            .unwrap_or(0);
        let mut pinned = vec![0u32; slots];
        for &c in self.cpu_of.values() {
            pinned[c as usize] += 1;
        }
        // The model's prediction for every job placed so far, when the last
        // job placed came last in job order: the next new job's "before"
        // (a job placed in this loop is scored with every placed job and
        // itself last, which is that prediction exactly).
        let mut carried: Option<Prediction> = None;
        let mut memo = Memo::default();
        for tasks in threads.chunk_by(|a, b| a.0 == b.0) {
            let job = tasks[0].0;
            // A job that grew past its layout is laid out again for the
            // threads it has now: a live program is seen with one thread
            // and starts its workers after herd's first decision, and the
            // one-node layout of a single thread would stack them all on
            // one node while the others idle (issue 24). Its threads are
            // pinned afresh by the new layout.
            let laid_out = self.placed.get(&job).map(|p| p.threads_per_node.iter().sum::<u32>());
            // A job the user declared N threads for is laid out for N from
            // its first sight, so its workers need no second layout.
            let declared = declared.get(&job).copied().unwrap_or(0);
            let working = tasks.iter().filter(|x| works[x.3]).count() as u32;
            if working == 0 && declared == 0 {
                // Nothing of it works yet: nothing to lay out.
                asleep.extend(tasks.iter().filter(|x| !self.placed_task(x.2)).map(|x| x.3));
                continue;
            }
            // It grew when its pinned threads and those that ask for a
            // CPU outnumber its layout (a pinned one that sleeps a while
            // keeps its place; it is let go at the next layout).
            let grown = tasks
                .iter()
                .filter(|x| self.placed_task(x.2) || works[x.3])
                .count() as u32;
            let threads = working.max(declared);
            if laid_out.is_some_and(|n| grown > n) {
                self.placed.remove(&job);
                carried = None;
                for (_, _, t, i) in tasks {
                    let was_shared = self.node_of.remove(t).is_some();
                    if was_shared && !works[*i] {
                        plan.run(*t, m.all_cpus().clone(), "numa:model: it sleeps: the kernel places it");
                    }
                    if let Some(c) = self.cpu_of.remove(t) {
                        pinned[c as usize] -= 1;
                        // One that sleeps now is let go: the new layout
                        // has no place for it.
                        if !works[*i] {
                            plan.run(*t, m.all_cpus().clone(), "numa:model: it sleeps: the kernel places it");
                        }
                    }
                }
            }
            if !self.placed.contains_key(&job) {
                let (sys, _) = mem.get_or_insert_with(|| self.mem(view));
                let Some((placed, why, pred)) = self.choose(view, sys, &mut memo, job, threads, carried.take()) else {
                    complete = false;
                    continue;
                };
                notes.push(why);
                self.placed.insert(job, placed);
                carried = (self.placed.keys().next_back() == Some(&job)).then_some(pred);
            }
            // Pin the job's unplaced threads to free CPUs of its NUMA nodes.
            let want = self.placed[&job].threads_per_node.clone();
            let mut have = vec![0u32; want.len()];
            for (_, _, t, _) in tasks {
                if let Some(c) = self.cpu_of.get(t) {
                    have[m.cpu(*c).map_or(0, |c| c.numa)] += 1;
                } else if let Some(&k) = self.node_of.get(t) {
                    have[k] += 1;
                }
            }
            for (_, _, t, i) in tasks {
                if self.placed_task(*t) {
                    continue;
                }
                if !works[*i] {
                    asleep.push(*i);
                    continue;
                }
                // A NUMA node still short of its share, else any of the job's.
                let k = (0..want.len())
                    .find(|&k| have[k] < want[k])
                    .or_else(|| (0..want.len()).find(|&k| want[k] > 0))
                    .unwrap_or(0);
                let nodes = m.numa_nodes();
                let free_in = |k: usize| {
                    (!shared[k])
                        .then(|| {
                            order
                                .iter()
                                .copied()
                                .find(|&c| nodes[k].cpus.contains(c) && pinned[c as usize] == 0)
                        })
                        .flatten()
                };
                // A free CPU of that node, else of another of the job's
                // nodes; when the job's nodes are full, the whole node: its
                // threads share its CPUs (below). Never two threads pinned
                // to a CPU while one of its CPUs idles.
                let free = free_in(k).map(|c| (k, c)).or_else(|| {
                    (0..want.len())
                        .filter(|&j| want[j] > 0)
                        .find_map(|j| free_in(j).map(|c| (j, c)))
                });
                let Some((k, cpu)) = free else {
                    have[k] += 1;
                    shared[k] = true;
                    self.node_of.insert(*t, k);
                    plan.run(
                        *t,
                        nodes[k].cpus.clone(),
                        SHARED_WHY,
                    );
                    continue;
                };
                have[k] += 1;
                self.cpu_of.insert(*t, cpu);
                pinned[cpu as usize] += 1;
                plan.run(
                    *t,
                    CpuSet::single(cpu),
                    "numa:model: the layout S2's model predicts fastest",
                );
            }
        }
        self.unpin_shared_nodes(m, &shared, &mut plan);
        self.settled = complete.then(|| {
            (
                SeenTasks::of(snap),
                snap.jobs.iter().map(|j| (j.id, j.threads_declared)).collect(),
                asleep,
            )
        });
        if !notes.is_empty() {
            let bw_source = mem.as_ref().map_or("", |(_, s)| s.as_str());
            plan.note = Some(format!("numa:model ({bw_source}): {}", notes.join("; ")).into());
        }
        plan
    }
}

/// Within one decision, what the model said for a job's layout alone:
/// jobs of a kind (the same layout alone, memory and traffic) get the same
/// answer, and finding a job's characteristics takes dozens of solves (at
/// 1,024 tasks, three fifths of a first decision's instructions).
#[derive(Default)]
struct Memo {
    /// The most a layout draws alone, by (layout, memory's bits).
    most: FxHashMap<(Vec<u32>, Vec<u64>), Option<f64>>,
    /// Characteristics, by (layout, memory's bits, traffic's bits).
    character: FxHashMap<(Vec<u32>, Vec<u64>, u64), Option<numa::Character>>,
}

/// A kind of placed job: its characteristics' bits, layout and memory's
/// bits.
type KindKey<'a> = ((u64, u64, u64), &'a [u32], Vec<u64>);

/// The placed jobs as kinds, in order of first appearance: jobs with the
/// same characteristics, layout and memory are one program standing for
/// that many copies (`numa::predict_copies`). Such jobs have the same
/// predicted time, so the prediction of a kind is each of its jobs'; with
/// a few kinds among a thousand jobs, each layout's prediction solves for
/// a few programs, not a thousand (a first decision at 1,024 tasks on 384
/// CPUs took 0.66 s). With no two alike, the programs are the jobs.
fn kinds<'a>(placed: impl Iterator<Item = &'a Placed>) -> (Vec<Placed>, Vec<u32>) {
    let mut index: FxHashMap<KindKey<'a>, usize> = FxHashMap::default();
    let (mut kinds, mut copies): (Vec<Placed>, Vec<u32>) = (Vec::new(), Vec::new());
    for p in placed {
        let c = &p.character;
        let key = (
            (c.beta_ns.to_bits(), c.accesses_per_thread.to_bits(), c.shared_fraction.to_bits()),
            p.threads_per_node.as_slice(),
            p.memory.iter().map(|m| m.to_bits()).collect(),
        );
        match index.get(&key) {
            Some(&k) => copies[k] += 1,
            None => {
                index.insert(key, kinds.len());
                kinds.push(p.clone());
                copies.push(1);
            }
        }
    }
    (kinds, copies)
}

/// A memory hint as a share of the most a job's threads can draw from a
/// node alone: memory-bound programs reach well over half of it
/// (STREAM-like codes nearly all), compute-bound ones a few percent.
pub fn hint_share(l: crate::Level) -> f64 {
    match l {
        crate::Level::High => 0.6,
        crate::Level::Medium => 0.25,
        crate::Level::Low => 0.03,
    }
}

/// The machine's NUMA distances (10 local, 21 between nodes when the
/// machine gives none).
pub fn numa_distances(m: &herd_topo::Machine) -> Vec<Vec<f64>> {
    let n = m.numa_nodes().len();
    m.numa_distances().map(|d| d.to_vec()).unwrap_or_else(|| {
        (0..n)
            .map(|i| (0..n).map(|j| if i == j { 10.0 } else { 21.0 }).collect())
            .collect()
    })
}

/// Default fallback bandwidth: herd's model default (two DDR3-1600 channels).
pub const DEFAULT_NODE_BW_GBPS: f64 = 25.6;
/// Default shared fraction.
pub const DEFAULT_SHARED: f64 = 0.5;
/// Why a thread of a node with more threads than CPUs may use all of them.
const SHARED_WHY: &str = "numa:model: its NUMA node has more threads than CPUs: the kernel shares them";

/// Predicted times closer than this (relative) count as a tie.
const NEAR_TIE: f64 = 0.01;

impl NumaModel {
    /// The layout for a new job of `threads` threads, with a sentence and
    /// the model's prediction for every placed job and it (last). `before`:
    /// the prediction for the placed jobs, when the caller has it.
    fn choose(
        &self,
        view: &View<'_>,
        mem: &MemSystem,
        memo: &mut Memo,
        job: JobId,
        threads: u32,
        before: Option<Prediction>,
    ) -> Option<(Placed, String, Prediction)> {
        let m: &Machine = view.machine;
        let capacity: Vec<u32> = m.numa_nodes().iter().map(|n| n.cpus.len() as u32).collect();
        let mut free = capacity.clone();
        for p in self.placed.values() {
            for (f, t) in free.iter_mut().zip(&p.threads_per_node) {
                *f = f.saturating_sub(*t);
            }
        }
        let name = view
            .snapshot
            .jobs
            .iter()
            .find(|j| j.id == job)
            .map_or_else(|| format!("job {job}"), |j| j.name.clone());
        let alone = numa::scatter(threads, &capacity)
            .or_else(|| numa::scatter(threads, &vec![threads; capacity.len()]))?;
        let view_of = view.snapshot.jobs.iter().find(|j| j.id == job);
        let hint = view_of.and_then(|j| j.memory_hint);
        // Where its memory is, when the sensor can tell (numa_maps): a share
        // per NUMA node, in the machine's node order.
        let memory: Vec<f64> = view_of
            .and_then(|j| j.memory_kb.as_ref())
            .map(|kb| {
                m.numa_nodes()
                    .iter()
                    .map(|n| {
                        // A fold from +0.0: an empty f64 sum is -0.0.
                        kb.iter()
                            .filter(|(os, _)| *os == n.os)
                            .fold(0.0, |a, (_, k)| a + *k as f64)
                    })
                    .collect()
            })
            .filter(|v: &Vec<f64>| v.iter().sum::<f64>() > 0.0)
            .unwrap_or_default();
        let memory_bits: Vec<u64> = memory.iter().map(|x| x.to_bits()).collect();
        let most = *memo
            .most
            .entry((alone.clone(), memory_bits.clone()))
            .or_insert_with(|| numa::max_bw_gbps(mem, &alone, &memory, self.shared_fraction).ok())
            .as_ref()?;
        let (gbps, source) = match traffic(view, job) {
            Some((per_thread, src)) => (
                (per_thread * f64::from(threads)).min(numa::DRAWABLE_SHARE * most),
                src.to_string(),
            ),
            None => {
                let level = hint.unwrap_or(Level::Low);
                (
                    hint_share(level) * most,
                    format!("hint {}", format!("{level:?}").to_lowercase()),
                )
            }
        };
        let character = *memo
            .character
            .entry((alone.clone(), memory_bits, gbps.to_bits()))
            .or_insert_with(|| {
                numa::from_alone_in(mem, &alone, &memory, 1.0, gbps.max(1e-6), self.shared_fraction).ok()
            })
            .as_ref()?;
        let (others, copies) = if self.group_kinds {
            kinds(self.placed.values())
        } else {
            (self.placed.values().cloned().collect(), vec![1; self.placed.len()])
        };
        // The caller's prediction is for these kinds when the last job
        // placed made a kind of its own (it came last); one that joined a
        // kind left a prediction with one program more.
        let before = (!others.is_empty())
            .then(|| {
                before
                    .filter(|b| b.programs.len() == others.len())
                    .or_else(|| numa::predict_copies(mem, &others, Some(&copies), false).ok())
            })
            .flatten();
        let distances = numa_distances(m);
        let mut layouts: Vec<(String, Vec<u32>)> = Vec::new();
        if let Some(p) = numa::scatter(threads, &free) {
            layouts.push(("scatter".into(), p));
        }
        for first in 0..free.len() {
            if let Some(p) = numa::compact(threads, &free, first, &distances)
                && !layouts.iter().any(|(_, q)| *q == p)
            {
                layouts.push((format!("compact on NUMA node {first}"), p));
            }
        }
        if layouts.is_empty() {
            // More threads than free CPUs: each to the node with the fewest
            // threads per CPU, counting the free CPUs first. S2's model
            // weighs memory traffic, not CPUs shared, so it cannot choose
            // here; the even split it used put every one-thread program
            // past the CPUs on the first node (a two-socket guest: eight
            // programs on node 0's four CPUs, four on node 1's).
            let mut load = vec![0u32; capacity.len()];
            for placed in self.placed.values() {
                for (l, t) in load.iter_mut().zip(&placed.threads_per_node) {
                    *l += t;
                }
            }
            let mut p = vec![0u32; capacity.len()];
            for _ in 0..threads {
                // a/ca < b/cb, compared as a*cb < b*ca.
                let k = (0..capacity.len()).filter(|&k| capacity[k] > 0).min_by(|&a, &b| {
                    (u64::from(load[a] + p[a] + 1) * u64::from(capacity[b]))
                        .cmp(&(u64::from(load[b] + p[b] + 1) * u64::from(capacity[a])))
                })?;
                p[k] += 1;
            }
            layouts.push(("spread by threads per CPU (the CPUs are oversubscribed)".into(), p));
        }
        let mut scored: Vec<(f64, f64, String, Vec<u32>, Prediction)> = Vec::new();
        let mut all_copies = copies;
        all_copies.push(1);
        for (label, p) in layouts {
            let mut all = others.clone();
            all.push(Placed {
                character,
                threads_per_node: p.clone(),
                memory: memory.clone(),
            });
            let Ok(pred) = numa::predict_copies(mem, &all, Some(&all_copies), false) else {
                continue;
            };
            let mine = pred.programs.last()?.time_s;
            let harm = before.as_ref().map_or(1.0, |b| {
                b.programs
                    .iter()
                    .zip(&pred.programs)
                    .map(|(was, now)| now.time_s / was.time_s)
                    .fold(1.0, f64::max)
            });
            scored.push((mine, harm, label, p, pred));
        }
        scored.sort_by(|a, b| a.0.total_cmp(&b.0).then(a.1.total_cmp(&b.1)));
        let fastest = scored.first()?.0;
        // Layouts within NEAR_TIE of the fastest are as good for this job
        // (a compute job's layouts differ by a remote access or two): among
        // them keep the free CPUs most even across NUMA nodes, so a later
        // memory-bound job can still spread. Taking the marginally fastest
        // compacted a compute job onto one node in s2-node.toml and left
        // the next memory-bound job a single controller (8% slower overall).
        let imbalance = |p: &[u32]| {
            let after: Vec<u32> = free
                .iter()
                .zip(p)
                .zip(&capacity)
                .filter(|(_, c)| **c > 0)
                .map(|((f, t), _)| f.saturating_sub(*t))
                .collect();
            after.iter().max().unwrap_or(&0) - after.iter().min().unwrap_or(&0)
        };
        let (_, harm, label, p, pred) = scored
            .iter()
            .filter(|s| s.0 <= fastest * (1.0 + NEAR_TIE))
            .min_by(|a, b| {
                imbalance(&a.3)
                    .cmp(&imbalance(&b.3))
                    .then(a.1.total_cmp(&b.1))
                    .then(a.0.total_cmp(&b.0))
            })?
            .clone();
        let best_t = scored.iter().find(|s| s.2 == label).map_or(fastest, |s| s.0);
        let others_text: Vec<String> = scored
            .iter()
            .filter(|s| s.2 != label)
            .take(3)
            .map(|(t, _, l, _, _)| format!("{l} {:.2}x", t / best_t))
            .collect();
        let where_ = if memory.is_empty() {
            String::new()
        } else {
            let shares: Vec<String> = memory
                .iter()
                .map(|x| format!("{:.0}%", x / memory.iter().sum::<f64>() * 100.0))
                .collect();
            format!(", memory {} by NUMA node", shares.join("/"))
        };
        let why = format!(
            "{name} ({threads} threads, {gbps:.1} GB/s from {source}{where_}): {label} {p:?}{}{}",
            if others_text.is_empty() {
                ", the only layout that fits".to_string()
            } else {
                format!(", predicted time vs the others: {}", others_text.join(", "))
            },
            if harm > 1.0 + 1e-9 {
                format!("; slows the others by up to {:.1}%", (harm - 1.0) * 100.0)
            } else {
                String::new()
            }
        );
        Some((
            Placed {
                character,
                threads_per_node: p,
                memory,
            },
            why,
            pred,
        ))
    }
}

#[cfg(test)]
mod tests;
