//! `herd doctor`: what this machine lets herd do, and why not.

use std::fmt::Write;

use clap::Args;
use herd_runtime::doctor::{self, CpusetBackend, PauseBackend, Report, Roots};
use serde::Serialize;

use crate::common::Failure;
use crate::output;

/// Arguments of `herd doctor`.
#[derive(Args, Debug)]
pub struct DoctorArgs {
    /// Print JSON instead of text.
    #[arg(long)]
    json: bool,
}

#[derive(Serialize)]
struct DoctorJson<'a> {
    machine: String,
    #[serde(flatten)]
    report: &'a Report,
}

/// `herd doctor`.
pub fn run(args: &DoctorArgs) -> Result<(), Failure> {
    let machine = crate::common::this_machine()?;
    let report = doctor::probe(&machine, &Roots::default());
    if args.json {
        output::print_json(&DoctorJson {
            machine: machine.source.clone(),
            report: &report,
        })?;
    } else {
        output::print(&text(&report))?;
    }
    Ok(())
}

fn text(r: &Report) -> String {
    let mut s = String::new();
    let width = r.capabilities.iter().map(|c| c.name.len()).max().unwrap_or(0);
    for c in &r.capabilities {
        let mark = if c.available { "yes" } else { "no " };
        let path = c.path.as_ref().map(|p| format!(" [{p}]")).unwrap_or_default();
        let _ = writeln!(s, "{:width$}  {mark}  {}{path}", c.name, c.reason);
    }
    let cpuset = match r.cpuset {
        CpusetBackend::CgroupV2 => "a cgroup v2 cpuset",
        CpusetBackend::CgroupV1 => "a cgroup v1 cpuset",
        CpusetBackend::AffinityOnly => "per-thread affinity only (no usable cpuset)",
    };
    let at = r
        .cpuset_path
        .as_ref()
        .map(|p| format!(" at {p}"))
        .unwrap_or_default();
    let _ = writeln!(s, "\nherd will confine programs with {cpuset}{at}.");
    let pause = match r.pause {
        PauseBackend::CgroupV2Freeze => "the cgroup v2 freezer",
        PauseBackend::CgroupV1Freezer => "the cgroup v1 freezer",
        PauseBackend::Signals => "SIGSTOP/SIGCONT",
    };
    let _ = writeln!(s, "herd will pause programs with {pause}.");
    let hw = [
        "hw_counters.instructions",
        "hw_counters.cycles",
        "hw_counters.llc_misses",
    ];
    if hw.iter().all(|n| r.get(n).is_some_and(|c| !c.available)) {
        let _ = writeln!(
            s,
            "No hardware counters: policies use /proc CPU time, schedstat and program hints instead of IPC and miss rates; \
             herd opens no perf event on a program (one would slow every context switch on the machine for a count /proc bounds)."
        );
    }
    s
}
