//! The keeper: what herd did to its programs, told as it happens to a
//! process that outlives herd, so that a herd killed outright (SIGKILL, a
//! crash) still leaves no program stopped or pinned.
//!
//! herd restores the machine itself on every exit it lives through
//! (`live::Session`). For the one it does not, the kernel covers part:
//! `PR_SET_PDEATHSIG = SIGCONT` continues a stopped program, a held one
//! reads its pipe's end, and the cgroup guard thaws and removes herd's
//! groups. Not covered by those: a process a program forked that herd
//! stopped by signal (the death signal is the program's alone) and a
//! thread herd pinned with `sched_setaffinity` outside a cpuset (it kept
//! its single CPU for good). The keeper is the cgroup guard's process
//! (`herd __cgroup-guard`, in its own session, deaf to terminal signals)
//! started with no groups; herd writes it a line per act:
//!
//! - `pin TID START CPUS`: thread TID (started at START, in clock ticks
//!   since boot: a reused id is not touched) had affinity CPUS before herd
//!   first changed it;
//! - `stop PID START`: herd stopped process PID;
//! - `done`: herd restored everything itself.
//!
//! When herd's end of the pipe closes without `done`, the keeper gives
//! every pinned thread its first affinity back and continues every process
//! herd stopped.

use std::collections::BTreeMap;
use std::io::{self, BufRead, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Stdio};

use herd_topo::CpuSet;

use crate::{control, procfs};

/// herd's side: the running keeper and its pipe.
#[derive(Debug)]
pub struct Keeper {
    child: Child,
    pipe: Option<ChildStdin>,
    proc_root: std::path::PathBuf,
}

impl Keeper {
    /// Starts the keeper: `exe` is herd's own binary; `after` the cgroup
    /// guard's pid, when there is one, which the keeper lets finish before
    /// it gives masks back ([`AFTER_ARG`]).
    pub fn start(exe: &Path, proc_root: &Path, after: Option<u32>) -> io::Result<Keeper> {
        let (child, pipe) = spawn_guard(exe, &[], after)?;
        Ok(Keeper {
            child,
            pipe: Some(pipe),
            proc_root: proc_root.to_path_buf(),
        })
    }

    fn say(&mut self, line: &str) {
        // A keeper that died cannot be helped; herd goes on without it.
        if let Some(p) = self.pipe.as_mut() {
            if p.write_all(line.as_bytes()).is_err() {
                self.pipe = None;
            }
        }
    }

    /// Thread `tid`'s affinity was `original` before herd first changed it.
    pub fn pinned(&mut self, tid: i32, original: &CpuSet) {
        if let Some(start) = procfs::start_time(&self.proc_root, tid) {
            self.say(&format!("pin {tid} {start} {original}\n"));
        }
    }

    /// herd stopped process `pid`.
    pub fn stopped(&mut self, pid: i32) {
        if let Some(start) = procfs::start_time(&self.proc_root, pid) {
            self.say(&format!("stop {pid} {start}\n"));
        }
    }

    /// herd restored everything itself: the keeper ends doing nothing.
    pub fn done(mut self) {
        self.say("done\n");
        self.finish();
    }

    fn finish(&mut self) {
        drop(self.pipe.take());
        let _ = self.child.wait();
    }
}

impl Drop for Keeper {
    fn drop(&mut self) {
        // Without `done`: the keeper undoes what it was told.
        self.finish();
    }
}

/// The hidden first argument that makes the herd binary a guard: the
/// cgroup guard (with groups) or the keeper (without).
pub const GUARD_ARG: &str = "__cgroup-guard";

