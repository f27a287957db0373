//! Cluster-scale simulation (S2): a stream of multithreaded jobs over many
//! nodes, each node's jobs slowed by one another as the scenario's judge
//! says (herd's node simulator, [`crate::cluster_judge`], by default; or
//! S2's NUMA queueing model), and the node chosen for every job by a
//! node-selection policy, which predicts with S2's model.
//!
//! A node is a machine from a synthetic spec with the scenario's memory
//! model. A job has threads, a layout, and two measurable figures: its run
//! time alone on an empty node and its memory traffic then. From them the
//! loader derives S2's characteristics (beta and accesses per thread) by
//! inverting the model, so a job is written in what one would measure.
//!
//! Time moves from event to event (an arrival or a completion). Between
//! events every running job progresses at the rate the judge gives for
//! its node's current mix, re-judged only for a node whose mix changed.
//! Jobs wait in one first-in-first-out queue (no backfill) when the head
//! fits nowhere, as a plain Slurm partition does.
//!
//! Compared placements: the selectors of `herd_policy::node` (`slurm`,
//! `least-loaded`, `numa:model`), `s2-rule` (numa:model without its batch
//! correction, [`swap`]), and two references from S2's experiment:
//! `one-per-node` (every job gets an empty node of its own: as many nodes
//! as jobs) and `worst` (the jobs waiting at once are sorted by memory
//! traffic, heaviest first, and packed first-fit, so the most
//! memory-intensive jobs share nodes).

use std::collections::VecDeque;

use herd_model::numa::{self, Character, Placed};
use herd_model::{MemSystem, ModelParams};
use herd_plan::ClusterPlacement;
use herd_plan::node::{JobRequest, LayoutRequest, NodeState, Selector};
use herd_policy::Rng;
use herd_policy::numa_distances;
use herd_topo::Machine;
use serde::{Deserialize, Serialize};

use crate::cluster_judge::NodeJudge;
use crate::scenario::{Count, Locate, NonNegative, Positive, ScenarioError};
use swap::swap_improve;

mod swap;

fn median(v: Vec<f64>) -> f64 {
    if v.is_empty() {
        f64::NAN
    } else {
        herd_model::median(v)
    }
}

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
    judge: Judge,
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

/// What decides how fast each job on a node runs (the outcome the
/// placements are judged by; the selectors predict with S2's model either
/// way).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize, Serialize)]
pub enum Judge {
    /// herd's node-level simulator runs each node's mix
    /// ([`crate::cluster_judge`]): the default.
    #[default]
    #[serde(rename = "node-sim")]
    NodeSim,
    /// S2's closed-form M/M/1 model, the one `numa:model` chooses with
    /// (circular as a judge of `numa:model`; kept for comparison).
    #[serde(rename = "model")]
    Model,
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
    /// The model's parameters (the node simulator's world takes them whole).
    pub model: ModelParams,
    /// What judges the outcomes.
    pub judge: Judge,
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
            model: spec.model.clone(),
            judge: spec.judge,
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
    /// run_s over its time alone (under the judge: the node simulator's
    /// own run of the job alone on an empty node, or `solo_time_s`).
    pub slowdown_ratio: f64,
    /// The run time S2's model predicted for it at its placement, the mix
    /// then on its node held fixed: what the selectors go by.
    pub predicted_run_s: f64,
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
    /// What judged the outcomes.
    pub judge: Judge,
    /// Median over jobs of |predicted_run_s - run_s| / run_s.
    pub prediction_error_median: f64,
    /// Node mixes the node simulator ran, and mixes it found in its cache.
    pub judge_runs: u64,
    /// Mixes found in the cache.
    pub judge_hits: u64,
}

pub(crate) struct Running {
    pub(crate) job: usize,
    pub(crate) placed: Placed,
    /// Accesses each thread still has to make.
    pub(crate) left: f64,
    /// ns per access at the node's current mix.
    ns_per_access: f64,
}

