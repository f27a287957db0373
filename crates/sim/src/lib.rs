//! herd's simulator: a modelled machine running a modelled workload,
//! driven by the same engine and the same policy objects as a real machine.
//!
//! `Scenario::parse` reads a scenario; [`run_policy`] simulates one policy
//! with one seed; [`compare`] runs several policies and seeds.

pub mod chart;
mod checked;
pub mod cluster;
mod cluster_judge;
pub mod consolidation;
mod kernel;
pub mod learning;
mod queues;
pub mod report;
pub mod scenario;
pub mod static_best;
pub mod sweep;
mod world;

use std::collections::HashMap;

use herd_engine::{Clock, Config, CostMeter, GuardConfig, Learning, NoMeter};
use herd_policy::{Estimates, Plan, PolicyError, View};
use serde::Serialize;

pub use scenario::{Scenario, ScenarioError};
pub use static_best::SimPolicy;

/// Program profiles by program key: the simulator's in-memory profile store.
pub type Profiles = std::collections::BTreeMap<String, herd_profile::ProgramProfile>;
pub use learning::{LearningRuns, LearningSummary, RunPoint, learning_runs};
pub use sweep::{PerCore, Sweep, SweepPoint};
pub use world::{MAX_SEGMENTS, Segment, World};

/// One job's outcome under one policy.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct JobResult {
    /// The job.
    pub name: String,
    /// Arrival to the end of its first run; `None` if it did not finish.
    pub turnaround_s: Option<f64>,
    /// Its first run alone on the machine under `linux`.
    pub solo_s: f64,
    /// Turnaround / solo time.
    pub slowdown: Option<f64>,
}

/// One policy's run.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct PolicyResult {
    /// The policy, as named.
    pub name: String,
    /// The seed.
    pub seed: u64,
    /// When the last non-restarting job finished (the horizon if one did not).
    pub makespan_s: f64,
    /// Weighted speedup: the sum over jobs of solo time / turnaround.
    pub throughput: f64,
    /// Energy over the makespan.
    pub energy_j: f64,
    /// Energy / makespan.
    pub avg_power_w: f64,
    /// Moves between CPUs.
    pub migrations: u64,
    /// Migrations per minute of makespan.
    pub migrations_per_min: f64,
    /// Moves between LLC domains.
    pub migrations_cross_llc: u64,
    /// Moves between NUMA nodes.
    pub migrations_cross_numa: u64,
    /// Moves between core kinds.
    pub migrations_cross_kind: u64,
    /// Moves between core kinds per minute of busy CPU time: S3's measure
    /// of migration overhead (its Figure 7).
    pub cross_kind_per_cpu_min: f64,
    /// Physical cores any thread ran on (S0's C).
    pub physical_cores: usize,
    /// Decisions taken.
    pub decisions: u64,
    /// Time spent deciding / simulated busy CPU time, in percent. Measured
    /// in real time on the machine running the simulation; `None` when
    /// timing is off (for byte-reproducible output).
    pub decision_overhead_pct: Option<f64>,
    /// Mean real time per decision, in microseconds; `None` when timing is off.
    pub decision_wall_us: Option<f64>,
    /// Per-job outcomes.
    pub jobs: Vec<JobResult>,
    /// Anything the reader should know (solver trouble, ignored placements).
    pub notes: Vec<String>,
    /// Events the simulator stepped through.
    pub sim_events: u64,
    /// Times it recomputed every rate.
    pub sim_recomputes: u64,
    /// Memory-contention solves (a recompute that changed no stream skips it).
    pub sim_solves: u64,
    /// Mean Gauss-Seidel sweeps per solve.
    pub sim_sweeps_per_solve: f64,
    /// Observations that reused the previous period's task counters.
    pub sim_reused_observations: u64,
    /// Times herd's memory follower moved a job's memory to where it runs
    /// (`herd_engine::memory_follow`; live: `--memory-follow`).
    #[serde(skip_serializing_if = "is_zero")]
    pub memory_moves: u64,
    /// The consolidation study's result, for a policy that follows the
    /// core budget in a scenario that has one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub consolidation: Option<consolidation::ConsolidationResult>,
    /// What the guard did, when the policy ran under one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub guard: Option<herd_engine::GuardReport>,
    /// The CPU timeline, when recorded.
    #[serde(skip)]
    pub timeline: Option<Vec<Segment>>,
}

