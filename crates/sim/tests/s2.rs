//! S2's cluster experiment in simulation (`scenarios/s2-cluster.toml`):
//! the model-based node choice against one job per node and the worst
//! packing, as in S2's Table 1, judged by herd's node simulator (the
//! default) and by S2's own model (the selectors' model: circular, kept to
//! check the model's side).

use herd_sim::cluster::{self, ClusterScenario, Judge, PlacementResult};

fn load() -> ClusterScenario {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../../scenarios/s2-cluster.toml");
    let text = std::fs::read_to_string(path).unwrap();
    ClusterScenario::parse(&text, path).unwrap()
}

/// The scenario judged by S2's model instead of the node simulator.
fn by_the_model() -> ClusterScenario {
    let mut s = load();
    s.judge = Judge::Model;
    s
}

fn place(s: &ClusterScenario, name: &str) -> PlacementResult {
    let r = cluster::run(s, name.parse().unwrap());
    assert_eq!(r.unconverged_solves, 0, "{name}");
    assert!(
        r.jobs
            .iter()
            .all(|j| j.run_s.is_finite() && j.slowdown_ratio >= 1.0 - 1e-9),
        "{name}: {r:?}"
    );
    r
}

/// Judged by S2's own model, the one numa:model chooses with: the
/// scenario's fit to S2's Table 1 and the model's side of the selector.
#[test]
fn the_model_places_jobs_better_than_the_worst_packing_by_its_own_model() {
    let s = by_the_model();
    let alone = place(&s, "one-per-node");
    let worst = place(&s, "worst");
    let model = place(&s, "numa:model");
    // One job per node is each job alone: exactly its solo time.
    for (o, j) in alone.jobs.iter().zip(&s.jobs) {
        assert!(
            (o.run_s - j.solo_time_s).abs() < 1e-6 * j.solo_time_s,
            "{}",
            o.name
        );
    }
    assert_eq!(
        (
            alone.run_min_s.round(),
            alone.run_mean_s.round(),
            alone.run_max_s.round()
        ),
        (111.0, 580.0, 891.0)
    );
    // The scenario is fitted to S2's worst-packing row (39188 MB/s mean,
    // 8505 MB/s std): it must stay there.
    assert!(
        (worst.node_bw_mean_gbps / 39.188 - 1.0).abs() < 0.05,
        "{}",
        worst.node_bw_mean_gbps
    );
    assert!(
        (worst.node_bw_std_gbps / 8.505 - 1.0).abs() < 0.05,
        "{}",
        worst.node_bw_std_gbps
    );
    // S2's qualitative result: sharing nodes costs time, the model costs
    // less of it than the worst packing, its longest job gains most, and
    // the nodes' traffic is more even. (S2: mean 695 -> 677 s, max 1094 ->
    // 979 s, std 8505 -> 3699 MB/s.)
    // The targets: the mean at least 2.5% and the spread at least
    // 50% below the worst packing's. S2's rule alone, one job at a time,
    // got -1.9% and -20%; swapping jobs placed together where the model
    // predicts less total time reaches the best of all 105 pairings
    // (-3.1%, -58.6%: scripts/s2-pairings.py simulates all of them).
    sharing_costs_and_the_model_costs_less(&alone, &worst, &model);
    assert!(model.run_max_s < worst.run_max_s * 0.97);
    assert!(
        model.node_bw_std_gbps < worst.node_bw_std_gbps * 0.5,
        "{} vs {}",
        model.node_bw_std_gbps,
        worst.node_bw_std_gbps
    );
    assert!(model.jobs.iter().any(|j| j.reason.contains("swapped with")));
    // Two 8-thread jobs scattered per 16-CPU node, four nodes.
    assert!(
        model
            .jobs
            .iter()
            .all(|j| j.threads_per_numa == vec![4, 4] && j.node < 4)
    );
}

