//! Threads' scheduler times from herd's eBPF program (`crate::sched_bpf`)
//! in place of their `/proc` files, once reading those has cost what
//! loading the program does.
//!
//! Loading costs 40-130 ms of herd's CPU here and a 30 MB peak of memory
//! (the kernel's BTF is parsed; `herd doctor` and `herd run` with
//! `HERD_SCHED_BPF=on` against `off`), about what 10,000 thread reads from
//! `/proc` cost (3.5-12 µs each). Loading once the reads have cost that
//! much is the rent-or-buy rule: never more than twice the cost of the
//! better choice made knowing the run's length. A short run of a few
//! threads never pays it; a tree of a thousand busy threads loads it
//! after ten turns, and from then on a thread that ran costs a few loads
//! instead of two `pread`s. Where the program does not load, herd reads
//! `/proc` as before and says why in `herd doctor`. `HERD_SCHED_BPF=on`
//! loads it at the first turn (to measure it), `off` never.

use std::sync::{Arc, Mutex, MutexGuard};

use crate::procfs::{ThreadSample, Times};
use crate::sched_bpf::SchedWatch;

/// herd's one program, shared by every live world of the process.
type Shared = Arc<Mutex<SchedWatch>>;

/// Thread samples read from `/proc` before the program is loaded.
const OPEN_AFTER_READS: u64 = crate::sched_bpf::LOAD_AFTER_READS;

#[derive(Debug)]
enum State {
    /// Not loaded yet: the thread samples read in full from `/proc` so far.
    Waiting {
        reads: u64,
    },
    /// Loading on a thread of its own, so that no turn waits for it
    /// (about 100 ms here).
    Loading(std::thread::JoinHandle<Option<Shared>>),
    On(Shared),
    /// Tried and refused (or a fake `/proc`, in tests): `/proc` it is.
    Off,
}

/// The program, once loaded, and this turn's clock for it.
#[derive(Debug)]
pub(super) struct KernelTimes {
    state: State,
    /// CLOCK_MONOTONIC at the turn's start, the program's clock.
    now_ns: u64,
    /// The threads this world has the program watch, let go when it ends
    /// (the program outlives it in the daemon).
    watched: std::collections::HashSet<i32>,
}

impl KernelTimes {
    /// Waiting to load, or off for good where `/proc` is not the kernel's
    /// (a test's fake tree: its thread ids name no real threads).
    pub(super) fn new(real_proc: bool) -> Self {
        KernelTimes {
            state: match (real_proc, crate::sched_bpf::asked()) {
                (false, _) | (true, Some(false)) => State::Off,
                (true, Some(true)) => State::Waiting {
                    reads: OPEN_AFTER_READS,
                },
                (true, None) => State::Waiting { reads: 0 },
            },
            now_ns: 0,
            watched: Default::default(),
        }
    }

    /// Loads once `reads` thread samples were read from `/proc` (tests).
    #[cfg(test)]
    pub(super) fn after_reads(reads: u64) -> Self {
        KernelTimes {
            state: State::Waiting {
                reads: OPEN_AFTER_READS.saturating_sub(reads),
            },
            now_ns: 0,
            watched: Default::default(),
        }
    }

    /// At a turn's start: reads the clock; starts loading the program once
    /// enough has been read from `/proc`, and once it is loaded watches
    /// the threads tracked (`tids`).
    pub(super) fn turn(&mut self, tids: impl Iterator<Item = i32>) {
        if let State::Waiting { reads } = self.state
            && reads >= OPEN_AFTER_READS
        {
            let loading = std::thread::Builder::new()
                .name("herd-bpf-load".into())
                .spawn(|| crate::sched_bpf::shared().ok());
            self.state = loading.map_or(State::Off, State::Loading);
        }
        if matches!(&self.state, State::Loading(h) if h.is_finished()) {
            let State::Loading(h) = std::mem::replace(&mut self.state, State::Off) else {
                unreachable!("just matched");
            };
            if let Ok(Some(shared)) = h.join() {
                {
                    let mut w = lock(&shared);
                    for tid in tids {
                        if w.watch(tid) {
                            self.watched.insert(tid);
                        }
                    }
                }
                self.state = State::On(shared);
            }
        }
        if matches!(self.state, State::On(_)) {
            // The program's clock (`bpf_ktime_get_ns`).
            self.now_ns = super::clock::clock_ns(libc::CLOCK_MONOTONIC);
        }
    }

    /// A thread's `stat` (and `schedstat`) were read from `/proc`: a
    /// sample kept because the thread slept does not count.
    pub(super) fn read_from_proc(&mut self) {
        if let State::Waiting { reads } = &mut self.state {
            *reads += 1;
        }
    }

    /// A new thread to watch.
    pub(super) fn watch(&mut self, tid: i32) {
        if let State::On(w) = &self.state
            && lock(w).watch(tid)
        {
            self.watched.insert(tid);
        }
    }

    /// A thread no longer tracked.
    pub(super) fn forget(&mut self, tid: i32) {
        if let State::On(w) = &self.state
            && self.watched.remove(&tid)
        {
            lock(w).unwatch(tid);
        }
    }

    /// Thread `tid`'s sample now from the program, and whether its times
    /// moved since `last`; `None` where `/proc` must say: the program is
    /// not loaded or has not seen it switch, it was never read from
    /// `/proc` (its start time is there alone), or it exited (`/proc`
    /// then says it is gone, and its process is listed again).
    pub(super) fn sample(&self, tid: i32, last: &ThreadSample) -> Option<(ThreadSample, bool)> {
        let State::On(w) = &self.state else {
            return None;
        };
        if last.start_ticks == 0 {
            return None;
        }
        let seen = lock(w)
            .read(tid, self.now_ns)
            .filter(|s| !matches!(s.state, 'X' | 'Z'))?;
        let sample = ThreadSample {
            tid,
            state: seen.state,
            cpu: seen.cpu,
            run_ns: seen.run_ns,
            wait_ns: seen.wait_ns,
            slices: seen.slices,
            start_ticks: last.start_ticks,
            migrations: None,
            threads: seen.threads,
        };
        Some((sample, seen.times() != last.times()))
    }

    /// Thread `tid`'s times now, where the program has them.
    pub(super) fn times(&self, tid: i32) -> Option<Times> {
        match &self.state {
            State::On(w) => lock(w).read(tid, self.now_ns).map(|s| s.times()),
            _ => None,
        }
    }
}

impl Drop for KernelTimes {
    fn drop(&mut self) {
        if let State::On(w) = &self.state {
            let mut w = lock(w);
            for &tid in &self.watched {
                w.unwatch(tid);
            }
        }
    }
}

/// The shared program, locked (a world that panicked holding it left it as
/// it was: slots are read, never half-changed by herd).
fn lock(w: &Shared) -> MutexGuard<'_, SchedWatch> {
    w.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}
