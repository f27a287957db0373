//! Every parser of herd's input behind one entry, for the fuzzer
//! (`fuzz/`, `make fuzz`) and for the suite's replay of its corpus
//! (`crates/cli/tests/fuzz_corpus.rs`). The first byte chooses the format;
//! the rest is the text. A parser may refuse anything; it must not panic,
//! hang or allocate without bound (libFuzzer's `-timeout` and
//! `-rss_limit_mb`, and the suite's time bound, check the last two).

use herd_policy::PolicySpec;
use herd_sim::Scenario;
use herd_sim::cluster::ClusterScenario;
use herd_topo::{CpuSet, Machine};

use crate::files::{BatchFile, ClusterFile};

/// The formats, in the order of the first byte (modulo their count).
pub const FORMATS: [&str; 10] = [
    "scenario",
    "cluster-scenario",
    "batch",
    "cluster-file",
    "synthetic-topology",
    "policy-spec",
    "cpu-list",
    "trace",
    "daemon-config",
    "daemon-request",
];

/// Parses `data[1..]` as the format `data[0]` names.
pub fn one(data: &[u8]) {
    let Some((&which, rest)) = data.split_first() else {
        return;
    };
    let Ok(text) = std::str::from_utf8(rest) else {
        return;
    };
    match FORMATS[which as usize % FORMATS.len()] {
        "scenario" => {
            let _ = Scenario::parse(text, "fuzz.toml", &|_| Err("no files here".into()));
        }
        "cluster-scenario" => {
            let _ = ClusterScenario::parse(text, "fuzz.toml");
        }
        "batch" => {
            if let Ok(file) = BatchFile::parse(text) {
                let _ = file.programs(text);
            }
        }
        "cluster-file" => {
            if let Ok(file) = ClusterFile::parse(text) {
                if let Ok(machine) = Machine::synthetic(&file.machine) {
                    let _ = file.model.validate(&machine);
                }
            }
        }
        "synthetic-topology" => {
            let _ = Machine::synthetic(text);
        }
        "policy-spec" => {
            // A spec that parses builds its policy (its parameters are
            // checked together there too).
            if let Ok(spec) = PolicySpec::parse(text) {
                let _ = spec.build();
            }
        }
        "daemon-config" => {
            // Checked against an eight-CPU machine, as `herd daemon --check`
            // checks it against this one.
            let cpus = CpuSet::parse_list("0-7").expect("a CPU list");
            let _ = crate::daemon_config::Config::parse(text, "fuzz.toml", &cpus);
        }
        "daemon-request" => {
            // A line a client writes to the daemon's socket: any local
            // user with access to it may write anything.
            let _ = serde_json::from_str::<crate::daemon_wire::Request>(text);
        }
        "trace" => {
            // Parsed only: replaying arbitrary snapshots through every
            // policy is not fuzzed yet.
            let _ = crate::trace::parse(text);
        }
        _ => {
            let _ = CpuSet::parse_list(text);
        }
    }
}
