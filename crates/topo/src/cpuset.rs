//! A set of CPUs, indexed by the OS's CPU number.
//!
//! Written here rather than taken from a crate: hwloc's bitmap lives behind
//! FFI (no good for the pure simulator), and the general bitset crates lack
//! the Linux cpu-list format (`0-3,8`) that affinity masks, cgroup files and
//! `/proc/*/status` all speak. The word operations themselves are trivial.

use std::fmt;

use smallvec::SmallVec;

const WORD_BITS: usize = 64;

/// Words held inline: 384 CPUs (hwloc's 2x EPYC 9654, the largest machine
/// herd is measured on); a larger machine's sets spill to the heap.
const INLINE_WORDS: usize = 6;

/// A set of CPU OS indices. Cloned without allocating on machines of up to
/// 384 CPUs; 56 bytes (smallvec's `union` feature, in the workspace's
/// `Cargo.toml`).
///
/// Invariant: `words` has no trailing zero words, so equal sets compare equal.
#[derive(Default, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct CpuSet {
    words: SmallVec<[u64; INLINE_WORDS]>,
}

/// Copies the words at once: `SmallVec`'s own clone goes through its
/// generic extend, word by word (a fifth of pack:tp's first decision at
/// 1,024 tasks, which gives every task the same set).
impl Clone for CpuSet {
    fn clone(&self) -> Self {
        Self {
            words: SmallVec::from_slice(&self.words),
        }
    }
}

impl CpuSet {
    /// The empty set.
    pub fn new() -> Self {
        Self {
            words: SmallVec::new(),
        }
    }

    /// A set holding exactly one CPU.
    pub fn single(cpu: u32) -> Self {
        let (w, b) = split(cpu);
        if w < INLINE_WORDS {
            // Its words written at once (pinning policies make one per
            // task on a first decision).
            let mut words = [0; INLINE_WORDS];
            words[w] = b;
            return Self {
                words: SmallVec::from_buf_and_len(words, w + 1),
            };
        }
        let mut set = Self::new();
        set.insert(cpu);
        set
    }

    /// The CPUs `0..n`.
    pub fn first_n(n: u32) -> Self {
        (0..n).collect()
    }

    /// Adds `cpu`; returns whether it was absent.
    #[inline]
    pub fn insert(&mut self, cpu: u32) -> bool {
        let (w, b) = split(cpu);
        if w >= self.words.len() {
            self.grow_to(w + 1);
        }
        let was_absent = self.words[w] & b == 0;
        self.words[w] |= b;
        was_absent
    }

    /// Removes `cpu`; returns whether it was present.
    pub fn remove(&mut self, cpu: u32) -> bool {
        let (w, b) = split(cpu);
        let Some(word) = self.words.get_mut(w) else {
            return false;
        };
        let was_present = *word & b != 0;
        *word &= !b;
        self.trim();
        was_present
    }

    /// Whether `cpu` is in the set.
    #[inline]
    pub fn contains(&self, cpu: u32) -> bool {
        let (w, b) = split(cpu);
        self.words.get(w).is_some_and(|word| word & b != 0)
    }

    /// Number of CPUs in the set.
    #[inline]
    pub fn len(&self) -> usize {
        self.words.iter().map(|w| w.count_ones() as usize).sum()
    }

    /// Whether the set is empty.
    #[inline]
    pub fn is_empty(&self) -> bool {
        self.words.is_empty()
    }

    /// The lowest CPU in the set.
    pub fn first(&self) -> Option<u32> {
        let (i, w) = self.words.iter().enumerate().find(|(_, w)| **w != 0)?;
        Some((i * WORD_BITS) as u32 + w.trailing_zeros())
    }

