//! What the guard is told and what it tells: its settings, who is in
//! charge, and the report of its comparisons and back-offs (see
//! [`crate::guard`]). Apart from the guard's logic so that summaries and
//! JSON can read it without it.

use serde::Serialize;

/// How the guard judges and how often it looks.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct GuardConfig {
    /// The loss beyond which the policy is backed off: 0.02 means a
    /// workload making less than 98% of the kernel's progress.
    pub margin: f64,
    /// A probe's length, in loop periods.
    pub probe_periods: u32,
    /// The first span between probes, in loop periods.
    pub gap_periods: u32,
    /// The longest span between probes, in loop periods.
    pub max_gap_periods: u32,
    /// Whether the policy, while trusted, is probed every gap. Off only
    /// where the guard across runs vouches for it ([`GuardConfig::trusting`]).
    pub scheduled_probes: bool,
}

impl GuardConfig {
    /// The guard for a run whose batch's makespans vouch for the policy
    /// ([`crate::guard_runs::RunsVerdict::vouches`]): no scheduled probes.
    /// Two runs of each side at least are better evidence than a 3-period
    /// probe, and the probes cost a co-scheduler about three times their
    /// length: bw:iabw on S1's group 4, probed at the longest gap (4.3% of
    /// each run under the kernel), kept 4.4 of a 5.1-point gain
    /// (docs/results.md). What still guards the run: the back-off on
    /// crowding, and the batch's next makespan against the kernel's.
    pub fn trusting(self) -> Self {
        GuardConfig {
            scheduled_probes: false,
            ..self
        }
    }
}

impl Default for GuardConfig {
    fn default() -> Self {
        // Three periods is the shortest probe in which a co-scheduler takes
        // more than one turn; eight between them spends a quarter of the
        // first second on probes, 64 (once the verdict is steady) under 5%.
        GuardConfig {
            margin: 0.02,
            probe_periods: 3,
            gap_periods: 8,
            max_gap_periods: 64,
            scheduled_probes: true,
        }
    }
}

/// Who places the workload's tasks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum InCharge {
    /// The policy: its plans are applied.
    Policy,
    /// The kernel: herd lets go of every task it placed or paused.
    Kernel,
}

impl InCharge {
    /// The other one.
    pub(crate) fn other(self) -> Self {
        match self {
            InCharge::Policy => InCharge::Kernel,
            InCharge::Kernel => InCharge::Policy,
        }
    }
}

/// Which progress signal a comparison used.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Signal {
    /// CPU time (what every machine has).
    CpuTime,
    /// Retired instructions.
    Instructions,
    /// Heartbeats.
    Heartbeats,
}

impl Signal {
    /// The signal's name in reports.
    pub fn name(self) -> &'static str {
        match self {
            Signal::CpuTime => "cpu time",
            Signal::Instructions => "instructions",
            Signal::Heartbeats => "heartbeats",
        }
    }
}

/// One comparison of a probe with the span before it.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Comparison {
    /// When the probe ended.
    pub at_ns: u64,
    /// The workload's progress under the policy over its progress under the
    /// kernel: the geometric mean over jobs of their rate ratios (see
    /// `compare`).
    pub ratio: f64,
    /// The weakest signal any compared job had (CPU time if any job had only that).
    pub signal: Signal,
    /// Jobs compared.
    pub jobs: u32,
    /// Who was in charge after the comparison.
    pub in_charge: InCharge,
}

/// What the guard did over a run.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct GuardReport {
    /// Every comparison, in order.
    pub comparisons: Vec<Comparison>,
    /// Time the kernel placed the workload: probes while the policy was
    /// trusted, and spans while it was backed off.
    pub kernel_ns: u64,
    /// Time the policy placed it.
    pub policy_ns: u64,
    /// Times the policy was backed off.
    pub backoffs: u32,
    /// Times it was trusted again after a back-off.
    pub returns: u32,
    /// Who was in charge when the run ended (`None` before the first turn).
    pub in_charge_at_end: Option<InCharge>,
    /// Of the back-offs, those made without a probe because the policy
    /// kept CPUs idle beside waiting threads.
    pub crowded_backoffs: u32,
}

impl GuardReport {
    /// The share of the run's time the kernel placed the workload.
    pub fn kernel_share(&self) -> f64 {
        self.kernel_ns as f64 / (self.kernel_ns + self.policy_ns).max(1) as f64
    }

    /// One line for a run summary.
    pub fn summary(&self) -> String {
        let kernel_share = self.kernel_share();
        let last = self
            .comparisons
            .last()
            .map_or(String::from("no comparison could be made"), |c| {
                format!(
                    "last comparison: the policy made {:.3}x the kernel's progress ({}, {} job{})",
                    c.ratio,
                    c.signal.name(),
                    c.jobs,
                    if c.jobs == 1 { "" } else { "s" }
                )
            });
        let verdict = match (self.backoffs, self.in_charge_at_end) {
            (0, _) => "the policy was never backed off".to_string(),
            (n, Some(InCharge::Kernel)) => {
                format!("backed off {n} time(s): the kernel had the workload back at the end")
            }
            (n, _) => format!("backed off {n} time(s), trusted again {} time(s)", self.returns),
        };
        let crowded = if self.crowded_backoffs > 0 {
            format!(
                " ({} without a probe: the policy kept CPUs idle beside waiting threads)",
                self.crowded_backoffs
            )
        } else {
            String::new()
        };
        format!(
            "guard: {} comparison(s), kernel placed the workload {:.0}% of the time; {verdict}{crowded}; {last}",
            self.comparisons.len(),
            kernel_share * 100.0
        )
    }
}
