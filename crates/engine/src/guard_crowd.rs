//! The guard's look for a placement that keeps CPUs idle while the
//! workload's threads wait for one (see `guard`): the kernel, balancing
//! within milliseconds, never keeps that state, so the guard backs such a
//! policy off without a probe.

use herd_policy::{Snapshot, TaskId, TaskState, TaskView};
use herd_topo::CpuSet;
use rustc_hash::FxHashMap as HashMap;

/// Whether each task was busy (runnable, or a tenth of the period on a
/// CPU) the last period it was not paused: what a paused one would use.
/// Beside the last full snapshot's tasks, in their order (a pass beside
/// the tasks each turn, not a map insert per task); with the period of
/// the snapshot they were last updated from, if any.
/// The third field is the snapshot's [`Snapshot::tasks_epoch`] the flags
/// were last lined up with (0: none vouched). The fourth is what
/// [`crowded`] sums over the tasks of the snapshot [`WasBusy::update`]
/// last took in, made in the update's pass (their own pass over every
/// task, twice, was a third of the guard's look for crowding); `None`
/// when that snapshot had no pass or the sums were not asked for.
#[derive(Debug, Default)]
pub(crate) struct WasBusy(Vec<(TaskId, bool)>, Option<u64>, u64, Option<Waits>);

/// Over one snapshot's tasks: how long they waited for a CPU (a paused one
/// that was busy when it last ran waits the whole period) and the CPU time
/// they used.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct Waits {
    waited_ns: u64,
    used_ns: u64,
}

impl WasBusy {
    /// Each of `snap`'s tasks' flag, in its order; empty when the flags
    /// are not of this snapshot's tasks.
    pub(crate) fn of(&self, snap: &Snapshot) -> Vec<bool> {
        if self.aligned(snap) {
            self.0.iter().map(|w| w.1).collect()
        } else {
            Vec::new()
        }
    }

    /// Whether the flags are of `snap`'s tasks, in its order: at once when
    /// the sensor names the same list, else id by id.
    fn aligned(&self, snap: &Snapshot) -> bool {
        (snap.tasks_epoch != 0 && snap.tasks_epoch == self.2)
            || self.0.len() == snap.tasks.len() && self.0.iter().zip(&snap.tasks).all(|(w, t)| w.0 == t.id)
    }

    /// The flags of `snap`'s tasks, in its order: each task's own, false
    /// for one not seen before. Tasks most often keep their order, with
    /// some gone (a job that left) and some new, whose ids are above every
    /// one seen before (the simulator's ids only grow; a live thread's id
    /// most often does): so each task is looked for ahead of the last one
    /// found, within a budget of steps, and a map of the old flags is
    /// built only when that fails (tasks in another order). Building it at
    /// every change was two thirds of this update's cost in a simulated
    /// hour whose jobs restart.
    fn lined_up(&self, snap: &Snapshot) -> Vec<(TaskId, bool)> {
        let (old, tasks) = (&self.0, &snap.tasks);
        // The greatest id seen, found when first needed.
        let mut newest: Option<Option<TaskId>> = None;
        let (mut next, mut steps_left) = (0, 2 * old.len());
        let mut found_all = true;
        let mut out: Vec<(TaskId, bool)> = Vec::with_capacity(tasks.len());
        let mut i = 0;
        loop {
            // Tasks listed one after another as the old list has them (most
            // of a changed list): their flags copied as they were.
            let run = old[next..]
                .iter()
                .zip(&tasks[i..])
                .take_while(|(w, t)| w.0 == t.id)
                .count();
            out.extend_from_slice(&old[next..next + run]);
            (i, next) = (i + run, next + run);
            let Some(t) = tasks.get(i) else {
                break;
            };
            i += 1;
            let newest = *newest.get_or_insert_with(|| old.iter().map(|w| w.0).max());
            let busy = if newest.is_none_or(|n| t.id > n) {
                false
            } else {
                let mut k = next;
                while k < old.len() && old[k].0 != t.id && steps_left > 0 {
                    k += 1;
                    steps_left -= 1;
                }
                match old.get(k) {
                    Some(&(id, busy)) if id == t.id => {
                        next = k + 1;
                        busy
                    }
                    _ => {
                        found_all = false;
                        false
                    }
                }
            };
            out.push((t.id, busy));
        }
        if !found_all {
            let by_id: HashMap<TaskId, bool> = old.iter().copied().collect();
            for w in &mut out {
                w.1 = by_id.get(&w.0).copied().unwrap_or(false);
            }
        }
        out
    }

