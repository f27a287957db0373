//! `herd run`: one program under a policy, its threads placed every period.
//!
//! The program's stdin, stdout and stderr are its own; its exit code is
//! herd's. On SIGINT or SIGTERM herd continues anything it paused, restores
//! the affinities it changed, passes the signal on to the program, waits
//! for it, and exits with the program's status.

use std::fmt::Write;
use std::os::unix::process::ExitStatusExt;
use std::sync::Arc;

use clap::Args;
use herd_policy::Placement;
use herd_runtime::live::{Learn, LiveWorld, Program, Session};

use crate::common::{self, Failure};
use crate::signals::Signals;

/// Arguments of `herd run`.
#[derive(Args, Debug)]
pub struct RunArgs {
    /// The policy, NAME[:key=value,...] (see `herd policies`).
    #[arg(long, default_value_t = herd_policy::PolicySpec::linux())]
    policy: herd_policy::PolicySpec,
    #[command(flatten)]
    looping: crate::common::LoopArgs,
    /// Print each placement decision and its reason on stderr.
    #[arg(long)]
    explain: bool,
    /// Run herd's decision loop under SCHED_FIFO (priority 10), so it keeps
    /// its period while the program's threads are busy (sub-ms policies
    /// such as pack:palm need it); the program runs at normal priority,
    /// except where a plan puts its threads in lanes (SCHED_FIFO 1 and 2,
    /// below herd's loop): pack:palm does once it has learned the beats
    /// between a job's barriers, and only under this flag. Needs root or
    /// CAP_SYS_NICE (`herd doctor`: realtime).
    #[arg(long)]
    realtime: bool,
    /// The share of one CPU herd's own loop may use, in per cent: a period
    /// shorter than the loop's cost per turn allows is stretched (the run
    /// summary counts them). More lets pack:palm follow short barrier
    /// phases at the cost of herd's CPU (scripts/s4-barrier.py --sweep).
    #[arg(long, value_name = "PCT", default_value_t = crate::common::LIVE_LOOP_SHARE * 100.0)]
    loop_share: f64,
    /// Write one JSON line per decision to FILE: each thread's CPU, state,
    /// CPU time and heartbeats, and the placements made (docs/json.md).
    #[arg(long, value_name = "FILE")]
    trace: Option<std::path::PathBuf>,
    /// Follow a core budget that changes while the program runs: FILE holds
    /// one whole number, the cores the program may use, read every 10 ms
    /// (replace it atomically: write another file, rename it over). For the
    /// packing policies (pack:palm, pack:tp, pack:tr), whose cores= it
    /// overrides. A file that turns bad keeps the last budget, with a warning.
    #[arg(long, value_name = "FILE")]
    cores_from: Option<std::path::PathBuf>,
    /// Take the program's progress (S4's heartbeats, for pack:palm) from
    /// PATH instead of herd's heartbeat library: the program finds PATH in
    /// $HERD_PROGRESS and writes lines `TID COUNT` (a thread's id and its
    /// beats so far), and `TID exit` when a thread is done. PATH may be a
    /// file it appends to or a named pipe;
    /// if nothing is there, herd makes a pipe and removes it afterwards.
    #[arg(long, value_name = "PATH")]
    progress_from: Option<std::path::PathBuf>,
    /// Run the program with N threads: sets OMP_NUM_THREADS=N and replaces
    /// `{threads}` in its arguments. `auto` picks N from the program's
    /// recorded runs (S0: Amdahl's fit; see --goal, `herd db show`).
    #[arg(long, value_name = "N|auto", value_parser = parse_threads)]
    threads: Option<Threads>,
    /// What --threads auto optimises: speed (the fewest units within
    /// --tolerance of the best predicted speedup) or energy (the least
    /// predicted energy).
    #[arg(long, value_enum)]
    goal: Option<Goal>,
    #[command(flatten)]
    choice: crate::units::ChoiceArgs,
    #[command(flatten)]
    mechanism: crate::mechanism::MechanismArgs,
    /// The profile database (default: $XDG_DATA_HOME/herd/herd.db, else ~/.local/share/herd/herd.db).
    #[arg(long, value_name = "PATH")]
    db: Option<std::path::PathBuf>,
    /// The program and its arguments (after `--`).
    #[arg(
        required = true,
        trailing_var_arg = true,
        allow_hyphen_values = true,
        value_name = "CMD"
    )]
    cmd: Vec<String>,
}