    /// CPUs in ascending order.
    pub fn iter(&self) -> impl Iterator<Item = u32> + '_ {
        self.words.iter().enumerate().flat_map(|(i, &word)| {
            let mut rest = word;
            std::iter::from_fn(move || {
                if rest == 0 {
                    return None;
                }
                let bit = rest.trailing_zeros();
                rest &= rest - 1;
                Some((i * WORD_BITS) as u32 + bit)
            })
        })
    }

    /// Set union.
    pub fn union(&self, other: &Self) -> Self {
        let (long, short) = if self.words.len() >= other.words.len() {
            (self, other)
        } else {
            (other, self)
        };
        let mut words = long.words.clone();
        for (w, o) in words.iter_mut().zip(&short.words) {
            *w |= o;
        }
        Self { words }
    }

    /// Adds every CPU of `other`, in place: for a union of many sets, where
    /// a new set per step is most of the cost.
    pub fn union_with(&mut self, other: &Self) {
        if self.words.is_empty() {
            // A copy, not a zeroed buffer grown and then or-ed: the first
            // union into an empty set is most of them where each job's
            // masks are gathered (the simulated memory follower's).
            self.words = SmallVec::from_slice(&other.words);
            return;
        }
        if self.words.len() < other.words.len() {
            self.grow_to(other.words.len());
        }
        for (w, o) in self.words.iter_mut().zip(&other.words) {
            *w |= o;
        }
    }

    /// Set intersection. Copied then masked in place: collecting from an
    /// iterator went through `SmallVec`'s generic extend, two fifths of
    /// the simulator applying a plan of a thousand placements.
    pub fn intersection(&self, other: &Self) -> Self {
        let n = self.words.len().min(other.words.len());
        let mut out = Self {
            words: SmallVec::from_slice(&self.words[..n]),
        };
        for (w, o) in out.words.iter_mut().zip(&other.words) {
            *w &= o;
        }
        out.trim();
        out
    }

    /// Makes this set `a`'s CPUs that are in `b` ([`CpuSet::intersection`]
    /// in place: the set's own words are reused, where a new set is built
    /// and this one dropped; the simulator narrows each placement it is
    /// given this way, a thousand a turn when a probe ends).
    pub fn assign_intersection(&mut self, a: &Self, b: &Self) {
        let n = a.words.len().min(b.words.len());
        if n <= INLINE_WORDS {
            // Within the inline words: made on the stack, moved in at once
            // (see `grow_to`: a small vector's extend is dear), and trimmed
            // as they are made, not popped after (66 -> 54 instructions for
            // a set of four words).
            let (mut words, mut len) = ([0; INLINE_WORDS], 0);
            for (i, (w, (x, y))) in words.iter_mut().zip(a.words.iter().zip(&b.words)).enumerate() {
                *w = x & y;
                if *w != 0 {
                    len = i + 1;
                }
            }
            self.words = SmallVec::from_buf_and_len(words, len);
        } else {
            self.words.clear();
            self.words
                .extend(a.words[..n].iter().zip(&b.words[..n]).map(|(x, y)| x & y));
            self.trim();
        }
    }

    /// The CPUs of `self` that are not in `other`.
    pub fn difference(&self, other: &Self) -> Self {
        let mut out = self.clone();
        for (w, o) in out.words.iter_mut().zip(&other.words) {
            *w &= !o;
        }
        out.trim();
        out
    }

    /// Whether the sets share a CPU.
    pub fn intersects(&self, other: &Self) -> bool {
        self.words.iter().zip(&other.words).any(|(a, b)| a & b != 0)
    }

    /// Whether every CPU of `self` is in `other`.
    pub fn is_subset(&self, other: &Self) -> bool {
        self.words
            .iter()
            .enumerate()
            .all(|(i, a)| a & !other.words.get(i).copied().unwrap_or(0) == 0)
    }

    /// Parses the Linux cpu-list format: `0-3,8,10-11`. Whitespace around the
    /// whole list is ignored; an empty string is the empty set.
    pub fn parse_list(text: &str) -> Result<Self, CpuListError> {
        let mut set = Self::new();
        let text = text.trim();
        if text.is_empty() {
            return Ok(set);
        }
        for part in text.split(',') {
            let bad = || CpuListError(part.to_string());
            let (lo, hi) = match part.split_once('-') {
                Some((lo, hi)) => (lo, hi),
                None => (part, part),
            };
            let lo: u32 = lo.trim().parse().map_err(|_| bad())?;
            let hi: u32 = hi.trim().parse().map_err(|_| bad())?;
            // A bound keeps a typo like `0-4000000000` from allocating gigabytes.
            if lo > hi || hi >= MAX_CPUS {
                return Err(bad());
            }
            for cpu in lo..=hi {
                set.insert(cpu);
            }
        }
        Ok(set)
    }

    /// At least `n` words, the new ones zero. Not `SmallVec::resize`,
    /// which goes through its generic extend: about a hundred
    /// instructions for one word (7% of static:scatter's first decision at
    /// 1,024 tasks went to making single-CPU sets that way).
    #[cold]
    fn grow_to(&mut self, n: usize) {
        const ZEROS: [u64; 16] = [0; 16];
        if n <= INLINE_WORDS {
            // Within the inline words: one copy into a zeroed buffer (a
            // slice's extend took about 90 instructions a call, 9% of
            // static:scatter's first decision at 1,024 tasks).
            let mut words = [0; INLINE_WORDS];
            words[..self.words.len()].copy_from_slice(&self.words);
            self.words = SmallVec::from_buf_and_len(words, n);
            return;
        }
        while self.words.len() < n {
            let k = (n - self.words.len()).min(ZEROS.len());
            self.words.extend_from_slice(&ZEROS[..k]);
        }
    }

    fn trim(&mut self) {
        while self.words.last() == Some(&0) {
            self.words.pop();
        }
    }
}

