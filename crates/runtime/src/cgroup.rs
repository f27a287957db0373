//! Whole-program cgroups: a cpuset that confines a program and everything it
//! forks, and a freezer that pauses it without signals.
//!
//! Layout: herd makes `herd-<its pid>/` under its own cgroup in each
//! hierarchy it uses, and one `job-<i>/` under that per managed program.
//! Programs start in herd's own cgroup (they are herd's children), so
//! "home", where they go back on release, is herd's own cgroup.
//!
//! A frozen cgroup stays frozen if herd dies: the kernel never thaws it. So
//! herd starts a guard process (`herd __cgroup-guard`, in its own session,
//! deaf to terminal signals) holding the read end of a pipe. When herd exits
//! by any means, SIGKILL included, the pipe closes and the guard thaws every
//! job group, moves its processes home and removes the groups.
//!
//! Only programs herd starts are moved into cgroups: moving a process that
//! `herd attach` found would take it out of the group its owner (systemd, a
//! batch system) put it in.

use std::fs;
use std::io;
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin};

use herd_topo::CpuSet;

pub use crate::keeper::GUARD_ARG;

/// A cgroup operation that failed.
#[derive(Debug, thiserror::Error)]
pub enum CgroupError {
    /// A cgroup file or directory could not be read, written or made.
    #[error("{}: {source}", path.display())]
    Io {
        /// The file or directory.
        path: PathBuf,
        /// What the kernel said.
        source: io::Error,
    },
    /// `/proc/self/cgroup` does not name herd's place in a hierarchy.
    #[error("herd's own cgroup in the {0} hierarchy is not in /proc/self/cgroup")]
    NoHome(String),
    /// The guard process could not be started.
    #[error("cannot start the cgroup guard: {0}")]
    Guard(io::Error),
}

fn io_err(path: &Path) -> impl FnOnce(io::Error) -> CgroupError + '_ {
    move |source| CgroupError::Io {
        path: path.to_path_buf(),
        source,
    }
}

fn write(path: &Path, text: &str) -> Result<(), CgroupError> {
    fs::write(path, text).map_err(io_err(path))
}

fn read(path: &Path) -> Result<String, CgroupError> {
    fs::read_to_string(path).map_err(io_err(path))
}

/// Which cgroup interface a hierarchy speaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Version {
    /// A v1 hierarchy with one controller (`cpuset`, `freezer`).
    V1,
    /// The unified hierarchy.
    V2,
}

/// One hierarchy herd uses.
#[derive(Debug, Clone)]
struct Hierarchy {
    version: Version,
    /// `cpuset` or `freezer`: what the groups are for.
    controller: &'static str,
    /// herd's own cgroup: where programs start and return.
    home: PathBuf,
    /// `home/herd-<pid>`.
    base: PathBuf,
}

impl Hierarchy {
    /// Where `herd-<pid>` goes under herd's own cgroup in the hierarchy
    /// `want` names, if it names one (made by [`Hierarchy::make`]).
    fn plan(
        want: &Option<(Version, PathBuf)>,
        controller: &'static str,
        proc_self_cgroup: &str,
    ) -> Result<Option<Hierarchy>, CgroupError> {
        let Some((version, mount)) = want else {
            return Ok(None);
        };
        let key = (*version == Version::V1).then_some(controller);
        let rel =
            own_path(proc_self_cgroup, key).ok_or_else(|| CgroupError::NoHome(controller.to_string()))?;
        let home = mount.join(rel);
        let base = home.join(format!("herd-{}", std::process::id()));
        Ok(Some(Hierarchy {
            version: *version,
            controller,
            home,
            base,
        }))
    }

    /// Makes `herd-<pid>`.
    fn make(&self) -> Result<(), CgroupError> {
        make_group(&self.base, &self.home, self.version, self.controller)
    }

    fn job(&self, job: usize) -> PathBuf {
        self.base.join(format!("job-{job}"))
    }
}

