//! `numa:model`'s batch correction in the cluster simulation: after S2's
//! rule has placed the jobs that arrived together one at a time, swap pairs
//! while the selector's model predicts less total job time. The selector's
//! side: it uses the closed-form model, whatever judges the outcome.

use std::collections::BTreeMap;

use herd_model::MemSystem;
use herd_model::numa::{self, Placed};

use super::{ClusterJob, NodeSim};

/// The predicted completion times, from now, of the jobs a node runs
/// (their placements and the accesses each thread has left), summed: the
/// node's mix is re-solved at each predicted completion. Infinite if the
/// model cannot solve it.
pub(crate) fn predicted_total_s(mem: &MemSystem, jobs: &[(Placed, f64)]) -> f64 {
    let mut live: Vec<(Placed, f64)> = jobs.to_vec();
    let (mut now, mut total) = (0.0, 0.0);
    // Each round ends at least one job.
    while !live.is_empty() {
        let placed: Vec<Placed> = live.iter().map(|(p, _)| p.clone()).collect();
        let Ok(pred) = numa::predict_with(mem, &placed, false) else {
            return f64::INFINITY;
        };
        let ns: Vec<f64> = live
            .iter()
            .zip(&pred.programs)
            .map(|((p, _), q)| q.time_s * 1e9 / p.character.accesses_per_thread)
            .collect();
        let dt = live
            .iter()
            .zip(&ns)
            .map(|((_, left), ns)| left * ns * 1e-9)
            .fold(f64::INFINITY, f64::min);
        now += dt;
        let mut next = Vec::with_capacity(live.len());
        for ((p, left), ns) in live.into_iter().zip(&ns) {
            let left = left - dt * 1e9 / ns;
            // Within a rounding error of done: done.
            if left <= p.character.accesses_per_thread * 1e-9 {
                total += now;
            } else {
                next.push((p, left));
            }
        }
        live = next;
    }
    total
}

