//! The guard across runs: who should place a batch that herd has run before.
//!
//! The guard inside a run compares progress *rates* over short spans. A
//! batch's user waits for its *last* program, and a co-scheduler can trade
//! progress between programs so that every span looks even while the batch
//! ends later: S1's group 6 under bw:greedy gave the early-ending programs
//! more and the late-ending ones less, and ended 4-8% after Linux in every
//! one of 40 runs while the in-run guard's readings stayed within its margin
//! (docs/results.md, "Why `s1-wl06` bw:greedy stays 5% behind"). A rate
//! cannot say which program ends last; the batch's makespan can, and a
//! batch that is run again (S1's premise: the same programs, night after
//! night) lets herd compare makespans directly: some runs of the batch are
//! left to the kernel (herd watches and learns but places nothing), and
//! their makespans are the baseline for the policy's.
//!
//! Paid for like the in-run guard's probes: the first run is the policy's,
//! the second the kernel's. A loss is confirmed by a second run of each
//! before the kernel keeps the batch: one run each is too few on a busy
//! machine (this VM's kernel runs of one batch spread 6.9-8.0 s, where
//! 30 rounds had found the policy even with Linux). Then the side that is
//! losing gets a run
//! only after a gap that doubles each time it gets one (40, 80 ... runs),
//! so a policy that clearly wins spends one run in 40, then fewer, on the
//! kernel, and one that clearly loses as few on itself.
//!
//! Pure: the caller keeps the history (the simulator across its learning
//! runs, `herd batch` in the profile database) and asks before each run.

use serde::Serialize;

use crate::InCharge;

/// One finished run of a batch.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct BatchRun {
    /// Who placed it: the policy (with the in-run guard), or the kernel
    /// alone.
    pub by: InCharge,
    /// When its last program ended, from its first start.
    pub makespan_s: f64,
}

/// How the rule weighs a batch's history.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct RunsConfig {
    /// The loss beyond which the kernel keeps the batch: 0.02 means the
    /// policy's makespan more than 2% above the kernel's.
    pub margin: f64,
    /// Runs of the trusted side between the first two runs of the other.
    pub first_gap_runs: u32,
    /// The longest gap.
    pub max_gap_runs: u32,
    /// How many of each side's latest runs are compared (their medians).
    pub window_runs: usize,
}

impl Default for RunsConfig {
    fn default() -> Self {
        // The in-run guard may cost a winning policy 10% of its gain at
        // most; runs under the kernel take a quarter of that: one run in 40
        // costs a winner 2.5% of its gain. A window of 5 lets one odd run
        // (a busy machine) move a median little.
        RunsConfig {
            margin: 0.02,
            first_gap_runs: 40,
            max_gap_runs: 160,
            window_runs: 5,
        }
    }
}

/// Why the next run goes to whom.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
#[serde(rename_all = "snake_case", tag = "why")]
pub enum RunsWhy {
    /// The batch has no run under the policy yet.
    FirstRun,
    /// It has no run under the kernel yet: this one measures it.
    NoBaseline,
    /// The policy's makespans are within the margin of the kernel's (or
    /// better); `ratio` is the policy's median over the kernel's.
    Trusted {
        /// Policy median makespan / kernel median makespan.
        ratio: f64,
    },
    /// Fewer than two runs of each side so far: this run adds one to the
    /// side with fewer, to confirm or clear the difference seen.
    Confirming {
        /// As in `Trusted`.
        ratio: f64,
    },
    /// Trusted, but a kernel run is due to check that it still is.
    BaselineDue {
        /// As in `Trusted`.
        ratio: f64,
    },
    /// The policy's makespans are beyond the margin: the kernel keeps it.
    Loses {
        /// As in `Trusted`.
        ratio: f64,
    },
    /// Losing, but a policy run is due to check that it still does.
    PolicyDue {
        /// As in `Trusted`.
        ratio: f64,
    },
}

/// The rule's answer for the next run.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct RunsVerdict {
    /// Who places the next run.
    pub by: InCharge,
    /// Why.
    #[serde(flatten)]
    pub why: RunsWhy,
    /// Runs of the batch under the policy so far.
    pub policy_runs: usize,
    /// And under the kernel.
    pub kernel_runs: usize,
}