/// One `--trace` line: what the view showed and what the plan did.
fn trace_line(
    f: &mut impl std::io::Write,
    view: &herd_policy::View<'_>,
    plan: &herd_policy::Plan,
) -> std::io::Result<()> {
    let tasks: Vec<serde_json::Value> = view
        .snapshot
        .tasks
        .iter()
        .map(|t| {
            serde_json::json!({"id": t.id, "rank": t.rank, "cpu": t.cpu, "state": t.state,
                "cpu_ns": t.obs.cpu_time_ns, "beats": t.heartbeats})
        })
        .collect();
    let placed: Vec<serde_json::Value> = plan
        .tasks
        .iter()
        .map(|(id, p)| match p {
            Placement::Run { cpus, .. } => serde_json::json!({"id": id, "cpus": cpus.to_string()}),
            Placement::Pause { .. } => serde_json::json!({"id": id, "paused": true}),
        })
        .collect();
    let mut line = serde_json::json!({
        "t_s": view.now_ns() as f64 * 1e-9,
        "tasks": tasks,
        "placed": placed,
        "next_period_ms": plan.next_period_ns.map(|n| n as f64 * 1e-6),
    });
    herd_cli::trace::decision_fields(&mut line, view.snapshot, plan);
    if let Some(k) = view.snapshot.budget_cores {
        line["budget_cores"] = k.into();
    }
    if view.snapshot.progress_only {
        line["progress_only"] = true.into();
    }
    if let Some(n) = plan
        .note
        .as_ref()
        .filter(|n| n.starts_with(herd_engine::guard::NOTE_PREFIX))
    {
        line["guard"] = n.to_string().into();
    }
    if !plan.lanes.is_empty() {
        line["lanes"] = plan
            .lanes
            .iter()
            .map(|(id, lane)| serde_json::json!({"id": id, "lane": lane}))
            .collect::<Vec<_>>()
            .into();
    }
    writeln!(f, "{line}")
}

/// Says once, after a live run, what herd could not do: the policy's
/// lanes (SCHED_FIFO priorities) need herd's loop above them (`how`);
/// threads watched without counters or kept files, for want of
/// descriptors.
pub(crate) fn warn_after_live(s: &herd_runtime::live::LiveStats, policy: &str, how: &str) {
    if s.lanes_ignored > 0 {
        eprintln!(
            "herd: warning: {policy} asked for lanes (SCHED_FIFO priorities), which need herd's loop above them: \
             {how}; they were ignored"
        );
    }
    for d in s.degradations() {
        eprintln!("herd: warning: {d}");
    }
}

/// `--threads`: a count or `auto`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Threads {
    /// This many.
    Count(u32),
    /// Chosen from the program's recorded runs.
    Auto,
}

fn parse_threads(s: &str) -> Result<Threads, String> {
    if s == "auto" {
        return Ok(Threads::Auto);
    }
    match s.parse::<u32>() {
        Ok(n) if n >= 1 => Ok(Threads::Count(n)),
        _ => Err(format!("expected a whole number >= 1 or 'auto', got '{s}'")),
    }
}

/// What `--threads auto` optimises.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Goal {
    /// The fewest units within the tolerance of the best speedup.
    Speed,
    /// The least energy.
    Energy,
}

