//! `herd sim`'s tables for S1's cross-run learning scenarios (`runs`).

use std::fmt::Write;

use herd_policy::BASELINE;
use herd_sim::{Comparison, LearningRuns};
use serde::Serialize;

/// Per run: linux's makespan, each policy's gain over it, and the coverage
/// and solo-time accuracy of the first learning policy's store.
pub fn table(scenario: &str, l: &LearningRuns) -> String {
    let mut names: Vec<&str> = Vec::new();
    for p in &l.points {
        if !names.contains(&p.policy.as_str()) {
            names.push(&p.policy);
        }
    }
    let others: Vec<&str> = names.iter().copied().filter(|n| *n != BASELINE).collect();
    let learner = others
        .iter()
        .copied()
        .find(|n| n.starts_with("bw:iabw"))
        .or(others.first().copied());
    let mut s = format!(
        "scenario {scenario}: {} runs, each policy learning into its own profile store\n\
         gain = linux makespan / policy makespan - 1 in the same run; cov, acc = coverage and \
         solo-time accuracy of {}'s store at the run's start\n",
        l.runs,
        learner.unwrap_or("-")
    );
    if l.training_runs > 0 {
        let _ = writeln!(
            s,
            "training (S1's database initialisation, linux at loads 0.5/1/2 per CPU): {} runs, coverage {:.0}%, accuracy {}",
            l.training_runs,
            100.0 * l.trained_coverage,
            l.trained_accuracy
                .map_or("-".into(), |a| format!("{:.0}%", 100.0 * a))
        );
        let btr: Vec<String> = l
            .trained_btr
            .iter()
            .map(|t| {
                let learned = t.learned_mean.map_or("-".into(), |b| format!("{b:.1}"));
                format!(
                    "{} {learned}/{:.1} ({:.0}% valid)",
                    t.program,
                    t.exact_mean,
                    100.0 * t.valid_share
                )
            })
            .collect();
        let _ = writeln!(s, "solo BTR after training, learned/exact: {}", btr.join(", "));
    }
    let _ = write!(s, "{:>4}{:>10}", "run", "linux_s");
    for n in &others {
        let _ = write!(s, "{:>14}", format!("{n} %"));
    }
    let _ = writeln!(s, "{:>7}{:>7}", "cov", "acc");
    for run in 1..=l.runs {
        let at = |name: &str| l.points.iter().find(|p| p.run == run && p.policy == name);
        let Some(linux) = at(BASELINE) else {
            continue;
        };
        let _ = write!(s, "{run:>4}{:>10.2}", linux.makespan_s);
        for n in &others {
            let cell = at(n).map_or("-".into(), |p| format!("{:+.2}", p.speedup_pct));
            let _ = write!(s, "{cell:>14}");
        }
        let (cov, acc) = learner.and_then(at).map_or(("-".into(), "-".into()), |p| {
            (
                format!("{:.0}%", 100.0 * p.coverage),
                p.accuracy.map_or("-".into(), |a| format!("{:.0}%", 100.0 * a)),
            )
        });
        let _ = writeln!(s, "{cov:>7}{acc:>7}");
    }
    for m in &l.summary {
        let _ = writeln!(
            s,
            "{}: run 1 {:+.2}%, run 10 {:+.2}%, mean of runs 10-{} {:+.2}%, mean of all {:+.2}%",
            m.policy, m.first_pct, m.run10_pct, l.runs, m.learned_mean_pct, m.mean_pct
        );
    }
    if let Some(r) = iabw_share(l) {
        let _ = writeln!(
            s,
            "bw:iabw reaches {:.0}% of bw:oracle's gain (runs 10-{})",
            100.0 * r,
            l.runs
        );
    }
    let notes: Vec<String> = l
        .points
        .iter()
        .filter(|p| p.run == 1 || p.run == l.runs)
        .filter_map(|p| {
            p.note
                .as_ref()
                .map(|n| format!("run {} {}: {n}", p.run, p.policy))
        })
        .collect();
    for n in notes {
        let _ = writeln!(s, "  {n}");
    }
    // The guard across runs: which policies' runs went to the kernel.
    for sum in &l.summary {
        let by_kernel = l
            .points
            .iter()
            .filter(|p| p.policy == sum.policy && p.placed_by == herd_engine::InCharge::Kernel)
            .count();
        if by_kernel > 0 {
            let _ = writeln!(
                s,
                "  guard across runs: the kernel placed {by_kernel} of {}'s {} runs",
                sum.policy, l.runs
            );
        }
    }
    s.push('\n');
    s
}

