//! `herd batch`: a group of programs under a policy, optionally compared
//! with plain Linux (spawn them all, let the kernel decide), repeated and
//! alternated. The file format is in docs/batch.md; examples in examples/.

use std::fmt::Write;
use std::os::unix::process::ExitStatusExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Instant;

use clap::Args;
use herd_cli::files::BatchFile;
use herd_engine::{Config, InCharge};
use herd_policy::{Level, PolicySpec, TaskState};
use herd_runtime::live::{Learn, LiveWorld, Program, Session, SpawnOptions};
use serde::Serialize;

use crate::batch_ledger::{AcrossRuns, Ledger};
use crate::common::{self, Failure};
use crate::output;
use crate::signals::Signals;

/// Arguments of `herd batch`.
#[derive(Args, Debug)]
pub struct BatchArgs {
    /// The batch file (TOML; see docs/batch.md).
    file: PathBuf,
    /// The policy, NAME[:key=value,...].
    #[arg(long, default_value = "cosched:fair")]
    policy: PolicySpec,
    /// Also run the batch with no intervention (plain fork/exec; Linux decides).
    #[arg(long, value_name = "linux")]
    compare: Option<PolicySpec>,
    /// Run each variant this many times, alternating, and report medians.
    #[arg(long, default_value_t = 1)]
    repeat: u32,
    #[command(flatten)]
    looping: crate::common::LoopArgs,
    /// Where program logs go (default: herd-logs/<batch name>/).
    #[arg(long, value_name = "DIR")]
    logs: Option<PathBuf>,
    /// Write one JSON line per decision: which programs ran and which waited.
    #[arg(long, value_name = "FILE")]
    trace: Option<PathBuf>,
    /// Print JSON instead of a table.
    #[arg(long)]
    json: bool,
    /// The profile database runs learn from and into (default: $XDG_DATA_HOME/herd/herd.db, else ~/.local/share/herd/herd.db).
    #[arg(long, value_name = "PATH")]
    db: Option<PathBuf>,
    /// The guard across runs: with the guard on, record each whole run of
    /// this batch (its programs, under this policy) in the database, and
    /// give a run to the kernel where the batch's makespans under the
    /// policy lose to the kernel's by more than 2%, or to measure them;
    /// where they do not lose, the policy's runs go without in-run probes
    /// (docs/batch.md); under --compare, --repeat or --trace every run is
    /// the variant asked for, and recorded. Off: nothing read or recorded.
    #[arg(long, value_enum, default_value = "on")]
    across_runs: crate::common::OnOff,
    #[command(flatten)]
    mechanism: crate::mechanism::MechanismArgs,
}

/// One program to start, copies expanded.
struct Entry {
    name: String,
    argv: Vec<String>,
    opts: SpawnOptions,
    memory: Option<Level>,
    threads: Option<u32>,
}

