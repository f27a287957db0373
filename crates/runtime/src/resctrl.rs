//! Memory bandwidth per program from resctrl memory-bandwidth monitoring
//! (Intel RDT MBM, AMD PQoS), where `/sys/fs/resctrl` is mounted.
//!
//! herd makes one monitoring group per program it manages
//! (`mon_groups/herd-<herd pid>-job-<i>`) and moves the program's threads
//! into it; threads created later join their creator's group. Each period it
//! reads `mbm_total_bytes` over every L3 domain. The machine's own traffic is
//! the default group's total, which the kernel reports including its
//! monitoring groups.
//!
//! Only programs in the default control group are monitored: a monitoring
//! group belongs to one control group, and moving a program out of the
//! allocation group its owner chose would change its cache and bandwidth
//! limits. Removing a group hands its tasks back to the parent, so release
//! never strands a program.

use std::fs;
use std::io;
use std::path::{Path, PathBuf};

/// One monitoring group.
#[derive(Debug)]
struct Group {
    dir: PathBuf,
    files: Vec<PathBuf>,
    last: Option<u64>,
}

/// The `mbm_total_bytes` files below `mon_data` of `dir`.
fn counter_files(dir: &Path) -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = fs::read_dir(dir.join("mon_data"))
        .map(|d| {
            d.filter_map(|e| e.ok())
                .map(|e| e.path().join("mbm_total_bytes"))
                .filter(|f| f.exists())
                .collect()
        })
        .unwrap_or_default();
    files.sort();
    files
}

/// The sum of `files`; `None` if any says `Unavailable` (a domain whose
/// counter the hardware has not assigned) or cannot be read.
fn total(files: &[PathBuf]) -> Option<u64> {
    files
        .iter()
        .map(|f| fs::read_to_string(f).ok()?.trim().parse::<u64>().ok())
        .sum()
}

impl Group {
    fn delta(&mut self) -> Option<u64> {
        let now = total(&self.files)?;
        let d = self.last.map(|l| now.saturating_sub(l));
        self.last = Some(now);
        d
    }
}

/// herd's monitoring groups and the machine's total.
#[derive(Debug)]
pub struct Mbm {
    root: PathBuf,
    system: Group,
    jobs: Vec<Option<Group>>,
}

impl Mbm {
    /// MBM under `root` (normally `/sys/fs/resctrl`), when it is mounted
    /// and counts total bandwidth.
    pub fn discover(root: &Path) -> Option<Mbm> {
        let features = fs::read_to_string(root.join("info/L3_MON/mon_features")).ok()?;
        if !features.lines().any(|l| l.trim() == "mbm_total_bytes") || !root.join("mon_groups").is_dir() {
            return None;
        }
        let mut system = Group {
            dir: root.to_path_buf(),
            files: counter_files(root),
            last: None,
        };
        system.delta();
        Some(Mbm {
            root: root.to_path_buf(),
            system,
            jobs: Vec::new(),
        })
    }

    /// Monitors program `job`: process `pid` with threads `tids`. A program
    /// outside the default control group is left alone (`Ok(false)`).
    pub fn adopt(&mut self, job: usize, pid: i32, tids: &[i32]) -> io::Result<bool> {
        let default_tasks = fs::read_to_string(self.root.join("tasks"))?;
        if !default_tasks.split_whitespace().any(|t| t == pid.to_string()) {
            return Ok(false);
        }
        let dir = self
            .root
            .join("mon_groups")
            .join(format!("herd-{}-job-{job}", std::process::id()));
        match fs::create_dir(&dir) {
            Ok(()) => {}
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {}
            Err(e) => return Err(e),
        }
        // The tasks file takes one thread id per write.
        for tid in tids {
            match fs::write(dir.join("tasks"), tid.to_string()) {
                Ok(()) => {}
                // A thread that exited meanwhile.
                Err(e) if e.raw_os_error() == Some(libc::ESRCH) => {}
                Err(e) => return Err(e),
            }
        }
        let mut group = Group {
            files: counter_files(&dir),
            dir,
            last: None,
        };
        group.delta();
        if self.jobs.len() <= job {
            self.jobs.resize_with(job + 1, || None);
        }
        self.jobs[job] = Some(group);
        Ok(true)
    }

