//! S1's ideal average bandwidth (IABW) and the co-runner choice.
//!
//! N programs share C cores. With solo times sorted T1 <= ... <= TN, ideal
//! processor sharing without contention finishes in
//! (T1 + ... + T_{N-C}) / C + TN, and moving all the programs' memory
//! requests in that time needs IABW = (sum of requests) / that time. Every
//! slice S1 runs co-runners whose predicted bandwidth sums closest to IABW,
//! so the bus is never idle in one slice and saturated in the next.

/// The ideal turnaround of a group: solo times in any order, `cores` >= 1.
/// With no more programs than cores it is the longest solo time.
pub fn ideal_turnaround_s(solo_s: &[f64], cores: usize) -> f64 {
    let mut t: Vec<f64> = solo_s.to_vec();
    t.sort_by(f64::total_cmp);
    let n = t.len();
    let c = cores.max(1);
    let Some(&longest) = t.last() else {
        return 0.0;
    };
    let shared: f64 = t[..n.saturating_sub(c)].iter().sum();
    shared / c as f64 + longest
}

/// IABW in requests per second: the group's memory requests over its ideal
/// turnaround.
pub fn iabw(requests: &[f64], solo_s: &[f64], cores: usize) -> f64 {
    let t = ideal_turnaround_s(solo_s, cores);
    if t > 0.0 {
        requests.iter().sum::<f64>() / t
    } else {
        0.0
    }
}

/// The fair-share average bandwidth in requests per second: `cores` times
/// the group's requests over its summed solo times, i.e. the requests over
/// the time the group needs while every program progresses at the same
/// rate, as under herd's turns. It equals [`iabw`] when the solo times are
/// equal; unlike it, it does not hang on the single longest solo time, so
/// one overestimated program moves it by its share, not by the tail.
pub fn fair_share(requests: &[f64], solo_s: &[f64], cores: usize) -> f64 {
    let t: f64 = solo_s.iter().sum();
    if t > 0.0 {
        cores.max(1) as f64 * requests.iter().sum::<f64>() / t
    } else {
        0.0
    }
}

/// An integer that orders as `f64::total_cmp` orders `v` (its bits with
/// the sign folded, as the standard library compares them): sorting by
/// it is a sort of plain integers, not of comparisons through a closure.
pub fn order_key(v: f64) -> i64 {
    let b = v.to_bits() as i64;
    b ^ ((((b >> 63) as u64) >> 1) as i64)
}

/// Chooses up to `slots` of `candidates` (predicted bandwidths) to run
/// together so their sum comes close to `target`.
///
/// `first` (typically the least-served program, so nobody starves) is
/// always chosen. Each further slot but the last takes the largest
/// candidate that still leaves room for the remaining slots at the
/// smallest bandwidth left (or, if none fits, the smallest), and the last
/// slot takes whichever lands closest to the target: largest-first fills
/// the bus with the heavy programs that need it while leaving space to
/// finish near the target. Ties go to the lower index. Returns indices
/// into `candidates`, `first` first.
///
/// The candidates are sorted once and grouped by value, so each slot is a
/// binary search over the values, not a scan: O(N log N + slots * log N)
/// (a decision of `bw:*` at 1,024 tasks spent 60% of its time scanning;
/// taking each choice out of a sorted list of the rest, a fifth of what
/// was left). It picks exactly what the scan picks (`choose_scan`; the
/// test compares them).
pub fn choose(candidates: &[f64], slots: usize, target: f64, first: Option<usize>) -> Vec<usize> {
    if candidates.iter().any(|c| c.is_nan()) {
        return choose_scan(candidates, slots, target, first);
    }
    let n = candidates.len();
    let slots = slots.min(n);
    let mut chosen = Vec::with_capacity(slots);
    let mut sum = 0.0;
    // The candidates by value then index, as integer keys that order as
    // `total_cmp` does (sign-folded bits): unique keys, so an unstable sort
    // gives the order of a stable one, at a fraction of its cost.
    let mut keyed: Vec<(i64, usize)> = candidates
        .iter()
        .enumerate()
        .map(|(i, &v)| (order_key(v), i))
        .collect();
    keyed.sort_unstable();
    let mut free = Groups::new(&keyed);
    if let Some(f) = first.filter(|&f| f < n && slots > 0) {
        free.take_index(f, candidates[f], &keyed);
        chosen.push(f);
        sum += candidates[f];
    }
    while chosen.len() < slots {
        let after = slots - chosen.len() - 1;
        let Some(smallest) = free.lowest() else {
            break;
        };
        let g = if after == 0 {
            // The last slot: closest to the target, lower index on a tie
            // (within a group every candidate is as close: its first).
            let mut best: Option<(f64, usize, usize)> = None;
            for g in free.nonempty(smallest) {
                let i = keyed[free.next[g]].1;
                let d = ((sum + candidates[i]) - target).abs();
                if best.is_none_or(|(bd, bi, _)| d.total_cmp(&bd).then(i.cmp(&bi)).is_lt()) {
                    best = Some((d, i, g));
                }
            }
            best.expect("a group is left").2
        } else {
            let room = target - sum - after as f64 * free.value(smallest, candidates, &keyed);
            // The largest value that fits (its lowest index), else the
            // smallest.
            let fits = free.starts[..free.groups()].partition_point(|&k| candidates[keyed[k].1] <= room);
            free.highest_below(fits).unwrap_or(smallest)
        };
        let i = free.take_first(g, &keyed);
        chosen.push(i);
        sum += candidates[i];
    }
    chosen
}

