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
}

/// What deciding on `snaps` costs `policy` ([`Cost`]).
pub fn us_per_decision(m: &Machine, policy: &str, snaps: &[Snapshot]) -> Cost {
    let mut p = herd_policy::build(policy).expect("policy builds");
    let (est, know) = (Estimates::default(), Knowledge::default());
    let start = Instant::now();
    p.prepare(m);
    let prepare_us = start.elapsed().as_secs_f64() * 1e6;
    let mut each_us = Vec::with_capacity(snaps.len());
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
        let start = Instant::now();
        std::hint::black_box(p.decide(&view));
        each_us.push(start.elapsed().as_secs_f64() * 1e6);
    }
    let n = each_us.len().max(1) as f64;
    Cost {
        mean_us: each_us.iter().sum::<f64>() / n,
        first_us: each_us.first().copied().unwrap_or(0.0),
        rest_us: each_us.iter().skip(1).sum::<f64>() / (n - 1.0).max(1.0),
        prepare_us,
    }
}
