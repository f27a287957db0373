//! Decision cost of every policy in the registry as the machine and the
//! workload grow (issue 28): microseconds per decision and nanoseconds per
//! task, from 64 tasks on 16 CPUs (256 on 128) to 4,096 tasks on 384 CPUs (the size of
//! a two-socket EPYC 9654: 2 packages x 4 NUMA nodes x 3 L3s x 8 cores x 2
//! threads, as hwloc counts it). Target: 100 µs a decision at 1,000 tasks
//! on 384 CPUs.
//!
//! Run: cargo bench -p herd-policy --bench scale [-- POLICY...]
//! (HERD_BENCH_DECISIONS=N decisions a run, default 30; medians of 3;
//! HERD_BENCH_TASKS=1024 runs that size alone; HERD_BENCH_HELPERS=1 has
//! each job's last thread sleep throughout, as a pool's helper threads
//! and a build's waiting parents do: the pinning policies never place
//! it, and look for it to start working each turn.)
//!
//! Four-thread jobs; every task reports counters each 100 ms period
//! (instructions, cycles, LLC references and misses, memory traffic), its
//! memory intensity changing every few seconds, so the counter-driven
//! paths run. Policies see no learned profiles and no oracle: the gated
//! ones (`bw:iabw`) take their not-yet-learned path, and `bw:oracle`
//! falls back to learned profiles as it does live.
//!
//! A first decision's time is printed with the minor page faults it took:
//! in a fresh process most of the memory it fills is touched for the first
//! time, and each page costs the kernel a fault (pack:palm's first decision
//! at 1,024 tasks took 70 µs with none and 130-200 µs with 70-80).
//!
//! A policy the catalogue does not know, or a variable above that is not
//! what it should be, is named on stderr before anything runs, exit 2.

mod common;
#[path = "../../../bench/input.rs"]
mod input;

/// How the bench names itself in a message about its input.
const BENCH: &str = "policy scale";

use herd_policy::{JobView, Level, Obs, Plan, Snapshot, TaskState, TaskView};
use herd_topo::{CpuSet, Machine};

const PERIOD_NS: u64 = 100_000_000;
const THREADS_PER_JOB: u64 = 4;

/// (tasks, synthetic machine)
const SIZES: [(u64, &str); 4] = [
    (64, "package:1 core:8 pu:2"),
    (256, "package:2 numa:1 l3:2 core:16 pu:2"),
    (1024, "package:2 numa:4 l3:3 core:8 pu:2"),
    (4096, "package:2 numa:4 l3:3 core:8 pu:2"),
];

fn decisions() -> u64 {
    input::count("HERD_BENCH_DECISIONS", 30)
}

