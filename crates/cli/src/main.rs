//! The `herd` command.
//!
//! Exit codes: 0 success; 1 a managed program failed (`batch`; `run`
//! passes its program's own code through); 2 bad usage or bad
//! input (flags, files, specs); 3 herd itself could not work (the machine
//! refused something herd needs). A closed stdout (`herd topo | head`) is
//! not an error.

mod attach_cmd;
mod batch_cmd;
mod calibrate_cmd;
mod db_cmd;
mod doctor_cmd;
mod mechanism;
mod output;
mod place_cmd;
mod policies_cmd;
mod run_cmd;
mod signals;
mod sim_cluster;
mod sim_cmd;
mod sim_learning;
mod slurm_cmd;
mod topo_cmd;
mod units;

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Args, Parser, Subcommand};

/// Contention-aware placement and co-scheduling of threads and programs.
#[derive(Parser, Debug)]
#[command(name = "herd", version, about, long_about = None, propagate_version = true)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Show the machine: packages, NUMA nodes, LLCs, cores, SMT siblings, core kinds.
    Topo(topo_cmd::TopoArgs),
    /// Say what this machine lets herd do (counters, cgroups, PSI, RAPL...) and why not.
    Doctor(doctor_cmd::DoctorArgs),
    /// Compare policies on a simulated machine and workload (a scenario file).
    Sim(sim_cmd::SimArgs),
    /// List every policy with its parameters and defaults.
    Policies(policies_cmd::PoliciesArgs),
    /// Run a program under a policy, placing its threads every period.
    Run(run_cmd::RunArgs),
    /// Run a group of programs under a policy, optionally against plain Linux.
    Batch(batch_cmd::BatchArgs),
    /// Manage an already-running process until it exits or herd is stopped.
    Attach(attach_cmd::AttachArgs),
    /// What the profile database knows: programs, runs, fits, unit choices.
    Db(db_cmd::DbArgs),
    /// Measure this machine's peak memory bandwidth and store it.
    Calibrate(calibrate_cmd::CalibrateArgs),
    /// Choose a cluster node for a new job by S2's NUMA model (or Slurm's order).
    Place(place_cmd::PlaceArgs),
    /// Slurm integration: keep the node-choice table for job_submit.lua fresh.
    Slurm(slurm_cmd::SlurmArgs),
}

/// Where the machine description comes from; this machine by default.
#[derive(Args, Debug, Clone, Default)]
pub struct MachineArgs {
    /// An hwloc XML export, or a directory holding a Linux sys/ and proc/ tree.
    #[arg(long, value_name = "FILE.xml|DIR", conflicts_with = "synthetic")]
    pub input: Option<PathBuf>,
    /// A synthetic machine, e.g. 'package:2 core:4 pu:2' or
    /// 'package:1 core:6 pu:2 capacity:1.0 + core:8 capacity:0.6'.
    #[arg(long, value_name = "SPEC")]
    pub synthetic: Option<String>,
}

impl MachineArgs {
    /// Loads the machine these arguments name.
    pub fn load(&self) -> Result<herd_topo::Machine, Failure> {
        let loaded = match (&self.input, &self.synthetic) {
            (Some(path), _) => herd_topo::Machine::from_path(path),
            (None, Some(spec)) => herd_topo::Machine::synthetic(spec),
            (None, None) => return this_machine(),
        };
        loaded.map_err(|e| Failure::Input(e.into()))
    }
}

/// The machine herd runs on; failing to read it is herd's problem (exit 3).
pub fn this_machine() -> Result<herd_topo::Machine, Failure> {
    herd_topo::Machine::this_machine().map_err(|e| Failure::Internal(e.into()))
}

