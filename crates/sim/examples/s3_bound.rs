//! How far any fixed assignment can go on one of S3's experiments: every way
//! to put the scenario's tasks two to a core (which tasks share the fast
//! cores, and who pairs with whom), each simulated with the tasks pinned
//! for the whole run, restarts included, against `linux`. The best of them
//! bounds what a static policy such as HASS-S can reach in herd's model;
//! a dynamic one can beat it only through the programs' phases.
//!
//! Usage: cargo run --release -p herd-sim --example s3_bound -- scenarios/s3-numa1-hd1.toml [...]
//! Prints, per scenario, the best, median and worst assignment's completion
//! time relative to a linux whose placement is luck (each task's mean
//! turnaround over every assignment: `linux` never moves these tasks, so
//! each of its runs is one of them), as a geometric mean over tasks of each
//! one's first turnaround like scripts/s3-summary.py, and the scenario's
//! own policies beside them, over its seeds.

use std::collections::BTreeSet;

use herd_engine::NoMeter;
use herd_policy::{Plan, Policy, TaskId, View};
use herd_topo::CpuSet;

mod s3_common;
use s3_common::{completion, fast_and_slow, load, mean_turnarounds, scenario_paths};

/// Each job's tasks pinned to one CPU, for the whole run.
struct Pinned {
    cpu_of_job: Vec<u32>,
    placed: BTreeSet<TaskId>,
}

impl Policy for Pinned {
    fn name(&self) -> String {
        format!("pinned{:?}", self.cpu_of_job)
    }
    fn decide(&mut self, view: &View<'_>) -> Plan {
        let mut plan = Plan::default();
        for t in &view.snapshot.tasks {
            if self.placed.insert(t.id) {
                let cpu = self.cpu_of_job[t.job as usize];
                plan.run(t.id, CpuSet::from_iter([cpu]), "fixed assignment");
            }
        }
        plan
    }
}

/// Every way to split `items` into unordered pairs.
fn pairings(items: &[usize]) -> Vec<Vec<(usize, usize)>> {
    let Some((&first, rest)) = items.split_first() else {
        return vec![Vec::new()];
    };
    let mut out = Vec::new();
    for (i, &other) in rest.iter().enumerate() {
        let left: Vec<usize> = rest
            .iter()
            .enumerate()
            .filter(|&(k, _)| k != i)
            .map(|(_, &x)| x)
            .collect();
        for mut p in pairings(&left) {
            p.push((first, other));
            out.push(p);
        }
    }
    out
}

fn main() {
    for path in scenario_paths("s3_bound") {
        let s = load(&path);
        let solo = herd_sim::solo_times(&s);
        let run = |spec: &herd_sim::SimPolicy| -> Vec<f64> {
            let runs: Vec<_> = s
                .seeds
                .iter()
                .map(|&seed| {
                    herd_sim::run_policy::<NoMeter>(&s, spec, seed, &solo, None, false, |_, _| {})
                        .expect("the scenario's policies build")
                })
                .collect();
            mean_turnarounds(&runs)
        };
        // Two kinds, two tasks to each CPU.
        let n = s.jobs.len();
        let Some((fast, slow, _)) = fast_and_slow(&s.machine).filter(|_| n == 2 * s.machine.cpus().len())
        else {
            eprintln!("{path}: expects two core kinds and two tasks per CPU");
            continue;
        };
        let mut results: Vec<(Vec<f64>, Vec<u32>)> = Vec::new();
        // Which tasks get the fast cores, then who shares a core with whom
        // (CPUs of one kind are alike on S3's machines: one pairing each).
        for mask in 0u32..(1 << n) {
            if mask.count_ones() as usize != 2 * fast.len() {
                continue;
            }
            let on_fast: Vec<usize> = (0..n).filter(|j| mask & (1 << j) != 0).collect();
            let on_slow: Vec<usize> = (0..n).filter(|j| mask & (1 << j) == 0).collect();
            for pf in pairings(&on_fast) {
                for ps in pairings(&on_slow) {
                    let mut cpu_of_job = vec![0u32; n];
                    for (pairs, cpus) in [(&pf, &fast), (&ps, &slow)] {
                        for (&(a, b), &cpu) in pairs.iter().zip(cpus.iter()) {
                            cpu_of_job[a] = cpu;
                            cpu_of_job[b] = cpu;
                        }
                    }
                    let policy = Box::new(Pinned {
                        cpu_of_job: cpu_of_job.clone(),
                        placed: BTreeSet::new(),
                    });
                    let r =
                        herd_sim::run_learning::<NoMeter>(&s, policy, 0, &solo, None, None, false, |_, _| {});
                    results.push((mean_turnarounds(&[r]), cpu_of_job));
                }
            }
        }
        // Linux by luck: every assignment alike.
        let base: Vec<f64> = (0..n)
            .map(|j| results.iter().map(|(t, _)| t[j]).sum::<f64>() / results.len() as f64)
            .collect();
        let mut scored: Vec<(f64, &Vec<u32>)> =
            results.iter().map(|(t, m)| (completion(t, &base), m)).collect();
        scored.sort_by(|a, b| a.0.total_cmp(&b.0));
        let (best, best_map) = scored[0];
        let names: Vec<String> = best_map
            .iter()
            .zip(&s.jobs)
            .filter(|(cpu, _)| fast.contains(cpu))
            .map(|(_, j)| j.name.clone())
            .collect();
        println!(
            "{path}: {} fixed assignments; completion vs linux by luck: best {best:.3} (fast cores: {}), median {:.3}, worst {:.3}",
            scored.len(),
            names.join(" "),
            scored[scored.len() / 2].0,
            scored[scored.len() - 1].0
        );
        for spec in &herd_sim::with_baseline_first(herd_sim::SimPolicy::linux(), &s.policies) {
            println!(
                "  {spec} over {} seeds: {:.3}",
                s.seeds.len(),
                completion(&run(spec), &base)
            );
        }
    }
}