/// herd's place in a hierarchy, from `/proc/self/cgroup` text: the v2 line
/// (`0::/path`) for `None`, else the v1 line listing `controller`.
pub fn own_path(proc_self_cgroup: &str, controller: Option<&str>) -> Option<String> {
    proc_self_cgroup.lines().find_map(|line| {
        let mut f = line.splitn(3, ':');
        let (id, controllers, path) = (f.next()?, f.next()?, f.next()?);
        let wanted = match controller {
            None => id == "0" && controllers.is_empty(),
            Some(c) => controllers.split(',').any(|x| x == c),
        };
        wanted.then(|| path.trim_start_matches('/').to_string())
    })
}

/// The mechanisms herd was asked to use, with the hierarchies' mount points.
#[derive(Debug, Clone, Default)]
pub struct Request {
    /// Confine programs with a cpuset in this hierarchy.
    pub cpuset: Option<(Version, PathBuf)>,
    /// Pause programs with the freezer of this hierarchy.
    pub freezer: Option<(Version, PathBuf)>,
}

/// What one program's groups hold now.
#[derive(Debug, Clone, Default)]
struct JobState {
    cpus: Option<CpuSet>,
    frozen: bool,
}

/// herd's cgroups for the programs it started.
#[derive(Debug)]
pub struct Cgroups {
    cpuset: Option<Hierarchy>,
    freezer: Option<Hierarchy>,
    jobs: Vec<Option<JobState>>,
    guard: Option<(Child, ChildStdin)>,
}

impl Cgroups {
    /// Makes herd's groups for `request`, reading herd's own place from
    /// `/proc/self/cgroup`, and starts the guard (`guard_exe GUARD_ARG ...`).
    pub fn new(request: &Request, guard_exe: &Path) -> Result<Cgroups, CgroupError> {
        let own = read(Path::new("/proc/self/cgroup"))?;
        let mut cg = Cgroups {
            cpuset: None,
            freezer: None,
            jobs: Vec::new(),
            guard: None,
        };
        // The guard starts before any group is made: herd killed between
        // the two left an empty herd-<pid> behind (1 in 40 SIGKILLs a few
        // ms into a run). On any failure `cg` is dropped, which removes
        // what was made.
        cg.cpuset = Hierarchy::plan(&request.cpuset, "cpuset", &own)?;
        cg.freezer = Hierarchy::plan(&request.freezer, "freezer", &own)?;
        let planned: Vec<(PathBuf, PathBuf)> = cg
            .hierarchies()
            .map(|h| (h.base.clone(), h.home.clone()))
            .collect();
        cg.guard = Some(crate::keeper::spawn_guard(guard_exe, &planned, None).map_err(CgroupError::Guard)?);
        for h in cg.hierarchies() {
            sweep_stale(&h.home);
            h.make()?;
        }
        Ok(cg)
    }

    /// Whether herd pauses through a freezer.
    pub fn freezes(&self) -> bool {
        self.freezer.is_some()
    }

    /// Whether herd confines programs with a cpuset.
    pub fn confines(&self) -> bool {
        self.cpuset.is_some()
    }

    fn hierarchies(&self) -> impl Iterator<Item = &Hierarchy> {
        self.cpuset.iter().chain(self.freezer.iter())
    }

    /// Puts process `pid` (all its threads) into job `job`'s groups.
    pub fn adopt(&mut self, job: usize, pid: i32) -> Result<(), CgroupError> {
        for h in self.hierarchies() {
            let dir = h.job(job);
            if !dir.exists() {
                make_group(&dir, &h.base, h.version, h.controller)?;
            }
            write(&dir.join("cgroup.procs"), &pid.to_string())?;
        }
        if self.jobs.len() <= job {
            self.jobs.resize(job + 1, None);
        }
        self.jobs[job] = Some(JobState::default());
        Ok(())
    }

    /// Moves a program's process `main` and the processes it forked
    /// (`family`, as listed a moment ago) into job `job`'s groups. A
    /// forked process that has ended since it was listed (`ESRCH`) has
    /// nothing to move; its program joins all the same (a `python3`
    /// behind pyenv's shell wrapper, whose helpers come and go, stayed out
    /// of herd's groups about one run in four when it counted as refused).
    pub fn adopt_family(&mut self, job: usize, main: i32, family: &[i32]) -> Result<(), CgroupError> {
        self.adopt(job, main)?;
        for &pid in family {
            match self.adopt(job, pid) {
                Err(CgroupError::Io { source, .. }) if source.raw_os_error() == Some(libc::ESRCH) => {}
                other => other?,
            }
        }
        Ok(())
    }