    /// Takes in a full snapshot `elapsed_ns` after the last, and with
    /// `waits` makes in the same pass the sums [`crowded`] takes (only
    /// then: a policy judged by its probes alone, pack:palm at its
    /// 125 µs periods, would pay for sums it never reads).
    /// The same snapshot again (one that repeats the last) with the same
    /// period leaves the flags as they are, and the sums: nothing is redone,
    /// unless sums are asked for that the last turn did not make (the pass
    /// again gives the same flags).
    pub(crate) fn update(&mut self, snap: &Snapshot, elapsed_ns: u64, waits: bool) {
        let taken = self.1.replace(elapsed_ns);
        if snap.progress_only || elapsed_ns == 0 {
            self.1 = None;
            self.3 = None;
            return;
        }
        if snap.repeats_last && taken == Some(elapsed_ns) && (!waits || self.3.is_some()) {
            return;
        }
        if !self.aligned(snap) {
            self.0 = self.lined_up(snap);
        }
        self.2 = snap.tasks_epoch;
        let busy = |t: &TaskView| {
            t.state == TaskState::Runnable || t.obs.cpu_time_ns.saturating_mul(10) >= elapsed_ns
        };
        if !waits {
            for (w, t) in self.0.iter_mut().zip(&snap.tasks) {
                if t.state != TaskState::Paused {
                    w.1 = busy(t);
                }
            }
            self.3 = None;
            return;
        }
        // The flags are lined up with the tasks: `crowded`'s look-up of a
        // paused task's own flag is this pass's flag, which a paused task
        // leaves as it was.
        let (mut waited_ns, mut used_ns) = (0u64, 0u64);
        for (w, t) in self.0.iter_mut().zip(&snap.tasks) {
            if t.state != TaskState::Paused {
                w.1 = busy(t);
                waited_ns += t.obs.wait_ns;
            } else if w.1 && w.0 == t.id {
                waited_ns += elapsed_ns;
            }
            used_ns += t.obs.cpu_time_ns;
        }
        self.3 = Some(Waits { waited_ns, used_ns });
    }
}

/// Whether, over the last `elapsed_ns`, the workload's threads waited for
/// a CPU (schedstat's wait; a paused thread, below) for more than a quarter
/// of the period while the CPUs it may use (`cpus`) stood idle for more
/// than half a CPU's period. The kernel balances such a state away within
/// milliseconds; a placement that keeps it is losing capacity, though its
/// total progress may have looked as good as the kernel's at the last
/// probe (when the mix of jobs was another). Idle is measured where the
/// sensor can (live, `/proc/stat`), so other programs' use of a CPU is not
/// taken for idle.
///
/// A task the policy paused waits for a CPU as surely as one the kernel
/// keeps waiting, if it was busy when it last ran (`was_busy`, beside
/// `snap.tasks` in its order): a
/// co-scheduler that pauses a program while CPUs idle has misjudged what
/// the running ones use (stress-ng's switch stressor: two copies, each a
/// pair of processes handing a pipe back and forth, took turns on the two
/// CPUs here at 1.7x plain Linux's time, each copy alone using 0.7-0.8 of
/// the two CPUs).
///
/// `was_busy` has taken in `snap` last ([`WasBusy::update`], asked for
/// the sums); without them (a progress-only snapshot, no time elapsed)
/// nothing is known to be crowded.
pub(crate) fn crowded(snap: &Snapshot, cpus: &CpuSet, elapsed_ns: u64, was_busy: &WasBusy) -> bool {
    let Some(Waits { waited_ns, used_ns }) = was_busy.3 else {
        return false;
    };
    // Measured where the sensor reads it (live: other programs' use of a
    // CPU is not idle); else the CPUs' time less the workload's.
    let idle = match &snap.system.idle_ns_by_cpu {
        Some(by_cpu) => cpus.iter().filter_map(|c| by_cpu.get(c as usize)).sum(),
        None => (cpus.len() as u64)
            .saturating_mul(elapsed_ns)
            .saturating_sub(used_ns),
    };
    waited_ns > elapsed_ns / 4 && idle > elapsed_ns / 2
}