/// The candidates not yet chosen, as runs of equal value in a sorted
/// list: each run's first is the lowest index of its value, and a run,
/// once empty, is skipped by a link to the next lower run (path-halved),
/// so finding the highest run left below a point is near O(1).
struct Groups {
    /// Where each run starts in the sorted list, and the list's end last.
    starts: Vec<usize>,
    /// Each run's first candidate not yet taken.
    next: Vec<usize>,
    /// Links down past emptied runs, shifted by one so that 0 means none:
    /// `below[g + 1] == g + 1` while run g has candidates; once it is
    /// empty, `below[g + 1]` leads (through further links) to the highest
    /// run below g that has some.
    below: Vec<usize>,
    /// Taken out of turn (the forced first), still in its run's list.
    taken: Vec<bool>,
    /// No run below this one has candidates.
    low: usize,
}

impl Groups {
    fn new(keyed: &[(i64, usize)]) -> Groups {
        let mut starts: Vec<usize> = (0..keyed.len())
            .filter(|&k| k == 0 || keyed[k - 1].0 != keyed[k].0)
            .collect();
        let groups = starts.len();
        let next = starts.clone();
        starts.push(keyed.len());
        Groups {
            starts,
            next,
            below: (0..=groups).collect(),
            taken: vec![false; keyed.len()],
            low: 0,
        }
    }

    fn groups(&self) -> usize {
        self.next.len()
    }

    fn empty(&self, g: usize) -> bool {
        self.next[g] == self.starts[g + 1]
    }

    fn value(&self, g: usize, candidates: &[f64], keyed: &[(i64, usize)]) -> f64 {
        candidates[keyed[self.starts[g]].1]
    }

    /// The lowest run with candidates left.
    fn lowest(&mut self) -> Option<usize> {
        while self.low < self.groups() && self.empty(self.low) {
            self.low += 1;
        }
        (self.low < self.groups()).then_some(self.low)
    }

    /// The highest run with candidates left among the first `end`.
    fn highest_below(&mut self, end: usize) -> Option<usize> {
        let mut x = end;
        while self.below[x] != x {
            self.below[x] = self.below[self.below[x]];
            x = self.below[x];
        }
        x.checked_sub(1)
    }

    /// The runs with candidates left, from `from` up.
    fn nonempty(&self, from: usize) -> impl Iterator<Item = usize> + '_ {
        (from..self.groups()).filter(|&g| !self.empty(g))
    }

    /// Takes run `g`'s lowest index left.
    fn take_first(&mut self, g: usize, keyed: &[(i64, usize)]) -> usize {
        let i = keyed[self.next[g]].1;
        self.taken[i] = true;
        self.skip_taken(g, keyed);
        i
    }

    /// Takes candidate `i` (of value `v`) wherever it is in its run.
    fn take_index(&mut self, i: usize, v: f64, keyed: &[(i64, usize)]) {
        let key = order_key(v);
        let g = self.starts[..self.groups()].partition_point(|&k| keyed[k].0 < key);
        self.taken[i] = true;
        self.skip_taken(g, keyed);
    }

    fn skip_taken(&mut self, g: usize, keyed: &[(i64, usize)]) {
        while self.next[g] < self.starts[g + 1] && self.taken[keyed[self.next[g]].1] {
            self.next[g] += 1;
        }
        if self.empty(g) {
            self.below[g + 1] = g;
        }
    }
}

