//! S2's outcomes judged by the node simulator (issue 26), not by the model
//! that chooses. The cluster simulation's node selectors (`numa:model`
//! above all) predict a job's time on a node with S2's closed-form M/M/1
//! program model (`herd_model::numa`); judging them with the same model
//! made S2's figures circular. With the node-simulator judge, the rate at
//! which each job on a node progresses comes from running that node's mix
//! in herd's node-level world (threads pinned where the selector laid
//! them out, the kernel model sharing CPUs, per-thread memory streams,
//! remote accesses over the link, the shared data first-touched where the
//! job's first thread ran): the same world S1 and S3 are simulated in.
//!
//! A job is written to the world in S2's own terms: each thread makes
//! accesses (one cache line each) with `beta` ns of other work between
//! them, a `shared_fraction` of them to data on its first thread's node
//! and the rest to its own node. Every job of the mix restarts when it
//! ends, so the mix holds while each job's first run is timed; that run's
//! length gives the job's time per access in this mix. Mixes recur (the
//! same jobs on the same layouts), so results are cached by mix.

use std::collections::HashMap;
use std::fmt::Write as _;

use herd_model::ModelParams;
use herd_model::numa::Placed;
use herd_topo::Machine;

use crate::Scenario;

/// Each job's first run alone lasts about this long in the world.
const RUN_NS: f64 = 1e9;

/// The node simulator as a judge, with its cache.
#[derive(Debug)]
pub(crate) struct NodeJudge<'a> {
    machine: &'a Machine,
    machine_spec: &'a str,
    model: &'a ModelParams,
    cache: HashMap<Vec<u64>, Vec<f64>>,
    /// Mixes simulated, and mixes found in the cache.
    pub runs: u64,
    pub hits: u64,
}

/// A job's place in a mix, bit-exact: equal keys, equal rates.
fn key(p: &Placed) -> Vec<u64> {
    let c = &p.character;
    let mut k = vec![c.beta_ns.to_bits(), c.shared_fraction.to_bits()];
    k.extend(p.threads_per_node.iter().map(|&t| u64::from(t)));
    k
}

impl<'a> NodeJudge<'a> {
    pub fn new(machine: &'a Machine, machine_spec: &'a str, model: &'a ModelParams) -> Self {
        NodeJudge {
            machine,
            machine_spec,
            model,
            cache: HashMap::new(),
            runs: 0,
            hits: 0,
        }
    }

    /// Nanoseconds per access of each job of `mix` when the mix runs
    /// together on one node; `None` if the world refused the mix (a bug:
    /// the cluster checks every placement when the scenario is read).
    pub fn ns_per_access(&mut self, mix: &[Placed]) -> Option<Vec<f64>> {
        if mix.is_empty() {
            return Some(Vec::new());
        }
        // A canonical order, so a mix is found whatever order its jobs
        // came in; the answer is put back in the caller's order.
        let keys: Vec<Vec<u64>> = mix.iter().map(key).collect();
        let mut order: Vec<usize> = (0..mix.len()).collect();
        order.sort_by(|&a, &b| keys[a].cmp(&keys[b]));
        let whole: Vec<u64> = order
            .iter()
            .flat_map(|&i| keys[i].iter().copied().chain([u64::MAX]))
            .collect();
        let sorted = match self.cache.get(&whole) {
            Some(v) => {
                self.hits += 1;
                v.clone()
            }
            None => {
                self.runs += 1;
                let jobs: Vec<&Placed> = order.iter().map(|&i| &mix[i]).collect();
                let v = self.simulate(&jobs)?;
                self.cache.insert(whole, v.clone());
                v
            }
        };
        let mut out = vec![0.0; mix.len()];
        for (k, &i) in order.iter().enumerate() {
            out[i] = sorted[k];
        }
        Some(out)
    }

