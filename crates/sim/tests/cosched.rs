//! `cosched:fair` in simulation: under a cap, never more runnable threads
//! than CPUs, every job finishes, and each gets its turn; programs of one
//! thread each, uncapped, are left to the kernel.

use herd_engine::NoMeter;
use herd_policy::TaskState;
use herd_sim::Scenario;

/// Four one-thread jobs on two CPUs under `policy`: the most runnable at
/// once, the jobs seen running, and the makespan.
fn four_on_two(policy: &str) -> (usize, usize, f64) {
    let text = "[machine]\nsynthetic = \"core:2\"\n[[job]]\nname = \"loop\"\ncopies = 4\n[[job.phase]]\ninstructions = 1e9\nipc = 1.0\n";
    let mut s = Scenario::parse(text, "cosched.toml", &|_| Err("none".into())).unwrap();
    // The mechanism under test, taking turns: the guard's probes let every
    // job run at once.
    s.guard = false;
    let solo = herd_sim::solo_times(&s);
    let mut most_running = 0;
    let mut seen_running = std::collections::BTreeSet::new();
    let fair = policy.parse().unwrap();
    let r = herd_sim::run_policy::<NoMeter>(&s, &fair, 1, &solo, None, false, |view, _| {
        let running: Vec<u32> = view
            .snapshot
            .tasks
            .iter()
            .filter(|t| t.state != TaskState::Paused)
            .map(|t| t.job)
            .collect();
        // The plan of this decision applies after the view; the view shows the last one's effect.
        if view.decision > 0 {
            most_running = most_running.max(running.len());
        }
        seen_running.extend(running);
    })
    .unwrap();
    assert!(
        r.jobs.iter().all(|j| j.turnaround_s.is_some()),
        "all finished: {:?}",
        r.jobs
    );
    (most_running, seen_running.len(), r.makespan_s)
}

#[test]
fn four_jobs_on_two_cpus_take_turns_under_a_cap() {
    let (most, seen, makespan) = four_on_two("cosched:fair:slots=2");
    assert!(most <= 2, "{most} ran at once");
    assert_eq!(seen, 4, "every job got a turn");
    // Work is conserved: 4 x 0.4 s on 2 CPUs.
    assert!((makespan - 0.8).abs() < 0.05, "{makespan}");
}

#[test]
fn one_thread_jobs_are_left_to_the_kernel() {
    let (most, _, makespan) = four_on_two("cosched:fair");
    assert_eq!(most, 4, "no turns: all four run");
    assert!((makespan - 0.8).abs() < 0.05, "{makespan}");
}