    /// Whether program `job` is monitored.
    pub fn monitors(&self, job: usize) -> bool {
        matches!(self.jobs.get(job), Some(Some(_)))
    }

    /// Bytes program `job` moved to and from memory since the last call.
    pub fn job_delta(&mut self, job: usize) -> Option<u64> {
        self.jobs.get_mut(job)?.as_mut()?.delta()
    }

    /// Bytes the whole machine moved since the last call.
    pub fn system_delta(&mut self) -> Option<u64> {
        self.system.delta()
    }

    /// Removes herd's groups; their tasks go back to the default group.
    pub fn release(&mut self) {
        for g in self.jobs.drain(..).flatten() {
            let _ = fs::remove_dir(&g.dir);
        }
    }
}

impl Drop for Mbm {
    fn drop(&mut self) {
        self.release();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A resctrl-like tree with two L3 domains (resctrl itself cannot be
    /// faked: mkdir there makes mon_data; here the test makes it).
    fn fake(root: &Path) {
        fs::create_dir_all(root.join("info/L3_MON")).unwrap();
        fs::write(
            root.join("info/L3_MON/mon_features"),
            "llc_occupancy\nmbm_total_bytes\nmbm_local_bytes\n",
        )
        .unwrap();
        fs::create_dir_all(root.join("mon_groups")).unwrap();
        fs::write(root.join("tasks"), "1\n42\n43\n").unwrap();
        for d in ["mon_L3_00", "mon_L3_01"] {
            fs::create_dir_all(root.join("mon_data").join(d)).unwrap();
            fs::write(root.join("mon_data").join(d).join("mbm_total_bytes"), "1000\n").unwrap();
        }
    }

    #[test]
    fn bandwidth_per_program_and_for_the_machine() {
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path();
        fake(root);
        let mut mbm = Mbm::discover(root).unwrap();
        let group = root.join(format!("mon_groups/herd-{}-job-0", std::process::id()));
        // resctrl makes mon_data itself on mkdir; a plain tree needs it made.
        for d in ["mon_L3_00", "mon_L3_01"] {
            fs::create_dir_all(group.join("mon_data").join(d)).unwrap();
            fs::write(group.join("mon_data").join(d).join("mbm_total_bytes"), "10\n").unwrap();
        }
        assert!(mbm.adopt(0, 42, &[42, 43]).unwrap());
        assert!(!mbm.adopt(1, 77, &[77]).unwrap(), "not in the default group");
        assert!(mbm.monitors(0) && !mbm.monitors(1));
        fs::write(group.join("mon_data/mon_L3_00/mbm_total_bytes"), "5010\n").unwrap();
        fs::write(group.join("mon_data/mon_L3_01/mbm_total_bytes"), "20\n").unwrap();
        assert_eq!(mbm.job_delta(0), Some(5010));
        fs::write(root.join("mon_data/mon_L3_00/mbm_total_bytes"), "9000\n").unwrap();
        assert_eq!(mbm.system_delta(), Some(8000));
        // A domain without an assigned counter.
        fs::write(group.join("mon_data/mon_L3_01/mbm_total_bytes"), "Unavailable\n").unwrap();
        assert_eq!(mbm.job_delta(0), None);
        assert_eq!(mbm.job_delta(1), None);
    }

    #[test]
    fn absent_or_without_total_bandwidth_is_none() {
        let tmp = tempfile::tempdir().unwrap();
        assert!(Mbm::discover(tmp.path()).is_none());
        fake(tmp.path());
        fs::write(tmp.path().join("info/L3_MON/mon_features"), "llc_occupancy\n").unwrap();
        assert!(Mbm::discover(tmp.path()).is_none());
    }
}
