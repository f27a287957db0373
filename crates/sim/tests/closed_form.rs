//! The simulator against closed forms: fair sharing, one memory-bound job,
//! SMT sharing, S0 power.

use herd_engine::NoMeter;
use herd_sim::{PolicyResult, Scenario};

fn scenario(text: &str) -> Scenario {
    Scenario::parse(text, "test.toml", &|_| Err("no files in tests".into())).unwrap_or_else(|e| panic!("{e}"))
}

fn run(s: &Scenario, policy: &str) -> PolicyResult {
    herd_sim::run_one(s, &policy.parse().unwrap(), 1).unwrap()
}

fn close(a: f64, b: f64, rel: f64) -> bool {
    (a - b).abs() <= rel * b.abs()
}

/// Moves are free here so the fluid shares are exactly fair.
const FREE_MOVES: &str = "[model.migration]\nsame_llc_us = 0\ncross_llc_us = 0\ncross_numa_us = 0\n";
/// The kernel rotates tasks for fairness every 4 ms in these tests.
const FAIRNESS: &str = "fairness_ms = 4\n";

fn compute_jobs(n: usize, instructions: f64) -> String {
    format!(
        "[[job]]\nname = \"loop\"\ncopies = {n}\n[[job.phase]]\ninstructions = {instructions}\nipc = 1.0\n"
    )
}

#[test]
fn equal_compute_jobs_share_cores_fairly() {
    // 0.4 ns per instruction at IPC 1 and 2.5 GHz: 1e9 instructions = 0.4 s.
    for (jobs, cores) in [(6, 2), (3, 2), (5, 4), (2, 4)] {
        let text = format!(
            "[machine]\nsynthetic = \"core:{cores}\"\n[model]\nfreq_ghz = 2.5\n{FAIRNESS}{FREE_MOVES}{}",
            compute_jobs(jobs, 1e9)
        );
        let s = scenario(&text);
        let r = run(&s, "linux");
        let work_s = jobs as f64 * 0.4;
        let expected = if jobs >= cores { work_s / cores as f64 } else { 0.4 };
        // Exact when every CPU holds the same number of jobs; otherwise the
        // kernel rotates jobs every fairness interval (4 ms here), and the
        // last job can end up to one interval late.
        let tolerance_s = if jobs % cores == 0 || jobs < cores {
            1e-6 * expected
        } else {
            0.004
        };
        assert!(
            (r.makespan_s - expected).abs() <= tolerance_s,
            "{jobs} jobs on {cores} cores: {} vs {expected}",
            r.makespan_s
        );
        for j in &r.jobs {
            assert!(close(j.solo_s, 0.4, 1e-6), "solo {}", j.solo_s);
        }
    }
}

#[test]
fn one_memory_bound_job_matches_the_mm1_formula() {
    // One thread alone; its controller is an M/M/1 queue.
    let (bpi, ipc, freq, request_ns, bw): (f64, f64, f64, f64, f64) = (2.0, 0.8, 2.5, 6.4, 12.8);
    let text = format!(
        "[machine]\nsynthetic = \"core:2\"\n[model]\nfreq_ghz = {freq}\nrequest_ns = {request_ns}\nnode_bw_gbps = {bw}\ncontention = {{ kind = \"mm1\" }}\n\
         [[job]]\nname = \"stream\"\n[[job.phase]]\ninstructions = 1e9\nipc = {ipc}\nbytes_per_instr = {bpi}\n"
    );
    let s = scenario(&text);
    let r = run(&s, "linux");
    // The model: t = c + r (s + 1/(mu - lambda) - 1/mu), lambda = r / t.
    let solo = 1.0 / (ipc * freq);
    let req = bpi / 64.0;
    let c = solo - req * request_ns;
    let mu = bw / 64.0;
    let a = c + req * request_ns - req / mu;
    let b = 2.0 * req + a * mu;
    let t = (b + (b * b - 4.0 * mu * a * req).sqrt()) / (2.0 * mu);
    let expected_s = 1e9 * t * 1e-9;
    assert!(
        close(r.makespan_s, expected_s, 1e-6),
        "{} vs {expected_s}",
        r.makespan_s
    );
    // Contention makes it slower than its unloaded time.
    assert!(r.makespan_s > 1e9 * solo * 1e-9);
}

#[test]
fn two_busy_siblings_deliver_one_plus_sigma() {
    let text = format!(
        "[machine]\nsynthetic = \"core:1 pu:2\"\n[model]\nsmt_sigma = 0.3\n{FREE_MOVES}{}",
        compute_jobs(2, 1e9)
    );
    let s = scenario(&text);
    let r = run(&s, "linux");
    // Each sibling runs at 1.3/2 of the core: 0.4 s of work takes 0.4/0.65 s.
    assert!(close(r.makespan_s, 0.4 / 0.65, 1e-6), "{}", r.makespan_s);
    assert!(close(r.throughput, 2.0 * 0.65, 1e-6), "{}", r.throughput);
}