/// Jobs placed at the same instant are placed one at a time by S2's rule,
/// which cannot see the jobs still to come. This then swaps pairs of them
/// (same thread count: each takes the other's node and layout) while the
/// model predicts a lower total completion time on the two nodes, best
/// swap first. Bounded: at most as many swaps as jobs, and only for up to
/// `MAX_BATCH` jobs (the pairs grow as its square). Returns each moved
/// job's new node and why.
pub(crate) fn swap_improve(
    mem: &MemSystem,
    nodes: &mut [NodeSim],
    batch: &[usize],
    jobs: &[ClusterJob],
) -> Vec<(usize, usize, String)> {
    const MAX_BATCH: usize = 32;
    let mut moved: Vec<(usize, usize, String)> = Vec::new();
    if batch.len() > MAX_BATCH {
        return moved;
    }
    let node_of = |nodes: &[NodeSim], j: usize| {
        nodes
            .iter()
            .position(|n| n.running.iter().any(|r| r.job == j))
            .expect("a placed job runs on a node")
    };
    // A node's mix, with job `out` replaced by a fresh run of `into`.
    let mix = |n: &NodeSim, swap: Option<(usize, usize)>| -> Vec<(Placed, f64)> {
        n.running
            .iter()
            .map(|r| match swap {
                Some((out, into)) if r.job == out => {
                    let mut p = r.placed.clone();
                    p.character = jobs[into].character;
                    (p, jobs[into].character.accesses_per_thread)
                }
                _ => (r.placed.clone(), r.left),
            })
            .collect()
    };
    for _ in 0..batch.len() {
        // Where each job is and each of their nodes' predicted total, once
        // per round: every pair below reuses them.
        let at: Vec<usize> = batch.iter().map(|&j| node_of(nodes, j)).collect();
        let mut total: BTreeMap<usize, f64> = BTreeMap::new();
        for &n in &at {
            total
                .entry(n)
                .or_insert_with(|| predicted_total_s(mem, &mix(&nodes[n], None)));
        }
        let mut best: Option<(f64, usize, usize)> = None;
        for (x, &a) in batch.iter().enumerate() {
            for (y, &b) in batch.iter().enumerate().skip(x + 1) {
                let (na, nb) = (at[x], at[y]);
                if na == nb || jobs[a].threads != jobs[b].threads {
                    continue;
                }
                let before = total[&na] + total[&nb];
                let after = predicted_total_s(mem, &mix(&nodes[na], Some((a, b))))
                    + predicted_total_s(mem, &mix(&nodes[nb], Some((b, a))));
                let gain = before - after;
                // A gain within rounding is none: no swapping back and forth.
                if gain > 1e-9 * before && best.is_none_or(|(g, _, _)| gain > g) {
                    best = Some((gain, a, b));
                }
            }
        }
        let Some((gain, a, b)) = best else { break };
        let (na, nb) = (node_of(nodes, a), node_of(nodes, b));
        for (n, out, into) in [(na, a, b), (nb, b, a)] {
            let r = nodes[n]
                .running
                .iter_mut()
                .find(|r| r.job == out)
                .expect("on its node");
            r.job = into;
            r.placed.character = jobs[into].character;
            r.left = jobs[into].character.accesses_per_thread;
        }
        let why = |other: usize, n: usize| {
            format!(
                "n{}: swapped with {} after S2's rule placed both: the model predicts {gain:.1} s less total job time",
                n + 1,
                jobs[other].name
            )
        };
        moved.retain(|(j, _, _)| *j != a && *j != b);
        moved.push((a, nb, why(b, nb)));
        moved.push((b, na, why(a, na)));
    }
    moved
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cluster::ClusterScenario;

    fn two_jobs() -> ClusterScenario {
        let text = "[cluster]\nnodes = 1\nmachine = \"package:2 numa:1 l3:1 core:8\"\n\
                    [model]\nnode_bw_gbps = 34.0\nlink_bw_gbps = 42.5\ncontention = { kind = \"mm1\" }\n\
                    [[job]]\nname = \"short\"\nthreads = 8\nsolo_time_s = 100\nbw_gbps = 30\n\
                    [[job]]\nname = \"long\"\nthreads = 8\nsolo_time_s = 400\nbw_gbps = 30\n";
        ClusterScenario::parse(text, "t.toml").unwrap()
    }

    #[test]
    fn the_predicted_total_re_solves_the_mix_when_a_job_ends() {
        let s = two_jobs();
        let placed = |j: usize, layout: Vec<u32>| Placed {
            character: s.jobs[j].character,
            threads_per_node: layout,
            memory: Vec::new(),
        };
        let full = |j: usize| s.jobs[j].character.accesses_per_thread;
        // Alone: its solo time.
        let alone = predicted_total_s(&s.mem, &[(placed(0, vec![4, 4]), full(0))]);
        assert!((alone / 100.0 - 1.0).abs() < 1e-6, "{alone}");
        // Together: the short job is slowed, ends at t1 > 100 s; the long
        // one runs slowed until then and alone after, so it ends before
        // 400 s + (t1 - what it got done meanwhile) but after 400 s.
        let both = [(placed(0, vec![4, 4]), full(0)), (placed(1, vec![4, 4]), full(1))];
        let together = numa::predict(&s.mem, &[both[0].0.clone(), both[1].0.clone()]).unwrap();
        let t1 = together.programs[0].time_s;
        assert!(t1 > 100.0);
        let slow = together.programs[1].time_s / 400.0;
        let t2 = t1 + (400.0 - t1 / slow);
        let total = predicted_total_s(&s.mem, &both);
        assert!((total - (t1 + t2)).abs() < 1e-6 * total, "{total} vs {}", t1 + t2);
        // Half the long job left: half the work, from now.
        let half = predicted_total_s(&s.mem, &[(placed(1, vec![4, 4]), full(1) / 2.0)]);
        assert!((half / 200.0 - 1.0).abs() < 1e-6, "{half}");
    }
}
