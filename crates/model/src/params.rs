//! Model parameters: every default with where it comes from.

use herd_topo::Machine;
use serde::{Deserialize, Serialize};

use crate::{Contention, MemSystem, PowerModel};

/// Bytes in a cache line: one memory request.
pub const LINE_BYTES: f64 = 64.0;

/// Cost of moving a task, by how far it moves. A move within a core costs
/// nothing (siblings share every cache level).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct MigrationCost {
    /// Within an LLC domain: refilling ~1.25 MiB of private L1/L2 at
    /// ~64 GB/s from the shared L3 takes about 20 us.
    pub same_llc_us: f64,
    /// Across LLC domains in a node: refilling a few MiB of working set from
    /// DRAM at single-core bandwidth (~10 GB/s) takes about 250 us.
    pub cross_llc_us: f64,
    /// Across NUMA nodes: as across LLCs, plus remote refills (~1.7x slower).
    pub cross_numa_us: f64,
    /// Moving a job's memory onto the nodes it runs on (herd's memory
    /// follower, `migrate_pages(2)`): each of its threads loses this long.
    /// 100 ms is a few hundred MB (SPEC CPU programs' footprints, S3's
    /// workloads) copied at 2-4 GB/s, an estimate, not a measurement: the
    /// move copies pages while the threads run, stalling those that touch
    /// a page in flight, so charging every thread the whole copy is the
    /// pessimistic side.
    pub pages_ms: f64,
}

impl Default for MigrationCost {
    fn default() -> Self {
        MigrationCost {
            same_llc_us: 20.0,
            cross_llc_us: 250.0,
            cross_numa_us: 500.0,
            pages_ms: 100.0,
        }
    }
}

impl MigrationCost {
    /// The warm-up time a task pays moving from CPU `from` to CPU `to`.
    pub fn cost_ns(&self, m: &Machine, from: u32, to: u32) -> u64 {
        let (Some(a), Some(b)) = (m.cpu(from), m.cpu(to)) else {
            return 0;
        };
        let us = if a.core == b.core {
            0.0
        } else if a.numa != b.numa {
            self.cross_numa_us
        } else if a.llc.is_some() && a.llc == b.llc {
            self.same_llc_us
        } else {
            self.cross_llc_us
        };
        (us * 1000.0) as u64
    }
}

/// The simulator's model of a machine beyond its topology.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct ModelParams {
    /// Frequency of the reference core that phase IPCs are measured on.
    /// 2.5 GHz sits among the seeds' machines (S1's E5410 at 2.33 GHz,
    /// S2's E5-2670 at 2.6, S3's fast cores at 2.7).
    pub freq_ghz: f64,
    /// Speed of each core kind relative to the reference core, weakest
    /// first; defaults to the machine's kind capacities.
    pub kind_speed: Option<Vec<f64>>,
    /// SMT sharing: two busy siblings deliver 1 + sigma of one core (S0: 0.3).
    pub smt_sigma: f64,
    /// Peak bandwidth of each NUMA node's memory controller. 25.6 GB/s is
    /// two channels of DDR3-1600 (2 x 12.8 GB/s), a common per-socket figure
    /// of the seeds' era. S1's bus peaks at 120 transactions/us (7.68 GB/s):
    /// its scenarios set that.
    pub node_bw_gbps: f64,
    /// Peak bandwidth of each interconnect link: one QPI link at 8 GT/s
    /// carries 16 GB/s per direction (Intel's E5-2600 specification).
    pub link_bw_gbps: f64,
    /// Unloaded cost of one cache-line request: 64 B at the ~10 GB/s one
    /// core streams on its own, 6.4 ns.
    pub request_ns: f64,
    /// Remote/local unloaded latency at SLIT distance 21: ~1.7 on two-socket
    /// Xeons (about 135 ns remote vs 80 ns local in Intel MLC runs). Other
    /// distances scale linearly from 10 (local).
    pub remote_latency_ratio: f64,
    /// Which contention law, with its parameters. The default is S1's
    /// superlinear law, with waiting at full load 3x the unloaded cost
    /// (loaded-latency curves show 3-5x near saturation).
    pub contention: Contention,
    /// What moving a task costs.
    pub migration: MigrationCost,
    /// Node power (S0's Dell C6100 by default).
    pub power: PowerModel,
    /// How often the simulated kernel balances run queues: Linux's
    /// busiest-group balancing runs every few ms at the lowest domains.
    pub balance_ms: f64,
    /// How often the kernel trades places between tasks on longer and
    /// shorter run queues, for fairness across CPUs. Linux's balancing at
    /// the package and NUMA levels of a busy machine runs every tens to
    /// hundreds of ms (balance_interval grows with domain size and
    /// busy_factor); 100 ms.
    pub fairness_ms: f64,
    /// `None` (the default): CFS as ideal processor sharing, q tasks on a
    /// CPU each get 1/q of it at every instant. `Some(ms)`: the tasks of a
    /// CPU take turns, one at a time, for this long each (CFS's slice:
    /// sched_latency over the queue length, a few ms). Only turns show
    /// what S1 exploits: which programs run together at an instant, and so
    /// the memory demand, changes from slice to slice, and superlinear
    /// contention makes uneven demand cost more than its average.
    pub timeslice_ms: Option<f64>,
    /// `false` (the default): a new task takes the lowest-numbered of
    /// equally good idle CPUs. `true`: one in an order drawn from the run's
    /// seed. On machines whose CPUs differ, list several seeds and average
    /// (S3 averaged three runs): with two core kinds, the fixed order lets
    /// the scenario's job order decide which programs get the fast cores
    /// under `linux`.
    pub seeded_placement: bool,
    /// Which kernel scheduler `linux` stands for (see [`KernelModel`]).
    pub kernel: KernelModel,
}

