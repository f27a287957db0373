//! The learn step of herd's loop (observe -> learn -> decide -> act): what
//! a program does, learned from its observations within a run and across
//! runs (S1, Xu, Wu and Feng).
//!
//! - [`phase`]: slices of a program's execution grouped into phases by a
//!   signature, and per-phase solo estimates of IPC and bandwidth that
//!   trust only samples taken in low contention ([`valid`]).
//! - [`markov`]: the next phase predicted from the phases seen so far.
//! - [`behaviour`]: S3's per-task monitor: LLC miss rate per interval,
//!   LB, stable phase changes, IB = alpha GB + (1 - alpha) LB.
//! - [`cluster`]: S2's a-priori estimates: hierarchical clustering of past
//!   jobs and the nearest cluster of a new one.
//! - [`iabw`]: S1's ideal average bandwidth of a group and the choice of
//!   co-runners whose predicted bandwidth sums closest to it.
//!
//! Everything here is a pure function of its inputs: the same observations
//! give the same profile in simulation and on a real machine.

pub mod behaviour;
pub mod cluster;
pub mod iabw;
pub mod markov;
pub mod phase;
pub mod program;
pub mod valid;

pub use markov::Markov;
pub use phase::{CODE_BUCKETS, CODE_THRESHOLD, PhaseEstimate, PhaseId, PhaseTable, Signature, code_bucket};
pub use program::{ProgramProfile, RunLearner, Slice};
pub use valid::{LowContention, Validity};
