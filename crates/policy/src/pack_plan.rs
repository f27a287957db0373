//! PALM with a plan: for a job whose threads beat N times between barriers
//! (`pack:palm:barrier_beats=N`, or by default learned from the heartbeats:
//! [`BarrierLearner`], where it suits: [`plan_suits`]), who runs now and
//! until when, from McNaughton's wrap-around schedule of each thread's work
//! left to the next barrier on K identical cores.
//!
//! Why: between ticks the kernel switches between busy threads only when
//! one is moved away (`workloads/switch_probe`), so PALM's groups share a
//! core in turns of up to a tick, and a thread waiting at a spin barrier
//! can hold the core its partner needs. With a plan, the threads that
//! should run are in [`Lane::Front`](crate::Lane), one per core, and the
//! others in `Back`, which yields to them at once; the next turn comes
//! when the plan next changes (when every thread with work left in the
//! phase runs now: when the next phase's schedule first changes, with no
//! turn at the barrier). `workloads/palm_bound` measured the same
//! schedule from inside the process: 1.075x thread reduction's time with
//! 2 ms phases on the 2-CPU VM, where PALM's rule by affinity took 1.15x.
//!
//! Two hazards, both met in that prototype:
//! - a thread that has done its last beat of a phase but not yet reached
//!   the barrier looks like one waiting there; held back while the others
//!   spin in front of it, it would never run. When no thread beats between
//!   two turns at least two beats' time apart, the plan holds another one
//!   instead (a quicker turn that saw no beat looks again two beats later);
//! - the running rate, which turns beats left into time, is learned only
//!   from intervals in which a thread did not finish its work left (it spun
//!   for an unknown part of those); such an interval can only raise it.

use std::collections::{BTreeMap, BTreeSet};

use crate::TaskId;

/// The plan's state for one job.
#[derive(Debug, Clone)]
pub(crate) struct BarrierPlan {
    beats_per_barrier: u64,
    /// Tasks held back now.
    held: BTreeSet<TaskId>,
    /// Each task's beats and work left at the last turn.
    last: BTreeMap<TaskId, (u64, f64)>,
    last_ns: Option<u64>,
    /// Decaying sums of beats and nanoseconds over uncensored intervals.
    beats_sum: f64,
    ns_sum: f64,
}

/// One turn's decision.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Turn {
    /// Tasks that run now, at most one per core.
    pub runners: Vec<TaskId>,
    /// Tasks held back.
    pub held: Vec<TaskId>,
    /// When the plan next changes, once the rate is known.
    pub next_ns: Option<u64>,
}

/// How much an old interval still counts each turn.
const DECAY: f64 = 0.98;
/// Beats the sums need before the rate is trusted.
const MIN_BEATS: f64 = 4.0;

impl BarrierPlan {
    pub(crate) fn new(beats_per_barrier: u64) -> Self {
        BarrierPlan {
            beats_per_barrier: beats_per_barrier.max(1),
            held: BTreeSet::new(),
            last: BTreeMap::new(),
            last_ns: None,
            beats_sum: 0.0,
            ns_sum: 0.0,
        }
    }

    /// The beats between barriers the plan is for.
    pub(crate) fn beats_per_barrier(&self) -> u64 {
        self.beats_per_barrier
    }

    /// Beats per nanosecond of a running thread, once learned.
    pub(crate) fn rate(&self) -> Option<f64> {
        (self.beats_sum >= MIN_BEATS && self.ns_sum > 0.0).then(|| self.beats_sum / self.ns_sum)
    }

