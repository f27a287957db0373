//! What this machine lets herd do, and why not: the probe behind `herd doctor`.
//!
//! A missing capability is a normal state. Each probe says yes or no, the
//! path it used, and the reason, so the user can tell what herd will fall
//! back to. File probes read below an injectable root so tests can fake a
//! machine; perf_event probes are real syscalls.

use std::fs;
use std::path::{Path, PathBuf};

use herd_topo::Machine;
use serde::Serialize;

use crate::perf::{self, Event};

/// Where the probe reads `/proc` and `/sys` from.
#[derive(Debug, Clone)]
pub struct Roots {
    /// The proc filesystem, normally `/proc`.
    pub proc_dir: PathBuf,
    /// The sys filesystem, normally `/sys`.
    pub sys_dir: PathBuf,
}

impl Default for Roots {
    fn default() -> Self {
        Self {
            proc_dir: "/proc".into(),
            sys_dir: "/sys".into(),
        }
    }
}

/// One thing herd may or may not be able to use here.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Capability {
    /// Stable key, e.g. `hw_counters.instructions`, `cgroup_v1.cpuset`.
    pub name: String,
    /// Whether herd can use it.
    pub available: bool,
    /// Why, or why not.
    pub reason: String,
    /// The file, mount point or syscall used to decide.
    pub path: Option<String>,
}

/// How herd will confine whole programs to CPUs on this machine.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum CpusetBackend {
    /// A cpuset in the unified (v2) hierarchy.
    CgroupV2,
    /// A cpuset in the v1 `cpuset` hierarchy.
    CgroupV1,
    /// No usable cpuset: per-thread `sched_setaffinity` only.
    AffinityOnly,
}

/// How herd will pause programs for time-sliced co-scheduling.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum PauseBackend {
    /// `cgroup.freeze` in the unified hierarchy.
    CgroupV2Freeze,
    /// The v1 `freezer` controller.
    CgroupV1Freezer,
    /// SIGSTOP/SIGCONT to the process group.
    Signals,
}

/// The whole probe result.
#[derive(Debug, Clone, Serialize)]
pub struct Report {
    /// Every capability probed, in a fixed order.
    pub capabilities: Vec<Capability>,
    /// The cpuset mechanism herd will use.
    pub cpuset: CpusetBackend,
    /// Where that cpuset hierarchy is mounted, if any.
    pub cpuset_path: Option<String>,
    /// The pause mechanism herd will use.
    pub pause: PauseBackend,
    /// Where that freezer hierarchy is mounted, if herd pauses through one.
    pub pause_path: Option<String>,
}

impl Report {
    /// The capability called `name`.
    pub fn get(&self, name: &str) -> Option<&Capability> {
        self.capabilities.iter().find(|c| c.name == name)
    }
}

fn cap(name: &str, available: bool, reason: impl Into<String>, path: Option<&Path>) -> Capability {
    Capability {
        name: name.to_string(),
        available,
        reason: reason.into(),
        path: path.map(|p| p.display().to_string()),
    }
}

/// A line of `/proc/self/mounts`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Mount {
    /// Mount point.
    pub dir: PathBuf,
    /// Filesystem type (`cgroup`, `cgroup2`, `resctrl`, ...).
    pub fstype: String,
    /// Mount options, split on commas.
    pub options: Vec<String>,
}

/// Parses `/proc/*/mounts` text. Malformed lines are skipped: the kernel
/// writes this file, and one odd line must not hide the others.
pub fn parse_mounts(text: &str) -> Vec<Mount> {
    text.lines()
        .filter_map(|line| {
            let mut f = line.split_whitespace();
            let (_dev, dir, fstype, opts) = (f.next()?, f.next()?, f.next()?, f.next()?);
            Some(Mount {
                // The kernel escapes spaces in paths as \040.
                dir: PathBuf::from(dir.replace("\\040", " ")),
                fstype: fstype.to_string(),
                options: opts.split(',').map(str::to_string).collect(),
            })
        })
        .collect()
}

