//! What the machine-wide daemon reads of every process: who runs it,
//! where in the cgroup tree it is, what it runs, and how many of its
//! threads are busy. One pass over `/proc` per scan; a process that ends
//! while it is read is simply not there (every read may fail).

use std::collections::BTreeMap;
use std::ffi::CStr;
use std::fs;
use std::path::Path;

/// A process as the daemon's rules see it.
#[derive(Debug, Clone, PartialEq)]
pub struct Facts {
    /// Its id.
    pub pid: i32,
    /// Its parent's id.
    pub ppid: i32,
    /// When it started, in clock ticks since boot: with the pid, names it
    /// across pid reuse.
    pub start_ticks: u64,
    /// Its real user id.
    pub uid: u32,
    /// Its cgroup path (`/system.slice/foo.service`): the unified
    /// hierarchy's, or systemd's or the cpuset's on a v1 machine.
    pub cgroup: String,
    /// The systemd unit the cgroup path ends in (`.service` or `.scope`),
    /// else its innermost `.slice`.
    pub unit: Option<String>,
    /// Its executable's path (empty for a kernel thread).
    pub exe: String,
    /// Its name.
    pub comm: String,
    /// Its command line, arguments joined by spaces.
    pub cmdline: String,
}

/// Every process id in `proc_root` now.
pub fn pids(proc_root: &Path) -> Vec<i32> {
    let Ok(entries) = fs::read_dir(proc_root) else {
        return Vec::new();
    };
    let mut out: Vec<i32> = entries
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.parse().ok())
        .collect();
    out.sort_unstable();
    out
}

/// The facts of process `pid`, or `None` if it is gone or is a kernel
/// thread (no executable, no command line: nothing a rule could mean).
pub fn facts(proc_root: &Path, pid: i32) -> Option<Facts> {
    let dir = proc_root.join(pid.to_string());
    let stat = fs::read_to_string(dir.join("stat")).ok()?;
    // Fields after the name, which may hold spaces and parentheses.
    let after = &stat[stat.rfind(')')? + 2..];
    let fields: Vec<&str> = after.split_whitespace().collect();
    let ppid = fields.get(1)?.parse().ok()?;
    let start_ticks = fields.get(19)?.parse().ok()?;
    let cmdline_raw = fs::read(dir.join("cmdline")).ok()?;
    if cmdline_raw.is_empty() {
        return None;
    }
    let cmdline = String::from_utf8_lossy(&cmdline_raw)
        .trim_end_matches('\0')
        .replace('\0', " ");
    let status = fs::read_to_string(dir.join("status")).ok()?;
    let uid = status
        .lines()
        .find_map(|l| l.strip_prefix("Uid:"))
        .and_then(|v| v.split_whitespace().next()?.parse().ok())?;
    let comm = fs::read_to_string(dir.join("comm")).ok()?.trim_end().to_string();
    let exe = fs::read_link(dir.join("exe"))
        .map(|p| p.display().to_string())
        .unwrap_or_default();
    let cgroup = fs::read_to_string(dir.join("cgroup"))
        .ok()
        .map_or_else(|| "/".to_string(), |t| cgroup_path(&t));
    Some(Facts {
        pid,
        ppid,
        start_ticks,
        uid,
        unit: unit_of(&cgroup),
        cgroup,
        exe,
        comm,
        cmdline,
    })
}

/// The cgroup path from `/proc/PID/cgroup` text: the unified line's
/// (`0::/path`) where it says more than the root, else systemd's v1
/// hierarchy, else the cpuset's, else the root.
pub fn cgroup_path(text: &str) -> String {
    let line = |want: &dyn Fn(&str, &str) -> bool| {
        text.lines().find_map(|l| {
            let mut f = l.splitn(3, ':');
            let (id, controllers, path) = (f.next()?, f.next()?, f.next()?);
            want(id, controllers).then(|| path.to_string())
        })
    };
    let v2 = line(&|id, c| id == "0" && c.is_empty());
    let systemd = line(&|_, c| c == "name=systemd");
    let cpuset = line(&|_, c| c.split(',').any(|x| x == "cpuset"));
    [v2, systemd, cpuset]
        .into_iter()
        .flatten()
        .find(|p| p != "/")
        .unwrap_or_else(|| "/".to_string())
}

/// The systemd unit a cgroup path ends in: its last `.service` or
/// `.scope` component, else its last `.slice`.
pub fn unit_of(cgroup: &str) -> Option<String> {
    let parts: Vec<&str> = cgroup.split('/').filter(|p| !p.is_empty()).collect();
    parts
        .iter()
        .rev()
        .find(|p| p.ends_with(".service") || p.ends_with(".scope"))
        .or_else(|| parts.iter().rev().find(|p| p.ends_with(".slice")))
        .map(|p| (*p).to_string())
}