/// The keeper's `--after PID`: the cgroup guard, which must have moved
/// herd's programs out of its cpusets before the keeper gives their
/// threads their masks back. Both wake when a killed herd's pipes close,
/// and a thread's `sched_setaffinity` racing its cpuset move can end on
/// the cpuset's CPUs: the call narrows the mask to the cpuset it read,
/// the move reads the pin not yet replaced, and the call's recheck finds
/// the narrowed mask inside the new cpuset (the kernel's own comment in
/// `__sched_setaffinity` owns to the race and mends only a mask outside).
/// One fault-test run left a thread on CPU 0 after 1 of 36 SIGKILLs; this
/// race is one that can do so (not caught in the act).
pub const AFTER_ARG: &str = "--after";

/// How long the keeper waits for the cgroup guard at most: its moves take
/// milliseconds; a guard that hangs must not keep masks from coming back.
pub const AFTER_WAIT_MS: i32 = 5_000;

/// A process to wait for: a pidfd where the kernel has them (5.3), else
/// the pid, polled.
#[derive(Debug)]
pub struct Awaited {
    pid: i32,
    fd: Option<std::os::fd::OwnedFd>,
}

impl Awaited {
    /// Takes hold of process `pid` now, while it is known to live (a pid
    /// polled later could name another process).
    pub fn new(pid: i32) -> Awaited {
        Awaited {
            pid,
            fd: control::pidfd(pid),
        }
    }

    /// Waits until the process has ended, or `limit_ms` has passed;
    /// whether it ended.
    pub fn wait(&self, limit_ms: i32) -> bool {
        use std::os::fd::AsRawFd;
        if let Some(fd) = &self.fd {
            let mut p = libc::pollfd {
                fd: fd.as_raw_fd(),
                events: libc::POLLIN,
                revents: 0,
            };
            // SAFETY: one valid pollfd for the length given.
            return unsafe { libc::poll(&mut p, 1, limit_ms) } == 1;
        }
        let deadline = std::time::Instant::now() + std::time::Duration::from_millis(limit_ms as u64);
        while std::time::Instant::now() < deadline {
            // SAFETY: signal 0 only asks whether the process exists.
            if unsafe { libc::kill(self.pid, 0) } != 0 {
                return true;
            }
            std::thread::sleep(std::time::Duration::from_millis(5));
        }
        false
    }
}

/// herd's own binary, for starting its helpers (the keeper, the cgroup
/// guard, the trampoline of held programs): `/proc/self/exe`, which names
/// the running binary even after its file was replaced on disk. The path
/// may by then name another version of herd, or for a moment nothing (an
/// upgrade or a rebuild during a run: a `vm-test` guest lost its keeper
/// this way, and a herd killed then left its programs pinned). The path
/// itself where /proc is missing.
pub fn own_binary() -> io::Result<PathBuf> {
    let running = Path::new("/proc/self/exe");
    if running.exists() {
        Ok(running.to_path_buf())
    } else {
        std::env::current_exe()
    }
}

/// Names the calling process `herd` (its `comm`), which exec from
/// `/proc/self/exe` would leave as `exe`, and a copy installed under
/// another file name as that name: `ps`, and herd's own check of whether
/// a pid is a herd (`crate::peers`), read that name. The CLI names itself
/// so at start, the guard process too.
pub fn name_herd() {
    // SAFETY: PR_SET_NAME reads a NUL-terminated string of at most 16 bytes.
    unsafe {
        libc::prctl(libc::PR_SET_NAME, c"herd".as_ptr() as libc::c_ulong, 0, 0, 0);
    }
}