fn v1_mount<'a>(mounts: &'a [Mount], controller: &str) -> Option<&'a Mount> {
    mounts
        .iter()
        .find(|m| m.fstype == "cgroup" && m.options.iter().any(|o| o == controller))
}

fn writable(path: &Path) -> bool {
    use std::os::unix::ffi::OsStrExt;
    let Ok(c) = std::ffi::CString::new(path.as_os_str().as_bytes()) else {
        return false;
    };
    // SAFETY: c is a valid NUL-terminated string; access() only reads it.
    unsafe { libc::access(c.as_ptr(), libc::W_OK) == 0 }
}

/// Probes everything `herd doctor` reports.
pub fn probe(machine: &Machine, roots: &Roots) -> Report {
    let mut caps = Vec::new();
    let paranoid = fs::read_to_string(roots.proc_dir.join("sys/kernel/perf_event_paranoid"))
        .ok()
        .and_then(|s| s.trim().parse::<i32>().ok());
    for (name, event) in [
        ("hw_counters.instructions", Event::Instructions),
        ("hw_counters.cycles", Event::Cycles),
        ("hw_counters.llc_misses", Event::LlcMisses),
        ("sw_counters.task_clock", Event::TaskClock),
        ("sw_counters.context_switches", Event::ContextSwitches),
        ("sw_counters.cpu_migrations", Event::CpuMigrations),
    ] {
        let path = Path::new("perf_event_open");
        caps.push(match perf::open_counter(event, 0) {
            Ok(_fd) => cap(
                name,
                true,
                format!("opened '{}' on this thread", event.name()),
                Some(path),
            ),
            Err(e) => cap(name, false, perf::explain_open_error(&e, paranoid), Some(path)),
        });
    }
    caps.push(probe_schedstat(roots));
    caps.push(probe_psi(roots));

    let mounts = parse_mounts(&fs::read_to_string(roots.proc_dir.join("self/mounts")).unwrap_or_default());
    let (v1_cpuset, v2_cpuset, v1_freezer, v2_freeze) = probe_cgroups(&mounts, roots);
    let chosen = choose(&mounts, [&v1_cpuset, &v2_cpuset, &v1_freezer, &v2_freeze]);
    caps.extend([v1_cpuset, v2_cpuset, v1_freezer, v2_freeze]);
    caps.push(probe_resctrl(&mounts, roots));
    caps.push(probe_rapl(roots));
    caps.push(probe_tick(roots));
    caps.extend(probe_machine(machine, roots));
    // Tried for real, on a thread of its own that then exits.
    let rt = std::thread::spawn(|| {
        let r = crate::control::set_realtime(1);
        let _ = crate::control::set_normal();
        r
    })
    .join()
    .unwrap_or_else(|_| Err(std::io::Error::other("the probe thread panicked")));
    caps.push(match rt {
        Ok(()) => cap(
            "realtime",
            true,
            "SCHED_FIFO allowed: herd run --realtime keeps its loop on time",
            None,
        ),
        Err(e) => cap(
            "realtime",
            false,
            format!("SCHED_FIFO refused ({e}): herd's loop competes with busy programs at normal priority"),
            None,
        ),
    });
    caps.push(match crate::proc_events::ProcEvents::open() {
        Ok(_) => cap(
            "proc_connector",
            true,
            "netlink proc connector subscribed: herd daemon sees every fork and exec as it happens (and scans /proc as well), and a child born on a CPU herd pinned its creator to gets its program's CPUs at birth",
            None,
        ),
        Err(e) => cap(
            "proc_connector",
            false,
            format!("netlink proc connector refused ({e}; it needs root and CONFIG_PROC_EVENTS): herd daemon finds new processes by /proc scans alone, and a child born on a CPU herd pinned its creator to runs there until herd's next look"),
            None,
        ),
    });
    let taskstats = crate::taskstats::Taskstats::open().and_then(|mut t| t.group(std::process::id() as i32));
    caps.push(match taskstats {
        Ok(_) => cap("taskstats", true, "taskstats answers: a live turn skips every thread of a process none of whose threads ran (one request, not a read per thread)", None),
        Err(e) => cap("taskstats", false, format!("taskstats refused ({e}; it needs root and CONFIG_TASKSTATS): a live turn reads each thread's schedstat"), None),
    });
    let (loads, why) = crate::sched_bpf::probe();
    caps.push(cap(
        "sched_bpf",
        loads,
        why,
        Some(Path::new("/sys/kernel/btf/vmlinux")),
    ));
    // SAFETY: geteuid has no preconditions and cannot fail.
    let euid = unsafe { libc::geteuid() };
    caps.push(cap(
        "root",
        euid == 0,
        if euid == 0 {
            "running as root: herd may manage any process".to_string()
        } else {
            format!("running as uid {euid}: herd manages only your own processes")
        },
        None,
    ));
    Report {
        capabilities: caps,
        cpuset: chosen.cpuset,
        cpuset_path: chosen.cpuset_path.map(|p| p.display().to_string()),
        pause: chosen.pause,
        pause_path: chosen.pause_path.map(|p| p.display().to_string()),
    }
}

