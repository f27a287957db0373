//! End to end with a real Slurm (S2's node choice in production): munge,
//! slurmctld and two slurmd on loopback make a two-node cluster whose
//! job_submit.lua is integrations/slurm's. With a memory-heavy job running
//! on n1, `herd slurm watch` writes the table, and a new memory-heavy job
//! is sent to n2 while a compute job is left to Slurm. Each job's prolog
//! (integrations/slurm/herd-prolog) registers it with the node's `herd
//! daemon`, whose `slurm = true` rule places its processes.
//!
//! Needs Debian's slurmctld, slurmd, slurm-client and munge (`make test`
//! installs them) and root (slurmd runs jobs as their users). Without them
//! the test says why and passes: it cannot run on such a machine. Daemons
//! use a private munge socket, non-default ports and their own SLURM_CONF,
//! and are stopped by PID when the test ends, however it ends.

use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

/// Daemons started by the test, stopped (TERM, then KILL) on drop.
struct Cluster {
    dir: tempfile::TempDir,
    children: Vec<(String, Child)>,
}

impl Cluster {
    fn conf(&self) -> PathBuf {
        self.dir.path().join("slurm.conf")
    }

    /// A Slurm client command against this cluster.
    fn cmd(&self, prog: &str, args: &[&str]) -> Output {
        Command::new(prog)
            .args(args)
            .env("SLURM_CONF", self.conf())
            .output()
            .unwrap_or_else(|e| panic!("{prog}: {e}"))
    }

    fn start(&mut self, name: &str, prog: &str, args: &[&str], env: &[(&str, &Path)]) {
        let log = std::fs::File::create(self.dir.path().join(format!("{name}.out"))).unwrap();
        let mut c = Command::new(prog);
        c.args(args)
            .env("SLURM_CONF", self.conf())
            .stdout(Stdio::from(log.try_clone().unwrap()))
            .stderr(Stdio::from(log));
        for (k, v) in env {
            c.env(k, v);
        }
        let child = c.spawn().unwrap_or_else(|e| panic!("{prog}: {e}"));
        self.children.push((name.to_string(), child));
    }

    fn logs(&self) -> String {
        let mut s = String::new();
        for f in ["slurmctld.log", "slurmctld.out", "n1.out", "n2.out", "munged.out"] {
            let text = std::fs::read_to_string(self.dir.path().join(f)).unwrap_or_default();
            let tail: Vec<&str> = text.lines().rev().take(15).collect();
            s += &format!(
                "--- {f}\n{}\n",
                tail.into_iter().rev().collect::<Vec<_>>().join("\n")
            );
        }
        s
    }
}

impl Drop for Cluster {
    fn drop(&mut self) {
        // Cancel the jobs and wait until Slurm has ended them: scancel only
        // asks, and a job step outlives a stopped slurmd.
        let _ = self.cmd("scancel", &["--quiet", "--user", "root"]);
        let deadline = Instant::now() + Duration::from_secs(20);
        while Instant::now() < deadline && !text(&self.cmd("squeue", &["-h"])).is_empty() {
            std::thread::sleep(Duration::from_millis(200));
        }
        // Daemons in reverse order of start: slurmd, slurmctld, munged.
        for (_, c) in self.children.iter().rev() {
            // SAFETY: kill(2) on a child's pid; no memory is involved.
            unsafe { libc::kill(c.id() as i32, libc::SIGTERM) };
        }
        let deadline = Instant::now() + Duration::from_secs(10);
        for (_, c) in self.children.iter_mut().rev() {
            while c.try_wait().ok().flatten().is_none() {
                if Instant::now() > deadline {
                    let _ = c.kill();
                    let _ = c.wait();
                    break;
                }
                std::thread::sleep(Duration::from_millis(50));
            }
        }
    }
}

fn on_path(prog: &str) -> bool {
    std::env::var_os("PATH").is_some_and(|p| std::env::split_paths(&p).any(|d| d.join(prog).is_file()))
}