fn load(path: &Path, logs: &Path) -> Result<(String, Vec<Entry>), Failure> {
    let bad = |line: Option<usize>, why: String| {
        let at = line.map(|l| format!(":{l}")).unwrap_or_default();
        Failure::Input(anyhow::anyhow!("{}{at}: {why}", path.display()))
    };
    let text = std::fs::read_to_string(path).map_err(|e| bad(None, e.to_string()))?;
    let file = BatchFile::parse(&text).map_err(|e| bad(e.line, e.why))?;
    // `herd batch ok.toml` has an empty parent: its folder is the current one.
    let dir = path
        .parent()
        .filter(|d| !d.as_os_str().is_empty())
        .map_or_else(|| PathBuf::from("."), Path::to_path_buf);
    let dir = std::fs::canonicalize(&dir).unwrap_or(dir);
    let mut entries = Vec::new();
    for (line, p) in file.programs(&text) {
        let line = Some(line);
        let copies = p.copies.unwrap_or(1);
        let cwd = p.cwd.as_ref().map_or(dir.clone(), |c| dir.join(c));
        if !cwd.is_dir() {
            return Err(bad(
                line,
                format!("program '{}': cwd {} is not a folder", p.name, cwd.display()),
            ));
        }
        // Every program is checked before any starts: a typo found after
        // the first program ran would leave a run half made.
        herd_runtime::live::resolve(&p.cmd[0], Some(&cwd)).map_err(|err| {
            bad(
                line,
                format!("program '{}': cannot run '{}': {err}", p.name, p.cmd[0]),
            )
        })?;
        for k in 1..=copies {
            let name = if copies > 1 {
                format!("{}#{k}", p.name)
            } else {
                p.name.clone()
            };
            let log = logs.join(format!("{}.log", name.replace(['/', ' '], "_")));
            let mut env: Vec<(String, String)> = p.env.iter().map(|(k, v)| (k.clone(), v.clone())).collect();
            let mut argv = p.cmd.clone();
            if let Some(n) = p.threads {
                if !p.env.contains_key("OMP_NUM_THREADS") {
                    env.push(("OMP_NUM_THREADS".into(), n.to_string()));
                }
                for a in &mut argv {
                    *a = a.replace("{threads}", &n.to_string());
                }
            }
            entries.push(Entry {
                name,
                argv,
                opts: SpawnOptions {
                    cwd: Some(cwd.clone()),
                    env,
                    log: Some(log),
                    held_via: None,
                },
                memory: p.memory,
                threads: p.threads,
            });
        }
    }
    let name = file.name.unwrap_or_else(|| {
        path.file_stem()
            .map_or("batch".into(), |s| s.to_string_lossy().into_owned())
    });
    Ok((name, entries))
}

/// One run of the batch.
#[derive(Debug, Clone, Serialize)]
struct RunResult {
    variant: String,
    makespan_s: f64,
    programs: Vec<ProgramResult>,
    placements: u64,
    pauses: u64,
    /// Time herd's turns waited for paused programs to stop before letting
    /// others run: CPUs may idle meanwhile.
    pause_wait_s: f64,
    decisions: u64,
    herd_cpu_s: f64,
    /// CPU time of the programs themselves (their rusage once reaped).
    programs_cpu_s: f64,
    /// herd's CPU time / the programs' CPU time, in percent.
    overhead_pct: f64,
    /// How herd paused and confined programs (`none` under plain Linux).
    mechanism: String,
    /// Energy the machine used (RAPL), where it can tell.
    energy_j: Option<f64>,
    /// Bytes the programs moved to and from memory (resctrl MBM, else LLC
    /// misses x 64 B), where the machine can tell.
    mem_bytes: Option<u64>,
    /// The policy's notes on its decisions (e.g. which signals it used),
    /// each once, in order.
    notes: Vec<String>,
    /// What the guard did (`None`: plain Linux, or `--guard off`).
    guard: Option<herd_engine::GuardReport>,
    /// What herd could not do here as it would with room for it (threads
    /// without counters or kept files), one sentence each.
    degraded: Vec<String>,
    /// Times a job's memory was moved onto the nodes its policy kept it on,
    /// or the kernel a job herd had pinned and let go (`--memory-follow`).
    memory_moves: u64,
    /// The run summary's sentence on those moves, as `herd run` prints it.
    #[serde(skip)]
    memory_followed: Option<String>,
    /// Who placed this run of the policy's variant and why, by the guard
    /// across runs (`None`: not asked; plain Linux, `--compare`,
    /// `--repeat`, `--trace`, `--guard off`, `--across-runs off`, or no
    /// database).
    across_runs: Option<AcrossRuns>,
}

#[derive(Debug, Clone, Serialize)]
struct ProgramResult {
    name: String,
    turnaround_s: f64,
    exit_code: Option<i32>,
    log: String,
}

fn exit_code(st: Option<std::process::ExitStatus>) -> Option<i32> {
    st.map(|s| s.code().unwrap_or_else(|| 128 + s.signal().unwrap_or(0)))
}