    /// Whether job `job` is in herd's groups.
    pub fn has(&self, job: usize) -> bool {
        matches!(self.jobs.get(job), Some(Some(_)))
    }

    /// Confines job `job` to `cpus`. Returns whether the cpuset changed: a
    /// v1 cpuset write resets its tasks' affinities, so the caller must set
    /// them again.
    ///
    /// Only the CPUs: `cpuset.mems` stays the parent's. A cgroup v2 cpuset
    /// (a v1 one with `memory_migrate`) moves a job's pages whenever its
    /// memory nodes change, and every cpuset write then waits for the
    /// kernel's queued moves (`cpuset_write_resmask` flushes them), so a
    /// policy that moved a job across nodes each turn (`cosched:fair`
    /// rotating programs) dragged its memory behind it at every turn, past
    /// the follower's rate limits and `--memory-follow off`, with herd's
    /// loop blocked in the write; a SIGKILLed herd took up to 97 s to die,
    /// a thread stuck there (`docs/results.md`, issue 28's forty-seventh
    /// session, and "Real kernels, forty-eighth session"). New pages are
    /// still local (first touch on the node the CPUs are on); a job's old
    /// pages come along through the memory follower alone
    /// (`herd_engine::memory_follow`), off the loop.
    pub fn set_cpus(&mut self, job: usize, cpus: &CpuSet) -> Result<bool, CgroupError> {
        let (Some(h), Some(Some(state))) = (&self.cpuset, self.jobs.get_mut(job)) else {
            return Ok(false);
        };
        if state.cpus.as_ref() == Some(cpus) {
            return Ok(false);
        }
        write(&h.job(job).join("cpuset.cpus"), &cpus.to_string())?;
        state.cpus = Some(cpus.clone());
        Ok(true)
    }

    /// Freezes (`true`) or thaws job `job`.
    pub fn freeze(&mut self, job: usize, frozen: bool) -> Result<(), CgroupError> {
        let (Some(h), Some(Some(state))) = (&self.freezer, self.jobs.get_mut(job)) else {
            return Ok(());
        };
        set_frozen(&h.job(job), h.version, frozen)?;
        state.frozen = frozen;
        Ok(())
    }

    /// Whether the kernel has finished freezing job `job` (a freeze is
    /// asynchronous: tasks stop at their next return to user space).
    pub fn is_frozen(&self, job: usize) -> bool {
        let Some(h) = &self.freezer else {
            return false;
        };
        is_frozen(&h.job(job), h.version)
    }

    /// The guard's pid, while it runs: the keeper waits for it
    /// ([`crate::keeper::AFTER_ARG`]).
    pub fn guard_pid(&self) -> Option<u32> {
        self.guard.as_ref().map(|(child, _)| child.id())
    }

    /// Thaws every job, moves every process home and removes herd's groups,
    /// then lets the guard go. Safe to call more than once.
    pub fn release(&mut self) {
        for h in self.hierarchies() {
            release_tree(&h.base, &h.home);
        }
        self.jobs.clear();
        if let Some((mut child, stdin)) = self.guard.take() {
            drop(stdin);
            let _ = child.wait();
        }
    }
}

impl Drop for Cgroups {
    fn drop(&mut self) {
        self.release();
    }
}

fn make_group(dir: &Path, parent: &Path, version: Version, controller: &str) -> Result<(), CgroupError> {
    match fs::create_dir(dir) {
        Ok(()) => {}
        Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {}
        Err(e) => return Err(io_err(dir)(e)),
    }
    match (version, controller) {
        // A new v1 cpuset is empty, and a task cannot join an empty cpuset:
        // start from the parent's CPUs and memory nodes (the memory nodes
        // stay so: see `set_cpus`).
        (Version::V1, "cpuset") => {
            for file in ["cpuset.mems", "cpuset.cpus"] {
                let value = read(&parent.join(file))?;
                write(&dir.join(file), value.trim())?;
            }
        }
        // In v2 a controller works in a group only when its parent enables
        // it for its children.
        (Version::V2, "cpuset") => write(&parent.join("cgroup.subtree_control"), "+cpuset")?,
        _ => {}
    }
    Ok(())
}

