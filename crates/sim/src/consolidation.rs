//! S4's dynamic server consolidation case study: a latency-critical
//! service (memcached in S4) shares the machine with a batch job, and a
//! manager moves cores between them as the service's load changes.
//!
//! The service is a queue, not simulated threads: an M/M/c queue on the
//! cores it is given ([`herd_model::queueing`]), its load a trace of
//! requests per second. The manager reacts to what it measures, as S4's
//! does: every interval it sizes the service for the load it measured in
//! the interval before, extrapolating a rise (the fewest cores whose p99
//! meets the SLO at that load) and gives the batch job the rest, at least
//! one core. A load that rises faster than the last interval's rise finds
//! the service short of cores: those intervals violate the SLO. The batch job's threads see the budget through
//! [`herd_policy::Snapshot::budget_cores`] and run on the first K cores of
//! the compact order; the service owns the others, so the batch policy
//! cannot change the service's latency (S4 isolates them the same way),
//! only how much the batch job gets done on the cores it has.

use serde::{Deserialize, Serialize};

use crate::checked::{NonNegative, Positive};

/// The tail the SLO is about.
pub const QUANTILE: f64 = 0.99;

/// `[consolidation]` as written.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ConsolidationSpec {
    /// The service's name, for reports.
    pub service: String,
    /// One request's service time on one core, in µs.
    pub request_us: Positive,
    /// The service's p99 latency objective, in ms.
    pub slo_ms: Positive,
    /// How often the manager resizes, in ms (default 100).
    #[serde(default = "hundred")]
    pub interval_ms: Positive,
    /// The load trace: `[time_ms, requests_per_s]` points, from time 0 in
    /// increasing time, linear in between. The run lasts until the last.
    pub load: Vec<(NonNegative, NonNegative)>,
}

fn hundred() -> Positive {
    Positive(100.0)
}

/// One manager interval.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ServiceInterval {
    /// Start of the interval, in s.
    pub start_s: f64,
    /// The service's mean load over the interval, requests/s.
    pub load_rps: f64,
    /// Cores the manager gave the service (sized for the last interval's load).
    pub service_cores: u32,
    /// The service's p99 response time at this load on these cores, in ms;
    /// `None` when overloaded (latency grows without bound).
    pub p99_ms: Option<f64>,
    /// Whether the p99 missed the SLO.
    pub violated: bool,
    /// Cores left for the batch job: the budget.
    pub batch_cores: u32,
}

/// A validated case study with its manager's decisions.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Consolidation {
    /// The service's name.
    pub service: String,
    /// The p99 objective, in ms.
    pub slo_ms: f64,
    /// One request's service time, in µs.
    pub request_us: f64,
    /// The manager's interval, in ns.
    pub interval_ns: u64,
    /// Every interval until the trace ends.
    pub intervals: Vec<ServiceInterval>,
}