    /// The turn at `now_ns` for `workers` (task, beats so far, rank) on
    /// `cores` identical cores.
    pub(crate) fn turn(&mut self, now_ns: u64, workers: &[(TaskId, u64, u32)], cores: usize) -> Turn {
        let per = self.beats_per_barrier;
        let least = workers.iter().map(|w| w.1).min().unwrap_or(0);
        let barrier = (least / per + 1) * per;
        let left: Vec<(TaskId, f64, u32)> = workers
            .iter()
            .map(|&(id, b, rank)| (id, barrier.saturating_sub(b) as f64, rank))
            .collect();
        // Learn the rate from the interval just ended.
        let moved = workers
            .iter()
            .any(|(id, b, _)| self.last.get(id).is_none_or(|l| l.0 != *b));
        // Long enough for two beats of a running thread: a quicker turn that
        // saw no beat proves nothing.
        let long_enough = match (self.last_ns, self.rate()) {
            (Some(then), Some(r)) => now_ns.saturating_sub(then) as f64 * r >= 2.0,
            _ => true,
        };
        if let Some(then) = self.last_ns {
            let ns = now_ns.saturating_sub(then) as f64;
            for &(id, b, _) in workers {
                let Some(&(was, was_left)) = self.last.get(&id) else {
                    continue;
                };
                if self.held.contains(&id) || was_left <= 0.0 || ns <= 0.0 {
                    continue;
                }
                let did = b.saturating_sub(was) as f64;
                if did < was_left {
                    self.beats_sum = DECAY * self.beats_sum + did;
                    self.ns_sum = DECAY * self.ns_sum + ns;
                } else if self.rate().is_none_or(|r| did / ns > r) {
                    self.beats_sum = did / ns * self.ns_sum;
                }
            }
        }
        self.last_ns = Some(now_ns);
        self.last = workers
            .iter()
            .zip(&left)
            .map(|(w, l)| (w.0, (w.1, l.1)))
            .collect();
        let (mut runners, mut next_beats) = match self.through_the_barrier(&left, cores) {
            Some((through, beats)) => {
                // No piece starts before the barrier, and the same threads
                // start the next phase: no turn at the barrier, the next one
                // comes when the next phase's schedule first changes. For the
                // rate, the interval covers the next phase's work of the
                // threads that run right up to the barrier; any other waits
                // there for a while, spinning without beats, and teaches
                // nothing.
                let span = left.iter().map(|l| l.1).fold(0.0, f64::max);
                for (id, l) in self.last.iter_mut() {
                    l.1 = if l.1 >= span && through.contains(id) {
                        l.1 + per as f64
                    } else {
                        0.0
                    };
                }
                (through, beats)
            }
            None => mcnaughton(&left, &self.held, cores),
        };
        if !moved && !self.held.is_empty() && !long_enough {
            // Look again once two beats could have come.
            runners = workers
                .iter()
                .map(|w| w.0)
                .filter(|id| !self.held.contains(id))
                .collect();
            next_beats = 2.0;
        } else if !moved && !self.held.is_empty() {
            // Nobody beat: a held thread may be the one the others wait for.
            // Rotate the holds by rank.
            let mut by_rank: Vec<(u32, TaskId)> = left.iter().map(|l| (l.2, l.0)).collect();
            by_rank.sort_unstable();
            let n = by_rank.len();
            let first_held = by_rank
                .iter()
                .position(|(_, id)| self.held.contains(id))
                .unwrap_or(0);
            let held_count = n.saturating_sub(cores.min(n));
            let now_held: BTreeSet<TaskId> = (0..held_count)
                .map(|i| by_rank[(first_held + 1 + i) % n].1)
                .collect();
            runners = by_rank
                .iter()
                .map(|r| r.1)
                .filter(|id| !now_held.contains(id))
                .collect();
            next_beats = 2.0;
        }
        let held: Vec<TaskId> = workers
            .iter()
            .map(|w| w.0)
            .filter(|id| !runners.contains(id))
            .collect();
        self.held = held.iter().copied().collect();
        let next_ns = self.rate().map(|r| (next_beats / r) as u64);
        Turn {
            runners,
            held,
            next_ns,
        }
    }
}

impl BarrierPlan {
    /// When every thread with work left in this phase runs now (no more
    /// of them than cores), no piece starts before the barrier, and a turn
    /// there would only confirm who starts the next phase: the runners
    /// that take the plan through it (those still at work, and on the
    /// cores they leave, the threads the next phase starts with: not held
    /// first, then by rank), and the beats to the next phase's first
    /// change. Such turns (at the barrier, or when a thread's piece ended
    /// and left its core to a thread already there) were a third of the
    /// turns with 3 threads on 2 cores (930 a run of the 2 ms benchmark
    /// against 600), each costing tens of µs of herd's CPU live.
    fn through_the_barrier(&self, left: &[(TaskId, f64, u32)], cores: usize) -> Option<(Vec<TaskId>, f64)> {
        let span = left.iter().map(|l| l.1).fold(0.0, f64::max);
        let at_work = left.iter().filter(|l| l.1 > 0.0).count();
        if span <= 0.0 || left.len() < cores || at_work > cores {
            return None;
        }
        let mut order: Vec<&(TaskId, f64, u32)> = left.iter().collect();
        order.sort_by_key(|l| (l.1 <= 0.0, self.held.contains(&l.0), l.2));
        let runners: Vec<TaskId> = order.iter().take(cores).map(|l| l.0).collect();
        let per = self.beats_per_barrier as f64;
        let next: Vec<(TaskId, f64, u32)> = left.iter().map(|&(id, _, rank)| (id, per, rank)).collect();
        let held: BTreeSet<TaskId> = left
            .iter()
            .map(|l| l.0)
            .filter(|id| !runners.contains(id))
            .collect();
        let (again, first) = mcnaughton(&next, &held, cores);
        let same = again.len() == runners.len() && again.iter().all(|id| runners.contains(id));
        same.then_some((runners, span + first))
    }
}