/// [`choose`] by scanning every candidate for every slot, O(N * slots):
/// the rule as written, for candidates that hold a NaN (no order).
///
/// `first` (typically the least-served program, so nobody starves) is
/// always chosen. Each further slot but the last takes the largest
/// candidate that still leaves room for the remaining slots at the
/// smallest bandwidth left (or, if none fits, the smallest), and the last
/// slot takes whichever lands closest to the target: largest-first fills
/// the bus with the heavy programs that need it while leaving space to
/// finish near the target. Ties go to the lower index. Returns indices
/// into `candidates`, `first` first.
fn choose_scan(candidates: &[f64], slots: usize, target: f64, first: Option<usize>) -> Vec<usize> {
    let n = candidates.len();
    let slots = slots.min(n);
    let mut taken = vec![false; n];
    let mut chosen = Vec::with_capacity(slots);
    let mut sum = 0.0;
    if let Some(f) = first.filter(|&f| f < n && slots > 0) {
        taken[f] = true;
        chosen.push(f);
        sum += candidates[f];
    }
    while chosen.len() < slots {
        let after = slots - chosen.len() - 1;
        let free = || (0..n).filter(|&i| !taken[i]);
        let pick = if after == 0 {
            free().min_by(|&a, &b| {
                ((sum + candidates[a]) - target)
                    .abs()
                    .total_cmp(&((sum + candidates[b]) - target).abs())
                    .then(a.cmp(&b))
            })
        } else {
            let smallest = free().map(|i| candidates[i]).fold(f64::INFINITY, f64::min);
            let room = target - sum - after as f64 * smallest;
            free()
                .filter(|&i| candidates[i] <= room)
                .max_by(|&a, &b| candidates[a].total_cmp(&candidates[b]).then(b.cmp(&a)))
                .or_else(|| free().min_by(|&a, &b| candidates[a].total_cmp(&candidates[b]).then(a.cmp(&b))))
        };
        let Some(best) = pick else {
            break;
        };
        taken[best] = true;
        chosen.push(best);
        sum += candidates[best];
    }
    chosen
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn order_keys_order_as_total_cmp_does() {
        let mut v = vec![
            0.0,
            -0.0,
            1.5,
            -1.5,
            f64::INFINITY,
            f64::NEG_INFINITY,
            f64::MIN_POSITIVE,
            -f64::MIN_POSITIVE,
            f64::MAX,
            f64::MIN,
            1e-300,
            -1e300,
            0.3,
            0.05,
        ];
        let mut x = 0x2545_F491_4F6C_DD1Du64;
        for _ in 0..200 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            v.push(f64::from_bits(x).clamp(f64::MIN, f64::MAX));
        }
        for a in &v {
            for b in &v {
                assert_eq!(order_key(*a).cmp(&order_key(*b)), a.total_cmp(b), "{a} {b}");
            }
        }
    }

    #[test]
    fn the_sorted_choice_picks_what_the_scan_picks() {
        // Pseudo-random candidates with many ties (three levels, as a
        // workload's programs often are) and a few distinct values.
        let mut x = 0x9E37_79B9_7F4A_7C15u64;
        let mut next = || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x
        };
        for case in 0..600 {
            // Mostly small; some as large as a bw:* pool at 1,024 tasks.
            let n = 1 + (next() % if case % 4 == 0 { 300 } else { 60 }) as usize;
            let c: Vec<f64> = (0..n)
                .map(|_| match next() % 6 {
                    0 => 0.5,
                    1 => 2.0,
                    2 => 0.0,
                    // Signs too: the sorted keys fold them.
                    3 => -0.0,
                    4 => -((next() % 1000) as f64) / 100.0,
                    _ => (next() % 1000) as f64 / 100.0,
                })
                .collect();
            let slots = (next() % (n as u64 + 2)) as usize;
            let target = (next() % 4000) as f64 / 100.0;
            let first = (next() % 3 > 0).then(|| (next() % (n as u64 + 1)) as usize);
            assert_eq!(
                choose(&c, slots, target, first),
                choose_scan(&c, slots, target, first),
                "case {case}: {c:?} slots {slots} target {target} first {first:?}"
            );
        }
    }

    #[test]
    fn ideal_turnaround_follows_s1() {
        // 4 programs on 2 cores: (1 + 2) / 2 + 4 = 5.5.
        assert_eq!(ideal_turnaround_s(&[4.0, 1.0, 3.0, 2.0], 2), 5.5);
        // No more programs than cores: the longest.
        assert_eq!(ideal_turnaround_s(&[4.0, 1.0], 2), 4.0);
        assert_eq!(ideal_turnaround_s(&[], 2), 0.0);
        assert_eq!(iabw(&[10.0, 20.0, 30.0, 50.0], &[4.0, 1.0, 3.0, 2.0], 2), 20.0);
        // Fair share: 2 x 110 requests over 10 s of solo time.
        assert_eq!(
            fair_share(&[10.0, 20.0, 30.0, 50.0], &[4.0, 1.0, 3.0, 2.0], 2),
            22.0
        );
        // Equal solo times: the two agree (8 programs, 4 cores: 2 x 1 s).
        let (req, solo) = ([3.0; 8], [1.0; 8]);
        assert_eq!(fair_share(&req, &solo, 4), iabw(&req, &solo, 4));
        assert_eq!(fair_share(&[], &[], 4), 0.0);
    }

    #[test]
    fn choice_lands_near_the_target() {
        // Streamers at 50, mid at 20, compute at 2.
        let bw = [50.0, 50.0, 50.0, 20.0, 20.0, 2.0, 2.0, 2.0];
        // Target 72 on 3 slots: one streamer, one mid, one compute (72).
        let c = choose(&bw, 3, 72.0, None);
        let sum: f64 = c.iter().map(|&i| bw[i]).sum();
        assert_eq!(c.len(), 3);
        assert!((sum - 72.0).abs() < 1e-9, "{c:?} sums to {sum}");
        // A forced first member is kept.
        let c = choose(&bw, 3, 72.0, Some(5));
        assert_eq!(c[0], 5);
        assert_eq!(c.len(), 3);
        // Never more than the candidates.
        assert_eq!(choose(&bw[..2], 4, 10.0, None).len(), 2);
        assert!(choose(&bw, 0, 10.0, Some(1)).is_empty());
    }
}
