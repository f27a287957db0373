//! Phases: slices of a program's execution that behave alike, and their
//! solo estimates.
//!
//! S1 compares basic-block vectors (instruction-pointer samples bucketed by
//! code region). herd's code vector is that, hashed into [`CODE_BUCKETS`]
//! buckets (as SimPoint projects basic-block vectors to 15 dimensions) and
//! normalised; two slices are the same phase when the Manhattan distance
//! between their vectors is below [`CODE_THRESHOLD`]. Where no IP samples
//! exist (sampling refused, and always in simulation), herd's fallback
//! signature is built
//! from counter *ratios per instruction* that contention does not move: memory
//! bytes per instruction, LLC references per instruction and the LLC miss
//! rate. IPC and bandwidth are deliberately left out: a memory-bound phase
//! slows down under contention, and a signature built on them would see a new
//! phase every time a co-runner changed.

use serde::{Deserialize, Serialize};

/// Index into a [`PhaseTable`].
pub type PhaseId = u16;

/// Most phases a program may have; beyond this, slices join the nearest.
pub const MAX_PHASES: usize = 64;

/// A phase table's default counter-signature threshold.
pub const DEFAULT_THRESHOLD: f64 = 0.5;

/// Buckets of a code vector: code regions are hashed into this many.
pub const CODE_BUCKETS: usize = 16;

/// Code vectors closer than this (Manhattan, between normalised vectors,
/// so 0 to 2) are the same phase: a quarter of the samples moved.
pub const CODE_THRESHOLD: f64 = 0.5;

/// The code region (4 KiB of code) an instruction pointer falls in,
/// hashed to a bucket of a code vector.
pub fn code_bucket(ip: u64) -> usize {
    // Fibonacci hashing: neighbouring regions land in unrelated buckets.
    // The product's top log2(CODE_BUCKETS) bits (a power of two).
    ((ip >> 12).wrapping_mul(0x9E37_79B9_7F4A_7C15) >> (64 - CODE_BUCKETS.trailing_zeros())) as usize
}

/// A slice's signature.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Signature {
    /// Memory traffic per instruction, in bytes.
    pub bytes_per_instr: f64,
    /// LLC references per instruction (0 where unknown).
    pub refs_per_instr: f64,
    /// LLC misses / references (0 where unknown).
    pub miss_rate: f64,
    /// Where the slice's instructions were: the share of its IP samples
    /// per code bucket, where IP sampling works.
    #[serde(default)]
    pub code: Option<[f64; CODE_BUCKETS]>,
}

/// Sample counts per bucket as shares summing to 1; `None` for no samples.
pub fn code_vector(counts: &[u32; CODE_BUCKETS]) -> Option<[f64; CODE_BUCKETS]> {
    let total: u64 = counts.iter().map(|&c| u64::from(c)).sum();
    (total > 0).then(|| counts.map(|c| f64::from(c) / total as f64))
}

impl Signature {
    /// Manhattan distance in a log-compressed space: a 10% change in traffic
    /// per instruction moves it ~0.14, going from compute-bound to
    /// streaming moves it several units.
    pub fn distance(&self, other: &Signature) -> f64 {
        self.distance_between(other, &self.counter_key(), &other.counter_key())
    }

    /// [`Signature::distance`] with both signatures' counter keys known
    /// (`mine` this one's, `theirs` the other's): a phase table measures
    /// one signature against each of its phases, and works out each
    /// logarithm once.
    fn distance_between(&self, other: &Signature, mine: &[f64; 2], theirs: &[f64; 2]) -> f64 {
        self.code_distance(other).unwrap_or_else(|| {
            (mine[0] - theirs[0]).abs()
                + (mine[1] - theirs[1]).abs()
                + (self.miss_rate - other.miss_rate).abs()
        })
    }

    /// Manhattan distance between the code vectors, scaled so that
    /// [`CODE_THRESHOLD`] maps onto a phase table's counter threshold.
    fn code_distance(&self, other: &Signature) -> Option<f64> {
        let (a, b) = (self.code.as_ref()?, other.code.as_ref()?);
        let d: f64 = a.iter().zip(b).map(|(x, y)| (x - y).abs()).sum();
        Some(d / CODE_THRESHOLD * DEFAULT_THRESHOLD)
    }

