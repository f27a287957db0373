//! The descriptors herd keeps per watched thread: its `/proc` files and
//! perf counters, within the process's open-file limit. Every thread herd
//! sees is watched; what a thread gets beyond that depends on room:
//! counters first go without, then kept `/proc` files (read by path
//! instead). Room is counted from the threads alive now, so a long run
//! with thread churn never runs out by having seen many.

use std::os::fd::OwnedFd;

use crate::perf::{self, Event};

/// Descriptors left for everything else: pidfds and hold pipes (counted
/// per program by the caller), logs, the database, heartbeat files, cgroup
/// files opened for a moment, the trace.
pub const RESERVED_FDS: usize = 64;

/// Which perf events herd opens per thread, learned once: an event the
/// kernel refuses (no PMU, not permitted) is not tried again; running out
/// of descriptors or memory refuses that thread only.
#[derive(Debug, Default)]
pub struct PerfBudget {
    hardware: Option<bool>,
    software: Option<bool>,
    sampling: Option<bool>,
    /// Whether software events are opened without hardware ones beside
    /// them: never in a run (see `open_for`); tests of the refusal paths
    /// use them on machines with no PMU.
    software_alone: bool,
    /// Threads that went without some counter the machine has, for want
    /// of descriptors.
    pub uncounted: u64,
    /// Threads whose `/proc` files were read by path, for want of
    /// descriptors.
    pub uncached: u64,
    /// Threads the kernel refused counters to after others had them (a
    /// PMU busy with another user's events, a thread that changed
    /// credentials): they go without; the others keep theirs.
    pub refused: u64,
}

/// IP sampling period: one sample per ms of a thread's CPU time, about a
/// hundred per 100 ms period, enough to tell code regions apart.
const IP_SAMPLE_PERIOD_NS: u64 = 1_000_000;

/// Counters on one thread, with their last values.
pub type Counters = Vec<(Event, OwnedFd, u64)>;

/// A thread put on a CPU more often than this a second loses its counters
/// (and IP sampler): each perf event on a thread is switched out and in
/// with it, a cost on every context switch. Measured here: with only a
/// migration counter on each thread, stress-ng's switch stressor (each
/// process put on a CPU about 250,000 times a second) ran 1.36-1.44x as
/// long as without (`herd batch` with `--compare linux`, 6 rounds, three
/// runs), about 1.5 us a switch; at this rate that is about 1% of a
/// thread's time. Its job then learns from CPU time (the guard) and from
/// its other threads' counters.
pub const SWITCHES_PER_S_LIMIT: u64 = 5_000;

/// Whether a thread put on a CPU `slices` times over `period_ns` switches
/// too often to keep counters ([`SWITCHES_PER_S_LIMIT`]).
pub fn switches_too_often(slices: u64, period_ns: u64) -> bool {
    period_ns > 0
        && u128::from(slices) * 1_000_000_000 > u128::from(SWITCHES_PER_S_LIMIT) * u128::from(period_ns)
}

/// The shortest window a thread's switches are judged over: a program's
/// start (exec, loading) switches a few times within a millisecond, and a
/// fast loop's first turn comes that soon.
const JUDGED_OVER_NS: u64 = 10_000_000;

/// Whether a thread whose count of times on a CPU is `slices` at `now_ns`
/// switches too often, judged over at least [`JUDGED_OVER_NS`] since
/// `mark` (its count and time when last judged, (0, 0) before its first
/// sample), which this moves on; `None` while too soon to judge.
pub fn judge_switches(mark: &mut (u64, u64), slices: u64, now_ns: u64) -> Option<bool> {
    let (since, at) = *mark;
    if at == 0 {
        *mark = (slices, now_ns.max(1));
        return None;
    }
    let window = now_ns.saturating_sub(at);
    if window < JUDGED_OVER_NS {
        return None;
    }
    *mark = (slices, now_ns);
    Some(switches_too_often(slices.saturating_sub(since), window))
}

impl PerfBudget {
    /// Nothing known yet.
    pub fn new() -> Self {
        Self::default()
    }