impl std::fmt::Display for RunsVerdict {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let (p, k) = (self.policy_runs, self.kernel_runs);
        let pct = |r: f64| (r - 1.0) * 100.0;
        match self.why {
            RunsWhy::FirstRun => write!(f, "the batch's first run under this policy"),
            RunsWhy::NoBaseline => write!(
                f,
                "the kernel places this run, to measure the batch without the policy (it has {p} run(s) under the policy, none under the kernel)"
            ),
            RunsWhy::Trusted { ratio } => write!(
                f,
                "the policy places it: its last runs ended {:+.1}% against the kernel's ({p} and {k} runs so far)",
                pct(ratio)
            ),
            RunsWhy::Confirming { ratio } => write!(
                f,
                "the {} places this run, to confirm or clear the policy's {:+.1}% against the kernel ({p} and {k} runs so far)",
                match self.by {
                    InCharge::Policy => "policy",
                    InCharge::Kernel => "kernel",
                },
                pct(ratio)
            ),
            RunsWhy::BaselineDue { ratio } => write!(
                f,
                "the kernel places this run, to check the policy's {:+.1}% against it again",
                pct(ratio)
            ),
            RunsWhy::Loses { ratio } => write!(
                f,
                "the kernel places this run: the policy's last runs ended {:+.1}% against the kernel's, beyond the margin",
                pct(ratio)
            ),
            RunsWhy::PolicyDue { ratio } => write!(
                f,
                "the policy places this run, to check its {:+.1}% against the kernel again",
                pct(ratio)
            ),
        }
    }
}

impl RunsVerdict {
    /// Whether the batch's makespans vouch for the policy: it places the
    /// run because its runs, two of each side at least, are not behind the
    /// kernel's by more than the margin. The in-run guard then makes no
    /// scheduled probes ([`crate::GuardConfig::trusting`]): the loss it
    /// would look for shows in the next makespans.
    pub fn vouches(&self) -> bool {
        matches!(self.why, RunsWhy::Trusted { .. })
    }
}

