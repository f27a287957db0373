//! `herd sim` on a cluster scenario (a `[cluster]` table): node-selection
//! policies compared over a stream of jobs (S2).

use std::fmt::Write;
use std::path::Path;

use herd_sim::cluster::{ClusterComparison, ClusterScenario};
use indicatif::{ProgressBar, ProgressStyle};

use crate::common::Failure;
use crate::output;

/// What `herd sim` asks of a cluster scenario.
pub struct Flags<'a> {
    /// `--policy`: the placements to compare (the scenario's when empty).
    pub policies: &'a [String],
    /// `--json`.
    pub json: bool,
    /// `--explain`.
    pub explain: bool,
    /// Whether flags only machine scenarios take were given (`--runs`,
    /// `--train-runs`, `--seed`, `--report`).
    pub machine_flags: bool,
}

/// Runs a cluster scenario and prints its table (unless `--json`).
pub fn run(args: &Flags<'_>, path: &Path, text: &str) -> Result<ClusterComparison, Failure> {
    let input = |why: String| Failure::Input(anyhow::anyhow!("{}: {why}", path.display()));
    if args.machine_flags {
        return Err(input(
            "--runs, --train-runs, --seed and --report are for machine scenarios; this is a cluster scenario"
                .into(),
        ));
    }
    let scenario =
        ClusterScenario::parse(text, &path.display().to_string()).map_err(|e| Failure::Input(e.into()))?;
    let bar = ProgressBar::new_spinner();
    bar.set_style(ProgressStyle::with_template("{spinner} {msg} [{elapsed}]").expect("static template"));
    let names = args
        .policies
        .iter()
        .map(|n| {
            n.parse()
                .map_err(|why| input(format!("{why} for a cluster scenario (see herd policies)")))
        })
        .collect::<Result<Vec<_>, _>>()?;
    let c = herd_sim::cluster::compare(&scenario, &names, |done, total| {
        bar.set_message(format!(
            "{}: placement {} of {total} over {} jobs",
            scenario.name,
            done + 1,
            scenario.jobs.len()
        ));
        bar.tick();
    });
    bar.finish_and_clear();
    if !args.json {
        output::print(&table(&c))?;
        if args.explain {
            output::print(&explain(&c))?;
        }
    }
    Ok(c)
}

/// The placements side by side, with mean run time and node-bandwidth
/// spread against the reference: `worst` when it ran (S2's comparison),
/// else the first placement.
fn table(c: &ClusterComparison) -> String {
    let mut s = String::new();
    let judged = match c.placements.first().map(|p| p.judge) {
        Some(herd_sim::cluster::Judge::Model) => {
            "judged by S2's NUMA queueing model, the selectors' own (circular)"
        }
        _ => "judged by herd's node simulator; the selectors predict with S2's model",
    };
    let _ = writeln!(
        s,
        "{}: {} jobs on {} nodes of {} ({judged})",
        c.scenario,
        c.jobs.len(),
        c.nodes,
        c.machine
    );
    let reference = c
        .placements
        .iter()
        .find(|p| p.placement == "worst")
        .or(c.placements.first());
    let Some(reference) = reference else {
        return s;
    };
    let name = &reference.placement;
    let _ = writeln!(
        s,
        "{:<14} {:>5} {:>9} {:>9} {:>9} {:>11} {:>10} {:>10} {:>9} {:>12} {:>12} {:>9}",
        "placement",
        "nodes",
        "run min",
        "run mean",
        "run max",
        "turnaround",
        "makespan",
        "node GB/s",
        "std GB/s",
        format!("mean vs {name}"),
        format!("std vs {name}"),
        "pred err"
    );
    let pct = |v: f64, base: f64| {
        if base > 0.0 {
            format!("{:+.1}%", (v / base - 1.0) * 100.0)
        } else {
            "-".into()
        }
    };
    for p in &c.placements {
        let _ = writeln!(
            s,
            "{:<14} {:>5} {:>9.1} {:>9.1} {:>9.1} {:>11.1} {:>10.1} {:>10.2} {:>9.2} {:>12} {:>12} {:>8.1}%",
            p.placement,
            p.nodes,
            p.run_min_s,
            p.run_mean_s,
            p.run_max_s,
            p.turnaround_mean_s,
            p.makespan_s,
            p.node_bw_mean_gbps,
            p.node_bw_std_gbps,
            pct(p.run_mean_s, reference.run_mean_s),
            pct(p.node_bw_std_gbps, reference.node_bw_std_gbps),
            p.prediction_error_median * 100.0
        );
        if p.unconverged_solves > 0 {
            let _ = writeln!(
                s,
                "  warning: {} model solves did not converge under {}",
                p.unconverged_solves, p.placement
            );
        }
    }
    s.push_str("times in seconds; node GB/s: each used node's traffic over the time it ran jobs, mean and std across nodes;\n\
                pred err: median over jobs of |S2 model's run time at placement - run time| / run time\n");
    s
}

/// Each placement's choice for the first jobs, with its reason.
fn explain(c: &ClusterComparison) -> String {
    let mut s = String::from("\nWhy (each placement's first 16 jobs):\n");
    for p in &c.placements {
        let _ = writeln!(s, "  {}:", p.placement);
        for j in p.jobs.iter().take(16) {
            let _ = writeln!(
                s,
                "    {} -> n{} {:?}: {} (ran {:.1} s, {:.3}x alone)",
                j.name,
                j.node + 1,
                j.threads_per_numa,
                j.reason,
                j.run_s,
                j.slowdown_ratio
            );
        }
    }
    s
}
