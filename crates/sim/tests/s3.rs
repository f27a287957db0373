//! S3 in simulation (`scenarios/s3-*.toml`, written by
//! scripts/gen-s3-scenarios.py): amp:comprehensive against linux and amp:ff.

use herd_sim::Scenario;

/// A scenario file's path and text.
fn scenario_file(name: &str) -> (String, String) {
    let path = format!("{}/../../scenarios/{name}.toml", env!("CARGO_MANIFEST_DIR"));
    let text = std::fs::read_to_string(&path).unwrap();
    (path, text)
}

/// The scenario with the guard off: S3's policies as published (the
/// guard has its own tests, `tests/guard.rs`).
fn parse(path: &str, text: &str) -> Scenario {
    let mut s = Scenario::parse(text, path, &|_| Err("no XML here".into())).unwrap();
    s.guard = false;
    s
}

fn load(name: &str) -> Scenario {
    let (path, text) = scenario_file(name);
    parse(&path, &text)
}

/// One run of `policy` per seed of the scenario (the seeds move where
/// linux puts each task).
fn runs(s: &Scenario, solo: &[f64], policy: &str) -> Vec<herd_sim::PolicyResult> {
    let policy = &policy.parse().unwrap();
    s.seeds
        .iter()
        .map(|&seed| {
            herd_sim::run_policy::<herd_engine::NoMeter>(s, policy, seed, solo, None, false, |_, _| {})
                .unwrap()
        })
        .collect()
}

/// Each task's turnaround and the makespan, averaged over the seeds.
fn averaged(s: &Scenario, solo: &[f64], policy: &str) -> (Vec<f64>, f64) {
    let runs = runs(s, solo, policy);
    let n = runs.len() as f64;
    let tasks = (0..s.jobs.len())
        .map(|j| runs.iter().map(|r| r.jobs[j].turnaround_s.unwrap()).sum::<f64>() / n)
        .collect();
    (tasks, runs.iter().map(|r| r.makespan_s).sum::<f64>() / n)
}

/// Geometric mean over tasks of turnaround under `policy` / under linux,
/// and the makespans' ratio, as scripts/s3-summary.py computes them.
fn completion(s: &Scenario, policy: &str) -> (f64, f64) {
    let solo = herd_sim::solo_times(s);
    let (base, base_makespan) = averaged(s, &solo, "linux");
    let (r, makespan) = averaged(s, &solo, policy);
    let logs: f64 = base.iter().zip(&r).map(|(b, t)| (t / b).ln()).sum();
    ((logs / r.len() as f64).exp(), makespan / base_makespan)
}

#[test]
fn comprehensive_beats_linux_and_fast_first_on_a_high_diversity_set() {
    let s = load("s3-uma-hd1");
    let (c, c_makespan) = completion(&s, "amp:comprehensive:preset=uma");
    let (ff, _) = completion(&s, "amp:ff");
    // Against linux over ten placements (0.887 and 0.830 when written);
    // against the one placement the job order gave before seeding, the
    // worst of all 630, it looked like 0.841.
    assert!(c < 0.9, "completion vs linux {c}");
    assert!(c_makespan < 0.85, "makespan vs linux {c_makespan}");
    assert!(c < ff, "{c} vs amp:ff {ff}");
}

#[test]
fn linux_puts_different_tasks_on_the_fast_cores_from_seed_to_seed() {
    let s = load("s3-uma-hd1");
    let solo = herd_sim::solo_times(&s);
    // A task's turnaround under linux tells which kind of core it ran on.
    let placements: std::collections::BTreeSet<Vec<u64>> = runs(&s, &solo, "linux")
        .iter()
        .map(|r| {
            r.jobs
                .iter()
                .map(|j| (j.turnaround_s.unwrap() * 1e3) as u64)
                .collect()
        })
        .collect();
    assert!(
        placements.len() > 3,
        "{} distinct placements over {} seeds",
        placements.len(),
        s.seeds.len()
    );
}

#[test]
fn with_no_diversity_there_is_little_to_gain() {
    let (c, _) = completion(&load("s3-uma-nd"), "amp:comprehensive:preset=uma");
    assert!((0.9..1.02).contains(&c), "{c}");
}

