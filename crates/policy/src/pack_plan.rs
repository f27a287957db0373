//! PALM with a plan (`pack:palm:barrier_beats=N`): for a job whose threads
//! beat N times between barriers, who runs now and until when, from
//! McNaughton's wrap-around schedule of each thread's work left to the next
//! barrier on K identical cores.
//!
//! Why: between ticks the kernel switches between busy threads only when
//! one is moved away (`workloads/switch_probe`), so PALM's groups share a
//! core in turns of up to a tick, and a thread waiting at a spin barrier
//! can hold the core its partner needs. With a plan, the threads that
//! should run are in [`Lane::Front`](crate::Lane), one per core, and the
//! others in `Back`, which yields to them at once; the next turn comes
//! when the plan next changes. `workloads/palm_bound` measured the same
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
        let (mut runners, mut next_beats) = mcnaughton(&left, &self.held, cores);
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

#[cfg(test)]
mod tests {
    use super::*;
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
}