    /// The log-compressed traffic and references per instruction the
    /// counter distance compares.
    fn counter_key(&self) -> [f64; 2] {
        let f = |x: f64| (1.0 + 100.0 * x.max(0.0)).log2();
        [f(self.bytes_per_instr), f(self.refs_per_instr)]
    }
}

/// Mean of per-slice values.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct Mean {
    /// Samples.
    pub n: u32,
    /// Sum of instructions per µs of CPU time.
    pub ips_sum: f64,
    /// Sum of bus transactions per µs of CPU time.
    pub btr_sum: f64,
}

impl Mean {
    fn add(&mut self, ips: f64, btr: f64) {
        self.n = self.n.saturating_add(1);
        self.ips_sum += ips;
        self.btr_sum += btr;
    }

    fn get(&self) -> Option<(f64, f64)> {
        (self.n > 0).then(|| (self.ips_sum / f64::from(self.n), self.btr_sum / f64::from(self.n)))
    }
}

/// A phase's solo estimate under S1's rule: the mean of invalid samples
/// until the first valid one arrives, then the mean of valid samples only.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct PhaseEstimate {
    /// Samples taken in low contention.
    pub valid: Mean,
    /// The others.
    pub invalid: Mean,
}

impl PhaseEstimate {
    /// Adds a slice: its instructions and bus transactions per µs of CPU time.
    pub fn add(&mut self, ips: f64, btr: f64, valid: bool) {
        if valid {
            self.valid.add(ips, btr);
        } else if self.valid.n == 0 {
            // Invalid samples only matter until a valid one exists.
            self.invalid.add(ips, btr);
        }
    }

    /// (instructions per µs, transactions per µs) alone, as far as known.
    pub fn solo(&self) -> Option<(f64, f64)> {
        self.valid.get().or_else(|| self.invalid.get())
    }

    /// Whether the estimate rests on valid samples.
    pub fn is_valid(&self) -> bool {
        self.valid.n > 0
    }
}

/// One phase: where its slices' signatures lie, and its estimate.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Phase {
    /// Running mean of its slices' signatures.
    pub centroid: Signature,
    /// Slices classified into it.
    pub slices: u64,
    /// Its solo estimate.
    pub estimate: PhaseEstimate,
}

/// A program's phases.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct PhaseTable {
    /// The phases, by id.
    pub phases: Vec<Phase>,
    /// Signatures closer than this are the same phase.
    pub threshold: f64,
    /// Per phase, the centroid's traffic and references per instruction
    /// with their [`Signature::counter_key`]: each slice is measured
    /// against every phase, and the centroids' logarithms were most of
    /// that (a tenth of bw:iabw's simulated time at 1,000 jobs). A memo,
    /// checked against the centroid at each use, so it is never stale
    /// whoever moves a centroid; not part of the table's value.
    #[serde(skip)]
    keys: Vec<([f64; 2], [f64; 2])>,
    /// The last signature's traffic and references per instruction with
    /// their key, the same kind of memo: a job whose slice repeats (the
    /// simulator's reused observations, a steady phase) is measured with
    /// the logarithms already taken.
    #[serde(skip, default = "no_key")]
    last_key: ([f64; 2], [f64; 2]),
}

/// A memo that matches no signature (NaN equals nothing).
fn no_key() -> ([f64; 2], [f64; 2]) {
    ([f64::NAN; 2], [0.0; 2])
}

impl PartialEq for PhaseTable {
    fn eq(&self, other: &Self) -> bool {
        self.phases == other.phases && self.threshold == other.threshold
    }
}

impl Default for PhaseTable {
    fn default() -> Self {
        PhaseTable {
            phases: Vec::new(),
            threshold: DEFAULT_THRESHOLD,
            keys: Vec::new(),
            last_key: no_key(),
        }
    }
}