/// McNaughton's wrap-around schedule of `left` (task, work left in beats,
/// rank) on `cores` identical cores, longest first (among equals, tasks not
/// held now first, then by rank, so that a tie never swaps threads): the
/// tasks whose piece starts now, and the beats until the first of those
/// pieces ends. Tasks with nothing left are not scheduled. With nothing
/// left anywhere: no runners and one beat.
pub(crate) fn mcnaughton(
    left: &[(TaskId, f64, u32)],
    held: &BTreeSet<TaskId>,
    cores: usize,
) -> (Vec<TaskId>, f64) {
    let mut order: Vec<&(TaskId, f64, u32)> = left.iter().filter(|l| l.1 > 0.0).collect();
    order.sort_by(|a, b| {
        b.1.total_cmp(&a.1)
            .then(held.contains(&a.0).cmp(&held.contains(&b.0)))
            .then(a.2.cmp(&b.2))
    });
    let cores = cores.max(1);
    let sum: f64 = order.iter().map(|l| l.1).sum();
    let longest = order.first().map_or(0.0, |l| l.1);
    let span = (sum / cores as f64).max(longest);
    let (mut runners, mut next) = (Vec::new(), f64::INFINITY);
    let (mut t, mut core) = (0.0f64, 0usize);
    const EPS: f64 = 1e-9;
    for &&(id, r, _) in &order {
        if core >= cores {
            break;
        }
        if t < EPS {
            // A piece that starts now on this core.
            runners.push(id);
            next = next.min(r.min(span));
        }
        if t + r < span - EPS {
            t += r;
            continue;
        }
        // Fills this core: the rest of it, if any, runs now on the next.
        let first = r - (span - t);
        core += 1;
        t = 0.0;
        if first > EPS && core < cores {
            runners.push(id);
            next = next.min(first);
            t = first;
        }
    }
    (runners, if next.is_finite() { next.max(1.0) } else { 1.0 })
}

/// Learns the beats between barriers (`barrier_beats=auto`) from what the
/// heartbeats show on their own. With a barrier every N beats, no thread
/// is ever past the first multiple of N above the laggard: it would have
/// passed a barrier the laggard has not reached. So every snapshot with
/// the threads two or more beats apart refutes each candidate with a
/// multiple strictly between the laggard and the leader, and N (and its
/// multiples) survive every snapshot. The guess is the smallest candidate
/// left, once the laggard has passed `PASSED` of its multiples and the
/// threads have been seen apart across every other place in its period
/// (every residue but 0 strictly between a laggard and a leader): a
/// candidate that survived only because the threads kept in step (PALM's
/// groups keep them within a beat for long stretches) has not been tested,
/// and a wrong guess leaves holes where the threads barely diverged. Nor
/// has one that was not tested often: a snapshot with L places strictly
/// between laggard and leader would refute a wrong candidate C at a random
/// offset with probability L/C, so each counts -log2(1 - L/C) bits of
/// evidence, and a guess needs `EVIDENCE_BITS`.
///
/// Why not the levels at which all threads meet: PALM keeps their progress
/// so even that they meet mid-phase too (in simulation, more often than at
/// barriers). A thread that was not there before (a new thread, or a job
/// started again) did not pass the same barriers from 0: the learner
/// starts again.
#[derive(Debug, Clone, Default)]
pub(crate) struct BarrierLearner {
    /// The threads it has seen, sorted.
    threads: Vec<TaskId>,
    /// Candidates not refuted yet, ascending (filled at the first snapshot),
    /// each with its first multiple above the laggard's beats when it was
    /// last tested (0: not yet worked out).
    alive: Vec<(u64, u64)>,
    started: bool,
    /// The laggard's beats at the last snapshot, and snapshots seen.
    least: u64,
    seen: u32,
    /// The last `SPANS` snapshots' places strictly between the laggard and
    /// the leader (first, last), where there were any.
    spans: std::collections::VecDeque<(u64, u64)>,
    /// The residues those places cover modulo `covered_for`, and how many.
    covered_for: u64,
    covered: Vec<bool>,
    covered_count: u64,
    /// The evidence for `covered_for`, in bits.
    evidence_bits: f64,
}

/// The most beats between barriers the learner considers.
const MAX_BEATS: u64 = 4096;
/// Multiples of the guess the laggard must have passed.
const PASSED: u64 = 8;
/// Snapshots with the threads apart remembered for a new guess's test.
const SPANS: usize = 1024;
/// The evidence a guess needs: a wrong one would survive it by chance about
/// once in a thousand. A wrong guess that runs the plan soon meets its
/// refutation, since the plan lets the threads drift apart by up to a
/// phase (s4-vm-3on2: 8 for 16 beats, for 12 ms of a 129 ms run).
const EVIDENCE_BITS: f64 = 10.0;

