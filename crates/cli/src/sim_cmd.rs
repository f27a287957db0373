//! `herd sim`: run policies on a simulated machine and workload, compare them.

use std::fmt::Write;
use std::path::{Path, PathBuf};

use clap::Args;
use herd_policy::{BASELINE, Placement, Plan};
use herd_sim::{Comparison, PolicyResult, Scenario, SimPolicy};
use indicatif::{ProgressBar, ProgressStyle};

use crate::common::Failure;
use crate::output;
use crate::sim_learning as learning;
use herd_runtime::meter::WallMeter;

/// Arguments of `herd sim`.
#[derive(Args, Debug)]
pub struct SimArgs {
    /// Scenario files (TOML; see docs/scenarios.md). With several, each runs
    /// in turn, and S1 learning scenarios (`runs`) get a summary across them.
    #[arg(required_unless_present = "from_trace", value_name = "SCENARIO")]
    pub(crate) scenarios: Vec<PathBuf>,
    /// Build a scenario from a live run's trace (`herd run --trace`, `herd
    /// batch --trace`; one per run it holds) and simulate it: what it
    /// keeps and what a trace cannot know are in docs/scenarios.md.
    #[arg(long, value_name = "TRACE.jsonl")]
    pub(crate) from_trace: Option<PathBuf>,
    /// Where to write the scenario --from-trace builds (a run's number is
    /// added when the trace holds several); a temporary file by default.
    #[arg(long, value_name = "FILE.toml", requires = "from_trace")]
    pub(crate) scenario_out: Option<PathBuf>,
    /// With --from-trace: the machine the run placed on (an hwloc XML
    /// export, or a synthetic spec); this machine by default.
    #[command(flatten)]
    pub(crate) machine: crate::common::MachineArgs,
    /// Runs of a learning scenario; replaces the scenario's `runs`.
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..))]
    pub(crate) runs: Option<u32>,
    /// Most training runs before a learning scenario's runs; replaces the
    /// scenario's `train_runs` (0: start from an empty profile store).
    #[arg(long, value_name = "N")]
    pub(crate) train_runs: Option<u32>,
    /// A policy to compare (repeatable); replaces the scenario's list. `linux` always runs.
    #[arg(long = "policy", value_name = "NAME[:key=value,...]")]
    pub(crate) policies: Vec<String>,
    /// A seed (repeatable); replaces the scenario's seeds.
    #[arg(long = "seed", value_name = "N")]
    pub(crate) seeds: Vec<u64>,
    /// Print JSON instead of a table (schema: docs/json.md).
    #[arg(long)]
    pub(crate) json: bool,
    /// Write an HTML report with SVG plots to this file.
    #[arg(long, value_name = "FILE.html")]
    pub(crate) report: Option<PathBuf>,
    /// Do not measure herd's own decision time: timing fields become null
    /// and the output is byte-for-byte reproducible.
    #[arg(long)]
    pub(crate) no_timing: bool,
    /// Print why each policy placed tasks where it did (its first plan).
    #[arg(long)]
    pub(crate) explain: bool,
    /// Run policies under herd's guard (on: as users get them) or without
    /// (off: each algorithm as published); replaces the scenario's `guard`
    /// (default on).
    #[arg(long, value_enum)]
    pub(crate) guard: Option<crate::common::OnOff>,
    /// How many runs (a policy under a seed) to simulate at once. By
    /// default, with --no-timing one per CPU herd may use, else one: a
    /// decision's measured time is then not shared with another run's.
    /// Learning runs and a unit sweep measure no decision's time, and take
    /// one per CPU by default. The results are the same at any number.
    #[arg(long, short = 'j', value_name = "N", value_parser = clap::value_parser!(u32).range(1..))]
    pub(crate) jobs: Option<u32>,
}