/// The cpuset and pause mechanisms herd will use, with the mount points of
/// their hierarchies.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Mechanisms {
    /// How programs are confined.
    pub cpuset: CpusetBackend,
    /// The cpuset hierarchy's mount point.
    pub cpuset_path: Option<PathBuf>,
    /// How programs are paused.
    pub pause: PauseBackend,
    /// The freezer hierarchy's mount point.
    pub pause_path: Option<PathBuf>,
}

/// The mechanisms `herd doctor` would pick, without the counter probes.
pub fn mechanisms(roots: &Roots) -> Mechanisms {
    let mounts = parse_mounts(&fs::read_to_string(roots.proc_dir.join("self/mounts")).unwrap_or_default());
    let (a, b, c, d) = probe_cgroups(&mounts, roots);
    choose(&mounts, [&a, &b, &c, &d])
}

/// Prefers v2 over v1 and a cgroup over signals and plain affinity.
fn choose(mounts: &[Mount], [v1_cpuset, v2_cpuset, v1_freezer, v2_freeze]: [&Capability; 4]) -> Mechanisms {
    let v2_dir = || {
        mounts
            .iter()
            .find(|m| m.fstype == "cgroup2")
            .map(|m| m.dir.clone())
    };
    let v1_dir = |c| v1_mount(mounts, c).map(|m| m.dir.clone());
    let (cpuset, cpuset_path) = if v2_cpuset.available {
        (CpusetBackend::CgroupV2, v2_dir())
    } else if v1_cpuset.available {
        (CpusetBackend::CgroupV1, v1_dir("cpuset"))
    } else {
        (CpusetBackend::AffinityOnly, None)
    };
    let (pause, pause_path) = if v2_freeze.available {
        (PauseBackend::CgroupV2Freeze, v2_dir())
    } else if v1_freezer.available {
        (PauseBackend::CgroupV1Freezer, v1_dir("freezer"))
    } else {
        (PauseBackend::Signals, None)
    };
    Mechanisms {
        cpuset,
        cpuset_path,
        pause,
        pause_path,
    }
}

fn probe_schedstat(roots: &Roots) -> Capability {
    let path = roots.proc_dir.join("self/schedstat");
    match fs::read_to_string(&path) {
        Err(e) => cap(
            "schedstat",
            false,
            format!("cannot read it: {e} (kernel without CONFIG_SCHED_INFO)"),
            Some(&path),
        ),
        Ok(text) => {
            let fields: Vec<u64> = text.split_whitespace().filter_map(|f| f.parse().ok()).collect();
            match fields.as_slice() {
                [run_ns, wait_ns, slices] if *run_ns > 0 || *slices > 0 => cap(
                    "schedstat",
                    true,
                    format!("per-task run time and run-queue wait: {run_ns} ns run, {wait_ns} ns waiting"),
                    Some(&path),
                ),
                [_, _, _] => cap(
                    "schedstat",
                    false,
                    "present but all zero: scheduler statistics are off",
                    Some(&path),
                ),
                _ => cap(
                    "schedstat",
                    false,
                    format!("unexpected format: {:?}", text.trim()),
                    Some(&path),
                ),
            }
        }
    }
}