/// The largest CPU number herd accepts plus one (Linux's own `NR_CPUS` limit is 8192).
pub const MAX_CPUS: u32 = 8192;

/// A cpu-list entry that is not `N` or `N-M` with `N <= M < MAX_CPUS`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("bad cpu list entry '{0}': expected N or N-M")]
pub struct CpuListError(pub String);

fn split(cpu: u32) -> (usize, u64) {
    let cpu = cpu as usize;
    (cpu / WORD_BITS, 1u64 << (cpu % WORD_BITS))
}

impl FromIterator<u32> for CpuSet {
    fn from_iter<I: IntoIterator<Item = u32>>(iter: I) -> Self {
        let mut set = Self::new();
        for cpu in iter {
            set.insert(cpu);
        }
        set
    }
}

/// Formats as the Linux cpu-list (`0-3,8`), the inverse of [`CpuSet::parse_list`].
impl fmt::Display for CpuSet {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut iter = self.iter().peekable();
        let mut first = true;
        while let Some(lo) = iter.next() {
            let mut hi = lo;
            while iter.peek() == Some(&(hi + 1)) {
                hi = iter.next().unwrap_or(hi);
            }
            if !first {
                f.write_str(",")?;
            }
            first = false;
            if lo == hi {
                write!(f, "{lo}")?;
            } else {
                write!(f, "{lo}-{hi}")?;
            }
        }
        Ok(())
    }
}

impl fmt::Debug for CpuSet {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "CpuSet({self})")
    }
}

impl serde::Serialize for CpuSet {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_seq(self.iter())
    }
}

impl<'de> serde::Deserialize<'de> for CpuSet {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let cpus = Vec::<u32>::deserialize(d)?;
        if let Some(bad) = cpus.iter().find(|&&c| c >= MAX_CPUS) {
            return Err(serde::de::Error::custom(format!(
                "cpu {bad} is beyond {MAX_CPUS}"
            )));
        }
        Ok(cpus.into_iter().collect())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn list_round_trip() {
        for text in ["", "0", "0-3", "0-3,8", "1,3,5", "63-65,127-128"] {
            let set = CpuSet::parse_list(text).unwrap();
            assert_eq!(set.to_string(), text);
        }
    }

    #[test]
    fn bad_lists_are_rejected() {
        for text in ["a", "3-1", "1-", "-1", "0-9000", "1,,2"] {
            assert!(CpuSet::parse_list(text).is_err(), "{text} should fail");
        }
    }

    #[test]
    fn set_operations() {
        let a: CpuSet = [0, 1, 2, 70].into_iter().collect();
        let b: CpuSet = [2, 3, 70].into_iter().collect();
        assert_eq!(a.union(&b).to_string(), "0-3,70");
        // In place, from the shorter set or the longer, it is the same set.
        let (mut short, mut long) = (CpuSet::first_n(2), a.clone());
        short.union_with(&b);
        long.union_with(&CpuSet::first_n(2));
        assert_eq!(short, [0, 1, 2, 3, 70].into_iter().collect());
        assert_eq!(long, a);
        assert_eq!(a.intersection(&b).to_string(), "2,70");
        assert_eq!(a.difference(&b).to_string(), "0-1");
        assert!(a.intersects(&b));
        assert!(!a.is_subset(&b));
        assert!(a.intersection(&b).is_subset(&a));
        assert_eq!(a.len(), 4);
        // Removing the high CPU trims words, so equality stays structural.
        let mut c = a.clone();
        c.remove(70);
        assert_eq!(c, CpuSet::first_n(3));
        assert_eq!(a.difference(&a), CpuSet::new());
    }

