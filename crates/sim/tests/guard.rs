//! The guard in simulation (issue 23): a policy that loses to the kernel is
//! backed off, one that wins keeps its win. Judged by herd's own simulator
//! (its kernel model stands in for Linux): a check of the mechanism, not
//! ground truth. `scripts/harm-audit.py` runs the same count over every
//! scenario; this is its representative subset.

use herd_sim::{PolicyResult, Scenario, SimPolicy};

fn parse(text: &str) -> Scenario {
    Scenario::parse(text, "inline.toml", &|_| Err("no XML here".into())).unwrap()
}

fn load(name: &str) -> Scenario {
    let path = format!("{}/../../scenarios/{name}.toml", env!("CARGO_MANIFEST_DIR"));
    let text = std::fs::read_to_string(&path).unwrap();
    Scenario::parse(&text, &path, &|_| Err("no XML here".into())).unwrap()
}

fn run(s: &Scenario, policy: &str, guard: bool, seed: u64) -> PolicyResult {
    let mut s = s.clone();
    s.guard = guard;
    let p: SimPolicy = policy.parse().unwrap();
    herd_sim::run_one(&s, &p, seed).unwrap()
}

/// A policy's makespan, averaged over the scenario's seeds.
fn mean_makespan(s: &Scenario, policy: &str, guard: bool) -> f64 {
    s.seeds
        .iter()
        .map(|&seed| run(s, policy, guard, seed).makespan_s)
        .sum::<f64>()
        / s.seeds.len() as f64
}

/// S3's completion measure: the geometric mean over tasks of turnaround
/// over linux's, turnarounds averaged over the scenario's seeds.
fn completion(s: &Scenario, policy: &str, guard: bool) -> f64 {
    let mean_turnarounds = |policy: &str, guard: bool| -> Vec<f64> {
        let runs: Vec<PolicyResult> = s.seeds.iter().map(|&seed| run(s, policy, guard, seed)).collect();
        (0..s.jobs.len())
            .map(|j| runs.iter().map(|r| r.jobs[j].turnaround_s.unwrap()).sum::<f64>() / runs.len() as f64)
            .collect()
    };
    let base = mean_turnarounds("linux", guard);
    let t = mean_turnarounds(policy, guard);
    let logs: f64 = base.iter().zip(&t).map(|(b, x)| (x / b).ln()).sum();
    (logs / t.len() as f64).exp()
}

const CROWDED: &str = r#"
name = "crowded"
period_ms = 10
[machine]
synthetic = "package:1 l3:1 core:2"
[[job]]
name = "two-threads"
threads = 2
[[job.phase]]
instructions = 1e10
ipc = 1.5
"#;

#[test]
fn a_placement_that_crowds_every_thread_onto_one_cpu_is_handed_back() {
    let s = parse(CROWDED);
    let linux = run(&s, "linux", true, 1).makespan_s;
    let off = run(&s, "static:compact:cpus=1", false, 1);
    let on = run(&s, "static:compact:cpus=1", true, 1);
    // Two threads on one CPU take twice as long.
    assert!(off.makespan_s > 1.9 * linux, "{} vs {linux}", off.makespan_s);
    let g = on.guard.as_ref().expect("the guard ran");
    assert_eq!(g.backoffs, 1, "{g:?}");
    assert_eq!(g.in_charge_at_end, Some(herd_engine::InCharge::Kernel));
    assert!(g.comparisons[0].ratio < 0.6, "{g:?}");
    // Lost only until the first probe (11 periods of ~270 crowded): a few
    // percent, not half.
    assert!(on.makespan_s < 1.1 * linux, "{} vs {linux}", on.makespan_s);
    assert!(
        on.notes.iter().any(|n| n.contains("backed off")),
        "{:?}",
        on.notes
    );
    // The baseline itself runs unguarded.
    assert!(run(&s, "linux", true, 1).guard.is_none());
}

/// Six jobs on four cores pinned compactly: two cores hold two jobs each.
/// While all six run, the total progress equals the kernel's, so the probes
/// pass; once the two lone jobs finish, two cores idle while four jobs
/// share the other two. Before, the guard saw it only at its next probe,
/// its gap doubled by the earlier passes (1.184x linux); now two periods of
/// idle CPUs beside waiting threads hand the workload back without a probe.
#[test]
fn idle_cpus_beside_waiting_threads_are_handed_back_at_once() {
    let s = load("oversubscribed");
    let linux = run(&s, "linux", true, 1).makespan_s;
    let off = run(&s, "static:compact", false, 1);
    let on = run(&s, "static:compact", true, 1);
    assert!(off.makespan_s > 1.3 * linux, "{} vs {linux}", off.makespan_s);
    let g = on.guard.as_ref().expect("the guard ran");
    assert_eq!(g.crowded_backoffs, 1, "{g:?}");
    assert!(on.makespan_s < 1.02 * linux, "{} vs {linux}", on.makespan_s);
    assert!(g.summary().contains("without a probe"), "{}", g.summary());
}

