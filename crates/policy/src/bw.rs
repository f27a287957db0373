//! S1's memory-bandwidth-aware co-scheduling: with more programs than
//! CPUs, choose each slice's co-runners so their predicted bandwidth sums to
//! the group's ideal average bandwidth (IABW), because slowdown grows
//! superlinearly with total bandwidth and an even demand beats bursts.
//!
//! - `bw:iabw` (S1): bandwidth from the learned profiles: the Markov
//!   prediction of each program's next phase and that phase's solo estimate;
//!   IABW from the stored solo times and memory requests, by default over
//!   the work each program has left, every period (`target=iabw`: once,
//!   over whole runs, as S1 states it; see [`BwTarget`]). While any
//!   program's coverage is below 80% it behaves like `linux` and says so.
//! - `bw:oracle`: the same choice from exact solo profiles (S1's upper
//!   bound); only the simulator has them. In herd's model it is a bound on
//!   the inputs, not on the outcome: learned profiles understate
//!   memory-heavy phases by 20-30% (their samples were contended) while
//!   the target, from counted transactions, is not understated, so the
//!   learned policy aims above IABW in true terms, and that pays here.
//!   Exact profiles aimed as high (`scale=1.25`) beat learning again
//!   (docs/results.md, S1).
//! - `bw:greedy`: no history: each program's bandwidth as last measured,
//!   and the target is the mean demand of the present programs per slot.
//!
//! Every variant keeps programs taking turns: the least-served program
//! always runs, and co-runners are chosen among the least-served
//! `window` x slots programs, so no program waits more than a few slices.
//! Without instruction and memory counters (as in most VMs), nothing can be
//! learned: every variant then takes bandwidth from the jobs' memory hints
//! (assuming equal solo times) and its note says so.

use std::collections::BTreeMap;

use herd_profile::iabw;
use rustc_hash::FxHashSet;

use crate::cosched::{Turns, admit};
use crate::param::{Accepts, Args, Entry, Param, Range, Value};
use crate::{JobId, Knowledge, Level, Plan, Policy, Reason, View};

const WINDOW: Param = Param {
    key: "window",
    default: Value::Number(2.0),
    accepts: Accepts::Number {
        range: Range::whole(1, 64),
        words: &[],
    },
    about: "co-runners come from the window x slots least-served programs (fairness vs. choice)",
};

const SCALE: Param = Param {
    key: "scale",
    default: Value::Number(1.0),
    accepts: Accepts::Number {
        range: Range::POSITIVE,
        words: &[],
    },
    about: "aim at the target times this (exact solo demand does best aimed above IABW in herd's model)",
};

const TARGET: Param = Param {
    key: "target",
    default: Value::Word("remaining"),
    accepts: Accepts::Words(&["remaining", "iabw", "fair"]),
    about: "remaining: S1's ideal average bandwidth over the work left, each period; iabw: S1's over the whole run, once (ends with the longest program alone); fair: requests over summed solo times per CPU",
};

/// Registry entry: `bw:iabw`.
pub(crate) const BW_IABW: Entry = Entry {
    name: "bw:iabw",
    about: "S1: co-runners whose predicted bandwidth sums to the group's ideal average (learned profiles; like linux below 80% coverage)",
    params: &[WINDOW, TARGET, SCALE],
    build: |a| build(BwSource::Iabw, a),
    check: None,
};

/// Registry entry: `bw:oracle`.
pub(crate) const BW_ORACLE: Entry = Entry {
    name: "bw:oracle",
    about: "S1's upper bound: bw:iabw with exact solo profiles (simulator only)",
    params: &[WINDOW, TARGET, SCALE],
    build: |a| build(BwSource::Oracle, a),
    check: None,
};

/// Registry entry: `bw:greedy`.
pub(crate) const BW_GREEDY: Entry = Entry {
    name: "bw:greedy",
    about: "bandwidth balancing with no history: last measured bandwidth, target the mean demand",
    params: &[WINDOW],
    build: |a| build(BwSource::Greedy, a),
    check: None,
};

/// A bandwidth co-scheduler from its entry's arguments (greedy has no
/// target or scale: it aims at the mean of what it last measured).
fn build(source: BwSource, a: &Args) -> Box<dyn Policy> {
    let window = a.real("window") as usize;
    if source == BwSource::Greedy {
        return Box::new(BwCosched::with_target(source, window, BwTarget::Iabw));
    }
    let target = match a.word("target") {
        Some("fair") => BwTarget::Fair,
        Some("remaining") => BwTarget::Remaining,
        _ => BwTarget::Iabw,
    };
    Box::new(BwCosched::with_target(source, window, target).scaled(a.real("scale")))
}

