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
