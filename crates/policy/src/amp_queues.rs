//! `amp:comprehensive`'s run queues: the tasks on each core kind, kept in
//! IB order both ways while a decision reschedules and rebalances them.
//!
//! S3's reschedule and rule 2 ask of each kind its task count, its highest
//! and lowest IB and the first task in line (highest or lowest IB, lower
//! id on a tie). Collected afresh from every task for each rescheduled
//! task and each rebalancing move, they made a first decision at 1,000
//! tasks quadratic; kept as ordered sets, each question costs a look at
//! one end and each move two removals and two insertions. The answers are
//! the collected ones exactly (see the test against them).

use std::cmp::{Ordering, Reverse};
use std::collections::BTreeSet;

use crate::TaskId;

/// An IB ordered as `f64::total_cmp` orders it (the order the first in
/// line was chosen by).
#[derive(Debug, Clone, Copy)]
struct Ib(f64);

impl PartialEq for Ib {
    fn eq(&self, other: &Self) -> bool {
        self.cmp(other) == Ordering::Equal
    }
}

impl Eq for Ib {}

impl PartialOrd for Ib {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for Ib {
    fn cmp(&self, other: &Self) -> Ordering {
        self.0.total_cmp(&other.0)
    }
}

/// One kind's tasks by IB up and by IB down, each then by id up.
#[derive(Debug, Default, Clone)]
struct Queue {
    up: BTreeSet<(Ib, TaskId)>,
    down: BTreeSet<(Reverse<Ib>, TaskId)>,
}

/// Every kind's queue (index = kind, fastest first).
#[derive(Debug, Default, Clone)]
pub(crate) struct Queues {
    kinds: Vec<Queue>,
}

impl Queues {
    /// `tasks`' (kind, IB, id) queued on `kinds` kinds.
    pub(crate) fn of(kinds: usize, tasks: impl Iterator<Item = (usize, f64, TaskId)>) -> Self {
        let mut each: Vec<Vec<(Ib, TaskId)>> = vec![Vec::new(); kinds];
        for (k, ib, id) in tasks {
            each[k].push((Ib(ib), id));
        }
        // Collected, a set is sorted once and built in bulk (a thousand
        // insertions one by one cost twice as much).
        let kinds = each
            .into_iter()
            .map(|v| Queue {
                down: v.iter().map(|&(ib, id)| (Reverse(ib), id)).collect(),
                up: v.into_iter().collect(),
            })
            .collect();
        Queues { kinds }
    }

    /// Queues task `id` of IB `ib` on kind `k`.
    pub(crate) fn add(&mut self, k: usize, ib: f64, id: TaskId) {
        self.kinds[k].up.insert((Ib(ib), id));
        self.kinds[k].down.insert((Reverse(Ib(ib)), id));
    }

    /// Takes task `id` of IB `ib` off kind `k`.
    pub(crate) fn remove(&mut self, k: usize, ib: f64, id: TaskId) {
        self.kinds[k].up.remove(&(Ib(ib), id));
        self.kinds[k].down.remove(&(Reverse(Ib(ib)), id));
    }

    /// Tasks on kind `k`.
    pub(crate) fn len(&self, k: usize) -> usize {
        self.kinds[k].up.len()
    }

    /// The highest IB on kind `k` as a fold with `f64::max` from -inf
    /// finds it: a NaN is passed over.
    pub(crate) fn max_ib(&self, k: usize) -> f64 {
        let mut ibs = self.kinds[k].down.iter().map(|(Reverse(ib), _)| ib.0);
        ibs.find(|x| !x.is_nan()).unwrap_or(f64::NEG_INFINITY)
    }

    /// The lowest IB on kind `k` as a fold with `f64::min` from +inf finds
    /// it.
    pub(crate) fn min_ib(&self, k: usize) -> f64 {
        let mut ibs = self.kinds[k].up.iter().map(|(ib, _)| ib.0);
        ibs.find(|x| !x.is_nan()).unwrap_or(f64::INFINITY)
    }

