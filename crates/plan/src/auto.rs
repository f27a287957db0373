//! `policy = "auto"` in the daemon's rules: a policy for a program from
//! what earlier runs learned of it and the machine's shape, with the
//! reason, which the daemon logs.
//!
//! In order: a hybrid machine gets `amp:comprehensive` (S3: a compute-bound
//! thread belongs on a fast core whatever else it does); a program whose
//! threads meet at barriers (`pack:palm` found heartbeats between them)
//! gets `pack:palm` (S4); a memory-bound program gets `numa:model` on a
//! machine with several NUMA nodes (S2) and `bw:iabw` on one (S1); anything
//! else, and a program never seen, is left to Linux, which loses nothing.

use herd_profile::ProgramProfile;
use herd_topo::Machine;

/// Bytes per memory request (a cache line), as the profile counts them.
const LINE_BYTES: f64 = 64.0;

/// A program streaming at least this much is memory-bound when the peak
/// is unknown: a tenth of a DDR4 channel pair's ~40 GB/s, where two such
/// programs start to queue at a controller (S1's Fig. 2 sees slowdowns
/// from about a quarter of the peak).
const MEMORY_BOUND_BYTES_PER_S: f64 = 4e9;

/// The share of the calibrated peak from which a program is memory-bound.
const MEMORY_BOUND_PEAK_SHARE: f64 = 0.1;

/// The policy (a catalogue name) and why, for a program whose learned
/// profile is `profile` (`None`: never seen), on `machine`, with the
/// calibrated peak memory bandwidth `peak_bytes_per_s` if known.
pub fn choose(
    profile: Option<&ProgramProfile>,
    machine: &Machine,
    peak_bytes_per_s: Option<f64>,
) -> (&'static str, String) {
    if machine.is_asymmetric() {
        return (
            "amp:comprehensive",
            "the machine has cores of several kinds".into(),
        );
    }
    let Some(p) = profile else {
        return ("linux", "no earlier run of this program is known".into());
    };
    if let Some(b) = p.barrier_beats {
        return (
            "pack:palm",
            format!("its threads meet at barriers ({b} heartbeats between them)"),
        );
    }
    let rate = match (p.mem_requests, p.solo_time_s) {
        (Some(m), Some(t)) if t > 0.0 => Some(m * LINE_BYTES / t),
        _ => None,
    };
    let bound = peak_bytes_per_s.map_or(MEMORY_BOUND_BYTES_PER_S, |peak| peak * MEMORY_BOUND_PEAK_SHARE);
    match rate {
        Some(r) if r >= bound => {
            let policy = if machine.numa_nodes().len() > 1 {
                "numa:model"
            } else {
                "bw:iabw"
            };
            (
                policy,
                format!(
                    "memory-bound: {:.1} GB/s alone, from {:.1} GB/s",
                    r / 1e9,
                    bound / 1e9
                ),
            )
        }
        Some(r) => ("linux", format!("not memory-bound: {:.2} GB/s alone", r / 1e9)),
        None => ("linux", "its profile has no memory traffic measured".into()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_kind_of_program_gets_its_policy_and_a_reason() {
        let uma = Machine::synthetic("package:1 core:4 pu:1").unwrap();
        let numa = Machine::synthetic("package:2 numa:1 core:2 pu:1").unwrap();
        let hybrid = Machine::synthetic(
            "package:1 numa:1 core:2 kind:fast | package:1 numa:1 core:2 capacity:0.5 kind:slow",
        )
        .unwrap();
        assert_eq!(choose(None, &uma, None).0, "linux");
        assert_eq!(choose(None, &hybrid, None).0, "amp:comprehensive");
        let barrier = ProgramProfile {
            barrier_beats: Some(40),
            ..ProgramProfile::default()
        };
        assert_eq!(choose(Some(&barrier), &uma, None).0, "pack:palm");
        // 1e9 lines in 10 s: 6.4 GB/s.
        let streaming = ProgramProfile {
            mem_requests: Some(1e9),
            solo_time_s: Some(10.0),
            ..ProgramProfile::default()
        };
        assert_eq!(choose(Some(&streaming), &uma, None).0, "bw:iabw");
        let (p, why) = choose(Some(&streaming), &numa, None);
        assert_eq!(p, "numa:model");
        assert!(why.contains("6.4 GB/s"), "{why}");
        // Against a calibrated peak of 100 GB/s it is not memory-bound.
        assert_eq!(choose(Some(&streaming), &numa, Some(100e9)).0, "linux");
        assert_eq!(choose(Some(&ProgramProfile::default()), &uma, None).0, "linux");
        // Every name chosen is in the catalogue.
        for name in ["linux", "pack:palm", "bw:iabw", "numa:model", "amp:comprehensive"] {
            assert!(herd_policy::PolicySpec::parse(name).is_ok(), "{name}");
        }
    }
}
