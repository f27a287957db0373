//! herd's choices before a job runs, pure functions over what is known:
//!
//! - [`node`]: on which cluster node a job runs, and its layout there (S2),
//!   by a node selector; [`placement`] names the selectors and S2's
//!   references for the cluster simulation;
//! - [`character`]: a job's S2 characteristics from what is known of its
//!   memory traffic;
//! - [`slurm`]: the require/prefer/any table `herd slurm watch` writes;
//! - [`units`]: how many units a program should get (S0 §2.3);
//! - [`auto`]: the policy a daemon rule with `policy = "auto"` gives a program;
//! - [`share`]: which CPUs the machine-wide daemon gives each job it manages.
//!
//! `herd place`, `herd slurm`, `herd sim` on cluster scenarios, `herd run
//! --threads auto` and `herd db show` all decide here; the CLI only reads
//! files and prints.

pub mod auto;
pub mod character;
pub mod node;
pub mod placement;
pub mod share;
pub mod slurm;
pub mod units;

pub use placement::{ClusterPlacement, REFERENCES};