/// `herd run`; returns the exit code to leave with (the program's).
pub fn run(args: &RunArgs) -> Result<u8, Failure> {
    let mut cfg = crate::common::period_config(&args.looping)?;
    if !(args.loop_share > 0.0 && args.loop_share <= 100.0) {
        return Err(Failure::Input(anyhow::anyhow!(
            "--loop-share must be a per cent in (0, 100], got {}",
            args.loop_share
        )));
    }
    cfg.loop_share = Some(args.loop_share / 100.0);
    let mut policy = crate::common::live_policy(&args.policy)?;
    let machine = crate::common::this_machine()?;
    crate::common::check_cores(&args.policy, &machine)?;
    let (machine, _lease) =
        crate::common::around_other_herds(machine, &crate::units::program_key(&args.cmd), &args.policy, None);
    // Opened before the program starts, so a bad path costs no run.
    let mut trace = match &args.trace {
        Some(p) => Some(std::io::BufWriter::new(std::fs::File::create(p).map_err(
            |e| Failure::Input(anyhow::anyhow!("--trace {}: {e}", p.display())),
        )?)),
        None => None,
    };
    let mut trace_failed: Option<std::io::Error> = None;
    if args.goal.is_some() && args.threads != Some(Threads::Auto) {
        return Err(Failure::Input(anyhow::anyhow!(
            "--goal chooses the unit count: use it with --threads auto"
        )));
    }
    let budget = match &args.cores_from {
        None => None,
        Some(path) => Some((path, first_budget(path, policy.as_ref())?)),
    };
    let stored = herd_runtime::live::db_path(args.db.as_deref())
        .filter(|p| p.exists())
        .and_then(|p| herd_store::SqliteStore::open(&p).ok());
    let (power, power_label, tolerance) = args.choice.checked(stored.as_ref())?;
    drop(stored);
    let units = match args.threads {
        None => None,
        Some(Threads::Count(n)) => Some(n),
        Some(Threads::Auto) => Some(auto_units(args, &machine, &power, tolerance)),
    };
    // Signals first, so none is lost between spawn and the loop.
    let sig = Signals::install()?;
    let mechanism = args.mechanism.setup()?;
    let (argv, mut opts) = with_threads(&args.cmd, units);
    // Opened before the program starts: the pipe must be there to write to.
    let progress = match &args.progress_from {
        None => None,
        Some(path) => {
            let f = herd_runtime::progress::ProgressFile::open(path)
                .map_err(|e| Failure::Input(anyhow::anyhow!("--progress-from {}: {e}", path.display())))?;
            opts.env
                .push((herd_runtime::progress::ENV.into(), path.display().to_string()));
            Some(f)
        }
    };
    let (child, _) = herd_runtime::live::spawn_with(&argv, &opts)
        .map_err(|e| common::spawn_failure(&e, format!("cannot run '{}'", args.cmd[0])))?;
    let name = std::path::Path::new(&args.cmd[0])
        .file_name()
        .map_or(args.cmd[0].clone(), |n| n.to_string_lossy().into_owned());
    let key = crate::units::program_key(&args.cmd);
    let mut program = Program::new(name.clone(), key.clone(), child.id() as i32, Some(child));
    program.threads_declared = herd_runtime::live::declared_threads(units, &opts.env);
    let world = args
        .looping
        .world(LiveWorld::new(vec![program], Arc::clone(&sig.stop)));
    // Every run learns its program's profile (S1), from what earlier runs stored.
    let (mut session, note) = Session::start(world, Learn::Db(args.db.as_deref()));
    let explain = args.explain;
    if let Some(n) = note.filter(|_| explain) {
        eprintln!("herd: {n}");
    }
    let mechanism = mechanism.attach(session.world());
    if let Some(f) = trace.as_mut() {
        let header = herd_cli::trace::Header::new(&args.policy, &cfg, session.learning_start());
        if let Err(e) = std::io::Write::write_all(
            f,
            format!("{}\n", serde_json::to_string(&header).unwrap_or_default()).as_bytes(),
        ) {
            trace_failed = Some(e);
        }
    }
    if let Some(f) = progress {
        session.world().follow_progress(0, f);
    }
    let (budget_tx, budget_rx) = std::sync::mpsc::channel();
    if let Some((path, cores)) = budget {
        session
            .world()
            .follow_budget(herd_runtime::live::budget::BudgetFile::new(
                path, cores, budget_tx,
            ));
    }
    let mut last_budget = budget.map(|b| b.1);
    let mut last_note: Option<String> = None;
    // The power model's estimate, period by period, from where the tasks ran.
    // And the programs' CPU time those periods saw, to tell what the tail
    // after the last one held.
    let (mut model_energy_j, mut modelled_s, mut seen_cpu_ns) = (0.0, 0.0, 0u64);
    // Only this thread, the loop's, and only for the loop.
    let realtime = args.realtime
        && match herd_runtime::control::set_realtime(10) {
            Ok(()) => true,
            Err(e) => {
                eprintln!(
                    "herd: warning: --realtime: {e}: the loop runs at normal priority (see herd doctor)"
                );
                false
            }
        };
    if realtime {
        session.world().allow_lanes();
    }
    session.run(policy.as_mut(), &machine, &cfg, |view, plan| {
        if let Some(w) = period_power_w(&power, view) {
            let period_s = view.snapshot.period_ns as f64 * 1e-9;
            model_energy_j += w * period_s;
            modelled_s += period_s;
            seen_cpu_ns += view.snapshot.tasks.iter().map(|t| t.obs.cpu_time_ns).sum::<u64>();
        }
        if let Some(f) = trace.as_mut()
            && trace_failed.is_none()
            && let Err(e) = trace_line(f, view, plan)
        {
            trace_failed = Some(e);
        }
        for warning in budget_rx.try_iter() {
            eprintln!("herd: warning: {warning}");
        }
        if explain && view.snapshot.budget_cores != last_budget {
            last_budget = view.snapshot.budget_cores;
            if let Some(k) = last_budget {
                eprintln!("herd: the core budget is now {k}");
            }
        }
        if explain {
            explain_plan(plan, &mut last_note);
        }
    });
    if realtime {
        let _ = herd_runtime::control::set_normal();
    }
    sig.end_held(session.world());
    let mut done = session.finish();
    sig.pass_on(&done.world);
    if let Some(e) = trace_failed.or_else(|| trace.as_mut().and_then(|f| std::io::Write::flush(f).err())) {
        eprintln!("herd: warning: the trace is incomplete: {e}");
    }
    let status = sig.wait(&mut done.world)[0];
    for problem in done.world.progress_problems() {
        eprintln!("herd: warning: {problem}");
    }
    let (wall, herd_cpu, prog_cpu) = (done.wall_s, done.herd_cpu_s, done.programs_cpu_s());
    model_energy_j += tail_energy_j(
        &power,
        &machine,
        wall - modelled_s,
        prog_cpu - seen_cpu_ns as f64 * 1e-9,
    );
    let s = done.world.stats;
    warn_after_live(&s, &policy.name(), "run with --realtime");
    let energy = ModelEnergy {
        label: &power_label,
        joules: model_energy_j,
        over_s: wall.max(modelled_s),
    };
    let summary = summary(
        &name,
        &policy.name(),
        &done,
        (prog_cpu, args.loop_share),
        &mechanism,
        &energy,
    );
    eprintln!("{summary}");
    record_run(
        args,
        &name,
        &policy.name(),
        (wall, prog_cpu, herd_cpu),
        (s.max_threads, units),
        (s.energy_j, Some(model_energy_j)),
        status,
    );
    // The program's status is herd's: its code, or 128 + the signal that killed it, as shells do.
    Ok(match status {
        Some(st) => st
            .code()
            .map_or_else(|| 128 + st.signal().unwrap_or(0) as u8, |c| c as u8),
        None => 1,
    })
}

