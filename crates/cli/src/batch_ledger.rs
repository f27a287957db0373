//! `herd batch`'s side of the guard across runs
//! ([`herd_engine::guard_runs`]): the batch's earlier makespans, read from
//! the profile database before a run, and the run's own, written after it.
//! A database problem is a warning, never a lost run: the batch then runs
//! under the policy, as without the ledger.

use std::path::Path;

use herd_engine::InCharge;
use herd_engine::guard_runs::{BatchRun, RunsConfig, RunsVerdict, next_run};
use herd_store::{BatchRunRecord, SqliteStore};
use serde::Serialize;

/// Runs read back: enough for the rule's medians and its longest gap.
const HISTORY_RUNS: usize = 1_000;

/// The guard across runs' say on one run, as the report shows it.
#[derive(Debug, Clone, Serialize)]
pub struct AcrossRuns {
    /// Who placed the run and why.
    #[serde(flatten)]
    pub verdict: RunsVerdict,
    /// The same in a sentence.
    pub summary: String,
    /// Whether the in-run guard probes the policy on its schedule: not
    /// when the batch's makespans vouch for it ([`RunsVerdict::vouches`]).
    pub in_run_probes: bool,
}

/// One batch's runs for one policy in the profile database.
pub struct Ledger {
    store: SqliteStore,
    mix: String,
    policy: String,
}

/// The batch's identity: its programs' keys, sorted, one a line, copies
/// repeated.
pub fn mix_key(mut keys: Vec<String>) -> String {
    keys.sort();
    keys.join("\n")
}

impl Ledger {
    /// The ledger of `mix` under `policy` in `db` (or the default
    /// database); `None` when there is no database path (the run's
    /// learning says so) or, with a warning, when it cannot be opened.
    pub fn open(db: Option<&Path>, mix: String, policy: String) -> Option<Ledger> {
        let path = herd_runtime::live::db_path(db)?;
        match SqliteStore::open(&path) {
            Ok(store) => Some(Ledger { store, mix, policy }),
            Err(e) => {
                eprintln!("herd: warning: the guard across runs is off for this batch: {e}");
                None
            }
        }
    }

    /// Who places the next run.
    pub fn next(&self) -> AcrossRuns {
        let history: Vec<BatchRun> = match self.store.batch_runs(&self.mix, &self.policy, HISTORY_RUNS) {
            Ok(runs) => runs
                .iter()
                .map(|r| BatchRun {
                    by: if r.by_kernel {
                        InCharge::Kernel
                    } else {
                        InCharge::Policy
                    },
                    makespan_s: r.makespan_s,
                })
                .collect(),
            Err(e) => {
                eprintln!(
                    "herd: warning: the batch's earlier runs are unreadable, the policy places it: {e}"
                );
                Vec::new()
            }
        };
        let verdict = next_run(&history, &RunsConfig::default());
        let vouched = verdict.vouches();
        AcrossRuns {
            verdict,
            summary: match vouched {
                true => format!("{verdict}; no in-run probes, its makespans vouch for it"),
                false => verdict.to_string(),
            },
            in_run_probes: !vouched,
        }
    }

    /// Records a finished run.
    pub fn record(&mut self, by_kernel: bool, makespan_s: f64, started_unix_s: f64) {
        let r = BatchRunRecord {
            mix: self.mix.clone(),
            policy: self.policy.clone(),
            by_kernel,
            makespan_s,
            started_unix_s,
        };
        if let Err(e) = self.store.record_batch_run(&r) {
            eprintln!("herd: warning: this run of the batch was not recorded: {e}");
        }
    }
}