/// The value of variable `name` in process `pid`'s environment (as it was
/// started; readable by whoever may signal it).
pub fn environ_var(proc_root: &Path, pid: i32, name: &str) -> Option<String> {
    let env = fs::read(proc_root.join(format!("{pid}/environ"))).ok()?;
    let prefix = format!("{name}=");
    env.split(|b| *b == 0)
        .find_map(|kv| kv.strip_prefix(prefix.as_bytes()))
        .map(|v| String::from_utf8_lossy(v).into_owned())
}

/// The CPU time of each thread of `pid`, in clock ticks (user + system).
pub fn thread_ticks(proc_root: &Path, pid: i32) -> BTreeMap<i32, u64> {
    crate::procfs::threads(proc_root, pid)
        .into_iter()
        .filter_map(|tid| {
            let stat = fs::read_to_string(proc_root.join(format!("{pid}/task/{tid}/stat"))).ok()?;
            let after = &stat[stat.rfind(')')? + 2..];
            let f: Vec<&str> = after.split_whitespace().collect();
            let ticks = f.get(11)?.parse::<u64>().ok()? + f.get(12)?.parse::<u64>().ok()?;
            Some((tid, ticks))
        })
        .collect()
}

/// How many threads ran at least a tenth of an interval of `ticks` between
/// two [`thread_ticks`] samples (a sleeping helper thread is not one).
pub fn busy_threads(before: &BTreeMap<i32, u64>, after: &BTreeMap<i32, u64>, ticks: u64) -> usize {
    let least = (ticks / 10).max(1);
    after
        .iter()
        .filter(|(tid, t)| t.saturating_sub(before.get(tid).copied().unwrap_or(0)) >= least)
        .count()
}

/// The name of user `uid`, from the system's user database.
pub fn user_name(uid: u32) -> Option<String> {
    let mut pwd: libc::passwd = unsafe_zeroed_passwd();
    let mut buf = vec![0 as libc::c_char; 4096];
    let mut out: *mut libc::passwd = std::ptr::null_mut();
    // SAFETY: every pointer is to a live local of the size passed;
    // getpwuid_r writes only into `pwd` and `buf`.
    let rc = unsafe { libc::getpwuid_r(uid, &mut pwd, buf.as_mut_ptr(), buf.len(), &mut out) };
    if rc != 0 || out.is_null() || pwd.pw_name.is_null() {
        return None;
    }
    // SAFETY: on success pw_name points to a NUL-terminated string in `buf`.
    Some(
        unsafe { CStr::from_ptr(pwd.pw_name) }
            .to_string_lossy()
            .into_owned(),
    )
}

fn unsafe_zeroed_passwd() -> libc::passwd {
    // SAFETY: libc::passwd is plain data (pointers and integers), for
    // which all zeros is a valid value; getpwuid_r fills it.
    unsafe { std::mem::zeroed() }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_cgroup_path_is_the_unified_one_else_systemds_and_units_come_from_it() {
        let v2 = "0::/system.slice/slurmstepd.scope/job_42/step_0\n";
        assert_eq!(cgroup_path(v2), "/system.slice/slurmstepd.scope/job_42/step_0");
        let v1 = "9:name=systemd:/user.slice/user-1000.slice/session-3.scope\n3:cpuset:/herd\n0::/\n";
        assert_eq!(cgroup_path(v1), "/user.slice/user-1000.slice/session-3.scope");
        assert_eq!(cgroup_path("3:cpuset:/herd/a\n0::/\n"), "/herd/a");
        assert_eq!(cgroup_path("0::/\n"), "/");
        assert_eq!(
            unit_of("/system.slice/slurmstepd.scope/job_42/step_0").as_deref(),
            Some("slurmstepd.scope")
        );
        assert_eq!(
            unit_of("/user.slice/user-1000.slice").as_deref(),
            Some("user-1000.slice")
        );
        assert_eq!(unit_of("/"), None);
    }

    #[test]
    fn this_process_is_seen_with_its_facts_and_busy_threads_are_counted() {
        let me = std::process::id() as i32;
        let f = facts(Path::new("/proc"), me).unwrap();
        assert_eq!(f.pid, me);
        assert!(f.exe.contains("herd_runtime"), "{}", f.exe);
        // SAFETY: getuid cannot fail.
        assert_eq!(f.uid, unsafe { libc::getuid() });
        assert!(pids(Path::new("/proc")).contains(&me));
        assert_eq!(user_name(0).as_deref(), Some("root"));
        // A variable this process was started with (setting one now would
        // not show: /proc shows the environment as it was at exec).
        let path = std::env::var("PATH").unwrap();
        assert_eq!(environ_var(Path::new("/proc"), me, "PATH"), Some(path));
        assert_eq!(environ_var(Path::new("/proc"), me, "HERD_NO_SUCH_VARIABLE"), None);
        let before = BTreeMap::from([(1, 100), (2, 50)]);
        let after = BTreeMap::from([(1, 200), (2, 51), (3, 30)]);
        // Over 100 ticks: thread 1 ran 100, 2 ran 1 (asleep), 3 is new with 30.
        assert_eq!(busy_threads(&before, &after, 100), 2);
    }
}