    fn simulate(&self, jobs: &[&Placed]) -> Option<Vec<f64>> {
        let request_ns = self.model.request_ns;
        let freq = self.model.freq_ghz;
        #[derive(serde::Serialize)]
        struct Model<'m> {
            model: &'m ModelParams,
        }
        let mut text = format!(
            "name = \"node\"\nperiod_ms = 1000\n[machine]\nsynthetic = \"{}\"\n{}\n",
            self.machine_spec,
            toml::to_string(&Model { model: self.model }).ok()?
        );
        // Each job's CPUs: the next free ones of each NUMA node it asks for.
        let nodes: Vec<Vec<u32>> = self
            .machine
            .numa_nodes()
            .iter()
            .map(|n| n.cpus.iter().collect())
            .collect();
        let mut next = vec![0usize; nodes.len()];
        let mut accesses = Vec::new();
        for (i, p) in jobs.iter().enumerate() {
            let mut cpus = Vec::new();
            for (k, &t) in p.threads_per_node.iter().enumerate() {
                let on = nodes.get(k)?;
                cpus.extend(on.get(next[k]..next[k] + t as usize)?.iter().map(u32::to_string));
                next[k] += t as usize;
            }
            // One instruction is one access: `beta` of other work, then a
            // line from memory (its unloaded cost is the model's request
            // time); a beta of 0 would leave the core no time at all.
            let beta = p.character.beta_ns.max(1e-3);
            let per_access_ns = beta + request_ns;
            let n = (RUN_NS / per_access_ns).max(1.0);
            accesses.push(n);
            let _ = write!(
                text,
                "[[job]]\nname = \"j{i}\"\nthreads = {}\nrestart = true\ncpus = \"{}\"\npin_threads = true\n\
                 [[job.phase]]\ninstructions = {n:e}\nipc = {:e}\nbytes_per_instr = 64\n\
                 memory = {{ shared = {} }}\n",
                cpus.len(),
                cpus.join(","),
                1.0 / (freq * per_access_ns),
                p.character.shared_fraction.clamp(0.0, 1.0),
            );
        }
        let scenario = Scenario::parse(&text, "node", &|_| Err("no xml".into())).ok()?;
        let r = crate::run_one(&scenario, &crate::SimPolicy::linux(), 1).ok()?;
        r.jobs
            .iter()
            .zip(&accesses)
            .map(|(j, n)| Some(j.turnaround_s? * 1e9 / n))
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use herd_model::numa::Character;

    fn placed(beta_ns: f64, layout: Vec<u32>) -> Placed {
        Placed {
            character: Character {
                beta_ns,
                accesses_per_thread: 1e9,
                shared_fraction: 0.5,
            },
            threads_per_node: layout,
            memory: Vec::new(),
        }
    }

    #[test]
    fn a_memory_bound_mix_is_slower_per_access_than_each_job_alone_and_cached() {
        let spec = "package:2 numa:1 l3:1 core:8";
        let m = Machine::synthetic(spec).unwrap();
        let model = ModelParams {
            node_bw_gbps: 34.0,
            link_bw_gbps: 42.5,
            contention: herd_model::Contention::MM1,
            ..ModelParams::default()
        };
        let mut judge = NodeJudge::new(&m, spec, &model);
        let heavy = placed(2.0, vec![4, 4]);
        let alone = judge.ns_per_access(std::slice::from_ref(&heavy)).unwrap()[0];
        // Alone: at least its unloaded cost per access.
        assert!(alone >= 2.0 + model.request_ns, "{alone}");
        let both = judge.ns_per_access(&[heavy.clone(), heavy.clone()]).unwrap();
        assert!(
            both[0] > 1.1 * alone && (both[0] - both[1]).abs() < 1e-6 * both[0],
            "{both:?} vs {alone}"
        );
        // A light job beside it, in either order: the same answers, once.
        let light = placed(500.0, vec![4, 4]);
        let a = judge.ns_per_access(&[heavy.clone(), light.clone()]).unwrap();
        let b = judge.ns_per_access(&[light, heavy]).unwrap();
        assert_eq!(a, vec![b[1], b[0]]);
        assert_eq!((judge.runs, judge.hits), (3, 1));
    }
}
