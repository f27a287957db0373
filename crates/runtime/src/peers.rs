//! Other herd instances on this machine. Each live run records the CPUs
//! it has pinned threads to in a small file under `/run/herd`
//! (`<pid>.cpus`, replaced atomically when the set changes, removed at the
//! end); a run that starts while others hold CPUs places around them, so
//! two `herd run --policy smt:spn` no longer both start from CPU 0. A file
//! whose process is gone (herd killed) is ignored and removed. What others
//! take after a run started is not seen by it: the record says where
//! herd instances were when each started.

use std::fs;
use std::io;
use std::path::{Path, PathBuf};

use herd_topo::CpuSet;

/// Where the records live; a tmpfs on systemd machines, cleared at boot.
pub const DIR: &str = "/run/herd";

/// The folder of records: `$HERD_RUN_DIR` where set (herd instances that
/// should not see each other, such as tests run side by side), else [`DIR`].
pub fn dir() -> PathBuf {
    std::env::var_os("HERD_RUN_DIR").map_or_else(|| PathBuf::from(DIR), PathBuf::from)
}

/// The entries of `dir` named `{prefix}<pid>{suffix}` for a pid other than
/// this process's: (pid, path, whether that pid is a live herd). What herd
/// instances leave behind (CPU records here, cgroups in `crate::cgroup`).
pub(crate) fn left_by_other_herds(dir: &Path, prefix: &str, suffix: &str) -> Vec<(i32, PathBuf, bool)> {
    let me = std::process::id() as i32;
    let Ok(entries) = fs::read_dir(dir) else {
        return Vec::new();
    };
    entries
        .flatten()
        .filter_map(|e| {
            let pid = e
                .file_name()
                .to_str()?
                .strip_prefix(prefix)?
                .strip_suffix(suffix)?
                .parse::<i32>()
                .ok()
                .filter(|&p| p != me)?;
            Some((pid, e.path(), is_herd(pid)))
        })
        .collect()
}

/// The CPUs other live herd instances hold: (pid, CPUs) each.
pub fn held_by_others(dir: &Path) -> Vec<(i32, CpuSet)> {
    let mut out = Vec::new();
    for (pid, path, alive) in left_by_other_herds(dir, "", ".cpus") {
        if !alive {
            // Left by a herd that was killed.
            let _ = fs::remove_file(&path);
            continue;
        }
        if let Some(cpus) = fs::read_to_string(&path)
            .ok()
            .and_then(|t| CpuSet::parse_list(t.trim()).ok())
            .filter(|c| !c.is_empty())
        {
            out.push((pid, cpus));
        }
    }
    out.sort_by_key(|(pid, _)| *pid);
    out
}

/// Whether `pid` is a live herd process (not a reused pid, not a zombie:
/// a herd killed and not yet reaped by its parent holds nothing, yet its
/// `comm` still reads "herd" and its record was never removed. In the
/// guests' checks, a herd killed after it outwaited SIGINT kept the next
/// run off its old CPUs, and that run stacked its threads on the rest).
fn is_herd(pid: i32) -> bool {
    crate::procfs::name_and_state(Path::new("/proc"), pid)
        .is_some_and(|(name, state)| name == "herd" && !matches!(state, 'Z' | 'X' | 'x'))
}

/// This run's record of the CPUs it holds.
#[derive(Debug)]
pub struct Claim {
    path: PathBuf,
    held: Option<CpuSet>,
}

impl Claim {
    /// A record under `dir`, made when it first holds a CPU.
    pub fn new(dir: &Path) -> Claim {
        Claim {
            path: dir.join(format!("{}.cpus", std::process::id())),
            held: None,
        }
    }

    /// Records that this run holds `cpus` (written only when it changed);
    /// whether it changed.
    pub fn hold(&mut self, cpus: &CpuSet) -> io::Result<bool> {
        if self.held.as_ref() == Some(cpus) {
            return Ok(false);
        }
        if let Some(dir) = self.path.parent() {
            fs::create_dir_all(dir)?;
        }
        let tmp = self.path.with_extension("tmp");
        fs::write(&tmp, format!("{cpus}\n"))?;
        fs::rename(&tmp, &self.path)?;
        self.held = Some(cpus.clone());
        Ok(true)
    }
}

impl Claim {
    /// Other live herd instances whose records overlap `cpus`: (pid, the
    /// CPUs both hold). Two runs started together both place before
    /// either has a record; the later one to record sees the other here.
    pub fn overlapping(&self, cpus: &CpuSet) -> Vec<(i32, CpuSet)> {
        let Some(dir) = self.path.parent() else {
            return Vec::new();
        };
        held_by_others(dir)
            .into_iter()
            .map(|(pid, c)| (pid, c.intersection(cpus)))
            .filter(|(_, c)| !c.is_empty())
            .collect()
    }
}

impl Drop for Claim {
    fn drop(&mut self) {
        if self.held.is_some() {
            let _ = fs::remove_file(&self.path);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_claim_is_seen_while_its_herd_lives_and_removed_after() {
        let dir = tempfile::tempdir().unwrap();
        // A record of a process that is not herd (this test) is stale.
        fs::write(dir.path().join("1.cpus"), "0-3\n").unwrap();
        assert!(held_by_others(dir.path()).is_empty());
        assert!(!dir.path().join("1.cpus").exists(), "a stale record is removed");
        let mut c = Claim::new(dir.path());
        c.hold(&CpuSet::parse_list("2-3").unwrap()).unwrap();
        let own = dir.path().join(format!("{}.cpus", std::process::id()));
        assert_eq!(fs::read_to_string(&own).unwrap(), "2-3\n");
        // Its own record is not another's.
        assert!(held_by_others(dir.path()).is_empty());
        drop(c);
        assert!(!own.exists());
    }

    #[test]
    fn the_record_of_a_killed_herd_not_yet_reaped_is_stale() {
        // SAFETY: the child only names itself and exits (both
        // async-signal-safe); the parent reaps it below.
        let pid = unsafe { libc::fork() };
        assert!(pid >= 0, "fork");
        if pid == 0 {
            // SAFETY: in the forked child: a name from a C string literal,
            // then an exit that runs nothing of the parent's.
            unsafe {
                libc::prctl(libc::PR_SET_NAME, c"herd".as_ptr());
                libc::_exit(0);
            }
        }
        let stat = format!("/proc/{pid}/stat");
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        while !fs::read_to_string(&stat).is_ok_and(|t| t.contains("(herd) Z")) {
            assert!(
                std::time::Instant::now() < deadline,
                "the child never became a zombie named herd"
            );
            std::thread::sleep(std::time::Duration::from_millis(5));
        }
        let dir = tempfile::tempdir().unwrap();
        fs::write(dir.path().join(format!("{pid}.cpus")), "0\n").unwrap();
        let held = held_by_others(dir.path());
        // SAFETY: reaps our own child; a null status pointer is allowed.
        unsafe { libc::waitpid(pid, std::ptr::null_mut(), 0) };
        assert!(held.is_empty(), "a zombie holds {held:?}");
    }
}