    /// Opens what a new thread `tid` can have with `room` descriptors
    /// free: its counters, then its IP sampler. Returns them and the
    /// descriptors they use.
    pub fn open_for(&mut self, tid: i32, mut room: usize) -> (Counters, Option<crate::ipsample::IpSampler>) {
        let mut out = Vec::new();
        let mut short = false;
        let mut refused = false;
        // Hardware first: the migration counter is opened only beside them.
        let groups: [(bool, &[Event]); 2] = [
            (
                true,
                &[
                    Event::Instructions,
                    Event::Cycles,
                    Event::LlcReferences,
                    Event::LlcMisses,
                ],
            ),
            (false, &[Event::CpuMigrations]),
        ];
        for (hardware, events) in groups {
            // Without hardware counters, no perf event at all. Any
            // per-thread event in the system makes every context switch on
            // every CPU run perf's switch hooks, not only the watched
            // thread's (the kernel turns them on for all while one task
            // event exists). Measured here (no PMU): one `cpu-migrations`
            // event on a sleeping process made stress-ng's switch stressor,
            // both its processes on one CPU, take 1.036x as long
            // (1.012-1.059, 8 alternated rounds), a `dummy` event 1.043x;
            // herd's `linux` loop, placing nothing, ran two unpinned copies
            // 1.09-1.40x plain Linux with the counter on its programs'
            // quieter threads. The count alone would only make exact what
            // a changed last CPU bounds from below (S3's monitor asks only
            // whether a thread moved): not worth a cost on every switch of
            // every program.
            if !hardware && self.hardware != Some(true) && !self.software_alone {
                continue;
            }
            let known = if hardware {
                &mut self.hardware
            } else {
                &mut self.software
            };
            if *known == Some(false) {
                continue;
            }
            if events.len() > room {
                short = true;
                continue;
            }
            let opened: Result<Vec<_>, _> = events
                .iter()
                // A counter starts at 0 when opened.
                .map(|&e| perf::open_thread_counter(e, tid).map(|fd| (e, fd, 0)))
                .collect();
            match opened {
                Ok(fds) => {
                    room -= fds.len();
                    out.extend(fds);
                    *known = Some(true);
                }
                // ESRCH: the thread left.
                Err(e) if e.raw_os_error() == Some(libc::ESRCH) => {}
                // Out of descriptors or memory: this thread goes without.
                Err(e) if crate::fds::exhausted(&e) => short = true,
                // Refused to one thread after others got them: this
                // thread goes without (issue 24: one refusal used to turn
                // counters off for the whole run).
                Err(_) if *known == Some(true) => refused = true,
                // Refused before any thread got them: this machine says
                // no, for every thread.
                Err(_) => *known = Some(false),
            }
        }
        let sampler = self.sampler_for(tid, room, &mut short);
        self.uncounted += u64::from(short);
        self.refused += u64::from(refused);
        (out, sampler)
    }

    /// An IP sampler for `tid`, only where hardware counters exist: phases
    /// are learned only from slices with instructions and memory traffic,
    /// so elsewhere the samples would cost interrupts and say nothing.
    fn sampler_for(&mut self, tid: i32, room: usize, short: &mut bool) -> Option<crate::ipsample::IpSampler> {
        if self.hardware != Some(true) || self.sampling == Some(false) {
            return None;
        }
        if room == 0 {
            *short = true;
            return None;
        }
        match crate::ipsample::IpSampler::open(tid, IP_SAMPLE_PERIOD_NS) {
            Ok(s) => {
                self.sampling = Some(true);
                Some(s)
            }
            Err(e) if e.raw_os_error() == Some(libc::ESRCH) => None,
            Err(e) if crate::fds::exhausted(&e) => {
                *short = true;
                None
            }
            Err(_) => {
                self.sampling = Some(false);
                None
            }
        }
    }
}

/// What the perf counters said over one period.
#[derive(Debug, Default)]
pub struct CountedObs {
    pub instructions: Option<u64>,
    pub cycles: Option<u64>,
    pub llc_refs: Option<u64>,
    pub llc_misses: Option<u64>,
    pub migrations: Option<u64>,
}

