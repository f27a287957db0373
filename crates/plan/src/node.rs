//! Choosing a cluster node for a new job, and its layout there (S2).
//!
//! A node is described by its memory system, its free CPUs per NUMA node
//! and the programs already running on it with their placements. A job
//! brings its thread count, a layout request and its S2 characteristics
//! (measured before, or estimated from the nearest cluster of past jobs).
//!
//! - `numa:model` (S2, eq. 6): every node where the job fits is scored by
//!   the model's T_cont / T_clean, the job's predicted time there with what
//!   already runs over its time alone on an empty node of the same kind;
//!   the least wins. With layout `auto` the model also picks compact (and
//!   which NUMA nodes) or scatter on that node, by the same prediction.
//! - `slurm`: Slurm's default order, the first node (in the cluster's
//!   order) with enough free CPUs.
//! - `least-loaded`: the node with the most free CPUs.
//!
//! Every choice comes with each candidate's score, so `herd place` and
//! `--explain` can show why.

use herd_model::MemSystem;
use herd_model::numa::{self, Character, Placed};
use serde::{Deserialize, Serialize};

/// How a job's threads spread over a node's NUMA nodes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum LayoutRequest {
    /// As evenly as the NUMA nodes allow (OpenMP spread / KMP scatter).
    Scatter,
    /// As few NUMA nodes as possible (OpenMP close / KMP compact).
    Compact,
    /// Whichever the model predicts faster (`numa:model` only; the others
    /// scatter, as Slurm's default cyclic distribution over sockets does).
    Auto,
}

/// One node as a selector sees it.
#[derive(Debug, Clone, PartialEq)]
pub struct NodeState {
    /// The node's name.
    pub name: String,
    /// Its memory system (controllers, links, the contention law).
    pub mem: MemSystem,
    /// Free CPUs on each of its NUMA nodes.
    pub free_per_numa: Vec<u32>,
    /// NUMA distances, for compact placement (10 local).
    pub distances: Vec<Vec<f64>>,
    /// What runs there, with the characteristics the selector believes.
    pub running: Vec<Placed>,
}

impl NodeState {
    /// Free CPUs in all.
    pub fn free(&self) -> u32 {
        self.free_per_numa.iter().sum()
    }

    /// CPUs per NUMA node were the node empty: free plus what runs there.
    pub fn capacity_per_numa(&self) -> Vec<u32> {
        self.capacity_per_numa_iter().collect()
    }

    /// [`NodeState::capacity_per_numa`], one NUMA node at a time.
    fn capacity_per_numa_iter(&self) -> impl Iterator<Item = u32> + '_ {
        self.free_per_numa.iter().enumerate().map(|(k, f)| {
            f + self
                .running
                .iter()
                .filter_map(|p| p.threads_per_node.get(k))
                .sum::<u32>()
        })
    }

    /// The same node with every CPU free and the same programs running: how
    /// a job would fare there if it had room.
    pub fn with_room(&self) -> NodeState {
        NodeState {
            free_per_numa: self.capacity_per_numa(),
            ..self.clone()
        }
    }
}

/// A job asking for a node.
#[derive(Debug, Clone, PartialEq)]
pub struct JobRequest {
    /// Threads (one CPU each).
    pub threads: u32,
    /// Layout request.
    pub layout: LayoutRequest,
    /// Its characteristics as far as they are known.
    pub character: Character,
}

/// One candidate node's score.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct NodeScore {
    /// Index of the node.
    pub node: usize,
    /// The node's name.
    pub name: String,
    /// Whether the job fits in its free CPUs.
    pub fits: bool,
    /// Threads per NUMA node, for the layout chosen there.
    pub threads_per_numa: Vec<u32>,
    /// Which layout that is.
    pub layout: String,
    /// Predicted time of the job with what runs there.
    pub time_s: Option<f64>,
    /// Predicted T_cont / T_clean.
    pub slowdown_ratio: Option<f64>,
    /// Predicted slowdown the job adds to each program already there
    /// (its time with the job over its time without), the worst of them.
    pub harm_ratio: Option<f64>,
    /// Whether the model's fixed point settled.
    pub converged: bool,
}

