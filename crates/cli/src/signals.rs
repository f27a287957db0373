//! SIGINT and SIGTERM for commands that manage programs: the handler only
//! records the signal and who sent it; the loop notices, restores the
//! programs, and decides what to pass on.
//!
//! A terminal's Ctrl-C goes to its whole foreground process group, where
//! herd's programs run beside herd: they have it already, and herd passing
//! it on gave each a second one, which many programs take as "stop now,
//! skip the clean-up" (seen: one Ctrl-C, two SIGINTs in a Python program).
//! The kernel marks such a signal `SI_KERNEL`; one from `kill` is
//! `SI_USER` and reaches herd alone. Why `signal-hook-registry` directly:
//! `signal-hook`'s handlers do not see the `siginfo_t`.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicI32, AtomicUsize, Ordering};

use crate::common::Failure;

/// What the handlers saw.
pub struct Signals {
    /// Set on SIGINT or SIGTERM; the live world stops its loop on it.
    pub stop: Arc<AtomicBool>,
    received: Arc<AtomicI32>,
    /// How many SIGINT or SIGTERM came: a second one while herd waits for
    /// programs that ignore the first makes herd leave them running.
    count: Arc<AtomicUsize>,
    /// Whether the last one came from the kernel on a terminal's behalf
    /// (`SI_KERNEL`), to herd's whole process group.
    from_terminal: Arc<AtomicBool>,
}

impl Signals {
    /// Installs the handlers (before any program starts, so none is lost).
    pub fn install() -> Result<Signals, Failure> {
        let sig = Signals {
            stop: Arc::new(AtomicBool::new(false)),
            received: Arc::new(AtomicI32::new(0)),
            count: Arc::new(AtomicUsize::new(0)),
            from_terminal: Arc::new(AtomicBool::new(false)),
        };
        for s in [signal_hook::consts::SIGINT, signal_hook::consts::SIGTERM] {
            signal_hook::flag::register(s, Arc::clone(&sig.stop)).map_err(|e| Failure::Internal(e.into()))?;
            let received = Arc::clone(&sig.received);
            let count = Arc::clone(&sig.count);
            let from_terminal = Arc::clone(&sig.from_terminal);
            // SAFETY: the handler only reads the siginfo it is given and
            // stores into atomics, which is async-signal-safe.
            unsafe {
                signal_hook_registry::register_sigaction(s, move |info: &libc::siginfo_t| {
                    from_terminal.store(info.si_code == libc::SI_KERNEL, Ordering::Relaxed);
                    received.store(s, Ordering::Relaxed);
                    count.fetch_add(1, Ordering::Relaxed);
                })
            }
            .map_err(|e| Failure::Internal(e.into()))?;
        }
        Ok(sig)
    }

    /// Ends, with the signal herd received, the programs herd was still
    /// holding before their start (call before `Session::finish`, which
    /// lets held programs go). Under plain Linux they would have been
    /// running and got the signal; starting one only to signal it raced
    /// its start-up: a Python program that got SIGINT while it set up its
    /// handlers ran on, its signal lost (seen once in the suite). The
    /// trampoline holding a program keeps the default actions, so the
    /// signal ends it before it reads its pipe's end. As in `pass_on`, a
    /// terminal's signal already reached those in herd's process group.
    pub fn end_held(&self, world: &herd_runtime::live::LiveWorld) {
        let Some(signal) = self.received() else { return };
        let had_it = self.terminal_reached();
        for p in world.programs().iter().filter(|p| p.held() && p.alive()) {
            if !had_it(p.pid) {
                let _ = herd_runtime::control::signal(p.pid, signal);
            }
        }
    }

    /// Whether the signal herd received reached process `pid` already: it
    /// came from a terminal, to herd's whole process group, and `pid` is
    /// in that group.
    fn terminal_reached(&self) -> impl Fn(i32) -> bool {
        let terminal = self.from_terminal.load(Ordering::Relaxed);
        // SAFETY: getpgrp has no preconditions and cannot fail.
        let group = unsafe { libc::getpgrp() };
        // SAFETY: getpgid only reads; -1 is a process gone.
        move |pid| terminal && unsafe { libc::getpgid(pid) } == group
    }

    /// Passes the signal herd received, if any, on to every program still
    /// running (call after `LiveWorld::restore`, so none is stopped), and
    /// to the processes it forked that share its process group, as a
    /// terminal's Ctrl-C reaches them: a shell that runs the real program
    /// waits for it and lets SIGINT go by, and herd waited as long. A
    /// process that left the group (a daemon a build started) is not
    /// signalled, by herd or by a terminal. None in herd's own process
    /// group gets a terminal's signal from herd: it has it already.
    pub fn pass_on(&self, world: &herd_runtime::live::LiveWorld) {
        let Some(signal) = self.received() else { return };
        let terminal = self.from_terminal.load(Ordering::Relaxed);
        let had_it = self.terminal_reached();
        // SAFETY: getpgid only reads; -1 is a process gone.
        let group_of = |pid: i32| unsafe { libc::getpgid(pid) };
        let mut passed = 0;
        for p in world.programs().iter().filter(|p| p.alive()) {
            let own = group_of(p.pid);
            let tree = herd_runtime::procfs::subtree(std::path::Path::new("/proc"), p.pid);
            let forked = tree.into_iter().filter(|&c| group_of(c) == own);
            for pid in std::iter::once(p.pid).chain(forked) {
                if had_it(pid) {
                    continue;
                }
                passed += 1;
                let _ = herd_runtime::control::signal(pid, signal);
            }
        }
        let how = if passed == 0 && terminal {
            "the terminal gave the signal to them too"
        } else {
            "passed the signal on"
        };
        eprintln!("herd: got signal {signal}: resumed and restored the programs, {how}, waiting for them");
    }

    /// Waits for the programs still running after `pass_on`, unless a
    /// second signal comes: then herd leaves them running (its own changes
    /// are already undone) and says which. Returns their statuses.
    pub fn wait(&self, world: &mut herd_runtime::live::LiveWorld) -> Vec<Option<std::process::ExitStatus>> {
        let statuses = world.wait_all_or(|| self.count.load(Ordering::Relaxed) >= 2);
        let left: Vec<String> = world
            .programs()
            .iter()
            .zip(&statuses)
            .filter(|(_, st)| st.is_none())
            .map(|(p, _)| format!("{} (pid {})", p.name, p.pid))
            .collect();
        if !left.is_empty() {
            eprintln!(
                "herd: a second signal: leaving {} running, as plain Linux runs it: {}",
                left.len(),
                left.join(", ")
            );
        }
        statuses
    }

    /// The signal received, if any.
    pub fn received(&self) -> Option<i32> {
        Some(self.received.load(Ordering::Relaxed)).filter(|&s| s != 0)
    }
}
