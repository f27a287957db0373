//! What `herd daemon` and the other herd commands say to each other over
//! the daemon's Unix socket (`daemon.sock` in its state directory, by
//! default `/run/herd`): one JSON object per line each way.
//!
//! - `{"op":"status"}`: the daemon answers with its [`Status`].
//! - `{"op":"lease","name":N,"policy":S,"want":K}`: a `herd run`,
//!   `batch` or `attach` (which adds `"pid":P`, the process it attached
//!   to) registers its programs and asks for CPUs; the
//!   daemon answers `{"cpus":"0-3"}` (or `{"error":...}`) and holds them
//!   for it while the connection stays open. The command places its
//!   threads itself, on those CPUs only; when it ends, or dies, the
//!   connection closes and the daemon takes them back.
//!
//! - `{"op":"slurm","job":J,"end":false}`: a Slurm prolog registers job J
//!   (root only); its processes (`SLURM_JOB_ID=J` in their environment)
//!   then match rules with `slurm = true`; the epilog sends `"end":true`.
//!   The answer is `{}` or `{"error":...}`.
//!
//! The daemon knows the asking command by its credentials (`SO_PEERCRED`):
//! its programs are its descendants, which the daemon's rules then leave
//! alone; a lease for another process its caller could not signal is
//! refused.

use std::io::{BufRead, BufReader, Write};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::{Deserialize, Serialize};

/// The socket in a state directory.
pub fn socket_path(state_dir: &Path) -> PathBuf {
    state_dir.join("daemon.sock")
}

/// A request to the daemon.
#[derive(Debug, Serialize, Deserialize, PartialEq)]
#[serde(tag = "op", rename_all = "lowercase")]
pub enum Request {
    /// What the daemon manages.
    Status,
    /// CPUs for a program another herd command manages.
    Lease {
        /// The process it manages when that is not the asking command's
        /// own child (`herd attach`); `None`: the command's own programs,
        /// which the daemon knows by the command's pid (`SO_PEERCRED`).
        #[serde(default)]
        pid: Option<i32>,
        /// Its name, for status and metrics.
        name: String,
        /// The policy the command runs it under.
        policy: String,
        /// How many CPUs it would use (0: the daemon decides).
        want: usize,
    },
    /// A Slurm job starts (its prolog) or ended (its epilog): while
    /// registered, its processes match rules with `slurm = true`.
    Slurm {
        /// The job's id.
        job: u64,
        /// Whether it ended.
        #[serde(default)]
        end: bool,
    },
}

/// The daemon's answer to a lease.
#[derive(Debug, Serialize, Deserialize, PartialEq)]
pub struct LeaseReply {
    /// The CPUs granted, as a list (`0-3,8`), when granted.
    #[serde(default)]
    pub cpus: Option<String>,
    /// Why not, when refused.
    #[serde(default)]
    pub error: Option<String>,
}

/// One job the daemon manages or registered.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct JobStatus {
    /// The daemon's id for it.
    pub id: u64,
    /// Its main process.
    pub pid: i32,
    /// Its name (`comm`, or what a command said).
    pub name: String,
    /// The rule that took it, or `herd run` etc. for a registered program.
    pub rule: String,
    /// The policy it runs under.
    pub policy: String,
    /// Why that policy (`auto` rules).
    pub reason: String,
    /// How it came: `rule`, `adopted` (by a restarted daemon) or `registered`.
    pub source: String,
    /// `managed`, or `waiting` (no CPU free for it: left to the kernel).
    pub state: String,
    /// The CPUs it holds (empty while waiting, or under `linux`).
    pub cpus: String,
    /// Busy threads when it was admitted.
    pub threads: usize,
    /// Decisions its policy made.
    pub decisions: u64,
    /// Thread placements its plans made.
    pub placements: u64,
    /// CPU time its policy's decisions took, in seconds.
    pub decide_s: f64,
    /// Moves of its threads between CPUs seen at its decisions.
    #[serde(default)]
    pub migrations: u64,
}