#[test]
fn energy_follows_the_s0_power_model() {
    // One compute job on one core of one package: idle + first package + one core.
    let text = format!(
        "[machine]\nsynthetic = \"package:2 core:2\"\n{}",
        compute_jobs(1, 1e9)
    );
    let s = scenario(&text);
    let r = run(&s, "linux");
    let watts = 76.11 + 35.61 + 9.68;
    assert!(close(r.avg_power_w, watts, 1e-6), "{}", r.avg_power_w);
    assert!(close(r.energy_j, watts * 0.4, 1e-6), "{}", r.energy_j);
}

#[test]
fn spinning_barriers_waste_cpu_and_blocking_ones_do_not() {
    // 3 threads on 2 cores, a barrier every 1e7 instructions.
    let job = |kind: &str| {
        format!(
            "[machine]\nsynthetic = \"core:2\"\n{FREE_MOVES}[[job]]\nname = \"bsp\"\nthreads = 3\nbarrier = {{ every = 1e7, kind = \"{kind}\" }}\n[[job.phase]]\ninstructions = 1e9\nipc = 1.0\n"
        )
    };
    let spin = run(&scenario(&job("spin")), "linux").makespan_s;
    let block = run(&scenario(&job("block")), "linux").makespan_s;
    // Blocking: 3 x 0.4 s of work on 2 cores can finish near 0.6 s;
    // spinning threads hold CPUs they cannot use.
    assert!(block < spin, "block {block} vs spin {spin}");
    assert!(block >= 0.6 * (1.0 - 1e-9), "{block}");
}

#[test]
fn a_migration_costs_its_warm_up_and_no_more() {
    // Default migration costs: 6 jobs rotate over 4 cores hundreds of times.
    // Each move costs 20 us of warm-up, so the makespan stays within 1% of
    // the fair-share ideal (a warm-up that cost more than its 20 us, e.g.
    // lingering to the next balancing tick, would blow this up).
    let text = format!(
        "[machine]\nsynthetic = \"package:1 l3:1 core:4\"\n[model]\n{FAIRNESS}{}",
        compute_jobs(6, 5e9)
    );
    let r = run(&scenario(&text), "linux");
    let ideal = 6.0 * 5e9 * 0.4e-9 / 4.0;
    assert!(r.migrations > 100, "{}", r.migrations);
    assert!(r.makespan_s < ideal * 1.01, "{} vs {ideal}", r.makespan_s);
}

/// A job with Amdahl's shape: `serial` instructions on one thread, then
/// `parallel` instructions shared by `threads` threads, at IPC 1 and 2.5 GHz
/// (0.4 ns per instruction).
fn amdahl_job(threads: u32, serial: f64, parallel: f64) -> String {
    format!(
        "[[job]]\nname = \"wc\"\nthreads = {threads}\n\
         [[job.phase]]\ninstructions = {serial}\nipc = 1.0\nsplit = \"serial\"\n\
         [[job.phase]]\ninstructions = {parallel}\nipc = 1.0\nsplit = \"shared\"\n"
    )
}

#[test]
fn serial_and_shared_phases_follow_amdahl() {
    let (serial, parallel) = (1e8, 9e8);
    for threads in [1u32, 2, 3, 4] {
        let text = format!(
            "[machine]\nsynthetic = \"core:4\"\n[model]\nfreq_ghz = 2.5\n{FREE_MOVES}{}",
            amdahl_job(threads, serial, parallel)
        );
        let r = run(&scenario(&text), "static:compact");
        let expected = 0.4e-9 * (serial + parallel / f64::from(threads));
        assert!(
            close(r.makespan_s, expected, 1e-6),
            "{threads} threads: {} vs {expected}",
            r.makespan_s
        );
    }
}

#[test]
fn a_shared_phase_balances_unequal_threads() {
    // Three threads, two of them SMT siblings (each 0.65 of a core with
    // sigma 0.3) and one alone: the pool drains at 2.3 cores' worth, where
    // per-thread work would wait for the slow siblings.
    let text = format!(
        "[machine]\nsynthetic = \"core:2 pu:2\"\n[model]\nfreq_ghz = 2.5\nsmt_sigma = 0.3\n{FREE_MOVES}\
         [[job]]\nname = \"pool\"\nthreads = 3\n\
         [[job.phase]]\ninstructions = 2.3e9\nipc = 1.0\nsplit = \"shared\"\n"
    );
    let r = run(&scenario(&text), "static:compact");
    assert!(close(r.makespan_s, 0.4, 1e-6), "{}", r.makespan_s);
}