fn hash(x: u64) -> u64 {
    let mut z = x.wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

fn helpers() -> bool {
    input::env_or("HERD_BENCH_HELPERS", 0u8, "0 or 1", |&v| v <= 1) == 1
}

fn snapshot(m: &Machine, tasks: u64, now_ns: u64, helpers: bool) -> Snapshot {
    let cpus: Vec<u32> = m.all_cpus().iter().collect();
    let share = PERIOD_NS * cpus.len() as u64 / tasks.max(cpus.len() as u64);
    Snapshot {
        now_ns,
        period_ns: PERIOD_NS,
        tasks: (0..tasks)
            .map(|i| {
                let job = i / THREADS_PER_JOB;
                // A job's memory intensity: one of three levels, changing
                // every 2-5 s.
                let phase = now_ns / (2_000_000_000 + (hash(job) % 4) * 1_000_000_000);
                let miss = [0.05, 0.3, 0.7][(hash(job ^ (phase << 20)) % 3) as usize];
                let asleep = helpers && i % THREADS_PER_JOB == THREADS_PER_JOB - 1;
                let share = if asleep { 0 } else { share };
                let instructions = share / 2;
                let refs = instructions / 50;
                TaskView {
                    id: i + 1,
                    job: job as u32,
                    rank: (i % THREADS_PER_JOB) as u32,
                    state: if asleep {
                        TaskState::Blocked
                    } else {
                        TaskState::Runnable
                    },
                    cpu: Some(cpus[i as usize % cpus.len()]),
                    obs: Obs {
                        cpu_time_ns: share,
                        instructions: Some(instructions),
                        cycles: Some(share * 2),
                        llc_refs: Some(refs),
                        llc_misses: Some((refs as f64 * miss) as u64),
                        mem_bytes: Some((refs as f64 * miss) as u64 * 64),
                        ..Obs::default()
                    },
                    heartbeats: None,
                }
            })
            .collect(),
        jobs: (0..tasks / THREADS_PER_JOB)
            .map(|j| JobView {
                id: j as u32,
                name: format!("j{j}"),
                program: format!("p{}", j % 17),
                arrival_ns: 0,
                memory_hint: Some([Level::Low, Level::Medium, Level::High][(j % 3) as usize]),
                memory_kb: None,
                threads_declared: Some(THREADS_PER_JOB as u32),
            })
            .collect(),
        ..Snapshot::default()
    }
}

/// What a first decision pays before it decides anything: a plan placing
/// each of `tasks` tasks on a CPU, built and dropped. µs, the first of
/// three times (fresh memory, as a policy's first sight meets it) and
/// their median.
fn plan_floor_us(m: &Machine, tasks: u64) -> (f64, f64) {
    let cpus: Vec<u32> = m.all_cpus().iter().collect();
    let mut runs: Vec<f64> = (0..3)
        .map(|_| {
            let start = std::time::Instant::now();
            let mut plan = Plan::default();
            plan.tasks.reserve(tasks as usize);
            for i in 0..tasks {
                plan.run(
                    i + 1,
                    CpuSet::single(cpus[i as usize % cpus.len()]),
                    "floor: a CPU per task",
                );
            }
            std::hint::black_box(plan);
            start.elapsed().as_secs_f64() * 1e6
        })
        .collect();
    let first = runs[0];
    runs.sort_by(f64::total_cmp);
    (first, runs[1])
}

/// µs per decision of `policy` over `decisions()` periods.
fn run(m: &Machine, tasks: u64, policy: &str) -> common::Cost {
    let snaps: Vec<Snapshot> = (0..decisions())
        .map(|d| snapshot(m, tasks, d * PERIOD_NS, helpers()))
        .collect();
    common::us_per_decision(m, policy, &snaps)
}

fn main() {
    let mut policies: Vec<String> = std::env::args().skip(1).filter(|a| !a.starts_with('-')).collect();
    if policies.is_empty() {
        policies = herd_policy::catalog()
            .iter()
            .map(|e| e.name.to_string())
            .collect();
    }
    // HERD_BENCH_TASKS=1024: only that size (to profile one size alone).
    common::known(&policies);
    let only: Option<u64> = std::env::var_os("HERD_BENCH_TASKS").map(|_| {
        input::env_or(
            "HERD_BENCH_TASKS",
            0,
            "one of the sizes' task counts (64, 256, 1024, 4096)",
            |t| SIZES.iter().any(|&(s, _)| s == *t),
        )
    });
    let machines: Vec<(u64, Machine)> = SIZES
        .iter()
        .filter(|&&(t, _)| only.is_none_or(|o| o == t))
        .map(|&(t, spec)| (t, Machine::synthetic(spec).expect("size's machine")))
        .collect();
    println!(
        "µs per decision (ns per task), medians of 3 runs of {} decisions; {THREADS_PER_JOB}-thread jobs{}",
        decisions(),
        if helpers() {
            ", the last of each asleep"
        } else {
            ""
        }
    );
    print!("{:<20}", "policy");
    for (t, m) in &machines {
        print!(" {:>22}", format!("{t} tasks/{} CPUs", m.cpus().len()));
    }
    println!();
    // Every policy's first decision (its first sight of every task, which
    // it places at once) and the mean of its later ones, below.
    let mut first_and_later: Vec<(String, Vec<common::Cost>)> = Vec::new();
    for p in &policies {
        print!("{p:<20}");
        let mut split = Vec::new();
        for (tasks, m) in &machines {
            let mut runs: Vec<common::Cost> = (0..3).map(|_| run(m, *tasks, p)).collect();
            runs.sort_by(|a, b| a.mean_us.total_cmp(&b.mean_us));
            let median = runs.swap_remove(1);
            print!(
                " {:>22}",
                format!(
                    "{:.1} ({:.0})",
                    median.mean_us,
                    median.mean_us * 1e3 / *tasks as f64
                )
            );
            split.push(median);
        }
        println!();
        first_and_later.push((p.clone(), split));
    }
    // Measured after the policies, in a heap they have used, as a first
    // decision meets it.
    print!("{:<20}", "(a plan, no policy)");
    for (tasks, m) in &machines {
        let (first, median) = plan_floor_us(m, *tasks);
        print!(" {:>22}", format!("{first:.0}, {median:.0}"));
    }
    println!("  <- a plan placing every task, built and dropped: first time, median of 3 (µs)");
    if !first_and_later.is_empty() {
        println!(
            "\nmeeting the machine (before the first turn) / first decision (its page faults) / mean of the later ones, µs (same runs)"
        );
        for (p, split) in first_and_later {
            print!("{p:<20}");
            for c in split {
                print!(
                    " {:>22}",
                    format!(
                        "{:.0} / {:.0} ({}) / {:.1}",
                        c.prepare_us, c.first_us, c.first_faults, c.rest_us
                    )
                );
            }
            println!();
        }
    }
}