impl BarrierLearner {
    /// Takes one snapshot of the workers' beat counts.
    pub(crate) fn observe(&mut self, workers: &[(TaskId, u64)]) {
        // Every turn: the thread list is rebuilt only when it changes.
        let new = workers.iter().any(|w| self.threads.binary_search(&w.0).is_err());
        if new {
            *self = BarrierLearner::default();
        }
        if new || workers.len() != self.threads.len() {
            self.threads = workers.iter().map(|w| w.0).collect();
            self.threads.sort_unstable();
        }
        self.seen = self.seen.saturating_add(1);
        if workers.len() < 2 {
            return;
        }
        if !self.started {
            self.started = true;
            self.alive = (2..=MAX_BEATS).map(|n| (n, 0)).collect();
        }
        let (lo, hi) = workers
            .iter()
            .fold((u64::MAX, 0), |(lo, hi), w| (lo.min(w.1), hi.max(w.1)));
        // A thread gone can only raise the laggard's count, and a new one
        // starts the learner again; should it fall all the same, the kept
        // multiples are worked out again.
        if lo < self.least {
            self.alive.iter_mut().for_each(|(_, next)| *next = 0);
        }
        self.least = lo;
        if hi - lo < 2 {
            return;
        }
        let span = (lo + 1, hi - 1);
        if self.spans.len() == SPANS {
            self.spans.pop_front();
        }
        self.spans.push_back(span);
        // Candidates at or above the leader have no multiple below it to
        // refute: only those below are looked at. n is refuted when a
        // multiple of it lies strictly between the laggard and the leader,
        // that is when the first one above the laggard, (lo / n + 1) * n,
        // is below the leader. That multiple is kept and worked out again
        // (a 64-bit division) only once the laggard has reached it (see
        // the reset above). The survivors are kept in place: a new list of
        // them, grown push by push every turn, was two fifths of `herd sim
        // scenarios/s4-consolidation.toml`.
        let below = self.alive.partition_point(|&(n, _)| n < hi);
        let mut at = 0;
        self.alive.retain_mut(|(n, next)| {
            at += 1;
            if at > below {
                return true;
            }
            if *next <= lo {
                *next = (lo / *n + 1) * *n;
            }
            *next >= hi
        });
        // The smallest candidate is tested once the laggard has passed
        // enough of its multiples (before that, it is not worth the work:
        // threads drifting apart change it every snapshot).
        let Some(&(n, _)) = self.alive.first().filter(|&&(n, _)| lo >= PASSED * n) else {
            return;
        };
        if n == self.covered_for {
            self.cover(span);
        } else {
            // A new guess: what the remembered snapshots covered of it.
            (self.covered_for, self.covered, self.covered_count) = (n, vec![false; n as usize], 0);
            self.evidence_bits = 0.0;
            let spans = std::mem::take(&mut self.spans);
            for &span in &spans {
                self.cover(span);
            }
            self.spans = spans;
        }
    }

    /// Marks the residues of the places `first..=last` modulo the guess.
    fn cover(&mut self, (first, last): (u64, u64)) {
        let n = self.covered_for;
        // last - first + 1 < n, or the span would have refuted n.
        self.evidence_bits -= (1.0 - (last + 1 - first) as f64 / n as f64).log2();
        if self.covered_count + 1 >= n {
            return;
        }
        for x in first..=last.min(first + n - 1) {
            let r = (x % n) as usize;
            if !self.covered[r] {
                self.covered[r] = true;
                self.covered_count += 1;
            }
        }
    }

    /// The beats between barriers, once the smallest candidate left has
    /// stood enough tests.
    pub(crate) fn learned(&self) -> Option<u64> {
        let &(n, _) = self.alive.first()?;
        (n == self.covered_for
            && self.covered_count + 1 >= n
            && self.evidence_bits >= EVIDENCE_BITS
            && self.least >= PASSED * n)
            .then_some(n)
    }

    /// Snapshots seen of these threads.
    pub(crate) fn seen(&self) -> u32 {
        self.seen
    }

    /// Whether the heartbeats have refuted `n` beats between barriers.
    pub(crate) fn refuted(&self, n: u64) -> bool {
        self.started
            && (!(2..=MAX_BEATS).contains(&n) || self.alive.binary_search_by_key(&n, |&(c, _)| c).is_err())
    }

    /// Whether every candidate was refuted: the job's barriers, if any,
    /// come at no fixed number of beats.
    pub(crate) fn gave_up(&self) -> bool {
        self.started && self.alive.is_empty()
    }
}

