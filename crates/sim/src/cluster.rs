//! Cluster-scale simulation (S2): a stream of multithreaded jobs over many
//! nodes, each node's jobs slowed by S2's NUMA queueing model, and the node
//! chosen for every job by a node-selection policy.
//!
//! A node is a machine from a synthetic spec with the scenario's memory
//! model. A job has threads, a layout, and two measurable figures: its run
//! time alone on an empty node and its memory traffic then. From them the
//! loader derives S2's characteristics (beta and accesses per thread) by
//! inverting the model, so a job is written in what one would measure.
//!
//! Time moves from event to event (an arrival or a completion). Between
//! events every running job progresses at the rate the model predicts for
//! its node's current mix, re-solved only for a node whose mix changed.
//! Jobs wait in one first-in-first-out queue (no backfill) when the head
//! fits nowhere, as a plain Slurm partition does.
//!
//! Compared placements: the selectors of `herd_policy::node` (`slurm`,
//! `least-loaded`, `numa:model`), and two references from S2's experiment:
//! `one-per-node` (every job gets an empty node of its own: as many nodes
//! as jobs) and `worst` (the jobs waiting at once are sorted by memory
//! traffic, heaviest first, and packed first-fit, so the most
//! memory-intensive jobs share nodes).

use std::collections::{BTreeMap, VecDeque};

use herd_model::numa::{self, Character, Placed};
use herd_model::{MemSystem, ModelParams};
use herd_plan::ClusterPlacement;
use herd_plan::node::{JobRequest, LayoutRequest, NodeState, Selector};
use herd_policy::Rng;
use herd_policy::numa_distances;
use herd_topo::Machine;
use serde::{Deserialize, Serialize};

use crate::scenario::{Count, Locate, NonNegative, Positive, ScenarioError};

/// The file as written.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
struct ClusterFile {
    name: Option<String>,
    #[serde(default = "default_selectors")]
    selectors: Vec<String>,
    cluster: toml::Spanned<ClusterSpec>,
    #[serde(default)]
    model: ModelParams,
    #[serde(default)]
    job: Vec<toml::Spanned<JobSpec>>,
    stream: Option<toml::Spanned<StreamSpec>>,
}

