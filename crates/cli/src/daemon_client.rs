//! The commands that ask a running `herd daemon` over its socket: `herd
//! daemon status` and `herd daemon slurm` (the daemon itself is
//! `daemon_cmd`).

use std::path::Path;

use crate::common::Failure;
use crate::daemon_wire::{self as wire, Status};

/// `herd daemon slurm`: registers (or, with `end`, ends) a Slurm job
/// with the daemon; without one it says so and succeeds, so a prolog
/// never fails a job for herd's sake.
pub(crate) fn slurm(job: Option<u64>, end: bool, dir: &Path) -> Result<u8, Failure> {
    let job = match job {
        Some(j) => j,
        None => std::env::var("SLURM_JOB_ID")
            .ok()
            .and_then(|v| v.parse().ok())
            .ok_or_else(|| Failure::Input(anyhow::anyhow!("no --job and no SLURM_JOB_ID")))?,
    };
    let Some(conn) = wire::connect(dir) else {
        eprintln!(
            "herd: no herd daemon at {}: Slurm job {job} is not registered",
            wire::socket_path(dir).display()
        );
        return Ok(0);
    };
    let answer: wire::LeaseReply =
        wire::ask(&conn, &wire::Request::Slurm { job, end }).map_err(|e| Failure::Internal(e.into()))?;
    match answer.error {
        Some(e) => Err(Failure::Input(anyhow::anyhow!(
            "the herd daemon refused Slurm job {job}: {e}"
        ))),
        None => Ok(0),
    }
}

/// `herd daemon status`: what the daemon manages, as a table or JSON.
pub(crate) fn status(dir: &Path, json: bool) -> Result<u8, Failure> {
    let conn = wire::connect(dir).ok_or_else(|| {
        Failure::Input(anyhow::anyhow!(
            "no herd daemon answers at {}",
            wire::socket_path(dir).display()
        ))
    })?;
    let s: Status = wire::ask(&conn, &wire::Request::Status).map_err(|e| Failure::Internal(e.into()))?;
    if json {
        crate::output::print(&format!(
            "{}\n",
            serde_json::to_string_pretty(&s).map_err(|e| Failure::Internal(e.into()))?
        ))?;
        return Ok(0);
    }
    let mut out = format!("{}\n", s.headline());
    out += &format!(
        "{:>4} {:>7} {:<16} {:<20} {:<18} {:<10} {:>8} {:>9}\n",
        "job", "pid", "name", "rule", "policy", "state", "cpus", "decisions"
    );
    for j in &s.jobs {
        out += &format!(
            "{:>4} {:>7} {:<16} {:<20} {:<18} {:<10} {:>8} {:>9}\n",
            j.id, j.pid, j.name, j.rule, j.policy, j.state, j.cpus, j.decisions
        );
    }
    crate::output::print(&out)?;
    Ok(0)
}
