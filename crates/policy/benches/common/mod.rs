//! What the policy benches share: timing `decide` alone.

use std::time::Instant;

use herd_policy::{Estimates, Knowledge, Snapshot, View};
use herd_topo::Machine;

/// Mean µs per decision of `policy` over `snaps`, built before timing so
/// only `decide` is measured; nothing estimated or learned.
pub fn us_per_decision(m: &Machine, policy: &str, snaps: &[Snapshot]) -> f64 {
    let mut p = herd_policy::build(policy).expect("policy builds");
    let (est, know) = (Estimates::default(), Knowledge::default());
    let start = Instant::now();
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
        std::hint::black_box(p.decide(&view));
    }
    start.elapsed().as_secs_f64() * 1e6 / snaps.len().max(1) as f64
}
