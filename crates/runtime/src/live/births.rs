//! Threads and processes born on a pin herd gave their creator, freed at
//! birth. A child inherits its creator's affinity: under a pinning policy
//! every compiler `make` forks, and every worker a Python pool forks,
//! starts on its creator's one CPU. `observe` frees such a child when it
//! first sees it, up to a period later; a compiler here lives about
//! 120 ms, so `make -j2` under static:compact still took 1.10x plain
//! Linux's time. The kernel's fork events (`proc_events`) say at once who
//! was born of whom, and the clock, which waits on them between turns,
//! gives each child born on one of herd's pins its program's mask.
//!
//! A job that made such a child keeps its cpuset wide until a turn finds
//! none made since the one before (`actuate::confine`).
//!
//! Subscribed once herd first gives a thread other CPUs than its own (a
//! policy that never does has nothing to free), and filtered in the
//! kernel to forks by the processes herd pinned a thread of, so that the
//! loop does not wake for every fork on the machine; without root or the
//! connector, `observe`'s rule alone frees children.

use std::collections::HashMap;
use std::os::fd::RawFd;
use std::time::Duration;

use crate::control;
use crate::proc_events::{Event, ProcEvents};

use super::{LiveWorld, program_mask};

/// The subscription, once asked for.
#[derive(Debug, Default)]
pub(super) struct Births {
    events: Option<ProcEvents>,
    tried: bool,
    /// Per job, the turn (`LiveWorld::turns`) after which it last made a
    /// child on one of herd's pins.
    born_turn: HashMap<usize, u64>,
    /// The processes the kernel's filter names now (`filter_births`).
    filtered: Option<Vec<i32>>,
}

impl Births {
    /// Whether job `job` made a child on one of herd's pins since the
    /// turn before `turn`.
    pub(super) fn born_lately(&self, job: usize, turn: u64) -> bool {
        self.born_turn.get(&job).is_some_and(|&t| t + 1 >= turn)
    }

    /// The descriptor the clock waits on, while subscribed.
    pub(super) fn fd(&self) -> Option<RawFd> {
        self.events.as_ref().map(ProcEvents::raw_fd)
    }
}

impl LiveWorld {
    /// Subscribes to fork events, once (a refusal is not asked again).
    pub(super) fn watch_births(&mut self) {
        if !self.births.tried {
            self.births.tried = true;
            self.births.events = ProcEvents::open().ok();
        }
    }

    /// Has the kernel pass only forks made by processes with a thread
    /// herd has pinned (those whose children are born on a pin), so that
    /// herd's loop does not wake for every fork on the machine. Set again
    /// when that set of processes changes.
    pub(super) fn filter_births(&mut self) {
        let Some(ev) = self.births.events.as_ref() else {
            return;
        };
        let mut pids: Vec<i32> = self
            .tasks
            .values()
            .filter(|t| t.placed.is_some() && t.placed != t.original)
            .map(|t| t.pid)
            .collect();
        pids.sort_unstable();
        pids.dedup();
        if self.births.filtered.as_ref() == Some(&pids) {
            return;
        }
        // A refusal leaves every event coming: `free_births` looks at each.
        if ev.only_forks_of(&pids).is_ok() {
            self.births.filtered = Some(pids);
        }
    }

    /// Reads the fork events that came, and gives each child born on a
    /// mask herd gave one of its job's threads its program's mask: the
    /// kernel places it until the policy does, as `observe` would at its
    /// next look. A child herd tracks already is the policy's to place.
    /// A race left open, as in `observe`'s rule: a program that sets a new
    /// thread's mask itself just after making it may have herd read the
    /// inherited pin first and then overwrite its choice.
    pub(super) fn free_births(&mut self) {
        let Some(ev) = self.births.events.as_mut() else {
            return;
        };
        let events = match ev.recv(Duration::ZERO) {
            Ok(v) => v,
            // The kernel dropped events: `observe` frees those children.
            Err(e) if e.raw_os_error() == Some(libc::ENOBUFS) => return,
            Err(_) => {
                self.births.events = None;
                return;
            }
        };
        for e in events {
            let (child, creator, creator_pid) = match e {
                Event::Fork { pid, parent, creator } => (pid, creator, parent),
                Event::Thread { tid, pid, creator } => (tid, creator, pid),
                Event::Exec { .. } | Event::Exit { .. } => continue,
            };
            if self.tasks.contains_key(&child) {
                continue;
            }
            // The creator's job: its own track, else its process's main
            // thread's (a creator born since herd's last look).
            let Some(job) = self
                .tasks
                .get(&creator)
                .or_else(|| self.tasks.get(&creator_pid))
                .map(|t| t.job)
            else {
                continue;
            };
            let Some(pins) = self.pins_given.get(&job) else {
                continue;
            };
            // A child already gone, or one its program has set a mask of
            // its own (none of herd's pins), is left alone.
            let Ok(own) = control::affinity(child) else {
                continue;
            };
            if !pins.contains(&own) {
                continue;
            }
            let Some(main) = self.programs.get(job).map(|p| p.pid) else {
                continue;
            };
            let Some(mask) = program_mask(&self.tasks, Some(pins), main, job) else {
                continue;
            };
            self.births.born_turn.insert(job, self.turns);
            // A cpuset narrowed to the job's pins would hold the child
            // there whatever its mask: the job gets every CPU herd was
            // given back, as `confine` gives a job with an unplaced thread.
            if let Some(all) = self.own_cpus.clone() {
                self.set_job_cpus(job, &all, |_| false);
            }
            if mask != own && control::set_affinity(child, &mask).is_ok() {
                self.stats.births_freed += 1;
            }
        }
    }
}
