//! `cosched:fair` in simulation: never more runnable threads than CPUs,
//! every job finishes, and each gets its turn.

use herd_engine::NoMeter;
use herd_policy::TaskState;
use herd_sim::Scenario;

#[test]
fn four_jobs_on_two_cpus_take_turns() {
    let text = "[machine]\nsynthetic = \"core:2\"\n[[job]]\nname = \"loop\"\ncopies = 4\n[[job.phase]]\ninstructions = 1e9\nipc = 1.0\n";
    let mut s = Scenario::parse(text, "cosched.toml", &|_| Err("none".into())).unwrap();
    // The mechanism under test, taking turns: the guard's probes let every
    // job run at once.
    s.guard = false;
    let solo = herd_sim::solo_times(&s);
    let mut most_running = 0;
    let mut seen_running = std::collections::BTreeSet::new();
    let fair = "cosched:fair".parse().unwrap();
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
    assert!(most_running <= 2, "{most_running} ran at once");
    assert_eq!(seen_running.len(), 4, "every job got a turn");
    assert!(
        r.jobs.iter().all(|j| j.turnaround_s.is_some()),
        "all finished: {:?}",
        r.jobs
    );
    // Work is conserved: 4 x 0.4 s on 2 CPUs.
    assert!((r.makespan_s - 0.8).abs() < 0.05, "{}", r.makespan_s);
}