impl PhaseTable {
    /// The known phase `sig` belongs to, if one is close enough; makes no
    /// phase and moves no centroid. For slices the policy did not place
    /// (the guard's kernel probes): their signatures, taken under the
    /// kernel's co-runners, must not make phases or pull centroids that
    /// samples under the policy never fill or meet again.
    pub fn recognise(&mut self, sig: &Signature) -> Option<PhaseId> {
        self.nearest(sig)
            .filter(|&(_, d)| d <= self.threshold || self.phases.len() >= MAX_PHASES)
            .map(|(i, _)| i as PhaseId)
    }

    /// The nearest phase's index and its distance.
    fn nearest(&mut self, sig: &Signature) -> Option<(usize, f64)> {
        let at = [sig.bytes_per_instr, sig.refs_per_instr];
        if self.last_key.0 != at {
            self.last_key = (at, sig.counter_key());
        }
        let key = self.last_key.1;
        self.keys.resize(self.phases.len(), ([f64::NAN; 2], [0.0; 2]));
        self.phases
            .iter()
            .zip(&mut self.keys)
            .enumerate()
            .map(|(i, (p, memo))| {
                let c = &p.centroid;
                let at = [c.bytes_per_instr, c.refs_per_instr];
                if memo.0 != at {
                    *memo = (at, c.counter_key());
                }
                (i, c.distance_between(sig, &memo.1, &key))
            })
            .min_by(|a, b| a.1.total_cmp(&b.1))
    }

    /// The phase `sig` belongs to, made if none is close enough (while
    /// fewer than [`MAX_PHASES`] exist). Moves the phase's centroid.
    pub fn classify(&mut self, sig: &Signature) -> PhaseId {
        let id = match self.recognise(sig) {
            Some(id) => usize::from(id),
            None => {
                self.phases.push(Phase {
                    centroid: *sig,
                    slices: 0,
                    estimate: PhaseEstimate::default(),
                });
                self.phases.len() - 1
            }
        };
        let p = &mut self.phases[id];
        p.slices += 1;
        // Running mean, so early slices do not pin the centroid forever.
        let w = 1.0 / p.slices as f64;
        let c = &mut p.centroid;
        c.bytes_per_instr += w * (sig.bytes_per_instr - c.bytes_per_instr);
        c.refs_per_instr += w * (sig.refs_per_instr - c.refs_per_instr);
        c.miss_rate += w * (sig.miss_rate - c.miss_rate);
        c.code = match (c.code, sig.code) {
            (Some(mut cc), Some(sc)) => {
                for (x, y) in cc.iter_mut().zip(sc) {
                    *x += w * (y - *x);
                }
                Some(cc)
            }
            (cc, sc) => cc.or(sc),
        };
        id as PhaseId
    }

    /// Phase `id`'s estimate.
    pub fn estimate(&self, id: PhaseId) -> Option<&PhaseEstimate> {
        self.phases.get(id as usize).map(|p| &p.estimate)
    }

