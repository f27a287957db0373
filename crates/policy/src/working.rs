//! Which threads work: the ones a placement policy gives a CPU of their
//! own. A program's main thread waiting in join, a pool's helper threads,
//! a shell or `make` waiting for its children would each hold a hardware
//! thread they never use and push the workers onto shared ones (on a real
//! SMT kernel, smt:spn's two workers landed on two cores because the
//! sleeping main thread took the first sibling; a Python pool's workers
//! shared one CPU of two under static:compact behind its helpers).

use crate::{Snapshot, TaskId, TaskState, TaskView};

/// A thread works when it used at least 1/WORKING_SHARE_INV of the
/// period's CPU time: a tenth, well above a sleeper's wake-ups and below a
/// busy thread that shares its CPU with a few others.
const WORKING_SHARE_INV: u64 = 10;

/// A thread that gives its CPU up within this, on average, each time it
/// gets one runs between hand-offs and wake-ups (a pipe's two ends, a
/// request loop), not as a computing thread does: for several
/// milliseconds at a time. stress-ng's switch processes ran 2 us a time
/// (126,000 times in half a second each, here); sysbench's yielding
/// threads 18-42 ms; a thread sharing a CPU with a busy one gets the
/// kernel's slice, 0.75 ms or more.
const SHORT_RUN_NS: u64 = 100_000;

/// Whether `t` ran in short bursts over the period: under [`SHORT_RUN_NS`]
/// on average each time it was put on a CPU (the sensor's count of
/// times; a sensor that does not count them, as the simulator, says no).
/// Such a thread takes no CPU of its own from a placing policy: the
/// kernel's wake-up placement keeps it beside the thread it hands work
/// to, where pinning each to a CPU of its own split two stress-ng switch
/// pairs across the two CPUs (each process put on a CPU 29,000 times a
/// second instead of 250,000; static:compact 5.0x plain Linux's time
/// with the guard off).
pub(crate) fn runs_in_bursts(t: &TaskView) -> bool {
    t.obs
        .timeslices
        .is_some_and(|n| n > 0 && t.obs.cpu_time_ns < n.saturating_mul(SHORT_RUN_NS))
}

/// Whether `t` used a tenth of the snapshot's period: every task does in
/// the first snapshot (no period measured yet) and in a progress-only one
/// (nothing measured in it).
pub(crate) fn worked(snap: &Snapshot, t: &TaskView) -> bool {
    !measured(snap) || t.obs.cpu_time_ns.saturating_mul(WORKING_SHARE_INV) >= snap.period_ns
}

/// Whether `snap` measured a period: not the first (nothing measured
/// yet), nor a progress-only one. Every task works in those.
pub(crate) fn measured(snap: &Snapshot) -> bool {
    !snap.progress_only && snap.period_ns > 0
}

/// Whether `t` wants a CPU: every task does in the first snapshot and in
/// a progress-only one, as [`worked`]; else see [`wants_cpu_over`].
pub(crate) fn wants_cpu(snap: &Snapshot, t: &TaskView) -> bool {
    snap.progress_only || wants_cpu_over(snap.period_ns, t)
}

/// Whether `t`, observed over `period_ns` (0: nothing measured yet, and
/// every task does), wants a CPU: runnable now, or a tenth of the period
/// on a CPU or waiting for one (threads crowded on one CPU wait more than
/// they run: by CPU time alone, eight barrier workers that inherited their
/// main thread's pin would look idle). A sleeping shell or a main thread
/// in join does neither. numa:model places by it; the live world follows
/// memory by it.
pub fn wants_cpu_over(period_ns: u64, t: &TaskView) -> bool {
    period_ns == 0
        || t.state == TaskState::Runnable
        || t.obs.cpu_time_ns.saturating_mul(WORKING_SHARE_INV) >= period_ns
        || t.obs.wait_ns.saturating_mul(WORKING_SHARE_INV) >= period_ns
}