#[test]
fn memory_stranding_swaps_on_numa_are_backed_off() {
    // S3's ND set: identical programs, which AMP policies swap between
    // packages on every phase change, leaving their memory behind.
    // hass-d as published: 1.22x linux on NUMA1 and 1.18x on NUMA2.
    for (name, preset) in [("s3-numa1-nd", "numa1"), ("s3-numa2-nd", "numa2")] {
        let s = load(name);
        let comprehensive = format!("amp:comprehensive:preset={preset}");
        for p in [
            "amp:hass-s",
            "amp:hass-d",
            "amp:sample-run",
            "amp:ff",
            &comprehensive,
        ] {
            let on = completion(&s, p, true);
            assert!(on <= 1.02, "{name} {p}: {on:.3} with the guard");
        }
        let off = completion(&s, "amp:hass-d", false);
        assert!(off > 1.1, "{name}: hass-d as published {off:.3}");
    }
}

/// amp:ff on S3's NUMA2 ND set (1.044x Linux's completion as published):
/// blind to behaviour by design, it gives the two fast cores six of the
/// eight memory-bound copies, and their first-touch memory lands there.
/// The guard's probe has room near their memory for four of them; the two
/// it must run on other nodes read what the kernel does with FF's memory
/// layout, not what plain Linux gives, and are left out of the comparison.
/// Backed off, the kernel keeps them away from their memory, and herd's
/// memory follower brings it to them (`herd_engine::memory_follow`): before
/// both, the guard kept FF (1.040), and handing back alone left the two
/// copies reading remote memory for good (1.048).
#[test]
fn a_handed_back_job_away_from_its_memory_has_it_follow() {
    let s = load("s3-numa2-nd");
    let on = run(&s, "amp:ff", true, 1);
    let g = on.guard.as_ref().expect("the guard ran");
    assert!(g.backoffs >= 1, "{g:?}");
    assert!(on.memory_moves >= 1, "memory followed: {}", on.memory_moves);
    // Not under the policy as published (no guard, nothing handed back),
    // nor under linux (nothing herd pinned).
    assert_eq!(run(&s, "amp:ff", false, 1).memory_moves, 0);
    assert_eq!(run(&s, "linux", true, 1).memory_moves, 0);
}

#[test]
fn a_policy_that_wins_keeps_most_of_its_win() {
    // PALM on S4's barrier set (cost against pack:tp at the same cores),
    // and SMT-aware spreading that compact pinning lacks.
    let s = load("s4-sync-7");
    let mean = |p: &str, guard: bool| mean_makespan(&s, p, guard);
    let tp = mean("pack:tp:cores=7", false);
    let off = mean("pack:palm:cores=7", false) / tp;
    let on = mean("pack:palm:cores=7", true) / mean("pack:tp:cores=7", true);
    assert!(off < 0.95, "PALM wins as published: {off:.3}");
    assert!((1.0 - on) >= 0.9 * (1.0 - off), "kept {on:.3} of {off:.3}");
}

/// A policy that packs a job onto one of two NUMA nodes is compared with
/// the job spread over both, as Linux starts a program's threads on an
/// idle machine. Only let go where it stood, the packed job kept its
/// CPUs (each thread had one, nothing was imbalanced) and the probe
/// compared the policy with itself: 0.996 at 1.03x Linux's makespan.
#[test]
fn a_probe_starts_a_job_packed_on_one_node_spread_over_the_nodes() {
    let s = load("s2-node");
    let on = run(&s, "static:compact", true, 1);
    let g = on.guard.as_ref().expect("the guard ran");
    let first = &g.comparisons[0];
    assert_eq!(first.jobs, 1, "{g:?}");
    assert!(first.ratio < 0.95, "{g:?}");
}

/// S2's node: the memory-bound job packed on one node reads 0.88 alone and
/// 0.94 once the solver comes (at 0.2 s). Judged together, the two back
/// the policy off; when each arrival wiped the readings before it, neither
/// was ever judged and the policy kept the job packed (1.0199x Linux's
/// makespan over the seeds, against 1.013 now).
#[test]
fn a_loss_seen_before_a_job_arrives_still_counts_after() {
    let s = load("s2-node");
    let run1 = run(&s, "static:compact", true, 1);
    let g = run1.guard.as_ref().expect("the guard ran");
    let (first, second) = (&g.comparisons[0], &g.comparisons[1]);
    assert!(first.at_ns < 200_000_000 && second.at_ns > 200_000_000, "{g:?}");
    assert!(first.ratio < 0.9 && second.ratio < 0.95, "{g:?}");
    assert_eq!(
        second.in_charge,
        herd_engine::InCharge::Kernel,
        "backed off at the second: {g:?}"
    );
    let mean = |p: &str, guard: bool| mean_makespan(&s, p, guard);
    let linux = mean("linux", false);
    let off = mean("static:compact", false) / linux;
    let on = mean("static:compact", true) / linux;
    assert!(off > 1.02, "static:compact loses as published: {off:.4}");
    assert!(on <= 1.02, "with the guard: {on:.4}");
}