/// Every policy and seed of a scenario.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Comparison {
    /// The scenario's name.
    pub scenario: String,
    /// The first seed (each result carries its own).
    pub seed: u64,
    /// Results, `linux` first, grouped by seed.
    pub policies: Vec<PolicyResult>,
    /// The unit sweep, when the scenario asks for one (`[sweep]`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub sweep: Option<Sweep>,
    /// The cross-run learning experiment, when the scenario asks for one
    /// (`runs`); `policies` is then empty.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub learning: Option<LearningRuns>,
    /// The consolidation study's service side (its load, cores, latency per
    /// interval), the same for every policy; each policy's batch side is in
    /// its result.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub service: Option<consolidation::Consolidation>,
}

/// Solo times of each job: its first run alone under `linux`. Jobs with
/// the same shape are simulated once.
pub fn solo_times(s: &Scenario) -> Vec<f64> {
    let mut cache: HashMap<String, f64> = HashMap::new();
    s.jobs
        .iter()
        .map(|job| {
            let key = format!(
                "{:?}",
                (
                    job.threads,
                    job.loops,
                    &job.phases,
                    job.barrier,
                    &job.cpus,
                    job.pin_threads
                )
            );
            *cache.entry(key).or_insert_with(|| {
                let mut alone = job.clone();
                alone.arrival_ns = 0;
                alone.restart = false;
                let jobs = [alone];
                let mut world = World::new(s, &jobs, false);
                let mut linux = herd_policy::Linux;
                let cfg = Config::with_period(s.period_ns, 0);
                herd_engine::run(
                    &mut linux,
                    &s.machine,
                    &Estimates::new(),
                    None,
                    &mut world,
                    &mut NoMeter,
                    &cfg,
                    |_, _| {},
                );
                world.finish_times()[0].map_or(f64::NAN, |ns| ns as f64 * 1e-9)
            })
        })
        .collect()
}

/// What the profile store knows before the run: with `history`, each
/// program's whole-run LLC miss rate and solo time, as earlier runs would
/// have recorded them; else nothing.
fn history(s: &Scenario, solo: &[f64]) -> Estimates {
    let mut e = Estimates::new();
    if !s.history {
        return e;
    }
    for (j, job) in s.jobs.iter().enumerate() {
        e.entry(job.program.clone())
            .or_insert_with(|| herd_policy::Estimate {
                solo_time_s: solo.get(j).copied().filter(|t| t.is_finite()),
                llc_miss_rate: job.whole_run_llc_miss_rate(),
                ..Default::default()
            });
    }
    e
}

/// [`run_policy`] with the scenario's solo times, no timing, no trace and
/// no callback: one run's results, as tests and experiments want them.
pub fn run_one(s: &Scenario, policy: &SimPolicy, seed: u64) -> Result<PolicyResult, PolicyError> {
    let solo = solo_times(s);
    run_policy_unread::<NoMeter>(s, policy, seed, &solo, None, |_, _| {})
}

