//! The decisions behind `herd slurm watch`'s table: for a program key and
//! thread count, whether a job should require a node, prefer one, or may
//! go anywhere, by the spread of S2's predicted T_cont/T_clean over the
//! nodes.

use herd_model::numa::Placed;

use crate::node::{JobRequest, NodeState, Selector};

/// Free CPUs per NUMA node: the node's CPUs less the running jobs' (as
/// scattered), then trimmed so they sum to what Slurm says is idle (jobs
/// herd cannot see, reservations, drained CPUs).
pub fn free_per_numa(capacity: &[u32], running: &[Placed], idle: u32) -> Vec<u32> {
    let mut free: Vec<u32> = capacity
        .iter()
        .enumerate()
        .map(|(k, c)| c.saturating_sub(running.iter().map(|p| p.threads_per_node[k]).sum()))
        .collect();
    // Bounded: each pass takes one CPU from the NUMA node with the most.
    while free.iter().sum::<u32>() > idle {
        let most = (0..free.len())
            .max_by_key(|&k| (free[k], std::cmp::Reverse(k)))
            .expect("a node has NUMA nodes");
        free[most] -= 1;
    }
    free
}

/// The table's decision for one key and thread count; `roomy` is every node
/// as if it had room (`NodeState::with_room`), built once per refresh.
pub fn decide(
    nodes: &[NodeState],
    roomy: &[NodeState],
    job: &JobRequest,
    threshold: f64,
) -> (&'static str, String, String) {
    // Where would the job run best, if every node had room?
    let ideal = Selector::Model.choose(roomy, job);
    let ratios: Vec<f64> = ideal.scores.iter().filter_map(|s| s.slowdown_ratio).collect();
    let spread = ratios.iter().copied().fold(f64::NEG_INFINITY, f64::max)
        - ratios.iter().copied().fold(f64::INFINITY, f64::min);
    let Some(best) = ideal.node else {
        return ("any", "-".into(), "fits no node".into());
    };
    let name = nodes[best].name.clone();
    if spread.is_nan() || spread <= threshold {
        return (
            "any",
            "-".into(),
            format!("predicted T_cont/T_clean within {spread:.3} on every node"),
        );
    }
    let ratio = ideal.scores[best].slowdown_ratio.unwrap_or(1.0);
    let has_room = nodes[best].free_per_numa.iter().sum::<u32>() >= job.threads;
    if has_room {
        (
            "require",
            name,
            format!("least predicted T_cont/T_clean {ratio:.3} (spread {spread:.3})"),
        )
    } else {
        (
            "prefer",
            name,
            format!("least predicted T_cont/T_clean {ratio:.3}, but full now"),
        )
    }
}