#[cfg(test)]
mod tests {
    use super::*;
    use herd_policy::Obs;

    /// [`Waits`] over `snap`'s tasks in a pass of their own, each paused
    /// one's flag looked up in `was_busy` by its place and id: what an
    /// update's sums are checked against.
    fn waits(snap: &Snapshot, elapsed_ns: u64, was_busy: &WasBusy) -> Waits {
        let was_busy = &was_busy.0;
        let known = was_busy.len() == snap.tasks.len();
        let mut w = Waits {
            waited_ns: 0,
            used_ns: 0,
        };
        for (i, t) in snap.tasks.iter().enumerate() {
            if t.state != TaskState::Paused {
                w.waited_ns += t.obs.wait_ns;
            } else if known && was_busy[i] == (t.id, true) {
                w.waited_ns += elapsed_ns;
            }
            w.used_ns += t.obs.cpu_time_ns;
        }
        w
    }

    fn task(id: u64, state: TaskState, cpu_ns: u64) -> TaskView {
        TaskView {
            id,
            job: id as u32,
            rank: 0,
            state,
            cpu: Some(0),
            obs: Obs {
                cpu_time_ns: cpu_ns,
                ..Obs::default()
            },
            heartbeats: None,
        }
    }

    /// Lining the flags up with a new list of tasks keeps each task's own
    /// flag and gives new ones false, however the list changed: the same
    /// flags as a look-up of every task in a map of the old ones.
    #[test]
    fn flags_follow_their_tasks_into_a_changed_list() {
        let mut next = crate::test_rng::xorshift(0x9E37_79B9_7F4A_7C15u64);
        for _ in 0..500 {
            let old: Vec<(TaskId, bool)> = (0..next() % 12)
                .map(|i| (i * 3 + next() % 3, next() % 2 == 0))
                .collect();
            let mut ids: Vec<TaskId> = old.iter().map(|w| w.0).filter(|_| next() % 4 != 0).collect();
            for _ in 0..next() % 4 {
                // An id seen before or not, above every old one or not.
                let at = (next() as usize) % (ids.len() + 1);
                ids.insert(at, next() % 40);
            }
            if next() % 3 == 0 {
                ids.reverse();
            }
            ids.dedup();
            let mut unique = std::collections::HashSet::new();
            ids.retain(|id| unique.insert(*id));
            let snap = Snapshot {
                tasks: ids.iter().map(|&id| task(id, TaskState::Runnable, 0)).collect(),
                ..Snapshot::default()
            };
            let map: HashMap<TaskId, bool> = old.iter().copied().collect();
            let want: Vec<(TaskId, bool)> = ids
                .iter()
                .map(|&id| (id, map.get(&id).copied().unwrap_or(false)))
                .collect();
            assert_eq!(
                WasBusy(old.clone(), None, 0, None).lined_up(&snap),
                want,
                "old {old:?}"
            );
        }
    }

