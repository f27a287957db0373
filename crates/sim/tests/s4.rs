//! S4 in simulation (`scenarios/s4-*.toml`, written by
//! scripts/gen-s4-scenarios.py): PALM against the OS's thread packing.

fn makespan(name: &str, policy: &str) -> f64 {
    let path = format!("{}/../../scenarios/{name}.toml", env!("CARGO_MANIFEST_DIR"));
    let text = std::fs::read_to_string(&path).unwrap();
    let s = herd_sim::Scenario::parse(&text, &path, &|_| Err("no XML".into())).unwrap();
    let solo = herd_sim::solo_times(&s);
    herd_sim::run_policy::<herd_engine::NoMeter>(&s, policy, 1, &solo, None, false, |_, _| {})
        .unwrap()
        .makespan_s
}

#[test]
fn palm_beats_thread_packing_with_one_core_short_and_on_mixed_cores() {
    let (tp, palm) = (
        makespan("s4-sync-15", "pack:tp:cores=15"),
        makespan("s4-sync-15", "pack:palm:cores=15"),
    );
    assert!(palm < tp * 0.8, "16 threads on 15 cores: palm {palm} vs tp {tp}");
    let (tp, palm) = (
        makespan("s4-sync-hetero", "pack:tp:cores=15"),
        makespan("s4-sync-hetero", "pack:palm:cores=15"),
    );
    assert!(palm < tp * 0.7, "7 fast + 8 slow: palm {palm} vs tp {tp}");
    // S4's heterogeneous result: PALM beats thread reduction (16 threads
    // on 7 fast + 8 slow cores; the paper: 9.2%).
    let tr = makespan("s4-sync-hetero", "pack:tr:cores=15");
    assert!(palm < tr * 0.95, "palm {palm} vs tr {tr}");
    // Two groups of eight are one capacity class: nothing to move.
    let (tp, palm) = (
        makespan("s4-sync-2", "pack:tp:cores=2"),
        makespan("s4-sync-2", "pack:palm:cores=2"),
    );
    assert!((palm / tp - 1.0).abs() < 0.01, "{palm} vs {tp}");
}

#[test]
fn thread_reduction_keeps_the_total_work() {
    // Sixteen threads on all 16 cores, or two threads doing the same total
    // work on two cores: eight times longer, to within the barriers' cost.
    let path = format!("{}/../../scenarios/s4-nosync-2.toml", env!("CARGO_MANIFEST_DIR"));
    let s = herd_sim::Scenario::parse(&std::fs::read_to_string(&path).unwrap(), &path, &|_| {
        Err("x".into())
    })
    .unwrap();
    let job = &s.jobs[0];
    let two = job.with_threads(2);
    let work = |j: &herd_sim::scenario::Job| {
        j.phases.iter().map(|p| p.instructions).sum::<f64>() * f64::from(j.threads)
    };
    assert_eq!(two.threads, 2);
    assert!((work(&two) / work(job) - 1.0).abs() < 1e-12);
    assert_eq!(two.barrier.unwrap().0 / job.barrier.unwrap().0, 8.0);
}
