//! Streams grouped into classes of identical streams, kept up to date one
//! member at a time.
//!
//! Identical streams (threads of one phase on one node with the same CPU
//! share) wait the same, so the contention solver works on classes weighted
//! by their size. A simulated machine runs many copies of few kinds of
//! thread: 1,000 threads make a few dozen classes. The simulator changes a
//! handful of threads per event, so it moves only those between classes
//! instead of regrouping every stream, and re-solves only when some class
//! changed size.

use rustc_hash::FxHashMap;

use crate::memory::{MemSystem, Solution, Stream, Target};

/// Class identifier, stable for the life of the [`StreamClasses`].
pub type ClassId = u32;

/// A multiset of streams, as classes of equal streams with member counts.
///
/// Classes are never dropped: an emptied class keeps its id (a thread that
/// comes back to it rejoins without a lookup miss) and is left out of
/// solves. Their number is bounded by the distinct streams the workload can
/// produce (phases x core kinds x sharing x nodes), not by time.
#[derive(Debug, Default, Clone)]
pub struct StreamClasses {
    index: FxHashMap<[u64; 6], ClassId>,
    streams: Vec<Stream>,
    members: Vec<u32>,
    /// The last class joined: like streams usually arrive in runs (a job's
    /// threads are listed together), which then need no lookup.
    last: Option<(Stream, ClassId)>,
    changed: bool,
    /// Scratch for `solve`: the non-empty classes and their weights.
    live: Vec<ClassId>,
    live_streams: Vec<Stream>,
    live_weight: Vec<f64>,
    /// The solver's working lists, kept from solve to solve.
    scratch: crate::memory::SolveScratch,
}

/// Bit-exact key: equal keys mean streams the solver cannot tell apart.
fn key(s: &Stream) -> [u64; 6] {
    let (target, share) = match s.target {
        Target::Node(k) => (k as u64, 0),
        Target::Interleaved => (u64::MAX, 0),
        Target::Shared { node, share_ppm } => (node as u64, u64::from(share_ppm) + 1),
    };
    [
        s.compute_ns_per_instr.to_bits(),
        s.requests_per_instr.to_bits(),
        s.cpu_share.to_bits(),
        s.home as u64,
        target,
        share,
    ]
}

impl StreamClasses {
    /// Adds one stream; returns its class.
    pub fn join(&mut self, s: &Stream) -> ClassId {
        let c = match self.last {
            Some((prev, c)) if prev == *s => c,
            _ => {
                let next = self.streams.len() as ClassId;
                let c = *self.index.entry(key(s)).or_insert(next);
                if c == next {
                    self.streams.push(*s);
                    self.members.push(0);
                }
                self.last = Some((*s, c));
                c
            }
        };
        self.members[c as usize] += 1;
        self.changed = true;
        c
    }

    /// Removes one member of class `c`.
    ///
    /// # Panics
    /// If `c` has no members: the caller's bookkeeping is broken.
    pub fn leave(&mut self, c: ClassId) {
        let m = &mut self.members[c as usize];
        assert!(*m > 0, "stream class {c} left more often than joined");
        *m -= 1;
        self.changed = true;
    }

    /// Members of class `c`.
    pub fn members(&self, c: ClassId) -> u32 {
        self.members[c as usize]
    }

    /// Whether any class gained or lost a member since the last solve.
    /// Membership can change and change back (a thread leaving and
    /// rejoining its class); that still counts, and costs one solve.
    pub fn is_changed(&self) -> bool {
        self.changed
    }

    /// The contention fixed point over the non-empty classes, each weighted
    /// by its members. `ns_per_instr` of the result is indexed by class id
    /// (NaN for empty classes).
    pub fn solve(&mut self, mem: &MemSystem, warm: Option<&Solution>) -> Solution {
        self.changed = false;
        self.live.clear();
        self.live_streams.clear();
        self.live_weight.clear();
        for (c, &m) in self.members.iter().enumerate() {
            if m > 0 {
                self.live.push(c as ClassId);
                self.live_streams.push(self.streams[c]);
                self.live_weight.push(f64::from(m));
            }
        }
        let mut sol = mem.solve_weighted(&self.live_streams, &self.live_weight, warm, &mut self.scratch);
        let mut per_class = vec![f64::NAN; self.streams.len()];
        for (i, &c) in self.live.iter().enumerate() {
            per_class[c as usize] = sol.ns_per_instr[i];
        }
        sol.ns_per_instr = per_class;
        sol
    }
}

// The solver's entry points group streams into classes, so they live with
// the classes: `memory` holds the system and the weighted fixed point, and
// does not need to know how streams are grouped.
impl MemSystem {
    /// Solves for every stream's speed under contention.
    pub fn solve(&self, streams: &[Stream]) -> Solution {
        self.solve_from(streams, None)
    }

