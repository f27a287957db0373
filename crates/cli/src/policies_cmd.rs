//! `herd policies`: every policy, one line each, with parameters and defaults.

use std::fmt::Write;

use clap::Args;
use serde::Serialize;

use crate::common::Failure;
use crate::output;

/// Arguments of `herd policies`.
#[derive(Args, Debug)]
pub struct PoliciesArgs {
    /// Print JSON instead of text.
    #[arg(long)]
    json: bool,
}

#[derive(Serialize)]
struct ParamJson {
    key: &'static str,
    /// As `key=value` takes it.
    default: String,
    /// What values it takes, as errors say it.
    accepts: String,
    about: &'static str,
}

#[derive(Serialize)]
struct PolicyJson {
    name: &'static str,
    about: &'static str,
    params: Vec<ParamJson>,
}

/// `herd policies`.
pub fn run(args: &PoliciesArgs) -> Result<(), Failure> {
    let catalog = herd_policy::catalog();
    if args.json {
        let list: Vec<PolicyJson> = catalog
            .iter()
            .map(|p| PolicyJson {
                name: p.name,
                about: p.about,
                params: p
                    .params
                    .iter()
                    .map(|q| ParamJson {
                        key: q.key,
                        default: q.default.to_string(),
                        accepts: q.accepts.to_string(),
                        about: q.about,
                    })
                    .collect(),
            })
            .collect();
        output::print_json(&list)?;
        return Ok(());
    }
    let width = catalog.iter().map(|p| p.name.len()).max().unwrap_or(0);
    let mut s = String::new();
    for p in catalog {
        let _ = writeln!(s, "{:width$}  {}", p.name, p.about);
        for q in p.params {
            let _ = writeln!(
                s,
                "{:width$}    {}={} (default)  {}; takes {}",
                "", q.key, q.default, q.about, q.accepts
            );
        }
    }
    s.push_str("\nUse as --policy NAME[:key=value,...], e.g. --policy static:compact:places=cores\n");
    s.push_str(
        "Every policy but linux runs under herd's guard (--guard on, the default; --guard off for the \
         algorithm as published): short probes in which the kernel places the workload, and where the \
         policy makes less progress than the kernel by more than 2% (heartbeats, else instructions, else \
         CPU time), the kernel gets the workload back, as it does at once when for two periods the policy \
         keeps CPUs idle while its threads wait or busy programs are paused; run summaries, --explain, \
         --json and traces say so. Across runs, `herd batch` compares a batch run again with itself \
         under the kernel by makespan (its second and fourth runs, then one in 40 or fewer, the kernel \
         places): where the policy's runs end more than 2% later the kernel places the batch (one run in \
         40 or fewer goes to the policy to check), and otherwise the policy's runs go without in-run \
         probes, its makespans vouching for it; `herd sim` does the same over S1's learning runs.\n",
    );
    output::print(&s)?;
    Ok(())
}
