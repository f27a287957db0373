//! What PALM remembers of each thread, kept in the snapshot's task order.
//!
//! A decision reads and writes every thread's progress and group. Kept in
//! hash maps by task, that was two look-ups per thread per decision (with
//! the maps' upkeep, a ninth of a later decision's instructions at 1,024
//! threads: 316 k -> 279 k, docs/results.md); the snapshot's task list is
//! almost always the last one, so the records sit at the threads'
//! positions and are carried over by task only when the list changes.

use rustc_hash::FxHashMap;

use crate::TaskId;

/// One thread's record.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(super) struct Slot {
    /// Its progress so far (heartbeats, or CPU time summed).
    pub(super) progress: u64,
    /// Its group (core index) as last placed, or one of the markers
    /// `usize::MAX` (any of the K cores, not a worker) and `PLANNED`;
    /// `None` before its first placement.
    pub(super) group: Option<usize>,
}

/// The records of the last snapshot's threads, in its order.
#[derive(Debug, Clone, Default)]
pub(super) struct Slots {
    ids: Vec<TaskId>,
    slots: Vec<Slot>,
}

impl Slots {
    /// The records for `ids`, in that order: a thread seen before keeps
    /// its record, a new one starts empty, one that left is forgotten.
    /// `changed` says whether the list may differ from the last one (the
    /// caller knows, often without comparing: the sensor vouches for an
    /// unchanged list); nothing is looked up when it does not.
    pub(super) fn follow(&mut self, ids: impl ExactSizeIterator<Item = TaskId>, changed: bool) -> &mut [Slot] {
        if changed || ids.len() != self.ids.len() {
            let mut old: FxHashMap<TaskId, Slot> = self.ids.drain(..).zip(self.slots.drain(..)).collect();
            for id in ids {
                self.ids.push(id);
                self.slots.push(old.remove(&id).unwrap_or_default());
            }
        }
        &mut self.slots
    }

    /// The records as last followed.
    pub(super) fn records(&mut self) -> &mut [Slot] {
        &mut self.slots
    }

    /// Every thread's group forgotten (its cores changed); progress kept.
    pub(super) fn forget_groups(&mut self) {
        self.slots.iter_mut().for_each(|s| s.group = None);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn records_follow_their_threads_through_a_changed_list() {
        let mut s = Slots::default();
        let first = [1, 2, 3];
        for (i, slot) in s.follow(first.iter().copied(), true).iter_mut().enumerate() {
            slot.progress = 10 * (i as u64 + 1);
            slot.group = Some(i);
        }
        // 2 left, 4 came, 3 and 1 swapped places.
        let next = [3, 4, 1];
        let got: Vec<Slot> = s.follow(next.iter().copied(), true).to_vec();
        assert_eq!(
            got,
            vec![
                Slot { progress: 30, group: Some(2) },
                Slot::default(),
                Slot { progress: 10, group: Some(0) },
            ]
        );
        // The same list again: the same records, written in place.
        s.follow(next.iter().copied(), false)[1].progress = 7;
        assert_eq!(s.follow(next.iter().copied(), false)[1].progress, 7);
        // Told "unchanged" with a list of another length, it still follows.
        assert_eq!(s.follow([1].into_iter(), false), &[Slot { progress: 10, group: Some(0) }]);
        s.forget_groups();
        assert!(s.follow([1].into_iter(), false).iter().all(|x| x.group.is_none()));
    }
}
