//! The parts of the `herd` command that are worth reaching from outside
//! the binary: the formats of its input files, parsed without I/O, so that
//! the fuzzer (`fuzz/`) and the tests can feed them anything.

pub mod daemon_config;
pub mod files;
pub mod from_trace;
pub mod fuzz;
pub mod trace;