/// `N` distinct free ports. The listeners are held until all are bound:
/// one bound and dropped at a time, the kernel may hand out the same port
/// twice (CI once gave slurmctld and a slurmd the same port: "slurmctld is
/// talking with itself").
fn free_ports<const N: usize>() -> [u16; N] {
    let held: Vec<TcpListener> = (0..N)
        .map(|_| TcpListener::bind("127.0.0.1:0").unwrap())
        .collect();
    std::array::from_fn(|k| held[k].local_addr().unwrap().port())
}

fn wait_for(what: &str, cluster: &Cluster, secs: u64, mut ok: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(secs);
    while !ok() {
        assert!(
            Instant::now() < deadline,
            "timed out waiting for {what}\n{}",
            cluster.logs()
        );
        std::thread::sleep(Duration::from_millis(200));
    }
}

fn text(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).trim().to_string()
}

/// `scontrol show job` fields of `id`, as key=value pairs.
fn job_field(cluster: &Cluster, id: &str, key: &str) -> String {
    let out = text(&cluster.cmd("scontrol", &["show", "job", "-o", id]));
    out.split_whitespace()
        .find_map(|kv| kv.strip_prefix(&format!("{key}=")))
        .unwrap_or("")
        .to_string()
}

fn sbatch(cluster: &Cluster, args: &[&str]) -> String {
    let mut all = vec!["--parsable", "-n", "1", "-o", "/dev/null"];
    all.extend_from_slice(args);
    all.extend_from_slice(&["--wrap", "sleep 300"]);
    let out = cluster.cmd("sbatch", &all);
    assert!(
        out.status.success(),
        "sbatch {args:?}: {}\n{}",
        String::from_utf8_lossy(&out.stderr),
        cluster.logs()
    );
    text(&out)
}