impl Consolidation {
    /// Validates `spec` for a machine of `cores` cores and runs the manager
    /// over the trace. Errors name the field.
    pub fn new(spec: &ConsolidationSpec, cores: u32) -> Result<Self, (&'static str, String)> {
        if cores < 2 {
            return Err((
                "consolidation",
                format!("the machine has {cores} core: a service and a batch job need at least 2"),
            ));
        }
        let load: Vec<(f64, f64)> = spec.load.iter().map(|(t, r)| (t.0 * 1e-3, r.0)).collect();
        if load.len() < 2 || load[0].0 != 0.0 {
            return Err((
                "load",
                "give at least two [time_ms, requests_per_s] points, the first at time 0".into(),
            ));
        }
        if let Some(w) = load.windows(2).find(|w| w[1].0 <= w[0].0) {
            return Err((
                "load",
                format!(
                    "times must increase: {} ms follows {} ms",
                    w[1].0 * 1e3,
                    w[0].0 * 1e3
                ),
            ));
        }
        let interval_s = spec.interval_ms.0 * 1e-3;
        let end_s = load[load.len() - 1].0;
        if interval_s > end_s {
            return Err((
                "interval_ms",
                format!(
                    "{} ms is longer than the trace ({} ms)",
                    spec.interval_ms.0,
                    end_s * 1e3
                ),
            ));
        }
        let mu = 1e6 / spec.request_us.0;
        let slo_s = spec.slo_ms.0 * 1e-3;
        let most = cores - 1;
        let mut intervals = Vec::new();
        let (mut before, mut measured): (Option<f64>, Option<f64>) = (None, None);
        let n = (end_s / interval_s).ceil() as usize;
        for i in 0..n {
            let start = i as f64 * interval_s;
            let stop = (start + interval_s).min(end_s);
            let load_rps = mean_load(&load, start, stop);
            // Sized for what it saw last, and for a rise to go on as fast
            // (a fall is not trusted until seen): a manager that only
            // follows arrives an interval late on every rise. The first
            // interval is sized for its own load (the manager ran before
            // the study).
            let planned = match (before, measured) {
                (Some(b), Some(m)) => m.max(2.0 * m - b),
                (None, Some(m)) => m,
                (_, None) => load_rps,
            };
            let service_cores =
                herd_model::queueing::cores_for(planned, mu, QUANTILE, slo_s, most).unwrap_or(most);
            let p99 = herd_model::queueing::response_quantile_s(load_rps, mu, service_cores, QUANTILE);
            intervals.push(ServiceInterval {
                start_s: start,
                load_rps,
                service_cores,
                p99_ms: p99.map(|t| t * 1e3),
                violated: p99.is_none_or(|t| t > slo_s),
                batch_cores: cores - service_cores,
            });
            before = measured;
            measured = Some(load_rps);
        }
        Ok(Consolidation {
            service: spec.service.clone(),
            slo_ms: spec.slo_ms.0,
            request_us: spec.request_us.0,
            interval_ns: (interval_s * 1e9).round() as u64,
            intervals,
        })
    }

    /// When the trace ends, in ns.
    pub fn end_ns(&self) -> u64 {
        self.intervals.len() as u64 * self.interval_ns
    }

    /// The batch job's core budget at `now_ns`.
    pub fn budget_at(&self, now_ns: u64) -> u32 {
        let i = ((now_ns / self.interval_ns.max(1)) as usize).min(self.intervals.len() - 1);
        self.intervals[i].batch_cores
    }
}

/// The trace's mean over [a, b] (piecewise linear: the exact integral).
fn mean_load(points: &[(f64, f64)], a: f64, b: f64) -> f64 {
    if b <= a {
        return value_at(points, a);
    }
    // Integrate over the pieces [a, b] crosses, trapezoid by trapezoid.
    let mut knots = vec![a];
    knots.extend(points.iter().map(|p| p.0).filter(|&t| t > a && t < b));
    knots.push(b);
    let area: f64 = knots
        .windows(2)
        .map(|w| 0.5 * (value_at(points, w[0]) + value_at(points, w[1])) * (w[1] - w[0]))
        .sum();
    area / (b - a)
}

fn value_at(points: &[(f64, f64)], t: f64) -> f64 {
    let i = points.partition_point(|p| p.0 <= t);
    match (i.checked_sub(1).map(|k| points[k]), points.get(i)) {
        (Some((t0, r0)), Some(&(t1, r1))) => r0 + (r1 - r0) * (t - t0) / (t1 - t0),
        (Some((_, r)), None) => r,
        (None, Some(&(_, r))) => r,
        (None, None) => 0.0,
    }
}

/// The batch job's work in one interval, for one policy.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct BatchInterval {
    /// Start of the interval, in s.
    pub start_s: f64,
    /// Its core budget.
    pub batch_cores: u32,
    /// Useful instructions per second (a thread spinning at a barrier
    /// retires none), in billions.
    pub ginstr_per_s: f64,
}

/// One policy's result in the case study.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ConsolidationResult {
    /// The service's SLO violations: intervals whose p99 missed it (the
    /// manager's decisions, the same under every packing policy).
    pub violations: usize,
    /// Intervals in all.
    pub intervals: usize,
    /// The batch job's useful instructions per second over the whole trace,
    /// in billions.
    pub batch_ginstr_per_s: f64,
    /// Per interval.
    pub batch: Vec<BatchInterval>,
}