/// bw:iabw's learned-run gain as a share of bw:oracle's.
fn iabw_share(l: &LearningRuns) -> Option<f64> {
    let get = |n: &str| {
        l.summary
            .iter()
            .find(|m| m.policy == n)
            .map(|m| m.learned_mean_pct)
    };
    let (i, o) = (get("bw:iabw")?, get("bw:oracle")?);
    (o > 0.0).then(|| i / o)
}

/// One group in the summary across scenarios.
#[derive(Debug, Clone, Serialize)]
pub struct GroupSummary {
    /// The scenario.
    pub scenario: String,
    /// (policy, mean gain over linux of runs 10 to the last, in percent).
    pub learned_mean_pct: Vec<(String, f64)>,
}

/// The learning scenarios' summaries, one per scenario.
pub fn across(all: &[Comparison]) -> Vec<GroupSummary> {
    all.iter()
        .filter_map(|c| {
            let l = c.learning.as_ref()?;
            Some(GroupSummary {
                scenario: c.scenario.clone(),
                learned_mean_pct: l
                    .summary
                    .iter()
                    .map(|m| (m.policy.clone(), m.learned_mean_pct))
                    .collect(),
            })
        })
        .collect()
}

/// Gains per group and their average, with bw:iabw's share of bw:oracle's.
pub fn across_table(groups: &[GroupSummary]) -> String {
    let mut names: Vec<&str> = Vec::new();
    for g in groups {
        for (n, _) in &g.learned_mean_pct {
            if !names.contains(&n.as_str()) {
                names.push(n);
            }
        }
    }
    let mut s = String::from("across groups: mean gain over linux of runs 10 to the last, in percent\n");
    let w = names.iter().map(|n| n.len() + 2).max().unwrap_or(0).max(14);
    let _ = write!(s, "{:<16}", "group");
    for n in &names {
        let _ = write!(s, "{n:>w$}");
    }
    s.push('\n');
    let mut sums = vec![(0.0, 0usize); names.len()];
    for g in groups {
        let _ = write!(s, "{:<16}", g.scenario);
        for (k, n) in names.iter().enumerate() {
            match g.learned_mean_pct.iter().find(|(p, _)| p == n) {
                Some((_, v)) => {
                    sums[k].0 += v;
                    sums[k].1 += 1;
                    let _ = write!(s, "{v:>+w$.2}");
                }
                None => {
                    let _ = write!(s, "{:>w$}", "-");
                }
            }
        }
        s.push('\n');
    }
    let _ = write!(s, "{:<16}", "average");
    let avg: Vec<f64> = sums.iter().map(|(v, n)| v / (*n).max(1) as f64).collect();
    for a in &avg {
        let _ = write!(s, "{a:>+w$.2}");
    }
    s.push('\n');
    let at = |n: &str| names.iter().position(|x| *x == n).map(|k| avg[k]);
    // Each bw:iabw variant against bw:oracle with the same parameters.
    for n in names.iter().filter(|n| n.starts_with("bw:iabw")) {
        let oracle = n.replacen("bw:iabw", "bw:oracle", 1);
        if let (Some(i), Some(o)) = (at(n), at(&oracle))
            && o > 0.0
        {
            let _ = writeln!(
                s,
                "{n} averages {i:+.2}% (S1: +3.73%), {:.0}% of {oracle}'s {o:+.2}% (S1: +7.42%)",
                100.0 * i / o
            );
        }
    }
    s
}