pub(crate) struct NodeSim {
    pub(crate) running: Vec<Running>,
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
        ClusterPlacement::S2Rule => Selector::Model,
        ClusterPlacement::OnePerNode | ClusterPlacement::Worst => Selector::Slurm,
    };
    let swap = placement == ClusterPlacement::Select(Selector::Model);
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
    let mut judge =
        (s.judge == Judge::NodeSim).then(|| NodeJudge::new(&s.machine, &s.machine_spec, &s.model));
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
                unconverged += resolve(&s.mem, n, judge.as_mut());
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
                let c = selector.pick(&states, &req);
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
            unconverged += resolve(&s.mem, n, judge.as_mut());
            let mix: Vec<Placed> = n.running.iter().map(|r| r.placed.clone()).collect();
            let predicted_run_s = numa::predict_with(&s.mem, &mix, false)
                .ok()
                .and_then(|p| p.programs.last().map(|p| p.time_s))
                .unwrap_or(f64::NAN);
            outcomes[j] = Some(JobOutcome {
                name: job.name.clone(),
                node: i,
                threads_per_numa: layout,
                wait_s: now - job.arrival_s,
                run_s: f64::NAN,
                slowdown_ratio: f64::NAN,
                predicted_run_s,
                reason,
            });
            placed_now.push(j);
        }
        if swap && placed_now.len() >= 2 {
            for (j, i, why) in swap_improve(&s.mem, &mut nodes, &placed_now, &s.jobs) {
                unconverged += resolve(&s.mem, &mut nodes[i], judge.as_mut());
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
                let mix: Vec<Placed> = nodes[i].running.iter().map(|r| r.placed.clone()).collect();
                let at = nodes[i].running.iter().position(|r| r.job == j);
                o.predicted_run_s = numa::predict_with(&s.mem, &mix, false)
                    .ok()
                    .zip(at)
                    .map_or(f64::NAN, |(p, k)| p.programs[k].time_s);
            }
        }
    }
    // Under the node simulator, a job's slowdown is against its own run
    // alone in the same world, on an empty node laid out as it asks.
    if let Some(judge) = judge.as_mut() {
        for (o, job) in outcomes.iter_mut().zip(&s.jobs) {
            let Some(o) = o.as_mut() else { continue };
            let layout = empty_layout(&s.machine, job.threads, job.layout).unwrap_or_default();
            let alone = Placed {
                character: job.character,
                threads_per_node: layout,
                memory: Vec::new(),
            };
            if let Some(ns) = judge.ns_per_access(&[alone]).and_then(|v| v.first().copied()) {
                o.slowdown_ratio = o.run_s / (job.character.accesses_per_thread * ns * 1e-9);
            }
        }
    }
    let mut r = summarise(s, placement.name(), n_nodes, &nodes, outcomes, unconverged);
    if let Some(j) = &judge {
        (r.judge_runs, r.judge_hits) = (j.runs, j.hits);
    }
    r
}

/// Re-solves a node's mix, by the node simulator when there is one (see
/// [`Judge`]), else by S2's model; returns 1 when the solve did not settle.
fn resolve(mem: &MemSystem, n: &mut NodeSim, judge: Option<&mut NodeJudge<'_>>) -> u64 {
    if n.running.is_empty() {
        n.bw_gbps = 0.0;
        return 0;
    }
    let placed: Vec<Placed> = n.running.iter().map(|r| r.placed.clone()).collect();
    if let Some(judge) = judge {
        let Some(ns) = judge.ns_per_access(&placed) else {
            return 1;
        };
        n.bw_gbps = 0.0;
        for (r, ns) in n.running.iter_mut().zip(ns) {
            r.ns_per_access = ns;
            // One 64-byte line per access, from every thread: bytes per ns
            // is GB/s.
            let threads: u32 = r.placed.threads_per_node.iter().sum();
            n.bw_gbps += f64::from(threads) * herd_model::params::LINE_BYTES / ns;
        }
        return 0;
    }
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
        judge: s.judge,
        prediction_error_median: median(
            jobs.iter()
                .map(|j| (j.predicted_run_s - j.run_s).abs() / j.run_s)
                .filter(|e| e.is_finite())
                .collect(),
        ),
        judge_runs: 0,
        judge_hits: 0,
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
