//! Which threads a turn may leave unread (issue 28). A thread's `stat` and
//! counters are most of a turn's cost; a thread that neither ran nor waited
//! for a CPU since it was last seen asleep (its schedstat unchanged) is
//! where it was, in the state it was. Except one woken and not yet run:
//! the kernel adds its wait to schedstat only when it gets a CPU, so read
//! unread it would look asleep, and the policies would count it idle. Such
//! a thread waits long only where its CPUs are all taken, so its sample
//! is kept only
//!
//! - when the machine has no more runnable threads than CPUs (else all are
//!   read), and
//! - when one of the CPUs it may use was idle for half the period or more
//!   (the kernel would have run it there); otherwise it is read every
//!   [`REFRESH_TURNS`] turns all the same, so a thread kept waiting behind
//!   others on CPUs it is confined to is seen within that many turns.

use herd_topo::CpuSet;

/// A thread whose CPUs were all busy is read in full at least once in this
/// many turns, even when its schedstat says it slept throughout.
pub(super) const REFRESH_TURNS: u64 = 8;

/// This turn's rule.
pub(super) struct KeepRule {
    /// No more runnable threads than CPUs on the machine now.
    quiet: bool,
    /// CPUs idle for half the period or more.
    idle_cpus: CpuSet,
}

impl KeepRule {
    /// From `/proc/stat`'s runnable threads and online CPUs now
    /// ([`crate::procfs::parse_runnable`]), and each CPU's idle time over the
    /// period (`period_ns` long) by CPU number.
    pub(super) fn new(runnable: Option<(u32, u32)>, idle_ns_by_cpu: Option<&[u64]>, period_ns: u64) -> Self {
        let quiet = runnable.is_some_and(|(runnable, cpus)| runnable <= cpus);
        let mut idle_cpus = CpuSet::new();
        for (cpu, &idle_ns) in idle_ns_by_cpu.unwrap_or_default().iter().enumerate() {
            if idle_ns.saturating_mul(2) >= period_ns {
                idle_cpus.insert(cpu as u32);
            }
        }
        KeepRule { quiet, idle_cpus }
    }

    /// Whether thread `tid`, last seen asleep and allowed `allowed` (every
    /// CPU: `None`), may keep its sample at turn `turn` if its schedstat
    /// has not moved.
    pub(super) fn keeps(&self, turn: u64, tid: i32, allowed: Option<&CpuSet>) -> bool {
        if !self.quiet {
            return false;
        }
        let could_run = !self.idle_cpus.is_empty() && allowed.is_none_or(|a| a.intersects(&self.idle_cpus));
        could_run || (turn + tid as u64) % REFRESH_TURNS != 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_busy_machine_keeps_nothing() {
        let rule = KeepRule::new(Some((3, 2)), Some(&[1_000, 1_000]), 1_000);
        assert!((0..REFRESH_TURNS).all(|turn| !rule.keeps(turn, 7, None)));
        let unknown = KeepRule::new(None, None, 1_000);
        assert!(!unknown.keeps(1, 7, None));
    }

    #[test]
    fn a_thread_with_an_idle_cpu_keeps_its_sample_and_one_without_is_read_in_turn() {
        // CPU 0 idle all of a 1,000 ns period; CPU 1 idle 50 ns: busy.
        let rule = KeepRule::new(Some((2, 2)), Some(&[1_000, 50]), 1_000);
        let on = |cpu| CpuSet::single(cpu);
        assert!((0..2 * REFRESH_TURNS).all(|turn| rule.keeps(turn, 7, Some(&on(0)))));
        assert!((0..2 * REFRESH_TURNS).all(|turn| rule.keeps(turn, 7, None)));
        let read: Vec<u64> = (0..2 * REFRESH_TURNS)
            .filter(|&t| !rule.keeps(t, 7, Some(&on(1))))
            .collect();
        assert_eq!(read.len(), 2, "read once every {REFRESH_TURNS} turns: {read:?}");
        // Without a last turn to compare with, every thread takes turns.
        let first = KeepRule::new(Some((2, 2)), None, 1_000);
        assert!(!first.keeps(1, 7, None));
    }
}