/// Starts every program held: none runs until the policy's first decision.
///
/// Every program was checked when the file was read (`load`); if one still
/// cannot start, those already started (held: none has run an instruction of its
/// own) are killed and reaped: a failed batch leaves nothing running.
fn spawn_all(entries: &[Entry]) -> Result<Vec<Program>, Failure> {
    let herd = herd_runtime::keeper::own_binary().map_err(|e| Failure::Internal(e.into()))?;
    let mut programs: Vec<Program> = Vec::new();
    for e in entries {
        let opts = SpawnOptions {
            held_via: Some(herd.clone()),
            ..e.opts.clone()
        };
        let (child, hold) = match herd_runtime::live::spawn_with(&e.argv, &opts) {
            Ok(started) => started,
            Err(err) => {
                for p in &mut programs {
                    if let Some(child) = p.child.as_mut() {
                        let _ = child.kill();
                        let _ = child.wait();
                    }
                }
                return Err(common::spawn_failure(
                    &err,
                    format!("program '{}': cannot run '{}'", e.name, e.argv[0]),
                ));
            }
        };
        let key = crate::units::program_key_in(&e.argv, e.opts.cwd.as_deref());
        let mut program = Program::new(e.name.clone(), key, child.id() as i32, Some(child));
        program.memory_hint = e.memory;
        program.threads_declared = herd_runtime::live::declared_threads(e.threads, &e.opts.env);
        program.hold = hold;
        programs.push(program);
    }
    Ok(programs)
}

fn results(
    variant: &str,
    entries: &[Entry],
    world: &LiveWorld,
    decisions: u64,
    cpu_s: (f64, f64),
    mechanism: String,
    (notes, guard): (Vec<String>, Option<herd_engine::GuardReport>),
) -> RunResult {
    let (herd_cpu_s, programs_cpu_s) = cpu_s;
    let programs: Vec<ProgramResult> = world
        .programs()
        .iter()
        .zip(entries)
        .map(|(p, e)| ProgramResult {
            name: p.name.clone(),
            turnaround_s: p.exited_ns.unwrap_or(0) as f64 * 1e-9,
            exit_code: exit_code(p.status),
            log: e
                .opts
                .log
                .as_ref()
                .map(|l| l.display().to_string())
                .unwrap_or_default(),
        })
        .collect();
    let makespan_s = programs.iter().map(|p| p.turnaround_s).fold(0.0, f64::max);
    let s = world.stats;
    crate::run_cmd::warn_after_live(
        &s,
        variant,
        "herd batch does not apply them, herd run --realtime does",
    );
    RunResult {
        variant: variant.into(),
        makespan_s,
        programs,
        placements: s.placements,
        pauses: s.pauses,
        pause_wait_s: s.pause_wait_ns as f64 * 1e-9,
        decisions,
        herd_cpu_s,
        programs_cpu_s,
        overhead_pct: if programs_cpu_s > 0.0 {
            100.0 * herd_cpu_s / programs_cpu_s
        } else {
            0.0
        },
        mechanism,
        energy_j: s.energy_j,
        mem_bytes: s.mem_bytes,
        notes,
        guard,
        degraded: s.degradations(),
        memory_moves: s.memory_moves,
        memory_followed: s.memory_followed(),
        across_runs: None,
    }
}

