//! Processes none of whose threads ran since the last turn (issue 28): one
//! taskstats request per process says so, and then its threads' samples
//! are kept without reading each one's `schedstat` (the per-thread floor
//! of a turn). Kept only under [`super::waits::KeepRule`]'s conditions, as
//! a thread whose schedstat did not move: a thread woken and not yet run
//! adds nothing to the process's figures either.

use std::collections::{HashMap, HashSet};

use crate::taskstats::{GroupCpu, Taskstats};

/// Processes with fewer threads are read thread by thread: one request
/// costs about what this many `schedstat` reads do
/// (`cargo bench -p herd-runtime --bench live_turn` prints both).
pub(super) const MIN_THREADS: usize = 8;

/// The taskstats socket (none where the kernel or herd's privileges give
/// none), each process's last figures, and this turn's quiet processes.
#[derive(Debug, Default)]
pub(super) struct QuietGroups {
    socket: Option<Taskstats>,
    /// Whether opening was tried (once per run).
    tried: bool,
    last: HashMap<i32, GroupCpu>,
    quiet: HashSet<i32>,
}

impl QuietGroups {
    /// Asks, once a turn and before anything of the turn reads a thread,
    /// which of `pids` (process, thread count) had no thread run since the
    /// last turn. Asked twice a turn, the second answer would compare with
    /// the first and miss what ran before it. Small processes, a process
    /// seen for the first time, and any where taskstats cannot answer are
    /// not quiet.
    pub(super) fn turn(&mut self, pids: &[(i32, usize)]) {
        self.quiet.clear();
        let mut big = pids
            .iter()
            .filter(|(_, n)| *n >= MIN_THREADS)
            .map(|(pid, _)| *pid)
            .peekable();
        if big.peek().is_some() && !self.tried {
            self.tried = true;
            self.socket = Taskstats::open().ok();
        }
        // Figures kept for the processes asked this turn only.
        let mut last = HashMap::with_capacity(self.last.len());
        for pid in big {
            let Some(socket) = self.socket.as_mut() else {
                break;
            };
            match socket.group(pid) {
                Ok(now) => {
                    if self.last.get(&pid) == Some(&now) {
                        self.quiet.insert(pid);
                    }
                    last.insert(pid, now);
                }
                // Not root: every request would be refused.
                Err(e) if e.kind() == std::io::ErrorKind::PermissionDenied => self.socket = None,
                Err(_) => {}
            }
        }
        self.last = last;
    }

    /// Whether none of process `pid`'s threads ran since the last turn.
    pub(super) fn is_quiet(&self, pid: i32) -> bool {
        self.quiet.contains(&pid)
    }
}

#[cfg(test)]
mod tests {
    use std::io::{BufRead, BufReader, Write};
    use std::process::{Child, Command, Stdio};
    use std::sync::Arc;
    use std::time::Duration;

    use herd_engine::Sensor;

    use super::*;
    use crate::live::{LiveWorld, Program};

    /// A process of 12 threads that sleep; each line on its stdin makes its
    /// main thread use 150 ms of CPU, then sleep again.
    fn sleepers() -> (Child, BufReader<std::process::ChildStdout>) {
        let script = "import sys, threading, time\n\
                      ev = threading.Event()\n\
                      for _ in range(11): threading.Thread(target=ev.wait, daemon=True).start()\n\
                      print('ready', flush=True)\n\
                      while sys.stdin.readline():\n\
                      \x20   t = time.thread_time()\n\
                      \x20   while time.thread_time() - t < 0.15: pass\n\
                      \x20   print('done', flush=True)\n";
        let mut child = Command::new("python3")
            .args(["-c", script])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .expect("python3");
        let mut out = BufReader::new(child.stdout.take().expect("stdout"));
        let mut line = String::new();
        out.read_line(&mut line).expect("ready");
        assert_eq!(line.trim(), "ready");
        (child, out)
    }

    fn burst(child: &mut Child, out: &mut BufReader<std::process::ChildStdout>) {
        writeln!(child.stdin.as_mut().expect("stdin")).expect("a line");
        let mut line = String::new();
        out.read_line(&mut line).expect("done");
    }

    #[test]
    fn a_process_whose_threads_slept_is_quiet_and_one_that_ran_is_not() {
        if Taskstats::open().is_err() {
            eprintln!("no taskstats here: skipped");
            return;
        }
        let (mut child, mut out) = sleepers();
        let pid = child.id() as i32;
        let mut q = QuietGroups::default();
        q.turn(&[(pid, 12)]);
        let first = q.is_quiet(pid);
        // Its threads may still be on their way to sleep (a loaded
        // machine): asked every 50 ms, it is quiet within a second.
        let slept = (0..20).any(|_| {
            std::thread::sleep(Duration::from_millis(50));
            q.turn(&[(pid, 12)]);
            q.is_quiet(pid)
        });
        burst(&mut child, &mut out);
        q.turn(&[(pid, 12)]);
        let ran = q.is_quiet(pid);
        // Below the threshold it is not asked at all.
        q.turn(&[(pid, MIN_THREADS - 1)]);
        let small = q.is_quiet(pid);
        drop(child.stdin.take());
        let _ = child.wait();
        if q.socket.is_none() {
            eprintln!("taskstats refused (no CAP_NET_ADMIN): skipped");
            return;
        }
        assert!(!first, "a process seen the first time is read");
        assert!(slept, "its threads slept between two turns within a second");
        assert!(!ran, "its main thread used 150 ms of CPU");
        assert!(!small);
    }

    #[test]
    fn a_thread_that_runs_after_quiet_turns_is_seen_running() {
        let (mut child, mut out) = sleepers();
        let pid = child.id() as i32;
        let mut world = LiveWorld::new(vec![Program::attach(pid).expect("attach")], Arc::default());
        world.observe();
        for _ in 0..3 {
            std::thread::sleep(Duration::from_millis(110));
            world.observe();
        }
        burst(&mut child, &mut out);
        let snap = world.observe().clone();
        let unread = world.stats.threads_unread;
        drop(child.stdin.take());
        let _ = child.wait();
        world.restore();
        let main = snap
            .tasks
            .iter()
            .find(|t| t.id == pid as u64)
            .expect("its main thread");
        assert!(
            main.obs.cpu_time_ns >= 100_000_000,
            "the 150 ms burst is seen ({} samples were kept unread before it): {:?}",
            unread,
            main.obs
        );
    }
}