fn default_selectors() -> Vec<String> {
    vec!["slurm".into(), "least-loaded".into(), "numa:model".into()]
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
struct ClusterSpec {
    nodes: Count,
    machine: String,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
struct JobSpec {
    name: String,
    threads: Count,
    #[serde(default = "scatter")]
    layout: LayoutRequest,
    solo_time_s: Positive,
    bw_gbps: Positive,
    #[serde(default = "half")]
    shared_fraction: NonNegative,
    #[serde(default = "zero")]
    arrival_s: NonNegative,
    #[serde(default = "one")]
    copies: Count,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
struct StreamSpec {
    jobs: Count,
    interarrival_s: Positive,
    #[serde(default = "one_u64")]
    seed: u64,
    threads: Vec<Count>,
    solo_time_s: [Positive; 2],
    bw_gbps: [Positive; 2],
    #[serde(default = "half")]
    shared_fraction: NonNegative,
    #[serde(default = "scatter")]
    layout: LayoutRequest,
}

fn scatter() -> LayoutRequest {
    LayoutRequest::Scatter
}
fn half() -> NonNegative {
    NonNegative(0.5)
}
fn zero() -> NonNegative {
    NonNegative(0.0)
}
fn one() -> Count {
    Count(1)
}
fn one_u64() -> u64 {
    1
}

/// One job, with the characteristics derived from its figures.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ClusterJob {
    /// Its name.
    pub name: String,
    /// Threads.
    pub threads: u32,
    /// Layout request.
    pub layout: LayoutRequest,
    /// Arrival time.
    pub arrival_s: f64,
    /// Run time alone on an empty node.
    pub solo_time_s: f64,
    /// Memory traffic alone.
    pub bw_gbps: f64,
    /// S2's characteristics, derived.
    pub character: Character,
}

/// A loaded cluster scenario.
#[derive(Debug, Clone)]
pub struct ClusterScenario {
    /// Name for reports.
    pub name: String,
    /// Placements to compare.
    pub selectors: Vec<ClusterPlacement>,
    /// Nodes.
    pub nodes: usize,
    /// One node's machine.
    pub machine: Machine,
    /// Its synthetic spec, as written.
    pub machine_spec: String,
    /// Its memory system.
    pub mem: MemSystem,
    /// Jobs in arrival order.
    pub jobs: Vec<ClusterJob>,
}

/// Most nodes a scenario may have: the scale, with room.
pub const MAX_NODES: u32 = 10_000;

/// Most jobs a cluster scenario may have, copies and the stream counted:
/// each job's S2 characteristics are derived from its figures when the
/// scenario is read (about 0.5 ms a job here), so the bound keeps reading
/// under about ten seconds. `stream.jobs = 4e9` asked for 4e9 records.
pub const MAX_CLUSTER_JOBS: u64 = 20_000;

impl ClusterScenario {
    /// Whether `text` is a cluster scenario (it has a `[cluster]` table).
    pub fn is_cluster(text: &str) -> bool {
        toml::from_str::<toml::Table>(text).is_ok_and(|t| t.contains_key("cluster"))
    }

    /// Parses and validates a cluster scenario; errors name file, line and field.
    pub fn parse(text: &str, file: &str) -> Result<ClusterScenario, ScenarioError> {
        let loc = Locate { text, file };
        let err = |offset, field, why| loc.err(offset, field, why);
        let at = |span, field: &str, why| loc.at(span, field, why);
        let spec: ClusterFile = loc.parse()?;
        let cspan = spec.cluster.span();
        let c = spec.cluster.get_ref();
        if c.nodes.0 > MAX_NODES {
            return Err(at(cspan, "cluster.nodes", format!("at most {MAX_NODES} nodes")));
        }
        let machine = Machine::synthetic(&c.machine)
            .map_err(|e| at(cspan.clone(), "cluster.machine", e.to_string()))?;
        spec.model
            .validate(&machine)
            .map_err(|(f, why)| err(None, Some(format!("model.{f}")), why))?;
        let mem = spec.model.mem_system(&machine);
        let selectors = spec
            .selectors
            .iter()
            .map(|s| s.parse::<ClusterPlacement>())
            .collect::<Result<Vec<_>, _>>()
            .map_err(|why| err(None, Some("selectors".into()), why))?;
        let cpus = machine.cpus().len() as u32;
        let mut jobs = Vec::new();
        let asked: u64 = spec
            .job
            .iter()
            .map(|j| u64::from(j.get_ref().copies.0))
            .sum::<u64>()
            + spec.stream.as_ref().map_or(0, |s| u64::from(s.get_ref().jobs.0));
        if asked > MAX_CLUSTER_JOBS {
            return Err(err(
                None,
                Some("job".into()),
                format!(
                    "{asked} jobs in all (copies and stream counted) is more than a cluster scenario holds ({MAX_CLUSTER_JOBS})"
                ),
            ));
        }
        for sj in &spec.job {
            let j = sj.get_ref();
            let field = |f: &str| format!("job '{}'.{f}", j.name);
            if j.threads.0 > cpus {
                let why = format!("{} threads, but a node has {cpus} CPUs", j.threads.0);
                return Err(at(sj.span(), &field("threads"), why));
            }
            if j.shared_fraction.0 > 1.0 {
                return Err(at(
                    sj.span(),
                    &field("shared_fraction"),
                    "must be in [0, 1]".into(),
                ));
            }
            let character = derive(
                &mem,
                &machine,
                j.threads.0,
                j.layout,
                j.solo_time_s.0,
                j.bw_gbps.0,
                j.shared_fraction.0,
            )
            .map_err(|why| at(sj.span(), &field("bw_gbps"), why))?;
            for copy in 0..j.copies.0 {
                jobs.push(ClusterJob {
                    name: if j.copies.0 > 1 {
                        format!("{}#{}", j.name, copy + 1)
                    } else {
                        j.name.clone()
                    },
                    threads: j.threads.0,
                    layout: j.layout,
                    arrival_s: j.arrival_s.0,
                    solo_time_s: j.solo_time_s.0,
                    bw_gbps: j.bw_gbps.0,
                    character,
                });
            }
        }
        if let Some(ss) = &spec.stream {
            jobs.extend(
                stream_jobs(ss.get_ref(), &mem, &machine).map_err(|(f, why)| at(ss.span(), &f, why))?,
            );
        }
        if jobs.is_empty() {
            return Err(err(
                None,
                Some("job".into()),
                "the scenario has no [[job]] and no [stream]".into(),
            ));
        }
        jobs.sort_by(|a, b| a.arrival_s.total_cmp(&b.arrival_s));
        Ok(ClusterScenario {
            name: spec.name.unwrap_or_else(|| {
                std::path::Path::new(file)
                    .file_stem()
                    .map_or(file.into(), |s| s.to_string_lossy().into())
            }),
            selectors,
            nodes: c.nodes.0 as usize,
            machine,
            machine_spec: c.machine.clone(),
            mem,
            jobs,
        })
    }
}

/// Threads per NUMA node of `layout` on an empty node.
fn empty_layout(machine: &Machine, threads: u32, layout: LayoutRequest) -> Option<Vec<u32>> {
    let free: Vec<u32> = machine.numa_nodes().iter().map(|n| n.cpus.len() as u32).collect();
    match layout {
        LayoutRequest::Compact => numa::compact(threads, &free, 0, &numa_distances(machine)),
        LayoutRequest::Scatter | LayoutRequest::Auto => numa::scatter(threads, &free),
    }
}

/// S2's characteristics of a job from its figures alone (see
/// [`numa::from_alone`]), laid out as the job asks on an empty node.
fn derive(
    mem: &MemSystem,
    machine: &Machine,
    threads: u32,
    layout: LayoutRequest,
    solo_time_s: f64,
    bw_gbps: f64,
    shared_fraction: f64,
) -> Result<Character, String> {
    let placement = empty_layout(machine, threads, layout).ok_or("does not fit an empty node")?;
    numa::from_alone(mem, &placement, solo_time_s, bw_gbps, shared_fraction)
}

fn stream_jobs(
    s: &StreamSpec,
    mem: &MemSystem,
    machine: &Machine,
) -> Result<Vec<ClusterJob>, (String, String)> {
    let cpus = machine.cpus().len() as u32;
    if s.threads.is_empty() || s.threads.iter().any(|t| t.0 > cpus) {
        return Err((
            "stream.threads".into(),
            format!("give thread counts between 1 and {cpus}"),
        ));
    }
    for (field, r) in [
        ("stream.solo_time_s", &s.solo_time_s),
        ("stream.bw_gbps", &s.bw_gbps),
    ] {
        if r[0].0 > r[1].0 {
            return Err((field.into(), "a range is [low, high]".into()));
        }
    }
    if s.shared_fraction.0 > 1.0 {
        return Err(("stream.shared_fraction".into(), "must be in [0, 1]".into()));
    }
    let mut rng = Rng::new(s.seed);
    let mut t = 0.0;
    let mut out = Vec::with_capacity(s.jobs.0 as usize);
    for i in 0..s.jobs.0 {
        // Poisson arrivals: exponential gaps with the given mean.
        t += -s.interarrival_s.0 * (1.0 - rng.next_f64()).ln();
        let threads = s.threads[rng.below(s.threads.len() as u64) as usize].0;
        let draw = |rng: &mut Rng, r: &[Positive; 2]| r[0].0 + (r[1].0 - r[0].0) * rng.next_f64();
        let solo = draw(&mut rng, &s.solo_time_s);
        // Traffic per thread, so wide jobs draw more.
        let bw = draw(&mut rng, &s.bw_gbps) * f64::from(threads);
        let character = derive(mem, machine, threads, s.layout, solo, bw, s.shared_fraction.0)
            .map_err(|why| ("stream.bw_gbps".to_string(), why))?;
        out.push(ClusterJob {
            name: format!("job{}", i + 1),
            threads,
            layout: s.layout,
            arrival_s: t,
            solo_time_s: solo,
            bw_gbps: bw,
            character,
        });
    }
    Ok(out)
}

/// One job's outcome.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct JobOutcome {
    /// The job.
    pub name: String,
    /// Its node.
    pub node: usize,
    /// Threads per NUMA node there.
    pub threads_per_numa: Vec<u32>,
    /// Seconds from arrival to start.
    pub wait_s: f64,
    /// Seconds from start to end.
    pub run_s: f64,
    /// run_s over its time alone.
    pub slowdown_ratio: f64,
    /// Why the placement chose that node.
    pub reason: String,
}

/// One placement's results.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct PlacementResult {
    /// The selector or reference.
    pub placement: String,
    /// Nodes simulated.
    pub nodes: usize,
    /// Per job, in arrival order.
    pub jobs: Vec<JobOutcome>,
    /// Shortest, mean and longest run time (S2's Table 1).
    pub run_min_s: f64,
    /// Mean run time.
    pub run_mean_s: f64,
    /// Longest run time.
    pub run_max_s: f64,
    /// Mean of arrival-to-end times.
    pub turnaround_mean_s: f64,
    /// When the last job ended.
    pub makespan_s: f64,
    /// Per node that ran a job: mean memory traffic over the time it ran jobs.
    pub node_bw_gbps: Vec<f64>,
    /// Mean of `node_bw_gbps`.
    pub node_bw_mean_gbps: f64,
    /// Population standard deviation of `node_bw_gbps` (S2's balance figure).
    pub node_bw_std_gbps: f64,
    /// Model solves whose fixed point did not settle (should be 0).
    pub unconverged_solves: u64,
}