fn probe_psi(roots: &Roots) -> Capability {
    let dir = roots.proc_dir.join("pressure");
    let readable: Vec<&str> = ["cpu", "memory", "io"]
        .into_iter()
        .filter(|r| fs::read_to_string(dir.join(r)).is_ok())
        .collect();
    if readable.is_empty() {
        cap(
            "psi",
            false,
            "no pressure stall information (kernel without CONFIG_PSI, or psi=0)",
            Some(&dir),
        )
    } else {
        cap(
            "psi",
            true,
            format!("readable: {}", readable.join(", ")),
            Some(&dir),
        )
    }
}

fn probe_cgroups(mounts: &[Mount], roots: &Roots) -> (Capability, Capability, Capability, Capability) {
    let v1 = |controller: &str, name: &str, purpose: &str| match v1_mount(mounts, controller) {
        None => cap(
            name,
            false,
            format!("no v1 '{controller}' hierarchy is mounted"),
            None,
        ),
        Some(m) if !writable(&m.dir) => cap(
            name,
            false,
            format!("mounted but not writable by this user: {purpose} needs root"),
            Some(&m.dir),
        ),
        Some(m) => cap(
            name,
            true,
            format!("mounted and writable: {purpose}"),
            Some(&m.dir),
        ),
    };
    let v1_cpuset = v1("cpuset", "cgroup_v1.cpuset", "herd can confine programs to CPUs");
    let v1_freezer = v1("freezer", "cgroup_v1.freezer", "herd can freeze programs");
    let Some(v2) = mounts.iter().find(|m| m.fstype == "cgroup2") else {
        let none = |name: &str| cap(name, false, "no cgroup2 (unified) hierarchy is mounted", None);
        return (
            v1_cpuset,
            none("cgroup_v2.cpuset"),
            v1_freezer,
            none("cgroup_v2.freeze"),
        );
    };
    let controllers_path = v2.dir.join("cgroup.controllers");
    let controllers = fs::read_to_string(&controllers_path).unwrap_or_default();
    let has_cpuset = controllers.split_whitespace().any(|c| c == "cpuset");
    let v2_cpuset = if has_cpuset && writable(&v2.dir) {
        cap(
            "cgroup_v2.cpuset",
            true,
            "the unified hierarchy offers the cpuset controller",
            Some(&v2.dir),
        )
    } else if has_cpuset {
        cap(
            "cgroup_v2.cpuset",
            false,
            "cpuset is offered but the hierarchy is not writable by this user",
            Some(&v2.dir),
        )
    } else {
        let listed = if controllers.trim().is_empty() {
            "none".to_string()
        } else {
            controllers.trim().to_string()
        };
        let bound = if v1_mount(mounts, "cpuset").is_some() {
            "; cpuset is bound to the v1 hierarchy"
        } else {
            ""
        };
        cap(
            "cgroup_v2.cpuset",
            false,
            format!("its controllers are: {listed}{bound}"),
            Some(&controllers_path),
        )
    };
    // cgroup.freeze exists in every non-root cgroup on kernels >= 5.2; look
    // at our own cgroup, or, when we sit at the root, at any child.
    let own = fs::read_to_string(roots.proc_dir.join("self/cgroup"))
        .ok()
        .and_then(|t| {
            t.lines().find_map(|l| {
                l.strip_prefix("0::")
                    .map(|p| p.trim_start_matches('/').to_string())
            })
        })
        .unwrap_or_default();
    let own_dir = v2.dir.join(&own);
    let freeze_file = if own.is_empty() {
        fs::read_dir(&v2.dir)
            .ok()
            .and_then(|mut d| {
                d.find_map(|e| {
                    e.ok()
                        .map(|e| e.path().join("cgroup.freeze"))
                        .filter(|p| p.exists())
                })
            })
            .or_else(|| probe_child_freeze(&v2.dir))
    } else {
        Some(own_dir.join("cgroup.freeze")).filter(|p| p.exists())
    };
    let v2_freeze = match freeze_file {
        Some(f) if writable(&f) || !f.exists() => cap(
            "cgroup_v2.freeze",
            true,
            "child cgroups offer cgroup.freeze",
            Some(&f),
        ),
        Some(f) => cap(
            "cgroup_v2.freeze",
            false,
            "cgroup.freeze is present but not writable by this user",
            Some(&f),
        ),
        None => cap(
            "cgroup_v2.freeze",
            false,
            "no cgroup.freeze in child cgroups (kernel older than 5.2?)",
            Some(&v2.dir),
        ),
    };
    (v1_cpuset, v2_cpuset, v1_freezer, v2_freeze)
}