    /// Adds a slice's sample to phase `id`.
    pub fn add_sample(&mut self, id: PhaseId, ips: f64, btr: f64, valid: bool) {
        if let Some(p) = self.phases.get_mut(id as usize) {
            p.estimate.add(ips, btr, valid);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sig(bytes: f64) -> Signature {
        Signature {
            bytes_per_instr: bytes,
            refs_per_instr: bytes / 16.0,
            miss_rate: 0.5,
            code: None,
        }
    }

    /// A code vector with `share` of the samples in bucket `a`, the rest in `b`.
    fn code(a: usize, b: usize, share: f64) -> Option<[f64; CODE_BUCKETS]> {
        let mut v = [0.0; CODE_BUCKETS];
        v[a] += share;
        v[b] += 1.0 - share;
        Some(v)
    }

    #[test]
    fn a_centroid_moved_from_outside_is_measured_where_it_is_now() {
        let mut t = PhaseTable::default();
        assert_eq!(t.classify(&sig(0.01)), 0);
        assert_eq!(t.classify(&sig(5.0)), 1);
        // The table remembers each centroid's logarithms; swap the two
        // centroids behind its back and the memo must not answer for them.
        t.phases.swap(0, 1);
        assert_eq!(t.classify(&sig(5.0)), 0);
        assert_eq!(t.classify(&sig(0.01)), 1);
        // The memo is no part of the table's value.
        let fresh: PhaseTable = serde_json::from_str(&serde_json::to_string(&t).unwrap()).unwrap();
        assert_eq!(fresh, t);
    }

    /// The memos of logarithms answer only for their own values: a table
    /// fed repeats and changes classifies each slice as the distances
    /// worked out afresh say.
    #[test]
    fn a_repeated_signature_is_measured_as_a_new_one() {
        let mut t = PhaseTable::default();
        for bytes in [
            0.01, 0.01, 5.0, 5.0, 5.0, 0.02, 0.01, 0.3, 0.3, 5.0, 0.0, -0.0, 0.0, 0.3,
        ] {
            let s = sig(bytes);
            let nearest = t
                .phases
                .iter()
                .enumerate()
                .map(|(i, p)| (i, p.centroid.distance(&s)))
                .min_by(|a, b| a.1.total_cmp(&b.1))
                .filter(|(_, d)| *d <= t.threshold);
            let want = nearest.map_or(t.phases.len(), |(i, _)| i);
            assert_eq!(usize::from(t.classify(&s)), want, "{bytes}");
        }
        assert_eq!(t.phases.len(), 5);
    }

    #[test]
    fn code_vectors_decide_phases_where_they_exist() {
        let mut t = PhaseTable::default();
        let with = |bytes: f64, c| Signature {
            code: c,
            ..sig(bytes)
        };
        let a = t.classify(&with(0.8, code(1, 2, 0.9)));
        // Same code, traffic halved (say, by a co-runner's contention): same phase.
        assert_eq!(t.classify(&with(0.4, code(1, 2, 0.85))), a);
        // Same counters, other code: another phase.
        let b = t.classify(&with(0.8, code(7, 9, 0.5)));
        assert_ne!(a, b);
        // No samples in this slice: the counters decide (b's centroid is
        // at 0.8 exactly; a's moved towards 0.4), and no phase is made.
        assert_eq!(t.classify(&sig(0.8)), b);
        assert_eq!(t.phases.len(), 2);
        let counts = [3u32; CODE_BUCKETS];
        let v = code_vector(&counts).unwrap();
        assert!((v.iter().sum::<f64>() - 1.0).abs() < 1e-12);
        assert_eq!(code_vector(&[0; CODE_BUCKETS]), None);
        // Neighbouring code pages spread over buckets.
        let buckets: std::collections::BTreeSet<usize> = (0..64u64).map(|p| code_bucket(p << 12)).collect();
        assert!(buckets.len() >= 12, "{buckets:?}");
    }

    #[test]
    fn noisy_slices_stay_in_their_phase_and_new_behaviour_opens_one() {
        let mut t = PhaseTable::default();
        let a = t.classify(&sig(0.8));
        assert_eq!(t.classify(&sig(0.88)), a, "10% noise");
        assert_eq!(t.classify(&sig(0.74)), a);
        let b = t.classify(&sig(0.02));
        assert_ne!(a, b, "compute-bound is another phase");
        assert_eq!(t.classify(&sig(0.021)), b);
        assert_eq!(t.phases.len(), 2);
        assert_eq!(t.phases[a as usize].slices, 3);
    }

    #[test]
    fn the_table_is_bounded() {
        let mut t = PhaseTable::default();
        for i in 0..200 {
            t.classify(&sig(1e-3 * 1.5f64.powi(i % 40)));
        }
        assert!(t.phases.len() <= MAX_PHASES);
    }

    #[test]
    fn invalid_samples_count_only_until_the_first_valid_one() {
        let mut e = PhaseEstimate::default();
        assert_eq!(e.solo(), None);
        e.add(1000.0, 40.0, false);
        e.add(800.0, 30.0, false);
        assert_eq!(e.solo(), Some((900.0, 35.0)));
        assert!(!e.is_valid());
        e.add(2000.0, 50.0, true);
        assert_eq!(
            e.solo(),
            Some((2000.0, 50.0)),
            "valid samples replace invalid ones"
        );
        e.add(100.0, 1.0, false);
        e.add(1800.0, 48.0, true);
        assert_eq!(e.solo(), Some((1900.0, 49.0)));
        assert!(e.is_valid());
    }
}
