//! herd's performance and power models. Pure functions of their inputs.
//!
//! The simulator runs on them; policies that predict (S1's IABW, S2's
//! placement model, S0's unit counts) use the same code, so a prediction
//! and a simulation disagree only where the inputs do.

pub mod amdahl;
pub mod classes;
pub mod memory;
pub mod numa;
pub mod params;
pub mod power;
pub mod queueing;

pub use classes::{ClassId, StreamClasses};
pub use memory::{Contention, MemSystem, Solution, Stream, Target};
pub use params::{KernelModel, MigrationCost, ModelParams};
pub use power::{PowerModel, PowerSample};

/// The median of `v` (the mean of the middle two for an even count; 0 for
/// none): how herd summarises repeated runs on a noisy machine.
pub fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    let n = v.len();
    if n == 0 {
        0.0
    } else if n % 2 == 1 {
        v[n / 2]
    } else {
        0.5 * (v[n / 2 - 1] + v[n / 2])
    }
}

/// Throughput of one hardware thread when `busy` siblings of its core are
/// busy, relative to the thread having the core alone.
///
/// S0: two busy siblings deliver 1 + sigma of one core (sigma = 0.3 on their
/// Xeons). For wider SMT each extra busy sibling adds sigma:
/// the core delivers 1 + sigma * (busy - 1), shared equally.
pub fn smt_share(busy: usize, sigma: f64) -> f64 {
    debug_assert!((0.0..=1.0).contains(&sigma), "sigma out of range: {sigma}");
    if busy <= 1 {
        1.0
    } else {
        (1.0 + sigma * (busy - 1) as f64) / busy as f64
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn two_busy_siblings_deliver_one_plus_sigma() {
        let sigma = 0.3;
        assert_eq!(smt_share(1, sigma), 1.0);
        assert!((2.0 * smt_share(2, sigma) - 1.3).abs() < 1e-12);
        assert!((4.0 * smt_share(4, sigma) - 1.9).abs() < 1e-12);
    }
}