    /// The sums an update makes in its pass are those a pass of their own
    /// makes over the same snapshot with the updated flags, through
    /// changed lists, pauses, repeats and progress-only snapshots.
    #[test]
    fn an_updates_sums_are_a_pass_of_their_own() {
        let mut next = crate::test_rng::xorshift(0x2545_F491_4F6C_DD1Du64);
        let mut was_busy = WasBusy::default();
        let mut last: Option<(Snapshot, u64)> = None;
        let mut checked = 0;
        for _ in 0..2_000 {
            let (snap, elapsed) = match last.take() {
                Some((mut s, e)) if next() % 3 == 0 => {
                    // Most often after the same time; a paused task's
                    // wait is the time since.
                    s.repeats_last = true;
                    (s, if next() % 4 == 0 { next() % 4 * 50 } else { e })
                }
                _ => {
                    let states = [TaskState::Runnable, TaskState::Blocked, TaskState::Paused];
                    let mut tasks: Vec<TaskView> = (0..next() % 8)
                        .map(|i| {
                            let mut t = task(i * 2 + next() % 2, states[(next() % 3) as usize], next() % 100);
                            t.obs.wait_ns = next() % 100;
                            t
                        })
                        .collect();
                    tasks.dedup_by_key(|t| t.id);
                    let snap = Snapshot {
                        tasks,
                        progress_only: next() % 10 == 0,
                        ..Snapshot::default()
                    };
                    (snap, next() % 4 * 50)
                }
            };
            // Sums asked for most turns, and then always made (a repeat
            // of a turn that did not make them makes them); without,
            // none are made, though a repeat may keep the last turn's.
            let want = next() % 4 != 0;
            was_busy.update(&snap, elapsed, want);
            if !snap.progress_only && elapsed > 0 {
                let own = waits(&snap, elapsed, &was_busy);
                match was_busy.3 {
                    Some(sums) => {
                        assert_eq!(sums, own, "{snap:?}");
                        checked += 1;
                    }
                    None => assert!(!want, "asked for, not made: {snap:?}"),
                }
            } else {
                assert_eq!(was_busy.3, None, "{snap:?}");
            }
            last = Some((snap, elapsed));
        }
        assert!(checked > 600, "{checked} checked");
    }

    /// A program paused while the CPUs it could use stood idle is crowding
    /// if it was busy when it last ran; one that slept then is not.
    #[test]
    fn a_busy_program_paused_beside_idle_cpus_is_crowding() {
        let period = 100_000_000;
        // Two CPUs; the running program uses 0.8 of one, the other waits
        // paused: 1.2 CPUs' periods idle.
        let snap = Snapshot {
            now_ns: period,
            tasks: vec![
                task(1, TaskState::Blocked, 80_000_000),
                task(2, TaskState::Paused, 0),
            ],
            ..Snapshot::default()
        };
        let cpus: CpuSet = [0, 1].into_iter().collect();
        let look = |was_busy: &mut WasBusy, snap: &Snapshot| {
            was_busy.update(snap, period, true);
            crowded(snap, &cpus, period, was_busy)
        };
        assert!(!look(&mut WasBusy::default(), &snap), "nothing known of task 2");
        let mut was_busy = WasBusy(vec![(1, false), (2, false)], None, 0, None);
        assert!(!look(&mut was_busy, &snap), "task 2 slept when it last ran");
        was_busy.0[1] = (2, true);
        assert!(look(&mut was_busy, &snap));
        // The same snapshot again: the sums of the turn before.
        let mut again = snap.clone();
        again.repeats_last = true;
        assert!(look(&mut was_busy, &again));
        // The CPUs full: no idle to lose.
        let mut full = snap.clone();
        full.tasks[0].obs.cpu_time_ns = 2 * period;
        assert!(!look(&mut was_busy, &full));
        // Without sums (not asked for) nothing is known to be crowded.
        was_busy.update(&snap, period, false);
        assert!(!crowded(&snap, &cpus, period, &was_busy));
    }
}