fn set_frozen(dir: &Path, version: Version, frozen: bool) -> Result<(), CgroupError> {
    match version {
        Version::V2 => write(&dir.join("cgroup.freeze"), if frozen { "1" } else { "0" }),
        Version::V1 => write(
            &dir.join("freezer.state"),
            if frozen { "FROZEN" } else { "THAWED" },
        ),
    }
}

fn is_frozen(dir: &Path, version: Version) -> bool {
    match version {
        Version::V2 => fs::read_to_string(dir.join("cgroup.events"))
            .is_ok_and(|t| t.lines().any(|l| l.trim() == "frozen 1")),
        Version::V1 => fs::read_to_string(dir.join("freezer.state")).is_ok_and(|t| t.trim() == "FROZEN"),
    }
}

/// Releases the groups herd instances that are gone left under `home`
/// (thawed, their processes moved home, removed): where herd may not lower
/// its guard's OOM score (a container), the OOM killer can take herd and
/// its guard together, and the next herd that uses the hierarchy cleans
/// up after them.
fn sweep_stale(home: &Path) {
    for (_, dir, alive) in crate::peers::left_by_other_herds(home, "herd-", "") {
        if !alive {
            release_tree(&dir, home);
        }
    }
}

/// Thaws every group under `base`, moves its processes to `home`, removes
/// the groups and `base`. Best effort: a process that exits meanwhile or a
/// group the kernel still counts as busy is left for the next try.
pub fn release_tree(base: &Path, home: &Path) {
    let Ok(entries) = fs::read_dir(base) else {
        return;
    };
    let home_procs = home.join("cgroup.procs");
    for dir in entries
        .filter_map(|e| e.ok())
        .map(|e| e.path())
        .filter(|p| p.is_dir())
    {
        reset_lane_threads(&dir);
        // Thaw first: a v1 task cannot leave a frozen group.
        if dir.join("cgroup.freeze").exists() {
            let _ = set_frozen(&dir, Version::V2, false);
        }
        if dir.join("freezer.state").exists() {
            let _ = set_frozen(&dir, Version::V1, false);
        }
        // A process forked while we move the others lands in the group
        // too: read again until it is empty, a bounded number of times.
        for _ in 0..100 {
            let pids = fs::read_to_string(dir.join("cgroup.procs")).unwrap_or_default();
            if pids.trim().is_empty() {
                break;
            }
            for pid in pids.split_whitespace() {
                let _ = fs::write(&home_procs, pid);
            }
        }
        for _ in 0..50 {
            match fs::remove_dir(&dir) {
                Ok(()) => break,
                Err(e) if e.kind() == io::ErrorKind::NotFound => break,
                // EBUSY while an exiting task is still counted.
                Err(_) => std::thread::sleep(std::time::Duration::from_millis(2)),
            }
        }
    }
    let _ = fs::remove_dir(base);
}

/// Puts every thread in group `dir` that runs SCHED_FIFO at a lane's
/// priority back under the normal policy. herd resets its lanes when a run
/// ends; this is for when it dies first (the guard): spinning threads left
/// at real-time priority would starve everything else on their CPUs, and a
/// held one would wait behind them for good.
pub(crate) fn reset_lane_threads(dir: &Path) {
    let list = fs::read_to_string(dir.join("cgroup.threads"))
        .or_else(|_| fs::read_to_string(dir.join("tasks")))
        .unwrap_or_default();
    for tid in list.split_whitespace().filter_map(|t| t.parse::<i32>().ok()) {
        if crate::control::in_lane(tid) {
            let _ = crate::control::set_thread_priority(tid, 0);
        }
    }
}

