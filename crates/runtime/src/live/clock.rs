//! The live world's clock: sleeps until the next decision, a program's
//! exit or a signal, whichever comes first.

use std::process::ExitStatus;
use std::time::Duration;

use herd_engine::{Clock, Sensor};

use super::LiveWorld;

/// How long `advance_to` sleeps at most between checks when it has no
/// pidfd to wait on (kernels before 5.3).
const POLL: Duration = Duration::from_millis(5);

impl Clock for LiveWorld {
    fn now_ns(&self) -> u64 {
        self.start.elapsed().as_nanos() as u64
    }

    fn advance_to(&mut self, t_ns: u64) {
        use std::os::fd::AsRawFd;
        // Sleep until the deadline, a program's exit (its pidfd turns
        // readable) or a signal (poll returns EINTR), whichever is first.
        let exited = |w: &LiveWorld| w.programs.iter().filter(|p| !p.alive()).count();
        let before = exited(self);
        loop {
            self.reap();
            let now = self.now_ns();
            // A program that ended during the last turn or this wait: the
            // loop decides again at once (200 programs of 35 ms each took
            // 3.3x plain Linux's time when each exit waited out its period).
            if now >= t_ns || self.finished() || exited(self) > before {
                return;
            }
            let mut fds: Vec<libc::pollfd> = self
                .programs
                .iter()
                .zip(&self.pidfds)
                .filter(|(p, _)| p.alive())
                .filter_map(|(_, fd)| fd.as_ref())
                .map(|fd| libc::pollfd {
                    fd: fd.as_raw_fd(),
                    events: libc::POLLIN,
                    revents: 0,
                })
                .collect();
            // Fork events: a child born on one of herd's pins is freed at
            // once (`births`), not at the next look.
            let births = self.births.fd().map(|fd| {
                fds.push(libc::pollfd {
                    fd,
                    events: libc::POLLIN,
                    revents: 0,
                });
                fds.len() - 1
            });
            let left = Duration::from_nanos(t_ns - now);
            let pidfds = fds.len() - usize::from(births.is_some());
            let everyone_has_a_pidfd = pidfds == self.programs.iter().filter(|p| p.alive()).count();
            let wait = if everyone_has_a_pidfd {
                left
            } else {
                left.min(POLL)
            };
            // ppoll takes nanoseconds: periods below a millisecond (S4's
            // PALM starts at 0.125 ms) sleep as long as they ask.
            let ts = libc::timespec {
                tv_sec: wait.as_secs().min(i64::MAX as u64) as libc::time_t,
                tv_nsec: wait.subsec_nanos() as libc::c_long,
            };
            // SAFETY: fds is a valid array of pollfd of the given length and
            // ts a valid timespec; a null mask leaves signals as they are.
            unsafe { libc::ppoll(fds.as_mut_ptr(), fds.len() as libc::nfds_t, &ts, std::ptr::null()) };
            if births.is_some_and(|i| fds[i].revents != 0) {
                self.free_births();
            }
        }
    }
}

impl LiveWorld {
    /// Waits for every started program to exit, or until `give_up` says
    /// so (checked every 20 ms: a second SIGINT, for a program that ignores
    /// the first); returns their statuses, `None` for one still running.
    pub fn wait_all_or(&mut self, give_up: impl Fn() -> bool) -> Vec<Option<ExitStatus>> {
        let start = self.start;
        let now = || start.elapsed().as_nanos() as u64;
        loop {
            let mut running = false;
            for p in &mut self.programs {
                if p.status.is_none() {
                    if let Some(child) = p.child.as_mut() {
                        match child.try_wait() {
                            Ok(Some(status)) => p.reaped(Some(status), now()),
                            Ok(None) => running = true,
                            Err(_) => p.reaped(None, now()),
                        }
                    }
                }
            }
            if !running || give_up() {
                return self.programs.iter().map(|p| p.status).collect();
            }
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
    }

    /// Waits for every started program to exit; returns their statuses.
    pub fn wait_all(&mut self) -> Vec<Option<ExitStatus>> {
        for p in &mut self.programs {
            if p.status.is_none() {
                if let Some(child) = p.child.as_mut() {
                    let status = child.wait().ok();
                    p.reaped(status, self.start.elapsed().as_nanos() as u64);
                }
            }
        }
        self.programs.iter().map(|p| p.status).collect()
    }
}

/// Time since boot (`CLOCK_BOOTTIME`, the clock of `stat`'s start times),
/// in ns.
pub(super) fn boot_ns() -> u64 {
    clock_ns(libc::CLOCK_BOOTTIME)
}

/// Clock `id` now, in ns.
pub(super) fn clock_ns(id: libc::clockid_t) -> u64 {
    // SAFETY: timespec is plain data that clock_gettime fills.
    let mut ts: libc::timespec = unsafe { std::mem::zeroed() };
    // SAFETY: `ts` is a live timespec.
    unsafe { libc::clock_gettime(id, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

/// The share of a thread's times since it started that fall in a period of
/// `period_ns` ending `boot_now_ns`, for a thread first seen now: (period,
/// its age) when it is older than the period, else `None` (all of them).
/// A thread found late (by the look for forked processes, up to 250 ms
/// after it started, or running before herd attached) has run since it
/// started: counted as one period's, two processes that each used 0.7 of
/// a CPU over their life read as two whole CPUs.
pub(super) fn first_sight_share(
    start_ticks: u64,
    tick_ns: u64,
    boot_now_ns: u64,
    period_ns: u64,
) -> Option<(u64, u64)> {
    let age_ns = boot_now_ns.saturating_sub(start_ticks.saturating_mul(tick_ns));
    (period_ns > 0 && age_ns > period_ns).then_some((period_ns, age_ns))
}

/// `v` scaled by `share` ([`first_sight_share`]).
pub(super) fn scaled(v: u64, share: Option<(u64, u64)>) -> u64 {
    share.map_or(v, |(part, whole)| {
        (u128::from(v) * u128::from(part) / u128::from(whole.max(1))) as u64
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_thread_older_than_the_period_counts_its_period_share() {
        // Started at tick 100 (10 ms ticks: 1 s after boot); now 1.5 s.
        let share = first_sight_share(100, 10_000_000, 1_500_000_000, 100_000_000);
        assert_eq!(share, Some((100_000_000, 500_000_000)));
        // 350 ms of CPU over a 500 ms life: 70 ms of a 100 ms period.
        assert_eq!(scaled(350_000_000, share), 70_000_000);
        // Born within the period: all of its times are the period's.
        assert_eq!(
            first_sight_share(145, 10_000_000, 1_500_000_000, 100_000_000),
            None
        );
        assert_eq!(scaled(7, None), 7);
    }
}