/// Judged by herd's node simulator (issue 26): each node's mix runs in the
/// world, threads pinned where the selector laid them out. numa:model
/// still beats the worst packing on mean job time and spreads traffic more
/// evenly, by less than its own model says (-3.7% and -45% here against
/// -3.1% and -59%); its model's prediction of each run is reported.
#[test]
fn judged_by_the_node_simulator_the_model_still_beats_the_worst_packing() {
    let s = load();
    assert_eq!(s.judge, Judge::NodeSim, "the default judge");
    let alone = place(&s, "one-per-node");
    let worst = place(&s, "worst");
    let model = place(&s, "numa:model");
    let rule = place(&s, "s2-rule");
    // Alone on a node, a job's slowdown is 1 in the world too.
    assert!(
        alone.jobs.iter().all(|j| (j.slowdown_ratio - 1.0).abs() < 1e-3),
        "{alone:?}"
    );
    // The world is not the model: the judge's times differ from the
    // model's own (its predictions are off by a fifth here).
    let by_model = cluster::run(&by_the_model(), "one-per-node".parse().unwrap());
    assert!((alone.run_mean_s / by_model.run_mean_s - 1.0).abs() > 0.05);
    assert!(model.prediction_error_median > 0.01 && model.prediction_error_median < 0.5);
    sharing_costs_and_the_model_costs_less(&alone, &worst, &model);
    assert!(model.node_bw_std_gbps < worst.node_bw_std_gbps * 0.6);
    // herd's batch correction is what gets there: S2's rule alone, one job
    // at a time, gains less.
    assert!(rule.run_mean_s > model.run_mean_s);
    assert!(model.judge_runs > 0);
}

/// Sharing nodes costs time, and numa:model's placement costs at least
/// 2.5% less of it than the worst packing.
fn sharing_costs_and_the_model_costs_less(
    alone: &PlacementResult,
    worst: &PlacementResult,
    model: &PlacementResult,
) {
    assert!(worst.run_mean_s > alone.run_mean_s * 1.05);
    assert!(
        model.run_mean_s < worst.run_mean_s * 0.975,
        "{} vs {}",
        model.run_mean_s,
        worst.run_mean_s
    );
}

#[test]
fn the_simulation_is_deterministic() {
    for s in [load(), by_the_model()] {
        for p in ["numa:model", "slurm", "least-loaded", "worst"] {
            let p = p.parse().unwrap();
            assert_eq!(cluster::run(&s, p), cluster::run(&s, p), "{p}");
        }
    }
}

/// Inside one node: where the memory is decides the layout. In
/// `numa-two-socket.toml` the memory-bound job's memory is bound to node 0;
/// numa:model reads that (numa_maps on a real machine) and compacts there,
/// while in `s2-node.toml` (first-touch memory) it spreads memory-bound jobs.
#[test]
fn numa_model_follows_the_memory_inside_a_node() {
    let load = |name: &str| {
        let path = format!("{}/../../scenarios/{name}.toml", env!("CARGO_MANIFEST_DIR"));
        let text = std::fs::read_to_string(&path).unwrap();
        herd_sim::Scenario::parse(&text, &path, &|_| Err("no XML".into())).unwrap()
    };
    let makespan =
        |s: &herd_sim::Scenario, p: &str| herd_sim::run_one(s, &p.parse().unwrap(), 1).unwrap().makespan_s;
    let bound = load("numa-two-socket");
    let (compact, scatter, model) = (
        makespan(&bound, "static:compact"),
        makespan(&bound, "static:scatter"),
        makespan(&bound, "numa:model"),
    );
    assert!(compact < scatter * 0.8, "compact {compact} vs scatter {scatter}");
    assert!(
        (model - compact).abs() < compact * 0.01,
        "numa:model {model} vs compact {compact}"
    );
    let local = load("s2-node");
    let (compact, scatter, model) = (
        makespan(&local, "static:compact"),
        makespan(&local, "static:scatter"),
        makespan(&local, "numa:model"),
    );
    assert!(
        scatter < compact,
        "first touch: scatter {scatter} beats compact {compact}"
    );
    assert!(
        model <= scatter * 1.005,
        "numa:model {model} vs scatter {scatter}"
    );
}
