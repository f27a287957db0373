//! S1's phase predictor: a first-order Markov chain over phase ids. With no
//! history for the current phase it predicts the same phase again.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::PhaseId;

/// Transition counts between phases.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Markov {
    /// (from, to) -> times seen. A BTreeMap: predictions (ties broken by
    /// the lowest id) and serialisation are deterministic. Stored as
    /// (from, to, count) triples: JSON keys must be strings.
    #[serde(with = "triples")]
    counts: BTreeMap<(PhaseId, PhaseId), u32>,
}

mod triples {
    use std::collections::BTreeMap;

    use serde::{Deserialize, Deserializer, Serialize, Serializer};

    use crate::PhaseId;

    pub fn serialize<S: Serializer>(m: &BTreeMap<(PhaseId, PhaseId), u32>, s: S) -> Result<S::Ok, S::Error> {
        let v: Vec<(PhaseId, PhaseId, u32)> = m.iter().map(|(&(a, b), &c)| (a, b, c)).collect();
        v.serialize(s)
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(
        d: D,
    ) -> Result<BTreeMap<(PhaseId, PhaseId), u32>, D::Error> {
        let v: Vec<(PhaseId, PhaseId, u32)> = Vec::deserialize(d)?;
        Ok(v.into_iter().map(|(a, b, c)| ((a, b), c)).collect())
    }
}

impl Markov {
    /// Records that `from` was followed by `to` (staying counts too).
    pub fn observe(&mut self, from: PhaseId, to: PhaseId) {
        let c = self.counts.entry((from, to)).or_insert(0);
        *c = c.saturating_add(1);
    }

    /// The most likely phase after `current`; `current` itself when it has
    /// never been left or seen.
    pub fn predict(&self, current: PhaseId) -> PhaseId {
        self.counts
            .range((current, PhaseId::MIN)..=(current, PhaseId::MAX))
            .max_by(|a, b| a.1.cmp(b.1).then(b.0.1.cmp(&a.0.1)))
            .map_or(current, |((_, to), _)| *to)
    }

    /// Transitions recorded.
    pub fn transitions(&self) -> u64 {
        self.counts.values().map(|&c| u64::from(c)).sum()
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
}
