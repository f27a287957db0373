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

    /// Traffic and references per instruction and the miss rate, as they
    /// are.
    fn counters(&self) -> [f64; 3] {
        [self.bytes_per_instr, self.refs_per_instr, self.miss_rate]
    }

    /// The log-compressed traffic and references per instruction the
    /// counter distance compares.
    fn counter_key(&self) -> [f64; 2] {
        let f = |x: f64| (1.0 + 100.0 * x.max(0.0)).log2();
        [f(self.bytes_per_instr), f(self.refs_per_instr)]
    }

    /// An upper bound on how much any centroid's distance from `to` differs
    /// from its distance from this signature (the triangle inequality),
    /// worked out without logarithms: with u = 1 + 100a and v = 1 + 100b,
    /// |log2 v - log2 u| = |ln(v/u)| / ln 2 <= |v - u| / (min(u, v) ln 2).
    /// Where both have code vectors a centroid may be measured either way
    /// (by code, or by counters if it has none), so the bound is the larger
    /// of the two. `None` where no bound holds: one signature has a code
    /// vector and the other not, or a value is not finite.
    fn moved_at_most(&self, to: &Signature) -> Option<f64> {
        let key = |a: f64, b: f64| {
            // As `counter_key` takes them (a NaN is taken as 0 there too).
            let (a, b) = (a.max(0.0), b.max(0.0));
            let low = if a < b { a } else { b };
            100.0 * (b - a).abs() / ((1.0 + 100.0 * low) * std::f64::consts::LN_2)
        };
        let counters = key(self.bytes_per_instr, to.bytes_per_instr)
            + key(self.refs_per_instr, to.refs_per_instr)
            + (self.miss_rate - to.miss_rate).abs();
        let moved = match (&self.code, &to.code) {
            (None, None) => counters,
            // Plain comparison: a NaN on either side stays NaN.
            (Some(_), Some(_)) => match self.code_distance(to) {
                Some(code) if code > counters => code,
                _ => counters,
            },
            _ => return None,
        };
        // Slack for rounding: the bound itself is worked out within a few
        // units in its last place, and its sums within a few more; the
        // absolute part keeps a chain of bounds (one a period) above the
        // rounding of its running sums.
        let moved = moved * (1.0 + MOVE_SLACK) + MOVE_SLACK_ABS;
        moved.is_finite().then_some(moved)
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

/// A program's phases. Its methods are the only writers of its phases
/// (the fields are private), which [`PhaseTable::classify`]'s memo of a
/// repeated signature relies on.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct PhaseTable {
    /// The phases, by id.
    phases: Vec<Phase>,
    /// Signatures closer than this are the same phase.
    threshold: f64,
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
    /// What the last classification may answer for the same signature
    /// again without a search; see [`Repeat`]. Not part of the value.
    #[serde(skip)]
    repeat: Option<Repeat>,
}

/// The last classified signature, the phase it joined, that phase's
/// centroid as the running mean left it, and bounds on how clearly the
/// phase is the nearest. A signature near the last one joins the same
/// phase, with no distance worked out, while the bounds say a search would
/// find it:
///
/// - The running mean moves a centroid towards the signature, each
///   coordinate staying between where it was and the signature's (checked
///   at each step), and the distance is Manhattan over coordinates each a
///   non-decreasing function of one signature field: the phase's distance
///   from the signature can only shrink, and every other phase's is
///   unchanged.
/// - A signature that moved by at most m ([`Signature::moved_at_most`])
///   is at most m further from the phase and at least m nearer to any
///   other (the triangle inequality): the lead shrinks by at most 2m.
///
/// A world whose rates did not change reports the same slices (60% of the
/// scale bench's classifications, bw:iabw); one whose rates changed
/// reports slices whose ratios per instruction moved in their last digits.
#[derive(Debug, Clone, Copy)]
struct Repeat {
    sig: Signature,
    id: usize,
    /// The phase's centroid's counter fields, as [`Signature::counters`]:
    /// every classification rewrites or clears the memo and only it adds
    /// phases, so this check is for a centroid written behind the table's
    /// back (within this module, as a test does).
    centroid: [f64; 3],
    /// At least how much nearer to `sig` the phase is than any other (and,
    /// while new phases may be made, than the threshold).
    lead: f64,
    /// At most how far the phase is from `sig`.
    distance: f64,
}