/// The generation of Linux's scheduler the simulated kernel behaves as.
/// Neither knows core speed, memory bandwidth or NUMA traffic.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
pub enum KernelModel {
    /// Today's CFS (the default): a waking task looks for an idle core
    /// (`select_idle_sibling`, 2.6.32 on), and balancing also evens out
    /// CPU time across CPUs whose queues differ by one.
    #[default]
    #[serde(rename = "current")]
    Current,
    /// Linux 2.6.27, S3's kernel: run queues balanced by task count alone,
    /// a waking task back on the CPU it last ran on (no idle search), and
    /// no fairness across CPUs: a task keeps whatever CPU share its queue
    /// gives it.
    #[serde(rename = "linux-2.6")]
    Linux26,
}

impl Default for ModelParams {
    fn default() -> Self {
        ModelParams {
            freq_ghz: 2.5,
            kind_speed: None,
            smt_sigma: 0.3,
            node_bw_gbps: 25.6,
            link_bw_gbps: 16.0,
            request_ns: 6.4,
            remote_latency_ratio: 1.7,
            contention: Contention::Superlinear {
                alpha: 3.0,
                exponent: 2.0,
            },
            migration: MigrationCost::default(),
            power: PowerModel::default(),
            balance_ms: 4.0,
            fairness_ms: 100.0,
            timeslice_ms: None,
            seeded_placement: false,
            kernel: KernelModel::Current,
        }
    }
}

impl ModelParams {
    /// Checks ranges; returns the offending field and why.
    pub fn validate(&self, m: &Machine) -> Result<(), (String, String)> {
        let positive = [
            ("freq_ghz", self.freq_ghz),
            ("node_bw_gbps", self.node_bw_gbps),
            ("link_bw_gbps", self.link_bw_gbps),
            ("request_ns", self.request_ns),
            ("balance_ms", self.balance_ms),
            ("fairness_ms", self.fairness_ms),
            ("timeslice_ms", self.timeslice_ms.unwrap_or(1.0)),
        ];
        for (field, v) in positive {
            if !(v.is_finite() && v > 0.0) {
                return Err((field.into(), format!("must be a positive number, got {v}")));
            }
        }
        if !(0.0..=1.0).contains(&self.smt_sigma) {
            return Err((
                "smt_sigma".into(),
                format!("must be in [0, 1], got {}", self.smt_sigma),
            ));
        }
        if !(self.remote_latency_ratio.is_finite() && self.remote_latency_ratio >= 1.0) {
            return Err(("remote_latency_ratio".into(), "must be a number >= 1".into()));
        }
        if let Some(speeds) = &self.kind_speed {
            if speeds.len() != m.kinds().len() {
                let why = format!(
                    "gives {} speeds but the machine has {} core kinds",
                    speeds.len(),
                    m.kinds().len()
                );
                return Err(("kind_speed".into(), why));
            }
            if speeds.iter().any(|s| !(s.is_finite() && *s > 0.0)) {
                return Err(("kind_speed".into(), "speeds must be positive numbers".into()));
            }
        }
        if let Contention::Superlinear { alpha, exponent } = self.contention {
            if !(alpha.is_finite() && alpha >= 0.0 && exponent.is_finite() && exponent > 0.0) {
                return Err(("contention".into(), "alpha must be >= 0 and exponent > 0".into()));
            }
        }
        let m_us = &self.migration;
        for (field, v) in [
            ("same_llc_us", m_us.same_llc_us),
            ("cross_llc_us", m_us.cross_llc_us),
            ("cross_numa_us", m_us.cross_numa_us),
            ("pages_ms", m_us.pages_ms),
        ] {
            if !(v.is_finite() && v >= 0.0) {
                return Err((format!("migration.{field}"), format!("must be >= 0, got {v}")));
            }
        }
        Ok(())
    }

    /// Speed of kind `k` relative to the reference core.
    pub fn kind_speed(&self, m: &Machine, k: usize) -> f64 {
        self.kind_speed.as_ref().map_or(m.kinds()[k].capacity, |v| v[k])
    }

    /// The machine's memory system under these parameters.
    pub fn mem_system(&self, m: &Machine) -> MemSystem {
        let n = m.numa_nodes().len();
        let per_ns = |gbps: f64| gbps / LINE_BYTES; // GB/s = bytes/ns
        let ratio = |i: usize, j: usize| -> f64 {
            if i == j {
                return 1.0;
            }
            let d = m.numa_distances().map_or(21.0, |d| d[i][j]);
            (1.0 + (self.remote_latency_ratio - 1.0) * (d - 10.0) / 11.0).max(1.0)
        };
        MemSystem {
            node_mu: vec![per_ns(self.node_bw_gbps); n],
            link_mu: per_ns(self.link_bw_gbps),
            request_ns: self.request_ns,
            remote_ratio: (0..n).map(|i| (0..n).map(|j| ratio(i, j)).collect()).collect(),
            contention: self.contention,
        }
    }
}
