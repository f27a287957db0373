//! herd's Linux edge: the only crate that touches `/proc`, `/sys`, cgroups,
//! perf_event and signals.
//!
//! Architecture invariant: everything above this crate (policies, engine,
//! simulator) is pure; a missing kernel feature shows up here as data
//! (a [`doctor::Capability`] that is not available), never as a panic.

pub mod cgroup;
pub mod control;
pub mod doctor;
pub mod fds;
pub mod heartbeats;
pub mod ipsample;
pub mod keeper;
pub mod live;
pub mod meter;
mod netlink;
pub mod pair_probe;
pub mod peers;
pub mod perf;
pub mod probe;
pub mod proc_events;
pub mod procfs;
pub mod procscan;
pub mod progress;
pub mod rapl;
pub mod resctrl;
pub mod sched_bpf;
pub mod spawn;
pub mod taskstats;