/// Loads a scenario file; XML machines resolve relative to the file.
pub fn load_scenario(path: &Path) -> Result<Scenario, Failure> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| Failure::Input(anyhow::anyhow!("{}: {e}", path.display())))?;
    let dir = path.parent().map(Path::to_path_buf).unwrap_or_default();
    let load_xml = |rel: &str| herd_topo::Machine::from_path(&dir.join(rel)).map_err(|e| e.to_string());
    Scenario::parse(&text, &path.display().to_string(), &load_xml).map_err(|e| Failure::Input(e.into()))
}

/// Writes the scenarios `--from-trace` builds; returns their paths (and
/// the temporary directory holding them, kept until the run ends).
fn from_trace(args: &SimArgs, trace: &Path) -> Result<(Vec<PathBuf>, Option<tempfile::TempDir>), Failure> {
    let name = trace.display().to_string();
    let input = |e: String| Failure::Input(anyhow::anyhow!("{name}: {e}"));
    let text = herd_cli::trace::read(trace).map_err(|e| input(e.to_string()))?;
    let runs = herd_cli::trace::parse(&text).map_err(|e| input(e.to_string()))?;
    let machine_toml = match (&args.machine.input, &args.machine.synthetic) {
        (Some(path), _) => {
            let abs = std::path::absolute(path).map_err(|e| input(e.to_string()))?;
            args.machine.load()?; // refused here if it is no machine
            format!(
                "xml = \"{}\"",
                abs.display()
                    .to_string()
                    .replace('\\', "\\\\")
                    .replace('"', "\\\"")
            )
        }
        (None, Some(spec)) => {
            args.machine.load()?;
            format!("synthetic = \"{}\"", spec.replace('"', ""))
        }
        (None, None) => {
            herd_cli::from_trace::synthetic_machine(&crate::common::this_machine()?).ok_or_else(|| {
                Failure::Input(anyhow::anyhow!(
                    "this machine's shape has no synthetic spec: give it with --input FILE.xml \
                 (lstopo-no-graphics --of xml)"
                ))
            })?
        }
    };
    let (dir, temp) = match &args.scenario_out {
        Some(_) => (PathBuf::new(), None),
        None => {
            let t = tempfile::tempdir().map_err(|e| Failure::Internal(e.into()))?;
            (t.path().to_path_buf(), Some(t))
        }
    };
    let mut paths = Vec::new();
    for (k, run) in runs.iter().enumerate() {
        let toml = herd_cli::from_trace::scenario(run, &machine_toml, &name)
            .map_err(|e| input(format!("run {}: {e}", k + 1)))?;
        let path = match &args.scenario_out {
            Some(out) if runs.len() == 1 => out.clone(),
            Some(out) => out.with_extension(format!("{}.toml", k + 1)),
            None => dir.join(format!("trace-run{}.toml", k + 1)),
        };
        std::fs::write(&path, toml)
            .map_err(|e| Failure::Input(anyhow::anyhow!("{}: {e}", path.display())))?;
        if args.scenario_out.is_some() {
            eprintln!("herd: wrote {}", path.display());
        }
        paths.push(path);
    }
    Ok((paths, temp))
}

/// `herd sim`.
pub fn run(args: &SimArgs) -> Result<(), Failure> {
    let mut all = Vec::new();
    let mut json = Vec::new();
    let (built, _temp) = match &args.from_trace {
        Some(t) => from_trace(args, t)?,
        None if args.machine.input.is_some() || args.machine.synthetic.is_some() => {
            return Err(Failure::Input(anyhow::anyhow!(
                "--input and --synthetic name the machine of a --from-trace run; a scenario names its own"
            )));
        }
        None => (Vec::new(), None),
    };
    let scenarios: Vec<PathBuf> = args.scenarios.iter().chain(&built).cloned().collect();
    for path in &scenarios {
        let text = std::fs::read_to_string(path)
            .map_err(|e| Failure::Input(anyhow::anyhow!("{}: {e}", path.display())))?;
        let value = if herd_sim::cluster::ClusterScenario::is_cluster(&text) {
            let flags = crate::sim_cluster::Flags {
                policies: &args.policies,
                json: args.json,
                explain: args.explain,
                machine_flags: args.runs.is_some()
                    || args.train_runs.is_some()
                    || !args.seeds.is_empty()
                    || args.report.is_some(),
            };
            serde_json::to_value(crate::sim_cluster::run(&flags, path, &text)?)
        } else {
            let c = run_one(args, path)?;
            let v = serde_json::to_value(&c);
            all.push(c);
            v
        };
        json.push(value.map_err(|e| Failure::Input(e.into()))?);
    }
    if scenarios.len() == 1 {
        return if args.json {
            Ok(output::print_json(&json[0])?)
        } else {
            Ok(())
        };
    }
    let summary = learning::across(&all);
    if args.json {
        Ok(output::print_json(
            &serde_json::json!({ "scenarios": json, "learning_summary": summary }),
        )?)
    } else {
        if !summary.is_empty() {
            output::print(&learning::across_table(&summary))?;
        }
        Ok(())
    }
}

