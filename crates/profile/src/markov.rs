//! S1's phase predictor: a first-order Markov chain over phase ids. With no
//! history for the current phase it predicts the same phase again.

use serde::{Deserialize, Serialize};

use crate::PhaseId;

/// ((from, to), times seen), in (from, to) order.
type Counts = Vec<((PhaseId, PhaseId), u32)>;

/// Transition counts between phases.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct Markov {
    /// (from, to) -> times seen, in (from, to) order: predictions (ties
    /// broken by the lowest id) and serialisation are deterministic. A
    /// sorted vector, not a map: a program has a few dozen transitions,
    /// and a map's search for the one to count, every job every period,
    /// was twice a binary search's cost. Stored as (from, to, count)
    /// triples, as a map was: JSON keys must be strings.
    #[serde(with = "triples")]
    counts: Counts,
    /// Per `from` phase, its most likely successor and that count, as
    /// [`Markov::predict`] would find it by a search of `counts`: kept as
    /// each transition is counted, since every job asks for a prediction
    /// every period (the search was 4.5% of bw:iabw's simulated time at
    /// 1,000 jobs). Made from `counts` at the first transition after
    /// loading; until then `predict` searches. Not part of the value.
    #[serde(skip)]
    best: Option<Vec<Option<(PhaseId, u32)>>>,
    /// Where the last transition counted lies in `counts`, checked at each
    /// use: a job stays in a phase for hundreds of periods, so the same
    /// transition (to itself) is counted again and again, and the search
    /// for it was a third of the count's cost. Not part of the value.
    #[serde(skip)]
    last: usize,
}

impl PartialEq for Markov {
    fn eq(&self, other: &Self) -> bool {
        self.counts == other.counts
    }
}

mod triples {
    use std::collections::BTreeMap;

    use serde::{Deserialize, Deserializer, Serialize, Serializer};

    use super::Counts;
    use crate::PhaseId;

    pub fn serialize<S: Serializer>(m: &[((PhaseId, PhaseId), u32)], s: S) -> Result<S::Ok, S::Error> {
        let v: Vec<(PhaseId, PhaseId, u32)> = m.iter().map(|&((a, b), c)| (a, b, c)).collect();
        v.serialize(s)
    }

    /// Through a map, as when the counts were one: in (from, to) order,
    /// the last of a pair given twice kept.
    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Counts, D::Error> {
        let v: Vec<(PhaseId, PhaseId, u32)> = Vec::deserialize(d)?;
        let m: BTreeMap<(PhaseId, PhaseId), u32> = v.into_iter().map(|(a, b, c)| ((a, b), c)).collect();
        Ok(m.into_iter().collect())
    }
}

impl Markov {
    /// Records that `from` was followed by `to` (staying counts too).
    pub fn observe(&mut self, from: PhaseId, to: PhaseId) {
        let at = match self.counts.get(self.last) {
            Some(e) if e.0 == (from, to) => self.last,
            _ => match self.counts.binary_search_by_key(&(from, to), |e| e.0) {
                Ok(at) => at,
                Err(at) => {
                    self.counts.insert(at, ((from, to), 0));
                    at
                }
            },
        };
        self.last = at;
        let c = &mut self.counts[at].1;
        *c = c.saturating_add(1);
        let count = *c;
        let counts = &self.counts;
        let best = self.best.get_or_insert_with(|| {
            let mut best = Vec::new();
            for &((f, _), _) in counts {
                if best.len() <= usize::from(f) {
                    best.resize(usize::from(f) + 1, None);
                }
                best[usize::from(f)] = Some(Self::search(counts, f));
            }
            best
        });
        if best.len() <= usize::from(from) {
            best.resize(usize::from(from) + 1, None);
        }
        // Counts only grow, so the best successor changes only to the one
        // just counted: when it now leads, or ties the leader with a lower
        // id (the search's order).
        let slot = &mut best[usize::from(from)];
        match *slot {
            Some((b, n)) if n > count || (n == count && b < to) => {}
            _ => *slot = Some((to, count)),
        }
    }

    /// The most likely phase after `current`; `current` itself when it has
    /// never been left or seen.
    pub fn predict(&self, current: PhaseId) -> PhaseId {
        match &self.best {
            Some(best) => best
                .get(usize::from(current))
                .copied()
                .flatten()
                .map_or(current, |(to, _)| to),
            None => Self::search(&self.counts, current).0,
        }
    }