/// [`run_policy`] for a caller whose `on_decision` reads only each view's
/// time and the plan (`herd sim`, the scale bench), with no world trace:
/// for a policy that reads no snapshot (`linux`), the simulator then skips
/// making the observations nothing reads. The results are the same.
pub fn run_policy_unread<M: CostMeter>(
    s: &Scenario,
    policy: &SimPolicy,
    seed: u64,
    solo: &[f64],
    meter: Option<&mut M>,
    on_decision: impl FnMut(&View<'_>, &Plan),
) -> Result<PolicyResult, PolicyError> {
    run_policy_with(s, policy, seed, solo, meter, false, false, on_decision)
}

/// Simulates `policy` on `s` with `seed`. `on_decision` sees every view and
/// plan (progress bars, traces, `--explain`).
pub fn run_policy<M: CostMeter>(
    s: &Scenario,
    policy: &SimPolicy,
    seed: u64,
    solo: &[f64],
    meter: Option<&mut M>,
    trace: bool,
    on_decision: impl FnMut(&View<'_>, &Plan),
) -> Result<PolicyResult, PolicyError> {
    run_policy_with(s, policy, seed, solo, meter, trace, true, on_decision)
}

/// [`run_policy`], saying whether `on_decision` reads the views' tasks and
/// jobs (`views_read`).
#[allow(clippy::too_many_arguments)] // run_policy's arguments and one flag.
fn run_policy_with<M: CostMeter>(
    s: &Scenario,
    policy: &SimPolicy,
    seed: u64,
    solo: &[f64],
    meter: Option<&mut M>,
    trace: bool,
    views_read: bool,
    on_decision: impl FnMut(&View<'_>, &Plan),
) -> Result<PolicyResult, PolicyError> {
    // S4's static best: every fixed period first, then the best again with
    // the meter, trace and callback the caller asked for.
    let (spec, chosen) = match policy {
        SimPolicy::Spec(spec) => (spec.clone(), None),
        SimPolicy::Linux26 => {
            let mut old = s.clone();
            old.model.kernel = herd_model::KernelModel::Linux26;
            let linux = herd_policy::PolicySpec::linux().build();
            let mut r = run_learning_with(
                &old,
                linux,
                seed,
                solo,
                None,
                meter,
                trace,
                views_read,
                on_decision,
            );
            r.name = policy.to_string();
            return Ok(r);
        }
        SimPolicy::StaticBest(inner) => {
            let periods = herd_policy::static_best_periods_us(inner)?;
            let mut best: Option<(f64, f64)> = None;
            for &p in &periods {
                let spec = static_best::with_period(inner, p)?;
                let r = run_learning::<NoMeter>(s, spec.build(), seed, solo, None, None, false, |_, _| {});
                let cost = r
                    .consolidation
                    .as_ref()
                    .map_or(r.makespan_s, |c| -c.batch_ginstr_per_s);
                if best.is_none_or(|(b, _)| cost < b) {
                    best = Some((cost, p));
                }
            }
            let (_, p) = best.expect("a PALM spec has at least one period");
            (static_best::with_period(inner, p)?, Some((p, periods.len())))
        }
    };
    let mut r = run_learning_with(
        s,
        spec.build(),
        seed,
        solo,
        None,
        meter,
        trace,
        views_read,
        on_decision,
    );
    if let Some((p, tried)) = chosen {
        r.name = policy.to_string();
        r.notes.push(format!(
            "static best: period_us={p}, the best of {tried} fixed periods tried"
        ));
    }
    Ok(r)
}

/// [`run_policy`] with learning and a policy built already (by
/// [`herd_policy::PolicySpec::build`], or one no spec names, such as a fixed assignment
/// an experiment enumerates: `examples/s3_bound.rs`): the run starts from
/// `profiles` (the profile store, by program key), the policy sees what is
/// learned, and `profiles` holds the updated profiles afterwards. `None`:
/// no learning.
#[allow(clippy::too_many_arguments)] // run_policy's arguments and the store.
pub fn run_learning<M: CostMeter>(
    s: &Scenario,
    p: Box<dyn herd_policy::Policy>,
    seed: u64,
    solo: &[f64],
    profiles: Option<&mut Profiles>,
    meter: Option<&mut M>,
    trace: bool,
    on_decision: impl FnMut(&View<'_>, &Plan),
) -> PolicyResult {
    run_learning_with(s, p, seed, solo, profiles, meter, trace, true, on_decision)
}

/// [`run_learning`], saying whether `on_decision` reads the views' tasks
/// and jobs.
#[allow(clippy::too_many_arguments)] // run_learning's arguments and one flag.
fn run_learning_with<M: CostMeter>(
    s: &Scenario,
    mut p: Box<dyn herd_policy::Policy>,
    seed: u64,
    solo: &[f64],
    profiles: Option<&mut Profiles>,
    meter: Option<&mut M>,
    trace: bool,
    views_read: bool,
    on_decision: impl FnMut(&View<'_>, &Plan),
) -> PolicyResult {
    // A policy that sets the thread count at launch (thread reduction):
    // the same total work over that many threads.
    let jobs = match p.launch_threads(&s.machine) {
        Some(k) => s.jobs.iter().map(|j| j.with_threads(k)).collect(),
        None => s.jobs.clone(),
    };
    let mut world = World::new(s, &jobs, trace);
    world.set_solo_times(solo);
    world.set_seed(seed);
    let study = s.consolidation.as_ref().filter(|_| p.follows_budget());
    if let Some(c) = study {
        world.follow_consolidation(c);
    }
    let mut cfg = Config::with_period(s.period_ns, seed);
    cfg.horizon_ns = s.horizon_ns;
    cfg.guard = s.guard.then(|| {
        let g = GuardConfig::default();
        if s.guard_trusting { g.trusting() } else { g }
    });
    cfg.views_read = views_read;
    let estimates = history(s, solo);
    let timed = meter.is_some();
    // A policy that decides from learning learns even without a store,
    // from nothing, as on a machine's first run.
    // The store moves into the learner and back when the run ends.
    let mut profiles = profiles;
    let mut learning = match profiles.as_deref_mut() {
        Some(store) => Some(Learning::new(std::mem::take(store), Some(world.peak_btr()))),
        None => p
            .wants_learning()
            .then(|| Learning::new(Profiles::new(), Some(world.peak_btr()))),
    };
    let ran = match meter {
        Some(m) => herd_engine::run(
            p.as_mut(),
            &s.machine,
            &estimates,
            learning.as_mut(),
            &mut world,
            m,
            &cfg,
            on_decision,
        ),
        None => herd_engine::run(
            p.as_mut(),
            &s.machine,
            &estimates,
            learning.as_mut(),
            &mut world,
            &mut NoMeter,
            &cfg,
            on_decision,
        ),
    };
    if let (Some(store), Some(l)) = (profiles, learning) {
        *store = l.into_profiles();
    }
    let consolidation = study.map(|c| c.result(&world.consolidation_marks()));
    let finish = world.finish_times();
    // A consolidation study's batch job runs until the trace ends.
    let end_ns = if study.is_some() {
        world.now_ns()
    } else {
        finish
            .iter()
            .zip(&s.jobs)
            .filter(|(_, j)| !j.restart || s.jobs.iter().all(|j| j.restart))
            .map(|(f, _)| f.unwrap_or(world.now_ns()))
            .max()
            .unwrap_or(world.now_ns())
    };
    let makespan_s = end_ns as f64 * 1e-9;
    let jobs: Vec<JobResult> = s
        .jobs
        .iter()
        .zip(finish)
        .zip(solo)
        .map(|((job, f), &solo_s)| {
            let turnaround_s = f.map(|ns| (ns - job.arrival_ns) as f64 * 1e-9);
            JobResult {
                name: job.name.clone(),
                turnaround_s,
                solo_s,
                slowdown: turnaround_s.map(|t| t / solo_s),
            }
        })
        .collect();
    let throughput = jobs
        .iter()
        .filter_map(|j| j.turnaround_s.map(|t| j.solo_s / t))
        .sum();
    let t = &world.totals;
    let overhead = ran.overhead;
    let mut notes = Vec::new();
    if let Some(g) = ran.guard.as_ref().filter(|g| g.backoffs > 0) {
        notes.push(g.summary());
    }
    if t.unconverged_solves > 0 {
        notes.push(format!(
            "{} memory-contention solves did not converge",
            t.unconverged_solves
        ));
    }
    if t.ignored_placements > 0 {
        notes.push(format!(
            "{} placements named no CPU of the machine and were ignored",
            t.ignored_placements
        ));
    }
    if jobs.iter().any(|j| j.turnaround_s.is_none()) {
        notes.push("some jobs did not finish within the horizon".into());
    }
    if s.consolidation.is_some() && study.is_none() {
        notes.push(format!(
            "{} does not follow a core budget: it uses every core, the service's too, \
             so the consolidation study does not judge it",
            p.name()
        ));
    }
    let energy_j = t.energy_j;
    PolicyResult {
        name: p.name(),
        seed,
        makespan_s,
        throughput,
        energy_j,
        avg_power_w: if makespan_s > 0.0 {
            energy_j / makespan_s
        } else {
            0.0
        },
        migrations: t.migrations,
        migrations_per_min: if makespan_s > 0.0 {
            t.migrations as f64 / (makespan_s / 60.0)
        } else {
            0.0
        },
        migrations_cross_llc: t.migrations_cross_llc,
        migrations_cross_numa: t.migrations_cross_numa,
        migrations_cross_kind: t.migrations_cross_kind,
        cross_kind_per_cpu_min: if t.busy_cpu_ns > 0.0 {
            t.migrations_cross_kind as f64 / (t.busy_cpu_ns * 1e-9 / 60.0)
        } else {
            0.0
        },
        physical_cores: t.cores_used,
        decisions: overhead.decisions,
        decision_overhead_pct: timed.then(|| {
            if t.busy_cpu_ns > 0.0 {
                100.0 * overhead.decide_ns_total as f64 / t.busy_cpu_ns
            } else {
                0.0
            }
        }),
        decision_wall_us: timed.then(|| overhead.decide_ns_mean() / 1000.0),
        jobs,
        notes,
        sim_events: t.events,
        sim_recomputes: t.recomputes,
        sim_solves: t.solves,
        sim_sweeps_per_solve: if t.solves > 0 {
            t.solve_sweeps as f64 / t.solves as f64
        } else {
            0.0
        },
        sim_reused_observations: t.reused_observations,
        memory_moves: t.memory_moves,
        consolidation,
        guard: ran.guard,
        timeline: world.take_trace(),
    }
}

/// Runs every policy under every seed, `linux` first, `jobs` runs at once
/// (at least one). `meter` makes a cost meter per run (`None`: no timing,
/// byte-reproducible results); `on_decision(policy, seed, view, plan)` sees
/// every decision: its time and plan (a policy that reads no snapshot is
/// shown none: see [`run_policy_unread`]). Each run is whole in itself (its
/// own world, policy and seeded draws), so the results, kept in the order
/// above, are the same bits at any `jobs`; only the calls to `on_decision`
/// of different runs interleave, from the threads that make them (it is
/// called every decision: a lock around it made the runs take turns). A
/// sweep of many runs, seeds or pairings, then takes the time of its runs
/// over the CPUs, not their sum; a run's own hour is one thread's work, and
/// no faster for more.
pub fn compare<M: CostMeter + Send>(
    s: &Scenario,
    policies: &[SimPolicy],
    seeds: &[u64],
    jobs: usize,
    mut meter: impl FnMut() -> Option<M>,
    trace: bool,
    on_decision: impl Fn(&str, u64, &View<'_>, &Plan) + Sync,
) -> Result<Comparison, PolicyError> {
    let solo = solo_times(s);
    let names = with_baseline_first(SimPolicy::linux(), policies);
    let runs: Vec<(u64, &SimPolicy, Option<M>)> = seeds
        .iter()
        .flat_map(|&seed| names.iter().map(move |policy| (seed, policy)))
        .map(|(seed, policy)| (seed, policy, meter()))
        .collect();
    let one = |(seed, policy, mut m): (u64, &SimPolicy, Option<M>)| {
        let name = policy.to_string();
        run_policy_with(s, policy, seed, &solo, m.as_mut(), trace, false, |view, plan| {
            on_decision(&name, seed, view, plan)
        })
    };
    let results = each_at_once(jobs, runs, one)
        .into_iter()
        .collect::<Result<Vec<_>, _>>()?;
    Ok(Comparison {
        scenario: s.name.clone(),
        seed: seeds.first().copied().unwrap_or(0),
        policies: results,
        sweep: None,
        learning: None,
        service: s.consolidation.clone(),
    })
}

/// `f` of every item, in the items' order, on up to `jobs` threads at once
/// (the calling thread alone for one job or one item). Each thread takes
/// the next item not yet taken, so long runs and short ones share the
/// threads evenly. A panic in `f` is raised again here, as if `f` had run
/// on this thread.
pub(crate) fn each_at_once<T: Send, R: Send>(
    jobs: usize,
    items: Vec<T>,
    f: impl Fn(T) -> R + Sync,
) -> Vec<R> {
    let threads = jobs.min(items.len());
    if threads <= 1 {
        return items.into_iter().map(f).collect();
    }
    let n = items.len();
    let queue = std::sync::Mutex::new(items.into_iter().enumerate());
    let done = std::sync::Mutex::new(Vec::with_capacity(n));
    std::thread::scope(|scope| {
        let workers: Vec<_> = (0..threads)
            .map(|_| {
                std::thread::Builder::new()
                    // The main thread's size: a run needs no more, and no
                    // less than it had when runs were made one by one.
                    .stack_size(RUN_STACK_BYTES)
                    .spawn_scoped(scope, || {
                        loop {
                            let next = queue
                                .lock()
                                .unwrap_or_else(std::sync::PoisonError::into_inner)
                                .next();
                            let Some((i, item)) = next else { break };
                            let r = f(item);
                            done.lock()
                                .unwrap_or_else(std::sync::PoisonError::into_inner)
                                .push((i, r));
                        }
                    })
            })
            .collect();
        // A thread the system would not start leaves its share to the others.
        for handle in workers.into_iter().flatten() {
            if let Err(panic) = handle.join() {
                std::panic::resume_unwind(panic);
            }
        }
    });
    let mut done = done
        .into_inner()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    // Every thread that started took items until none were left; with none
    // started, the items are still queued and made here.
    let rest: Vec<_> = queue
        .into_inner()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
        .collect();
    done.extend(rest.into_iter().map(|(i, item)| (i, f(item))));
    done.sort_by_key(|(i, _)| *i);
    done.into_iter().map(|(_, r)| r).collect()
}

/// The stack each thread of [`each_at_once`] gets: the 8 MiB Linux gives a
/// main thread by default.
const RUN_STACK_BYTES: usize = 8 << 20;

/// `policies` without repeats, after `baseline`: every comparison is
/// against `linux`, run first.
pub fn with_baseline_first<P: Clone + PartialEq>(baseline: P, policies: &[P]) -> Vec<P> {
    let mut names = vec![baseline];
    for p in policies {
        if !names.contains(p) {
            names.push(p.clone());
        }
    }
    names
}

/// Whether a count is zero (a field serialized only when something happened).
fn is_zero(n: &u64) -> bool {
    *n == 0
}

#[cfg(test)]
mod tests {
    use super::each_at_once;

    /// Items come back in their order whatever order they finish in, with
    /// every thread busy, and with fewer items than threads or none.
    #[test]
    fn each_at_once_keeps_the_items_order() {
        let slow_first = |i: u64| {
            // The early items take longest, so later ones finish first.
            std::thread::sleep(std::time::Duration::from_millis(20u64.saturating_sub(i)));
            i * i
        };
        for jobs in [0, 1, 2, 3, 8, 64] {
            let items: Vec<u64> = (0..21).collect();
            let want: Vec<u64> = items.iter().map(|i| i * i).collect();
            assert_eq!(each_at_once(jobs, items, slow_first), want, "{jobs} at once");
            assert!(each_at_once(jobs, Vec::<u64>::new(), slow_first).is_empty());
        }
        // Every item is taken once, by one of the threads.
        let threads = std::sync::Mutex::new(std::collections::HashSet::new());
        let taken = each_at_once(4, (0..40).collect(), |i: u32| {
            std::thread::sleep(std::time::Duration::from_millis(2));
            threads.lock().unwrap().insert(std::thread::current().id());
            i
        });
        assert_eq!(taken, (0..40).collect::<Vec<_>>());
        assert!(
            threads.into_inner().unwrap().len() > 1,
            "the runs were made by one thread"
        );
    }

    /// A run that panics is a panic of the caller's, not a lost result.
    #[test]
    fn a_panic_in_one_run_reaches_the_caller() {
        let caught = std::panic::catch_unwind(|| {
            each_at_once(3, (0..9).collect(), |i: u32| {
                assert!(i != 5, "run 5 failed");
                i
            })
        });
        let message = caught.expect_err("the panic was lost");
        let text = message
            .downcast_ref::<String>()
            .cloned()
            .or_else(|| message.downcast_ref::<&str>().map(|s| s.to_string()));
        assert_eq!(text.as_deref(), Some("run 5 failed"));
    }
}
