//! The processes each program forked (its family): looked for every
//! [`FAMILY_RESCAN_NS`], before a turn samples its threads (a process
//! found is watched that turn). Only the `children` lists of threads that
//! ran since their list was last read are read again (a thread that has
//! not run has forked nothing), which each thread's schedstat, read
//! through its kept file just before, tells.

use herd_engine::Clock;

use super::{LiveWorld, actuate, forked};
use crate::procfs;

/// How often the sensor looks for processes a program forked: a pass over
/// `/proc` reads every process's `stat` (about a millisecond for a few
/// hundred processes), too much for every period of a fast policy, and a
/// fork shows up within this long.
pub(super) const FAMILY_RESCAN_NS: u64 = 250_000_000;

impl LiveWorld {
    /// Looks for forked processes when [`FAMILY_RESCAN_NS`] has passed since
    /// the last look. A process forked just before its program was
    /// stopped, found only now, would run on while the program waits its
    /// turn (a pyenv shim's helper made a third program run beside two);
    /// it stops with its program. (A frozen program's children share its
    /// cgroup; a stop to a stopped process is a no-op.)
    pub(super) fn rescan_family_if_due(&mut self, now_ns: u64) {
        if self
            .family_ns
            .is_some_and(|t| now_ns.saturating_sub(t) < FAMILY_RESCAN_NS)
        {
            return;
        }
        self.rescan_family();
    }

    /// Finds the processes each program forked, afresh: from the running
    /// programs' own `children` lists where the kernel keeps them (a cost
    /// that grows with herd's programs, not the machine's processes; held
    /// and finished programs have none), else one pass over `/proc`.
    pub(super) fn rescan_family(&mut self) {
        // Nothing forked anywhere since the last look (the kernel's last
        // process id is where it was), and the same programs looked at:
        // the family stands. 80 busy hackbench processes had every
        // `children` list read four times a second for nothing, and each
        // found process's `stat` read to check its parent. What it misses
        // until the next fork: a process that exited (it fails to read,
        // and a signal to it finds nothing; its id cannot be reused
        // without a fork) and an orphan taken in by a reaper outside the
        // program (it stays in the family, and pauses with its program).
        // A thread list made since is a look's due too: a thread that was
        // not in the lists the last look read (`thread_lists` finds it a
        // turn later) may have forked before that look.
        let key = procfs::last_pid(&self.proc_root).map(|last| {
            let looked: Vec<bool> = self.programs.iter().map(|p| p.alive() && !p.held()).collect();
            (last, looked, self.thread_lists.made())
        });
        let unchanged = key.is_some() && key == self.family_key;
        self.family_key = key;
        if !unchanged {
            self.find_family();
            // The lists this look made itself it has read.
            if let Some(key) = self.family_key.as_mut() {
                key.2 = self.thread_lists.made();
            }
        }
        self.family_ns = Some(self.now_ns());
        for (job, p) in self.programs.iter().enumerate() {
            if p.paused && !p.frozen && p.alive() {
                for &pid in forked(&self.family, job) {
                    if procfs::state(&self.proc_root, pid) != Some('T') {
                        actuate::stop(self.keeper.as_mut(), pid);
                    }
                }
            }
        }
    }

    /// [`Self::rescan_family`]'s look itself.
    fn find_family(&mut self) {
        self.family = if procfs::children_lists(&self.proc_root) {
            // Only the lists of threads that ran since they were read, by
            // their schedstat now (a pread each, where reading all 1,024
            // threads' lists took 7 ms here, four times a second; the last
            // turn's samples would miss a fork since). The turn's sampling
            // then takes these times rather than reading them again.
            // Threads not watched yet have no times: their lists are read.
            // A thread of a process none of whose threads ran since the
            // last turn (`quiet`) has the times of its last sample.
            for (&tid, t) in self.tasks.iter_mut() {
                t.pre_times = if self.quiet.is_quiet(t.pid) && t.last.run_ns > 0 {
                    Some(t.last.times())
                } else {
                    self.kernel.times(tid).or_else(|| t.files.times(&mut self.buf))
                };
            }
            let (root, tasks, lists) = (&self.proc_root, &self.tasks, &mut self.thread_lists);
            let times = |tid: i32| tasks.get(&tid)?.pre_times;
            let mut tids = |pid: i32| lists.of(root, pid);
            let family = self
                .programs
                .iter()
                .map(|p| {
                    if p.alive() && !p.held() {
                        procfs::subtree_since(root, p.pid, &mut tids, &times, &mut self.children_seen)
                    } else {
                        Vec::new()
                    }
                })
                .collect();
            self.children_seen.retain(|tid| tasks.contains_key(&tid));
            family
        } else {
            let roots: Vec<i32> = self.programs.iter().map(|p| p.pid).collect();
            procfs::descendants(&self.proc_root, &roots)
        };
    }
}