    /// A small deterministic generator (topo depends on nothing of herd's,
    /// so not the policy crate's `Rng`).
    fn lcg(mut x: u64) -> impl FnMut() -> u64 {
        move || {
            x = x
                .wrapping_mul(6_364_136_223_846_793_005)
                .wrapping_add(1_442_695_040_888_963_407);
            x >> 33
        }
    }

    /// Intersection and difference agree with ordered sets of the same
    /// CPUs, and their results compare equal to sets built CPU by CPU
    /// (high words emptied are trimmed), over sets of 0-6 words.
    #[test]
    fn intersection_and_difference_match_a_model() {
        let mut next = lcg(17);
        for round in 0..300 {
            let mut make = || -> std::collections::BTreeSet<u32> {
                let top = (next() % 400) as u32;
                (0..top).filter(|_| next() % 3 == 0).collect()
            };
            let (ma, mb) = (make(), make());
            let a: CpuSet = ma.iter().copied().collect();
            let b: CpuSet = mb.iter().copied().collect();
            let both: CpuSet = ma.intersection(&mb).copied().collect();
            let only: CpuSet = ma.difference(&mb).copied().collect();
            assert_eq!(a.intersection(&b), both, "round {round}");
            // In place, over a set of either size before.
            let mut c = if round % 2 == 0 { a.clone() } else { CpuSet::new() };
            c.assign_intersection(&a, &b);
            assert_eq!(c, both, "round {round}, in place");
            assert_eq!(a.difference(&b), only, "round {round}");
        }
    }

    /// Six words inline and nothing beside them but the length: a plan
    /// holds one set per task (smallvec's `union` feature; without it a
    /// tag makes 64 bytes).
    #[test]
    #[cfg(target_pointer_width = "64")]
    fn a_set_is_seven_words() {
        assert_eq!(std::mem::size_of::<CpuSet>(), 56);
    }

    /// Sets grown CPU by CPU (in random order, so words are added above
    /// and below), unions in place and single-CPU sets hold what ordered
    /// sets hold; the first CPU is the model's least.
    #[test]
    fn growth_first_and_union_match_a_model() {
        let mut next = lcg(29);
        for round in 0..300 {
            let mut make = || -> Vec<u32> { (0..next() % 12).map(|_| (next() % 700) as u32).collect() };
            let (va, vb) = (make(), make());
            let mut a = CpuSet::new();
            for &c in &va {
                a.insert(c);
            }
            let b: CpuSet = vb.iter().copied().collect();
            let ma: std::collections::BTreeSet<u32> = va.iter().copied().collect();
            let mb: std::collections::BTreeSet<u32> = vb.iter().copied().collect();
            assert_eq!(
                a.iter().collect::<Vec<_>>(),
                ma.iter().copied().collect::<Vec<_>>(),
                "round {round}"
            );
            assert_eq!(a.first(), ma.first().copied(), "round {round}");
            let mut u = a.clone();
            u.union_with(&b);
            assert_eq!(
                u.iter().collect::<Vec<_>>(),
                ma.union(&mb).copied().collect::<Vec<_>>(),
                "round {round}"
            );
            assert_eq!(u, a.union(&b), "round {round}");
            let c = (next() % 700) as u32;
            let one = CpuSet::single(c);
            assert_eq!(
                (one.len(), one.first(), one.contains(c)),
                (1, Some(c), true),
                "round {round}"
            );
            // Emptied to nothing, a set's first CPU is none.
            for &c in &va {
                a.remove(c);
            }
            assert_eq!((a.first(), a.is_empty()), (None, true), "round {round}");
            // Grown again after it held more words than fit inline.
            a.insert(c);
            assert_eq!(a, one, "round {round}");
        }
    }
}