impl NodeScore {
    /// A node the selector did not run the model for.
    fn unscored(node: usize, name: &str, fits: bool) -> Self {
        NodeScore {
            node,
            name: name.to_string(),
            fits,
            threads_per_numa: Vec::new(),
            layout: String::new(),
            time_s: None,
            slowdown_ratio: None,
            harm_ratio: None,
            converged: true,
        }
    }
}

/// A selector's answer.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct NodeChoice {
    /// The chosen node, or `None` when the job fits nowhere now.
    pub node: Option<usize>,
    /// Threads per NUMA node on it.
    pub threads_per_numa: Vec<u32>,
    /// Why, in a sentence.
    pub reason: String,
    /// Every node's score (the model's selector scores all; the others
    /// only say where the job fits).
    pub scores: Vec<NodeScore>,
}

/// The node-selection policies.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum Selector {
    /// S2's argmin T_cont / T_clean.
    #[serde(rename = "numa:model")]
    Model,
    /// Slurm's default: first fit in node order.
    #[serde(rename = "slurm")]
    Slurm,
    /// Most free CPUs.
    #[serde(rename = "least-loaded")]
    LeastLoaded,
}

impl Selector {
    /// Every selector with its name and one line about it.
    pub const ALL: [(Selector, &'static str, &'static str); 3] = [
        (
            Selector::Slurm,
            "slurm",
            "Slurm's default order: the first node with enough free CPUs",
        ),
        (
            Selector::LeastLoaded,
            "least-loaded",
            "the node with the most free CPUs",
        ),
        (
            Selector::Model,
            "numa:model",
            "S2: the least predicted T_cont/T_clean by the NUMA queueing model; compact or scatter by the same model",
        ),
    ];

    /// The selector called `name`.
    pub fn parse(name: &str) -> Option<Selector> {
        Self::ALL.iter().find(|(_, n, _)| *n == name).map(|(s, _, _)| *s)
    }

    /// Its name.
    pub fn name(self) -> &'static str {
        Self::ALL
            .iter()
            .find(|(s, _, _)| *s == self)
            .map_or("?", |(_, n, _)| n)
    }

    /// Chooses a node for `job` among `nodes`, with every node's score.
    pub fn choose(self, nodes: &[NodeState], job: &JobRequest) -> NodeChoice {
        self.choose_with(nodes, job, true)
    }

    /// [`Selector::choose`] without the nodes' scores (`scores` empty):
    /// the same node, layout and reason. A cluster simulation asks for
    /// thousands of choices among a thousand nodes and reads only these;
    /// a score per node, with its name and layout copied, was a tenth of
    /// `herd sim scenarios/cluster-1000.toml`.
    pub fn pick(self, nodes: &[NodeState], job: &JobRequest) -> NodeChoice {
        self.choose_with(nodes, job, false)
    }

    fn choose_with(self, nodes: &[NodeState], job: &JobRequest, with_scores: bool) -> NodeChoice {
        match self {
            Selector::Model => choose_by_model(nodes, job, with_scores),
            Selector::Slurm | Selector::LeastLoaded => {
                // A layout fits exactly when the node has enough free CPUs
                // (scatter and compact both use any free CPU).
                let fits: Vec<bool> = nodes.iter().map(|n| n.free() >= job.threads).collect();
                let mut candidates = (0..nodes.len()).filter(|&i| fits[i]);
                let pick = if self == Selector::Slurm {
                    candidates.next()
                } else {
                    // Most free CPUs; the first such node on a tie.
                    candidates.min_by_key(|&i| (std::cmp::Reverse(nodes[i].free()), i))
                };
                let scores = if with_scores {
                    (nodes.iter().enumerate())
                        .map(|(i, n)| NodeScore::unscored(i, &n.name, fits[i]))
                        .collect()
                } else {
                    Vec::new()
                };
                let Some(i) = pick else {
                    return nowhere(scores, job);
                };
                let request = if job.layout == LayoutRequest::Compact {
                    "compact"
                } else {
                    "scatter"
                };
                let (_, placement) = layouts(&nodes[i], job)
                    .find(|(name, _)| name.starts_with(request))
                    .or_else(|| layouts(&nodes[i], job).next())
                    .expect("the node was chosen because a layout fits");
                let reason = match self {
                    Selector::Slurm => {
                        format!("{}: the first node with {} free CPUs", nodes[i].name, job.threads)
                    }
                    _ => format!("{}: the most free CPUs ({})", nodes[i].name, nodes[i].free()),
                };
                NodeChoice {
                    node: Some(i),
                    threads_per_numa: placement,
                    reason,
                    scores,
                }
            }
        }
    }
}

