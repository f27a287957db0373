//! What herd costs: real time spent in the policy, and CPU time.

use std::time::Instant;

use herd_engine::CostMeter;

/// Measures wall-clock nanoseconds between `start` and `stop`.
#[derive(Default)]
pub struct WallMeter(Option<Instant>);

impl CostMeter for WallMeter {
    fn start(&mut self) {
        self.0 = Some(Instant::now());
    }
    fn stop(&mut self) -> u64 {
        self.0.take().map_or(0, |t| t.elapsed().as_nanos() as u64)
    }
}

/// Measures the calling thread's CPU time between `start` and `stop`: what
/// herd's loop costs the machine, without the time it sleeps or waits to run.
#[derive(Default)]
pub struct CpuMeter(Option<u64>);

/// The calling thread's CPU time in nanoseconds (0 if the clock fails).
fn thread_cpu_ns() -> u64 {
    // SAFETY: timespec is plain data; clock_gettime fills it.
    let mut ts: libc::timespec = unsafe { std::mem::zeroed() };
    // SAFETY: ts is a valid, writable timespec.
    if unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) } != 0 {
        return 0;
    }
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

impl CostMeter for CpuMeter {
    fn start(&mut self) {
        self.0 = Some(thread_cpu_ns());
    }
    fn stop(&mut self) -> u64 {
        self.0.take().map_or(0, |t| thread_cpu_ns().saturating_sub(t))
    }
}

/// CPU time of the calling process (`who` = RUSAGE_SELF) or its waited-for
/// children (RUSAGE_CHILDREN), in seconds.
pub fn cpu_seconds(who: i32) -> f64 {
    // SAFETY: rusage is plain data; getrusage fills it.
    let mut u: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: u is a valid, writable rusage.
    if unsafe { libc::getrusage(who, &mut u) } != 0 {
        return 0.0;
    }
    let t = |tv: libc::timeval| tv.tv_sec as f64 + tv.tv_usec as f64 * 1e-6;
    t(u.ru_utime) + t(u.ru_stime)
}
