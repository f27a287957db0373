//! `herd slurm watch`: keeps the prediction table that Slurm's
//! `job_submit.lua` (integrations/slurm/) reads, from `sinfo` and `squeue`
//! and the profile database.
//!
//! The Lua script runs inside slurmctld under its locks, so it must not
//! call out; all the work is here. Each refresh asks Slurm which nodes
//! exist and what runs where, turns each running job into S2's
//! characteristics (from its `herd:KEY` comment: a hint or a program key;
//! `--unknown` for jobs without one), and for every key and thread count
//! decides with `numa:model`:
//! - `require NODE` when the node with the least predicted T_cont/T_clean
//!   has room now;
//! - `prefer NODE` when that node is full (a soft preference, so the job
//!   need not wait for it);
//! - `any` when no node is predicted more than `--threshold` better than
//!   another, so a compute job's placement does not depend on memory load.
//!
//! The table is written to a temporary file beside it and renamed into
//! place, so the script never reads half of one.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use anyhow::anyhow;
use clap::{Args, Subcommand};
use herd_model::MemSystem;
use herd_model::numa::{self, Placed};
use herd_plan::character::{Traffic, character_of, numa_cpus, s2_model};
use herd_plan::node::{JobRequest, LayoutRequest, NodeState};
use herd_plan::slurm::{decide, free_per_numa};
use herd_policy::Level;
use herd_topo::Machine;

use crate::common::Failure;
use crate::place_cmd::{HintArg, known_traffic};
use herd_policy::numa_distances;

/// Arguments of `herd slurm`.
#[derive(Args, Debug)]
pub struct SlurmArgs {
    #[command(subcommand)]
    command: SlurmCommand,
}

#[derive(Subcommand, Debug)]
enum SlurmCommand {
    /// Keep the prediction table for integrations/slurm/job_submit.lua fresh.
    Watch(WatchArgs),
}

/// Arguments of `herd slurm watch`.
#[derive(Args, Debug)]
pub struct WatchArgs {
    /// The table to write (the Lua script reads $HERD_SLURM_TABLE).
    #[arg(long, value_name = "PATH", default_value = "/var/lib/herd/slurm-table")]
    table: PathBuf,
    /// Write the table once and exit.
    #[arg(long)]
    once: bool,
    /// Seconds between refreshes.
    #[arg(long, default_value_t = 10.0, value_name = "S")]
    interval_s: f64,
    /// Every node's machine, as a synthetic spec (default: this machine).
    #[arg(long, value_name = "SPEC")]
    machine: Option<String>,
    /// Memory bandwidth a node's NUMA node sustains, in GB/s (default: what
    /// `herd calibrate` stored, shared over the NUMA nodes, else herd's
    /// default).
    #[arg(long, value_name = "GBPS")]
    node_bw_gbps: Option<f64>,
    /// How to treat running jobs without a herd comment.
    #[arg(long, value_enum, default_value = "medium")]
    unknown: HintArg,
    /// A program key to put in the table besides the hints and the keys of
    /// running jobs (repeatable).
    #[arg(long = "key", value_name = "KEY")]
    keys: Vec<String>,
    /// Least spread of predicted T_cont/T_clean across nodes for herd to
    /// steer a job; below it Slurm decides.
    #[arg(long, default_value_t = 0.01, value_name = "RATIO")]
    threshold: f64,
    /// The profile database (default: $XDG_DATA_HOME/herd/herd.db).
    #[arg(long, value_name = "PATH")]
    db: Option<PathBuf>,
}

/// `herd slurm`.
pub fn run(args: &SlurmArgs) -> Result<(), Failure> {
    match &args.command {
        SlurmCommand::Watch(w) => watch(w),
    }
}