/// Starts a guard process (`exe GUARD_ARG [--after PID] base home ...`)
/// with a pipe on its standard input: it acts when herd's end closes.
pub(crate) fn spawn_guard(
    exe: &Path,
    groups: &[(PathBuf, PathBuf)],
    after: Option<u32>,
) -> io::Result<(Child, ChildStdin)> {
    use std::os::unix::process::CommandExt;
    let mut cmd = Command::new(exe);
    cmd.arg0("herd").arg(GUARD_ARG);
    if let Some(pid) = after {
        cmd.arg(AFTER_ARG).arg(pid.to_string());
    }
    for (base, home) in groups {
        cmd.arg(base).arg(home);
    }
    cmd.stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::null());
    // setsid puts the guard in its own session so a terminal's Ctrl-C or a
    // kill of herd's process group does not reach it. The OOM score is set
    // before the guard's exec, not by the guard once it runs: under a
    // memory limit the OOM killer could take the guard while it started,
    // together with herd, and herd's groups were left behind (root may
    // lower it; others, and containers, keep the default).
    let oom = c"/proc/self/oom_score_adj";
    // SAFETY: setsid, open, write and close are async-signal-safe, and the
    // path is made before the fork.
    unsafe {
        cmd.pre_exec(move || {
            libc::setsid();
            let fd = libc::open(oom.as_ptr(), libc::O_WRONLY | libc::O_CLOEXEC);
            if fd >= 0 {
                libc::write(fd, b"-1000".as_ptr().cast(), 5);
                libc::close(fd);
            }
            Ok(())
        });
    }
    let mut child = cmd.spawn()?;
    let stdin = child
        .stdin
        .take()
        .ok_or_else(|| io::Error::other("no pipe to the guard"))?;
    Ok((child, stdin))
}

/// What a keeper was told, once herd's pipe has closed.
#[derive(Debug, Default, PartialEq)]
pub struct Told {
    /// Each thread's first affinity and start time.
    pub pins: BTreeMap<i32, (u64, CpuSet)>,
    /// Processes herd stopped, with their start times.
    pub stops: BTreeMap<i32, u64>,
    /// Whether herd said it restored everything itself.
    pub done: bool,
}

impl Told {
    /// Reads the lines herd wrote until the pipe closes. A line it cannot
    /// read is skipped: the keeper must not fail on what herd half wrote
    /// when it was killed.
    pub fn read(input: impl BufRead) -> Told {
        let mut told = Told::default();
        for line in input.lines() {
            let Ok(line) = line else { break };
            let f: Vec<&str> = line.split_whitespace().collect();
            let num = |i: usize| f.get(i).and_then(|x| x.parse::<u64>().ok());
            match (f.first().copied(), num(1), num(2)) {
                (Some("pin"), Some(tid), Some(start)) => {
                    if let Some(cpus) = f.get(3).and_then(|c| CpuSet::parse_list(c).ok()) {
                        // The first mask told is the one the thread had.
                        told.pins.entry(tid as i32).or_insert((start, cpus));
                    }
                }
                (Some("stop"), Some(pid), Some(start)) => {
                    told.stops.insert(pid as i32, start);
                }
                (Some("done"), _, _) => told.done = true,
                _ => {}
            }
        }
        told
    }

    /// Undoes what herd did, unless herd said it had: each pinned thread
    /// that is still the one told (same start time) gets its first affinity
    /// back, each stopped process is continued.
    ///
    /// A thread its process created after herd pinned the creator, and
    /// that herd had not yet seen when it died, inherited the pin and was
    /// never told of: every thread of a process with a told thread gets
    /// the process's first mask (its main thread's if told, else the first
    /// told), told threads their own. A thread whose creation was under way
    /// while its creator got its mask back copied the pin and joined the
    /// process's list only after the keeper read it (the kernel copies the
    /// creator's mask before the new thread is listed): the list is read
    /// again a few times over a tenth of a second
    /// ([`Restored::late_threads`]).
    pub fn undo(&self, proc_root: &Path) {
        let mut restored = self.undo_once(proc_root);
        for _ in 0..LATE_LOOKS {
            if restored.processes.is_empty() {
                break;
            }
            std::thread::sleep(LATE_LOOK_GAP);
            restored.late_threads(proc_root);
        }
    }