/// Whether the plan suits `threads` threads with `beats` beats between
/// barriers on `cores` cores, when the user did not ask for it
/// (`barrier_beats=auto`): fewer than two threads a core
/// (`threads < 2 * cores`), and McNaughton's schedule of a phase's equal
/// work has no piece shorter than two beats. The other shapes lost to
/// PALM's groups in simulation: 16 threads on 15 cores with 10 beats a
/// phase have pieces of 2/3 of a beat, which turns of at least 0.125 ms
/// cannot follow (s4-sync-15: 0.074 s against the groups' 0.064); with two
/// or more threads a core each core runs whole threads in turn and every
/// piece moves one (4 on 2: 0.165 s against 0.160, s4-sync-2's 16 on 2:
/// 0.487 against 0.427). 3 threads on 2 cores have pieces of half a phase
/// (0.126 against 0.132).
pub(crate) fn plan_suits(threads: usize, cores: usize, beats: u64) -> bool {
    if cores == 0 || threads <= cores || threads >= 2 * cores {
        return false;
    }
    // In units of 1/cores of a beat: threads end at multiples of
    // beats * cores, cores at multiples of threads * beats.
    let (per_thread, per_core) = ((beats * cores as u64) as u128, (beats * threads as u64) as u128);
    let end = per_thread * threads as u128;
    let mut points: Vec<u128> = (0..=threads as u128)
        .map(|j| j * per_thread)
        .chain((0..=cores as u128).map(|i| i * per_core))
        .filter(|&x| x <= end)
        .collect();
    points.sort_unstable();
    points.dedup();
    let shortest = points.windows(2).map(|w| w[1] - w[0]).min().unwrap_or(0);
    shortest >= 2 * cores as u128
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pack::SEED_AFTER_TURNS;
    use crate::{Lane, Plan, Snapshot};
    use herd_topo::Machine;

    fn snap(now_ns: u64, beats: &[Option<u64>]) -> Snapshot {
        crate::testkit::beats_snapshot(now_ns, beats)
    }

    fn lanes(plan: &Plan) -> Vec<(TaskId, Lane)> {
        let mut l = plan.lanes.clone();
        l.sort_by_key(|x| x.0);
        l
    }

    #[test]
    fn palm_with_barrier_beats_holds_one_thread_and_wakes_when_the_plan_changes() {
        let m = Machine::synthetic("core:2").unwrap();
        let mut p = crate::build("pack:palm:cores=2,barrier_beats=16").unwrap();
        assert_eq!(p.name(), "pack:palm:cores=2,barrier_beats=16");
        // Three workers at a phase's start, and a main thread in join.
        let plan = crate::testkit::decide_once(p.as_mut(), &m, &snap(0, &[Some(0), Some(0), Some(0), None]));
        assert_eq!(
            lanes(&plan),
            vec![(1, Lane::Front), (2, Lane::Front), (3, Lane::Back)]
        );
        // Every worker may use both cores: the kernel gives each front one.
        let all = |t: TaskId| {
            plan.tasks.iter().any(|(id, pl)| {
                *id == t && matches!(pl, crate::Placement::Run { cpus, .. } if cpus.len() == 2)
            })
        };
        assert!(all(1) && all(2) && all(3));
        // 1 beat per 100 us while running: after 8 beats the second's first
        // piece ends and the third takes its place.
        let plan =
            crate::testkit::decide_once(p.as_mut(), &m, &snap(800_000, &[Some(8), Some(8), Some(0), None]));
        assert_eq!(lanes(&plan), vec![(2, Lane::Back), (3, Lane::Front)]);
        let next = plan.next_period_ns.unwrap();
        assert!(
            (700_000..=900_000).contains(&next),
            "8 beats at 1 per 100 us: {next}"
        );
        // Without heartbeats, or with no more threads than cores, it is
        // PALM's own rule, and every lane goes back to fair.
        let plan =
            crate::testkit::decide_once(p.as_mut(), &m, &snap(900_000, &[Some(9), Some(9), None, None]));
        assert_eq!(
            lanes(&plan),
            vec![(1, Lane::Fair), (2, Lane::Fair), (3, Lane::Fair)]
        );
    }

    fn ids(v: &[TaskId]) -> Vec<TaskId> {
        let mut v = v.to_vec();
        v.sort_unstable();
        v
    }

    #[test]
    fn three_equal_threads_on_two_cores_hold_one_for_half_a_phase() {
        let none = BTreeSet::new();
        let (run, next) = mcnaughton(&[(1, 16.0, 0), (2, 16.0, 1), (3, 16.0, 2)], &none, 2);
        // The span is 24: 1 runs 16 on core 0, 2 starts on core 1 for 8
        // (its first part), then 3 takes core 1.
        assert_eq!(ids(&run), vec![1, 2]);
        assert_eq!(next, 8.0);
        // Eight beats later: 1 has 8 left, 2 has 8 left, 3 has 16: 3 and
        // one of the others run; the tie keeps the one not held.
        let held: BTreeSet<TaskId> = [3].into();
        let (run, next) = mcnaughton(&[(1, 8.0, 0), (2, 8.0, 1), (3, 16.0, 2)], &held, 2);
        assert_eq!(ids(&run), vec![1, 3]);
        assert_eq!(next, 8.0);
        // At the end, the two with work left run, the one at the barrier waits.
        let (run, _) = mcnaughton(&[(1, 0.0, 0), (2, 8.0, 1), (3, 8.0, 2)], &none, 2);
        assert_eq!(ids(&run), vec![2, 3]);
    }

    #[test]
    fn the_last_pieces_of_a_phase_run_on_through_the_barrier() {
        let mut p = BarrierPlan::new(16);
        // 3 on 2, 16 beats a phase, at the start: 1 runs the whole phase,
        // 2 is cut after 8 beats. Not the last pieces: no look beyond.
        let start = [(1, 16.0, 0), (2, 16.0, 1), (3, 16.0, 2)];
        assert_eq!(p.through_the_barrier(&start, 2), None);
        // Half way (1 is done): 2 and 3 run to the barrier, and the next
        // phase starts with them (1 waits: it was held), so the next turn
        // is 8 beats after the barrier, when 1 takes its core back.
        let half = [(1, 0.0, 0), (2, 8.0, 1), (3, 8.0, 2)];
        let held: BTreeSet<TaskId> = [1].into();
        let (run, next) = mcnaughton(&half, &held, 2);
        assert_eq!((ids(&run), next), (vec![2, 3], 8.0));
        p.held = held;
        assert_eq!(p.through_the_barrier(&half, 2), Some((vec![2, 3], 16.0)));
        // Only 3 has work left: it finishes, and 1 (not held, the lower
        // rank) starts the next phase with it on the core it would wait
        // on anyway; the next turn is 1 beat to the barrier and 8 beyond.
        p.held = BTreeSet::new();
        let early = [(1, 0.0, 0), (2, 0.0, 1), (3, 1.0, 2)];
        assert_eq!(p.through_the_barrier(&early, 2), Some((vec![3, 1], 9.0)));
        // Three at work on two cores: a piece starts before the barrier.
        assert_eq!(
            p.through_the_barrier(&[(1, 2.0, 0), (2, 1.0, 1), (3, 1.0, 2)], 2),
            None
        );
    }

    #[test]
    fn the_schedule_runs_one_thread_per_core_now() {
        // 5 threads on 3 cores, unequal work: every core runs something
        // now, and no thread runs on two cores at once.
        let left = [(1, 10.0, 0), (2, 9.0, 1), (3, 7.0, 2), (4, 3.0, 3), (5, 1.0, 4)];
        let (run, next) = mcnaughton(&left, &BTreeSet::new(), 3);
        assert_eq!(run.len(), 3);
        assert_eq!(ids(&run).len(), ids(&run).iter().collect::<BTreeSet<_>>().len());
        assert!((1.0..=10.0).contains(&next), "{next}");
        assert_eq!(mcnaughton(&[(1, 0.0, 0)], &BTreeSet::new(), 2), (vec![], 1.0));
    }

    #[test]
    fn the_rate_is_learned_from_intervals_a_thread_did_not_finish() {
        let mut p = BarrierPlan::new(16);
        // 3 threads, 2 cores; 1 beat per 100 us while running.
        let t = p.turn(0, &[(1, 0, 0), (2, 0, 1), (3, 0, 2)], 2);
        assert_eq!(t.next_ns, None, "no rate yet");
        let mut beats = [0u64; 3];
        let mut now = 0;
        for _ in 0..6 {
            now += 400_000;
            for (i, id) in [1, 2, 3].iter().enumerate() {
                if !p.held.contains(id) {
                    beats[i] = (beats[i] + 4).min(16);
                }
            }
            p.turn(now, &[(1, beats[0], 0), (2, beats[1], 1), (3, beats[2], 2)], 2);
        }
        let r = p.rate().expect("learned");
        assert!((r - 1e-5).abs() < 2e-6, "{r}");
    }

    #[test]
    fn when_nobody_beats_another_thread_is_held() {
        let mut p = BarrierPlan::new(16);
        // All three at 16: a phase just ended, or one of them has done its
        // last beat and not yet reached the barrier the others spin at.
        let w = [(1, 16, 0), (2, 16, 1), (3, 16, 2)];
        let first = p.turn(0, &w, 2);
        assert_eq!(first.held.len(), 1);
        // Nothing moved: the hold moves on, round the ranks.
        let second = p.turn(1_000_000, &w, 2);
        assert_eq!(second.held.len(), 1);
        assert_ne!(second.held, first.held);
        let third = p.turn(2_000_000, &w, 2);
        assert_ne!(third.held, second.held);
    }

    /// The learner sees threads 1, 2, ... at `beats`.
    fn see(l: &mut BarrierLearner, beats: &[u64]) {
        let w: Vec<(TaskId, u64)> = beats
            .iter()
            .enumerate()
            .map(|(i, &b)| (i as TaskId + 1, b))
            .collect();
        l.observe(&w);
    }

    #[test]
    fn the_learner_finds_the_beats_between_barriers_and_refutes_the_rest() {
        let mut l = BarrierLearner::default();
        // 3 threads, 16 beats a phase: within a phase they drift apart by
        // up to 3 beats, and the leaders wait at the barrier.
        for phase in 0..PASSED {
            let base = 16 * phase;
            for step in 0..16u64 {
                let lead = (base + step + 3).min(base + 16);
                see(&mut l, &[lead, (base + step + 1).min(base + 16), base + step]);
            }
            // The laggard has not yet passed PASSED barriers.
            assert_eq!(l.learned(), None, "too early at phase {phase}");
        }
        let done = 16 * PASSED;
        see(&mut l, &[done + 2, done + 1, done]);
        assert_eq!(l.learned(), Some(16));
        // A thread gone changes nothing; a new one (here the job started
        // again, from 0) starts the learning again.
        l.observe(&[(1, done + 2), (2, done + 1)]);
        assert_eq!(l.learned(), Some(16));
        l.observe(&[(1, done + 2), (2, done + 1), (4, 0)]);
        assert_eq!(l.learned(), None);
        // Threads that drift apart refute every candidate.
        let mut l = BarrierLearner::default();
        for i in 0..2000u64 {
            see(&mut l, &[i * 3, i * 2, i]);
        }
        assert!(l.gave_up());
        assert_eq!(l.learned(), None);
        // Threads in lockstep show nothing: no guess.
        let mut l = BarrierLearner::default();
        for i in 0..2000u64 {
            see(&mut l, &[i + 1, i]);
        }
        assert_eq!(l.learned(), None);
        assert!(!l.gave_up());
    }

    /// The learner's kept multiples refute exactly what testing every
    /// candidate below the leader each turn refutes, as the laggard moves
    /// on slowly, leaps (a thread gone) and, against the rule, falls back.
    #[test]
    fn kept_multiples_refute_what_testing_every_candidate_refutes() {
        let mut l = BarrierLearner::default();
        let mut naive: Vec<u64> = (2..=MAX_BEATS).collect();
        let mut x = 7u64;
        let mut draw = |m: u64| {
            x = x
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            (x >> 33) % m
        };
        let mut lo = 0u64;
        for turn in 0..3000 {
            lo += match turn % 500 {
                499 => 900,
                250 => 0,
                _ => draw(4),
            };
            if turn == 1700 {
                lo /= 2;
            }
            let hi = lo + draw(if turn < 2000 { 60 } else { 3 });
            see(&mut l, &[hi, lo + draw(hi - lo + 1), lo]);
            if hi - lo >= 2 {
                naive.retain(|&n| n >= hi || (lo / n + 1) * n >= hi);
            }
            if turn % 50 == 0 || turn > 2990 {
                for n in 0..=MAX_BEATS + 1 {
                    let kept = (2..=MAX_BEATS).contains(&n) && naive.binary_search(&n).is_ok();
                    assert_eq!(l.refuted(n), !kept, "turn {turn}, n {n}");
                }
            }
        }
        assert!(!naive.is_empty() && naive.len() < 4000, "{}", naive.len());
    }

    #[test]
    fn palm_learns_the_barriers_and_runs_the_plan_only_where_lanes_apply() {
        let m = Machine::synthetic("core:2").unwrap();
        for lanes_apply in [true, false] {
            let mut p = crate::build("pack:palm:cores=2").unwrap();
            assert_eq!(p.name(), "pack:palm:cores=2", "auto is the default");
            let (mut notes, mut lanes) = (Vec::new(), 0);
            // Three threads, 16 beats a phase, as in the learner's test.
            let mut now = 0;
            for phase in 0..PASSED + 4 {
                let base = 16 * phase;
                for step in 0..16u64 {
                    now += 100_000;
                    let beats = [
                        Some((base + step + 3).min(base + 16)),
                        Some((base + step + 1).min(base + 16)),
                        Some(base + step),
                    ];
                    let mut view = snap(now, &beats);
                    view.lanes_apply = lanes_apply;
                    let plan = crate::testkit::decide_once(p.as_mut(), &m, &view);
                    lanes += plan.lanes.iter().filter(|l| l.1 != Lane::Fair).count();
                    notes.extend(plan.note.map(|n| n.to_string()));
                }
            }
            let learned: Vec<&String> = notes.iter().filter(|n| n.contains("learned")).collect();
            assert_eq!(learned.len(), 1, "said once: {notes:?}");
            assert!(learned[0].contains("16 beats between barriers"), "{notes:?}");
            assert_eq!(p.findings(), vec![(0, crate::Finding::BarrierBeats(Some(16)))]);
            if lanes_apply {
                assert!(learned[0].contains("running the plan"), "{notes:?}");
                assert!(lanes > 0);
            } else {
                assert!(learned[0].contains("--realtime"), "{notes:?}");
                assert_eq!(lanes, 0, "no lanes where they do not apply");
            }
        }
        // Threads of two jobs (the third is another job's): no learning,
        // no lanes, and said.
        let mut p = crate::build("pack:palm:cores=2").unwrap();
        let (mut notes, mut lanes) = (Vec::new(), 0);
        for i in 0..16 * (PASSED + 4) {
            let mut view = snap(100_000 * (i + 1), &[Some(i), Some(i), Some(i / 16 * 16)]);
            view.lanes_apply = true;
            view.tasks[2].job = 1;
            let plan = crate::testkit::decide_once(p.as_mut(), &m, &view);
            lanes += plan.lanes.len();
            notes.extend(plan.note.map(|n| n.to_string()));
        }
        assert_eq!(lanes, 0);
        assert!(notes.iter().any(|n| n.contains("several jobs")), "{notes:?}");
        assert!(!notes.iter().any(|n| n.contains("learned")), "{notes:?}");
        // Off on request.
        let p = crate::build("pack:palm:cores=2,barrier_beats=0").unwrap();
        assert!(p.findings().is_empty());
        assert_eq!(p.name(), "pack:palm:cores=2,barrier_beats=0");
        assert!(crate::build("pack:palm:barrier_beats=some").is_err());
    }

    #[test]
    fn palm_plans_early_with_what_an_earlier_run_found_until_refuted() {
        let m = Machine::synthetic("core:2").unwrap();
        let mut p = crate::build("pack:palm:cores=2").unwrap();
        let mut know = crate::Knowledge::default();
        know.jobs.insert(
            0,
            crate::Learned {
                barrier_beats: Some(16),
                ..Default::default()
            },
        );
        let (est, mut notes) = (crate::Estimates::default(), Vec::new());
        let mut decide = |p: &mut Box<dyn crate::Policy>, now: u64, beats: &[Option<u64>]| {
            let mut snapshot = snap(now, beats);
            snapshot.lanes_apply = true;
            let plan = p.decide(&crate::View {
                machine: &m,
                snapshot: &snapshot,
                estimates: &est,
                learned: &know,
                oracle: None,
                seed: 1,
                decision: 0,
            });
            notes.extend(plan.note.as_ref().map(|n| n.to_string()));
            plan
        };
        // A few turns in (herd's first ones can be far apart), before the
        // heartbeats could teach it, it holds one of three threads.
        for i in 0..SEED_AFTER_TURNS as u64 - 1 {
            let plan = decide(&mut p, i * 100_000, &[Some(i), Some(i), Some(i)]);
            assert!(plan.lanes.is_empty(), "turn {i}");
        }
        let plan = decide(&mut p, 700_000, &[Some(7), Some(7), Some(7)]);
        assert_eq!(plan.lanes.iter().filter(|l| l.1 == Lane::Back).count(), 1);
        // These threads pass 16 apart: not what the earlier run found. The
        // plan stops, and the profile is to forget it.
        decide(&mut p, 800_000, &[Some(10), Some(20), Some(30)]);
        let plan = decide(&mut p, 900_000, &[Some(12), Some(22), Some(33)]);
        assert!(plan.lanes.iter().all(|l| l.1 == Lane::Fair), "{:?}", plan.lanes);
        assert!(
            notes
                .iter()
                .any(|n| n.contains("16 beats between barriers, from earlier runs; running the plan")),
            "{notes:?}"
        );
        assert_eq!(p.findings(), vec![(0, crate::Finding::BarrierBeats(None))]);
    }

    #[test]
    fn the_plan_suits_few_threads_per_core_and_pieces_of_two_beats() {
        // The live shape: pieces of 8 beats.
        assert!(plan_suits(3, 2, 16));
        assert!(plan_suits(4, 3, 12));
        // S4's 16 threads on 15 cores: pieces of 2/3 of a beat.
        assert!(!plan_suits(16, 15, 10));
        // More than two threads a core, or no more threads than cores.
        assert!(!plan_suits(16, 2, 10));
        assert!(!plan_suits(2, 2, 16));
        // 3 on 2 with 2 beats a phase: pieces of one beat.
        assert!(!plan_suits(3, 2, 2));
        assert!(plan_suits(3, 2, 4));
    }
}
