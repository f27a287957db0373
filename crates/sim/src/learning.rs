//! S1's cross-run experiment: the same group of programs runs `runs` times;
//! every policy learns into its own profile store, carried from run to run,
//! so a learning policy starts where its last run left off. Each run's job
//! arrivals are jittered by up to one period (seeded by the run), as real
//! launches are, so runs differ even under `linux`; every policy sees the
//! same jitter in the same run, and its speedup is over `linux` in that run.

use herd_engine::guard_runs::{BatchRun, RunsConfig, next_run};
use herd_engine::{GuardReport, InCharge, NoMeter};
use herd_policy::{COVERAGE_GATE, PolicyError, Rng};
use serde::Serialize;

use crate::{Profiles, Scenario, run_learning, solo_times};

/// One policy in one run.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RunPoint {
    /// The run, from 1.
    pub run: u32,
    /// The policy.
    pub policy: String,
    /// When the last job finished.
    pub makespan_s: f64,
    /// Throughput gain over `linux` in the same run: linux makespan /
    /// this makespan - 1, in percent.
    pub speedup_pct: f64,
    /// Mean over the group's jobs of their programs' coverage in the
    /// policy's store at the start of the run.
    pub coverage: f64,
    /// Mean over jobs whose program has a solo-time estimate of
    /// min(estimate, truth) / max(estimate, truth) at the start of the run
    /// (1 = exact); `None` while no program has an estimate.
    pub accuracy: Option<f64>,
    /// The policy's first note this run (e.g. why it fell back), or, for a
    /// run the guard across runs gave the kernel, why.
    pub note: Option<String>,
    /// Who placed this run: the policy (under the in-run guard, when it is
    /// on), or the kernel alone, when the guard across runs
    /// ([`herd_engine::guard_runs`]) gave it the run.
    pub placed_by: InCharge,
    /// Of a run the policy placed under the in-run guard, the share of its
    /// time the guard gave the kernel (probes, back-offs): 0 when the guard
    /// across runs vouched for the policy and nothing was crowded.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub guard_kernel_share: Option<f64>,
}

/// One policy over all runs.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct LearningSummary {
    /// The policy.
    pub policy: String,
    /// Speedup over linux in run 1.
    pub first_pct: f64,
    /// In run 10 (or the last, if fewer).
    pub run10_pct: f64,
    /// Mean over runs 10 to the last (the database filled).
    pub learned_mean_pct: f64,
    /// Mean over all runs.
    pub mean_pct: f64,
}

/// The whole experiment.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct LearningRuns {
    /// Training runs that filled the store before the group's runs (S1's
    /// database initialisation): random subsets of the group at low,
    /// medium and high load under `linux`, until every program's coverage
    /// reached 80% or `train_runs` ran out.
    pub training_runs: u32,
    /// Mean coverage and solo-time accuracy over the group's jobs after training.
    pub trained_coverage: f64,
    /// See `trained_coverage`.
    pub trained_accuracy: Option<f64>,
    /// Runs per policy.
    pub runs: u32,
    /// Every policy in every run, run by run, `linux` first.
    pub points: Vec<RunPoint>,
    /// Per policy other than `linux`.
    pub summary: Vec<LearningSummary>,
    /// Per program after training: its learned solo bandwidth against the
    /// exact one (how far contention leaked into the estimates).
    pub trained_btr: Vec<TrainedBtr>,
}

/// One program's solo bandwidth, learned against exact, after training.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct TrainedBtr {
    /// The program key.
    pub program: String,
    /// Learned per-phase solo BTR, weighted by the slices each phase had.
    pub learned_mean: Option<f64>,
    /// The scenario's per-phase solo BTR, weighted by solo time.
    pub exact_mean: f64,
    /// Share of the learned samples that were valid (S1's low-contention states).
    pub valid_share: f64,
}