/// The loop's configuration for a `--period-ms` flag, checked.
pub fn period_config(period_ms: f64) -> Result<herd_engine::Config, Failure> {
    if !(period_ms.is_finite() && period_ms > 0.0) {
        return Err(Failure::Input(anyhow::anyhow!(
            "--period-ms must be a positive number, got {period_ms}"
        )));
    }
    let mut cfg = herd_engine::Config::with_period((period_ms * 1e6) as u64, 0);
    // On a real machine the loop keeps to 5% of one CPU, whatever period a
    // policy asks for (PALM starts at 0.125 ms, which observing and moving
    // 3 threads would turn into half a CPU). On the barrier benchmark with
    // 75 ms phases PALM took 1.04x TR's time at 5% and 1.11x at 20%; with
    // 2 ms phases 1.22x and 1.19x (medians of 10, scripts/s4-barrier.py
    // --sweep [--loop-share 20]): a share that suits every program does not
    // exist, and herd's CPU is the user's. `herd run --loop-share` sets it.
    cfg.loop_share = Some(LIVE_LOOP_SHARE);
    Ok(cfg)
}

/// The share of one CPU herd's loop may take on a real machine.
pub const LIVE_LOOP_SHARE: f64 = 0.05;

/// Why a command failed; decides the exit code.
#[derive(Debug)]
pub enum Failure {
    /// Bad flags, files or specs (exit 2).
    Input(anyhow::Error),
    /// herd could not do its work on this machine (exit 3).
    Internal(anyhow::Error),
}

impl Failure {
    fn code(&self) -> u8 {
        match self {
            Failure::Input(_) => 2,
            Failure::Internal(_) => 3,
        }
    }
}

impl From<std::io::Error> for Failure {
    fn from(e: std::io::Error) -> Self {
        Failure::Internal(e.into())
    }
}

fn main() -> ExitCode {
    // The trampoline that starts batch programs held (see herd_runtime::live).
    let argv: Vec<String> = std::env::args().collect();
    if argv.get(1).map(String::as_str) == Some(herd_runtime::live::HOLD_ARG)
        && argv.get(2).map(String::as_str) == Some("--")
    {
        let err = herd_runtime::live::exec_held(&argv[3..]);
        eprintln!(
            "herd: cannot run '{}': {err}",
            argv.get(3).map_or("", String::as_str)
        );
        return ExitCode::from(127);
    }
    // The guard that thaws and removes herd's cgroups once herd is gone.
    if argv.get(1).map(String::as_str) == Some(herd_runtime::cgroup::GUARD_ARG) {
        return ExitCode::from(herd_runtime::cgroup::guard_main(&argv[2..]) as u8);
    }
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        // clap prints help and version to stdout with exit 0, usage errors to stderr with 2.
        Err(e) => {
            let _ = e.print();
            return ExitCode::from(if e.use_stderr() { 2 } else { 0 });
        }
    };
    // These two exit with their programs' status.
    let managed = match &cli.command {
        Command::Run(args) => Some(run_cmd::run(args)),
        Command::Batch(args) => Some(batch_cmd::run(args)),
        Command::Attach(args) => Some(attach_cmd::run(args)),
        _ => None,
    };
    if let Some(result) = managed {
        return match result {
            Ok(code) => ExitCode::from(code),
            Err(f) => fail(f),
        };
    }
    let result = match &cli.command {
        Command::Topo(args) => topo_cmd::run(args),
        Command::Doctor(args) => doctor_cmd::run(args),
        Command::Sim(args) => sim_cmd::run(args),
        Command::Place(args) => place_cmd::run(args),
        Command::Slurm(args) => slurm_cmd::run(args),
        Command::Policies(args) => policies_cmd::run(args),
        Command::Db(args) => db_cmd::run(args),
        Command::Calibrate(args) => calibrate_cmd::run(args),
        Command::Run(_) | Command::Batch(_) | Command::Attach(_) => unreachable!("handled above"),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(Failure::Internal(e)) if output::is_broken_pipe(&e) => ExitCode::SUCCESS,
        Err(f) => fail(f),
    }
}

fn fail(f: Failure) -> ExitCode {
    let (Failure::Input(e) | Failure::Internal(e)) = &f;
    // One line: the error and its causes, no backtrace.
    eprintln!("herd: {e:#}");
    ExitCode::from(f.code())
}