fn watch(args: &WatchArgs) -> Result<(), Failure> {
    if !(args.interval_s.is_finite() && args.interval_s > 0.0) {
        return Err(Failure::Input(anyhow!("--interval-s must be a positive number")));
    }
    if !(args.threshold.is_finite() && args.threshold >= 0.0) {
        return Err(Failure::Input(anyhow!("--threshold must be a number >= 0")));
    }
    let machine = match &args.machine {
        Some(spec) => Machine::synthetic(spec).map_err(|e| Failure::Input(anyhow!("--machine: {e}")))?,
        None => crate::common::this_machine()?,
    };
    let mut model = s2_model();
    let calibrated = herd_runtime::live::db_path(args.db.as_deref())
        .filter(|p| p.exists())
        .and_then(|p| herd_store::SqliteStore::open(&p).ok())
        .and_then(|s| s.calibration(herd_store::PEAK_BTR).ok().flatten());
    match (args.node_bw_gbps, calibrated) {
        (Some(g), _) => model.node_bw_gbps = g,
        // Transactions per µs x 64 B = bytes per µs; / 1000 = GB/s.
        (None, Some(c)) => {
            model.node_bw_gbps =
                c.value * herd_model::params::LINE_BYTES / 1000.0 / machine.numa_nodes().len() as f64
        }
        (None, None) => {}
    }
    model
        .validate(&machine)
        .map_err(|(f, why)| Failure::Input(anyhow!("{f}: {why}")))?;
    let mem = model.mem_system(&machine);
    let signals = crate::signals::Signals::install()?;
    loop {
        match refresh(args, &machine, &mem) {
            Ok(summary) => eprintln!("herd: {}: {summary}", args.table.display()),
            Err(e) if args.once => return Err(e),
            // Keep the last table: it goes stale and the script ignores it.
            Err(e) => eprintln!(
                "herd: warning: refresh failed, table left as it was: {}",
                failure_text(&e)
            ),
        }
        if args.once {
            return Ok(());
        }
        let deadline = std::time::Instant::now() + Duration::from_secs_f64(args.interval_s);
        while std::time::Instant::now() < deadline {
            if signals.received().is_some() {
                return Ok(());
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    }
}

fn failure_text(f: &Failure) -> String {
    match f {
        Failure::Input(e) | Failure::Internal(e) => format!("{e:#}"),
    }
}

/// Runs a Slurm command; its stdout.
fn slurm(cmd: &str, args: &[&str]) -> Result<String, Failure> {
    let out = Command::new(cmd)
        .args(args)
        .output()
        .map_err(|e| Failure::Internal(anyhow!("{cmd}: {e} (is Slurm's client installed and on PATH?)")))?;
    if !out.status.success() {
        return Err(Failure::Internal(anyhow!(
            "{cmd} {}: {}",
            args.join(" "),
            String::from_utf8_lossy(&out.stderr).trim()
        )));
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

/// A job Slurm runs, as `squeue` shows it.
struct SlurmJob {
    nodes: Vec<String>,
    cpus: u32,
    comment: String,
}

fn hostnames(list: &str) -> Result<Vec<String>, Failure> {
    if !list.contains(['[', ',']) {
        return Ok(vec![list.to_string()]);
    }
    Ok(slurm("scontrol", &["show", "hostnames", list])?
        .lines()
        .map(str::to_string)
        .collect())
}

/// The traffic a comment names: `herd:hint=LEVEL` or `herd:KEY`.
fn traffic_of(comment: &str, unknown: Level) -> (String, Traffic) {
    match comment.strip_prefix("herd:") {
        Some("hint=high") => ("hint=high".into(), Traffic::Hint(Level::High)),
        Some("hint=medium") => ("hint=medium".into(), Traffic::Hint(Level::Medium)),
        Some("hint=low") => ("hint=low".into(), Traffic::Hint(Level::Low)),
        Some(key) if !key.is_empty() => (key.to_string(), Traffic::Program(key.to_string())),
        _ => (String::new(), Traffic::Hint(unknown)),
    }
}

/// One refresh: asks Slurm, decides, writes the table; returns a summary.
fn refresh(args: &WatchArgs, machine: &Machine, mem: &MemSystem) -> Result<String, Failure> {
    let capacity = numa_cpus(machine);
    let node_cpus: u32 = capacity.iter().sum();
    // Nodes: name|alloc/idle/other/total. A node in several partitions is
    // listed once per partition.
    let mut names: Vec<(String, u32)> = Vec::new();
    for line in slurm("sinfo", &["-N", "-h", "-o", "%N|%C"])?.lines() {
        let Some((name, cpus)) = line.split_once('|') else {
            continue;
        };
        let idle = cpus.split('/').nth(1).and_then(|v| v.parse().ok()).unwrap_or(0);
        if !names.iter().any(|(n, _)| n == name) {
            names.push((name.to_string(), idle));
        }
    }
    if names.is_empty() {
        return Err(Failure::Internal(anyhow!("sinfo lists no nodes")));
    }
    let mut jobs = Vec::new();
    for line in slurm("squeue", &["-h", "-t", "R", "-o", "%i|%N|%C|%k"])?.lines() {
        let f: Vec<&str> = line.splitn(4, '|').collect();
        if f.len() < 4 {
            continue;
        }
        jobs.push(SlurmJob {
            nodes: hostnames(f[1])?,
            cpus: f[2].parse().unwrap_or(1),
            comment: if f[3] == "(null)" {
                String::new()
            } else {
                f[3].to_string()
            },
        });
    }
    let known = known_traffic(args.db.as_deref());
    let unknown: Level = args.unknown.into();
    let mut keys: Vec<String> = ["hint=high", "hint=medium", "hint=low"]
        .map(String::from)
        .to_vec();
    let mut nodes: Vec<NodeState> = Vec::new();
    for (name, idle) in &names {
        let mut running = Vec::new();
        for j in jobs.iter().filter(|j| j.nodes.contains(name)) {
            let threads = (j.cpus / j.nodes.len().max(1) as u32).clamp(1, node_cpus);
            let placement = numa::scatter(threads, &capacity).expect("clamped to the node's CPUs");
            let (key, traffic) = traffic_of(&j.comment, unknown);
            if !key.is_empty() && !keys.contains(&key) {
                keys.push(key);
            }
            let (character, _) = character_of(&traffic, mem, &placement, 0.5, &known)
                .map_err(|e| Failure::Internal(anyhow!("a job on {name}: {e}")))?;
            running.push(Placed {
                character,
                threads_per_node: placement,
                memory: Vec::new(),
            });
        }
        nodes.push(NodeState {
            name: name.clone(),
            mem: mem.clone(),
            free_per_numa: free_per_numa(&capacity, &running, *idle),
            distances: numa_distances(machine),
            running,
        });
    }
    for k in &args.keys {
        if !keys.contains(k) {
            keys.push(k.clone());
        }
    }
    let mut buckets: Vec<u32> = std::iter::successors(Some(1u32), |t| Some(t * 2))
        .take_while(|t| *t < node_cpus)
        .collect();
    buckets.push(node_cpus);
    let now_s = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    let mut table = format!("herd-slurm-table\t1\nwritten\t{now_s}\n");
    let roomy: Vec<NodeState> = nodes.iter().map(NodeState::with_room).collect();
    let mut steered = 0;
    for key in &keys {
        let (_, traffic) = traffic_of(&format!("herd:{key}"), unknown);
        for &threads in &buckets {
            let alone = numa::scatter(threads, &capacity).expect("a bucket fits a node");
            let Ok((character, _)) = character_of(&traffic, mem, &alone, 0.5, &known) else {
                continue;
            };
            let job = JobRequest {
                threads,
                layout: LayoutRequest::Scatter,
                character,
            };
            let (action, node, why) = decide(&nodes, &roomy, &job, args.threshold);
            steered += usize::from(action != "any");
            let _ = writeln!(table, "place\t{key}\t{threads}\t{action}\t{node}\t{why}");
        }
    }
    write_atomically(&args.table, &table)
        .map_err(|e| Failure::Internal(anyhow!("{}: {e}", args.table.display())))?;
    Ok(format!(
        "{} nodes, {} running jobs, {} keys x {} thread counts, {steered} steered",
        nodes.len(),
        jobs.len(),
        keys.len(),
        buckets.len()
    ))
}

fn write_atomically(path: &Path, text: &str) -> std::io::Result<()> {
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir)?;
    }
    let tmp = path.with_extension(format!("tmp.{}", std::process::id()));
    std::fs::write(&tmp, text)?;
    std::fs::rename(&tmp, path)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn comments_name_hints_programs_or_nothing() {
        assert_eq!(
            traffic_of("herd:hint=high", Level::Low).1,
            Traffic::Hint(Level::High)
        );
        assert_eq!(traffic_of("herd:/opt/sim --big", Level::Low).0, "/opt/sim --big");
        assert_eq!(
            traffic_of("my own note", Level::Medium),
            (String::new(), Traffic::Hint(Level::Medium))
        );
        assert_eq!(traffic_of("herd:", Level::Low).1, Traffic::Hint(Level::Low));
    }

    #[test]
    fn free_cpus_follow_slurms_idle_count() {
        assert_eq!(free_per_numa(&[8, 8], &[], 16), vec![8, 8]);
        assert_eq!(free_per_numa(&[8, 8], &[], 10), vec![5, 5]);
        assert_eq!(free_per_numa(&[1, 1], &[], 0), vec![0, 0]);
    }
}