/// [`TrainedBtr`] for each of `s`'s programs in `store`.
fn trained_btr(s: &Scenario, store: &Profiles) -> Vec<TrainedBtr> {
    let request_ns = s.model.request_ns;
    let mut out: Vec<TrainedBtr> = Vec::new();
    for job in &s.jobs {
        if out.iter().any(|t| t.program == job.program) {
            continue;
        }
        let Some(p) = store.get(&job.program) else {
            continue;
        };
        let time = |ph: &crate::scenario::Phase| ph.instructions * ph.solo_ns_per_instr(request_ns);
        let total: f64 = job.phases.iter().map(time).sum();
        let exact_mean = job
            .phases
            .iter()
            .map(|ph| ph.solo_btr(request_ns) * time(ph))
            .sum::<f64>()
            / total.max(f64::MIN_POSITIVE);
        let (mut sum, mut slices, mut valid, mut all) = (0.0, 0u64, 0u64, 0u64);
        for ph in p.phases.phases() {
            valid += u64::from(ph.estimate.valid.n);
            all += u64::from(ph.estimate.valid.n + ph.estimate.invalid.n);
            if let Some((_, b)) = ph.estimate.solo() {
                sum += b * ph.slices as f64;
                slices += ph.slices;
            }
        }
        out.push(TrainedBtr {
            program: job.program.clone(),
            learned_mean: (slices > 0).then(|| sum / slices as f64),
            exact_mean,
            valid_share: valid as f64 / all.max(1) as f64,
        });
    }
    out
}

/// Runs S1's experiment for `policies` (plus `linux`), `runs` times from
/// `seed`, `jobs` runs at once. Each policy's runs are a chain (its store
/// and its guard's history carry from run to run), independent of the
/// other policies' but for `linux`'s makespan in the same run: speedups
/// take it once every chain is made, and a run the guard gives the kernel
/// takes it as its own, waiting for it if `linux`'s chain is behind. So
/// the chains are made at once (`linux`'s first in the queue: in one
/// thread it is made before the others), and the points are the same bits
/// at any `jobs`. `progress(done, total)` follows the runs as they finish,
/// from the threads that make them.
pub fn learning_runs(
    s: &Scenario,
    policies: &[herd_policy::PolicySpec],
    seed: u64,
    runs: u32,
    jobs: usize,
    progress: impl Fn(u32, u32) + Sync,
) -> Result<LearningRuns, PolicyError> {
    let solo = solo_times(s);
    let names = crate::with_baseline_first(herd_policy::PolicySpec::linux(), policies);
    let (trained, training_runs) = train(s, seed, &solo)?;
    let (trained_coverage, trained_accuracy) = store_quality(s, &trained, &solo);
    let trained_btr = trained_btr(s, &trained);
    let total = runs * names.len() as u32;
    let done = std::sync::atomic::AtomicU32::new(0);
    let linux = LinuxRuns::default();
    let chains = crate::each_at_once(jobs, names.iter().collect(), |name| {
        policy_chain(s, name, seed, runs, &solo, trained.clone(), &linux, || {
            progress(done.fetch_add(1, std::sync::atomic::Ordering::Relaxed) + 1, total)
        })
    });
    let linux_s = linux
        .made
        .into_inner()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
        .0;
    // Run by run, the policies in order within each, as they were made
    // when the runs went one by one.
    let mut chains: Vec<_> = chains.into_iter().map(Vec::into_iter).collect();
    let mut points = Vec::with_capacity(total as usize);
    for &linux_run_s in &linux_s {
        points.extend(chains.iter_mut().filter_map(Iterator::next).map(|mut p| {
            p.speedup_pct = (linux_run_s / p.makespan_s - 1.0) * 100.0;
            p
        }));
    }
    let summary = points
        .iter()
        .filter(|p| p.run == 1 && p.policy != herd_policy::BASELINE)
        .map(|first| {
            let of = |lo: u32| -> Vec<f64> {
                points
                    .iter()
                    .filter(|p| p.policy == first.policy && p.run >= lo)
                    .map(|p| p.speedup_pct)
                    .collect()
            };
            let mean = |v: Vec<f64>| v.iter().sum::<f64>() / v.len().max(1) as f64;
            let at10 = 10.min(runs);
            LearningSummary {
                policy: first.policy.clone(),
                first_pct: first.speedup_pct,
                run10_pct: of(at10).first().copied().unwrap_or(f64::NAN),
                learned_mean_pct: mean(of(at10)),
                mean_pct: mean(of(1)),
            }
        })
        .collect();
    Ok(LearningRuns {
        training_runs,
        trained_coverage,
        trained_accuracy,
        runs,
        points,
        summary,
        trained_btr,
    })
}

