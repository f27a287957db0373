//! S1's decision cost: time per period spent learning and choosing
//! co-runners with 1,000 programs on 64 cores (S1: the O(N*C) choice cost
//! < 0.2% of run time). Each program has four phases of different memory
//! intensity; the 100 ms slice is S1's.
//!
//! Run: cargo bench -p herd-sim --bench decide [-- POLICY...]
//! Prints, per policy, the mean decision (learning included) in µs and as
//! a share of the programs' CPU time, medians of 3 runs, over the first
//! HERD_BENCH_HORIZON_S (default 20) simulated seconds. `bw:oracle` and
//! `bw:greedy` take the full path (learning, targets, the choice);
//! `bw:iabw` starts with an empty store, so its gate stays closed and it
//! pays for learning only: its open-gate choice is the oracle's.
//!
//! A policy the catalogue does not know, or a horizon that is not a
//! positive number of seconds, is named on stderr before anything runs,
//! exit 2.

use std::time::Instant;

use herd_engine::CostMeter;
use herd_sim::Scenario;

#[path = "../../../bench/input.rs"]
mod input;

/// How the bench names itself in a message about its input.
const BENCH: &str = "sim decide";

fn scenario(horizon_s: f64) -> Scenario {
    let mut text = format!(
        "name = \"decide\"\nperiod_ms = 100\nhorizon_s = {horizon_s}\n\
         [machine]\nsynthetic = \"package:2 l3:4 core:8\"\n[model]\nnode_bw_gbps = 60\ntimeslice_ms = 8\n",
    );
    for j in 0..1000 {
        let bw = [0.1, 0.8, 2.0, 3.2][j % 4];
        text.push_str(&format!("[[job]]\nname = \"p{j}\"\n"));
        for k in 0..4 {
            let b = bw * [0.5, 1.5, 0.8, 1.2][(j + k) % 4];
            text.push_str(&format!(
                "[[job.phase]]\ninstructions = 5e9\nipc = {}\nbw_gbps = {b}\nllc_miss_rate = {}\n",
                1.8 / (1.0 + b),
                0.2 + 0.15 * k as f64
            ));
        }
    }
    Scenario::parse(&text, "decide", &|_| Err("no xml".into())).expect("bench scenario parses")
}

#[derive(Default)]
struct Wall(Option<Instant>);

impl CostMeter for Wall {
    fn start(&mut self) {
        self.0 = Some(Instant::now());
    }
    fn stop(&mut self) -> u64 {
        self.0.take().map_or(0, |t| t.elapsed().as_nanos() as u64)
    }
}

fn main() {
    let horizon_s = input::seconds("HERD_BENCH_HORIZON_S", 20.0);
    let policies: Vec<String> = {
        let args: Vec<String> = std::env::args().skip(1).filter(|a| !a.starts_with('-')).collect();
        if args.is_empty() {
            vec![
                "bw:oracle".into(),
                "bw:greedy".into(),
                "bw:iabw".into(),
                "linux".into(),
            ]
        } else {
            args
        }
    };
    let policies: Vec<(String, herd_sim::SimPolicy)> = policies
        .into_iter()
        .map(|p| match p.parse::<herd_sim::SimPolicy>() {
            Ok(policy) => (p, policy),
            Err(e) => input::bad(format!("policy {p:?}: {e}")),
        })
        .collect();
    let s = scenario(horizon_s);
    println!(
        "machine: {} cores; programs: {}; slice: 100 ms; horizon: {horizon_s} s",
        s.machine.cpus().len(),
        s.jobs.len()
    );
    let solo = vec![10.0; s.jobs.len()];
    for (p, policy) in policies {
        let (mut mean_us, mut pct) = (Vec::new(), Vec::new());
        let mut decisions = 0;
        for _ in 0..3 {
            let mut m = Wall::default();
            let r =
                herd_sim::run_policy(&s, &policy, 1, &solo, Some(&mut m), false, |_, _| {}).expect("policy");
            mean_us.push(r.decision_wall_us.unwrap_or(f64::NAN));
            pct.push(r.decision_overhead_pct.unwrap_or(f64::NAN));
            decisions = r.decisions;
        }
        println!(
            "{p:<12} {decisions} decisions: mean {:.0} µs per decision (median of 3), \
             {:.3}% of the programs' CPU time",
            herd_model::median(mean_us),
            herd_model::median(pct)
        );
    }
}