/// The power model's estimate of the machine's energy over a run.
struct ModelEnergy<'a> {
    /// Which model.
    label: &'a str,
    joules: f64,
    /// The time it covers: the periods observed or the wall time.
    over_s: f64,
}

/// The line `herd run` ends with: what the program and herd used.
fn summary(
    name: &str,
    policy: &str,
    done: &herd_runtime::live::Finished,
    (prog_cpu, loop_share): (f64, f64),
    mechanism: &str,
    energy: &ModelEnergy<'_>,
) -> String {
    let (s, overhead, wall, herd_cpu) = (&done.world.stats, &done.overhead, done.wall_s, done.herd_cpu_s);
    let power_label = energy.label;
    let model_energy_j = energy.joules;
    let mut summary = String::new();
    let _ = write!(
        summary,
        "herd: {name} under {} for {wall:.2} s: {prog_cpu:.2} s CPU, up to {} threads, {} placements{}{}, {} migrations{}{}; \
         herd used {:.1} ms CPU ({:.2}% of the program's), {} decisions at {:.1} us each; {mechanism}",
        policy,
        s.max_threads,
        s.placements,
        if s.failed_placements > 0 {
            format!(" ({} refused)", s.failed_placements)
        } else {
            String::new()
        },
        if s.births_freed > 0 {
            format!(", {} born on a pin and freed at birth", s.births_freed)
        } else {
            String::new()
        },
        s.migrations,
        if s.pauses > 0 {
            format!(", {} pauses", s.pauses)
        } else {
            String::new()
        },
        if s.lane_changes > 0 {
            format!(", {} lane changes", s.lane_changes)
        } else {
            String::new()
        },
        herd_cpu * 1e3,
        if prog_cpu > 0.0 {
            100.0 * herd_cpu / prog_cpu
        } else {
            0.0
        },
        overhead.decisions,
        overhead.decide_ns_mean() / 1e3,
    );
    if overhead.stretched_periods > 0 {
        let _ = write!(
            summary,
            "; {} periods stretched to keep herd's loop under {}% of a CPU (--loop-share)",
            overhead.stretched_periods, loop_share
        );
    }
    if s.threads_from_kernel > 0 {
        let _ = write!(
            summary,
            "; {} thread samples read from herd's eBPF program rather than /proc",
            s.threads_from_kernel
        );
    }
    if let Some(j) = s.energy_j {
        let _ = write!(
            summary,
            "; the machine used {j:.1} J (RAPL, {:.1} W)",
            j / wall.max(1e-9)
        );
    }
    let _ = write!(
        summary,
        "; the power model ({power_label}) estimates {model_energy_j:.1} J ({:.1} W){}",
        // Over the window the energy covers: the periods observed (the first
        // starts when the world does, before `started`) or the wall time.
        model_energy_j / energy.over_s.max(1e-9),
        if s.energy_j.is_none() {
            " (no RAPL here to measure it)"
        } else {
            ""
        }
    );
    if let Some(b) = s.mem_bytes {
        let _ = write!(summary, "; memory traffic {:.2} GB", b as f64 * 1e-9);
    }
    if let Some(m) = s.memory_followed() {
        let _ = write!(summary, "; {m}");
    }
    if let Some(g) = &done.guard {
        let _ = write!(summary, "; {}", g.summary());
    }
    summary
}

