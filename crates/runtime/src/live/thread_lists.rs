//! The thread ids of the processes a live world watches, listed again only
//! when they may have changed. Listing `/proc/PID/task` costs the kernel a
//! lookup per thread (1,024 threads: more than reading each one's
//! schedstat), and even a one-thread process's list costs more than
//! reading its `stat` (7.4 against 2.3 µs of CPU here: `gcc -O2
//! bench/task-list-cost.c -o /tmp/tlc && /tmp/tlc`).
//!
//! A list stands while what the turn read agrees with it. Every thread
//! whose schedstat moved has its `stat` read, and that names its process's
//! thread count: a count other than the list's length lists the process
//! again, in the same turn. A thread starts only when another of its
//! process runs (`clone`), and that one's schedstat then moves; a thread
//! that ended fails to read. So a process none of whose threads ran keeps
//! its list without a system call (before, a `stat` of its `task`
//! directory every turn: a quarter of a turn over 1,024 single-threaded
//! processes), and a thread that started while another ended is found when
//! the ended one's files fail to read.

use std::collections::{HashMap, HashSet};
use std::path::Path;

use crate::procfs;

#[derive(Debug, Default)]
pub(super) struct ThreadLists {
    lists: HashMap<i32, Vec<i32>>,
    stale: HashSet<i32>,
    /// Lists made so far.
    made: u64,
}

impl ThreadLists {
    /// The thread ids of `pid`, ascending (empty once it is gone): as last
    /// listed, unless it is new or the turn found its list out of date.
    pub(super) fn of(&mut self, proc_root: &Path, pid: i32) -> Vec<i32> {
        if let Some(list) = self.lists.get(&pid)
            && !self.stale.contains(&pid)
        {
            return list.clone();
        }
        self.stale.remove(&pid);
        self.made += 1;
        let list = procfs::threads(proc_root, pid);
        self.lists.insert(pid, list.clone());
        list
    }

    /// A thread of `pid` could not be read: list it afresh.
    pub(super) fn vanished(&mut self, pid: i32) {
        self.stale.insert(pid);
    }

    /// A thread of `pid` read now says the process has `threads` threads;
    /// true when that is not what its list holds (then it is listed
    /// afresh).
    pub(super) fn counted(&mut self, pid: i32, threads: u32) -> bool {
        let differs = self.lists.get(&pid).is_some_and(|l| l.len() != threads as usize);
        if differs {
            self.stale.insert(pid);
        }
        differs
    }

    /// How many lists were made so far: the look for forked processes
    /// looks again after one was (a thread it did not know of may have
    /// forked).
    pub(super) fn made(&self) -> u64 {
        self.made
    }

    /// Whether `pid`'s list is to be made again.
    pub(super) fn is_stale(&self, pid: i32) -> bool {
        self.stale.contains(&pid)
    }

    /// Forgets the processes not in `alive`.
    pub(super) fn retain(&mut self, alive: &HashSet<i32>) {
        self.lists.retain(|p, _| alive.contains(p));
        self.stale.retain(|p| alive.contains(p));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_list_is_kept_until_a_count_or_a_vanish_says_otherwise() {
        let me = std::process::id() as i32;
        let root = Path::new("/proc");
        let mut lists = ThreadLists::default();
        // Three workers, each saying its thread id and ending when told.
        // Each says it on its own channel: `tids[i]` is the thread that
        // `ends[i]` ends, whichever worker started first.
        let mut tids = Vec::new();
        let (ends, workers): (Vec<_>, Vec<_>) = (0..3)
            .map(|_| {
                let (end, wait) = std::sync::mpsc::channel::<()>();
                let (tid_tx, tid_rx) = std::sync::mpsc::channel();
                let worker = std::thread::spawn(move || {
                    // SAFETY: gettid has no preconditions.
                    tid_tx.send(unsafe { libc::gettid() }).unwrap();
                    let _ = wait.recv();
                });
                tids.push(tid_rx.recv().unwrap());
                (end, worker)
            })
            .unzip();
        let first = lists.of(root, me);
        assert!(tids.iter().all(|t| first.contains(t)), "{first:?} {tids:?}");
        assert!(!lists.counted(me, first.len() as u32), "the count agrees");
        assert_eq!(lists.of(root, me), first, "kept while nothing changed");
        // One worker ends: the list stands until a count says otherwise.
        ends[0].send(()).unwrap();
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
        while procfs::threads(root, me).contains(&tids[0]) && std::time::Instant::now() < deadline {
            std::thread::sleep(std::time::Duration::from_millis(5));
        }
        assert_eq!(lists.of(root, me), first, "no count read yet: kept");
        assert!(lists.counted(me, first.len() as u32 - 1));
        assert!(lists.is_stale(me));
        let again = lists.of(root, me);
        assert!(!again.contains(&tids[0]) && again.contains(&tids[1]), "{again:?}");
        assert!(!lists.is_stale(me), "listed afresh");
        lists.vanished(me);
        assert!(lists.is_stale(me));
        let _ = lists.of(root, me);
        assert!(!lists.is_stale(me), "listed afresh after a vanish");
        drop(ends);
        for w in workers {
            w.join().unwrap();
        }
    }
}