/// Runs the batch once under `policy` (`None`: plain Linux, no loop at all).
fn run_once(
    machine: &herd_topo::Machine,
    entries: &[Entry],
    policy: Option<&PolicySpec>,
    cfg: &Config,
    sig: &Signals,
    trace: &mut Option<std::fs::File>,
    args: &BatchArgs,
) -> Result<RunResult, Failure> {
    // Set up before anything starts, so a refusal leaves nothing behind.
    let mechanism = match policy {
        Some(_) => Some(args.mechanism.setup()?),
        None => None,
    };
    let programs = spawn_all(entries)?;
    let world = args
        .looping
        .world(LiveWorld::new(programs, Arc::clone(&sig.stop)));
    // Every run under herd learns (S1: the database is updated after
    // every run), starting from what earlier runs stored; plain Linux
    // learns nothing.
    let learn = match policy {
        Some(_) => Learn::Db(args.db.as_deref()),
        None => Learn::Off,
    };
    let (mut session, note) = Session::start(world, learn);
    let used = mechanism.map_or("none".to_string(), |m| m.attach(session.world()));
    let mut notes: Vec<String> = note.into_iter().collect();
    let variant = match policy {
        None => {
            // No intervention: let them go, wait for them, nothing else.
            session.let_run();
            herd_policy::BASELINE.to_string()
        }
        Some(spec) => {
            let mut p = spec.build();
            let names: Vec<String> = entries.iter().map(|e| e.name.clone()).collect();
            if let Some(f) = trace.as_mut() {
                // Each run under a policy starts with its header: a trace
                // of several runs replays run by run.
                let header = herd_cli::trace::Header::new(spec, cfg, session.learning_start());
                use std::io::Write as _;
                let _ = writeln!(f, "{}", serde_json::to_string(&header).unwrap_or_default());
            }
            session.run(
                p.as_mut(),
                machine,
                cfg,
                |view, plan| {
                    // The guard's notes are in its report.
                    if let Some(n) = plan.note.as_ref().filter(|n| !n.starts_with(herd_engine::guard::NOTE_PREFIX))
                        && notes.len() < 8
                        && !notes.iter().any(|m| **m == **n)
                    {
                        notes.push(n.to_string());
                    }
                    if let Some(f) = trace.as_mut() {
                        // The view shows what held during the last period.
                        let mut running = std::collections::BTreeSet::new();
                        let mut waiting = std::collections::BTreeSet::new();
                        for t in &view.snapshot.tasks {
                            let name = names[t.job as usize].clone();
                            if t.state == TaskState::Paused {
                                waiting.insert(name)
                            } else {
                                running.insert(name)
                            };
                        }
                        let mut line = serde_json::json!({"t_s": view.now_ns() as f64 * 1e-9, "running": running, "waiting": waiting});
                        if let Some(n) = plan.note.as_ref().filter(|n| n.starts_with(herd_engine::guard::NOTE_PREFIX)) {
                            line["guard"] = n.to_string().into();
                        }
                        herd_cli::trace::decision_fields(&mut line, view.snapshot, plan);
                        use std::io::Write as _;
                        let _ = writeln!(f, "{line}");
                    }
                },
            );
            p.name()
        }
    };
    sig.end_held(session.world());
    let mut done = session.finish();
    sig.pass_on(&done.world);
    sig.wait(&mut done.world);
    Ok(results(
        &variant,
        entries,
        &done.world,
        done.overhead.decisions,
        (done.herd_cpu_s, done.programs_cpu_s()),
        used,
        (notes, done.guard.take()),
    ))
}