/// The least lead by which a phase must have won its search (over the next
/// nearest, and over the threshold while new phases may be made), per unit
/// of its distance plus one, for a repeat to join it unsearched. A
/// distance's rounding error is far below it: a counter key is a logarithm
/// of at most 1,025 worked out within a few units in its last place
/// (under 1e-12), and the differences and sums add a few units in the last
/// place of the distance; a code distance sums sixteen shares of at most 1.
const REPEAT_LEAD: f64 = 1e-9;

/// [`Signature::moved_at_most`]'s slack for rounding, relative and absolute.
const MOVE_SLACK: f64 = 1e-9;
const MOVE_SLACK_ABS: f64 = 1e-12;

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
            repeat: None,
        }
    }
}

impl PhaseTable {
    /// The phases, by id.
    pub fn phases(&self) -> &[Phase] {
        &self.phases
    }

    /// The known phase `sig` belongs to, if one is close enough; makes no
    /// phase and moves no centroid. For slices the policy did not place
    /// (the guard's kernel probes): their signatures, taken under the
    /// kernel's co-runners, must not make phases or pull centroids that
    /// samples under the policy never fill or meet again.
    pub fn recognise(&mut self, sig: &Signature) -> Option<PhaseId> {
        // The memo's phase is the nearest by a clear margin, within the
        // threshold unless the table is full: what the search would say.
        // Left as it is: no centroid moved.
        if let Some((id, ..)) = self.memo_answer(sig) {
            return Some(id as PhaseId);
        }
        self.nearest(sig)
            .filter(|&(_, d)| d <= self.threshold || self.phases.len() >= MAX_PHASES)
            .map(|(i, _)| i as PhaseId)
    }

    /// The nearest phase's index and its distance.
    fn nearest(&mut self, sig: &Signature) -> Option<(usize, f64)> {
        self.nearest_with_lead(sig).map(|(i, d, _)| (i, d))
    }

    /// [`PhaseTable::nearest`] and its lead: how much nearer it is than
    /// the next nearest phase (infinite for the only one). The first of
    /// equally near phases is the nearest, with no lead.
    fn nearest_with_lead(&mut self, sig: &Signature) -> Option<(usize, f64, f64)> {
        let at = [sig.bytes_per_instr, sig.refs_per_instr];
        if self.last_key.0 != at {
            self.last_key = (at, sig.counter_key());
        }
        let key = self.last_key.1;
        self.keys.resize(self.phases.len(), ([f64::NAN; 2], [0.0; 2]));
        let mut best: Option<(usize, f64)> = None;
        let mut second = f64::INFINITY;
        for (i, (p, memo)) in self.phases.iter().zip(&mut self.keys).enumerate() {
            let c = &p.centroid;
            let at = [c.bytes_per_instr, c.refs_per_instr];
            if memo.0 != at {
                *memo = (at, c.counter_key());
            }
            let d = c.distance_between(sig, &memo.1, &key);
            // `second` takes the lower with a plain comparison (a NaN
            // is never lower), as `f64::min` would, at less cost.
            match best {
                Some((_, b)) if d.total_cmp(&b).is_ge() => {
                    if d < second {
                        second = d;
                    }
                }
                _ => {
                    if let Some((_, b)) = best
                        && b < second
                    {
                        second = b;
                    }
                    best = Some((i, d));
                }
            }
        }
        best.map(|(i, d)| (i, d, second - d))
    }

    /// The memo's answer for `sig`, if it may give one: the same signature,
    /// or one near it while the bounds say a search would find the same
    /// phase by a clear margin (see [`Repeat`]). The phase, the bounds for
    /// `sig` (lead, distance), and whether `sig` is the memo's own.
    fn memo_answer(&self, sig: &Signature) -> Option<(usize, f64, f64, bool)> {
        let r = self.repeat.as_ref()?;
        let same = r.sig == *sig;
        let moved = if same { 0.0 } else { r.sig.moved_at_most(sig)? };
        let lead = r.lead - 2.0 * moved;
        let distance = r.distance + moved;
        let fits = lead > REPEAT_LEAD * (1.0 + distance)
            && self
                .phases
                .get(r.id)
                .is_some_and(|p| p.centroid.counters() == r.centroid);
        fits.then_some((r.id, lead, distance, same))
    }