impl Consolidation {
    /// The result from the batch job's cumulative useful instructions at
    /// each interval's start and at the end (`marks`, `(ns, instructions)`,
    /// one more than there are intervals).
    pub fn result(&self, marks: &[(u64, f64)]) -> ConsolidationResult {
        let rate = |a: (u64, f64), b: (u64, f64)| {
            if b.0 > a.0 {
                (b.1 - a.1) / (b.0 - a.0) as f64
            } else {
                0.0
            }
        };
        let batch = self
            .intervals
            .iter()
            .zip(marks.windows(2))
            .map(|(i, w)| BatchInterval {
                start_s: i.start_s,
                batch_cores: i.batch_cores,
                ginstr_per_s: rate(w[0], w[1]),
            })
            .collect();
        let whole = match (marks.first(), marks.last()) {
            (Some(&a), Some(&b)) => rate(a, b),
            _ => 0.0,
        };
        ConsolidationResult {
            violations: self.intervals.iter().filter(|i| i.violated).count(),
            intervals: self.intervals.len(),
            batch_ginstr_per_s: whole,
            batch,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(load: &[(f64, f64)]) -> ConsolidationSpec {
        ConsolidationSpec {
            service: "kv".into(),
            request_us: Positive(50.0),
            slo_ms: Positive(1.0),
            interval_ms: Positive(100.0),
            load: load
                .iter()
                .map(|&(t, r)| (NonNegative(t), NonNegative(r)))
                .collect(),
        }
    }

    #[test]
    fn the_manager_follows_the_load_and_extrapolates_a_rise() {
        // Flat, then a ramp up within one interval, then flat again.
        let c = Consolidation::new(
            &spec(&[(0.0, 20e3), (300.0, 20e3), (400.0, 120e3), (1000.0, 120e3)]),
            16,
        )
        .unwrap();
        assert_eq!(c.intervals.len(), 10);
        assert_eq!(c.end_ns(), 1_000_000_000);
        let first = &c.intervals[0];
        assert!(!first.violated && first.service_cores >= 2);
        assert_eq!(first.batch_cores, 16 - first.service_cores);
        // The ramp interval: mean load 70k, sized for 20k.
        let ramp = &c.intervals[3];
        assert!((ramp.load_rps - 70e3).abs() < 1e-6);
        assert_eq!(ramp.service_cores, first.service_cores);
        assert!(ramp.violated, "a rise within an interval finds the service short");
        // Then sized for the rise going on (70k + 50k = 120k): within the
        // SLO; then for 170k (a fall is not trusted until seen); then 120k.
        assert!(!c.intervals[4].violated && c.intervals[4].service_cores > first.service_cores);
        assert!(c.intervals[5].service_cores > c.intervals[4].service_cores);
        assert_eq!(c.intervals[6].service_cores, c.intervals[4].service_cores);
        assert!(c.intervals[6].batch_cores < first.batch_cores);
        assert_eq!(c.budget_at(650_000_000), c.intervals[6].batch_cores);
        assert_eq!(c.budget_at(5_000_000_000), c.intervals[9].batch_cores);
        let r = c.result(
            &(0..=10)
                .map(|i| (i * 100_000_000, i as f64 * 1e8))
                .collect::<Vec<_>>(),
        );
        assert_eq!(r.violations, 1);
        assert!((r.batch_ginstr_per_s - 1.0).abs() < 1e-12);
        assert!(r.batch.iter().all(|b| (b.ginstr_per_s - 1.0).abs() < 1e-12));
    }

    #[test]
    fn bad_traces_are_named() {
        assert_eq!(Consolidation::new(&spec(&[(0.0, 1.0)]), 4).unwrap_err().0, "load");
        assert_eq!(
            Consolidation::new(&spec(&[(5.0, 1.0), (900.0, 1.0)]), 4)
                .unwrap_err()
                .0,
            "load"
        );
        let e = Consolidation::new(&spec(&[(0.0, 1.0), (900.0, 1.0), (900.0, 2.0)]), 4).unwrap_err();
        assert!(e.1.contains("times must increase"), "{e:?}");
        assert_eq!(
            Consolidation::new(&spec(&[(0.0, 1.0), (50.0, 1.0)]), 4)
                .unwrap_err()
                .0,
            "interval_ms"
        );
        assert_eq!(
            Consolidation::new(&spec(&[(0.0, 1.0), (500.0, 1.0)]), 1)
                .unwrap_err()
                .0,
            "consolidation"
        );
        // More load than the machine can serve: the service takes all but one core.
        let c = Consolidation::new(&spec(&[(0.0, 1e9), (500.0, 1e9)]), 4).unwrap();
        assert!(
            c.intervals
                .iter()
                .all(|i| i.service_cores == 3 && i.violated && i.p99_ms.is_none())
        );
    }
}