/// Runs one scenario and prints its tables (unless `--json`).
fn run_one(args: &SimArgs, path: &Path) -> Result<Comparison, Failure> {
    let mut scenario = load_scenario(path)?;
    let runs = args.runs.unwrap_or(scenario.runs);
    scenario.train_runs = args.train_runs.unwrap_or(scenario.train_runs);
    if let Some(g) = args.guard {
        scenario.guard = g == crate::common::OnOff::On;
    }
    let policies: Vec<SimPolicy> = if args.policies.is_empty() {
        scenario.policies.clone()
    } else {
        let parsed: Result<Vec<SimPolicy>, _> = args.policies.iter().map(|p| p.parse()).collect();
        parsed.map_err(|e| Failure::Input(e.into()))?
    };
    let seeds = if args.seeds.is_empty() {
        scenario.seeds.clone()
    } else {
        args.seeds.clone()
    };
    // Runs that measure no decision time (learning runs, the unit sweep)
    // take every CPU unless told otherwise.
    let unmetered_jobs = args.jobs.map_or_else(
        || std::thread::available_parallelism().map_or(1, usize::from),
        |n| n as usize,
    );
    let bar = ProgressBar::new_spinner();
    bar.set_style(ProgressStyle::with_template("{spinner} {msg} [{elapsed}]").expect("static template"));
    if runs > 1 {
        if args.report.is_some() || args.explain {
            return Err(Failure::Input(anyhow::anyhow!(
                "{}: --report and --explain are for single runs; this scenario runs {runs} times (--runs 1 for one)",
                path.display()
            )));
        }
        let specs = policies
            .iter()
            .map(|p| {
                p.spec().cloned().ok_or_else(|| {
                    Failure::Input(anyhow::anyhow!(
                        "{}: {p} is not a catalogue policy (a reference found by trying every period, or another kernel model); learning runs take catalogue policies",
                        path.display()
                    ))
                })
            })
            .collect::<Result<Vec<_>, _>>()?;
        let l = herd_sim::learning_runs(
            &scenario,
            &specs,
            seeds[0],
            runs,
            unmetered_jobs,
            |done, total| {
                bar.set_message(format!("{}: run {done} of {total}", scenario.name));
                bar.tick();
            },
        )
        .map_err(|e| Failure::Input(e.into()))?;
        bar.finish_and_clear();
        if !args.json {
            output::print(&learning::table(&scenario.name, &l))?;
        }
        return Ok(Comparison {
            scenario: scenario.name.clone(),
            seed: seeds[0],
            policies: Vec::new(),
            sweep: None,
            learning: Some(l),
            service: None,
        });
    }
    // Each policy's first plan that places something, and its later notes
    // (distinct, at most NOTES_SHOWN, with the time): first seed only.
    // Runs made at once note theirs as they go, each under the lock.
    type Explained = (Vec<(String, Plan)>, Vec<(String, Vec<String>)>);
    let explaining: std::sync::Mutex<Explained> = std::sync::Mutex::default();
    thread_local! {
        // When this thread's run last redrew the bar (simulated ns).
        static LAST_MSG_NS: std::cell::Cell<u64> = const { std::cell::Cell::new(0) };
    }
    let timing = !args.no_timing;
    let jobs = match args.jobs {
        None if timing => 1,
        _ => unmetered_jobs,
    };
    let comparison = herd_sim::compare(
        &scenario,
        &policies,
        &seeds,
        jobs,
        || timing.then(WallMeter::default),
        args.report.is_some(),
        |policy, seed, view, plan| {
            if args.explain && seed == seeds[0] {
                let mut guard = explaining
                    .lock()
                    .unwrap_or_else(std::sync::PoisonError::into_inner);
                let (explained, later_notes) = &mut *guard;
                match explained.iter_mut().find(|(name, _)| name == policy) {
                    None => explained.push((policy.to_string(), plan.clone())),
                    Some((_, first)) if first.tasks.is_empty() && !plan.tasks.is_empty() => {
                        *first = plan.clone()
                    }
                    Some(_) => {}
                }
                if let Some(note) = &plan.note {
                    let i = match later_notes.iter().position(|(n, _)| n == policy) {
                        Some(i) => i,
                        None => {
                            later_notes.push((policy.to_string(), Vec::new()));
                            later_notes.len() - 1
                        }
                    };
                    let seen = &mut later_notes[i].1;
                    let line = format!("{:.3} s: {note}", view.now_ns() as f64 * 1e-9);
                    if seen.len() < NOTES_SHOWN && !seen.iter().any(|l| l.ends_with(note.as_ref())) {
                        seen.push(line);
                    }
                }
            }
            // Redraw at most every simulated second of a run: the hook runs
            // every decision.
            let now_ns = view.now_ns();
            let last_ns = LAST_MSG_NS.get();
            if now_ns < last_ns || now_ns - last_ns >= 1_000_000_000 {
                LAST_MSG_NS.set(now_ns);
                bar.set_message(format!(
                    "{policy} (seed {seed}): simulated {:.0} s",
                    now_ns as f64 * 1e-9
                ));
                bar.tick();
            }
        },
    )
    .map_err(|e| Failure::Input(e.into()))?;
    let mut comparison = comparison;
    // In the order the policies ran in, whichever run noted first.
    let (mut explained, mut later_notes) = explaining
        .into_inner()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    let order = herd_sim::with_baseline_first(SimPolicy::linux(), &policies);
    let rank = |name: &str| order.iter().position(|p| p.to_string() == name);
    explained.sort_by_key(|(name, _)| rank(name));
    later_notes.sort_by_key(|(name, _)| rank(name));
    if !scenario.sweep_threads.is_empty() {
        let names = herd_sim::with_baseline_first(SimPolicy::linux(), &policies);
        let sweep = herd_sim::sweep::sweep(&scenario, &names, seeds[0], unmetered_jobs, |done, total| {
            bar.set_message(format!("unit sweep: run {done} of {total}"));
            bar.tick();
        })
        .map_err(|e| Failure::Input(e.into()))?;
        comparison.sweep = Some(sweep);
    }
    bar.finish_and_clear();
    if let Some(path) = &args.report {
        let names: Vec<String> = scenario.jobs.iter().map(|j| j.name.clone()).collect();
        std::fs::write(path, herd_sim::report::html(&comparison, &names))
            .map_err(|e| Failure::Input(anyhow::anyhow!("{}: {e}", path.display())))?;
        eprintln!("herd: report written to {}", path.display());
    }
    if !args.json {
        output::print(&table(&comparison))?;
        if let Some(sweep) = &comparison.sweep {
            output::print(&sweep_table(sweep))?;
        }
        if !explained.is_empty() {
            output::print(&explanation(&explained))?;
            let mut s = String::from("\nNotes over the run (each policy's distinct notes, first seed):\n");
            for (name, notes) in later_notes.iter().filter(|(_, n)| n.len() > 1) {
                let _ = writeln!(s, "  {name}:");
                for n in notes {
                    let _ = writeln!(s, "    {n}");
                }
            }
            if later_notes.iter().any(|(_, n)| n.len() > 1) {
                output::print(&s)?;
            }
        }
    }
    Ok(comparison)
}

