//! herd's machine model.
//!
//! A [`Machine`] is small and immutable: packages, NUMA nodes (memory-only
//! ones too, with distances when known), last-level-cache domains, cores,
//! CPUs (hardware threads, by OS index) and core kinds with a relative
//! capacity. It is built once, by hwloc (this machine, an XML export, a Linux
//! filesystem root) or from a synthetic spec, and then shared read-only by
//! every other crate.
//!
//! Tests elsewhere make a machine in one line:
//! `herd_topo::Machine::synthetic("package:2 core:4 pu:2")`.

mod cpuset;
#[cfg(feature = "hwloc")]
mod hwloc;
mod machine;
mod synthetic;

#[cfg(feature = "hwloc")]
use std::path::Path;
use std::path::PathBuf;

pub use cpuset::{CpuListError, CpuSet, MAX_CPUS};
#[cfg(feature = "hwloc")]
pub use hwloc::{Source, load};
pub use machine::{Core, CoreKind, Cpu, Llc, Machine, MachineBuilder, NumaNode, Package};

/// Why a machine could not be loaded or built.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum TopoError {
    /// A file or directory could not be used.
    #[error("{}: {why}", path.display())]
    Io {
        /// The path given.
        path: PathBuf,
        /// What was wrong with it.
        why: String,
    },
    /// hwloc refused the input.
    #[error("{input}: hwloc could not load it: {why}")]
    Hwloc {
        /// What was being loaded.
        input: String,
        /// hwloc's complaint.
        why: String,
    },
    /// A synthetic spec is malformed.
    #[error("bad synthetic spec '{spec}': {why}")]
    Spec {
        /// The spec as given.
        spec: String,
        /// What is wrong with it.
        why: String,
    },
    /// The description loaded but does not make a usable machine.
    #[error("{input}: {why}")]
    Invalid {
        /// What was being loaded.
        input: String,
        /// The broken invariant.
        why: String,
    },
}

impl Machine {
    /// Builds the machine a synthetic spec describes (see the `synthetic`
    /// module docs for the syntax). Pure Rust; does not call hwloc.
    pub fn synthetic(spec: &str) -> Result<Machine, TopoError> {
        synthetic::parse(spec)
    }

    /// Loads a machine from a path: an hwloc XML file, or a directory holding
    /// a Linux `sys/` and `proc/` tree.
    #[cfg(feature = "hwloc")]
    pub fn from_path(path: &Path) -> Result<Machine, TopoError> {
        if path.is_dir() {
            load(Source::FsRoot(path))
        } else {
            load(Source::Xml(path))
        }
    }

    /// Loads the machine herd is running on.
    #[cfg(feature = "hwloc")]
    pub fn this_machine() -> Result<Machine, TopoError> {
        load(Source::ThisMachine)
    }
}