/// Whether `t` asks for a CPU of its own now: runnable at the snapshot,
/// or, over a measured period, a tenth of it on a CPU or waiting for one
/// ([`wants_cpu_over`]). Unlike [`wants_cpu`], a task asleep in the first
/// snapshot does not: a program's main thread waiting for its workers, or
/// a pool's idle helper, is asleep when first seen, and taking it into a
/// share of the fast cores would push a worker onto a slow one (the amp
/// policies ask this before they first place a task).
pub(crate) fn asks_for_cpu(snap: &Snapshot, t: &TaskView) -> bool {
    t.state == TaskState::Runnable || measured(snap) && wants_cpu_over(snap.period_ns, t)
}

/// Tells which threads not yet placed work, from one snapshot to the next.
#[derive(Debug, Default)]
pub(crate) struct Working {
    /// Unplaced tasks that were busy over the last full period, sorted:
    /// pushed in the snapshot's order (sorted already where it lists tasks
    /// by id, sorted after otherwise) and searched, not hashed (a first
    /// sight inserted every task into a hash set: a tenth of
    /// static:scatter's first decision at 1,024 tasks; it is asked only of
    /// tasks still unplaced).
    busy_before: Vec<TaskId>,
    /// The list before that, kept for its allocation.
    spare: Vec<TaskId>,
}

impl Working {
    /// The tasks of `snap` that `placed` does not hold and that work now:
    /// busy over the period where it was measured (and not in short
    /// bursts, [`runs_in_bursts`]), and either runnable now or busy the
    /// period before too. A main thread's first period
    /// includes its start-up before it waits in join: it is then asleep,
    /// and not busy again. A barrier worker that blocks between phases is
    /// busy every period but often asleep at the instant of the snapshot:
    /// on a slow (emulated) machine smt:speed left one unplaced for good
    /// while the state alone decided. Every task works in the first
    /// snapshot (no period measured yet) and in a progress-only one.
    /// Tasks `always` picks come whether they work or not.
    pub(crate) fn unplaced<'a>(
        &mut self,
        snap: &'a Snapshot,
        placed: impl Fn(TaskId) -> bool,
        always: impl Fn(&TaskView) -> bool,
    ) -> Vec<&'a TaskView> {
        self.unplaced_among(snap, snap.tasks.iter().filter(|t| !placed(t.id)), always)
    }

    /// [`Working::unplaced`] where the caller knows which of `snap`'s tasks
    /// are unplaced (`unplaced`, in `snap`'s order): say, those new since a
    /// turn that left none unplaced, without a look-up per task.
    pub(crate) fn unplaced_among<'a>(
        &mut self,
        snap: &'a Snapshot,
        unplaced: impl Iterator<Item = &'a TaskView>,
        always: impl Fn(&TaskView) -> bool,
    ) -> Vec<&'a TaskView> {
        // What the next full period compares with (a progress-only turn
        // measures nothing: the last full one stands), in one pass.
        let measured = measured(snap);
        // Reused, and sized at once: on a first sight every task goes in
        // (grown insert by insert, this pass was a tenth of static:scatter's
        // first decision at 1,024 tasks; sized, 42% fewer instructions).
        let mut busy_now = std::mem::take(&mut self.spare);
        busy_now.clear();
        if measured {
            busy_now.reserve(snap.tasks.len());
        }
        let mut working = Vec::new();
        for t in unplaced {
            let busy = worked(snap, t) && !runs_in_bursts(t);
            if always(t)
                || busy && (t.state == TaskState::Runnable || self.busy_before.binary_search(&t.id).is_ok())
            {
                working.push(t);
            }
            if measured && busy {
                busy_now.push(t.id);
            }
        }
        if !busy_now.is_sorted() {
            busy_now.sort_unstable();
        }
        if measured {
            self.spare = std::mem::replace(&mut self.busy_before, busy_now);
        } else {
            self.spare = busy_now;
        }
        working
    }

    /// What [`Working::unplaced`] records when every task of `snap` is
    /// placed (it would find none unplaced): for a policy that knows so
    /// without passing over them.
    pub(crate) fn none_unplaced(&mut self, snap: &Snapshot) {
        if measured(snap) {
            self.busy_before.clear();
        }
    }
}
