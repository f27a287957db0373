//! The thread ids of the processes a live world watches, listed again only
//! when they may have changed. Listing `/proc/PID/task` costs the kernel a
//! lookup per thread (1,024 threads: more than reading each one's
//! schedstat); a process's thread count is one number in its `stat`. When
//! the count is what the last list holds and none of those threads was
//! found gone, the list stands: a thread that started while another ended
//! is found one turn late, when the ended one's files fail to read. The
//! check (a `stat` of the directory) costs less than a list even of one
//! thread (2.3 against 7.4 µs of CPU here: `gcc -O2
//! bench/task-list-cost.c -o /tmp/tlc && /tmp/tlc`), and a batch of 80
//! single-threaded hackbench processes was listed whole every turn.

use std::collections::{HashMap, HashSet};
use std::path::Path;

use crate::procfs;

#[derive(Debug, Default)]
pub(super) struct ThreadLists {
    lists: HashMap<i32, Vec<i32>>,
    stale: HashSet<i32>,
}

impl ThreadLists {
    /// The thread ids of `pid`, ascending (empty once it is gone).
    pub(super) fn of(&mut self, proc_root: &Path, pid: i32) -> Vec<i32> {
        if let Some(list) = self.lists.get(&pid)
            && !self.stale.contains(&pid)
            && procfs::num_threads(proc_root, pid) == Some(list.len())
        {
            return list.clone();
        }
        self.stale.remove(&pid);
        let list = procfs::threads(proc_root, pid);
        self.lists.insert(pid, list.clone());
        list
    }

    /// A thread of `pid` could not be read: list it afresh next time.
    pub(super) fn vanished(&mut self, pid: i32) {
        self.stale.insert(pid);
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
    fn a_list_is_kept_while_the_count_holds_and_redone_when_a_thread_goes() {
        let me = std::process::id() as i32;
        let root = Path::new("/proc");
        let mut lists = ThreadLists::default();
        let (tx, rx) = std::sync::mpsc::channel::<()>();
        let rx = std::sync::Arc::new(std::sync::Mutex::new(rx));
        let workers: Vec<_> = (0..3)
            .map(|_| {
                let rx = std::sync::Arc::clone(&rx);
                std::thread::spawn(move || {
                    let _ = rx.lock().unwrap().recv();
                })
            })
            .collect();
        let first = lists.of(root, me);
        assert!(first.len() > 3, "{first:?}");
        assert_eq!(lists.of(root, me), first, "kept while nothing changed");
        // One worker ends: the count differs, so the list is made again.
        tx.send(()).unwrap();
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
        while procfs::num_threads(root, me) == Some(first.len()) && std::time::Instant::now() < deadline {
            std::thread::sleep(std::time::Duration::from_millis(5));
        }
        assert_eq!(lists.of(root, me), procfs::threads(root, me));
        lists.vanished(me);
        assert!(lists.stale.contains(&me));
        let _ = lists.of(root, me);
        assert!(!lists.stale.contains(&me), "listed afresh after a vanish");
        drop(tx);
        for w in workers {
            w.join().unwrap();
        }
    }
}