fn nowhere(scores: Vec<NodeScore>, job: &JobRequest) -> NodeChoice {
    NodeChoice {
        node: None,
        threads_per_numa: Vec::new(),
        reason: format!("no node has {} free CPUs", job.threads),
        scores,
    }
}

/// The layouts the job may take on `node` that fit its free CPUs, named:
/// scatter, and compact from each NUMA node.
fn layouts<'a>(node: &'a NodeState, job: &'a JobRequest) -> impl Iterator<Item = (String, Vec<u32>)> + 'a {
    let scatter = matches!(job.layout, LayoutRequest::Scatter | LayoutRequest::Auto)
        .then(|| numa::scatter(job.threads, &node.free_per_numa))
        .flatten()
        .map(|p| ("scatter".to_string(), p));
    let compact = (0..node.free_per_numa.len()).filter_map(move |first| {
        if !matches!(job.layout, LayoutRequest::Compact | LayoutRequest::Auto) {
            return None;
        }
        let p = numa::compact(job.threads, &node.free_per_numa, first, &node.distances)?;
        Some((format!("compact from NUMA node {first}"), p))
    });
    let mut seen = Vec::new();
    scatter.into_iter().chain(compact).filter(move |(_, p)| {
        // Compact from two NUMA nodes can give the same counts.
        let new = !seen.contains(p);
        if new {
            seen.push(p.clone());
        }
        new
    })
}

/// The node emptied: every CPU free, nothing running.
fn emptied(node: &NodeState) -> NodeState {
    NodeState {
        free_per_numa: node.capacity_per_numa(),
        running: Vec::new(),
        ..node.clone()
    }
}

/// What the model can tell apart about a node: nodes with equal keys score
/// the same, so a choice scores each key once (on a large cluster most
/// nodes are empty or run the same mix). Written into `k`.
fn fingerprint(node: &NodeState, k: &mut Vec<u64>) {
    key(node.free_per_numa.iter().copied(), &node.mem, &node.running, k);
}

/// The fingerprint of a node with `free` CPUs per NUMA node, memory system
/// `m` and `running` programs (every field the model reads), written into
/// `k`: a buffer reused from node to node, as most keys are met before and
/// need no copy of their own.
fn key(free: impl Iterator<Item = u32>, m: &MemSystem, running: &[Placed], k: &mut Vec<u64>) {
    k.clear();
    k.extend(free.map(u64::from));
    k.extend(m.node_mu.iter().map(|x| x.to_bits()));
    k.extend([m.link_mu.to_bits(), m.request_ns.to_bits()]);
    k.extend(m.remote_ratio.iter().flatten().map(|x| x.to_bits()));
    k.extend(match m.contention {
        herd_model::Contention::MM1 => [0, 0],
        herd_model::Contention::Superlinear { alpha, exponent } => [alpha.to_bits(), exponent.to_bits()],
    });
    for p in running {
        let c = &p.character;
        k.extend([
            u64::MAX,
            c.beta_ns.to_bits(),
            c.accesses_per_thread.to_bits(),
            c.shared_fraction.to_bits(),
        ]);
        k.extend(p.threads_per_node.iter().map(|&t| u64::from(t)));
        k.push(u64::MAX - 1);
        k.extend(p.memory.iter().map(|x| x.to_bits()));
    }
}

/// The value memoised under the key in `k`, made by `make` on a miss (only
/// then is the key copied into the map).
fn memo<V: Copy>(map: &mut rustc_hash::FxHashMap<Vec<u64>, V>, k: &[u64], make: impl FnOnce() -> V) -> V {
    if let Some(&v) = map.get(k) {
        return v;
    }
    let v = make();
    map.insert(k.to_vec(), v);
    v
}

/// A job's best layout on one node.
#[derive(Debug, Clone)]
struct Fit {
    layout: String,
    threads_per_numa: Vec<u32>,
    time_s: f64,
    converged: bool,
}

