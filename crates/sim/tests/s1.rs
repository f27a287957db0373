//! S1 in simulation: the profile store fills in training runs, `bw:iabw`
//! then beats `linux` on a group of SPEC-like programs, and before the store
//! covers the group it behaves exactly like `linux`.

use herd_sim::{Scenario, learning_runs};

const WL02: &str = include_str!("../../../scenarios/s1-wl02.toml");

fn scenario() -> Scenario {
    Scenario::parse(WL02, "s1-wl02.toml", &|_| Err("no files".into())).unwrap_or_else(|e| panic!("{e}"))
}

fn gains(l: &herd_sim::LearningRuns, policy: &str) -> Vec<f64> {
    l.points
        .iter()
        .filter(|p| p.policy == policy)
        .map(|p| p.speedup_pct)
        .collect()
}

#[test]
fn a_trained_store_opens_the_gate_and_iabw_beats_linux() {
    // The algorithm as published: with the guard on, the second run would
    // be the kernel's, to measure the group (tests/guard.rs).
    let mut s = scenario();
    s.guard = false;
    let l = learning_runs(&s, &["bw:iabw".parse().unwrap()], 1, 2, 1, |_, _| {}).unwrap();
    assert!(
        l.training_runs < s.train_runs,
        "training stopped when every program was covered"
    );
    assert!(l.trained_coverage >= 0.8, "{}", l.trained_coverage);
    assert!(l.trained_accuracy.unwrap() > 0.85, "{:?}", l.trained_accuracy);
    let first = l.points.iter().find(|p| p.policy == "bw:iabw").unwrap();
    assert!(
        first.note.as_deref().unwrap().contains("target IABW"),
        "{:?}",
        first.note
    );
    let g = gains(&l, "bw:iabw");
    assert!(g.iter().all(|&x| x > 2.0), "{g:?}");
}

#[test]
fn without_a_store_iabw_is_linux_and_says_why() {
    let mut s = scenario();
    s.train_runs = 0;
    let l = learning_runs(&s, &["bw:iabw".parse().unwrap()], 1, 2, 1, |_, _| {}).unwrap();
    assert_eq!(l.training_runs, 0);
    let g = gains(&l, "bw:iabw");
    assert!(
        g.iter().all(|&x| x == 0.0),
        "the gate keeps it identical to linux: {g:?}"
    );
    let note = l.points[1].note.as_deref().unwrap();
    assert!(
        note.contains("coverage of") && note.contains("like linux"),
        "{note}"
    );
    assert!(l.points[3].coverage > 0.3, "the first run filled the store");
}
