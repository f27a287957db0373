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
    let run = || {
        let c =
            herd_sim::compare::<NoMeter>(&s, &policies, &[1, 2], || None, false, |_, _, _, _| {}).unwrap();
        serde_json::to_string(&c).unwrap()
    };
    let (a, b) = (run(), run());
    assert_eq!(a, b);
    assert!(
        a.contains("\"decision_overhead_pct\":null"),
        "timing off means null, not a fake zero"
    );
}