/// The job's best layout on `node` by predicted time (None when it fits
/// nowhere on the node).
fn best_layout(node: &NodeState, job: &JobRequest) -> Option<Fit> {
    let mut best: Option<Fit> = None;
    let mut all = node.running.clone();
    for (name, p) in layouts(node, job) {
        all.push(Placed {
            character: job.character,
            threads_per_node: p.clone(),
            memory: Vec::new(),
        });
        let pred = numa::predict_with(&node.mem, &all, false);
        all.pop();
        let Ok(pred) = pred else { continue };
        let t = pred.programs.last().expect("the job is the last program").time_s;
        if best.as_ref().is_none_or(|b| t < b.time_s) {
            best = Some(Fit {
                layout: name,
                threads_per_numa: p,
                time_s: t,
                converged: pred.converged,
            });
        }
    }
    best
}

/// The worst slowdown the job, placed as `placement`, adds to what runs
/// on `node`: each program's time with the job over its time without.
fn harm(node: &NodeState, job: &JobRequest, placement: &[u32]) -> f64 {
    if node.running.is_empty() {
        return 1.0;
    }
    let Ok(before) = numa::predict_with(&node.mem, &node.running, false) else {
        return 1.0;
    };
    let mut all = node.running.clone();
    all.push(Placed {
        character: job.character,
        threads_per_node: placement.to_vec(),
        memory: Vec::new(),
    });
    let Ok(after) = numa::predict_with(&node.mem, &all, false) else {
        return 1.0;
    };
    before
        .programs
        .iter()
        .zip(&after.programs)
        .map(|(was, now)| now.time_s / was.time_s)
        .fold(1.0, f64::max)
}