/// Coverage below which S1 does not trust a profile (80%).
pub const COVERAGE_GATE: f64 = 0.8;

/// Which bandwidth figures the choice uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BwSource {
    /// Learned profiles with Markov prediction (S1).
    Iabw,
    /// Exact solo profiles from the simulator.
    Oracle,
    /// The last measured bandwidth, no history.
    Greedy,
}

/// What the co-runners' bandwidth should sum to (`bw:iabw`, `bw:oracle`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BwTarget {
    /// S1's IABW over the whole run: requests over the ideal turnaround,
    /// which ends with the longest program alone; computed once per job set.
    Iabw,
    /// The fair-share mean: requests over the summed solo times per CPU.
    /// herd's turns keep every program progressing at the same rate, and
    /// this target does not rest on the one longest (and, when learned,
    /// often most overestimated) solo time.
    Fair,
    /// S1's IABW over the work still to do, recomputed every period:
    /// requests left over the ideal turnaround of the solo time left (the
    /// default). A job's share left is its requests left: the transactions
    /// the learn step has counted this run (`Learned::requests_done`)
    /// against its profile's total. Without traffic counts it is the
    /// whole-run IABW, and a program that makes no memory requests keeps
    /// its whole solo time (its progress does not show). On S1's ten groups
    /// in simulation (`herd sim scenarios/s1-wl*.toml`) this averages
    /// +3.96% over linux against +2.99% for the whole-run target: once
    /// programs finish at different times, the whole-run average is no
    /// longer the average of what is left to run.
    Remaining,
}

/// See the module docs.
#[derive(Debug)]
pub struct BwCosched {
    source: BwSource,
    window: usize,
    target_kind: BwTarget,
    /// The target times this (1: S1's). In herd's model exact solo demand
    /// does best aimed above IABW, where learned estimates land by
    /// themselves (contended samples understate memory-heavy phases).
    scale: f64,
    turns: Turns,
    /// The target and the job set it was computed for.
    target: Option<(Vec<JobId>, f64)>,
    /// Last measured BTR per job, for `bw:greedy`.
    last_btr: BTreeMap<JobId, f64>,
    /// The last note given, so a note appears when the mode changes.
    last_mode: Option<&'static str>,
}

impl BwCosched {
    /// A co-scheduler using `source`, choosing among the `window` x slots
    /// least-served programs.
    pub fn new(source: BwSource, window: usize) -> Self {
        Self::with_target(source, window, BwTarget::Remaining)
    }

    /// [`BwCosched::new`] aiming at `target` instead of S1's IABW.
    pub fn with_target(source: BwSource, window: usize, target: BwTarget) -> Self {
        assert!(window >= 1, "a window of at least one slot-set");
        BwCosched {
            source,
            window,
            target_kind: target,
            scale: 1.0,
            turns: Turns::default(),
            target: None,
            last_btr: BTreeMap::new(),
            last_mode: None,
        }
    }

    /// Aims at the target times `scale` (> 0) instead.
    pub fn scaled(mut self, scale: f64) -> Self {
        assert!(scale.is_finite() && scale > 0.0, "a positive scale");
        self.scale = scale;
        self
    }

    fn base_name(&self) -> &'static str {
        match self.source {
            BwSource::Iabw => "bw:iabw",
            BwSource::Oracle => "bw:oracle",
            BwSource::Greedy => "bw:greedy",
        }
    }
}

/// Relative bandwidth of a memory hint, for machines without counters.
fn hint_btr(h: Option<Level>) -> f64 {
    match h {
        Some(Level::High) => 1.0,
        Some(Level::Medium) => 0.3,
        Some(Level::Low) | None => 0.05,
    }
}

impl Policy for BwCosched {
    /// Its decisions read what learning made of the counters, never the
    /// counters themselves (learning reads them, so the loop asks for them).
    fn reads_counters(&self, _machine: &herd_topo::Machine) -> bool {
        false
    }
    fn name(&self) -> String {
        let mut params = Vec::new();
        if self.window != 2 {
            params.push(format!("window={}", self.window));
        }
        // bw:greedy has no target parameter.
        match self.target_kind {
            _ if self.source == BwSource::Greedy => {}
            BwTarget::Fair => params.push("target=fair".to_string()),
            BwTarget::Iabw => params.push("target=iabw".to_string()),
            BwTarget::Remaining => {}
        }
        if self.scale != 1.0 {
            params.push(format!("scale={}", self.scale));
        }
        if params.is_empty() {
            self.base_name().into()
        } else {
            format!("{}:{}", self.base_name(), params.join(","))
        }
    }