/// Most distinct notes `--explain` shows per policy.
const NOTES_SHOWN: usize = 12;

fn explanation(runs: &[(String, Plan)]) -> String {
    let mut s = String::from("\nWhy (each policy's first placements):\n");
    for (name, plan) in runs {
        let _ = writeln!(s, "  {name}:");
        if let Some(note) = &plan.note {
            let _ = writeln!(s, "    {note}");
        }
        for (task, placement) in plan.tasks.iter().take(16) {
            match placement {
                Placement::Run { cpus, why } => {
                    let _ = writeln!(s, "    task {task} -> CPUs {cpus}: {why}");
                }
                Placement::Pause { why } => {
                    let _ = writeln!(s, "    task {task} paused: {why}");
                }
            }
        }
        if plan.tasks.len() > 16 {
            let _ = writeln!(s, "    ... and {} more", plan.tasks.len() - 16);
        }
    }
    s
}

fn ratio(v: f64, base: f64) -> String {
    if base > 0.0 && v.is_finite() {
        format!(" ({:.3}x)", v / base)
    } else {
        String::new()
    }
}

/// Metrics as rows, policies as columns, with each policy's ratio to `linux`.
fn table(c: &Comparison) -> String {
    let mut s = String::new();
    let mut seeds: Vec<u64> = c.policies.iter().map(|r| r.seed).collect();
    seeds.dedup();
    for seed in seeds {
        let runs: Vec<&PolicyResult> = c.policies.iter().filter(|r| r.seed == seed).collect();
        let Some(base) = runs.iter().find(|r| r.name == BASELINE).copied() else {
            continue;
        };
        let _ = writeln!(s, "scenario {} (seed {seed})", c.scenario);
        type Metric<'a> = (&'a str, &'a dyn Fn(&PolicyResult) -> Option<f64>, bool);
        let metrics: [Metric; 12] = [
            ("makespan_s", &|r| Some(r.makespan_s), true),
            ("throughput", &|r| Some(r.throughput), true),
            ("energy_j", &|r| Some(r.energy_j), true),
            ("avg_power_w", &|r| Some(r.avg_power_w), true),
            ("migrations", &|r| Some(r.migrations as f64), false),
            ("migrations_per_min", &|r| Some(r.migrations_per_min), false),
            (
                "migrations_cross_llc",
                &|r| Some(r.migrations_cross_llc as f64),
                false,
            ),
            (
                "migrations_cross_numa",
                &|r| Some(r.migrations_cross_numa as f64),
                false,
            ),
            (
                "migrations_cross_kind",
                &|r| Some(r.migrations_cross_kind as f64),
                false,
            ),
            (
                "cross_kind_per_cpu_min",
                &|r| Some(r.cross_kind_per_cpu_min),
                false,
            ),
            ("decision_overhead_pct", &|r| r.decision_overhead_pct, false),
            ("decision_wall_us", &|r| r.decision_wall_us, false),
        ];
        let width = runs.iter().map(|r| r.name.len() + 2).max().unwrap_or(8).max(22);
        let _ = write!(s, "{:<24}", "metric");
        for r in &runs {
            let _ = write!(s, "{:>width$}", r.name);
        }
        s.push('\n');
        for (name, get, with_ratio) in metrics {
            let _ = write!(s, "{name:<24}");
            for r in &runs {
                let cell = match get(r) {
                    None => "-".to_string(),
                    Some(v) if with_ratio && r.name != BASELINE => {
                        format!("{v:.3}{}", ratio(v, get(base).unwrap_or(0.0)))
                    }
                    Some(v) => format!("{v:.3}"),
                };
                let _ = write!(s, "{cell:>width$}");
            }
            s.push('\n');
        }
        for (i, job) in base.jobs.iter().enumerate() {
            let _ = write!(s, "{:<24}", format!("slowdown {}", job.name));
            for r in &runs {
                let cell = r.jobs[i].slowdown.map_or("-".to_string(), |v| format!("{v:.3}"));
                let _ = write!(s, "{cell:>width$}");
            }
            s.push('\n');
        }
        if let Some(service) = &c.service {
            consolidation_table(&mut s, service, &runs, width);
        }
        for r in &runs {
            for note in &r.notes {
                let _ = writeln!(s, "note ({}): {note}", r.name);
            }
        }
        s.push('\n');
    }
    if let Some(summary) = over_seeds(c) {
        s.push_str(&summary);
    }
    s
}

