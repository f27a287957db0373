//! S3's behaviour monitor (Chen, Qi, Lin, Li): a task's LLC miss rate per
//! interval, its local behaviour LB (the moving average of the last n
//! intervals), phase changes that must prove stable before anything moves,
//! and the integrated behaviour IB = alpha GB + (1 - alpha) LB that S3's
//! rescheduler sorts tasks by. GB is the task's whole-run miss rate from
//! past runs (the profile store), or the running average of this run.
//!
//! The monitor reports when a task's IB should be (re)computed:
//! - at start (IB = alpha GB while nothing is measured; S3 §2.2.1), and
//! - when a new phase (|LBcur - LBprev| / LBprev > threshold1) has stayed
//!   put for `stable_intervals` more intervals (change < threshold2 each).
//!
//! The first interval after a start or a migration is not recorded (a cold
//! cache inflates its misses).
//!
//! S3's formula (13) compares LB with the previous interval's LB, and LB
//! averages `window` intervals, so a sustained step of k in the miss rate
//! moves LB by at most k / window in any one interval when it rises, and by
//! k/w, k/(w - k), ... as it falls. With S3's window of 3 and Threshold1 of
//! 12%, a rise under 36% or a fall under 29% never starts a phase unless
//! noise pushes it over: S3 cites 12% as the change in the miss rate that
//! marks a new phase, which its averaged test sees only for larger steps.
//! herd keeps the formula as published (the test
//! `steps_below_the_averaged_threshold_are_never_seen` pins the floor).

use serde::{Deserialize, Serialize};

/// S3's monitor parameters.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct MonitorParams {
    /// Weight of the global behaviour in IB.
    pub alpha: f64,
    /// Intervals in LB's moving average (S3: 3).
    pub window: usize,
    /// Relative LB change that starts a new phase (S3: 12%).
    pub threshold1: f64,
    /// Relative LB change under which a new phase is stable (S3: 5%).
    pub threshold2: f64,
    /// Intervals a new phase must stay under threshold2 (S3: 2).
    pub stable_intervals: u32,
}

impl Default for MonitorParams {
    fn default() -> Self {
        MonitorParams {
            alpha: 0.3,
            window: 3,
            threshold1: 0.12,
            threshold2: 0.05,
            stable_intervals: 2,
        }
    }
}

/// What an interval's sample did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Event {
    /// Not recorded: the first interval after a start or a migration.
    Skipped,
    /// Recorded, nothing to do.
    Recorded,
    /// A new phase began; waiting for it to be stable.
    PhaseStarted,
    /// The phase is stable: IB was recomputed and the task should be
    /// rescheduled.
    Stable,
}

/// One task's monitor.
#[derive(Debug, Clone, PartialEq)]
pub struct Monitor {
    params: MonitorParams,
    /// GB from past runs, when the store has it.
    history_gb: Option<f64>,
    /// The last `window` recorded miss rates, oldest first.
    recent: std::collections::VecDeque<f64>,
    /// Sum and count of every recorded miss rate, for GB without history.
    sum: f64,
    count: u64,
    /// LB after the previous recorded interval.
    lb_prev: Option<f64>,
    /// The previous recorded interval's miss rate.
    last_raw: Option<f64>,
    /// Intervals the new phase has stayed put, while one is pending.
    pending: Option<u32>,
    skip_next: bool,
    ib: f64,
}

impl Monitor {
    /// A monitor for a task that just started. `history_gb`: the program's
    /// whole-run LLC miss rate from past runs; `default_gb` stands in when
    /// there is none and nothing is measured yet.
    pub fn new(params: MonitorParams, history_gb: Option<f64>, default_gb: f64) -> Self {
        let gb = history_gb.unwrap_or(default_gb);
        Monitor {
            params,
            history_gb,
            recent: std::collections::VecDeque::with_capacity(params.window + 1),
            sum: 0.0,
            count: 0,
            lb_prev: None,
            last_raw: None,
            pending: None,
            skip_next: true,
            // S3: a new task has only GB.
            ib: params.alpha * gb,
        }
    }

    /// The integrated behaviour the rescheduler uses.
    pub fn ib(&self) -> f64 {
        self.ib
    }

    /// GB: past runs' whole-run miss rate, else this run's average so far.
    pub fn gb(&self) -> Option<f64> {
        self.history_gb
            .or_else(|| (self.count > 0).then(|| self.sum / self.count as f64))
    }

    /// LB: the moving average of the last `window` intervals.
    pub fn lb(&self) -> Option<f64> {
        (!self.recent.is_empty()).then(|| self.recent.iter().sum::<f64>() / self.recent.len() as f64)
    }

    /// The task moved to another core: its next interval runs on a cold
    /// cache and is not recorded.
    pub fn migrated(&mut self) {
        self.skip_next = true;
    }