    /// The phase `sig` belongs to, made if none is close enough (while
    /// fewer than [`MAX_PHASES`] exist). Moves the phase's centroid.
    pub fn classify(&mut self, sig: &Signature) -> PhaseId {
        let repeated = self.memo_answer(sig);
        let (id, lead, distance) = match repeated {
            Some((id, lead, distance, _)) => (id, lead, distance),
            None => {
                let full = self.phases.len() >= MAX_PHASES;
                match self.nearest_with_lead(sig) {
                    Some((i, d, lead)) if d <= self.threshold || full => {
                        // A table not yet full also needs the lead on its
                        // threshold, past which a new phase is made.
                        let lead = if full { lead } else { lead.min(self.threshold - d) };
                        (i, lead, d)
                    }
                    nearest => {
                        self.phases.push(Phase {
                            centroid: *sig,
                            slices: 0,
                            estimate: PhaseEstimate::default(),
                        });
                        // The new phase is at 0 (its centroid is the
                        // signature); every other is beyond the threshold.
                        // Plain comparisons: a NaN distance (of a NaN
                        // centroid) is no lead.
                        let others = nearest.map_or(f64::INFINITY, |(_, d, _)| d);
                        let lead = if others >= self.threshold {
                            self.threshold
                        } else if others < self.threshold {
                            others
                        } else {
                            f64::NAN
                        };
                        (self.phases.len() - 1, lead, 0.0)
                    }
                }
            }
        };
        let p = &mut self.phases[id];
        p.slices += 1;
        // Running mean, so early slices do not pin the centroid forever.
        let w = 1.0 / p.slices as f64;
        let c = &mut p.centroid;
        // Whether each coordinate stayed between where it was and the
        // signature's, and the kind of distance (code or counters) stayed.
        let mut towards = true;
        let mut step = |x: &mut f64, y: f64| {
            let was = *x;
            *x += w * (y - was);
            // Plain comparisons (no NaN is between anything), not
            // `min`/`max`, whose NaN handling cost more than the step.
            towards &= if was <= y {
                was <= *x && *x <= y
            } else {
                y <= *x && *x <= was
            };
        };
        step(&mut c.bytes_per_instr, sig.bytes_per_instr);
        step(&mut c.refs_per_instr, sig.refs_per_instr);
        step(&mut c.miss_rate, sig.miss_rate);
        match (&mut c.code, &sig.code) {
            (Some(cc), Some(sc)) => {
                for (x, y) in cc.iter_mut().zip(sc) {
                    step(x, *y);
                }
            }
            (cc @ None, Some(sc)) => {
                *cc = Some(*sc);
                towards = false;
            }
            (_, None) => {}
        }
        let counters = c.counters();
        match &mut self.repeat {
            _ if !towards => self.repeat = None,
            Some(r) => {
                // Written in place: a signature is 160 bytes.
                if !repeated.is_some_and(|(.., same)| same) {
                    r.sig = *sig;
                }
                (r.id, r.centroid, r.lead, r.distance) = (id, counters, lead, distance);
            }
            None => {
                self.repeat = Some(Repeat {
                    sig: *sig,
                    id,
                    centroid: counters,
                    lead,
                    distance,
                })
            }
        }
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

    /// Knuth's MMIX generator from `seed`; its low bits are weak, so they
    /// are dropped.
    fn mmix(mut seed: u64) -> impl FnMut() -> u64 {
        move || {
            seed = seed
                .wrapping_mul(6_364_136_223_846_793_005)
                .wrapping_add(1_442_695_040_888_963_407);
            seed >> 11
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

    /// A repeat joins its phase unsearched only where a search would find
    /// it: streams with runs of repeats, near neighbours, code vectors
    /// coming and going and tables filled up, each slice classified by a
    /// table with the memo and by one that searches every time.
    #[test]
    fn a_repeat_joins_the_phase_a_search_would_find() {
        let mut next = mmix(7);
        let (mut unsearched, mut full) = (0, 0);
        for round in 0..40u64 {
            let (mut t, mut searched) = (PhaseTable::default(), PhaseTable::default());
            // Some rounds have more levels than a table holds phases.
            let levels = if round % 4 == 0 { 90 } else { 12 };
            let mut s = sig(0.1);
            for _ in 0..1500 {
                let r = next();
                if r % 3 == 0 {
                    let level = 1e-3 * 1.5f64.powi((r >> 8) as i32 % levels);
                    let nudge = [0.0, 1e-13, 0.05, 0.2, 0.41][(r >> 20) as usize % 5];
                    s = sig(level * (1.0 + nudge));
                    if round % 3 == 1 && (r >> 30) % 3 != 0 {
                        let share = [0.5, 0.6, 0.9, 1.0][(r >> 34) as usize % 4];
                        s.code = code((r >> 40) as usize % 4, 5, share);
                    }
                }
                unsearched += usize::from(t.memo_answer(&s).is_some());
                searched.repeat = None;
                let want = searched.classify(&s);
                assert_eq!(t.classify(&s), want, "round {round}: {s:?}");
            }
            assert_eq!(t, searched, "round {round}");
            full += usize::from(t.phases.len() == MAX_PHASES);
        }
        assert!(
            unsearched > 20_000 && full >= 5,
            "{unsearched} unsearched, {full} full"
        );
    }

    /// A signature that wanders in small steps (as a simulated job's
    /// ratios do when its rates change) joins its phase unsearched while
    /// the bounds allow, and where a search would: walks across phases with
    /// steps from 1e-12 to 1e-2 of the value, with and without code
    /// vectors, each slice classified by a table with the memo and by one
    /// that searches every time.
    #[test]
    fn a_wandering_signature_joins_the_phase_a_search_would_find() {
        let mut next = mmix(11);
        let (mut near, mut slices) = (0, 0);
        for round in 0..24u64 {
            let (mut t, mut searched) = (PhaseTable::default(), PhaseTable::default());
            let mut bytes: f64 = 0.1;
            let mut shares: f64 = 0.7;
            for _ in 0..2500 {
                let r = next();
                let step = [1e-12, 1e-9, 1e-6, 1e-4, 1e-2][(r >> 4) as usize % 5];
                let up = if (r >> 8) % 2 == 0 { 1.0 } else { -1.0 };
                bytes = (bytes * (1.0 + up * step)).clamp(1e-3, 10.0);
                if (r >> 12) % 97 == 0 {
                    // Now and then a jump, to another phase or a new one.
                    bytes = 1e-3 * 1.5f64.powi((r >> 16) as i32 % 20);
                }
                let mut s = sig(bytes);
                if round % 3 == 1 {
                    shares = (shares + up * step).clamp(0.5, 1.0);
                    s.code = code(1, 2, shares);
                } else if round % 3 == 2 && (r >> 24) % 50 == 0 {
                    // A slice with code among ones without: no bound.
                    s.code = code(3, 4, 0.8);
                }
                let memo = t.memo_answer(&s);
                near += usize::from(memo.is_some_and(|(.., same)| !same));
                slices += 1;
                searched.repeat = None;
                if (r >> 32) % 5 == 0 {
                    // A slice the kernel placed: recognised, not learned.
                    let want = searched.recognise(&s);
                    assert_eq!(t.recognise(&s), want, "round {round}: {s:?}");
                    continue;
                }
                let want = searched.classify(&s);
                assert_eq!(t.classify(&s), want, "round {round}: {s:?}");
            }
            assert_eq!(t, searched, "round {round}");
        }
        assert!(near * 2 > slices, "{near} of {slices} near signatures unsearched");
    }

    /// A signature walking from one phase towards another leaves the first
    /// where a search says so: the lead shrinks by twice the distance
    /// moved (the memo fails this if it counts the move once).
    #[test]
    fn a_walk_from_one_phase_to_another_changes_phase_at_the_midpoint() {
        let (mut t, mut searched) = (PhaseTable::default(), PhaseTable::default());
        // Two phases 0.8 apart (under the threshold at their midpoint),
        // each with many slices, so their centroids hardly move.
        for _ in 0..10_000 {
            for b in [0.1, 0.15] {
                searched.repeat = None;
                assert_eq!(t.classify(&sig(b)), searched.classify(&sig(b)));
            }
        }
        assert_eq!(t.phases.len(), 2);
        let mut changed = None;
        for k in 0..=1000 {
            let s = sig(0.1 + 0.05 * f64::from(k) / 1000.0);
            searched.repeat = None;
            let want = searched.classify(&s);
            assert_eq!(t.classify(&s), want, "step {k}");
            if want == 1 && changed.is_none() {
                changed = Some(k);
            }
        }
        // The midpoint in the distance's own terms lies near 0.122.
        assert!(changed.is_some_and(|k| (300..600).contains(&k)), "{changed:?}");
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