struct Running {
    job: usize,
    placed: Placed,
    /// Accesses each thread still has to make.
    left: f64,
    /// ns per access at the node's current mix.
    ns_per_access: f64,
}

struct NodeSim {
    running: Vec<Running>,
    free: Vec<u32>,
    bw_gbps: f64,
    /// Integral of traffic over busy time (GB) and the busy time (s).
    bytes_gb: f64,
    busy_s: f64,
    used: bool,
}

/// Runs one placement over the scenario.
pub fn run(s: &ClusterScenario, placement: ClusterPlacement) -> PlacementResult {
    let one_per_node = placement == ClusterPlacement::OnePerNode;
    let worst = placement == ClusterPlacement::Worst;
    // `worst` packs first-fit (Slurm's order) after sorting the queue;
    // `one-per-node` picks empty nodes itself, so its selector is unused.
    let selector = match placement {
        ClusterPlacement::Select(s) => s,
        ClusterPlacement::OnePerNode | ClusterPlacement::Worst => Selector::Slurm,
    };
    let n_nodes = if one_per_node {
        s.nodes.max(s.jobs.len())
    } else {
        s.nodes
    };
    let free0: Vec<u32> = s
        .machine
        .numa_nodes()
        .iter()
        .map(|n| n.cpus.len() as u32)
        .collect();
    let dist = numa_distances(&s.machine);
    let mut nodes: Vec<NodeSim> = (0..n_nodes)
        .map(|_| NodeSim {
            running: Vec::new(),
            free: free0.clone(),
            bw_gbps: 0.0,
            bytes_gb: 0.0,
            busy_s: 0.0,
            used: false,
        })
        .collect();
    // What the selectors see, kept in step with `nodes` (rebuilding a
    // thousand of them for every job costs more than choosing).
    let mut states: Vec<NodeState> = (0..n_nodes)
        .map(|i| NodeState {
            name: format!("n{}", i + 1),
            mem: s.mem.clone(),
            free_per_numa: free0.clone(),
            distances: dist.clone(),
            running: Vec::new(),
        })
        .collect();
    let mut outcomes: Vec<Option<JobOutcome>> = vec![None; s.jobs.len()];
    let mut queue: VecDeque<usize> = VecDeque::new();
    let mut next_arrival = 0;
    let mut now = 0.0f64;
    let mut unconverged = 0u64;
    // Each job arrives once and ends once: about 2 events per job (ends a
    // rounding error apart can take one more each); the bound keeps a bug
    // from looping forever.
    for _ in 0..(4 * s.jobs.len() + 16) {
        // Next event: an arrival or the earliest completion.
        let next_end = nodes
            .iter()
            .flat_map(|n| n.running.iter().map(|r| r.left * r.ns_per_access * 1e-9))
            .fold(f64::INFINITY, f64::min);
        let arrival = s.jobs.get(next_arrival).map_or(f64::INFINITY, |j| j.arrival_s);
        let dt = next_end.min(arrival - now).max(0.0);
        if !dt.is_finite() {
            break;
        }
        now += dt;
        for (i, n) in nodes.iter_mut().enumerate() {
            if n.running.is_empty() {
                continue;
            }
            n.bytes_gb += n.bw_gbps * dt;
            n.busy_s += dt;
            let mut ended = false;
            for r in &mut n.running {
                r.left -= dt * 1e9 / r.ns_per_access;
                // Within a rounding error of done: done.
                if r.left <= r.placed.character.accesses_per_thread * 1e-12 {
                    ended = true;
                    let o = outcomes[r.job].as_mut().expect("a running job has an outcome");
                    o.run_s = now - s.jobs[r.job].arrival_s - o.wait_s;
                    o.slowdown_ratio = o.run_s / s.jobs[r.job].solo_time_s;
                    o.node = i;
                }
            }
            if ended {
                let (done, keep): (Vec<Running>, Vec<Running>) = n
                    .running
                    .drain(..)
                    .partition(|r| r.left <= r.placed.character.accesses_per_thread * 1e-12);
                for r in done {
                    for (f, t) in n.free.iter_mut().zip(&r.placed.threads_per_node) {
                        *f += t;
                    }
                }
                n.running = keep;
                unconverged += resolve(&s.mem, n);
                states[i].free_per_numa.clone_from(&n.free);
                states[i].running = n.running.iter().map(|r| r.placed.clone()).collect();
            }
        }
        while s.jobs.get(next_arrival).is_some_and(|j| j.arrival_s <= now) {
            queue.push_back(next_arrival);
            next_arrival += 1;
        }
        let heavier_first =
            |a: &usize, b: &usize| s.jobs[*b].bw_gbps.total_cmp(&s.jobs[*a].bw_gbps).then(a.cmp(b));
        if worst {
            // The heaviest waiting jobs first, packed first-fit, so the
            // heaviest share nodes.
            queue.make_contiguous().sort_by(heavier_first);
        } else if selector == Selector::Model {
            // Jobs that arrive together are offered heaviest first (first
            // come, first served across arrival times): each then takes the
            // node S2's rule finds least contended, so heavy jobs spread
            // before light ones fill in beside them. In submission order the
            // rule fills empty nodes with whatever comes first. The rule
            // places one job at a time and cannot see the ones still to
            // come; `swap_improve` then corrects the batch.
            queue.make_contiguous().sort_by(|a, b| {
                s.jobs[*a]
                    .arrival_s
                    .total_cmp(&s.jobs[*b].arrival_s)
                    .then(heavier_first(a, b))
            });
        }
        // First in, first out, no backfill: the head waits for room.
        let mut placed_now: Vec<usize> = Vec::new();
        while let Some(&j) = queue.front() {
            let job = &s.jobs[j];
            let req = JobRequest {
                threads: job.threads,
                layout: job.layout,
                character: job.character,
            };
            let choice = if one_per_node {
                let empty = nodes.iter().position(|n| n.running.is_empty());
                empty.map(|i| {
                    let layout = empty_layout(&s.machine, job.threads, job.layout).unwrap_or_default();
                    (i, layout, format!("n{}: an empty node of its own", i + 1))
                })
            } else {
                let c = selector.choose(&states, &req);
                let reason = if worst {
                    format!("{} (heaviest waiting job first)", c.reason)
                } else {
                    c.reason
                };
                c.node.map(|i| (i, c.threads_per_numa, reason))
            };
            let Some((i, layout, reason)) = choice else { break };
            queue.pop_front();
            let n = &mut nodes[i];
            for (f, t) in n.free.iter_mut().zip(&layout) {
                *f -= t;
            }
            n.used = true;
            let placed = Placed {
                character: job.character,
                threads_per_node: layout.clone(),
                memory: Vec::new(),
            };
            states[i].free_per_numa.clone_from(&n.free);
            states[i].running.push(placed.clone());
            n.running.push(Running {
                job: j,
                placed,
                left: job.character.accesses_per_thread,
                ns_per_access: 1.0,
            });
            unconverged += resolve(&s.mem, n);
            outcomes[j] = Some(JobOutcome {
                name: job.name.clone(),
                node: i,
                threads_per_numa: layout,
                wait_s: now - job.arrival_s,
                run_s: f64::NAN,
                slowdown_ratio: f64::NAN,
                reason,
            });
            placed_now.push(j);
        }
        if selector == Selector::Model && placed_now.len() >= 2 {
            for (j, i, why) in swap_improve(&s.mem, &mut nodes, &placed_now, &s.jobs) {
                unconverged += resolve(&s.mem, &mut nodes[i]);
                states[i].running = nodes[i].running.iter().map(|r| r.placed.clone()).collect();
                let o = outcomes[j].as_mut().expect("a placed job has an outcome");
                o.node = i;
                o.threads_per_numa = nodes[i]
                    .running
                    .iter()
                    .find(|r| r.job == j)
                    .expect("moved onto this node")
                    .placed
                    .threads_per_node
                    .clone();
                o.reason = why;
            }
        }
    }
    summarise(s, placement.name(), n_nodes, &nodes, outcomes, unconverged)
}

