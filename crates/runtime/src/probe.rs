//! The streaming probe behind `herd calibrate`: the machine's peak memory
//! bandwidth, which S1's low-contention states are relative to.
//!
//! One thread per CPU, each pinned, each reading its own buffer (several
//! times the last-level cache, so every line comes from memory) from start
//! to end, over and over, for a fixed time. It reads and never writes: a
//! read-only sweep makes one bus transaction per cache line, so the bytes it
//! read are the transactions it caused, counted without any PMU. (A copy or
//! triad kernel also writes, and the write-allocate read doubles its
//! traffic in a way only counters can see.) The result is STREAM's "sum"
//! case on every CPU at once. Written here rather than taken from a crate
//! because it must count exactly what it touches and pin each thread, and
//! it is a loop of a few lines.

use std::sync::Barrier;
use std::time::Instant;

use herd_model::params::LINE_BYTES;
use herd_topo::CpuSet;

/// How to probe.
#[derive(Debug, Clone, PartialEq)]
pub struct ProbeOptions {
    /// The CPUs to read from, one thread each.
    pub cpus: Vec<u32>,
    /// Each thread's buffer.
    pub bytes_per_thread: usize,
    /// How long each round reads.
    pub round_s: f64,
    /// Rounds; the peak is the best.
    pub rounds: u32,
}

/// What the probe measured.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct ProbeReport {
    /// The CPUs read from.
    pub cpus: Vec<u32>,
    /// Each thread's buffer.
    pub bytes_per_thread: usize,
    /// Each round's bandwidth, in transactions (cache lines) per µs, summed
    /// over the threads.
    pub rounds_btr: Vec<f64>,
}

impl ProbeReport {
    /// The best round: the peak.
    pub fn peak_btr(&self) -> f64 {
        self.rounds_btr.iter().copied().fold(0.0, f64::max)
    }

    /// The median round.
    pub fn median_btr(&self) -> f64 {
        herd_model::median(self.rounds_btr.clone())
    }
}

/// Why the probe could not run.
#[derive(Debug, thiserror::Error)]
pub enum ProbeError {
    /// Nothing to do.
    #[error("the probe needs at least one CPU, one round and a positive round time")]
    Empty,
    /// A thread could not be pinned to its CPU.
    #[error("cannot pin a probe thread to CPU {cpu}: {source}")]
    Pin {
        /// The CPU.
        cpu: u32,
        /// The kernel's refusal.
        source: std::io::Error,
    },
}

/// Runs the probe, calling `progress(round)` after each round.
pub fn stream_probe(opts: &ProbeOptions, mut progress: impl FnMut(u32)) -> Result<ProbeReport, ProbeError> {
    if opts.cpus.is_empty() || opts.rounds == 0 || opts.round_s.is_nan() || opts.round_s <= 0.0 {
        return Err(ProbeError::Empty);
    }
    let threads = opts.cpus.len();
    let words = (opts.bytes_per_thread / 8).max(1);
    // Every thread and the coordinator meet before and after each round.
    let start = Barrier::new(threads + 1);
    let end = Barrier::new(threads + 1);
    let results: Vec<std::sync::Mutex<Vec<(u64, f64)>>> =
        (0..threads).map(|_| std::sync::Mutex::new(Vec::new())).collect();
    let pin_failed = std::sync::Mutex::new(None);
    std::thread::scope(|scope| {
        for (i, &cpu) in opts.cpus.iter().enumerate() {
            let (start, end, results, pin_failed) = (&start, &end, &results, &pin_failed);
            scope.spawn(move || {
                // Pin first, so the buffer's pages are touched, and placed,
                // from the CPU that reads them (first-touch NUMA placement).
                let pinned = match crate::control::set_affinity(0, &CpuSet::single(cpu)) {
                    Ok(()) => true,
                    Err(source) => {
                        *pin_failed.lock().unwrap() = Some(ProbeError::Pin { cpu, source });
                        false
                    }
                };
                let buffer: Vec<u64> = (0..words as u64).collect();
                for _ in 0..opts.rounds {
                    start.wait();
                    let t0 = Instant::now();
                    let mut bytes = 0u64;
                    let mut sum = 0u64;
                    // At least one whole sweep, then whole sweeps until the time is up.
                    loop {
                        sum = sum.wrapping_add(sweep(&buffer));
                        bytes += (buffer.len() * 8) as u64;
                        if !pinned || t0.elapsed().as_secs_f64() >= opts.round_s {
                            break;
                        }
                    }
                    std::hint::black_box(sum);
                    results[i]
                        .lock()
                        .unwrap()
                        .push((bytes, t0.elapsed().as_secs_f64()));
                    end.wait();
                }
            });
        }
        for r in 0..opts.rounds {
            start.wait();
            end.wait();
            progress(r + 1);
        }
    });
    if let Some(e) = pin_failed.into_inner().unwrap() {
        return Err(e);
    }
    let results: Vec<Vec<(u64, f64)>> = results.into_iter().map(|m| m.into_inner().unwrap()).collect();
    let rounds_btr = (0..opts.rounds as usize)
        .map(|r| {
            let bytes: u64 = results.iter().map(|t| t[r].0).sum();
            // The round lasts until its slowest thread finished its last sweep.
            let elapsed_s = results.iter().map(|t| t[r].1).fold(0.0, f64::max);
            bytes as f64 / LINE_BYTES / (elapsed_s * 1e6)
        })
        .collect();
    Ok(ProbeReport {
        cpus: opts.cpus.clone(),
        bytes_per_thread: words * 8,
        rounds_btr,
    })
}

/// One read of every word. Four independent sums let the CPU keep several
/// loads in flight, so the loop waits on memory, not on an add chain.
fn sweep(buffer: &[u64]) -> u64 {
    let mut acc = [0u64; 4];
    let mut chunks = buffer.chunks_exact(4);
    for c in &mut chunks {
        for k in 0..4 {
            acc[k] = acc[k].wrapping_add(c[k]);
        }
    }
    let tail: u64 = chunks.remainder().iter().fold(0, |a, &x| a.wrapping_add(x));
    acc.iter().fold(tail, |a, &x| a.wrapping_add(x))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_short_probe_measures_something_plausible() {
        let opts = ProbeOptions {
            cpus: vec![0],
            bytes_per_thread: 8 << 20,
            round_s: 0.05,
            rounds: 3,
        };
        let mut seen = Vec::new();
        let r = stream_probe(&opts, |k| seen.push(k)).unwrap();
        assert_eq!(seen, vec![1, 2, 3]);
        assert_eq!(r.rounds_btr.len(), 3);
        // Any machine that runs this reads more than 10 MB/s and less
        // than 10 TB/s (0.16 and 160,000 lines per µs).
        for b in &r.rounds_btr {
            assert!(*b > 0.16 && *b < 160_000.0, "{b}");
        }
        assert!(r.peak_btr() >= r.median_btr());
    }

    #[test]
    fn nothing_to_probe_is_refused() {
        let opts = ProbeOptions {
            cpus: vec![],
            bytes_per_thread: 1 << 20,
            round_s: 0.1,
            rounds: 1,
        };
        assert!(matches!(stream_probe(&opts, |_| {}), Err(ProbeError::Empty)));
    }

    #[test]
    fn a_cpu_that_does_not_exist_is_named() {
        let opts = ProbeOptions {
            cpus: vec![1000],
            bytes_per_thread: 1 << 16,
            round_s: 0.01,
            rounds: 1,
        };
        let e = stream_probe(&opts, |_| {}).unwrap_err();
        assert!(e.to_string().contains("CPU 1000"), "{e}");
    }
}
