//! S4 in simulation (`scenarios/s4-*.toml`, written by
//! scripts/gen-s4-scenarios.py): PALM against the OS's thread packing.

/// The scenario with the guard off: S4's policies as published (the
/// guard has its own tests, `tests/guard.rs`).
fn scenario(name: &str) -> herd_sim::Scenario {
    let path = format!("{}/../../scenarios/{name}.toml", env!("CARGO_MANIFEST_DIR"));
    let text = std::fs::read_to_string(&path).unwrap();
    let mut s = herd_sim::Scenario::parse(&text, &path, &|_| Err("no XML".into())).unwrap();
    s.guard = false;
    s
}

fn run(s: &herd_sim::Scenario, policy: &str) -> herd_sim::PolicyResult {
    herd_sim::run_one(s, &policy.parse().unwrap(), 1).unwrap()
}

fn makespan(name: &str, policy: &str) -> f64 {
    run(&scenario(name), policy).makespan_s
}

#[test]
fn in_the_consolidation_study_palm_gets_more_batch_work_from_the_same_cores() {
    let s = scenario("s4-consolidation");
    let service = s.consolidation.as_ref().unwrap();
    assert_eq!(service.intervals.len(), 40);
    let (tp, palm) = (run(&s, "pack:tp"), run(&s, "pack:palm"));
    let (tp_c, palm_c) = (tp.consolidation.unwrap(), palm.consolidation.unwrap());
    assert!((tp.makespan_s - 4.0).abs() < 1e-9, "the run lasts the trace");
    // The service's side is the manager's: the same under both, and the
    // jump in the trace costs it the SLO once.
    assert_eq!(tp_c.violations, palm_c.violations);
    assert!(tp_c.violations >= 1 && tp_c.violations < 5, "{}", tp_c.violations);
    assert!(
        palm_c.batch_ginstr_per_s > tp_c.batch_ginstr_per_s * 1.05,
        "palm {} vs tp {}",
        palm_c.batch_ginstr_per_s,
        tp_c.batch_ginstr_per_s
    );
    // The batch job keeps to its budget: at 2.5 GHz and IPC 1.5 a core
    // retires 3.75 G instructions/s; a budget change is seen within a
    // decision period, so one interval may run a little of the old budget.
    for c in [&tp_c, &palm_c] {
        for w in c.batch.windows(2) {
            let most = w[0].batch_cores.max(w[1].batch_cores) as f64;
            assert!(w[1].ginstr_per_s <= 3.75 * most * 1.0001, "{w:?}");
        }
        let fewest = c.batch.iter().min_by_key(|b| b.batch_cores).unwrap();
        assert!(
            fewest.ginstr_per_s <= 3.75 * fewest.batch_cores as f64 * 1.05,
            "{fewest:?}"
        );
    }
    // linux places as if there were no budget: not judged, and said so.
    let linux = run(&s, "linux");
    assert!(linux.consolidation.is_none());
    assert!(
        linux
            .notes
            .iter()
            .any(|n| n.contains("does not follow a core budget"))
    );
}

#[test]
fn palm_beats_thread_packing_with_one_core_short_and_on_mixed_cores() {
    let (tp, palm) = (
        makespan("s4-sync-15", "pack:tp:cores=15"),
        makespan("s4-sync-15", "pack:palm:cores=15"),
    );
    // S4: 47% shorter; issue 9 asks for 40%. herd's controller (4 ms
    // epochs, a 2% dead band, hill climbing) gets 40.2%, as the best fixed
    // period does (0.0637 s against 0.1065 s when written).
    assert!(palm < tp * 0.6, "16 threads on 15 cores: palm {palm} vs tp {tp}");
    let best = makespan("s4-sync-15", "static-best:pack:palm:cores=15");
    assert!(
        best <= palm && palm < best * 1.02,
        "palm {palm} vs static best {best}"
    );
    // S4's own controller (one-period epochs, no dead band, double when
    // better) wanders off it.
    let s4 = makespan(
        "s4-sync-15",
        "pack:palm:cores=15,epoch_us=0,tolerance=0,epoch_beats=0,climb=0",
    );
    assert!(s4 > palm * 1.1, "S4's controller {s4} vs herd's {palm}");
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

#[test]
fn with_three_threads_on_two_cores_palm_learns_the_barriers_and_its_plan_wins() {
    // The live experiment's shape. PALM learns the 16 beats between
    // barriers from the heartbeats, then runs its plan; it ends between
    // its groups and the plan given the 16 beats from the start (0.132,
    // 0.126 and 0.124 s when written; thread reduction 0.120).
    let s = scenario("s4-vm-3on2");
    let groups = run(&s, "pack:palm:cores=2,barrier_beats=0").makespan_s;
    let solo = herd_sim::solo_times(&s);
    let mut notes = Vec::new();
    let auto = herd_sim::run_policy::<herd_engine::NoMeter>(
        &s,
        &"pack:palm:cores=2".parse().unwrap(),
        1,
        &solo,
        None,
        false,
        |_, plan| notes.extend(plan.note.as_ref().map(|n| n.to_string())),
    )
    .unwrap();
    let given = run(&s, "pack:palm:cores=2,barrier_beats=16").makespan_s;
    assert!(
        auto.makespan_s < groups * 0.97,
        "learned {} vs groups {groups}",
        auto.makespan_s
    );
    assert!(
        given <= auto.makespan_s,
        "given {given} vs learned {}",
        auto.makespan_s
    );
    assert!(
        notes
            .iter()
            .any(|n| n.contains("16 beats between barriers, learned; running the plan")),
        "{notes:?}"
    );
}