    /// The most frequent successor of `from` in `counts` and its count (the
    /// lowest id on a tie); `from` itself with 0 when there is none.
    fn search(counts: &[((PhaseId, PhaseId), u32)], from: PhaseId) -> (PhaseId, u32) {
        let start = counts.partition_point(|e| e.0.0 < from);
        let end = counts.partition_point(|e| e.0.0 <= from);
        counts[start..end]
            .iter()
            .max_by(|a, b| a.1.cmp(&b.1).then(b.0.1.cmp(&a.0.1)))
            .map_or((from, 0), |((_, to), n)| (*to, *n))
    }

    /// Transitions recorded.
    pub fn transitions(&self) -> u64 {
        self.counts.iter().map(|&(_, c)| u64::from(c)).sum()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn predicts_the_most_frequent_successor() {
        let mut m = Markov::default();
        assert_eq!(m.predict(3), 3, "no history: the same phase");
        // 0 0 0 1 0 0 0 1 ...: from 0 mostly 0; from 1 always 0.
        for _ in 0..5 {
            m.observe(0, 0);
            m.observe(0, 0);
            m.observe(0, 1);
            m.observe(1, 0);
        }
        assert_eq!(m.predict(0), 0);
        assert_eq!(m.predict(1), 0);
        m.observe(2, 1);
        m.observe(2, 0);
        assert_eq!(m.predict(2), 0, "a tie goes to the lower id");
        assert_eq!(m.transitions(), 22);
    }

    /// The store's form is as it was when the counts were a map: triples
    /// in (from, to) order; read back through a map (the last of a pair
    /// given twice kept).
    #[test]
    fn counts_are_stored_as_ordered_triples() {
        let mut m = Markov::default();
        for (from, to) in [(2, 1), (0, 3), (2, 1), (0, 0)] {
            m.observe(from, to);
        }
        assert_eq!(
            serde_json::to_string(&m).unwrap(),
            r#"{"counts":[[0,0,1],[0,3,1],[2,1,2]]}"#
        );
        let read: Markov = serde_json::from_str(r#"{"counts":[[2,1,5],[0,3,1],[2,1,2],[0,0,1]]}"#).unwrap();
        assert_eq!(read, m);
        assert_eq!(read.predict(2), 1);
    }

    /// Each transition is counted where it lies, however the counts grew
    /// since the last (new pairs inserted before it move it): the counts
    /// equal a map's of every transition.
    #[test]
    fn counts_follow_a_map_of_every_transition() {
        let mut m = Markov::default();
        let mut want = std::collections::BTreeMap::new();
        let mut x: u32 = 777;
        let mut from: PhaseId = 7;
        for step in 0..3000 {
            x = x.wrapping_mul(1_103_515_245).wrapping_add(12345);
            // Mostly staying, as a job does for hundreds of periods.
            let to = if (x >> 16) % 4 == 0 {
                ((x >> 20) % 9) as PhaseId
            } else {
                from
            };
            m.observe(from, to);
            *want.entry((from, to)).or_insert(0u32) += 1;
            from = to;
            let have: Vec<_> = want.iter().map(|(&k, &v)| (k, v)).collect();
            assert_eq!(m.counts, have, "after {step} steps");
        }
    }

    #[test]
    fn predictions_kept_as_counted_match_a_search_after_loading() {
        // A pseudo-random walk over 5 phases; after every step, the kept
        // prediction for each phase equals a fresh search of the counts
        // (what a table just loaded from the store answers with).
        let mut m = Markov::default();
        let mut x: u32 = 12345;
        let mut from: PhaseId = 0;
        for step in 0..2000 {
            x = x.wrapping_mul(1_103_515_245).wrapping_add(12345);
            let to = ((x >> 16) % 5) as PhaseId;
            m.observe(from, to);
            from = to;
            let loaded: Markov = serde_json::from_str(&serde_json::to_string(&m).unwrap()).unwrap();
            assert!(loaded.best.is_none());
            for p in 0..6 {
                assert_eq!(m.predict(p), loaded.predict(p), "phase {p} after {step} steps");
            }
            if step == 1000 {
                // Loaded mid-run, it keeps predictions from its next count on.
                m = loaded;
            }
        }
        assert_eq!(m.predict(9), 9, "never seen: the same phase");
    }
}