/// The predicted completion times, from now, of the jobs a node runs
/// (their placements and the accesses each thread has left), summed: the
/// node's mix is re-solved at each predicted completion. Infinite if the
/// model cannot solve it.
fn predicted_total_s(mem: &MemSystem, jobs: &[(Placed, f64)]) -> f64 {
    let mut live: Vec<(Placed, f64)> = jobs.to_vec();
    let (mut now, mut total) = (0.0, 0.0);
    // Each round ends at least one job.
    while !live.is_empty() {
        let placed: Vec<Placed> = live.iter().map(|(p, _)| p.clone()).collect();
        let Ok(pred) = numa::predict_with(mem, &placed, false) else {
            return f64::INFINITY;
        };
        let ns: Vec<f64> = live
            .iter()
            .zip(&pred.programs)
            .map(|((p, _), q)| q.time_s * 1e9 / p.character.accesses_per_thread)
            .collect();
        let dt = live
            .iter()
            .zip(&ns)
            .map(|((_, left), ns)| left * ns * 1e-9)
            .fold(f64::INFINITY, f64::min);
        now += dt;
        let mut next = Vec::with_capacity(live.len());
        for ((p, left), ns) in live.into_iter().zip(&ns) {
            let left = left - dt * 1e9 / ns;
            // Within a rounding error of done: done.
            if left <= p.character.accesses_per_thread * 1e-9 {
                total += now;
            } else {
                next.push((p, left));
            }
        }
        live = next;
    }
    total
}