/// `herd batch`; returns 0, or 1 if any program failed.
pub fn run(args: &BatchArgs) -> Result<u8, Failure> {
    let cfg = crate::common::period_config(&args.looping)?;
    crate::common::live_policy(&args.policy)?;
    if args.repeat == 0 {
        return Err(Failure::Input(anyhow::anyhow!("--repeat must be at least 1")));
    }
    // Read the topology once for every run.
    let machine = crate::common::this_machine()?;
    crate::common::check_cores(&args.policy, &machine)?;
    let (machine, _lease) =
        crate::common::around_other_herds(machine, &args.file.display().to_string(), &args.policy, None);
    if let Some(c) = &args.compare {
        if !c.is_baseline() {
            return Err(Failure::Input(anyhow::anyhow!(
                "--compare takes 'linux' (plain fork/exec), got '{c}'"
            )));
        }
    }
    let stem = args
        .file
        .file_stem()
        .map_or("batch".into(), |s| s.to_string_lossy().into_owned());
    let logs = args
        .logs
        .clone()
        .unwrap_or_else(|| PathBuf::from("herd-logs").join(&stem));
    // The file first: a batch refused leaves no folder behind.
    let (name, entries) = load(&args.file, &logs)?;
    std::fs::create_dir_all(&logs).map_err(|e| Failure::Input(anyhow::anyhow!("{}: {e}", logs.display())))?;
    let sig = Signals::install()?;
    let mut trace = match &args.trace {
        Some(p) => Some(
            std::fs::File::create(p).map_err(|e| Failure::Input(anyhow::anyhow!("{}: {e}", p.display())))?,
        ),
        None => None,
    };
    let started = Instant::now();
    let mut runs: Vec<RunResult> = Vec::new();
    // The guard across runs: with the guard on, a batch run again is
    // compared with itself under the kernel, by makespan. Under --compare,
    // --repeat or --trace every run is the variant asked for (the user is
    // measuring it, or wants its decisions), and each is recorded.
    let measuring = args.compare.is_some() || args.repeat > 1 || args.trace.is_some();
    let mut ledger =
        (cfg.guard.is_some() && args.across_runs == crate::common::OnOff::On && !args.policy.is_baseline())
            .then(|| {
                let keys = entries
                    .iter()
                    .map(|e| crate::units::program_key_in(&e.argv, e.opts.cwd.as_deref()))
                    .collect();
                Ledger::open(
                    args.db.as_deref(),
                    crate::batch_ledger::mix_key(keys),
                    args.policy.to_string(),
                )
            })
            .flatten();
    // A B B A A B ...: alternating spreads the machine's noise over both
    // variants, and swapping which goes first each round spreads the cost
    // of going first too. With A always first, herd's `linux` loop (which
    // places nothing) lost to plain Linux in 7 of 8 rounds here; swapped,
    // going first cost 1.0% and herd's loop 0.7% (10 rounds, 2 copies of
    // stress-ng --cpu).
    for round in 0..args.repeat {
        let mut variants: Vec<Option<&PolicySpec>> = vec![Some(&args.policy)];
        if args.compare.is_some() {
            variants.push(None);
            if round % 2 == 1 {
                variants.reverse();
            }
        }
        for v in variants {
            if sig.stop.load(std::sync::atomic::Ordering::Relaxed) {
                break;
            }
            eprintln!(
                "herd: {name}: run {} of {} under {}",
                round + 1,
                args.repeat,
                v.map_or(format!("{} (no herd)", herd_policy::BASELINE), |p| p.to_string())
            );
            let across = match (v, measuring, &ledger) {
                (Some(_), false, Some(l)) => Some(l.next()),
                _ => None,
            };
            let by_kernel = v.is_none() || across.as_ref().is_some_and(|a| a.verdict.by == InCharge::Kernel);
            if let Some(a) = across.as_ref().filter(|_| by_kernel) {
                eprintln!("herd: {name}: guard across runs: {}", a.summary);
            }
            // A batch whose makespans vouch for the policy is not probed in
            // the run (`GuardConfig::trusting`).
            let run_cfg = match &across {
                Some(a) if !a.in_run_probes => herd_engine::Config {
                    guard: cfg.guard.map(herd_engine::GuardConfig::trusting),
                    ..cfg
                },
                _ => cfg,
            };
            let started_unix_s = common::unix_now_s();
            let mut r = run_once(
                &machine,
                &entries,
                if by_kernel { None } else { v },
                &run_cfg,
                &sig,
                &mut trace,
                args,
            )?;
            if let (Some(spec), true) = (v, by_kernel) {
                // The policy's run, given to the kernel: it is what the
                // policy's user got.
                r.variant = spec.build().name();
            }
            r.across_runs = across;
            let whole = !sig.stop.load(std::sync::atomic::Ordering::Relaxed)
                && r.programs.iter().all(|p| p.exit_code == Some(0));
            if let (Some(l), true) = (ledger.as_mut(), whole) {
                l.record(by_kernel, r.makespan_s, started_unix_s);
            }
            runs.push(r);
        }
    }
    let failed = runs
        .iter()
        .flat_map(|r| &r.programs)
        .any(|p| p.exit_code != Some(0));
    if args.json {
        output::print_json(&serde_json::json!({"batch": name, "runs": runs}))?;
    } else {
        output::print(&table(&name, &runs, &entries, started.elapsed().as_secs_f64()))?;
    }
    Ok(u8::from(failed))
}