/// With several seeds, each policy's means over them: makespan, migrations
/// per minute, and completion against linux (the geometric mean over jobs
/// of each job's mean turnaround over linux's, as S3 reports; scenarios
/// whose seeds move where linux puts tasks need the average, not one run).
fn over_seeds(c: &Comparison) -> Option<String> {
    let mut names: Vec<&str> = Vec::new();
    for r in &c.policies {
        if !names.contains(&r.name.as_str()) {
            names.push(&r.name);
        }
    }
    let runs_of =
        |name: &str| -> Vec<&PolicyResult> { c.policies.iter().filter(|r| r.name == name).collect() };
    let n = runs_of(BASELINE).len();
    if n < 2 {
        return None;
    }
    let mean = |xs: &[f64]| xs.iter().sum::<f64>() / xs.len().max(1) as f64;
    // Each job's mean turnaround; None where a run left it unfinished.
    let turnarounds = |runs: &[&PolicyResult]| -> Vec<Option<f64>> {
        (0..runs[0].jobs.len())
            .map(|j| {
                let ts: Option<Vec<f64>> = runs
                    .iter()
                    .map(|r| r.jobs.get(j).and_then(|x| x.turnaround_s))
                    .collect();
                ts.map(|ts| mean(&ts))
            })
            .collect()
    };
    let base_runs = runs_of(BASELINE);
    let base_t = turnarounds(&base_runs);
    let base_makespan = mean(&base_runs.iter().map(|r| r.makespan_s).collect::<Vec<_>>());
    let width = names.iter().map(|x| x.len() + 2).max().unwrap_or(8).max(22);
    let mut s = format!("scenario {}: means over {n} seeds\n{:<24}", c.scenario, "metric");
    for name in &names {
        let _ = write!(s, "{name:>width$}");
    }
    s.push('\n');
    type Row<'a> = (&'a str, &'a dyn Fn(&[&PolicyResult]) -> String);
    let rows: [Row; 4] = [
        ("makespan_s", &|runs| {
            let m = mean(&runs.iter().map(|r| r.makespan_s).collect::<Vec<_>>());
            format!(
                "{m:.3}{}",
                if runs[0].name == BASELINE {
                    String::new()
                } else {
                    ratio(m, base_makespan)
                }
            )
        }),
        ("completion_vs_linux", &|runs| {
            let logs: Option<Vec<f64>> = turnarounds(runs)
                .iter()
                .zip(&base_t)
                .map(|(t, b)| Some((t.as_ref()? / b.as_ref()?).ln()))
                .collect();
            logs.map_or("-".into(), |l| format!("{:.3}", mean(&l).exp()))
        }),
        ("migrations_per_min", &|runs| {
            format!(
                "{:.1}",
                mean(&runs.iter().map(|r| r.migrations_per_min).collect::<Vec<_>>())
            )
        }),
        ("cross_kind_per_cpu_min", &|runs| {
            format!(
                "{:.2}",
                mean(&runs.iter().map(|r| r.cross_kind_per_cpu_min).collect::<Vec<_>>())
            )
        }),
    ];
    for (label, cell) in rows {
        let _ = write!(s, "{label:<24}");
        for name in &names {
            let _ = write!(s, "{:>width$}", cell(&runs_of(name)));
        }
        s.push('\n');
    }
    s.push_str("completion_vs_linux: geometric mean over jobs of each job's mean turnaround / linux's\n");
    Some(s)
}