/// The guard across runs on S1's group 6: bw:greedy's co-schedule moves
/// progress from the program that ends last to those that end early, so
/// every in-run comparison reads even while each run ends 4-8% after
/// Linux. Compared by makespan across runs, the kernel keeps the group
/// once a second run of each confirms the loss; bw:iabw, which wins
/// there, keeps it but for two kernel runs (the first four runs
/// alternate), and from then on runs with no in-run probe.
#[test]
fn a_group_that_loses_by_makespan_is_given_to_the_kernel_across_runs() {
    let mut s = load("s1-wl06");
    let runs = 10;
    let points = |s: &Scenario, policy: &str| -> Vec<herd_sim::RunPoint> {
        let l = herd_sim::learning_runs(s, &[policy.parse().unwrap()], 1, runs, 1, |_, _| {}).unwrap();
        l.points.into_iter().filter(|p| p.policy == policy).collect()
    };
    let gains = |s: &Scenario, policy: &str| -> Vec<(f64, herd_engine::InCharge)> {
        points(s, policy)
            .iter()
            .map(|p| (p.speedup_pct, p.placed_by))
            .collect()
    };
    let mean = |g: &[(f64, herd_engine::InCharge)]| g.iter().map(|x| x.0).sum::<f64>() / g.len() as f64;
    let by = |g: &[(f64, herd_engine::InCharge)]| -> Vec<bool> {
        g.iter().map(|x| x.1 == herd_engine::InCharge::Kernel).collect()
    };
    s.guard = false;
    let off = gains(&s, "bw:greedy");
    assert!(mean(&off) < -3.0, "greedy loses as published: {off:?}");
    assert!(by(&off).iter().all(|k| !k));
    s.guard = true;
    let on = gains(&s, "bw:greedy");
    // Its first run, the kernel's, its second to confirm, then the kernel's.
    let mut expect = vec![true; runs as usize];
    expect[0] = false;
    expect[2] = false;
    assert_eq!(by(&on), expect, "{on:?}");
    assert!(mean(&on) > -2.0, "{on:?}");
    let iabw_points = points(&s, "bw:iabw");
    let iabw: Vec<(f64, herd_engine::InCharge)> =
        iabw_points.iter().map(|p| (p.speedup_pct, p.placed_by)).collect();
    let mut expect = vec![false; runs as usize];
    expect[1] = true;
    expect[3] = true;
    assert_eq!(by(&iabw), expect, "{iabw:?}");
    assert!(mean(&iabw) > 3.0, "{iabw:?}");
    // The in-run guard probed runs 1 and 3, not the runs after the
    // confirmation.
    let shares: Vec<Option<f64>> = iabw_points.iter().map(|p| p.guard_kernel_share).collect();
    assert!(shares[0].unwrap() > 0.0 && shares[2].unwrap() > 0.0, "{shares:?}");
    assert_eq!((shares[1], shares[3]), (None, None), "kernel runs");
    assert!(shares[4..].iter().all(|s| *s == Some(0.0)), "{shares:?}");
}

/// The chains made at once: runs the guard across runs gives the kernel
/// take `linux`'s makespan of the same run, waiting for `linux`'s chain
/// when it is behind, and every point comes out as when the chains were
/// made one by one.
#[test]
fn chains_made_at_once_wait_for_linux_where_the_kernel_runs() {
    let s = load("s1-wl06");
    let policies = ["bw:greedy".parse().unwrap(), "bw:iabw".parse().unwrap()];
    let at = |jobs: usize| herd_sim::learning_runs(&s, &policies, 1, 6, jobs, |_, _| {}).unwrap();
    let one = at(1);
    let kernel: Vec<&herd_sim::RunPoint> = (one.points.iter())
        .filter(|p| p.placed_by == herd_engine::InCharge::Kernel)
        .collect();
    assert!(kernel.len() >= 2, "runs given to the kernel: {:?}", one.points);
    for p in kernel {
        let linux = one
            .points
            .iter()
            .find(|l| l.run == p.run && l.policy == "linux")
            .unwrap();
        assert_eq!(p.makespan_s, linux.makespan_s, "run {}", p.run);
        assert_eq!(p.speedup_pct, 0.0, "run {}", p.run);
    }
    // Debug text: a NaN is not equal to itself, but prints as itself.
    for jobs in [2, 3, 8] {
        assert_eq!(format!("{:?}", at(jobs)), format!("{one:?}"), "{jobs} at once");
    }
}
