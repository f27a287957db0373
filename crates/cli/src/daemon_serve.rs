//! What the daemon serves: its Unix socket (status, and leases for `herd
//! run`, `batch` and `attach`, see `daemon_wire`) and, when the config
//! asks, a Prometheus/OpenMetrics endpoint, both from the shared book.

use std::io::{BufRead, BufReader, Write};
use std::os::unix::net::{UnixListener, UnixStream};
use std::sync::{Arc, Mutex};

use herd_plan::share::Ask;
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;

use crate::daemon_jobs::Book;
use crate::daemon_wire::{JobStatus, LeaseReply, Request, Status};

/// What the daemon's threads share.
pub struct Shared {
    /// Who holds which CPUs, and the jobs.
    pub book: Mutex<Book>,
    /// The daemon's own figures (its `jobs` are filled from the book when asked).
    pub status: Mutex<Status>,
    /// Slurm jobs their prologs registered, and whether the scan loop has
    /// yet to look at the processes it left as load again.
    pub slurm: Mutex<(std::collections::BTreeSet<u64>, bool)>,
}

impl Shared {
    /// The status with every job, as of now.
    pub fn snapshot(&self) -> Status {
        let jobs = lock(&self.book).statuses();
        let mut s = lock(&self.status).clone();
        s.jobs = jobs;
        s.cpu_s = herd_runtime::meter::cpu_seconds(libc::RUSAGE_SELF);
        s
    }
}

/// Locks `m`, also after a thread panicked holding it (the book stays
/// usable: every change to it is a single insert or remove).
pub fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// Answers on `listener` until the process ends, a thread per connection.
pub fn serve_socket(listener: UnixListener, shared: Arc<Shared>) {
    for conn in listener.incoming().flatten() {
        let shared = Arc::clone(&shared);
        let _ = std::thread::Builder::new()
            .name("herd-client".into())
            .spawn(move || answer(conn, &shared));
    }
}

/// The peer's (pid, uid), from the kernel.
fn peer(conn: &UnixStream) -> Option<(i32, u32)> {
    use std::os::fd::AsRawFd;
    let mut cred = libc::ucred {
        pid: 0,
        uid: 0,
        gid: 0,
    };
    let mut len = std::mem::size_of::<libc::ucred>() as libc::socklen_t;
    // SAFETY: `cred` and `len` are live locals of the sizes passed.
    let rc = unsafe {
        libc::getsockopt(
            conn.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_PEERCRED,
            (&mut cred as *mut libc::ucred).cast(),
            &mut len,
        )
    };
    (rc == 0).then_some((cred.pid, cred.uid))
}

fn reply(conn: &UnixStream, value: &impl serde::Serialize) -> std::io::Result<()> {
    let mut line = serde_json::to_string(value).map_err(std::io::Error::other)?;
    line.push('\n');
    (&*conn).write_all(line.as_bytes())
}

fn answer(conn: UnixStream, shared: &Shared) {
    let mut lines = BufReader::new(&conn).lines();
    let Some(Ok(first)) = lines.next() else { return };
    match serde_json::from_str::<Request>(&first) {
        Err(e) => {
            let _ = reply(
                &conn,
                &LeaseReply {
                    cpus: None,
                    error: Some(format!("not a request: {e}")),
                },
            );
        }
        Ok(Request::Status) => {
            let _ = reply(&conn, &shared.snapshot());
        }
        Ok(Request::Slurm { job, end }) => {
            let error = match peer(&conn) {
                // SAFETY: geteuid cannot fail.
                Some((_, uid)) if uid == 0 || uid == unsafe { libc::geteuid() } => {
                    let mut s = lock(&shared.slurm);
                    if end {
                        s.0.remove(&job);
                    } else {
                        s.0.insert(job);
                        s.1 = true;
                    }
                    eprintln!(
                        "herd daemon: Slurm job {job} {}",
                        if end { "ended" } else { "registered by its prolog" }
                    );
                    None
                }
                _ => Some("only root or the daemon's user registers Slurm jobs".to_string()),
            };
            let _ = reply(&conn, &LeaseReply { cpus: None, error });
        }
        Ok(Request::Lease {
            pid,
            name,
            policy,
            want,
        }) => {
            let Some((peer_pid, peer_uid)) = peer(&conn) else {
                return;
            };
            match grant_lease(shared, peer_pid, peer_uid, pid, &name, &policy, want) {
                Err(e) => {
                    let _ = reply(
                        &conn,
                        &LeaseReply {
                            cpus: None,
                            error: Some(e),
                        },
                    );
                }
                Ok((id, cpus)) => {
                    let ok = reply(
                        &conn,
                        &LeaseReply {
                            cpus: Some(cpus),
                            error: None,
                        },
                    );
                    if ok.is_ok() {
                        // Held while the command lives: its end closes the socket.
                        for _ in lines.by_ref() {}
                    }
                    lock(&shared.book).release(id);
                }
            }
        }
    }
}