/// S4's consolidation study: the service's SLO violations and the batch
/// job's useful work per policy, then interval by interval.
fn consolidation_table(
    s: &mut String,
    service: &herd_sim::consolidation::Consolidation,
    runs: &[&PolicyResult],
    width: usize,
) {
    let judged: Vec<(&str, &herd_sim::consolidation::ConsolidationResult)> = runs
        .iter()
        .filter_map(|r| r.consolidation.as_ref().map(|c| (r.name.as_str(), c)))
        .collect();
    let Some((_, first)) = judged.first() else { return };
    let _ = writeln!(
        s,
        "{:<24}{:>width$}",
        "slo_violations",
        format!(
            "{} of {} intervals (p99 <= {} ms)",
            first.violations, first.intervals, service.slo_ms
        )
    );
    let _ = write!(s, "{:<24}", "batch_ginstr_per_s");
    for r in runs {
        let cell = r
            .consolidation
            .as_ref()
            .map_or("-".into(), |c| format!("{:.3}", c.batch_ginstr_per_s));
        let _ = write!(s, "{cell:>width$}");
    }
    let _ = writeln!(
        s,
        "\n\n{}: load, cores and p99 latency per interval; batch work per policy (G instructions/s)",
        service.service
    );
    let _ = write!(
        s,
        "{:>8} {:>10} {:>9} {:>9} {:>6}",
        "t_s", "load_rps", "svc_cores", "p99_ms", "batch"
    );
    for (name, _) in &judged {
        let _ = write!(s, " {name:>22}");
    }
    s.push('\n');
    for (i, iv) in service.intervals.iter().enumerate() {
        let p99 = iv.p99_ms.map_or("overload".into(), |p| format!("{p:.3}"));
        let flag = if iv.violated { "!" } else { " " };
        let _ = write!(
            s,
            "{:>8.2} {:>10.0} {:>9} {:>8}{flag} {:>6}",
            iv.start_s, iv.load_rps, iv.service_cores, p99, iv.batch_cores
        );
        for (_, c) in &judged {
            let cell = c
                .batch
                .get(i)
                .map_or("-".into(), |b| format!("{:.3}", b.ginstr_per_s));
            let _ = write!(s, " {cell:>22}");
        }
        s.push('\n');
    }
}