    /// As [`MemSystem::solve`], starting from a previous solution's arrival
    /// rates and waits (the simulator re-solves after small changes; a warm
    /// start needs a few Newton steps instead of a cold search).
    pub fn solve_from(&self, streams: &[Stream], warm: Option<&Solution>) -> Solution {
        // Identical streams wait the same: solve once per class and give
        // every member its class's result.
        let mut classes = StreamClasses::default();
        let class_of: Vec<_> = streams.iter().map(|s| classes.join(s)).collect();
        let mut sol = classes.solve(self, warm);
        sol.ns_per_instr = class_of.iter().map(|&c| sol.ns_per_instr[c as usize]).collect();
        sol
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ModelParams;
    use herd_topo::Machine;

    fn stream(requests_per_instr: f64, home: usize) -> Stream {
        Stream {
            compute_ns_per_instr: 0.4,
            requests_per_instr,
            cpu_share: 1.0,
            home,
            target: Target::Node(home),
        }
    }

    fn mem() -> MemSystem {
        let m = Machine::synthetic("package:2 numa:1 core:4 pu:1").expect("machine");
        ModelParams::default().mem_system(&m)
    }

    #[test]
    fn like_streams_share_a_class_and_leaving_empties_it() {
        let mut c = StreamClasses::default();
        let a = c.join(&stream(0.01, 0));
        let b = c.join(&stream(0.02, 0));
        assert_ne!(a, b);
        assert_eq!(
            c.join(&stream(0.01, 0)),
            a,
            "a repeat of the first, after another"
        );
        assert_eq!(c.members(a), 2);
        c.leave(a);
        c.leave(a);
        assert_eq!(c.members(a), 0);
        assert_eq!(c.join(&stream(0.01, 0)), a, "an emptied class keeps its id");
    }

    #[test]
    fn incremental_classes_solve_as_the_full_regrouping_does() {
        let sys = mem();
        let all: Vec<Stream> = (0..12)
            .map(|i| stream([0.005, 0.02, 0.05][i % 3], i % 2))
            .collect();
        let mut c = StreamClasses::default();
        let mut ids: Vec<ClassId> = all.iter().map(|s| c.join(s)).collect();
        // Move two streams elsewhere and back again: same multiset.
        for &i in &[1usize, 4] {
            c.leave(ids[i]);
            ids[i] = c.join(&stream(0.3, 1));
        }
        for &i in &[1usize, 4] {
            c.leave(ids[i]);
            ids[i] = c.join(&all[i]);
        }
        assert!(c.is_changed());
        let sol = c.solve(&sys, None);
        assert!(!c.is_changed());
        let direct = sys.solve(&all);
        for (i, &id) in ids.iter().enumerate() {
            let rel = (sol.ns_per_instr[id as usize] - direct.ns_per_instr[i]).abs() / direct.ns_per_instr[i];
            assert!(rel < 1e-9, "stream {i}: {rel}");
        }
        let emptied = c.join(&stream(0.3, 1));
        c.leave(emptied);
        assert!(c.solve(&sys, None).ns_per_instr[emptied as usize].is_nan());
    }

    /// The working lists a long-lived set of classes keeps from solve to
    /// solve leave nothing behind: after solves of more streams and of
    /// fewer, each answer is the one a fresh solver gives, to the bit.
    #[test]
    fn kept_working_lists_give_what_fresh_ones_give() {
        let sys = mem();
        let mut c = StreamClasses::default();
        let mut present: Vec<(Stream, ClassId)> = Vec::new();
        let shapes = [
            vec![(0.01, 0), (0.02, 1), (0.3, 0), (0.3, 1), (0.05, 0)],
            vec![(0.2, 1)],
            vec![(0.01, 0), (0.4, 0), (0.4, 1), (0.02, 1)],
            vec![],
            vec![(0.1, 0), (0.1, 0), (0.1, 1)],
        ];
        for (step, shape) in shapes.iter().enumerate() {
            for (_, id) in present.drain(..) {
                c.leave(id);
            }
            present = shape
                .iter()
                .map(|&(r, h)| (stream(r, h), c.join(&stream(r, h))))
                .collect();
            let kept = c.solve(&sys, None);
            let streams: Vec<Stream> = present.iter().map(|(s, _)| *s).collect();
            let fresh = sys.solve(&streams);
            for (i, (_, id)) in present.iter().enumerate() {
                assert_eq!(
                    kept.ns_per_instr[*id as usize].to_bits(),
                    fresh.ns_per_instr[i].to_bits(),
                    "step {step}, stream {i}"
                );
            }
        }
    }

    #[test]
    #[should_panic(expected = "left more often than joined")]
    fn leaving_an_empty_class_is_a_bug() {
        let mut c = StreamClasses::default();
        let a = c.join(&stream(0.01, 0));
        c.leave(a);
        c.leave(a);
    }
}
