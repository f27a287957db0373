//! The CPU-pair probe behind `herd calibrate`: how much two CPUs deliver
//! when both are busy, against one alone (S0's σ: two busy SMT siblings
//! give 1 + σ of one core).
//!
//! One pinned thread runs an integer loop that stays in registers (no
//! memory traffic, so the memory system cannot be what is shared) for a
//! round alone on CPU `a`, then two such threads run at once on `a` and
//! `b`. σ = (the pair's summed rate / the lone rate) − 1, the median over
//! rounds (alone and together alternate, so a drift in the machine's speed
//! falls on both). On SMT siblings this is S0's σ. On two CPUs the kernel
//! calls separate cores it should be 1; less says they share something
//! the topology does not show (a virtual machine's vCPUs on one host
//! core's threads, or a shared power budget). Written here: a loop and
//! two pinned threads.

use std::sync::Barrier;
use std::time::Instant;

use herd_topo::CpuSet;

use crate::probe::ProbeError;

/// What the pair probe measured.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct PairReport {
    /// The two CPUs.
    pub cpus: [u32; 2],
    /// Per round: the loop's rate alone on the first CPU, in millions of
    /// iterations per second.
    pub alone_mips: Vec<f64>,
    /// Per round: the two loops' summed rate together.
    pub together_mips: Vec<f64>,
}

impl PairReport {
    /// The median over rounds of together / alone − 1, clamped to [0, 1].
    pub fn sigma(&self) -> f64 {
        let ratios: Vec<f64> = self
            .alone_mips
            .iter()
            .zip(&self.together_mips)
            .filter(|(a, _)| **a > 0.0)
            .map(|(a, t)| t / a - 1.0)
            .collect();
        herd_model::median(ratios).clamp(0.0, 1.0)
    }
}

/// Runs `rounds` rounds of `round_s` seconds alone on `a`, then together
/// on `a` and `b`.
pub fn pair_probe(a: u32, b: u32, round_s: f64, rounds: u32) -> Result<PairReport, ProbeError> {
    if rounds == 0 || round_s.is_nan() || round_s <= 0.0 || a == b {
        return Err(ProbeError::Empty);
    }
    let mut report = PairReport {
        cpus: [a, b],
        alone_mips: Vec::new(),
        together_mips: Vec::new(),
    };
    for _ in 0..rounds {
        report.alone_mips.push(spin_on(&[a], round_s)?);
        report.together_mips.push(spin_on(&[a, b], round_s)?);
    }
    Ok(report)
}

/// One thread per CPU in `cpus`, all starting together, each spinning for
/// `round_s`; their summed rate in millions of iterations per second.
fn spin_on(cpus: &[u32], round_s: f64) -> Result<f64, ProbeError> {
    let start = Barrier::new(cpus.len());
    let rates: Vec<Result<f64, ProbeError>> = std::thread::scope(|scope| {
        let handles: Vec<_> = cpus
            .iter()
            .map(|&cpu| {
                let start = &start;
                scope.spawn(move || {
                    let pinned = crate::control::set_affinity(0, &CpuSet::single(cpu));
                    start.wait();
                    pinned.map_err(|source| ProbeError::Pin { cpu, source })?;
                    Ok(spin(round_s))
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().unwrap_or(Err(ProbeError::Empty)))
            .collect()
    });
    rates.into_iter().sum()
}

/// Iterations of a dependent integer chain per µs (millions a second)
/// over `round_s`: it never touches memory.
fn spin(round_s: f64) -> f64 {
    let t0 = Instant::now();
    let mut x = 0x9E37_79B9_7F4A_7C15u64;
    let mut n = 0u64;
    loop {
        for _ in 0..10_000 {
            // xorshift: a few cycles of ALU work per iteration.
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
        }
        n += 10_000;
        let s = t0.elapsed().as_secs_f64();
        if s >= round_s {
            std::hint::black_box(x);
            return n as f64 / s / 1e6;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sigma_is_the_median_pair_gain_clamped() {
        let r = PairReport {
            cpus: [0, 1],
            alone_mips: vec![100.0, 100.0, 100.0],
            together_mips: vec![130.0, 140.0, 210.0],
        };
        assert!((r.sigma() - 0.4).abs() < 1e-9);
    }

    #[test]
    fn a_pair_on_one_cpu_is_refused() {
        assert!(matches!(pair_probe(0, 0, 0.1, 1), Err(ProbeError::Empty)));
    }

    #[test]
    fn two_cpus_deliver_at_least_one_and_at_most_two() {
        if std::thread::available_parallelism().map_or(1, |n| n.get()) < 2 {
            return;
        }
        let r = pair_probe(0, 1, 0.05, 1).unwrap();
        let ratio = r.together_mips[0] / r.alone_mips[0];
        // Loose on purpose: a shared machine can be busy; the check is that
        // both threads ran and were counted.
        assert!(ratio > 0.5 && ratio < 2.5, "{r:?}");
    }
}
