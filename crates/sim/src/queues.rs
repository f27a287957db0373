//! The simulated kernel's run queues, one per CPU position, with the
//! positions indexed by queue length.
//!
//! Where a waking or new thread goes, the kernel wants the shortest queue
//! it may use, the thread's previous CPU first among equals, then the
//! lowest tie-break. A scan of every allowed CPU for it was a quarter of
//! the first 10 simulated seconds of cosched:fair (which resumes programs
//! every period) and of `linux` (1,000 threads starting) at 256 CPUs; the
//! index answers in a few steps when the allowed CPUs are many. Every
//! change of a queue's length goes through this type, so the index cannot
//! fall out of step; reads see the queues as slices.

#[derive(Debug, Clone)]
pub(crate) struct Queues {
    q: Vec<Vec<usize>>,
    /// `by_len[l]`: a bit per tie-break rank, set for the positions whose
    /// queue holds `l` threads (a bitset: a queue changes length at every
    /// event, and a tree's insert and remove cost more than the scans they
    /// saved under bw:greedy).
    by_len: Vec<Vec<u64>>,
    /// Each position's tie-break: which of equally good CPUs placement
    /// takes first (lowest wins; a permutation of positions), the position
    /// itself or a seeded shuffle ([`crate::kernel::Kernel::shuffle_ties`]).
    tie: Vec<usize>,
    /// The position of each tie-break rank.
    at_rank: Vec<usize>,
}

impl Queues {
    /// `tie.len()` empty queues.
    pub(crate) fn new(tie: &[usize]) -> Self {
        let mut q = Queues {
            q: vec![Vec::new(); tie.len()],
            by_len: Vec::new(),
            tie: Vec::new(),
            at_rank: Vec::new(),
        };
        q.set_ties(tie);
        q
    }

    /// Takes new tie-breaks and indexes the queues again.
    pub(crate) fn set_ties(&mut self, tie: &[usize]) {
        debug_assert_eq!(tie.len(), self.q.len());
        self.tie = tie.to_vec();
        self.at_rank = vec![0; tie.len()];
        for (p, &r) in tie.iter().enumerate() {
            self.at_rank[r] = p;
        }
        self.by_len.clear();
        for p in 0..self.q.len() {
            self.file(p);
        }
    }

    /// Each position's tie-break.
    pub(crate) fn ties(&self) -> &[usize] {
        &self.tie
    }

    pub(crate) fn len(&self) -> usize {
        self.q.len()
    }

    pub(crate) fn iter(&self) -> std::slice::Iter<'_, Vec<usize>> {
        self.q.iter()
    }

    /// Among the positions `ok` admits: the shortest queue, `prev` if it
    /// is one of the shortest, else the lowest tie-break among them (what a
    /// scan of those positions by (length, not `prev`, tie-break) finds).
    /// `None` once more than `budget` positions were passed over: a scan
    /// of the admitted positions is then no dearer.
    pub(crate) fn shortest_where(
        &self,
        prev: Option<usize>,
        budget: usize,
        ok: impl Fn(usize) -> bool,
    ) -> Option<Option<usize>> {
        let prev = prev.filter(|&p| p < self.q.len() && ok(p));
        let mut passed = 0;
        for (len, set) in self.by_len.iter().enumerate() {
            if prev.is_some_and(|p| self.q[p].len() == len) {
                return Some(prev);
            }
            for (w, &word) in set.iter().enumerate() {
                let mut bits = word;
                while bits != 0 {
                    let p = self.at_rank[w * 64 + bits.trailing_zeros() as usize];
                    if ok(p) {
                        return Some(Some(p));
                    }
                    passed += 1;
                    if passed > budget {
                        return None;
                    }
                    bits &= bits - 1;
                }
            }
        }
        Some(None)
    }

    /// The same answer as [`Queues::shortest_where`] for the positions
    /// whose tie-break rank `mask` has a bit set (a bitset in rank order,
    /// as `by_len`'s): word by word, a few steps for any number of them.
    pub(crate) fn shortest_in(&self, prev: Option<usize>, mask: &[u64]) -> Option<usize> {
        let admitted = |p: usize| {
            let r = self.tie[p];
            mask.get(r / 64).is_some_and(|w| w >> (r % 64) & 1 == 1)
        };
        let prev = prev.filter(|&p| p < self.q.len() && admitted(p));
        for (len, set) in self.by_len.iter().enumerate() {
            if prev.is_some_and(|p| self.q[p].len() == len) {
                return prev;
            }
            for (w, (&word, &m)) in set.iter().zip(mask).enumerate() {
                let bits = word & m;
                if bits != 0 {
                    return Some(self.at_rank[w * 64 + bits.trailing_zeros() as usize]);
                }
            }
        }
        None
    }

    /// The positions with an empty queue whose rank `mask` has (a bitset
    /// as [`Queues::shortest_in`]'s), in tie-break order: as many steps as
    /// there are such positions, plus a word per 64 CPUs.
    pub(crate) fn empty_in<'a>(&'a self, mask: &'a [u64]) -> impl Iterator<Item = usize> + 'a {
        let empty = self.by_len.first().map_or(&[][..], Vec::as_slice);
        empty
            .iter()
            .zip(mask)
            .enumerate()
            .flat_map(move |(w, (&word, &m))| {
                let mut bits = word & m;
                std::iter::from_fn(move || {
                    (bits != 0).then(|| {
                        let r = w * 64 + bits.trailing_zeros() as usize;
                        bits &= bits - 1;
                        self.at_rank[r]
                    })
                })
            })
    }

    /// Whether any queue is empty.
    pub(crate) fn any_empty(&self) -> bool {
        self.by_len
            .first()
            .is_some_and(|words| words.iter().any(|&w| w != 0))
    }

    /// How many positions with an empty queue `mask` has.
    pub(crate) fn empty_count_in(&self, mask: &[u64]) -> usize {
        let empty = self.by_len.first().map_or(&[][..], Vec::as_slice);
        empty
            .iter()
            .zip(mask)
            .map(|(w, m)| (w & m).count_ones() as usize)
            .sum()
    }

    /// `mask` for [`Queues::shortest_in`]: the ranks of the positions `ok` admits.
    pub(crate) fn rank_mask(&self, ok: impl Fn(usize) -> bool) -> Vec<u64> {
        let mut mask = vec![0u64; self.q.len().div_ceil(64)];
        for (_, &r) in self.tie.iter().enumerate().filter(|&(p, _)| ok(p)) {
            mask[r / 64] |= 1u64 << (r % 64);
        }
        mask
    }

    pub(crate) fn push(&mut self, pos: usize, thread: usize) {
        self.change(pos, |q| q.push(thread));
    }

    pub(crate) fn remove(&mut self, pos: usize, index: usize) -> usize {
        self.change(pos, |q| q.remove(index))
    }

    pub(crate) fn pop(&mut self, pos: usize) -> Option<usize> {
        self.change(pos, Vec::pop)
    }

    pub(crate) fn retain(&mut self, pos: usize, keep: impl FnMut(&usize) -> bool) {
        self.change(pos, |q| q.retain(keep));
    }

    /// Moves the queue's head to its tail (its length stays).
    pub(crate) fn rotate_left(&mut self, pos: usize) {
        if !self.q[pos].is_empty() {
            self.q[pos].rotate_left(1);
        }
    }

    /// Changes queue `pos` and files it under its new length.
    fn change<R>(&mut self, pos: usize, f: impl FnOnce(&mut Vec<usize>) -> R) -> R {
        let before = self.q[pos].len();
        let r = f(&mut self.q[pos]);
        if self.q[pos].len() != before {
            let r = self.tie[pos];
            self.by_len[before][r / 64] &= !(1u64 << (r % 64));
            self.file(pos);
        }
        r
    }

    fn file(&mut self, pos: usize) {
        let len = self.q[pos].len();
        if self.by_len.len() <= len {
            self.by_len.resize(len + 1, vec![0; self.q.len().div_ceil(64)]);
        }
        let r = self.tie[pos];
        self.by_len[len][r / 64] |= 1u64 << (r % 64);
    }
}