    fn wants_oracle(&self) -> bool {
        self.source == BwSource::Oracle
    }

    fn wants_learning(&self) -> bool {
        true
    }

    fn decide(&mut self, view: &View<'_>) -> Plan {
        let threads = self.turns.account(view.snapshot);
        let capacity = view.machine.cpus().len().max(1);
        let total_threads: usize = threads.values().sum();
        let jobs: Vec<JobId> = threads.keys().copied().collect();
        let (know, mut why): (&Knowledge, String) = match (self.source, view.oracle) {
            (BwSource::Oracle, Some(o)) => (o, String::new()),
            (BwSource::Oracle, None) => (
                view.learned,
                "no exact solo profiles outside the simulator: learned ones instead; ".into(),
            ),
            _ => (view.learned, String::new()),
        };

        // Each job's bandwidth per running thread, and the target.
        let mode: &'static str;
        // Each job's demand per running thread, in job order with one entry
        // a job: a vector, not a map (building a map of every job each turn
        // was a tenth of a decision at 1,024 tasks).
        let mut demand: Vec<(JobId, f64)> = Vec::new();
        let target;
        if total_threads <= capacity {
            if total_threads == 0 {
                return self.turns.apply(view, |_| true, false, "", "");
            }
            mode = "fits";
            why.push_str("every program fits the CPUs: all run");
            target = 0.0;
        } else if !know.counters {
            mode = "hints";
            // Collected, not inserted one by one (a map built insert by
            // insert was a tenth of a decision at 1,024 jobs); the present
            // jobs found by a walk beside the counts while the snapshot
            // lists jobs in order (it does), by a search otherwise (a
            // search per job was 3% of a decision at 1,024 tasks).
            let mut present = threads.finder();
            demand = view
                .snapshot
                .jobs
                .iter()
                .filter(|j| present(j.id).is_some())
                .map(|j| (j.id, hint_btr(j.memory_hint)))
                .collect();
            in_job_order(&mut demand);
            let mean = demand.iter().map(|(_, d)| d).sum::<f64>() / demand.len().max(1) as f64;
            target = mean * capacity as f64;
            why.push_str(
                "no instruction or memory counters: bandwidth from memory_hint \
                 (high 1, medium 0.3, low or none 0.05), solo times assumed equal; \
                 co-runners chosen to keep the hinted demand at the mean",
            );
        } else if self.source == BwSource::Greedy {
            mode = "greedy";
            for &j in &jobs {
                if let Some(b) = know.jobs.get(&j).and_then(|l| l.last_btr) {
                    self.last_btr.insert(j, b);
                }
            }
            self.last_btr.retain(|j, _| threads.contains_key(j));
            let known: Vec<f64> = self.last_btr.values().copied().collect();
            let mean = known.iter().sum::<f64>() / known.len().max(1) as f64;
            demand = jobs
                .iter()
                .map(|&j| (j, self.last_btr.get(&j).copied().unwrap_or(mean)))
                .collect();
            target = mean * capacity as f64;
            why.push_str("no history: last measured bandwidth, target the mean demand per CPU");
        } else {
            // S1's gate: every member's profile must cover 80% of its run.
            let low = jobs
                .iter()
                .map(|j| (j, know.jobs.get(j).map_or(0.0, |l| l.coverage)))
                .find(|(_, c)| *c < COVERAGE_GATE);
            if let Some((j, c)) = low {
                let program = view
                    .snapshot
                    .jobs
                    .iter()
                    .find(|v| v.id == *j)
                    .map_or("?", |v| v.program.as_str());
                let mut plan =
                    self.turns
                        .apply(view, |_| true, false, "bw: gate closed, the kernel decides", "");
                if self.last_mode != Some("gate") {
                    self.last_mode = Some("gate");
                    plan.note = Some(Reason::from(format!(
                        "{}: {why}coverage of {program} is {:.0}% (< {:.0}%): the kernel decides, like linux",
                        self.base_name(),
                        c * 100.0,
                        COVERAGE_GATE * 100.0
                    )));
                }
                return plan;
            }
            mode = "iabw";
            target = self.iabw_target(&jobs, know, view.learned, capacity);
            demand = jobs
                .iter()
                .map(|&j| {
                    let l = know.jobs.get(&j);
                    // Predicted phase's solo BTR; else what was just
                    // measured; else the whole-run mean.
                    let b = l
                        .and_then(|l| l.predicted_btr.or(l.last_btr))
                        .or_else(|| l.and_then(|l| Some(l.mem_requests? / (l.solo_time_s? * 1e6))))
                        .unwrap_or(0.0);
                    (j, b)
                })
                .collect();
            let kind = match self.target_kind {
                BwTarget::Iabw => "IABW",
                BwTarget::Fair => "fair-share mean",
                BwTarget::Remaining => "IABW of the work left",
            };
            why.push_str(&format!(
                "target {kind} {target:.1} transactions/µs from the profiles"
            ));
        }

        // Demand per job: per running thread times its threads; in job
        // order, beside the counts (the jobs without a demand: none). Every
        // branch above leaves `demand` in job order: the hints by sorting,
        // the others built from `jobs`, the counts' keys.
        debug_assert!(demand.is_sorted_by(|a, b| a.0 < b.0), "demand in job order");
        let mut at = demand.iter().peekable();
        let demand: Vec<Option<f64>> = threads
            .entries()
            .map(|&(j, n)| {
                while at.peek().is_some_and(|(k, _)| *k < j) {
                    at.next();
                }
                at.peek().filter(|(k, _)| *k == j).map(|(_, d)| *d * n as f64)
            })
            .collect();
        // Yes or no for each job, in job order; and the jobs chosen, in
        // the order they were chosen.
        let (admitted, chosen) = if mode == "fits" {
            (vec![true; threads.len()], Vec::new())
        } else {
            self.pick(&threads, &demand, capacity, target)
        };
        // Pins give the chosen co-runners CPUs of their own. A slice whose
        // threads outnumber the CPUs (one program wider than the machine,
        // which always runs) has none to give: pinning a few of its threads
        // only binds them where the kernel would move them (hackbench's 80
        // processes under bw:iabw: some pinned every turn, 1.031x Linux).
        let admitted_threads: usize = threads.entries().zip(&admitted).filter(|(_, yes)| **yes).map(|(e, _)| e.1).sum();
        let mut plan = self.turns.apply(
            view,
            threads.flagged(&admitted),
            mode != "fits" && admitted_threads <= capacity,
            "bw: co-runner chosen for an even bandwidth demand",
            "bw: waits its turn; the CPUs are full",
        );
        if self.last_mode != Some(mode) || view.decision == 0 {
            self.last_mode = Some(mode);
            let slice = if mode == "fits" {
                String::new()
            } else {
                // Summed in the order of a hash set the chosen jobs were
                // put in one by one, as it always was: the note's tenth
                // depends on a float sum's last bit (s1-wl07's slice read
                // 166.7, not 166.8, summed in job order). Only when a
                // note is written.
                let mut set: FxHashSet<JobId> = FxHashSet::default();
                for &i in chosen.iter().filter(|&&i| admitted[i]) {
                    set.insert(threads.at(i).0);
                }
                let chosen_btr: f64 = set.iter().filter_map(|j| demand[threads.position(j)?]).sum();
                format!(" (this slice: {chosen_btr:.1} of {target:.1})")
            };
            plan.note = Some(Reason::from(format!("{}: {why}{slice}", self.base_name())));
        }
        plan
    }
}

