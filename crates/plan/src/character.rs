//! A job's S2 characteristics on a node, from what is known of its
//! memory traffic: a measured figure, a hint, or a program key looked up
//! in the figures the profile database holds (else S2's estimate from the
//! nearest cluster of past programs).

use herd_model::numa::{self, Character};
use herd_model::{Contention, MemSystem, ModelParams};
use herd_policy::{Level, hint_share};
use herd_profile::cluster::{Linkage, prior_estimate};
use herd_topo::Machine;

/// How a job's traffic is known.
#[derive(Debug, Clone, PartialEq)]
pub enum Traffic {
    /// Measured, in GB/s alone.
    Gbps(f64),
    /// A memory-intensity hint.
    Hint(Level),
    /// A program key to look up.
    Program(String),
}

/// Complete linkage and a cut at ln 2: a cluster's programs are within a
/// factor of two of each other's traffic.
const PRIOR_CUT: f64 = std::f64::consts::LN_2;

/// A job's S2 characteristics on a node like `mem` with `threads` placed as
/// `placement`, and a sentence saying where its traffic came from.
pub fn character_of(
    traffic: &Traffic,
    mem: &MemSystem,
    placement: &[u32],
    shared_fraction: f64,
    known: &[(String, f64)],
) -> Result<(Character, String), String> {
    let most = numa::max_bw_gbps(mem, placement, &[], shared_fraction).map_err(|e| e.to_string())?;
    let (gbps, source) = match traffic {
        Traffic::Gbps(g) => (*g, format!("{g} GB/s as given")),
        Traffic::Hint(l) => {
            let g = hint_share(*l) * most;
            let name = format!("{l:?}").to_lowercase();
            (
                g,
                format!(
                    "hint {name}: {g:.1} GB/s ({:.0}% of what it can draw)",
                    hint_share(*l) * 100.0
                ),
            )
        }
        Traffic::Program(key) => match known.iter().find(|(k, _)| k == key) {
            Some((_, g)) => (*g, format!("{g:.1} GB/s from its profile")),
            None => match prior_estimate(key, known, Linkage::Complete, PRIOR_CUT) {
                Some((g, members)) => (
                    g,
                    format!(
                        "no profile: {g:.1} GB/s, the mean of the nearest cluster of {} past programs (S2)",
                        members.len()
                    ),
                ),
                None => {
                    let g = hint_share(Level::Medium) * most;
                    (
                        g,
                        format!("no profile and no history: assumed medium, {g:.1} GB/s"),
                    )
                }
            },
        },
    };
    // The figure must be below what the threads can draw; a profile from
    // a larger machine can exceed it, and is then held just under.
    let cap = numa::DRAWABLE_SHARE * most;
    let (gbps, source) = if gbps > cap {
        (
            cap,
            format!("{source}, held at {cap:.1} GB/s: more than its threads can draw here"),
        )
    } else {
        (gbps, source)
    };
    // Time alone does not change a slowdown ratio: one second.
    numa::from_alone(mem, placement, 1.0, gbps, shared_fraction).map(|c| (c, source))
}

/// S2's law (M/M/1 controllers and links) on herd's default bandwidths.
pub fn s2_model() -> ModelParams {
    ModelParams {
        contention: Contention::MM1,
        ..ModelParams::default()
    }
}

/// Free CPUs per NUMA node of `machine`, all of them.
pub fn numa_cpus(machine: &Machine) -> Vec<u32> {
    machine.numa_nodes().iter().map(|n| n.cpus.len() as u32).collect()
}
