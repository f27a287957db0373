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
use herd_policy::{Estimates, Placement};
use herd_runtime::live::{LiveWorld, Program};

use crate::Failure;
use crate::meter::WallMeter;
use crate::signals::Signals;

/// Arguments of `herd run`.
#[derive(Args, Debug)]
pub struct RunArgs {
    /// The policy, NAME[:key=value,...] (see `herd policies`).
    #[arg(long, default_value = "linux")]
    policy: String,
    /// Decision period in milliseconds.
    #[arg(long, default_value_t = 100.0)]
    period_ms: f64,
    /// Print each placement decision and its reason on stderr.
    #[arg(long)]
    explain: bool,
    /// Run the program with N threads: sets OMP_NUM_THREADS=N and replaces
    /// `{threads}` in its arguments.
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..))]
    threads: Option<u32>,
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

/// `herd run`; returns the exit code to leave with (the program's).
pub fn run(args: &RunArgs) -> Result<u8, Failure> {
    let cfg = crate::period_config(args.period_ms)?;
    let mut policy = herd_policy::build(&args.policy).map_err(|e| Failure::Input(e.into()))?;
    let machine = crate::this_machine()?;
    // Signals first, so none is lost between spawn and the loop.
    let sig = Signals::install()?;
    let mechanism = args.mechanism.setup()?;
    let (argv, opts) = with_threads(&args.cmd, args.threads);
    let child = herd_runtime::live::spawn_with(&argv, &opts)
        .map_err(|e| Failure::Input(anyhow::anyhow!("cannot run '{}': {e}", args.cmd[0])))?;
    let name = std::path::Path::new(&args.cmd[0])
        .file_name()
        .map_or(args.cmd[0].clone(), |n| n.to_string_lossy().into_owned());
    let program = Program::new(name.clone(), args.cmd.join(" "), child.id() as i32, Some(child));
    let mut world = LiveWorld::new(vec![program], Arc::clone(&sig.stop));
    let mechanism = mechanism.attach(&mut world);
    let started = std::time::Instant::now();
    let herd_cpu_before = crate::meter::cpu_seconds(libc::RUSAGE_SELF);
    let mut meter = WallMeter::default();
    let explain = args.explain;
    let overhead = herd_engine::run(
        policy.as_mut(),
        &machine,
        &Estimates::new(),
        &mut world,
        &mut meter,
        &cfg,
        |view, plan| {
            if !explain {
                return;
            }
            for (task, placement) in &plan.tasks {
                let line = match placement {
                    Placement::Run { cpus, why } => format!("herd: task {task} -> CPUs {cpus}: {why}"),
                    Placement::Pause { why } => format!("herd: task {task} paused: {why}"),
                };
                eprintln!("{line}");
            }
            if view.decision == 0 {
                if let Some(note) = &plan.note {
                    eprintln!("herd: {note}");
                }
            }
        },
    );
    world.restore();
    sig.pass_on(&world);
    let status = world.wait_all()[0];
    let wall = started.elapsed().as_secs_f64();
    let herd_cpu = crate::meter::cpu_seconds(libc::RUSAGE_SELF) - herd_cpu_before;
    let prog_cpu = crate::meter::cpu_seconds(libc::RUSAGE_CHILDREN);
    let s = world.stats;
    let mut summary = String::new();
    let _ = write!(
        summary,
        "herd: {name} under {} for {wall:.2} s: {prog_cpu:.2} s CPU, up to {} threads, {} placements{}, {} migrations{}; \
         herd used {:.1} ms CPU ({:.2}% of the program's), {} decisions at {:.1} us each; {mechanism}",
        policy.name(),
        s.max_threads,
        s.placements,
        if s.failed_placements > 0 {
            format!(" ({} refused)", s.failed_placements)
        } else {
            String::new()
        },
        s.migrations,
        if s.pauses > 0 {
            format!(", {} pauses", s.pauses)
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
    if let Some(j) = s.energy_j {
        let _ = write!(
            summary,
            "; the machine used {j:.1} J (RAPL, {:.1} W)",
            j / wall.max(1e-9)
        );
    }
    if let Some(b) = s.mem_bytes {
        let _ = write!(summary, "; memory traffic {:.2} GB", b as f64 * 1e-9);
    }
    eprintln!("{summary}");
    record_run(
        args,
        &name,
        &policy.name(),
        (wall, prog_cpu, herd_cpu),
        s.max_threads,
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
    threads: usize,
    status: Option<std::process::ExitStatus>,
) {
    use herd_store::ProfileStore;
    let path = args.db.clone().or_else(|| {
        herd_store::default_path(
            std::env::var("XDG_DATA_HOME").ok().as_deref(),
            std::env::var("HOME").ok().as_deref(),
        )
    });
    let Some(path) = path else {
        eprintln!("herd: warning: no HOME or XDG_DATA_HOME: the run is not recorded (use --db PATH)");
        return;
    };
    // The program's key: its executable as found, and its arguments.
    let exe = herd_runtime::live::resolve(&args.cmd[0], None)
        .map_or(args.cmd[0].clone(), |p| p.display().to_string());
    let program = std::iter::once(exe)
        .chain(args.cmd[1..].iter().cloned())
        .collect::<Vec<_>>()
        .join(" ");
    let started = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0.0, |d| d.as_secs_f64())
        - wall_s;
    let record = herd_store::RunRecord {
        program,
        policy: policy.to_string(),
        started_unix_s: started,
        wall_s,
        cpu_s,
        threads: threads as u32,
        exit_code: status.map(|st| st.code().unwrap_or_else(|| 128 + st.signal().unwrap_or(0))),
        herd_cpu_s,
    };
    match herd_store::SqliteStore::open(&path).and_then(|mut s| s.record_run(&record)) {
        Ok(_) => {}
        Err(e) => eprintln!("herd: warning: the run of {name} was not recorded: {e}"),
    }
}