/// Sorts `demand` by job, keeping one entry a job, the last given, as
/// collecting into an ordered map does (already in order, as the jobs of
/// a snapshot come: nothing to do).
fn in_job_order(demand: &mut Vec<(JobId, f64)>) {
    if demand.is_sorted_by(|a, b| a.0 < b.0) {
        return;
    }
    demand.sort_by_key(|(j, _)| *j);
    demand.dedup_by(|later, kept| {
        let same = later.0 == kept.0;
        if same {
            kept.1 = later.1;
        }
        same
    });
}

impl BwCosched {
    /// The target over the present jobs (S1's IABW, or the fair-share
    /// mean), from the solo times and memory requests in `know`: of whole
    /// runs, recomputed only when the job set changes, or (`Remaining`) of
    /// what is left after the requests `progress` has counted this run.
    fn iabw_target(
        &mut self,
        jobs: &[JobId],
        know: &Knowledge,
        progress: &Knowledge,
        capacity: usize,
    ) -> f64 {
        if let Some((set, t)) = &self.target
            && set == jobs
            && self.target_kind != BwTarget::Remaining
        {
            return *t;
        }
        let (mut req, mut solo) = (Vec::new(), Vec::new());
        for j in jobs {
            if let Some(l) = know.jobs.get(j)
                && let (Some(m), Some(t)) = (l.mem_requests, l.solo_time_s)
            {
                if self.target_kind == BwTarget::Remaining && m > 0.0 {
                    let done = progress.jobs.get(j).map_or(0.0, |l| l.requests_done);
                    let left = (1.0 - done / m).clamp(0.0, 1.0);
                    req.push(m * left);
                    solo.push(t * left);
                } else {
                    req.push(m);
                    solo.push(t);
                }
            }
        }
        // Requests per second over the ideal turnaround -> per µs.
        let per_s = match self.target_kind {
            BwTarget::Iabw | BwTarget::Remaining => iabw::iabw(&req, &solo, capacity),
            BwTarget::Fair => iabw::fair_share(&req, &solo, capacity),
        };
        let t = per_s * 1e-6 * self.scale;
        self.target = Some((jobs.to_vec(), t));
        t
    }