/// Jobs placed at the same instant are placed one at a time by S2's rule,
/// which cannot see the jobs still to come. This then swaps pairs of them
/// (same thread count: each takes the other's node and layout) while the
/// model predicts a lower total completion time on the two nodes, best
/// swap first. Bounded: at most as many swaps as jobs, and only for up to
/// `MAX_BATCH` jobs (the pairs grow as its square). Returns each moved
/// job's new node and why.
fn swap_improve(
    mem: &MemSystem,
    nodes: &mut [NodeSim],
    batch: &[usize],
    jobs: &[ClusterJob],
) -> Vec<(usize, usize, String)> {
    const MAX_BATCH: usize = 32;
    let mut moved: Vec<(usize, usize, String)> = Vec::new();
    if batch.len() > MAX_BATCH {
        return moved;
    }
    let node_of = |nodes: &[NodeSim], j: usize| {
        nodes
            .iter()
            .position(|n| n.running.iter().any(|r| r.job == j))
            .expect("a placed job runs on a node")
    };
    // A node's mix, with job `out` replaced by a fresh run of `into`.
    let mix = |n: &NodeSim, swap: Option<(usize, usize)>| -> Vec<(Placed, f64)> {
        n.running
            .iter()
            .map(|r| match swap {
                Some((out, into)) if r.job == out => {
                    let mut p = r.placed.clone();
                    p.character = jobs[into].character;
                    (p, jobs[into].character.accesses_per_thread)
                }
                _ => (r.placed.clone(), r.left),
            })
            .collect()
    };
    for _ in 0..batch.len() {
        // Where each job is and each of their nodes' predicted total, once
        // per round: every pair below reuses them.
        let at: Vec<usize> = batch.iter().map(|&j| node_of(nodes, j)).collect();
        let mut total: BTreeMap<usize, f64> = BTreeMap::new();
        for &n in &at {
            total
                .entry(n)
                .or_insert_with(|| predicted_total_s(mem, &mix(&nodes[n], None)));
        }
        let mut best: Option<(f64, usize, usize)> = None;
        for (x, &a) in batch.iter().enumerate() {
            for (y, &b) in batch.iter().enumerate().skip(x + 1) {
                let (na, nb) = (at[x], at[y]);
                if na == nb || jobs[a].threads != jobs[b].threads {
                    continue;
                }
                let before = total[&na] + total[&nb];
                let after = predicted_total_s(mem, &mix(&nodes[na], Some((a, b))))
                    + predicted_total_s(mem, &mix(&nodes[nb], Some((b, a))));
                let gain = before - after;
                // A gain within rounding is none: no swapping back and forth.
                if gain > 1e-9 * before && best.is_none_or(|(g, _, _)| gain > g) {
                    best = Some((gain, a, b));
                }
            }
        }
        let Some((gain, a, b)) = best else { break };
        let (na, nb) = (node_of(nodes, a), node_of(nodes, b));
        for (n, out, into) in [(na, a, b), (nb, b, a)] {
            let r = nodes[n]
                .running
                .iter_mut()
                .find(|r| r.job == out)
                .expect("on its node");
            r.job = into;
            r.placed.character = jobs[into].character;
            r.left = jobs[into].character.accesses_per_thread;
        }
        let why = |other: usize, n: usize| {
            format!(
                "n{}: swapped with {} after S2's rule placed both: the model predicts {gain:.1} s less total job time",
                n + 1,
                jobs[other].name
            )
        };
        moved.retain(|(j, _, _)| *j != a && *j != b);
        moved.push((a, nb, why(b, nb)));
        moved.push((b, na, why(a, na)));
    }
    moved
}