/// The guard's whole life: `args` are (base, home) pairs, after an
/// optional `--after PID` (`crate::keeper::AFTER_ARG`). Waits until herd's
/// end of standard input closes, then releases every pair, and undoes what
/// herd told it of (`crate::keeper`) unless herd said it had, once process
/// PID has ended. Returns the exit code.
pub fn guard_main(args: &[String]) -> i32 {
    crate::keeper::name_herd();
    // SAFETY: setting signal dispositions to SIG_IGN has no preconditions.
    unsafe {
        for sig in [
            libc::SIGINT,
            libc::SIGTERM,
            libc::SIGHUP,
            libc::SIGQUIT,
            libc::SIGPIPE,
        ] {
            libc::signal(sig, libc::SIG_IGN);
        }
    }
    // Taken at once: the guard waited for lives as long as herd's pipe.
    let (after, args) = match args {
        [flag, pid, rest @ ..] if flag == crate::keeper::AFTER_ARG => {
            (pid.parse().ok().map(crate::keeper::Awaited::new), rest)
        }
        _ => (None, args),
    };
    // Reading ends when herd's end closes: herd is gone or done.
    let told = crate::keeper::Told::read(io::stdin().lock());
    for pair in args.chunks(2) {
        if let [base, home] = pair {
            release_tree(Path::new(base), Path::new(home));
        }
    }
    if let Some(guard) = after.filter(|_| !told.done) {
        guard.wait(crate::keeper::AFTER_WAIT_MS);
    }
    // After the groups: a v1 cpuset move resets affinity, which the
    // threads' first masks then replace.
    told.undo(Path::new("/proc"));
    0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn own_path_reads_v1_and_v2_lines() {
        let text = "12:cpuset:/batch/a\n6:freezer:/\n4:cpu,cpuacct:/x\n0::/user.slice/s.scope\n";
        assert_eq!(own_path(text, Some("cpuset")).as_deref(), Some("batch/a"));
        assert_eq!(own_path(text, Some("freezer")).as_deref(), Some(""));
        assert_eq!(own_path(text, Some("cpuacct")).as_deref(), Some("x"));
        assert_eq!(own_path(text, None).as_deref(), Some("user.slice/s.scope"));
        assert_eq!(own_path("3:cpuset:/\n", None), None);
        assert_eq!(own_path("0::/\n", Some("freezer")), None);
    }

    /// A thread a plan left in a lane is put back under the normal policy
    /// from its group's thread list (root only: SCHED_FIFO needs it).
    #[test]
    fn threads_left_in_a_lane_are_reset_from_the_group_list() {
        // SAFETY: geteuid has no preconditions.
        if unsafe { libc::geteuid() } != 0 {
            eprintln!("skipped: SCHED_FIFO needs root");
            return;
        }
        let (tx, rx) = std::sync::mpsc::channel();
        let (done_tx, done_rx) = std::sync::mpsc::channel::<()>();
        let t = std::thread::spawn(move || {
            // SAFETY: gettid has no preconditions.
            tx.send(unsafe { libc::syscall(libc::SYS_gettid) } as i32)
                .unwrap();
            let _ = done_rx.recv();
        });
        let tid = rx.recv().unwrap();
        crate::control::set_thread_priority(tid, crate::control::LANE_FRONT).unwrap();
        assert!(crate::control::in_lane(tid));
        let dir = tempfile::tempdir().unwrap();
        fs::write(dir.path().join("tasks"), format!("{tid}\n")).unwrap();
        reset_lane_threads(dir.path());
        assert!(!crate::control::in_lane(tid));
        // SAFETY: a plain system call on a live thread.
        assert_eq!(unsafe { libc::sched_getscheduler(tid) }, libc::SCHED_OTHER);
        done_tx.send(()).unwrap();
        t.join().unwrap();
    }

    /// The v1 freezer and v1 cpuset, for real, where this machine mounts
    /// them writable (root); skipped elsewhere. herd's commands prefer the
    /// v2 freezer where it exists, so this is where the v1 path runs.
    #[test]
    fn v1_freezer_and_cpuset_on_a_real_process() {
        let (freezer, cpuset) = (
            Path::new("/sys/fs/cgroup/freezer"),
            Path::new("/sys/fs/cgroup/cpuset"),
        );
        let usable = |d: &Path| {
            d.join("cgroup.procs").exists() && fs::metadata(d).is_ok_and(|m| !m.permissions().readonly())
        };
        // SAFETY: geteuid has no preconditions.
        if !(usable(freezer) && usable(cpuset)) || unsafe { libc::geteuid() } != 0 {
            eprintln!("skipped: no writable v1 freezer and cpuset here");
            return;
        }
        let request = Request {
            cpuset: Some((Version::V1, cpuset.to_path_buf())),
            freezer: Some((Version::V1, freezer.to_path_buf())),
        };
        // The guard is not under test here: `true` exits at once.
        let mut cg = Cgroups::new(&request, Path::new("/bin/true")).unwrap();
        let mut child = std::process::Command::new("sleep").arg("30").spawn().unwrap();
        let pid = child.id() as i32;
        cg.adopt(0, pid).unwrap();
        let own = fs::read_to_string(format!("/proc/{pid}/cgroup")).unwrap();
        assert!(
            own.contains(&format!("herd-{}/job-0", std::process::id())),
            "{own}"
        );
        assert!(cg.set_cpus(0, &CpuSet::single(0)).unwrap());
        assert!(
            !cg.set_cpus(0, &CpuSet::single(0)).unwrap(),
            "unchanged: no write"
        );
        let allowed = fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
        assert!(
            allowed
                .lines()
                .any(|l| l.starts_with("Cpus_allowed_list:") && l.trim_end().ends_with('0'))
        );
        cg.freeze(0, true).unwrap();
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(2);
        while !cg.is_frozen(0) && std::time::Instant::now() < deadline {
            std::thread::sleep(std::time::Duration::from_millis(5));
        }
        assert!(cg.is_frozen(0));
        cg.release();
        assert!(!freezer.join(format!("herd-{}", std::process::id())).exists());
        let back = fs::read_to_string(format!("/proc/{pid}/cgroup")).unwrap();
        assert!(!back.contains("herd-"), "{back}");
        child.kill().unwrap();
        child.wait().unwrap();
    }

    /// A forked process that ended between its listing and its move does
    /// not keep its program out of herd's groups.
    #[test]
    fn a_family_member_gone_before_its_move_does_not_keep_its_program_out() {
        let cpuset = Path::new("/sys/fs/cgroup/cpuset");
        // SAFETY: geteuid has no preconditions.
        if !cpuset.join("cgroup.procs").exists() || unsafe { libc::geteuid() } != 0 {
            eprintln!("skipped: no v1 cpuset here, or not root");
            return;
        }
        let request = Request {
            cpuset: Some((Version::V1, cpuset.to_path_buf())),
            freezer: None,
        };
        let mut cg = Cgroups::new(&request, Path::new("/bin/true")).unwrap();
        let mut main = std::process::Command::new("sleep").arg("30").spawn().unwrap();
        let mut gone = std::process::Command::new("true").spawn().unwrap();
        let gone_pid = gone.id() as i32;
        gone.wait().unwrap();
        let pid = main.id() as i32;
        let joined = cg.adopt_family(0, pid, &[gone_pid]);
        let own = fs::read_to_string(format!("/proc/{pid}/cgroup")).unwrap();
        let has = cg.has(0);
        cg.release();
        main.kill().unwrap();
        main.wait().unwrap();
        joined.unwrap();
        assert!(has);
        assert!(
            own.contains(&format!("herd-{}/job-0", std::process::id())),
            "{own}"
        );
    }

    #[test]
    fn release_tree_moves_nothing_it_cannot_and_removes_plain_dirs() {
        // On a plain directory tree (no cgroupfs) release only removes what
        // is empty and never panics.
        let tmp = tempfile::tempdir().unwrap();
        let base = tmp.path().join("herd-1");
        fs::create_dir_all(base.join("job-0")).unwrap();
        release_tree(&base, tmp.path());
        assert!(!base.exists());
        release_tree(&base, tmp.path());
    }
}
