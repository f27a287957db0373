//! The parts of the `herd` command that are worth reaching from outside
//! the binary: the formats of its input files, parsed without I/O, and the
//! daemon's socket protocol (`daemon_wire`), so that the fuzzer (`fuzz/`)
//! and the tests can feed them anything.

pub mod daemon_config;
pub mod daemon_wire;
pub mod files;
pub mod from_trace;
pub mod fuzz;
pub mod trace;
