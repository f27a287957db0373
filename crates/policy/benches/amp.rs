//! S3's decision cost: time per decision of the asymmetric-core policies
//! with 1,000 single-threaded tasks on the hybrid machines of hwloc's test
//! suite (S3: 0.02-0.048% of CPU time).
//!
//! Run: cargo bench -p herd-policy --bench amp [-- POLICY...]
//!
//! Each task's LLC miss rate follows its own phase pattern (a new phase
//! every 2-6 s), so monitors see phase changes, stable phases and blips;
//! tasks report counters every 50 ms period, and the policies sample them
//! every 200 ms. Prints, per machine and policy, the mean decision in µs
//! and as a share of the CPU time the period offers (CPUs x period),
//! medians of 3 runs of 300 decisions (15 simulated seconds).
//!
//! A policy the catalogue does not know, or a count that is not a whole
//! number >= 1, is named on stderr before anything runs, exit 2.

mod common;
#[path = "../../../bench/input.rs"]
mod input;

/// How the bench names itself in a message about its input.
const BENCH: &str = "policy amp";

use herd_policy::{JobView, Obs, Snapshot, TaskState, TaskView};
use herd_topo::Machine;

const TASKS: u64 = 1000;
const PERIOD_NS: u64 = 50_000_000;
/// Decisions per run (HERD_BENCH_DECISIONS overrides: `make bench-smoke`
/// runs 5, to show the bench still runs, not how fast).
fn decisions() -> u64 {
    input::count("HERD_BENCH_DECISIONS", 300)
}

/// A task's miss rate at time `t_ns`: one of three levels, changing every
/// 2-6 s, with a one-period blip now and then (SplitMix-style hashing keeps
/// it deterministic and cheap).
fn miss_rate(task: u64, t_ns: u64) -> f64 {
    let h = |x: u64| {
        let mut z = x.wrapping_add(0x9E37_79B9_7F4A_7C15);
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    };
    let phase_len_ns = 2_000_000_000 + (h(task) % 4) * 1_000_000_000;
    let phase = t_ns / phase_len_ns;
    let level = [0.05, 0.3, 0.7][(h(task ^ (phase << 20)) % 3) as usize];
    if h(task ^ t_ns) % 97 == 0 {
        (level * 2.0f64).min(0.95)
    } else {
        level
    }
}

fn snapshot(m: &Machine, now_ns: u64) -> Snapshot {
    let cpus: Vec<u32> = m.all_cpus().iter().collect();
    Snapshot {
        now_ns,
        period_ns: PERIOD_NS,
        tasks: (0..TASKS)
            .map(|i| {
                let refs = 2_000_000;
                TaskView {
                    id: i + 1,
                    job: i as u32,
                    rank: 0,
                    state: TaskState::Runnable,
                    cpu: Some(cpus[i as usize % cpus.len()]),
                    obs: Obs {
                        cpu_time_ns: PERIOD_NS * cpus.len() as u64 / TASKS,
                        instructions: Some(50_000_000),
                        cycles: Some(60_000_000),
                        llc_refs: Some(refs),
                        llc_misses: Some((refs as f64 * miss_rate(i, now_ns)) as u64),
                        ..Obs::default()
                    },
                    heartbeats: None,
                }
            })
            .collect(),
        jobs: (0..TASKS)
            .map(|i| JobView {
                id: i as u32,
                name: format!("t{i}"),
                program: format!("p{}", i % 21),
                arrival_ns: 0,
                memory_hint: None,
                memory_kb: None,
                threads_declared: None,
            })
            .collect(),
        ..Snapshot::default()
    }
}

fn run(m: &Machine, policy: &str) -> f64 {
    let snaps: Vec<Snapshot> = (0..decisions()).map(|d| snapshot(m, d * PERIOD_NS)).collect();
    common::us_per_decision(m, policy, &snaps).mean_us
}

fn main() {
    let root = concat!(env!("CARGO_MANIFEST_DIR"), "/../../fixtures/topologies/xml/");
    let machines = [
        "20em64t-hybrid-1p6c2t+2ca4co1t.xml",
        "5intel64-hybrid-lakefield.xml",
    ];
    let mut policies: Vec<String> = std::env::args().skip(1).filter(|a| !a.starts_with('-')).collect();
    if policies.is_empty() {
        policies = [
            "amp:comprehensive",
            "amp:hass-s",
            "amp:hass-d",
            "amp:sample-run",
            "amp:ff",
        ]
        .map(String::from)
        .to_vec();
    }
    common::known(&policies);
    println!(
        "{TASKS} tasks, {} ms period, {} decisions; medians of 3",
        PERIOD_NS / 1_000_000,
        decisions()
    );
    for file in machines {
        let m = Machine::from_path(std::path::Path::new(&format!("{root}{file}"))).expect("fixture loads");
        let kinds: Vec<String> = m
            .kinds()
            .iter()
            .map(|k| format!("{} x {} ({:.2})", k.cpus.len(), k.label, k.capacity))
            .collect();
        println!("{file}: {} CPUs, kinds {}", m.cpus().len(), kinds.join(", "));
        for p in &policies {
            let mut us: Vec<f64> = (0..3).map(|_| run(&m, p)).collect();
            us.sort_by(f64::total_cmp);
            let share = us[1] * 1e3 / (PERIOD_NS as f64 * m.cpus().len() as f64) * 100.0;
            println!(
                "  {p:<20} {:>9.1} µs per decision  {share:.4}% of CPU time",
                us[1]
            );
        }
    }
}
