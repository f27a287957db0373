//! S0's experiment: the same workload at 1, 2, ... units under each policy,
//! with time, power, energy, physical cores and SPN for each.
//!
//! SPN = 1000 S_N / (P C): speedup over one unit (under the same policy)
//! per watt per physical core used. Policies are then compared at equal
//! physical cores: for each core count, each policy's fastest run that used
//! exactly that many cores.

use herd_engine::NoMeter;
use herd_policy::PolicyError;
use serde::Serialize;

use crate::Scenario;

/// One run of a sweep.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SweepPoint {
    /// The policy.
    pub policy: String,
    /// Threads per job (units handed out).
    pub units: u32,
    /// When the last job finished.
    pub makespan_s: f64,
    /// Mean machine power.
    pub avg_power_w: f64,
    /// Machine energy.
    pub energy_j: f64,
    /// Physical cores any thread ran on.
    pub physical_cores: usize,
    /// Makespan at one unit over this makespan, same policy.
    pub speedup: f64,
    /// 1000 speedup / (power x physical cores).
    pub spn: f64,
}

/// Two policies at equal physical cores.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct PerCore {
    /// Physical cores both used.
    pub physical_cores: usize,
    /// The first policy's fastest run on that many cores.
    pub a_units: u32,
    /// The second policy's fastest run on that many cores.
    pub b_units: u32,
    /// The second's makespan over the first's, minus one: how much faster
    /// the first is per physical core.
    pub a_faster: f64,
    /// Both ran the same number of units on these cores: the same
    /// placement (S0: with every unit in use the policies are equal).
    pub same_units: bool,
}

/// A whole sweep.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Sweep {
    /// Every (policy, units) run, policies in order, units ascending.
    pub points: Vec<SweepPoint>,
    /// `smt:spn` against `smt:speed` at equal physical cores, when both ran.
    pub spn_vs_speed: Vec<PerCore>,
    /// The mean of `a_faster` over core counts where the two differ.
    pub spn_vs_speed_mean: Option<f64>,
}

/// Runs every policy at every thread count of `s.sweep_threads` (and at 1,
/// the reference for speedups), `jobs` runs at once (each is whole in
/// itself, so the points are the same bits at any `jobs`).
/// `progress(done, total)` follows the runs as they finish, from the
/// threads that make them.
pub fn sweep(
    s: &Scenario,
    policies: &[crate::SimPolicy],
    seed: u64,
    jobs: usize,
    progress: impl Fn(usize, usize) + Sync,
) -> Result<Sweep, PolicyError> {
    let mut counts = s.sweep_threads.clone();
    counts.sort_unstable();
    counts.dedup();
    let with_one: Vec<u32> = if counts.first() == Some(&1) {
        counts.clone()
    } else {
        std::iter::once(1).chain(counts.iter().copied()).collect()
    };
    let total = policies.len() * with_one.len();
    let done = std::sync::atomic::AtomicUsize::new(0);
    let runs: Vec<(&crate::SimPolicy, u32)> = (policies.iter())
        .flat_map(|policy| with_one.iter().map(move |&n| (policy, n)))
        .collect();
    let results = crate::each_at_once(jobs, runs, |(policy, n)| {
        let mut at_n = s.clone();
        at_n.sweep_threads.clear();
        at_n.jobs.iter_mut().for_each(|j| j.threads = n);
        // Slowdowns are not part of a sweep: no solo runs needed.
        let solo = vec![f64::NAN; at_n.jobs.len()];
        let r = crate::run_policy::<NoMeter>(&at_n, policy, seed, &solo, None, false, |_, _| {});
        progress(done.fetch_add(1, std::sync::atomic::Ordering::Relaxed) + 1, total);
        r
    });
    let mut points = Vec::new();
    let mut results = results.into_iter();
    for _ in policies {
        let mut one_s = f64::NAN;
        for (&n, r) in with_one.iter().zip(results.by_ref()) {
            let r = r?;
            if n == 1 {
                one_s = r.makespan_s;
            }
            if !counts.contains(&n) {
                continue;
            }
            let speedup = one_s / r.makespan_s;
            points.push(SweepPoint {
                policy: r.name,
                units: n,
                makespan_s: r.makespan_s,
                avg_power_w: r.avg_power_w,
                energy_j: r.energy_j,
                physical_cores: r.physical_cores,
                speedup,
                spn: 1000.0 * speedup / (r.avg_power_w * r.physical_cores.max(1) as f64),
            });
        }
    }
    let spn_vs_speed = per_core(&points, "smt:spn", "smt:speed");
    let differ: Vec<f64> = spn_vs_speed
        .iter()
        .filter(|c| !c.same_units)
        .map(|c| c.a_faster)
        .collect();
    let spn_vs_speed_mean = (!differ.is_empty()).then(|| differ.iter().sum::<f64>() / differ.len() as f64);
    Ok(Sweep {
        points,
        spn_vs_speed,
        spn_vs_speed_mean,
    })
}

/// `a` against `b` at each physical-core count both reached.
pub fn per_core(points: &[SweepPoint], a: &str, b: &str) -> Vec<PerCore> {
    let fastest = |policy: &str, cores: usize| {
        points
            .iter()
            .filter(|p| p.policy == policy && p.physical_cores == cores)
            .min_by(|x, y| x.makespan_s.total_cmp(&y.makespan_s))
    };
    let mut cores: Vec<usize> = points.iter().map(|p| p.physical_cores).collect();
    cores.sort_unstable();
    cores.dedup();
    cores
        .into_iter()
        .filter_map(|c| {
            let (pa, pb) = (fastest(a, c)?, fastest(b, c)?);
            Some(PerCore {
                physical_cores: c,
                a_units: pa.units,
                b_units: pb.units,
                a_faster: pb.makespan_s / pa.makespan_s - 1.0,
                same_units: pa.units == pb.units,
            })
        })
        .collect()
}
