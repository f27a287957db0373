//! S3 in simulation (`scenarios/s3-*.toml`, written by
//! scripts/gen-s3-scenarios.py): amp:comprehensive against linux and amp:ff.

use herd_sim::Scenario;

fn load(name: &str) -> Scenario {
    let path = format!("{}/../../scenarios/{name}.toml", env!("CARGO_MANIFEST_DIR"));
    let text = std::fs::read_to_string(&path).unwrap();
    Scenario::parse(&text, &path, &|_| Err("no XML here".into())).unwrap()
}

/// Geometric mean over tasks of turnaround under `policy` / under linux.
fn completion(s: &Scenario, policy: &str) -> (f64, f64) {
    let solo = herd_sim::solo_times(s);
    let run = |p: &str| {
        herd_sim::run_policy::<herd_engine::NoMeter>(s, p, 1, &solo, None, false, |_, _| {}).unwrap()
    };
    let (base, r) = (run("linux"), run(policy));
    let logs: f64 = base
        .jobs
        .iter()
        .zip(&r.jobs)
        .map(|(b, j)| (j.turnaround_s.unwrap() / b.turnaround_s.unwrap()).ln())
        .sum();
    ((logs / r.jobs.len() as f64).exp(), r.makespan_s / base.makespan_s)
}

#[test]
fn comprehensive_beats_linux_and_fast_first_on_a_high_diversity_set() {
    let s = load("s3-uma-hd1");
    let (c, c_makespan) = completion(&s, "amp:comprehensive:preset=uma");
    let (ff, _) = completion(&s, "amp:ff");
    assert!(c < 0.87, "completion vs linux {c}");
    assert!(c_makespan < 0.85, "makespan vs linux {c_makespan}");
    assert!(c < ff, "{c} vs amp:ff {ff}");
}

#[test]
fn with_no_diversity_there_is_little_to_gain() {
    let (c, _) = completion(&load("s3-uma-nd"), "amp:comprehensive:preset=uma");
    assert!((0.9..1.02).contains(&c), "{c}");
}