    /// The least-served job runs; the others are chosen from the next
    /// least-served so the total predicted demand lands near `target`:
    /// whether each job runs (by position in `threads`), and the chosen
    /// positions in the order chosen (some may not fit: see [`admit`]).
    fn pick(
        &self,
        threads: &crate::cosched::JobCounts,
        demand: &[Option<f64>],
        capacity: usize,
        target: f64,
    ) -> (Vec<bool>, Vec<usize>) {
        let order = self.turns.least_served(threads);
        // Slots in programs: the machine's CPUs over the mean thread count,
        // so multithreaded programs take their share.
        let mean_threads = order.iter().map(|&i| threads.at(i).1).sum::<usize>() as f64 / order.len().max(1) as f64;
        let slots = ((capacity as f64 / mean_threads).floor() as usize).max(1);
        let pool: Vec<usize> = order.iter().copied().take(self.window * slots).collect();
        let values: Vec<f64> = pool.iter().map(|&i| demand[i].unwrap_or(0.0)).collect();
        let chosen: Vec<usize> = iabw::choose(&values, slots, target, None)
            .into_iter()
            .map(|i| pool[i])
            .collect();
        (admit(chosen.iter().copied(), threads, capacity), chosen)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Learned;

    /// Demands put in job order hold what an ordered map collected from
    /// them holds: one entry a job, the last given.
    #[test]
    fn demands_in_job_order_are_what_a_map_collects() {
        let mut rng = crate::Rng::new(11);
        for round in 0..200 {
            let mut demand: Vec<(JobId, f64)> = (0..rng.below(30))
                .map(|_| (rng.below(12) as JobId, rng.next_f64()))
                .collect();
            let map: BTreeMap<JobId, f64> = demand.iter().copied().collect();
            in_job_order(&mut demand);
            assert_eq!(demand, map.into_iter().collect::<Vec<_>>(), "round {round}");
        }
    }

    fn knowledge(jobs: &[(f64, f64)]) -> Knowledge {
        Knowledge {
            jobs: jobs
                .iter()
                .enumerate()
                .map(|(j, &(requests, solo_s))| {
                    (
                        j as JobId,
                        Learned {
                            mem_requests: Some(requests),
                            solo_time_s: Some(solo_s),
                            coverage: 1.0,
                            ..Learned::default()
                        },
                    )
                })
                .collect(),
            peak_btr: Some(120.0),
            counters: true,
        }
    }

    #[test]
    fn the_default_target_is_s1s_iabw_over_the_work_left() {
        // Three programs on two CPUs: 1e9, 3e9 and no requests; solo 10, 20, 30 s.
        let know = knowledge(&[(1e9, 10.0), (3e9, 20.0), (0.0, 30.0)]);
        let jobs = [0, 1, 2];
        let mut whole = BwCosched::with_target(BwSource::Iabw, 2, BwTarget::Iabw);
        let mut left = BwCosched::new(BwSource::Iabw, 2);
        // Nothing done yet: the two agree, S1's 4e9 / (10/2 + 30) per s.
        let at_start = 4e9 / 35.0 * 1e-6;
        assert!((whole.iabw_target(&jobs, &know, &know, 2) - at_start).abs() < 1e-9);
        assert!((left.iabw_target(&jobs, &know, &know, 2) - at_start).abs() < 1e-9);
        // The first program is done and the second half done: 1.5e9 left
        // over the ideal turnaround of (0, 10, 30) s left.
        let mut done = know.clone();
        done.jobs.get_mut(&0).unwrap().requests_done = 1e9;
        done.jobs.get_mut(&1).unwrap().requests_done = 1.5e9;
        let now = 1.5e9 / (0.0 / 2.0 + 30.0) * 1e-6;
        assert!(
            (left.iabw_target(&jobs, &know, &done, 2) - now).abs() < 1e-9,
            "{}",
            left.iabw_target(&jobs, &know, &done, 2)
        );
        // The whole-run target does not move.
        assert!((whole.iabw_target(&jobs, &know, &done, 2) - at_start).abs() < 1e-9);
        assert_eq!(left.name(), "bw:iabw");
        assert_eq!(whole.name(), "bw:iabw:target=iabw");
    }
}