    /// One interval's LLC miss rate (misses / references, in [0, 1]).
    pub fn sample(&mut self, llc_miss_rate: f64) -> Event {
        if self.skip_next {
            self.skip_next = false;
            return Event::Skipped;
        }
        let x = llc_miss_rate.clamp(0.0, 1.0);
        self.recent.push_back(x);
        while self.recent.len() > self.params.window.max(1) {
            self.recent.pop_front();
        }
        self.sum += x;
        self.count += 1;
        let lb = self.lb().expect("just recorded");
        let last_raw = self.last_raw.replace(x);
        let prev = self.lb_prev.replace(lb);
        let (Some(prev), Some(last_raw)) = (prev, last_raw) else {
            // The first recorded interval: IB from what is known now.
            self.recompute(lb);
            return Event::Stable;
        };
        let change = relative(lb, prev);
        // Stability is judged on the intervals' own miss rates (S3: "keep
        // recording two intervals of LLCMR; if its change is below
        // threshold2"): LB, a moving average, would hold a one-interval
        // blip flat for `window` intervals and call it stable.
        let raw_change = relative(x, last_raw);
        match self.pending {
            None if change > self.params.threshold1 => {
                self.pending = Some(0);
                Event::PhaseStarted
            }
            None => Event::Recorded,
            Some(_) if raw_change > self.params.threshold2 => {
                // Still moving: start counting again.
                self.pending = Some(0);
                Event::Recorded
            }
            Some(n) if n + 1 >= self.params.stable_intervals => {
                self.pending = None;
                self.recompute(lb);
                Event::Stable
            }
            Some(n) => {
                self.pending = Some(n + 1);
                Event::Recorded
            }
        }
    }

    fn recompute(&mut self, lb: f64) {
        let gb = self.gb().unwrap_or(lb);
        self.ib = self.params.alpha * gb + (1.0 - self.params.alpha) * lb;
    }
}

/// |now - before| / before; from zero, any rise is an infinite change.
fn relative(now: f64, before: f64) -> f64 {
    if before > 0.0 {
        (now - before).abs() / before
    } else if now > 0.0 {
        f64::INFINITY
    } else {
        0.0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn feed(m: &mut Monitor, xs: &[f64]) -> Vec<Event> {
        xs.iter().map(|&x| m.sample(x)).collect()
    }

    #[test]
    fn a_new_task_has_only_gb_and_its_first_interval_is_skipped() {
        let mut m = Monitor::new(MonitorParams::default(), Some(0.5), 0.2);
        assert!((m.ib() - 0.15).abs() < 1e-12, "IB = alpha GB");
        assert_eq!(m.sample(0.9), Event::Skipped);
        assert_eq!(m.lb(), None);
        assert_eq!(m.sample(0.4), Event::Stable);
        assert!((m.ib() - (0.3 * 0.5 + 0.7 * 0.4)).abs() < 1e-12);
    }

    #[test]
    fn a_phase_change_moves_ib_only_once_it_is_stable() {
        let mut m = Monitor::new(MonitorParams::default(), None, 0.2);
        m.sample(0.0); // skipped
        assert_eq!(
            feed(&mut m, &[0.10, 0.10, 0.10]),
            vec![Event::Stable, Event::Recorded, Event::Recorded]
        );
        let before = m.ib();
        // A step to 0.4: LB 0.2 (+100%): a new phase; the next two
        // intervals repeat 0.4 (0% change): stable at the second.
        assert_eq!(m.sample(0.4), Event::PhaseStarted);
        assert_eq!(m.sample(0.4), Event::Recorded);
        assert_eq!(m.ib(), before, "nothing moves while the phase settles");
        assert_eq!(m.sample(0.4), Event::Stable);
        // LB is then the window [0.4, 0.4, 0.4]; GB the running average.
        let gb = (0.1 * 3.0 + 0.4 * 3.0) / 6.0;
        assert!((m.ib() - (0.3 * gb + 0.7 * 0.4)).abs() < 1e-12, "{}", m.ib());
    }

    #[test]
    fn steps_below_the_averaged_threshold_are_never_seen() {
        // After a sustained step LB moves by at most a third of it on a rise,
        // so +35% never crosses 12% while +40% does at once; a fall of 26%
        // (back from +35%) never does, one of 35% does at its second interval.
        for (step, seen) in [(1.35, None), (1.40, Some(0)), (1.0 / 1.35, None), (0.65, Some(1))] {
            let mut m = Monitor::new(MonitorParams::default(), Some(0.3), 0.2);
            feed(&mut m, &[0.3, 0.3, 0.3, 0.3]);
            let ev = feed(&mut m, &[0.3 * step; 8]);
            assert_eq!(
                ev.iter().position(|e| *e == Event::PhaseStarted),
                seen,
                "step x{step}: {ev:?}"
            );
        }
    }

    #[test]
    fn a_one_interval_blip_is_not_a_stable_phase_and_a_migration_skips_a_sample() {
        let mut m = Monitor::new(MonitorParams::default(), Some(0.1), 0.2);
        m.sample(0.1);
        feed(&mut m, &[0.1, 0.1, 0.1]);
        // 0.5 starts a phase; the fall back to 0.1 (-80%) is no settled phase.
        assert_eq!(
            feed(&mut m, &[0.5, 0.1]),
            vec![Event::PhaseStarted, Event::Recorded]
        );
        // Back at 0.1 for two intervals: "stable" again, at the old level
        // once the blip has left LB's window.
        let ev = feed(&mut m, &[0.1, 0.1, 0.1]);
        assert!(ev.contains(&Event::Stable), "{ev:?}");
        m.migrated();
        assert_eq!(m.sample(0.9), Event::Skipped);
    }
}