/// `linux`'s makespans, run by run, as its chain makes them, for the
/// chains made at once with it.
#[derive(Default)]
struct LinuxRuns {
    /// The makespans so far, and whether the chain has ended (a chain
    /// that panicked ends too: nobody waits for it for ever).
    made: std::sync::Mutex<(Vec<f64>, bool)>,
    grew: std::sync::Condvar,
}

impl LinuxRuns {
    fn lock(&self) -> std::sync::MutexGuard<'_, (Vec<f64>, bool)> {
        self.made
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    fn add(&self, makespan_s: f64) {
        self.lock().0.push(makespan_s);
        self.grew.notify_all();
    }

    /// `linux`'s makespan in `run` (from 1), once made.
    fn wait(&self, run: u32) -> f64 {
        let made = self.lock();
        let made = (self.grew)
            .wait_while(made, |(m, ended)| m.len() < run as usize && !*ended)
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        *made
            .0
            .get(run as usize - 1)
            .expect("linux's chain ended before this run: it panicked")
    }
}

/// Marks `linux`'s chain ended when dropped, panicking or not.
struct Ends<'a>(&'a LinuxRuns);

impl Drop for Ends<'_> {
    fn drop(&mut self) {
        self.0.lock().1 = true;
        self.0.grew.notify_all();
    }
}

/// One policy's `runs` runs from `store` (trained), in turn: each starts
/// from the store its last run left and, under the guard across runs,
/// from what the runs before it made. `linux`'s own chain adds its
/// makespans to `linux`; a run the guard gives the kernel takes its run's
/// from there. Speedups are left at 0 for the caller. `ran()` after each
/// run.
#[allow(clippy::too_many_arguments)]
fn policy_chain(
    s: &Scenario,
    name: &herd_policy::PolicySpec,
    seed: u64,
    runs: u32,
    solo: &[f64],
    mut store: Profiles,
    linux: &LinuxRuns,
    ran: impl Fn(),
) -> Vec<RunPoint> {
    let _ends = name.is_baseline().then(|| Ends(linux));
    // The policy's runs so far, for the guard across runs: the same group
    // of programs run again and again is the batch it compares.
    let mut history: Vec<BatchRun> = Vec::new();
    let mut points = Vec::with_capacity(runs as usize);
    for run in 1..=runs {
        let (coverage, accuracy) = store_quality(s, &store, solo);
        let verdict = (s.guard && !name.is_baseline()).then(|| next_run(&history, &RunsConfig::default()));
        let placed_by = verdict.map_or(InCharge::Policy, |v| v.by);
        // A kernel run is plain `linux`, as `herd batch` runs it, and it
        // learns nothing: it measures the kernel, and the store stays the
        // policy's own. (Learning from one whole-group `linux` run cost
        // bw:iabw most of its gain on s1-wl07: of its 2.4%, 1.1% was left
        // over the 40 runs.) That is this run's `linux`, made by `linux`'s
        // chain with the same arrivals and seed, so its makespan is taken,
        // not simulated again (the same bits: checked on three groups
        // before it was taken).
        let (policy, makespan_s, note, guard_kernel_share) = match verdict {
            Some(v) if v.by == InCharge::Kernel => (
                name.build().name(),
                linux.wait(run),
                Some(format!("guard across runs: {v}")),
                None,
            ),
            _ => {
                let mut jittered = jitter(s, seed, run);
                jittered.guard_trusting = verdict.is_some_and(|v| v.vouches());
                let mut note = None;
                let r = run_learning::<NoMeter>(
                    &jittered,
                    name.build(),
                    seed,
                    solo,
                    Some(&mut store),
                    None,
                    false,
                    |view, plan| {
                        if note.is_none() && !view.snapshot.tasks.is_empty() {
                            note = plan.note.as_ref().map(|n| n.to_string());
                        }
                    },
                );
                let share = r.guard.as_ref().map(GuardReport::kernel_share);
                (r.name, r.makespan_s, note, share)
            }
        };
        if name.is_baseline() {
            linux.add(makespan_s);
        }
        if verdict.is_some() {
            history.push(BatchRun {
                by: placed_by,
                makespan_s,
            });
        }
        points.push(RunPoint {
            run,
            // A kernel run counts as the policy's: it is what the policy's
            // user got.
            policy,
            makespan_s,
            speedup_pct: 0.0,
            coverage,
            accuracy,
            note,
            placed_by,
            guard_kernel_share,
        });
        ran();
    }
    points
}