fn table(name: &str, runs: &[RunResult], entries: &[Entry], wall_s: f64) -> String {
    let mut variants: Vec<&str> = Vec::new();
    for r in runs {
        if !variants.contains(&r.variant.as_str()) {
            variants.push(&r.variant);
        }
    }
    let mut s = String::new();
    let n = runs.iter().filter(|r| r.variant == variants[0]).count();
    let _ = writeln!(
        s,
        "batch {name}: {} programs, {n} run(s) per variant (medians), {wall_s:.1} s in all",
        entries.len()
    );
    let _ = write!(s, "{:<24}", "metric");
    for v in &variants {
        let _ = write!(s, "{v:>20}");
    }
    s.push('\n');
    let med = |v: &str, f: &dyn Fn(&RunResult) -> f64| {
        herd_model::median(runs.iter().filter(|r| r.variant == v).map(f).collect())
    };
    let base = variants.iter().position(|v| *v == herd_policy::BASELINE);
    let mut row = |label: &str, f: &dyn Fn(&RunResult) -> f64| {
        let _ = write!(s, "{label:<24}");
        let b = base.map(|i| med(variants[i], f));
        for v in &variants {
            let x = med(v, f);
            let ratio = match b {
                Some(b) if *v != herd_policy::BASELINE && b > 0.0 => format!(" ({:.3}x)", x / b),
                _ => String::new(),
            };
            let _ = write!(s, "{:>20}", format!("{x:.3}{ratio}"));
        }
        s.push('\n');
    };
    row("makespan_s", &|r| r.makespan_s);
    for (i, e) in entries.iter().enumerate() {
        row(&format!("turnaround_s {}", e.name), &|r| {
            r.programs[i].turnaround_s
        });
    }
    row("herd_cpu_s", &|r| r.herd_cpu_s);
    row("herd_overhead_pct", &|r| r.overhead_pct);
    if runs.iter().all(|r| r.energy_j.is_some()) {
        row("energy_j (RAPL)", &|r| r.energy_j.unwrap_or(0.0));
    }
    for v in &variants {
        if let Some(r) = runs.iter().find(|r| r.variant == *v && r.mechanism != "none") {
            let _ = writeln!(s, "{v} used: {}", r.mechanism);
        }
        for (k, g) in runs
            .iter()
            .filter(|r| r.variant == *v)
            .enumerate()
            .filter_map(|(k, r)| Some((k, r.guard.as_ref()?)))
        {
            let _ = writeln!(s, "{v} run {}: {}", k + 1, g.summary());
        }
        for (k, r) in runs.iter().filter(|r| r.variant == *v).enumerate() {
            if let Some(a) = &r.across_runs {
                let _ = writeln!(s, "{v} run {}: guard across runs: {}", k + 1, a.summary);
            }
            if let Some(m) = &r.memory_followed {
                let _ = writeln!(s, "{v} run {}: {m}", k + 1);
            }
        }
        // The first run's notes: what herd learned from and what the
        // policy decided from.
        if let Some(r) = runs.iter().find(|r| r.variant == *v && !r.notes.is_empty()) {
            for n in &r.notes {
                // Policies name themselves in their notes already.
                if n.starts_with(&format!("{v}:")) {
                    let _ = writeln!(s, "{n}");
                } else {
                    let _ = writeln!(s, "{v}: {n}");
                }
            }
        }
    }
    let _ = writeln!(
        s,
        "logs: {}",
        entries
            .first()
            .and_then(|e| e.opts.log.as_ref())
            .and_then(|l| l.parent())
            .map_or(String::new(), |d| d.display().to_string())
    );
    s
}
