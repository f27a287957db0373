//! What the policy benches share: timing `decide` alone.

use std::time::Instant;

use herd_policy::{Estimates, Knowledge, Snapshot, View};
use herd_topo::Machine;

/// µs per decision of `policy` over `snaps`, built before timing so only
/// `decide` is measured; nothing estimated or learned.
#[allow(dead_code, reason = "the amp bench reads only the mean")]
pub struct Cost {
    /// The mean over every decision.
    pub mean_us: f64,
    /// The first decision alone: a policy's first sight of every job.
    pub first_us: f64,
    /// The mean of the others (0 with one decision).
    pub rest_us: f64,
    /// Meeting the machine before the first decision (`Policy::prepare`).
    pub prepare_us: f64,
    /// Minor page faults during the first decision: memory the process
    /// touches for the first time costs the kernel a fault per page (about
    /// 0.7-1 µs each on the 2-CPU VM), and a fresh process's first
    /// decision takes many, so its time says as much about the heap as
    /// about the policy.
    pub first_faults: u64,
}

/// Stops with a message naming the first of `policies` the catalogue does
/// not know (exit 2), before anything runs.
pub fn known(policies: &[String]) {
    for p in policies {
        if let Err(e) = herd_policy::build(p) {
            crate::input::bad(format!("policy {p:?}: {e}"));
        }
    }
}

/// What deciding on `snaps` costs `policy` ([`Cost`]).
pub fn us_per_decision(m: &Machine, policy: &str, snaps: &[Snapshot]) -> Cost {
    let mut p = herd_policy::build(policy).expect("policy builds");
    let (est, know) = (Estimates::default(), Knowledge::default());
    let start = Instant::now();
    p.prepare(m);
    let prepare_us = start.elapsed().as_secs_f64() * 1e6;
    let mut each_us = Vec::with_capacity(snaps.len());
    let mut first_faults = 0;
    for (d, snap) in snaps.iter().enumerate() {
        let view = View {
            machine: m,
            snapshot: snap,
            estimates: &est,
            learned: &know,
            oracle: None,
            seed: 1,
            decision: d as u64,
        };
        // Read outside the timed span.
        let faults_before = (d == 0).then(minor_faults);
        let start = Instant::now();
        std::hint::black_box(p.decide(&view));
        each_us.push(start.elapsed().as_secs_f64() * 1e6);
        if let Some(before) = faults_before {
            first_faults = minor_faults().saturating_sub(before);
        }
    }
    let n = each_us.len().max(1) as f64;
    Cost {
        mean_us: each_us.iter().sum::<f64>() / n,
        first_us: each_us.first().copied().unwrap_or(0.0),
        rest_us: each_us.iter().skip(1).sum::<f64>() / (n - 1.0).max(1.0),
        prepare_us,
        first_faults,
    }
}

/// This process's minor page faults so far (`/proc/self/stat`'s tenth
/// field; 0 where it cannot be read).
fn minor_faults() -> u64 {
    let stat = std::fs::read_to_string("/proc/self/stat").unwrap_or_default();
    // The fields after the command's closing parenthesis, from the third
    // (state): minflt is the eighth of them.
    stat.rfind(')')
        .and_then(|i| stat[i + 1..].split_whitespace().nth(7)?.parse().ok())
        .unwrap_or(0)
}