    /// The first in line on kind `k`: the highest IB (`highest`) or the
    /// lowest, the lower id on a tie; of those `passed_over` does not
    /// refuse, else the very first.
    pub(crate) fn head(
        &self,
        k: usize,
        highest: bool,
        passed_over: impl Fn(TaskId) -> bool,
    ) -> Option<TaskId> {
        // In line order: by IB down (highest) or up, then by id up.
        fn first(
            mut line: impl Iterator<Item = TaskId> + Clone,
            passed_over: impl Fn(TaskId) -> bool,
        ) -> Option<TaskId> {
            line.clone().find(|&id| !passed_over(id)).or_else(|| line.next())
        }
        let q = &self.kinds[k];
        if highest {
            first(q.down.iter().map(|(_, id)| *id), passed_over)
        } else {
            first(q.up.iter().map(|(_, id)| *id), passed_over)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The answers a vector of every task on a kind gives, as the policy
    /// collected them before.
    fn collected(v: &[(f64, TaskId)], highest: bool, passed_over: impl Fn(TaskId) -> bool) -> Option<TaskId> {
        let first = |a: &&(f64, TaskId), b: &&(f64, TaskId)| {
            let by_ib = if highest {
                a.0.total_cmp(&b.0)
            } else {
                b.0.total_cmp(&a.0)
            };
            by_ib.then(b.1.cmp(&a.1))
        };
        v.iter()
            .filter(|x| !passed_over(x.1))
            .max_by(first)
            .or_else(|| v.iter().max_by(first))
            .map(|x| x.1)
    }

    /// Through adds and removals with tied IBs, a NaN, signed zeros and
    /// infinities, every answer is the collected vector's, and queues
    /// built at once from the same tasks give the same.
    #[test]
    fn answers_match_a_vector_of_every_task() {
        let ibs = [0.3, 0.3, 0.05, f64::NAN, -0.0, 0.0, 0.7, f64::INFINITY, 0.3, 0.05];
        let mut q = Queues::of(2, std::iter::empty());
        let mut v: Vec<Vec<(f64, TaskId)>> = vec![Vec::new(), Vec::new()];
        let mut rng = crate::Rng::new(7);
        let mut next = |n: u64| rng.below(n);
        for step in 0..400 {
            let id = next(12) + 1;
            let k = next(2) as usize;
            let ib = ibs[(id % ibs.len() as u64) as usize];
            if let Some(i) = v[k].iter().position(|x| x.1 == id) {
                v[k].remove(i);
                q.remove(k, ib, id);
            } else if !v[1 - k].iter().any(|x| x.1 == id) {
                v[k].push((ib, id));
                q.add(k, ib, id);
            }
            let skip = |id: TaskId| (id + step) % 3 == 0;
            // Built at once from the tasks, the queues answer alike.
            let bulk = Queues::of(
                2,
                v.iter()
                    .enumerate()
                    .flat_map(|(k, tasks)| tasks.iter().map(move |&(ib, id)| (k, ib, id))),
            );
            for k in 0..2 {
                assert_eq!(bulk.len(k), q.len(k));
                assert_eq!(bulk.max_ib(k).to_bits(), q.max_ib(k).to_bits());
                assert_eq!(bulk.min_ib(k).to_bits(), q.min_ib(k).to_bits());
                for highest in [true, false] {
                    assert_eq!(bulk.head(k, highest, skip), q.head(k, highest, skip));
                }
            }
            for (k, tasks) in v.iter().enumerate() {
                assert_eq!(q.len(k), tasks.len());
                let max = tasks.iter().map(|x| x.0).fold(f64::NEG_INFINITY, f64::max);
                let min = tasks.iter().map(|x| x.0).fold(f64::INFINITY, f64::min);
                assert_eq!(q.max_ib(k), max, "step {step} kind {k}");
                assert_eq!(q.min_ib(k), min, "step {step} kind {k}");
                for highest in [true, false] {
                    assert_eq!(
                        q.head(k, highest, skip),
                        collected(&v[k], highest, skip),
                        "step {step}"
                    );
                    assert_eq!(
                        q.head(k, highest, |_| false),
                        collected(&v[k], highest, |_| false)
                    );
                    assert_eq!(q.head(k, highest, |_| true), collected(&v[k], highest, |_| true));
                }
            }
        }
    }
}
