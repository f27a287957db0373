//! `herd place`: which cluster node a new job should run on (S2), from a
//! description of the nodes and what runs on them.
//!
//! Also the pieces `herd slurm watch` shares: how a job's memory traffic
//! is found (a figure, a hint, the profile database, or S2's estimate from
//! the nearest cluster of past programs) and how nodes become the model's
//! `NodeState`s.

use std::fmt::Write;
use std::path::{Path, PathBuf};

use anyhow::anyhow;
use clap::Args;
use herd_cli::files::ClusterFile;
use herd_model::numa;
use herd_plan::character::{Traffic, character_of, numa_cpus};
use herd_plan::node::{JobRequest, LayoutRequest, NodeState, Selector};
use herd_policy::{Level, numa_distances};
use herd_store::ProfileStore;
use herd_topo::Machine;

use crate::common::Failure;
use crate::output;

/// Arguments of `herd place`.
#[derive(Args, Debug)]
pub struct PlaceArgs {
    /// The cluster: its nodes and the jobs running on them (TOML; see
    /// docs/place.md).
    #[arg(value_name = "CLUSTER.toml")]
    cluster: PathBuf,
    /// Threads of the new job (one CPU each).
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..))]
    threads: u32,
    /// How its threads spread over a node's NUMA nodes.
    #[arg(long, value_enum, default_value = "auto")]
    layout: LayoutArg,
    /// Its memory traffic alone, in GB/s.
    #[arg(long, value_name = "GBPS", conflicts_with_all = ["hint", "program"])]
    bw_gbps: Option<f64>,
    /// Its memory intensity, when no figure is known.
    #[arg(long, value_enum, conflicts_with = "program")]
    hint: Option<HintArg>,
    /// Its program key (executable and arguments): traffic from the profile
    /// database, else S2's estimate from the programs it resembles.
    #[arg(long, value_name = "KEY")]
    program: Option<String>,
    /// Share of its accesses to data all its threads share, in [0, 1].
    #[arg(long, default_value_t = 0.5, value_name = "F")]
    shared_fraction: f64,
    /// The node-selection policy.
    #[arg(long, default_value = "numa:model", value_name = "NAME")]
    selector: String,
    /// The profile database (default: $XDG_DATA_HOME/herd/herd.db).
    #[arg(long, value_name = "PATH")]
    db: Option<PathBuf>,
    /// Print JSON instead of a table.
    #[arg(long)]
    json: bool,
}

/// `--layout`.
#[derive(clap::ValueEnum, Debug, Clone, Copy)]
pub enum LayoutArg {
    /// Spread over the NUMA nodes.
    Scatter,
    /// As few NUMA nodes as possible.
    Compact,
    /// Whichever the model predicts faster.
    Auto,
}

impl From<LayoutArg> for LayoutRequest {
    fn from(l: LayoutArg) -> Self {
        match l {
            LayoutArg::Scatter => LayoutRequest::Scatter,
            LayoutArg::Compact => LayoutRequest::Compact,
            LayoutArg::Auto => LayoutRequest::Auto,
        }
    }
}

/// `--hint`.
#[derive(clap::ValueEnum, Debug, Clone, Copy)]
pub enum HintArg {
    /// Memory-bound.
    High,
    /// Some memory traffic.
    Medium,
    /// Compute-bound.
    Low,
}

impl From<HintArg> for Level {
    fn from(h: HintArg) -> Self {
        match h {
            HintArg::High => Level::High,
            HintArg::Medium => Level::Medium,
            HintArg::Low => Level::Low,
        }
    }
}

/// Traffic figures the profile database holds: GB/s alone per program,
/// from its learned memory requests and solo time.
pub fn known_traffic(db: Option<&Path>) -> Vec<(String, f64)> {
    let Some(path) = herd_runtime::live::db_path(db).filter(|p| p.exists()) else {
        return Vec::new();
    };
    let Ok(store) = herd_store::SqliteStore::open(&path) else {
        return Vec::new();
    };
    let keys: Vec<String> = store
        .programs()
        .map(|v| v.into_iter().map(|(k, _)| k).collect())
        .unwrap_or_default();
    let profiles = store
        .profiles(keys.iter().map(String::as_str))
        .unwrap_or_default();
    profiles
        .into_iter()
        .filter_map(|(k, p)| {
            let gbps = p.mem_requests? * herd_model::params::LINE_BYTES / p.solo_time_s? * 1e-9;
            (gbps.is_finite() && gbps > 0.0).then_some((k, gbps))
        })
        .collect()
}

/// A cluster file loaded: its nodes, the database's traffic figures, and
/// where each running job's traffic came from.
struct Loaded {
    nodes: Vec<NodeState>,
    known: Vec<(String, f64)>,
    notes: Vec<String>,
}