/// S0's table: per policy and unit count, time, power, energy, cores, SPN;
/// then `smt:spn` against `smt:speed` at equal physical cores.
fn sweep_table(sw: &herd_sim::Sweep) -> String {
    let mut s = String::from("unit sweep (S0): speedup against one unit under the same policy\n");
    let _ = writeln!(
        s,
        "{:<16}{:>6}{:>12}{:>10}{:>12}{:>7}{:>9}{:>8}",
        "policy", "units", "time_s", "power_w", "energy_j", "cores", "speedup", "SPN"
    );
    for p in &sw.points {
        let _ = writeln!(
            s,
            "{:<16}{:>6}{:>12.3}{:>10.2}{:>12.1}{:>7}{:>9.3}{:>8.3}",
            p.policy, p.units, p.makespan_s, p.avg_power_w, p.energy_j, p.physical_cores, p.speedup, p.spn
        );
    }
    if !sw.spn_vs_speed.is_empty() {
        s.push_str("\nsmt:spn against smt:speed at equal physical cores (each one's fastest run on them):\n");
        for c in &sw.spn_vs_speed {
            if c.same_units {
                let _ = writeln!(
                    s,
                    "  {:>2} cores: both at their fastest with {} units: the same placement",
                    c.physical_cores, c.a_units
                );
                continue;
            }
            let _ = writeln!(
                s,
                "  {:>2} cores: smt:spn with {:>2} units is {:+.1}% faster than smt:speed with {:>2}",
                c.physical_cores,
                c.a_units,
                100.0 * c.a_faster,
                c.b_units
            );
        }
        let best = sw
            .spn_vs_speed
            .iter()
            .map(|c| c.a_faster)
            .fold(f64::MIN, f64::max);
        if let Some(mean) = sw.spn_vs_speed_mean {
            let _ = writeln!(
                s,
                "  mean {:+.1}% where they differ, best {:+.1}% (S0 measured 21% mean, up to 33%)",
                100.0 * mean,
                100.0 * best
            );
        }
    }
    s
}
