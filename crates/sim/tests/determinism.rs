//! The same (scenario, policy, seed) gives byte-identical JSON.

use herd_engine::NoMeter;
use herd_sim::Scenario;

#[test]
fn same_inputs_give_identical_json() {
    let text = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../scenarios/smt-mix.toml"
    ))
    .unwrap();
    let s = Scenario::parse(&text, "smt-mix.toml", &|_| Err("none".into())).unwrap();
    let policies: Vec<herd_sim::SimPolicy> = ["static:compact", "static:scatter"]
        .map(|p| p.parse().unwrap())
        .to_vec();
    let run = |jobs: usize| {
        let c = herd_sim::compare::<NoMeter>(&s, &policies, &[1, 2], jobs, || None, false, |_, _, _, _| {})
            .unwrap();
        serde_json::to_string(&c).unwrap()
    };
    let (a, b) = (run(1), run(1));
    assert_eq!(a, b);
    // Runs made at once, however many, in the order they are listed.
    for jobs in [2, 4, 64] {
        assert_eq!(run(jobs), a, "{jobs} runs at once");
    }
    assert!(
        a.contains("\"decision_overhead_pct\":null"),
        "timing off means null, not a fake zero"
    );
}

/// A run whose observations nobody reads settles its threads lazily (only
/// before something changes them or reads them): it must end exactly where
/// a run that reads every observation ends, on scenarios with phases,
/// barriers, migrations' warm-up debts and more threads than CPUs.
#[test]
fn an_unread_run_ends_where_a_read_one_does() {
    let linux: herd_sim::SimPolicy = "linux".parse().unwrap();
    for name in [
        "barrier-spin",
        "oversubscribed",
        "numa-two-socket",
        "s4-sync-7",
        "s1-wl01",
    ] {
        let path = format!("{}/../../scenarios/{name}.toml", env!("CARGO_MANIFEST_DIR"));
        let text = std::fs::read_to_string(&path).unwrap();
        let s = Scenario::parse(&text, &path, &|_| Err("none".into())).unwrap();
        let solo = herd_sim::solo_times(&s);
        let mut read_views = 0;
        let read = herd_sim::run_policy::<NoMeter>(&s, &linux, 1, &solo, None, false, |v, _| {
            read_views += v.snapshot.tasks.len();
        })
        .unwrap();
        let unread = herd_sim::run_one(&s, &linux, 1).unwrap();
        assert!(read_views > 0, "{name}: the read run saw its tasks");
        assert_eq!(
            serde_json::to_string(&read).unwrap(),
            serde_json::to_string(&unread).unwrap(),
            "{name}"
        );
    }
}