/// Re-solves a node's mix; returns 1 when the solve did not settle.
fn resolve(mem: &MemSystem, n: &mut NodeSim) -> u64 {
    if n.running.is_empty() {
        n.bw_gbps = 0.0;
        return 0;
    }
    let placed: Vec<Placed> = n.running.iter().map(|r| r.placed.clone()).collect();
    let pred = numa::predict(mem, &placed).expect("placements were checked when the jobs were loaded");
    for (r, p) in n.running.iter_mut().zip(&pred.programs) {
        r.ns_per_access = p.time_s * 1e9 / r.placed.character.accesses_per_thread;
    }
    n.bw_gbps = pred.node_bw_gbps.iter().sum();
    u64::from(!pred.converged)
}

fn summarise(
    s: &ClusterScenario,
    placement: &str,
    n_nodes: usize,
    nodes: &[NodeSim],
    outcomes: Vec<Option<JobOutcome>>,
    unconverged: u64,
) -> PlacementResult {
    let jobs: Vec<JobOutcome> = outcomes
        .into_iter()
        .map(|o| o.expect("every job ran: the loop ends only when nothing is left"))
        .collect();
    let runs: Vec<f64> = jobs.iter().map(|j| j.run_s).collect();
    let mean = |v: &[f64]| v.iter().sum::<f64>() / v.len().max(1) as f64;
    let node_bw: Vec<f64> = nodes
        .iter()
        .filter(|n| n.used && n.busy_s > 0.0)
        .map(|n| n.bytes_gb / n.busy_s)
        .collect();
    let bw_mean = mean(&node_bw);
    let bw_std = (node_bw.iter().map(|b| (b - bw_mean) * (b - bw_mean)).sum::<f64>()
        / node_bw.len().max(1) as f64)
        .sqrt();
    let ends: Vec<f64> = jobs
        .iter()
        .zip(&s.jobs)
        .map(|(o, j)| j.arrival_s + o.wait_s + o.run_s)
        .collect();
    PlacementResult {
        placement: placement.to_string(),
        nodes: n_nodes,
        run_min_s: runs.iter().copied().fold(f64::INFINITY, f64::min),
        run_mean_s: mean(&runs),
        run_max_s: runs.iter().copied().fold(0.0, f64::max),
        turnaround_mean_s: mean(&jobs.iter().map(|j| j.wait_s + j.run_s).collect::<Vec<_>>()),
        makespan_s: ends.iter().copied().fold(0.0, f64::max),
        node_bw_gbps: node_bw,
        node_bw_mean_gbps: bw_mean,
        node_bw_std_gbps: bw_std,
        unconverged_solves: unconverged,
        jobs,
    }
}