fn grant_lease(
    shared: &Shared,
    peer_pid: i32,
    peer_uid: u32,
    pid: Option<i32>,
    name: &str,
    policy: &str,
    want: usize,
) -> Result<(u64, String), String> {
    let target = pid.unwrap_or(peer_pid);
    if let Some(p) = pid {
        let owner = herd_runtime::procscan::facts(std::path::Path::new("/proc"), p)
            .ok_or_else(|| format!("process {p} does not exist"))?
            .uid;
        if peer_uid != 0 && peer_uid != owner {
            return Err(format!(
                "process {p} is user {owner}'s: a lease is only for a process you could signal yourself"
            ));
        }
    }
    let mut book = lock(&shared.book);
    if let Some(j) = book.jobs.values().find(|j| j.pid == target) {
        return Err(format!(
            "process {target} is managed by the daemon already (rule '{}', {})",
            j.rule, j.policy
        ));
    }
    let free = book
        .machine
        .all_cpus()
        .difference(&book.reserved)
        .difference(&book.all_held())
        .len();
    // Unsaid: half of what is free, so that the next command finds room.
    let want = if want == 0 { free.div_ceil(2) } else { want };
    let ask = Ask {
        want,
        max: None,
        reserve: None,
        share: false,
    };
    let id = book.next_id();
    let cpus = book
        .grant(id, &ask)
        .ok_or_else(|| "every CPU the daemon may give is held by its jobs".to_string())?;
    book.jobs.insert(
        id,
        JobStatus {
            id,
            pid: target,
            name: name.to_string(),
            rule: format!("registered by herd (pid {peer_pid})"),
            policy: policy.to_string(),
            reason: String::new(),
            source: "registered".into(),
            state: "managed".into(),
            cpus: cpus.to_string(),
            threads: want,
            decisions: 0,
            placements: 0,
            decide_s: 0.0,
            migrations: 0,
        },
    );
    Ok((id, cpus.to_string()))
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct JobLabels {
    job: String,
    pid: String,
    name: String,
    rule: String,
    policy: String,
    source: String,
    state: String,
}

/// The metrics of `s` in the OpenMetrics text format, following
/// Prometheus's naming (units last, `_total` on counters).
pub fn metrics_text(s: &Status) -> String {
    let mut reg = Registry::with_prefix("herd");
    let float_counter = |reg: &mut Registry, name: &str, help: &str, v: f64| {
        let c: Counter<f64, std::sync::atomic::AtomicU64> = Counter::default();
        c.inc_by(v);
        reg.register(name, help, c);
    };
    let counter = |reg: &mut Registry, name: &str, help: &str, v: u64| {
        let c: Counter = Counter::default();
        c.inc_by(v);
        reg.register(name, help, c);
    };
    float_counter(
        &mut reg,
        "daemon_cpu_seconds",
        "CPU time the daemon used",
        s.cpu_s,
    );
    counter(
        &mut reg,
        "daemon_scans",
        "Scans of /proc for new processes",
        s.scans,
    );
    counter(
        &mut reg,
        "daemon_jobs_ended",
        "Managed jobs that ended",
        s.jobs_ended,
    );
    counter(
        &mut reg,
        "daemon_guard_backoffs",
        "Times the guard handed a job that has ended back to the kernel",
        s.guard_backoffs,
    );
    counter(
        &mut reg,
        "daemon_config_reloads_refused",
        "Config reloads refused, the old config kept",
        s.reloads_refused,
    );
    let unmanaged: Gauge = Gauge::default();
    unmanaged.set(s.unmanaged as i64);
    reg.register(
        "daemon_unmanaged_processes",
        "Processes no rule takes: load, never touched",
        unmanaged,
    );
    let cpus = Family::<JobLabels, Gauge>::default();
    let threads = Family::<JobLabels, Gauge>::default();
    let decisions = Family::<JobLabels, Counter>::default();
    let placements = Family::<JobLabels, Counter>::default();
    let decide = Family::<JobLabels, Counter<f64, std::sync::atomic::AtomicU64>>::default();
    let migrations = Family::<JobLabels, Counter>::default();
    for j in &s.jobs {
        let l = JobLabels {
            job: j.id.to_string(),
            pid: j.pid.to_string(),
            name: j.name.clone(),
            rule: j.rule.clone(),
            policy: j.policy.clone(),
            source: j.source.clone(),
            state: j.state.clone(),
        };
        let n = herd_topo::CpuSet::parse_list(&j.cpus).map_or(0, |c| c.len());
        cpus.get_or_create(&l).set(n as i64);
        threads.get_or_create(&l).set(j.threads as i64);
        decisions.get_or_create(&l).inc_by(j.decisions);
        placements.get_or_create(&l).inc_by(j.placements);
        decide.get_or_create(&l).inc_by(j.decide_s);
        migrations.get_or_create(&l).inc_by(j.migrations);
    }
    reg.register("job_cpus", "CPUs the job holds", cpus);
    reg.register(
        "job_busy_threads",
        "The job's busy threads when it was last granted CPUs",
        threads,
    );
    reg.register("job_decisions", "Decisions the job's policy made", decisions);
    reg.register(
        "job_placements",
        "Thread placements in the job's plans",
        placements,
    );
    reg.register(
        "job_migrations",
        "Moves of the job's threads between CPUs seen at its decisions",
        migrations,
    );
    reg.register(
        "job_decide_seconds",
        "CPU time the job's policy spent deciding",
        decide,
    );
    let mut out = String::new();
    // Writing into a String cannot fail.
    let _ = prometheus_client::encoding::text::encode(&mut out, &reg);
    out
}

/// OpenMetrics text as Prometheus's classic text format (0.0.4), for the
/// scrapers and checkers that do not ask for OpenMetrics (`promtool check
/// metrics` among them): a counter family is named with its `_total`, and
/// the `# EOF` and `# UNIT` lines go. The client library writes only
/// OpenMetrics; Prometheus's own clients negotiate the two the same way.
pub fn classic_text(openmetrics: &str) -> String {
    let counters: std::collections::BTreeSet<&str> = openmetrics
        .lines()
        .filter_map(|l| l.strip_prefix("# TYPE ")?.strip_suffix(" counter"))
        .collect();
    let mut out = String::with_capacity(openmetrics.len());
    for line in openmetrics.lines() {
        if line == "# EOF" || line.starts_with("# UNIT ") {
            continue;
        }
        let renamed = ["# HELP ", "# TYPE "].iter().find_map(|tag| {
            let rest = line.strip_prefix(tag)?;
            let (name, tail) = rest.split_once(' ')?;
            counters
                .contains(name)
                .then(|| format!("{tag}{name}_total {tail}"))
        });
        out += renamed.as_deref().unwrap_or(line);
        out.push('\n');
    }
    out
}

/// Serves `/metrics` on `server` until the process ends: OpenMetrics to a
/// scraper that accepts it (Prometheus does), else the classic format.
pub fn serve_metrics(server: tiny_http::Server, shared: Arc<Shared>) {
    let header = |v: &str| tiny_http::Header::from_bytes(&b"Content-Type"[..], v.as_bytes()).ok();
    for request in server.incoming_requests() {
        let response = if request.url() == "/metrics" {
            let openmetrics = request.headers().iter().any(|h| {
                h.field.equiv("Accept") && h.value.as_str().contains("application/openmetrics-text")
            });
            let text = metrics_text(&shared.snapshot());
            let (body, kind) = if openmetrics {
                (text, "application/openmetrics-text; version=1.0.0; charset=utf-8")
            } else {
                (classic_text(&text), "text/plain; version=0.0.4; charset=utf-8")
            };
            let mut r = tiny_http::Response::from_string(body);
            if let Some(h) = header(kind) {
                r = r.with_header(h);
            }
            r
        } else {
            tiny_http::Response::from_string("herd daemon: metrics are at /metrics\n").with_status_code(404)
        };
        let _ = request.respond(response);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_job_is_in_the_metrics_with_its_labels() {
        let job = JobStatus {
            id: 3,
            pid: 77,
            name: "compute".into(),
            rule: "a".into(),
            policy: "static:compact".into(),
            reason: String::new(),
            source: "rule".into(),
            state: "managed".into(),
            cpus: "0-1".into(),
            threads: 2,
            decisions: 5,
            placements: 2,
            decide_s: 0.001,
            migrations: 7,
        };
        let s = Status {
            jobs: vec![job],
            scans: 4,
            ..Status::default()
        };
        let text = metrics_text(&s);
        assert!(text.contains("herd_daemon_scans_total 4"), "{text}");
        assert!(
            text.contains(r#"herd_job_cpus{job="3",pid="77",name="compute",rule="a",policy="static:compact",source="rule",state="managed"} 2"#),
            "{text}"
        );
        assert!(text.contains("herd_job_decisions_total{"), "{text}");
        assert!(text.contains("herd_job_migrations_total{job=\"3\""), "{text}");
        assert!(text.trim_end().ends_with("# EOF"), "{text}");
        let classic = classic_text(&text);
        assert!(
            classic.contains("# TYPE herd_daemon_scans_total counter\n"),
            "{classic}"
        );
        assert!(classic.contains("# HELP herd_job_decisions_total "), "{classic}");
        assert!(classic.contains("# TYPE herd_job_cpus gauge\n"), "{classic}");
        assert!(!classic.contains("# EOF"), "{classic}");
    }
}