/// The root cgroup has no cgroup.freeze; only a child shows whether the
/// The kernel's tick, from its build configuration (`/proc/config.gz`, else
/// `/boot/config-RELEASE`). Threads that share a CPU take turns of up to a
/// tick: the scheduler checks for preemption at ticks unless HRTICK is on,
/// which only the debugfs feature switch (root, and not locked down) turns
/// on. So on a 250 Hz kernel a policy that wants finer sharing than 4 ms
/// (PALM with short barrier phases) gets it only from its own moves.
fn probe_tick(roots: &Roots) -> Capability {
    let boot = roots.proc_dir.parent().unwrap_or(Path::new("/")).join("boot");
    let release = fs::read_to_string(roots.proc_dir.join("sys/kernel/osrelease")).unwrap_or_default();
    let gz = roots.proc_dir.join("config.gz");
    let plain = boot.join(format!("config-{}", release.trim()));
    let read_gz = |p: &Path| -> Option<String> {
        let mut text = String::new();
        std::io::Read::read_to_string(
            &mut flate2::read::GzDecoder::new(fs::File::open(p).ok()?),
            &mut text,
        )
        .ok()?;
        Some(text)
    };
    let found = read_gz(&gz)
        .map(|t| (t, gz.clone()))
        .or_else(|| fs::read_to_string(&plain).ok().map(|t| (t, plain.clone())));
    let Some((config, path)) = found else {
        return cap(
            "fine_tick",
            false,
            format!(
                "the kernel's build configuration is not readable ({} or {}): the tick, which bounds how finely threads sharing a CPU take turns, is unknown",
                gz.display(),
                plain.display()
            ),
            None,
        );
    };
    let hz = config
        .lines()
        .find_map(|l| l.strip_prefix("CONFIG_HZ="))
        .and_then(|v| v.trim().parse::<u32>().ok())
        .filter(|&hz| hz > 0);
    let Some(hz) = hz else {
        return cap(
            "fine_tick",
            false,
            "the kernel's configuration names no CONFIG_HZ",
            Some(&path),
        );
    };
    let turn_ms = 1000.0 / hz as f64;
    if hz >= 1000 {
        cap(
            "fine_tick",
            true,
            format!("{hz} Hz: threads sharing a CPU take turns of up to {turn_ms} ms"),
            Some(&path),
        )
    } else {
        cap(
            "fine_tick",
            false,
            format!(
                "{hz} Hz: threads sharing a CPU take turns of up to {turn_ms} ms; pack:palm rotates them itself every period, which herd run --loop-share can shorten at the cost of herd's CPU"
            ),
            Some(&path),
        )
    }
}

/// kernel offers it. Creates and removes an empty child when allowed to.
fn probe_child_freeze(v2_root: &Path) -> Option<PathBuf> {
    if !writable(v2_root) {
        return None;
    }
    let child = v2_root.join(format!("herd-probe-{}", std::process::id()));
    fs::create_dir(&child).ok()?;
    let offered = child.join("cgroup.freeze").exists();
    // An empty cgroup can always be removed; if it cannot, say nothing more.
    let _ = fs::remove_dir(&child);
    offered.then(|| v2_root.join("<child>/cgroup.freeze"))
}