#[test]
fn observations_reused_while_nothing_changes_are_not_counted_twice() {
    // Two threads on two cores at 10 ms periods: nothing changes until the
    // short job ends, so the world reuses observations; the long job's are
    // then observed in full again. Every instruction is reported once.
    let text = "period_ms = 10\n[machine]\nsynthetic = \"core:2\"\n[model]\nfreq_ghz = 2.5\n\
        [[job]]\nname = \"short\"\n[[job.phase]]\ninstructions = 5e8\nipc = 1.0\n\
        [[job]]\nname = \"long\"\n[[job.phase]]\ninstructions = 1e9\nipc = 1.0\n";
    let s = scenario(text);
    let solo = herd_sim::solo_times(&s);
    let mut seen = 0u64;
    let linux = herd_sim::SimPolicy::linux();
    let r = herd_sim::run_policy::<NoMeter>(&s, &linux, 1, &solo, None, false, |view, _| {
        seen += view
            .snapshot
            .tasks
            .iter()
            .filter(|t| t.job == 1)
            .filter_map(|t| t.obs.instructions)
            .sum::<u64>();
    })
    .unwrap();
    assert!(r.sim_reused_observations > 10, "{}", r.sim_reused_observations);
    // The tail after the last observation goes unreported: a period at most.
    assert!(seen as f64 <= 1e9 * 1.0001, "{seen} instructions reported");
    assert!(seen as f64 >= 1e9 * 0.97, "{seen} instructions reported");
}

/// `memory = "first-touch"` stays where each run was first placed; `local`
/// follows the thread. Three memory-bound jobs rotating over two one-core
/// nodes reach their memory remotely part of the time under first touch, so
/// they finish later; two jobs that never move run exactly alike either way.
#[test]
fn first_touch_memory_stays_behind_when_a_thread_moves() {
    let makespan = |jobs: usize, memory: &str| {
        let text = format!(
            "[machine]\nsynthetic = \"package:2 numa:1 l3:1 core:1\"\n[model]\n{FAIRNESS}\
             [[job]]\nname = \"mem\"\ncopies = {jobs}\n[[job.phase]]\ninstructions = 2e9\n\
             ipc = 0.5\nbytes_per_instr = 4.0\nmemory = \"{memory}\"\n"
        );
        let r = run(&scenario(&text), "linux");
        (r.makespan_s, r.migrations)
    };
    let (local, moves) = makespan(3, "local");
    let (first, _) = makespan(3, "first-touch");
    assert!(moves > 10, "the jobs should rotate: {moves} moves");
    assert!(first > local * 1.1, "first-touch {first} vs local {local}");
    let (local, moves) = makespan(2, "local");
    let (first, _) = makespan(2, "first-touch");
    assert_eq!(moves, 0);
    assert!(close(first, local, 1e-12), "first-touch {first} vs local {local}");
}

/// A first-touch job's memory shows in its view (as numa_maps would) once
/// the first decision has fixed it, on the node its thread ran on; a local
/// job's shows nothing, as for a fresh process.
#[test]
fn first_touch_memory_shows_where_it_was_touched() {
    let text = "[machine]\nsynthetic = \"package:2 numa:1 l3:1 core:1\"\n\
                [[job]]\nname = \"ft\"\n[[job.phase]]\ninstructions = 1e9\nipc = 1.0\nmemory = \"first-touch\"\n\
                [[job]]\nname = \"local\"\n[[job.phase]]\ninstructions = 1e9\nipc = 1.0\n";
    let s = scenario(text);
    let solo = herd_sim::solo_times(&s);
    let mut seen = Vec::new();
    let linux = herd_sim::SimPolicy::linux();
    herd_sim::run_policy::<NoMeter>(&s, &linux, 1, &solo, None, false, |view, _| {
        let kb = |name: &str| {
            view.snapshot
                .jobs
                .iter()
                .find(|j| j.name == name)
                .and_then(|j| j.memory_kb.clone())
        };
        let cpu = view
            .snapshot
            .tasks
            .iter()
            .find(|t| t.job == 0)
            .and_then(|t| t.cpu);
        seen.push((kb("ft"), kb("local"), cpu));
    })
    .unwrap();
    assert!(seen.len() > 2, "{} decisions", seen.len());
    // The first decision sees a fresh process; later ones its pages.
    assert_eq!(seen[0].0, None);
    let (ft, local, cpu) = seen[1].clone();
    assert_eq!(local, None);
    let cpu = cpu.expect("ft runs");
    let node = s
        .machine
        .numa_nodes()
        .iter()
        .find(|n| n.cpus.contains(cpu))
        .expect("a NUMA node");
    assert_eq!(ft, Some(vec![(node.os, 1)]));
}
