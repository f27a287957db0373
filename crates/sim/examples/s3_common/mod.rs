//! What the S3 examples (`s3_bound`, `s3_oracle`) share: their arguments, loading a
//! scenario, each job's turnaround averaged over runs, and S3's measure.

use herd_sim::scenario::Scenario;

/// The scenario files named on the command line; none is a usage error
/// (exit code 2).
pub fn scenario_paths(example: &str) -> Vec<String> {
    let paths: Vec<String> = std::env::args().skip(1).collect();
    if paths.is_empty() {
        eprintln!("usage: {example} SCENARIO.toml ...");
        std::process::exit(2);
    }
    paths
}

/// The scenario at `path`; a file that cannot be read or parsed ends the
/// example with exit code 2 and the reason.
pub fn load(path: &str) -> Scenario {
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| {
        eprintln!("{path}: {e}");
        std::process::exit(2)
    });
    Scenario::parse(&text, path, &|_| Err("no XML machines here".into())).unwrap_or_else(|e| {
        eprintln!("{e}");
        std::process::exit(2)
    })
}

/// Each job's turnaround, averaged over runs.
pub fn mean_turnarounds(runs: &[herd_sim::PolicyResult]) -> Vec<f64> {
    let n = runs[0].jobs.len();
    (0..n)
        .map(|j| {
            runs.iter()
                .map(|r| r.jobs[j].turnaround_s.unwrap_or(f64::NAN))
                .sum::<f64>()
                / runs.len() as f64
        })
        .collect()
}

/// S3's measure: the geometric mean over jobs of turnaround / the baseline's.
pub fn completion(t: &[f64], base: &[f64]) -> f64 {
    let logs: Vec<f64> = t.iter().zip(base).map(|(a, b)| (a / b).ln()).collect();
    (logs.iter().sum::<f64>() / logs.len().max(1) as f64).exp()
}

/// S3's machines: the CPUs of the fast kind, those of the slow kind, and
/// the slow kind's capacity relative to the fast one's; None unless the
/// machine has exactly two kinds.
pub fn fast_and_slow(machine: &herd_topo::Machine) -> Option<(Vec<u32>, Vec<u32>, f64)> {
    let mut kinds: Vec<usize> = machine.cpus().iter().map(|c| c.kind).collect();
    kinds.sort_unstable();
    kinds.dedup();
    let [a, b] = kinds[..] else {
        return None;
    };
    let cap = |k: usize| machine.kinds()[k].capacity;
    let (fast, slow) = if cap(a) >= cap(b) { (a, b) } else { (b, a) };
    let cpus_of = |k: usize| -> Vec<u32> {
        machine
            .cpus()
            .iter()
            .filter(|c| c.kind == k)
            .map(|c| c.os)
            .collect()
    };
    Some((cpus_of(fast), cpus_of(slow), cap(slow) / cap(fast)))
}