    /// [`Told::undo`]'s first pass: what it gave back, for the later looks.
    pub fn undo_once(&self, proc_root: &Path) -> Restored {
        let mut restored = Restored::default();
        if self.done {
            return restored;
        }
        for (&tid, (start, cpus)) in &self.pins {
            if procfs::start_time(proc_root, tid) == Some(*start) {
                let before = control::affinity(tid).ok();
                let _ = control::set_affinity(tid, cpus);
                if let Some(tgid) = procfs::tgid(proc_root, tid) {
                    let main = tid == tgid;
                    let p = restored.processes.entry(tgid).or_insert_with(|| Process {
                        mask: cpus.clone(),
                        ..Process::default()
                    });
                    if main {
                        p.mask = cpus.clone();
                    }
                    p.seen.insert(tid);
                    p.pins.extend(before.filter(|b| b != cpus));
                }
            }
        }
        for (tgid, p) in &mut restored.processes {
            for tid in procfs::threads(proc_root, *tgid) {
                if p.seen.insert(tid) {
                    let before = control::affinity(tid).ok();
                    if before.as_ref() != Some(&p.mask) && control::set_affinity(tid, &p.mask).is_ok() {
                        p.pins.extend(before);
                    }
                }
            }
        }
        for (&pid, &start) in &self.stops {
            if procfs::start_time(proc_root, pid) == Some(start) {
                let _ = control::signal(pid, libc::SIGCONT);
            }
        }
        restored
    }
}

/// How many times, and how far apart, the keeper reads again the threads
/// of a process it gave masks back to. A creation under way takes
/// microseconds unless its creator is kept off a CPU; the looks span
/// 120 ms for a creator kept waiting by a loaded machine.
const LATE_LOOKS: usize = 3;
const LATE_LOOK_GAP: std::time::Duration = std::time::Duration::from_millis(40);

/// What the keeper gave back, per process (by its id).
#[derive(Debug, Default)]
pub struct Restored {
    processes: BTreeMap<i32, Process>,
}

/// One process the keeper gave masks back to.
#[derive(Debug, Default)]
struct Process {
    /// The mask its threads get: its first one.
    mask: CpuSet,
    /// The threads already looked at.
    seen: std::collections::BTreeSet<i32>,
    /// The masks its threads had before the keeper changed them: herd's
    /// pins, which a late thread copied from its creator.
    pins: std::collections::HashSet<CpuSet>,
}