fn choose_by_model(nodes: &[NodeState], job: &JobRequest, with_scores: bool) -> NodeChoice {
    // Keys hashed with Fx, not std's SipHash (a key is dozens of words, and
    // hashing them was a tenth of `herd sim scenarios/cluster-1000.toml`):
    // they are made here from the nodes' own numbers, not from input that
    // could be chosen to collide. Grown push by push and made afresh per
    // node, the keys' reallocations were a fifth more.
    use rustc_hash::FxHashMap as HashMap;
    // One fit per distinct node state (its index in `fits`), one clean time
    // per kind of node.
    let mut fits: Vec<Fit> = Vec::new();
    let mut fit_of: HashMap<Vec<u64>, Option<usize>> = HashMap::default();
    let mut clean: HashMap<Vec<u64>, Option<f64>> = HashMap::default();
    // Per node: its fit and predicted T_cont / T_clean.
    let mut per_node: Vec<(Option<usize>, Option<f64>)> = Vec::with_capacity(nodes.len());
    let mut k = Vec::new();
    for node in nodes {
        // Too few free CPUs: no layout fits (scatter and compact both need
        // as many as the job has threads), so there is nothing to score.
        // On a busy cluster most nodes are such.
        if node.free() < job.threads {
            per_node.push((None, None));
            continue;
        }
        fingerprint(node, &mut k);
        let best = memo(&mut fit_of, &k, || {
            best_layout(node, job).map(|fit| {
                fits.push(fit);
                fits.len() - 1
            })
        });
        // The clean time depends on the node's kind only: built on a miss.
        key(node.capacity_per_numa_iter(), &node.mem, &[], &mut k);
        let t_clean = memo(&mut clean, &k, || {
            best_layout(&emptied(node), job).map(|b| b.time_s)
        });
        per_node.push((best, best.and_then(|f| t_clean.map(|c| fits[f].time_s / c))));
    }
    let mut harm_ratio: Vec<Option<f64>> = vec![None; nodes.len()];
    let scores = |harm_ratio: &[Option<f64>]| -> Vec<NodeScore> {
        if !with_scores {
            return Vec::new();
        }
        (nodes.iter().zip(&per_node).enumerate())
            .map(
                |(i, (node, &(fit, slowdown_ratio)))| match fit.map(|f| &fits[f]) {
                    Some(fit) => NodeScore {
                        node: i,
                        name: node.name.clone(),
                        fits: true,
                        threads_per_numa: fit.threads_per_numa.clone(),
                        layout: fit.layout.clone(),
                        time_s: Some(fit.time_s),
                        slowdown_ratio,
                        harm_ratio: harm_ratio[i],
                        converged: fit.converged,
                    },
                    None => NodeScore::unscored(i, &node.name, false),
                },
            )
            .collect()
    };
    // argmin T_cont / T_clean (S2's eq. 6); among equal ratios the least
    // harm to what already runs, then node order. Harm costs two more
    // solves, so only the tied best are asked.
    let least = per_node
        .iter()
        .filter_map(|&(_, r)| r)
        .fold(f64::INFINITY, f64::min);
    if !least.is_finite() {
        return nowhere(scores(&harm_ratio), job);
    }
    let tied: Vec<usize> = (0..nodes.len())
        .filter(|&i| per_node[i].1.is_some_and(|r| r <= least * (1.0 + 1e-12)))
        .collect();
    let layout_of = |i: usize| &fits[per_node[i].0.expect("a node with a ratio has a fit")];
    let mut harm_of: HashMap<Vec<u64>, f64> = HashMap::default();
    for &i in &tied {
        fingerprint(&nodes[i], &mut k);
        let h = memo(&mut harm_of, &k, || {
            harm(&nodes[i], job, &layout_of(i).threads_per_numa)
        });
        harm_ratio[i] = Some(h);
    }
    let b = *tied
        .iter()
        .min_by(|&&a, &&b| {
            let (ha, hb) = (harm_ratio[a].unwrap_or(1.0), harm_ratio[b].unwrap_or(1.0));
            ha.total_cmp(&hb).then(a.cmp(&b))
        })
        .expect("the least ratio belongs to some node");
    let fit = layout_of(b);
    let reason = format!(
        "{}: predicted T_cont/T_clean {:.3} ({}), the least of {} nodes where it fits{}",
        nodes[b].name,
        per_node[b].1.unwrap_or(1.0),
        fit.layout,
        per_node.iter().filter(|(f, _)| f.is_some()).count(),
        match harm_ratio[b] {
            Some(h) if h > 1.0 + 1e-9 =>
                format!("; slows what runs there by up to {:.1}%", (h - 1.0) * 100.0),
            _ => String::new(),
        }
    );
    NodeChoice {
        node: Some(b),
        threads_per_numa: fit.threads_per_numa.clone(),
        reason,
        scores: scores(&harm_ratio),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use herd_model::Contention;

    fn e5_2670(name: &str, running: Vec<Placed>) -> NodeState {
        let used: Vec<u32> = (0..2)
            .map(|k| running.iter().map(|p| p.threads_per_node[k]).sum())
            .collect();
        NodeState {
            name: name.into(),
            mem: MemSystem {
                node_mu: vec![51.2 / 64.0; 2],
                link_mu: 32.0 / 64.0,
                request_ns: 6.4,
                remote_ratio: vec![vec![1.0, 1.7], vec![1.7, 1.0]],
                contention: Contention::MM1,
            },
            free_per_numa: used.iter().map(|u| 8 - u).collect(),
            distances: vec![vec![10.0, 21.0], vec![21.0, 10.0]],
            running,
        }
    }

    fn character(beta_ns: f64) -> Character {
        Character {
            beta_ns,
            accesses_per_thread: 1e10,
            shared_fraction: 0.5,
        }
    }

    fn scattered(beta_ns: f64) -> Placed {
        Placed {
            character: character(beta_ns),
            threads_per_node: vec![4, 4],
            memory: Vec::new(),
        }
    }

    #[test]
    fn a_memory_heavy_job_avoids_the_node_with_a_memory_heavy_job() {
        let nodes = vec![
            e5_2670("n1", vec![scattered(2.0)]),
            e5_2670("n2", vec![scattered(400.0)]),
        ];
        let job = |beta| JobRequest {
            threads: 8,
            layout: LayoutRequest::Scatter,
            character: character(beta),
        };
        let heavy = Selector::Model.choose(&nodes, &job(2.0));
        assert_eq!(heavy.node, Some(1), "{}", heavy.reason);
        assert!(heavy.reason.contains("T_cont/T_clean"));
        let (on1, on2) = (
            heavy.scores[0].slowdown_ratio.unwrap(),
            heavy.scores[1].slowdown_ratio.unwrap(),
        );
        assert!(on1 > on2 && on2 >= 1.0, "{on1} {on2}");
        // A compute job barely notices either neighbour.
        let light = Selector::Model.choose(&nodes, &job(4000.0));
        let r: Vec<f64> = light.scores.iter().map(|s| s.slowdown_ratio.unwrap()).collect();
        assert!(r.iter().all(|x| *x < 1.01), "{r:?}");
        // Slurm's order takes the first node whatever runs there.
        assert_eq!(Selector::Slurm.choose(&nodes, &job(2.0)).node, Some(0));
    }

    #[test]
    fn a_full_node_is_skipped_and_no_room_is_said() {
        let full = e5_2670("n1", vec![scattered(2.0), scattered(2.0)]);
        let job = JobRequest {
            threads: 8,
            layout: LayoutRequest::Auto,
            character: character(10.0),
        };
        let c = Selector::Model.choose(&[full.clone(), e5_2670("n2", vec![])], &job);
        assert_eq!(c.node, Some(1));
        assert!(!c.scores[0].fits);
        for s in [Selector::Model, Selector::Slurm, Selector::LeastLoaded] {
            let none = s.choose(std::slice::from_ref(&full), &job);
            assert_eq!(none.node, None);
            assert!(none.reason.contains("no node has 8 free CPUs"));
        }
    }

    /// `pick` answers as `choose` does, without the scores: over nodes
    /// full, empty, alike (ties, settled by harm) and different, for every
    /// selector, layout and size of job.
    #[test]
    fn pick_chooses_as_choose_does() {
        let half = |beta: f64| Placed {
            threads_per_node: vec![4, 0],
            ..scattered(beta)
        };
        let nodes = vec![
            e5_2670("n1", vec![scattered(2.0), scattered(2.0)]),
            e5_2670("n2", vec![scattered(400.0)]),
            e5_2670("n3", vec![]),
            e5_2670("n4", vec![half(2.0)]),
            e5_2670("n5", vec![half(2.0)]),
            e5_2670("n6", vec![scattered(2.0)]),
            e5_2670("n7", vec![half(50.0), half(3.0)]),
            e5_2670("n8", vec![]),
        ];
        let layouts = [
            LayoutRequest::Auto,
            LayoutRequest::Scatter,
            LayoutRequest::Compact,
        ];
        let mut told = 0;
        for selector in [Selector::Model, Selector::Slurm, Selector::LeastLoaded] {
            for threads in [1, 4, 8, 12, 16, 17] {
                for beta in [1.0, 20.0, 4000.0] {
                    for layout in layouts {
                        let job = JobRequest {
                            threads,
                            layout,
                            character: character(beta),
                        };
                        let chosen = selector.choose(&nodes, &job);
                        assert_eq!(chosen.scores.len(), nodes.len());
                        told += usize::from(chosen.scores.iter().any(|s| s.harm_ratio.is_some()));
                        let picked = selector.pick(&nodes, &job);
                        assert!(picked.scores.is_empty());
                        assert_eq!(
                            picked,
                            NodeChoice {
                                scores: Vec::new(),
                                ..chosen
                            }
                        );
                    }
                }
            }
        }
        assert!(told > 0, "some choice among alike nodes was settled by harm");
    }

    #[test]
    fn auto_layout_scatters_a_memory_bound_job_and_names_the_layout() {
        let node = e5_2670("n1", vec![]);
        let job = JobRequest {
            threads: 8,
            layout: LayoutRequest::Auto,
            character: Character {
                shared_fraction: 0.1,
                ..character(1.0)
            },
        };
        let c = Selector::Model.choose(std::slice::from_ref(&node), &job);
        assert_eq!(c.threads_per_numa, vec![4, 4], "{}", c.reason);
        assert!(c.reason.contains("scatter"));
        let by_name = |n| Selector::parse(n).map(Selector::name);
        assert_eq!(by_name("least-loaded"), Some("least-loaded"));
        assert_eq!(by_name("numa:model"), Some("numa:model"));
        assert_eq!(by_name("nope"), None);
    }
}