impl CountedObs {
    /// Reads a thread's counters, keeping each one's value for the next
    /// period's difference.
    pub fn read(counters: &mut Counters) -> CountedObs {
        let mut counted = CountedObs::default();
        for (event, fd, last) in counters {
            if let Some(now) = perf::read_counter(fd) {
                counted.set(*event, now.saturating_sub(*last));
                *last = now;
            }
        }
        counted
    }

    /// What a thread that did not run since the last read counted: nothing,
    /// for each counter it has. (Not read: a migration at a wake-up with
    /// no run since is counted at the next read, the values being totals.)
    pub fn still(counters: &Counters) -> CountedObs {
        let mut counted = CountedObs::default();
        for (event, _, _) in counters {
            counted.set(*event, 0);
        }
        counted
    }

    fn set(&mut self, event: Event, delta: u64) {
        let slot = match event {
            Event::Instructions => &mut self.instructions,
            Event::Cycles => &mut self.cycles,
            Event::LlcReferences => &mut self.llc_refs,
            Event::LlcMisses => &mut self.llc_misses,
            Event::CpuMigrations => &mut self.migrations,
            Event::TaskClock | Event::ContextSwitches => return,
        };
        *slot = Some(delta);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_thread_switching_thousands_of_times_a_second_goes_without() {
        let period = 100_000_000;
        // stress-ng's switch stressor: about 25,000 times in 100 ms.
        assert!(switches_too_often(25_000, period));
        // A busy thread sharing a CPU: a few dozen.
        assert!(!switches_too_often(30, period));
        assert!(!switches_too_often(500, period));
        assert!(switches_too_often(501, period));
        assert!(!switches_too_often(1, 0));
    }

    #[test]
    fn switches_are_judged_over_ten_ms_at_least_from_the_first_sample() {
        let mut mark = (0, 0);
        // A program's start: its lifetime count is not judged.
        assert_eq!(judge_switches(&mut mark, 40, 600_000), None);
        // 1 ms later, 20 more: too soon to judge (20,000 a second).
        assert_eq!(judge_switches(&mut mark, 60, 1_600_000), None);
        // 10 ms after the first sample, 30 more in all: 3,000 a second.
        assert_eq!(judge_switches(&mut mark, 70, 10_600_000), Some(false));
        // The next 100 ms, 2,500 more: 25,000 a second.
        assert_eq!(judge_switches(&mut mark, 2_570, 110_600_000), Some(true));
    }

    /// Issue 24: a counter refused to one thread after others had it costs
    /// that thread only. Before, one refusal turned the event off for every
    /// later thread of the run. (pid -1 with no CPU is a request the kernel
    /// always refuses: EINVAL.)
    #[test]
    fn a_refusal_after_success_degrades_that_thread_only() {
        // SAFETY: gettid has no preconditions and cannot fail.
        let me = unsafe { libc::syscall(libc::SYS_gettid) } as i32;
        // Software events too where there is no PMU, so this runs here.
        let mut budget = PerfBudget {
            software_alone: true,
            ..PerfBudget::new()
        };
        let (first, _) = budget.open_for(me, 100);
        if first.is_empty() {
            eprintln!("no perf counters for this thread here: skipped");
            return;
        }
        let (refused, _) = budget.open_for(-1, 100);
        assert!(refused.is_empty());
        assert_eq!((budget.refused, budget.uncounted), (1, 0));
        let (again, _) = budget.open_for(me, 100);
        assert_eq!(again.len(), first.len(), "the next thread is counted as before");
    }

    /// Without hardware counters a run opens no perf event at all: one
    /// software event anywhere puts a cost on every context switch.
    #[test]
    fn no_software_event_without_hardware_ones() {
        // SAFETY: gettid has no preconditions and cannot fail.
        let me = unsafe { libc::syscall(libc::SYS_gettid) } as i32;
        let mut budget = PerfBudget::new();
        let (opened, _) = budget.open_for(me, 100);
        match budget.hardware {
            Some(true) => assert!(opened.iter().any(|(e, _, _)| *e == Event::CpuMigrations)),
            _ => assert!(opened.is_empty(), "{} events opened", opened.len()),
        }
    }
}