/// Says where a plan put each task, its lanes, and its note when it
/// changed (a policy may repeat its note every turn).
fn explain_plan(plan: &herd_policy::Plan, last_note: &mut Option<String>) {
    for (task, placement) in &plan.tasks {
        let line = match placement {
            Placement::Run { cpus, why } => format!("herd: task {task} -> CPUs {cpus}: {why}"),
            Placement::Pause { why } => format!("herd: task {task} paused: {why}"),
        };
        eprintln!("{line}");
    }
    for (task, lane) in &plan.lanes {
        eprintln!("herd: task {task} -> lane {lane:?}");
    }
    if let Some(note) = &plan.note
        && last_note.as_deref() != Some(note.as_ref())
    {
        eprintln!("herd: {note}");
        *last_note = Some(note.to_string());
    }
}

/// The budget `--cores-from` starts with, read before the program starts so
/// a wrong path or content costs no run; and the policy must follow one.
fn first_budget(path: &std::path::Path, policy: &dyn herd_policy::Policy) -> Result<u32, Failure> {
    let bad = |why: String| Failure::Input(anyhow::anyhow!("--cores-from {}: {why}", path.display()));
    if !policy.follows_budget() {
        return Err(bad(format!(
            "{} does not follow a core budget; use pack:palm, pack:tp or pack:tr",
            policy.name()
        )));
    }
    let text = std::fs::read_to_string(path).map_err(|e| bad(e.to_string()))?;
    match herd_runtime::live::budget::parse(&text) {
        Ok(Some(n)) => Ok(n),
        Ok(None) => Err(bad("empty: write the number of cores the program may use".into())),
        Err(why) => Err(bad(why)),
    }
}