impl std::ops::Index<usize> for Queues {
    type Output = [usize];

    fn index(&self, pos: usize) -> &[usize] {
        &self.q[pos]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The index's answer equals a scan's after every change, for every
    /// `prev` and several sets of admitted positions, under two tie orders;
    /// or it gives up, only past its budget.
    #[test]
    fn shortest_is_what_a_scan_finds() {
        let scan = |q: &Queues, tie: &[usize], prev: Option<usize>, ok: &dyn Fn(usize) -> bool| {
            (0..q.len())
                .filter(|&p| ok(p))
                .min_by_key(|&p| (q[p].len(), Some(p) != prev, tie[p]))
        };
        let admits: [&dyn Fn(usize) -> bool; 4] = [&|_| true, &|p| p % 2 == 0, &|p| p == 3, &|_| false];
        for tie in [vec![0, 1, 2, 3, 4], vec![3, 0, 4, 1, 2]] {
            let mut q = Queues::new(&tie);
            let mut x: u32 = 7;
            for step in 0..500 {
                x = x.wrapping_mul(1_103_515_245).wrapping_add(12345);
                let pos = ((x >> 16) % 5) as usize;
                match (x >> 8) % 4 {
                    0 | 1 => q.push(pos, step),
                    2 => {
                        q.pop(pos);
                    }
                    _ => q.retain(pos, |&t| t % 3 != 0),
                }
                for prev in [None, Some(0), Some(2), Some(4)] {
                    for (a, ok) in admits.iter().enumerate() {
                        let want = scan(&q, &tie, prev, ok);
                        assert_eq!(
                            q.shortest_where(prev, 5, ok),
                            Some(want),
                            "step {step}, prev {prev:?}, set {a}"
                        );
                        if let Some(found) = q.shortest_where(prev, 0, ok) {
                            assert_eq!(found, want, "step {step}, prev {prev:?}, set {a}, no budget");
                        }
                        assert_eq!(
                            q.shortest_in(prev, &q.rank_mask(ok)),
                            want,
                            "step {step}, prev {prev:?}, set {a}, by mask"
                        );
                        let mut empty: Vec<usize> =
                            (0..q.len()).filter(|&p| ok(p) && q[p].is_empty()).collect();
                        empty.sort_by_key(|&p| tie[p]);
                        assert_eq!(
                            q.empty_count_in(&q.rank_mask(ok)),
                            empty.len(),
                            "step {step}, set {a}, empty ones counted"
                        );
                        assert_eq!(
                            q.empty_in(&q.rank_mask(ok)).collect::<Vec<_>>(),
                            empty,
                            "step {step}, set {a}, empty ones"
                        );
                    }
                }
            }
        }
    }
}