impl Restored {
    /// Gives the process's mask to each thread that joined a process after
    /// the last look and holds one of the pins taken from its threads.
    /// Another mask is the program's own choice and is kept.
    pub fn late_threads(&mut self, proc_root: &Path) {
        for (tgid, p) in &mut self.processes {
            for tid in procfs::threads(proc_root, *tgid) {
                if !p.seen.insert(tid) {
                    continue;
                }
                if control::affinity(tid).is_ok_and(|a| p.pins.contains(&a)) {
                    let _ = control::set_affinity(tid, &p.mask);
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn what_herd_half_wrote_is_skipped_and_the_first_mask_kept() {
        let text = "pin 12 900 0-3\nstop 40 77\npin 12 900 1\npin x y\nstop 41\npin 13 5 0,2";
        let told = Told::read(text.as_bytes());
        assert_eq!(told.pins[&12], (900, CpuSet::parse_list("0-3").unwrap()));
        assert_eq!(told.pins[&13], (5, CpuSet::parse_list("0,2").unwrap()));
        assert_eq!(told.stops.len(), 1);
        assert!(!told.done);
        assert!(Told::read("stop 1 2\ndone\n".as_bytes()).done);
    }

    #[test]
    fn a_thread_born_while_its_creator_got_its_mask_back_is_freed_too() {
        use std::io::{BufRead, BufReader, Write};
        let all = control::affinity(std::process::id() as i32).unwrap();
        let cpus: Vec<u32> = all.iter().collect();
        let (pin, own) = (cpus[0], *cpus.last().unwrap());
        // On a line from the test: one thread with the creator's old pin
        // (as a creation under way copies it), one with a mask of its own.
        let script = format!(
            "import os, sys, threading\n\
             def run(cpu, go):\n    os.sched_setaffinity(0, {{cpu}}); go.set(); threading.Event().wait(30)\n\
             sys.stdin.readline()\n\
             for cpu in ({pin}, {own}):\n    go = threading.Event()\n    \
             threading.Thread(target=run, args=(cpu, go), daemon=True).start(); go.wait()\n\
             print('ready', flush=True); sys.stdin.readline()"
        );
        let mut child = std::process::Command::new("python3")
            .args(["-c", &script])
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        let pid = child.id() as i32;
        let proc_root = Path::new("/proc");
        let start = procfs::start_time(proc_root, pid).unwrap();
        control::set_affinity(pid, &CpuSet::single(pin)).unwrap();
        let told = Told::read(format!("pin {pid} {start} {all}\n").as_bytes());
        let mut restored = told.undo_once(proc_root);
        assert_eq!(control::affinity(pid).unwrap(), all);
        let mut stdin = child.stdin.take().unwrap();
        writeln!(stdin).unwrap();
        let mut line = String::new();
        BufReader::new(child.stdout.take().unwrap())
            .read_line(&mut line)
            .unwrap();
        assert_eq!(line.trim(), "ready");
        restored.late_threads(proc_root);
        let masks: Vec<CpuSet> = procfs::threads(proc_root, pid)
            .into_iter()
            .filter(|&t| t != pid)
            .map(|t| control::affinity(t).unwrap())
            .collect();
        let _ = child.kill();
        child.wait().unwrap();
        // The late thread with the pin has the process's mask; the other
        // keeps its own (on one CPU, both were the pin).
        let expect = if pin == own {
            vec![all.clone(), all]
        } else {
            vec![all, CpuSet::single(own)]
        };
        assert_eq!(masks, expect);
    }

    #[test]
    fn a_pinned_and_stopped_process_is_freed_but_not_a_reused_id() {
        // Two threads; herd told the keeper of the main one only (the other
        // came after herd's last look and inherited the pin).
        let mut child = std::process::Command::new("python3")
            .args([
                "-c",
                "import threading, time\nthreading.Thread(target=time.sleep, args=(30,)).start()\ntime.sleep(30)",
            ])
            .spawn()
            .unwrap();
        let pid = child.id() as i32;
        let proc_root = Path::new("/proc");
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
        // The interpreter a shim may exec, with its second thread.
        while procfs::threads(proc_root, pid).len() < 2 && std::time::Instant::now() < deadline {
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
        let threads = procfs::threads(proc_root, pid);
        assert_eq!(threads.len(), 2, "{threads:?}");
        let all = control::affinity(pid).unwrap();
        let start = procfs::start_time(proc_root, pid).unwrap();
        let first = all.iter().next().unwrap();
        for &t in &threads {
            control::set_affinity(t, &CpuSet::single(first)).unwrap();
        }
        control::signal(pid, libc::SIGSTOP).unwrap();
        // A wrong start time: another process that took the id. Untouched.
        let wrong = format!("pin {pid} {} {all}\nstop {pid} {}\n", start + 1, start + 1);
        Told::read(wrong.as_bytes()).undo(proc_root);
        assert_eq!(control::affinity(pid).unwrap(), CpuSet::single(first));
        let right = format!("pin {pid} {start} {all}\nstop {pid} {start}\n");
        Told::read(right.as_bytes()).undo(proc_root);
        for &t in &threads {
            assert_eq!(control::affinity(t).unwrap(), all, "thread {t}");
        }
        // Continued: it leaves the stopped state.
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(2);
        while procfs::state(proc_root, pid) == Some('T') && std::time::Instant::now() < deadline {
            std::thread::sleep(std::time::Duration::from_millis(5));
        }
        assert_ne!(procfs::state(proc_root, pid), Some('T'));
        child.kill().unwrap();
        child.wait().unwrap();
    }
}