/// The command line and environment for `--threads N`: `{threads}` in any
/// argument becomes N, and OpenMP (and the BLAS libraries that honour it)
/// gets OMP_NUM_THREADS=N.
fn with_threads(cmd: &[String], threads: Option<u32>) -> (Vec<String>, herd_runtime::live::SpawnOptions) {
    let mut opts = herd_runtime::live::SpawnOptions::default();
    let Some(n) = threads else {
        return (cmd.to_vec(), opts);
    };
    opts.env.push(("OMP_NUM_THREADS".into(), n.to_string()));
    let argv = cmd
        .iter()
        .map(|a| a.replace("{threads}", &n.to_string()))
        .collect();
    (argv, opts)
}

/// Records the completed run in the profile database. A database problem is
/// a warning: it never changes the program's outcome or herd's exit code.
fn record_run(
    args: &RunArgs,
    name: &str,
    policy: &str,
    (wall_s, cpu_s, herd_cpu_s): (f64, f64, f64),
    (threads, units): (usize, Option<u32>),
    (energy_j, model_energy_j): (Option<f64>, Option<f64>),
    status: Option<std::process::ExitStatus>,
) {
    use herd_store::ProfileStore;
    let Some(path) = herd_runtime::live::db_path(args.db.as_deref()) else {
        eprintln!("herd: warning: no HOME or XDG_DATA_HOME: the run is not recorded (use --db PATH)");
        return;
    };
    let program = crate::units::program_key(&args.cmd);
    let started = crate::common::unix_now_s() - wall_s;
    let record = herd_store::RunRecord {
        program,
        policy: policy.to_string(),
        started_unix_s: started,
        wall_s,
        cpu_s,
        threads: threads as u32,
        exit_code: status.map(|st| st.code().unwrap_or_else(|| 128 + st.signal().unwrap_or(0))),
        herd_cpu_s,
        units,
        energy_j,
        model_energy_j,
    };
    match herd_store::SqliteStore::open(&path).and_then(|mut s| s.record_run(&record)) {
        Ok(_) => {}
        Err(e) => eprintln!("herd: warning: the run of {name} was not recorded: {e}"),
    }
}