fn probe_resctrl(mounts: &[Mount], roots: &Roots) -> Capability {
    if let Some(m) = mounts.iter().find(|m| m.fstype == "resctrl") {
        let mon = m.dir.join("mon_data");
        return if crate::resctrl::Mbm::discover(&m.dir).is_some() {
            cap(
                "resctrl.mbm",
                true,
                "resctrl counts total memory bandwidth: herd monitors each program it manages",
                Some(&mon),
            )
        } else if mon.is_dir() {
            cap(
                "resctrl.mbm",
                false,
                "resctrl is mounted with monitoring, but without mbm_total_bytes",
                Some(&mon),
            )
        } else {
            cap(
                "resctrl.mbm",
                false,
                "resctrl is mounted but has no mon_data: no bandwidth monitoring",
                Some(&m.dir),
            )
        };
    }
    let filesystems = fs::read_to_string(roots.proc_dir.join("filesystems")).unwrap_or_default();
    if filesystems
        .lines()
        .any(|l| l.split_whitespace().last() == Some("resctrl"))
    {
        cap(
            "resctrl.mbm",
            false,
            "the kernel supports resctrl but it is not mounted: mount -t resctrl resctrl /sys/fs/resctrl",
            None,
        )
    } else {
        cap(
            "resctrl.mbm",
            false,
            "the kernel offers no resctrl: no Intel RDT or AMD PQoS here",
            None,
        )
    }
}

fn probe_rapl(roots: &Roots) -> Capability {
    let dir = roots.sys_dir.join("class/powercap");
    let zones: Vec<PathBuf> = fs::read_dir(&dir)
        .map(|d| {
            d.filter_map(|e| e.ok().map(|e| e.path()))
                .filter(|p| {
                    p.file_name()
                        .and_then(|n| n.to_str())
                        .is_some_and(|n| n.contains("rapl"))
                })
                .collect()
        })
        .unwrap_or_default();
    let Some(zone) = zones.iter().find(|z| z.join("energy_uj").exists()) else {
        return cap(
            "rapl",
            false,
            "no RAPL zone under powercap (not an Intel/AMD host, or a VM that hides it)",
            Some(&dir),
        );
    };
    let energy = zone.join("energy_uj");
    match fs::read_to_string(&energy) {
        Ok(_) => cap(
            "rapl",
            true,
            format!(
                "{} RAPL zone(s); herd reads energy from {}",
                zones.len(),
                crate::rapl::Rapl::discover(&roots.sys_dir)
                    .map_or("none of them".to_string(), |r| r.names.join(", "))
            ),
            Some(&energy),
        ),
        Err(e) => cap(
            "rapl",
            false,
            format!("energy_uj is not readable: {e} (root only since Linux 5.10)"),
            Some(&energy),
        ),
    }
}

fn probe_machine(machine: &Machine, roots: &Roots) -> Vec<Capability> {
    let smt_path = roots.sys_dir.join("devices/system/cpu/smt/active");
    let smt = machine.smt_max();
    let smt_cap = if smt > 1 {
        cap(
            "smt",
            true,
            format!("{smt} hardware threads per core"),
            Some(&smt_path),
        )
    } else {
        let kernel = fs::read_to_string(&smt_path)
            .map(|s| s.trim().to_string())
            .unwrap_or_default();
        let extra = if kernel == "0" {
            " (the kernel reports SMT inactive)"
        } else {
            ""
        };
        cap(
            "smt",
            false,
            format!("one hardware thread per core: SMT policies place like plain cores{extra}"),
            None,
        )
    };
    let nodes = machine.numa_nodes().len();
    let numa_cap = if nodes > 1 {
        cap("numa", true, format!("{nodes} NUMA nodes"), None)
    } else {
        cap(
            "numa",
            false,
            "one NUMA node: all memory is local; NUMA policies have nothing to choose",
            None,
        )
    };
    let kinds = machine.kinds();
    let kinds_cap = if kinds.len() > 1 {
        let list: Vec<String> = kinds
            .iter()
            .map(|k| format!("{} x{} at {:.2}", k.label, k.cpus.len(), k.capacity))
            .collect();
        cap(
            "core_kinds",
            true,
            format!("asymmetric: {}", list.join(", ")),
            None,
        )
    } else {
        cap("core_kinds", false, "symmetric: every core is of one kind", None)
    };
    vec![smt_cap, numa_cap, probe_numa_balancing(nodes, roots), kinds_cap]
}

