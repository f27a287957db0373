//! S0 in simulation: the SPN-first policy against speedup-first at equal
//! physical cores, S0's power equality, and Amdahl's serial fraction
//! recovered from simulated runs.

use herd_engine::NoMeter;
use herd_model::amdahl;
use herd_sim::Scenario;

const S0: &str = include_str!("../../../scenarios/s0-ht-energy.toml");

/// The scenario with the guard off: S0's policies as published (the
/// guard has its own tests, `tests/guard.rs`).
fn scenario(text: &str) -> Scenario {
    let mut s =
        Scenario::parse(text, "s0.toml", &|_| Err("no files".into())).unwrap_or_else(|e| panic!("{e}"));
    s.guard = false;
    s
}

/// The scenario's serial fraction: its serial phase over all its work.
fn scenario_serial_fraction(s: &Scenario) -> f64 {
    let p = &s.jobs[0].phases;
    p[0].instructions / (p[0].instructions + p[1].instructions)
}

#[test]
fn the_scenario_serial_fraction_is_fitted_to_table_2() {
    // S0 Table 2: S_N / N = 0.54 and 0.63 at N = 12.
    let fit = amdahl::fit_serial_fraction(&[(12.0, 0.54 * 12.0), (12.0, 0.63 * 12.0)]).unwrap();
    let s = scenario(S0);
    assert!((scenario_serial_fraction(&s) - fit).abs() < 1e-3, "{fit}");
}

#[test]
fn spn_first_beats_speed_first_per_physical_core() {
    let s = scenario(S0);
    let policies = ["smt:speed", "smt:spn"].map(|p| p.parse().unwrap());
    let sw = herd_sim::sweep::sweep(&s, &policies, 1, 1, |_, _| {}).unwrap();
    assert_eq!(sw.points.len(), 32, "16 unit counts x 2 policies");
    // Runs made at once: the same points, in the same order, and every
    // run's progress told once.
    let told = std::sync::Mutex::new(Vec::new());
    let at_once = herd_sim::sweep::sweep(&s, &policies, 1, 3, |done, total| {
        told.lock().unwrap().push((done, total))
    });
    assert_eq!(at_once.unwrap(), sw, "3 runs at once");
    let mut told = told.into_inner().unwrap();
    told.sort_unstable();
    assert_eq!(told, (1..=32).map(|d| (d, 32)).collect::<Vec<_>>());
    for p in &sw.points {
        let cores = match p.policy.as_str() {
            "smt:speed" => p.units.min(8) as usize,
            _ => p.units.div_ceil(2) as usize,
        };
        assert_eq!(p.physical_cores, cores, "{} at {} units", p.policy, p.units);
    }
    let mean = sw.spn_vs_speed_mean.unwrap();
    assert!(mean >= 0.20, "mean {mean}");
    for c in &sw.spn_vs_speed {
        if c.same_units {
            assert_eq!(c.physical_cores, 8, "only with every unit in use");
        } else {
            assert_eq!(c.a_units as usize, 2 * c.physical_cores);
            assert!((0.15..=0.34).contains(&c.a_faster), "{c:?}");
        }
    }
}

/// Average power of `threads` compute threads pinned to `cpus`.
fn pinned_power_w(cpus: &str, threads: u32) -> f64 {
    let text = format!(
        "[machine]\nsynthetic = \"package:2 numa:1 l3:1 core:4 pu:2\"\n\
         [[job]]\nname = \"spin\"\nthreads = {threads}\ncpus = \"{cpus}\"\npin_threads = true\n\
         [[job.phase]]\ninstructions = 1e9\nipc = 1.0\n"
    );
    let s = scenario(&text);
    let (solo, linux) = (vec![1.0], herd_sim::SimPolicy::linux());
    let r = herd_sim::run_policy::<NoMeter>(&s, &linux, 1, &solo, None, false, |_, _| {});
    r.unwrap().avg_power_w
}

#[test]
fn four_siblings_draw_what_three_full_cores_draw() {
    // S0: 4 shared units (2 cores x 2 siblings) draw about what 3 full
    // cores do (130.13 W measured), in one package. CPUs 0-3 are cores 0
    // and 1 with both siblings; 0, 2, 4 are three cores' first threads.
    let siblings = pinned_power_w("0-3", 4);
    let full = pinned_power_w("0,2,4", 3);
    assert!((siblings - full).abs() / full < 0.05, "{siblings} W vs {full} W");
}

#[test]
fn amdahl_fit_recovers_the_serial_fraction_from_three_runs() {
    let s = scenario(S0);
    let time_at = |n: u32| {
        let mut at = s.clone();
        at.jobs[0].threads = n;
        let (solo, speed) = (vec![1.0], "smt:speed".parse().unwrap());
        let r = herd_sim::run_policy::<NoMeter>(&at, &speed, 1, &solo, None, false, |_, _| {});
        r.unwrap().makespan_s
    };
    let one = time_at(1);
    // Speed-first gives full cores up to 8 units: capacity = units.
    let points: Vec<(f64, f64)> = [2, 4, 8]
        .iter()
        .map(|&n| (f64::from(n), one / time_at(n)))
        .collect();
    let fit = amdahl::fit_serial_fraction(&points).unwrap();
    let known = scenario_serial_fraction(&s);
    assert!((fit - known).abs() < 0.01, "fitted {fit}, known {known}");
}