/// The power model's energy over a run's tail after its last observed
/// period (`tail_s`), in which the programs used `cpu_s` of CPU that no
/// period saw: that CPU time spread over the tail, one CPU after another.
/// (The last period's power carried over the tail made `herd run -- sleep
/// 0.05` read 109-121 W on an idle machine: its one observed period, at
/// the start, had caught `sleep` starting.)
fn tail_energy_j(power: &herd_model::PowerModel, m: &herd_topo::Machine, tail_s: f64, cpu_s: f64) -> f64 {
    if tail_s <= 0.0 {
        return 0.0;
    }
    let busy_cpus = cpu_s.max(0.0) / tail_s;
    let order: Vec<u32> = m.cpus().iter().map(|c| c.os).collect();
    let frac = |cpu: u32| {
        order
            .iter()
            .position(|&c| c == cpu)
            .map_or(0.0, |i| (busy_cpus - i as f64).clamp(0.0, 1.0))
    };
    power.busy_power_w(m, &frac) * tail_s
}

/// The power model's machine power over the period `view` observed: each
/// CPU busy for the CPU time of the tasks last seen on it. `None` for an
/// empty period.
fn period_power_w(power: &herd_model::PowerModel, view: &herd_policy::View<'_>) -> Option<f64> {
    // A progress-only snapshot covers no time (its period is 0): the next
    // full one covers it, and counting both would count that time twice.
    let period_ns = view.snapshot.period_ns;
    if period_ns == 0 {
        return None;
    }
    let mut busy_ns: std::collections::BTreeMap<u32, u64> = Default::default();
    for t in &view.snapshot.tasks {
        if let Some(cpu) = t.cpu {
            *busy_ns.entry(cpu).or_default() += t.obs.cpu_time_ns;
        }
    }
    let frac = |cpu: u32| busy_ns.get(&cpu).map_or(0.0, |&ns| ns as f64 / period_ns as f64);
    Some(power.busy_power_w(view.machine, &frac))
}

/// `--threads auto`: the unit count the program's recorded runs suggest for
/// `--goal`, or one per CPU when they cannot say yet. Says which and why.
fn auto_units(args: &RunArgs, m: &herd_topo::Machine, power: &herd_model::PowerModel, tolerance: f64) -> u32 {
    let cpus = m.cpus().len() as u32;
    let key = crate::units::program_key(&args.cmd);
    let store = herd_runtime::live::db_path(args.db.as_deref())
        .filter(|p| p.exists())
        .and_then(|p| herd_store::SqliteStore::open(&p).ok());
    let runs = store
        .as_ref()
        .and_then(|s| herd_store::ProfileStore::runs(s, &key).ok())
        .unwrap_or_default();
    let (sigma, measured) = crate::units::smt_sigma(store.as_ref());
    if m.smt_max() > 1 {
        eprintln!(
            "herd: --threads auto: SMT siblings deliver 1 + {sigma:.2} of a core ({})",
            if measured {
                "measured by herd calibrate"
            } else {
                "S0's figure: run herd calibrate to measure it here"
            }
        );
    }
    let curve = herd_plan::units::curve(m, &runs, &args.policy.to_string(), power, tolerance, sigma);
    let goal = args.goal.unwrap_or(Goal::Speed);
    let chosen = match goal {
        Goal::Speed => curve.for_speed,
        Goal::Energy => curve.for_energy,
    };
    match (chosen, curve.serial_fraction) {
        (Some(n), Some(s)) => {
            let p = &curve.predictions[n as usize - 1];
            eprintln!(
                "herd: --threads auto: {n} units for {} (Amdahl fit over {} unit counts: serial fraction {s:.3}; \
                 predicted {:.2}x in {:.1} s at {:.0} W, {:.0} J; `herd db show` has the curve)",
                match goal {
                    Goal::Speed => format!("speed within {}% of the best", args.choice.tolerance),
                    Goal::Energy => "the least energy".to_string(),
                },
                curve.by_units.len(),
                p.speedup,
                p.time_s,
                p.power_w,
                p.energy_j
            );
            n
        }
        _ => {
            eprintln!(
                "herd: --threads auto: no fit for this program yet ({} completed unit counts recorded; \
                 two are needed), so one thread per CPU: {cpus}. Runs at a few counts (--threads 1, 2, ...) teach it.",
                curve.by_units.len()
            );
            cpus
        }
    }
}