/// S1's database initialisation: the group's programs submitted at random
/// at low, medium and high load (a half, one and two programs per CPU),
/// under `linux`, learning into one store until every program's coverage
/// reaches S1's 80% or `s.train_runs` runs have been made.
fn train(s: &Scenario, seed: u64, solo: &[f64]) -> Result<(Profiles, u32), PolicyError> {
    let mut store = Profiles::new();
    let cpus = s.machine.cpus().len();
    let covered = |store: &Profiles| {
        s.jobs
            .iter()
            .all(|j| store.get(&j.program).is_some_and(|p| p.coverage >= COVERAGE_GATE))
    };
    for k in 1..=s.train_runs {
        if covered(&store) {
            return Ok((store, k - 1));
        }
        let mut rng = Rng::new(seed ^ u64::from(k).wrapping_mul(0x9FB2_1C65_1E98_DF25));
        let load = [0.5, 1.0, 2.0][(k as usize - 1) % 3];
        let n = ((load * cpus as f64).ceil() as usize).clamp(1, s.jobs.len());
        // A random subset of n jobs (partial Fisher-Yates).
        let mut idx: Vec<usize> = (0..s.jobs.len()).collect();
        for i in 0..n {
            let r = i + rng.below((idx.len() - i) as u64) as usize;
            idx.swap(i, r);
        }
        idx.truncate(n);
        idx.sort_unstable();
        let mut sub = s.clone();
        sub.jobs = idx.iter().map(|&i| s.jobs[i].clone()).collect();
        let sub_solo: Vec<f64> = idx.iter().map(|&i| solo[i]).collect();
        let sub = jitter(&sub, seed, 10_000 + k);
        run_learning::<NoMeter>(
            &sub,
            Box::new(herd_policy::Linux),
            seed,
            &sub_solo,
            Some(&mut store),
            None,
            false,
            |_, _| {},
        );
    }
    let runs = s.train_runs;
    Ok((store, runs))
}

/// The scenario with every job's arrival moved by up to one period.
fn jitter(s: &Scenario, seed: u64, run: u32) -> Scenario {
    let mut rng = Rng::new(seed ^ u64::from(run).wrapping_mul(0xA24B_AED4_963E_E407));
    let mut out = s.clone();
    for j in &mut out.jobs {
        j.arrival_ns += rng.below(s.period_ns.max(1));
    }
    out
}

/// (mean coverage, mean solo-time accuracy) of the store over `s`'s jobs.
fn store_quality(s: &Scenario, store: &Profiles, solo: &[f64]) -> (f64, Option<f64>) {
    let mut coverage = 0.0;
    let mut acc = Vec::new();
    for (job, &truth) in s.jobs.iter().zip(solo) {
        let Some(p) = store.get(&job.program) else {
            continue;
        };
        coverage += p.coverage;
        if let Some(est) = p.solo_time_s.filter(|e| *e > 0.0)
            && truth > 0.0
        {
            acc.push(est.min(truth) / est.max(truth));
        }
    }
    let n = s.jobs.len().max(1) as f64;
    let accuracy = (!acc.is_empty()).then(|| acc.iter().sum::<f64>() / acc.len() as f64);
    (coverage / n, accuracy)
}