/// On the NUMA platforms memory stays where a run first touched it (Linux
/// 2.6.27 had no NUMA balancing), so every move to another package leaves
/// a task reaching its memory remotely. That is why S3 sets alpha near 1
/// there: with the whole-run behaviour weighing most, comprehensive moves
/// tasks less, and beats the baselines that chase phases. With memory that
/// followed each move at once, the low alpha would not lose. This is S3's
/// algorithm as published (`keep_memory=0`): herd's own rule against
/// stranding memory takes most of the low alpha's loss away.
#[test]
fn on_numa_memory_that_stays_put_makes_the_high_alpha_pay() {
    let s = load("s3-numa1-ld1");
    let (high, _) = completion(&s, "amp:comprehensive:alpha=0.8,keep_memory=0");
    let (low, _) = completion(&s, "amp:comprehensive:alpha=0.2,keep_memory=0");
    let (hass_d, _) = completion(&s, "amp:hass-d");
    let (sample, _) = completion(&s, "amp:sample-run");
    // 0.982, 1.029, 1.066 and 1.061 when written.
    assert!(high < low - 0.02, "alpha 0.8 {high} vs 0.2 {low}");
    assert!(
        high < hass_d && high < sample,
        "{high} vs hass-d {hass_d}, sample-run {sample}"
    );

    let (path, text) = scenario_file("s3-numa1-ld1");
    assert!(text.contains("memory = \"first-touch\""));
    let s = parse(
        &path,
        &text.replace("memory = \"first-touch\"", "memory = \"local\""),
    );
    let (high, _) = completion(&s, "amp:comprehensive:alpha=0.8,keep_memory=0");
    let (low, _) = completion(&s, "amp:comprehensive:alpha=0.2,keep_memory=0");
    // alpha 0.8 0.974, alpha 0.2 0.969 when written.
    assert!(
        low < high + 0.005,
        "following memory: alpha 0.2 {low} vs 0.8 {high}"
    );
}

/// S3's Figure 7 order of migration cost (moves between core kinds per
/// minute of CPU time): Sample-Run most, then HASS-D, then comprehensive,
/// then HASS-S. S3 counted 0.2-0.78 a minute for comprehensive.
#[test]
fn migrations_between_kinds_follow_s3s_order() {
    let s = load("s3-uma-ld2");
    let solo = herd_sim::solo_times(&s);
    let rate = |policy: &str| {
        let runs = runs(&s, &solo, policy);
        runs.iter().map(|r| r.cross_kind_per_cpu_min).sum::<f64>() / runs.len() as f64
    };
    let (sample, hass_d) = (rate("amp:sample-run"), rate("amp:hass-d"));
    let (comprehensive, hass_s) = (rate("amp:comprehensive:preset=uma"), rate("amp:hass-s"));
    // 100.5, 31.1, 1.08 and 0.38 when written.
    assert!(
        sample > hass_d && hass_d > comprehensive && comprehensive >= hass_s,
        "sample-run {sample}, hass-d {hass_d}, comprehensive {comprehensive}, hass-s {hass_s}"
    );
    assert!(comprehensive < 2.0, "{comprehensive}");
    assert_eq!(rate("linux"), 0.0);
}

/// S3's ND set on NUMA: identical programs whose small phase changes cross
/// the ranking. As published, comprehensive swaps them between packages
/// and leaves their memory behind (1.216 and 1.171 of linux when written);
/// herd's rule keeps a task by its memory unless the move is worth it.
#[test]
fn identical_programs_on_numa_do_not_swap_their_memory_away() {
    for (name, preset) in [("s3-numa1-nd", "numa1"), ("s3-numa2-nd", "numa2")] {
        let s = load(name);
        let (kept, _) = completion(&s, &format!("amp:comprehensive:preset={preset}"));
        let (published, _) = completion(&s, &format!("amp:comprehensive:preset={preset},keep_memory=0"));
        // 1.021 and 1.012 when written.
        assert!(kept < 1.03, "{name}: {kept}");
        assert!(published > kept + 0.1, "{name}: published {published} vs {kept}");
    }
}

/// Three identical programs on two equal cores. Today's kernel trades
/// places across CPUs for fairness, so all three finish close together;
/// the 2.6.27 model (`linux:2.6`) balances task counts only, so the lone
/// task keeps its whole core and ends first (10 s of work in 10 s) while
/// the pair shares the other until then (15 s each).
#[test]
fn the_2_6_baseline_balances_by_count_and_leaves_shares_unfair() {
    let mut text =
        String::from("name = \"three-on-two\"\nperiod_ms = 50\n[machine]\nsynthetic = \"core:2\"\n");
    for j in 0..3 {
        text.push_str(&format!(
            "[[job]]\nname = \"j{j}\"\n[[job.phase]]\ninstructions = 2.5e10\nipc = 1.0\n"
        ));
    }
    let s = parse("three-on-two", &text);
    let turnarounds = |policy: &str| -> Vec<f64> {
        let r = herd_sim::run_one(&s, &policy.parse().unwrap(), 1).unwrap();
        let mut t: Vec<f64> = r.jobs.iter().map(|j| j.turnaround_s.unwrap()).collect();
        t.sort_by(f64::total_cmp);
        t
    };
    let now = turnarounds("linux");
    let old = turnarounds("linux:2.6");
    // Fair sharing: each gets 2/3 of a core, 15 s of work alone in 10 s.
    assert!(now[0] / now[2] > 0.9, "today's kernel shares fairly: {now:?}");
    assert!(
        (old[0] - 10.0).abs() < 0.1 && (old[2] - 15.0).abs() < 0.1,
        "2.6.27 leaves one task alone on its core: {old:?}"
    );
    // Same work, same machine: the total is the same to within the
    // moves' cost.
    let total = |t: &[f64]| t.iter().sum::<f64>();
    assert!(total(&old) / total(&now) < 1.02, "{old:?} {now:?}");
}
