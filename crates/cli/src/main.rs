//! The `herd` command.
//!
//! Exit codes: 0 success; 1 a managed program failed (`batch`; `run`
//! passes its program's own code through); 2 bad usage or bad
//! input (flags, files, specs); 3 herd itself could not work (the machine
//! refused something herd needs). A closed stdout (`herd topo | head`) is
//! not an error.

mod attach_cmd;
mod batch_cmd;
mod batch_ledger;
mod calibrate_cmd;
mod common;
mod daemon_client;
mod daemon_cmd;
mod daemon_jobs;
mod daemon_serve;
mod db_cmd;
mod doctor_cmd;
mod mechanism;
mod output;
mod place_cmd;
mod plot_cmd;
mod policies_cmd;
mod replay_cmd;
mod run_cmd;
mod signals;
mod sim_cluster;
mod sim_cmd;
mod sim_learning;
mod slurm_cmd;
mod top_cmd;
mod topo_cmd;
mod units;

use std::process::ExitCode;

use clap::{Parser, Subcommand};

use common::Failure;
// In the library, for the fuzzer; the commands reach it as `crate::daemon_wire`.
use herd_cli::daemon_wire;

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
    /// Draw a figure described in JSON as SVG (for the scripts).
    Plot(plot_cmd::PlotArgs),
    /// Run a program under a policy, placing its threads every period.
    Run(run_cmd::RunArgs),
    /// Run a group of programs under a policy, optionally against plain Linux.
    Batch(batch_cmd::BatchArgs),
    /// Manage an already-running process until it exits or herd is stopped.
    Attach(attach_cmd::AttachArgs),
    /// Manage every workload on this machine by rules (docs/daemon.md); `status` asks a running one.
    Daemon(daemon_cmd::DaemonArgs),
    /// A live view of what herd's daemon manages and of the machine's CPUs.
    Top(top_cmd::TopArgs),
    /// What the profile database knows: programs, runs, fits, unit choices.
    Db(db_cmd::DbArgs),
    /// Measure this machine's peak memory bandwidth and store it.
    Calibrate(calibrate_cmd::CalibrateArgs),
    /// Choose a cluster node for a new job by S2's NUMA model (or Slurm's order).
    Place(place_cmd::PlaceArgs),
    /// Slurm integration: keep the node-choice table for job_submit.lua fresh.
    Slurm(slurm_cmd::SlurmArgs),
    /// Replay a run's trace through its policy: does it decide the same? (exit 1 if not)
    Replay(replay_cmd::ReplayArgs),
}

fn main() -> ExitCode {
    // The trampoline that starts batch programs held (see herd_runtime::live).
    let argv: Vec<String> = std::env::args().collect();
    if argv.get(1).map(String::as_str) == Some(herd_runtime::live::HOLD_ARG)
        && argv.get(3).map(String::as_str) == Some("--")
    {
        let fd = argv[2].parse().unwrap_or(-1);
        let err = herd_runtime::live::exec_held(fd, &argv[4..]);
        eprintln!(
            "herd: cannot run '{}': {err}",
            argv.get(4).map_or("", String::as_str)
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
    // herd keeps descriptors per watched thread: room for thousands of
    // threads, where the hard limit allows (its programs get the old
    // soft limit back, see herd_runtime::fds). Without it, herd watches
    // with fewer kept files and says so after the run.
    let _ = herd_runtime::fds::raise();
    // Other herd instances know this one by its process name (`comm`), which
    // the kernel takes from the binary's file name: a copy installed as
    // `herd-dev` would be invisible to them, placed over, and its cgroups
    // taken for a dead herd's and released (`herd_runtime::peers`).
    herd_runtime::keeper::name_herd();
    // These exit with their programs' status.
    let managed = match &cli.command {
        Command::Run(args) => Some(run_cmd::run(args)),
        Command::Replay(args) => Some(replay_cmd::run(args).map(|same| u8::from(!same))),
        Command::Batch(args) => Some(batch_cmd::run(args)),
        Command::Attach(args) => Some(attach_cmd::run(args)),
        Command::Daemon(args) => Some(daemon_cmd::run(args)),
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
        Command::Plot(args) => plot_cmd::run(args),
        Command::Db(args) => db_cmd::run(args),
        Command::Calibrate(args) => calibrate_cmd::run(args),
        Command::Top(args) => top_cmd::run(args),
        Command::Run(_)
        | Command::Batch(_)
        | Command::Attach(_)
        | Command::Daemon(_)
        | Command::Replay(_) => {
            unreachable!("handled above")
        }
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
