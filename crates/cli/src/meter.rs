//! Real time spent in the policy, for the overhead figures.

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
