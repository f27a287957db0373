//! Which cores are busy, and how busy, for the power model, the SMT
//! shares and the count of cores used: kept up to date core by core from
//! the CPUs whose queues changed (`Rates::touched_cpus`).
//!
//! Why: every recompute counted every core's busy CPUs afresh. At 256
//! CPUs that pass, reading each CPU's queue and each core's record, was
//! most of a recompute's own wall time in a simulated `linux` hour, and
//! a change touches a CPU or two.

use herd_topo::{Core, Machine};

/// Busy cores by kind and by package, and what the power model and the
/// accounting read of them.
#[derive(Debug)]
pub(super) struct BusyCores {
    /// Busy CPUs (those with a non-empty queue) of each core.
    busy: Vec<usize>,
    /// Busy cores of each kind and of each package.
    pub(super) by_kind: Vec<usize>,
    by_package: Vec<usize>,
    /// Busy CPUs beyond the first on each busy core.
    pub(super) extra: usize,
    /// Busy CPUs in all.
    pub(super) cpus: usize,
    /// Cores that became busy since time last passed: each counts as used
    /// once time passes while it is still busy.
    newly_busy: Vec<usize>,
}

impl BusyCores {
    /// Every core idle.
    pub(super) fn new(m: &Machine) -> Self {
        BusyCores {
            busy: vec![0; m.cores().len()],
            by_kind: vec![0; m.kinds().len()],
            by_package: vec![0; m.packages().len()],
            extra: 0,
            cpus: 0,
            newly_busy: Vec::new(),
        }
    }

    /// Core `c` (the machine's `core`) now has `busy` busy CPUs.
    pub(super) fn set(&mut self, c: usize, core: &Core, busy: usize) {
        let was = std::mem::replace(&mut self.busy[c], busy);
        if was == busy {
            return;
        }
        self.cpus = self.cpus + busy - was;
        self.extra = self.extra + busy.saturating_sub(1) - was.saturating_sub(1);
        match (was > 0, busy > 0) {
            (false, true) => {
                self.by_kind[core.kind] += 1;
                self.by_package[core.package] += 1;
                self.newly_busy.push(c);
            }
            (true, false) => {
                self.by_kind[core.kind] -= 1;
                self.by_package[core.package] -= 1;
            }
            _ => {}
        }
    }

    /// Packages with a busy core.
    pub(super) fn packages(&self) -> usize {
        self.by_package.iter().filter(|&&n| n > 0).count()
    }

    /// Marks in `used` each core that became busy and still is, now that
    /// time passes; returns how many were not marked before. A core busy
    /// only for an instant (a placement undone at once) is not marked.
    pub(super) fn mark_used(&mut self, used: &mut [bool]) -> usize {
        let mut added = 0;
        for c in self.newly_busy.drain(..) {
            if self.busy[c] > 0 && !std::mem::replace(&mut used[c], true) {
                added += 1;
            }
        }
        added
    }

    /// Each core's busy CPUs (for a check against a count afresh).
    #[cfg(debug_assertions)]
    pub(super) fn of_core(&self, c: usize) -> usize {
        self.busy[c]
    }
}

impl super::World<'_> {
    /// In debug builds: the counts kept are what counting every core
    /// afresh gives, and so are the SMT shares in `smt`. Every change to a
    /// queue must name its CPU in `Rates::touched_cpus`; this checks that
    /// none was missed.
    #[cfg(debug_assertions)]
    pub(super) fn check_busy(&self, smt: &[f64]) {
        let kept = &self.acct.busy;
        let mut fresh = BusyCores::new(self.machine);
        for (c, cpus) in self.kernel.core_cpus.iter().enumerate() {
            let b = cpus
                .iter()
                .filter(|&&p| !self.kernel.queues[p].is_empty())
                .count();
            fresh.set(c, &self.machine.cores()[c], b);
            assert_eq!(
                kept.of_core(c),
                b,
                "core {c}'s queues changed and it was not counted again"
            );
            for &p in cpus {
                assert_eq!(smt[p], self.rates.smt_share_by_busy[b], "CPU {p}'s SMT share");
            }
        }
        let sums = |b: &BusyCores| (b.cpus, b.extra, b.by_kind.clone(), b.packages());
        assert_eq!(sums(kept), sums(&fresh), "the busy cores' sums");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The sums follow each core's changes, and a core counts as used
    /// once time passes while it is busy: not when it was busy only for
    /// an instant, and not twice.
    #[test]
    fn busy_cores_sum_their_changes_and_count_used_once() {
        let m = Machine::synthetic("package:2 core:2 pu:2").unwrap();
        let cores = m.cores();
        let mut busy = BusyCores::new(&m);
        let mut used = vec![false; cores.len()];
        busy.set(0, &cores[0], 2);
        busy.set(3, &cores[3], 1);
        assert_eq!((busy.cpus, busy.extra, busy.packages()), (3, 1, 2));
        // Core 1 busy for an instant only: undone before time passes.
        busy.set(1, &cores[1], 1);
        busy.set(1, &cores[1], 0);
        assert_eq!(busy.mark_used(&mut used), 2);
        assert_eq!(used, [true, false, false, true]);
        // Still busy when time passes again: not counted twice.
        busy.set(0, &cores[0], 1);
        assert_eq!(busy.mark_used(&mut used), 0);
        busy.set(3, &cores[3], 0);
        assert_eq!((busy.cpus, busy.extra, busy.packages()), (1, 0, 1));
        assert_eq!(busy.by_kind, [1]);
    }
}