/// Who should place the next run of a batch whose runs so far, oldest
/// first, were `history`.
pub fn next_run(history: &[BatchRun], cfg: &RunsConfig) -> RunsVerdict {
    let latest = |by: InCharge| -> Vec<f64> {
        let mut v: Vec<f64> = history
            .iter()
            .rev()
            .filter(|r| r.by == by && r.makespan_s.is_finite() && r.makespan_s > 0.0)
            .take(cfg.window_runs.max(1))
            .map(|r| r.makespan_s)
            .collect();
        v.reverse();
        v
    };
    let count = |by: InCharge| history.iter().filter(|r| r.by == by).count();
    let (policy, kernel) = (latest(InCharge::Policy), latest(InCharge::Kernel));
    let verdict = |by, why| RunsVerdict {
        by,
        why,
        policy_runs: count(InCharge::Policy),
        kernel_runs: count(InCharge::Kernel),
    };
    if policy.is_empty() {
        return verdict(InCharge::Policy, RunsWhy::FirstRun);
    }
    if kernel.is_empty() {
        return verdict(InCharge::Kernel, RunsWhy::NoBaseline);
    }
    let ratio = herd_model::median(policy.clone()) / herd_model::median(kernel.clone());
    let loses = ratio > 1.0 + cfg.margin;
    // A verdict rests on two runs of each side: one kernel run slower than
    // usual (this VM's kernel runs of one batch spread 6.6-7.4 s) must not
    // buy a policy the in-run guard's trust (`vouches`), nor one policy
    // run cost it the batch. So the first four runs alternate.
    if policy.len() < 2 || kernel.len() < 2 {
        let by = if policy.len() <= kernel.len() {
            InCharge::Policy
        } else {
            InCharge::Kernel
        };
        return verdict(by, RunsWhy::Confirming { ratio });
    }
    // The side not trusted gets a run once the trusted side has had a gap
    // of runs in a row since its last; each run it gets doubles the next gap.
    let (trusted, other) = if loses {
        (InCharge::Kernel, InCharge::Policy)
    } else {
        (InCharge::Policy, InCharge::Kernel)
    };
    // The runs of the other side a verdict may need (its first and a
    // confirmation) do not lengthen its gap.
    let had = count(other) as u32;
    let needed = 2;
    let gap = cfg
        .first_gap_runs
        .saturating_mul(1u32.checked_shl(had.saturating_sub(needed)).unwrap_or(u32::MAX))
        .min(cfg.max_gap_runs)
        .max(1);
    let since = history.iter().rev().take_while(|r| r.by == trusted).count() as u32;
    match (loses, since >= gap) {
        (false, false) => verdict(InCharge::Policy, RunsWhy::Trusted { ratio }),
        (false, true) => verdict(InCharge::Kernel, RunsWhy::BaselineDue { ratio }),
        (true, false) => verdict(InCharge::Kernel, RunsWhy::Loses { ratio }),
        (true, true) => verdict(InCharge::Policy, RunsWhy::PolicyDue { ratio }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(by: InCharge, makespan_s: f64) -> BatchRun {
        BatchRun { by, makespan_s }
    }

    /// Who places each of `n` runs when a policy run takes `policy_s` and
    /// a kernel run `kernel_s`.
    fn schedule(n: usize, policy_s: f64, kernel_s: f64) -> Vec<InCharge> {
        let cfg = RunsConfig::default();
        let mut history = Vec::new();
        for _ in 0..n {
            let v = next_run(&history, &cfg);
            let makespan_s = match v.by {
                InCharge::Policy => policy_s,
                InCharge::Kernel => kernel_s,
            };
            history.push(run(v.by, makespan_s));
        }
        history.into_iter().map(|r| r.by).collect()
    }

    fn runs_by(s: &[InCharge], by: InCharge) -> Vec<usize> {
        s.iter()
            .enumerate()
            .filter(|(_, b)| **b == by)
            .map(|(i, _)| i + 1)
            .collect()
    }

    #[test]
    fn a_policy_that_loses_gets_few_runs() {
        // Its first run and a second to confirm the loss, then one after
        // 40 kernel runs, then one after 80.
        let s = schedule(130, 34.7, 33.0);
        assert_eq!(runs_by(&s, InCharge::Policy), vec![1, 3, 44, 125]);
    }

    #[test]
    fn a_policy_that_wins_gives_the_kernel_few_runs() {
        // Winning, or even within the margin: the first four runs
        // alternate, then the kernel's are checks after 40 policy runs,
        // then after 80. The makespans vouch for the policy from run 5.
        let cfg = RunsConfig::default();
        for policy_s in [31.0, 33.5] {
            let s = schedule(130, policy_s, 33.0);
            assert_eq!(runs_by(&s, InCharge::Kernel), vec![2, 4, 45, 126], "{policy_s}");
            let history: Vec<BatchRun> = (s.iter())
                .map(|&by| run(by, if by == InCharge::Policy { policy_s } else { 33.0 }))
                .collect();
            let vouches: Vec<bool> = (0..10).map(|n| next_run(&history[..n], &cfg).vouches()).collect();
            assert_eq!(
                vouches,
                [false, false, false, false, true, true, true, true, true, true]
            );
        }
        // Losing: never.
        let history: Vec<BatchRun> = (schedule(130, 34.7, 33.0).iter())
            .map(|&by| run(by, if by == InCharge::Policy { 34.7 } else { 33.0 }))
            .collect();
        assert!((0..130).all(|n| !next_run(&history[..n], &cfg).vouches()));
    }

    #[test]
    fn a_loss_seen_once_is_confirmed_or_cleared_before_the_kernel_keeps_the_batch() {
        let cfg = RunsConfig::default();
        let mut history = vec![run(InCharge::Policy, 7.3), run(InCharge::Kernel, 6.9)];
        let v = next_run(&history, &cfg);
        assert_eq!(
            (v.by, v.why),
            (InCharge::Policy, RunsWhy::Confirming { ratio: 7.3 / 6.9 })
        );
        history.push(run(InCharge::Policy, 7.0));
        assert_eq!(next_run(&history, &cfg).by, InCharge::Kernel);
        // The second kernel run was slower: the medians are even, the
        // policy keeps the batch.
        history.push(run(InCharge::Kernel, 7.4));
        let v = next_run(&history, &cfg);
        assert_eq!(v.by, InCharge::Policy);
        assert!(matches!(v.why, RunsWhy::Trusted { .. }), "{v:?}");
    }

    #[test]
    fn a_change_is_seen_at_the_next_check() {
        let cfg = RunsConfig::default();
        let mut history = vec![
            run(InCharge::Policy, 30.0),
            run(InCharge::Kernel, 33.0),
            run(InCharge::Policy, 30.0),
            run(InCharge::Kernel, 33.0),
        ];
        history.extend((0..40).map(|_| run(InCharge::Policy, 30.0)));
        let v = next_run(&history, &cfg);
        assert_eq!(v.why, RunsWhy::BaselineDue { ratio: 30.0 / 33.0 });
        // The kernel has become faster than the policy (a new kernel, a
        // new machine): the kernel keeps the batch from now on.
        history.push(run(InCharge::Kernel, 25.0));
        history.push(run(InCharge::Kernel, 25.0));
        let v = next_run(&history, &cfg);
        assert_eq!(v.by, InCharge::Kernel);
        assert!(matches!(v.why, RunsWhy::Loses { .. }), "{v:?}");
    }

    #[test]
    fn runs_that_measured_nothing_are_not_counted() {
        let cfg = RunsConfig::default();
        let history = [run(InCharge::Policy, 30.0), run(InCharge::Kernel, f64::NAN)];
        assert_eq!(next_run(&history, &cfg).why, RunsWhy::NoBaseline);
    }
}