fn load_cluster(path: &Path, db: Option<&Path>) -> Result<Loaded, Failure> {
    let input = |why: String| Failure::Input(anyhow!("{}: {why}", path.display()));
    let text = std::fs::read_to_string(path).map_err(|e| input(e.to_string()))?;
    let file = ClusterFile::parse(&text).map_err(|e| match e.line {
        Some(l) => input(format!("line {l}: {}", e.why)),
        None => input(e.why),
    })?;
    let machine = Machine::synthetic(&file.machine).map_err(|e| input(format!("machine: {e}")))?;
    file.model
        .validate(&machine)
        .map_err(|(f, why)| input(format!("model.{f}: {why}")))?;
    let mem = file.model.mem_system(&machine);
    let known = known_traffic(db);
    let cpus = numa_cpus(&machine);
    let mut notes = Vec::new();
    let mut nodes = Vec::new();
    for n in &file.node {
        let mut free = cpus.clone();
        let mut running = Vec::new();
        for j in &n.job {
            let what = format!("node {} job {}", n.name, j.name);
            if j.threads_per_numa.len() != cpus.len() {
                return Err(input(format!(
                    "{what}: threads_per_numa has {} entries, a node has {} NUMA nodes",
                    j.threads_per_numa.len(),
                    cpus.len()
                )));
            }
            for (f, t) in free.iter_mut().zip(&j.threads_per_numa) {
                *f = f
                    .checked_sub(*t)
                    .ok_or_else(|| input(format!("{what}: more threads than the node's CPUs")))?;
            }
            let traffic = match (j.bw_gbps, j.hint, &j.program) {
                (Some(g), None, None) => Traffic::Gbps(g),
                (None, Some(h), None) => Traffic::Hint(h),
                (None, None, Some(p)) => Traffic::Program(p.clone()),
                _ => {
                    return Err(input(format!(
                        "{what}: give exactly one of bw_gbps, hint, program"
                    )));
                }
            };
            let (character, source) =
                character_of(&traffic, &mem, &j.threads_per_numa, j.shared_fraction, &known)
                    .map_err(|e| input(format!("{what}: {e}")))?;
            notes.push(format!("{what}: {source}"));
            running.push(numa::Placed {
                character,
                threads_per_node: j.threads_per_numa.clone(),
                memory: Vec::new(),
            });
        }
        nodes.push(NodeState {
            name: n.name.clone(),
            mem: mem.clone(),
            free_per_numa: free,
            distances: numa_distances(&machine),
            running,
        });
    }
    if nodes.is_empty() {
        return Err(input("no [[node]]".into()));
    }
    Ok(Loaded { nodes, known, notes })
}

/// `herd place`.
pub fn run(args: &PlaceArgs) -> Result<(), Failure> {
    let selector = Selector::parse(&args.selector).ok_or_else(|| {
        let known: Vec<&str> = Selector::ALL.iter().map(|(_, n, _)| *n).collect();
        Failure::Input(anyhow!(
            "unknown selector '{}' (known: {})",
            args.selector,
            known.join(", ")
        ))
    })?;
    if !(0.0..=1.0).contains(&args.shared_fraction) {
        return Err(Failure::Input(anyhow!("--shared-fraction must be in [0, 1]")));
    }
    let traffic = match (args.bw_gbps, args.hint, &args.program) {
        (Some(g), _, _) if g.is_finite() && g > 0.0 => Traffic::Gbps(g),
        (Some(g), _, _) => return Err(Failure::Input(anyhow!("--bw-gbps must be positive, got {g}"))),
        (None, Some(h), _) => Traffic::Hint(h.into()),
        (None, None, Some(p)) => Traffic::Program(p.clone()),
        (None, None, None) => {
            return Err(Failure::Input(anyhow!(
                "say how memory-hungry the job is: --bw-gbps, --hint or --program"
            )));
        }
    };
    let Loaded { nodes, known, notes } = load_cluster(&args.cluster, args.db.as_deref())?;
    // The new job's characteristics, as it would run alone scattered on an
    // empty node of this kind.
    let capacity = nodes[0].capacity_per_numa();
    let alone = numa::scatter(args.threads, &capacity).ok_or_else(|| {
        Failure::Input(anyhow!(
            "--threads {} is more than a node's {} CPUs",
            args.threads,
            capacity.iter().sum::<u32>()
        ))
    })?;
    let (character, source) = character_of(&traffic, &nodes[0].mem, &alone, args.shared_fraction, &known)
        .map_err(|e| Failure::Input(anyhow!("the new job: {e}")))?;
    let job = JobRequest {
        threads: args.threads,
        layout: args.layout.into(),
        character,
    };
    let choice = selector.choose(&nodes, &job);
    if args.json {
        output::print_json(&serde_json::json!({
            "selector": selector.name(),
            "traffic": source,
            "running": notes,
            "choice": choice,
        }))?;
    } else {
        let mut s = String::new();
        let _ = writeln!(s, "new job: {} threads, traffic {source}", args.threads);
        for n in &notes {
            let _ = writeln!(s, "  {n}");
        }
        let _ = writeln!(
            s,
            "{:<12} {:>5} {:>10} {:>12} {:>10}  layout",
            "node", "fits", "T_cont/T_clean", "slows others", "threads"
        );
        for sc in &choice.scores {
            let _ = writeln!(
                s,
                "{:<12} {:>5} {:>14} {:>12} {:>10}  {}",
                sc.name,
                if sc.fits { "yes" } else { "no" },
                sc.slowdown_ratio.map_or("-".into(), |r| format!("{r:.3}")),
                sc.harm_ratio
                    .map_or("-".into(), |h| format!("{:+.1}%", (h - 1.0) * 100.0)),
                format!("{:?}", sc.threads_per_numa),
                sc.layout
            );
        }
        let _ = writeln!(s, "{}: {}", selector.name(), choice.reason);
        output::print(&s)?;
    }
    // No node with room is an answer, not a failure: exit 0, and the
    // reason (and JSON's null node) says so.
    Ok(())
}