/// Whether memory follows a thread that herd moves to another node. With
/// the kernel's NUMA balancing it does, over seconds; without it the pages
/// stay where they were first touched, and every move across nodes leaves
/// the thread reaching its memory remotely for the rest of its run (the
/// simulator's `memory = "first-touch"`), which makes policies that move
/// little the better choice there.
fn probe_numa_balancing(nodes: usize, roots: &Roots) -> Capability {
    let path = roots.proc_dir.join("sys/kernel/numa_balancing");
    let setting = fs::read_to_string(&path)
        .ok()
        .and_then(|s| s.trim().parse::<u32>().ok());
    let stays = "memory stays where it was first touched, so a thread moved to another node reaches it \
                 remotely: prefer policies that move little across nodes (amp:comprehensive's numa presets)";
    match setting {
        _ if nodes < 2 => cap(
            "numa_balancing",
            false,
            "one NUMA node: there is no remote memory to balance",
            None,
        ),
        // Bit 0 is NUMA_BALANCING_NORMAL; bit 1 alone only tiers memory.
        Some(v) if v & 1 == 1 => cap(
            "numa_balancing",
            true,
            format!(
                "on ({v}): the kernel moves pages after a thread that moved to another node, over seconds"
            ),
            Some(&path),
        ),
        Some(v) => cap(
            "numa_balancing",
            false,
            format!("off ({v}): {stays}"),
            Some(&path),
        ),
        None => cap(
            "numa_balancing",
            false,
            format!("the kernel offers no NUMA balancing: {stays}"),
            Some(&path),
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MOUNTS: &str = "\
tmpfs /sys/fs/cgroup tmpfs rw,relatime,mode=755 0 0
cgroup /sys/fs/cgroup/cpuset cgroup rw,relatime,cpuset 0 0
cgroup /sys/fs/cgroup/freezer cgroup rw,relatime,freezer 0 0
cgroup2 /sys/fs/cgroup/unified cgroup2 rw,relatime 0 0
broken-line
";

    #[test]
    fn mounts_are_parsed_and_controllers_found() {
        let m = parse_mounts(MOUNTS);
        assert_eq!(m.len(), 4);
        assert_eq!(
            v1_mount(&m, "cpuset").unwrap().dir,
            Path::new("/sys/fs/cgroup/cpuset")
        );
        assert!(v1_mount(&m, "memory").is_none());
    }

    /// A fake root with a v2 hierarchy offering cpuset, as on a systemd host.
    #[test]
    fn v2_cpuset_is_preferred_when_offered() {
        let tmp = tempfile::tempdir().unwrap();
        let cg = tmp.path().join("cgroup");
        fs::create_dir_all(cg.join("herd.slice")).unwrap();
        fs::write(cg.join("cgroup.controllers"), "cpuset cpu io memory pids\n").unwrap();
        fs::write(cg.join("herd.slice/cgroup.freeze"), "0\n").unwrap();
        let proc_dir = tmp.path().join("proc");
        fs::create_dir_all(proc_dir.join("self")).unwrap();
        fs::write(proc_dir.join("self/cgroup"), "0::/herd.slice\n").unwrap();
        let mounts = parse_mounts(&format!("cgroup2 {} cgroup2 rw 0 0\n", cg.display()));
        let roots = Roots {
            proc_dir,
            sys_dir: tmp.path().join("sys"),
        };
        let (v1c, v2c, _, v2f) = probe_cgroups(&mounts, &roots);
        assert!(!v1c.available);
        assert!(v2c.available, "{v2c:?}");
        assert!(v2f.available, "{v2f:?}");
    }

    #[test]
    fn v2_without_cpuset_says_where_cpuset_went() {
        let tmp = tempfile::tempdir().unwrap();
        let cg = tmp.path().join("unified");
        fs::create_dir_all(&cg).unwrap();
        fs::write(cg.join("cgroup.controllers"), "hugetlb\n").unwrap();
        let text = format!(
            "cgroup /x cgroup rw,cpuset 0 0\ncgroup2 {} cgroup2 rw 0 0\n",
            cg.display()
        );
        let roots = Roots {
            proc_dir: tmp.path().join("proc"),
            sys_dir: tmp.path().join("sys"),
        };
        let (_, v2c, _, _) = probe_cgroups(&parse_mounts(&text), &roots);
        assert!(!v2c.available);
        assert!(
            v2c.reason.contains("hugetlb") && v2c.reason.contains("bound to the v1"),
            "{}",
            v2c.reason
        );
    }

    #[test]
    fn rapl_and_schedstat_read_from_the_root() {
        let tmp = tempfile::tempdir().unwrap();
        let zone = tmp.path().join("sys/class/powercap/intel-rapl:0");
        fs::create_dir_all(&zone).unwrap();
        fs::write(zone.join("energy_uj"), "123456\n").unwrap();
        fs::create_dir_all(tmp.path().join("proc/self")).unwrap();
        fs::write(tmp.path().join("proc/self/schedstat"), "0 0 0\n").unwrap();
        let roots = Roots {
            proc_dir: tmp.path().join("proc"),
            sys_dir: tmp.path().join("sys"),
        };
        assert!(probe_rapl(&roots).available);
        let s = probe_schedstat(&roots);
        assert!(!s.available && s.reason.contains("all zero"), "{s:?}");
    }

    #[test]
    fn numa_balancing_is_read_only_where_there_are_nodes_to_balance() {
        let tmp = tempfile::tempdir().unwrap();
        let roots = Roots {
            proc_dir: tmp.path().join("proc"),
            sys_dir: tmp.path().join("sys"),
        };
        let missing = probe_numa_balancing(2, &roots);
        assert!(
            !missing.available && missing.reason.contains("no NUMA balancing"),
            "{missing:?}"
        );
        fs::create_dir_all(tmp.path().join("proc/sys/kernel")).unwrap();
        let file = tmp.path().join("proc/sys/kernel/numa_balancing");
        for (text, on) in [("0\n", false), ("1\n", true), ("2\n", false), ("3\n", true)] {
            fs::write(&file, text).unwrap();
            let c = probe_numa_balancing(4, &roots);
            assert_eq!(c.available, on, "{text:?}: {c:?}");
            assert!(on || c.reason.contains("first touched"), "{c:?}");
        }
        let one = probe_numa_balancing(1, &roots);
        assert!(
            !one.available && one.reason.starts_with("one NUMA node"),
            "{one:?}"
        );
    }

    #[test]
    fn the_tick_comes_from_the_kernels_configuration_gzipped_or_in_boot() {
        let tmp = tempfile::tempdir().unwrap();
        let proc_dir = tmp.path().join("proc");
        fs::create_dir_all(proc_dir.join("sys/kernel")).unwrap();
        fs::write(proc_dir.join("sys/kernel/osrelease"), "6.1.0-test\n").unwrap();
        let roots = Roots {
            proc_dir: proc_dir.clone(),
            sys_dir: tmp.path().join("sys"),
        };
        let none = probe_tick(&roots);
        assert!(!none.available && none.reason.contains("unknown"), "{none:?}");
        // Debian's way: a plain file in /boot.
        fs::create_dir_all(tmp.path().join("boot")).unwrap();
        fs::write(
            tmp.path().join("boot/config-6.1.0-test"),
            "CONFIG_HZ_250=y\nCONFIG_HZ=250\n",
        )
        .unwrap();
        let coarse = probe_tick(&roots);
        assert!(
            !coarse.available && coarse.reason.starts_with("250 Hz") && coarse.reason.contains("4 ms"),
            "{coarse:?}"
        );
        // /proc/config.gz first, where the kernel offers it.
        let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
        std::io::Write::write_all(&mut gz, b"# comment\nCONFIG_HZ=1000\n").unwrap();
        fs::write(proc_dir.join("config.gz"), gz.finish().unwrap()).unwrap();
        let fine = probe_tick(&roots);
        assert!(fine.available && fine.reason.starts_with("1000 Hz"), "{fine:?}");
        assert!(fine.path.unwrap().ends_with("config.gz"));
    }
}