/// The daemon's state, as `herd daemon status` shows it.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Default)]
pub struct Status {
    /// The daemon's process.
    pub pid: i32,
    /// Its config file.
    pub config: String,
    /// How it finds new processes.
    pub discovery: String,
    /// /proc scans so far.
    pub scans: u64,
    /// Processes seen that no rule takes (load, untouched), at the last scan.
    pub unmanaged: usize,
    /// The daemon's own CPU time, in seconds.
    pub cpu_s: f64,
    /// Jobs that ended since it started.
    pub jobs_ended: u64,
    /// Guard back-offs in jobs that ended.
    pub guard_backoffs: u64,
    /// Config reloads refused (the old config stayed in force).
    pub reloads_refused: u64,
    /// The jobs, by id.
    pub jobs: Vec<JobStatus>,
}

impl Status {
    /// One line: the daemon, its config, its jobs and what it costs.
    pub fn headline(&self) -> String {
        format!(
            "herd daemon (pid {}), {}: {} jobs, {} processes left alone; discovery: {}; {} scans; {:.2} s CPU",
            self.pid,
            self.config,
            self.jobs.len(),
            self.unmanaged,
            self.discovery,
            self.scans,
            self.cpu_s
        )
    }
}

/// A connection to a running daemon, or `None` when none answers at
/// `state_dir` (no socket, or a socket left by a daemon that is gone).
pub fn connect(state_dir: &Path) -> Option<UnixStream> {
    let s = UnixStream::connect(socket_path(state_dir)).ok()?;
    // A daemon that stops answering must not hang a herd run.
    s.set_read_timeout(Some(Duration::from_secs(5))).ok()?;
    Some(s)
}

/// Sends `req` on `stream` and reads one line of answer.
pub fn ask<T: for<'de> Deserialize<'de>>(stream: &UnixStream, req: &Request) -> std::io::Result<T> {
    let mut line = serde_json::to_string(req).map_err(std::io::Error::other)?;
    line.push('\n');
    (&*stream).write_all(line.as_bytes())?;
    let mut answer = String::new();
    BufReader::new(stream).read_line(&mut answer)?;
    serde_json::from_str(&answer).map_err(|e| std::io::Error::other(format!("the daemon's answer: {e}")))
}

/// A lease the daemon granted: hold it while the program runs.
pub struct Lease {
    /// The CPUs granted.
    pub cpus: herd_topo::CpuSet,
    _conn: UnixStream,
}

/// Asks a daemon at `state_dir`, if one runs, for CPUs for `pid`: `None`
/// when no daemon answers; an error when one answered and refused.
pub fn lease(
    state_dir: &Path,
    pid: Option<i32>,
    name: &str,
    policy: &str,
    want: usize,
) -> Option<Result<Lease, String>> {
    let conn = connect(state_dir)?;
    let req = Request::Lease {
        pid,
        name: name.to_string(),
        policy: policy.to_string(),
        want,
    };
    Some(match ask::<LeaseReply>(&conn, &req) {
        Err(e) => Err(format!("the daemon did not answer: {e}")),
        Ok(LeaseReply { error: Some(e), .. }) => Err(e),
        Ok(LeaseReply { cpus: Some(c), .. }) => herd_topo::CpuSet::parse_list(&c)
            .map(|cpus| Lease { cpus, _conn: conn })
            .map_err(|e| format!("the daemon granted '{c}': {e}")),
        Ok(_) => Err("the daemon answered neither CPUs nor an error".into()),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn requests_are_one_json_line_each_tagged_by_op() {
        let r = Request::Lease {
            pid: Some(7),
            name: "a".into(),
            policy: "static:compact".into(),
            want: 1,
        };
        let text = serde_json::to_string(&r).unwrap();
        assert!(text.starts_with(r#"{"op":"lease","pid":7"#), "{text}");
        assert_eq!(serde_json::from_str::<Request>(&text).unwrap(), r);
        assert_eq!(
            serde_json::from_str::<Request>(r#"{"op":"status"}"#).unwrap(),
            Request::Status
        );
    }
}