/// Every placement of a scenario, side by side.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ClusterComparison {
    /// The scenario.
    pub scenario: String,
    /// Nodes (the placements other than `one-per-node` use this many).
    pub nodes: usize,
    /// One node's machine, as a synthetic spec.
    pub machine: String,
    /// The jobs with their derived characteristics.
    pub jobs: Vec<ClusterJob>,
    /// One result per placement, in the order asked.
    pub placements: Vec<PlacementResult>,
}

/// Runs every placement in `names` (the scenario's when empty); `progress`
/// hears (done, total) before each.
pub fn compare(
    s: &ClusterScenario,
    names: &[ClusterPlacement],
    mut progress: impl FnMut(usize, usize),
) -> ClusterComparison {
    let names = if names.is_empty() { &s.selectors } else { names };
    let mut placements = Vec::new();
    for (i, &n) in names.iter().enumerate() {
        progress(i, names.len());
        placements.push(run(s, n));
    }
    ClusterComparison {
        scenario: s.name.clone(),
        nodes: s.nodes,
        machine: s.machine_spec.clone(),
        jobs: s.jobs.clone(),
        placements,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn two_jobs() -> ClusterScenario {
        let text = "[cluster]\nnodes = 1\nmachine = \"package:2 numa:1 l3:1 core:8\"\n\
                    [model]\nnode_bw_gbps = 34.0\nlink_bw_gbps = 42.5\ncontention = { kind = \"mm1\" }\n\
                    [[job]]\nname = \"short\"\nthreads = 8\nsolo_time_s = 100\nbw_gbps = 30\n\
                    [[job]]\nname = \"long\"\nthreads = 8\nsolo_time_s = 400\nbw_gbps = 30\n";
        ClusterScenario::parse(text, "t.toml").unwrap()
    }

    #[test]
    fn the_predicted_total_re_solves_the_mix_when_a_job_ends() {
        let s = two_jobs();
        let placed = |j: usize, layout: Vec<u32>| Placed {
            character: s.jobs[j].character,
            threads_per_node: layout,
            memory: Vec::new(),
        };
        let full = |j: usize| s.jobs[j].character.accesses_per_thread;
        // Alone: its solo time.
        let alone = predicted_total_s(&s.mem, &[(placed(0, vec![4, 4]), full(0))]);
        assert!((alone / 100.0 - 1.0).abs() < 1e-6, "{alone}");
        // Together: the short job is slowed, ends at t1 > 100 s; the long
        // one runs slowed until then and alone after, so it ends before
        // 400 s + (t1 - what it got done meanwhile) but after 400 s.
        let both = [(placed(0, vec![4, 4]), full(0)), (placed(1, vec![4, 4]), full(1))];
        let together = numa::predict(&s.mem, &[both[0].0.clone(), both[1].0.clone()]).unwrap();
        let t1 = together.programs[0].time_s;
        assert!(t1 > 100.0);
        let slow = together.programs[1].time_s / 400.0;
        let t2 = t1 + (400.0 - t1 / slow);
        let total = predicted_total_s(&s.mem, &both);
        assert!((total - (t1 + t2)).abs() < 1e-6 * total, "{total} vs {}", t1 + t2);
        // Half the long job left: half the work, from now.
        let half = predicted_total_s(&s.mem, &[(placed(1, vec![4, 4]), full(1) / 2.0)]);
        assert!((half / 200.0 - 1.0).abs() < 1e-6, "{half}");
    }
}