#[test]
fn a_memory_heavy_job_goes_to_the_other_node_and_a_compute_job_is_left_to_slurm() {
    let missing: Vec<&str> = [
        "munged",
        "slurmctld",
        "slurmd",
        "sbatch",
        "squeue",
        "sinfo",
        "scontrol",
    ]
    .into_iter()
    .filter(|p| !on_path(p))
    .collect();
    if !missing.is_empty() {
        eprintln!(
            "skipped: Slurm cannot run here: {} not installed (Debian: slurmctld slurmd slurm-client munge)",
            missing.join(", ")
        );
        return;
    }
    // SAFETY: geteuid(2) has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        eprintln!("skipped: slurmd must run as root to start jobs");
        return;
    }
    let mut cluster = Cluster {
        dir: tempfile::tempdir().unwrap(),
        children: Vec::new(),
    };
    let d = cluster.dir.path().to_path_buf();
    for sub in ["state", "spool-n1", "spool-n2"] {
        std::fs::create_dir(d.join(sub)).unwrap();
    }
    let key: Vec<u8> = (0..1024u32)
        .map(|i| (i.wrapping_mul(2_654_435_761) >> 13) as u8)
        .collect();
    std::fs::write(d.join("munge.key"), key).unwrap();
    std::fs::set_permissions(
        d.join("munge.key"),
        std::os::unix::fs::PermissionsExt::from_mode(0o400),
    )
    .unwrap();
    let sock = d.join("munge.sock");
    let arg = |flag: &str, f: &str| format!("{flag}={}", d.join(f).display());
    cluster.start(
        "munged",
        "munged",
        &[
            "-F",
            "--force",
            &format!("--socket={}", sock.display()),
            &arg("--key-file", "munge.key"),
            &arg("--log-file", "munged.log"),
            &arg("--pid-file", "munged.pid"),
            &arg("--seed-file", "munge.seed"),
        ],
        &[],
    );
    wait_for("munged's socket", &cluster, 10, || sock.exists());

    // The node's herd daemon, and the prolog and epilog that register each
    // job with it (integrations/slurm/herd-prolog, told where the daemon is).
    let herd_state = d.join("herd");
    let herd_rules = d.join("herd.toml");
    std::fs::write(
        &herd_rules,
        "[daemon]\nscan_interval_ms = 100\n[[rule]]\nname = \"slurm\"\npolicy = \"static:compact\"\n\
         [rule.match]\nslurm = true\n",
    )
    .unwrap();
    let hook = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../integrations/slurm/herd-prolog");
    for (name, end) in [("prolog.sh", ""), ("epilog.sh", " --end")] {
        std::fs::write(
            d.join(name),
            format!(
                "#!/bin/sh\nHERD={} HERD_STATE_DIR={} exec {}{end}\n",
                env!("CARGO_BIN_EXE_herd"),
                herd_state.display(),
                hook.display()
            ),
        )
        .unwrap();
        std::fs::set_permissions(d.join(name), std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    }
    cluster.start(
        "herd-daemon",
        env!("CARGO_BIN_EXE_herd"),
        &[
            "daemon",
            "--config",
            herd_rules.to_str().unwrap(),
            "--state-dir",
            herd_state.to_str().unwrap(),
        ],
        &[("HERD_RUN_DIR", &herd_state)],
    );
    let herd_status = || -> Option<serde_json::Value> {
        let out = Command::new(env!("CARGO_BIN_EXE_herd"))
            .args(["daemon", "status", "--json", "--state-dir"])
            .arg(&herd_state)
            .output()
            .ok()?;
        out.status
            .success()
            .then(|| serde_json::from_slice(&out.stdout).ok())?
    };
    wait_for("herd's daemon", &cluster, 10, || herd_status().is_some());

    let [ctld, slurmd, p1, p2] = free_ports::<4>();
    let dir = d.display();
    let conf = format!(
        "ClusterName=herdtest\nSlurmctldHost=localhost\nSlurmctldPort={ctld}\nSlurmdPort={slurmd}\n\
         AuthType=auth/munge\nAuthInfo=socket={sock}\nCredType=cred/munge\nSlurmUser=root\nSlurmdUser=root\n\
         StateSaveLocation={dir}/state\nSlurmdSpoolDir={dir}/spool-%n\nSlurmctldPidFile={dir}/slurmctld.pid\n\
         SlurmdPidFile={dir}/slurmd-%n.pid\nSlurmctldLogFile={dir}/slurmctld.log\nSlurmdLogFile={dir}/slurmd-%n.log\n\
         ProctrackType=proctrack/pgid\nTaskPlugin=task/none\nSelectType=select/cons_tres\nSelectTypeParameters=CR_CPU\n\
         SchedulerType=sched/builtin\nJobSubmitPlugins=lua\nReturnToService=2\nMpiDefault=none\n\
         SlurmdParameters=config_overrides\nJobCompType=jobcomp/none\nAccountingStorageType=accounting_storage/none\n\
         NodeName=n1 NodeHostname=localhost NodeAddr=127.0.0.1 Port={p1} CPUs=2 Features=herd_n1 State=UNKNOWN\n\
         NodeName=n2 NodeHostname=localhost NodeAddr=127.0.0.1 Port={p2} CPUs=2 Features=herd_n2 State=UNKNOWN\n\
         PartitionName=main Nodes=n1,n2 Default=YES MaxTime=INFINITE State=UP\n\
         Prolog={dir}/prolog.sh\nEpilog={dir}/epilog.sh\n",
        sock = sock.display()
    );
    std::fs::write(cluster.conf(), conf).unwrap();
    // slurmctld finds job_submit.lua beside slurm.conf.
    let lua = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../integrations/slurm/job_submit.lua");
    std::fs::copy(&lua, d.join("job_submit.lua")).unwrap();
    let table = d.join("slurm-table");
    let conf = cluster.conf();
    let conf = conf.to_str().unwrap();
    cluster.start(
        "slurmctld",
        "slurmctld",
        &["-D", "-f", conf],
        &[("HERD_SLURM_TABLE", &table)],
    );
    wait_for("slurmctld", &cluster, 30, || {
        cluster.cmd("sinfo", &["-h"]).status.success()
    });
    cluster.start("n1", "slurmd", &["-D", "-N", "n1", "-f", conf], &[]);
    cluster.start("n2", "slurmd", &["-D", "-N", "n2", "-f", conf], &[]);
    wait_for("both nodes idle", &cluster, 60, || {
        text(&cluster.cmd("sinfo", &["-N", "-h", "-o", "%N %t"])) == "n1 idle\nn2 idle"
    });

    // A memory-heavy job on n1: it names its node, so the script leaves it.
    let first = sbatch(&cluster, &["-w", "n1", "--comment", "herd:hint=high"]);
    wait_for("the first job to run", &cluster, 30, || {
        job_field(&cluster, &first, "JobState") == "RUNNING"
    });
    assert_eq!(job_field(&cluster, &first, "NodeList"), "n1");
    // Its prolog registered it with herd's daemon, whose rule placed it:
    // the batch script (SLURM_JOB_ID in its environment) on one CPU.
    let mut placed = None;
    wait_for("herd's daemon to place the job", &cluster, 20, || {
        placed = herd_status().and_then(|s| {
            s["jobs"]
                .as_array()?
                .iter()
                .find(|j| j["rule"] == "slurm" && j["state"] == "managed")
                .map(|j| j["pid"].as_i64().unwrap())
        });
        placed.is_some()
    });
    let pid = placed.unwrap();
    let environ = std::fs::read(format!("/proc/{pid}/environ")).unwrap();
    assert!(
        environ
            .split(|b| *b == 0)
            .any(|kv| kv == format!("SLURM_JOB_ID={first}").as_bytes()),
        "process {pid} is not job {first}'s"
    );
    wait_for("the job's script pinned to one CPU", &cluster, 10, || {
        std::fs::read_to_string(format!("/proc/{pid}/status"))
            .unwrap_or_default()
            .lines()
            .find_map(|l| l.strip_prefix("Cpus_allowed_list:"))
            .is_some_and(|c| !c.trim().contains(['-', ',']))
    });

    let watch = Command::new(env!("CARGO_BIN_EXE_herd"))
        .args([
            "slurm",
            "watch",
            "--once",
            "--machine",
            "package:1 numa:1 core:2",
            "--table",
        ])
        .arg(&table)
        .env("SLURM_CONF", cluster.conf())
        .env("XDG_DATA_HOME", d.join("no-db"))
        .output()
        .unwrap();
    assert!(
        watch.status.success(),
        "{}\n{}",
        String::from_utf8_lossy(&watch.stderr),
        cluster.logs()
    );
    let written = std::fs::read_to_string(&table).unwrap();
    assert!(written.starts_with("herd-slurm-table\t1\nwritten\t"), "{written}");
    assert!(
        written.contains("place\thint=high\t1\trequire\tn2\t"),
        "{written}"
    );
    assert!(written.contains("place\thint=low\t1\tany\t-\t"), "{written}");

    // A new memory-heavy job is sent to n2 ...
    let heavy = sbatch(&cluster, &["--comment", "herd:hint=high"]);
    assert_eq!(
        job_field(&cluster, &heavy, "ReqNodeList"),
        "n2",
        "{}",
        cluster.logs()
    );
    wait_for("the heavy job to run", &cluster, 30, || {
        job_field(&cluster, &heavy, "JobState") == "RUNNING"
    });
    assert_eq!(job_field(&cluster, &heavy, "NodeList"), "n2");
    // ... while a compute job's placement does not depend on n1's load:
    // the script leaves it to Slurm.
    let compute = sbatch(&cluster, &["--comment", "herd:hint=low"]);
    assert_eq!(
        job_field(&cluster, &compute, "ReqNodeList"),
        "(null)",
        "{}",
        cluster.logs()
    );
    // A job without a herd comment is untouched too.
    let plain = sbatch(&cluster, &[]);
    assert_eq!(job_field(&cluster, &plain, "ReqNodeList"), "(null)");
    // Two tasks (-n 2, given after the helper's -n 1: the last one counts):
    // the script reads the table's entry for two threads.
    sbatch(&cluster, &["-n", "2", "--comment", "herd:hint=high"]);
    let log = std::fs::read_to_string(d.join("slurmctld.log")).unwrap_or_default();
    assert!(
        log.contains("herd: job wrap (herd:hint=high, 1 CPUs): require n2"),
        "{}",
        cluster.logs()
    );
    assert!(log.contains("(herd:hint=high, 2 CPUs)"), "{}", cluster.logs());
}
