//! What a policy sees: a read-only view of the world at one decision.

use std::collections::BTreeMap;

use herd_topo::Machine;
use serde::{Deserialize, Serialize};

/// A task (thread) identifier, stable for the task's life: the OS thread id
/// on a real machine, a simulator-assigned id in simulation.
pub type TaskId = u64;
/// A job (program) identifier, stable for the job's life.
pub type JobId = u32;

/// Where a present task stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum TaskState {
    /// On a CPU, or waiting in a run queue for one.
    Runnable,
    /// Sleeping: blocked on I/O, a lock, a blocking barrier.
    Blocked,
    /// Stopped by herd, or being stopped: a stop signal sent and still
    /// pending, a freeze under way (the task takes either before it runs
    /// again).
    Paused,
}

/// What the sensor saw of a task during the last period. A signal the
/// machine cannot provide is `None`, never zero.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Obs {
    /// CPU time consumed.
    pub cpu_time_ns: u64,
    /// Time spent runnable but waiting for a CPU (schedstat).
    pub wait_ns: u64,
    /// Times it was put on a CPU (schedstat), where the sensor counts
    /// them: with `wait_ns`, how long each wait was.
    #[serde(default)]
    pub timeslices: Option<u64>,
    /// Retired instructions.
    pub instructions: Option<u64>,
    /// Core cycles.
    pub cycles: Option<u64>,
    /// Last-level-cache references.
    pub llc_refs: Option<u64>,
    /// Last-level-cache misses.
    pub llc_misses: Option<u64>,
    /// Bytes moved to and from memory.
    pub mem_bytes: Option<u64>,
    /// Moves between CPUs.
    pub migrations: u32,
    /// Instruction-pointer samples per hashed code region (S1's
    /// basic-block vector), where the kernel lets herd sample.
    #[serde(default)]
    pub code_samples: Option<[u32; herd_profile::CODE_BUCKETS]>,
}

impl Obs {
    /// Instructions per cycle, when both counters exist and cycles > 0.
    pub fn ipc(&self) -> Option<f64> {
        match (self.instructions, self.cycles) {
            (Some(i), Some(c)) if c > 0 => Some(i as f64 / c as f64),
            _ => None,
        }
    }
    /// LLC misses / references, when both exist and references > 0.
    pub fn llc_miss_rate(&self) -> Option<f64> {
        match (self.llc_misses, self.llc_refs) {
            (Some(m), Some(r)) if r > 0 => Some(m as f64 / r as f64),
            _ => None,
        }
    }
}

/// One task as the policy sees it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TaskView {
    /// The task.
    pub id: TaskId,
    /// Its job.
    pub job: JobId,
    /// Its position among the job's threads (0 = main thread).
    pub rank: u32,
    /// Where it stands now.
    pub state: TaskState,
    /// The CPU it last ran on.
    pub cpu: Option<u32>,
    /// The last period's observations.
    pub obs: Obs,
    /// Heartbeats since the task started, for programs that report them.
    pub heartbeats: Option<u64>,
}

/// How memory-hungry a program says it is, for machines without counters.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Level {
    /// Little.
    Low,
    /// Some.
    Medium,
    /// A lot.
    High,
}

/// One job as the policy sees it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct JobView {
    /// The job.
    pub id: JobId,
    /// Its name in the workload.
    pub name: String,
    /// The profile key: executable and argument signature.
    pub program: String,
    /// When it arrived.
    pub arrival_ns: u64,
    /// The user's memory-intensity hint, if any.
    pub memory_hint: Option<Level>,
    /// Where its memory is: kB per NUMA node by OS node number, as
    /// `/proc/PID/numa_maps` counts it (refreshed about once a second on
    /// machines with several nodes), or as the simulator places it.
    #[serde(default)]
    pub memory_kb: Option<Vec<(u32, u64)>>,
    /// The thread count the user declared (`herd run --threads`,
    /// `OMP_NUM_THREADS`, a batch file's `threads`): a live program is
    /// first seen with one thread and starts its workers later, so a policy
    /// that sizes a layout at first sight sizes it from this.
    #[serde(default)]
    pub threads_declared: Option<u32>,
}

impl JobView {
    /// The NUMA node (OS index) holding more than half of the job's memory,
    /// where its memory placement is known and there is such a node.
    pub fn home_node(&self) -> Option<u32> {
        let kb = self.memory_kb.as_ref()?;
        let total: u64 = kb.iter().map(|x| x.1).sum();
        let &(node, most) = kb.iter().max_by_key(|x| x.1)?;
        (total > 0 && most * 2 > total).then_some(node)
    }
}

/// System-wide observations over the last period.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct SystemObs {
    /// Memory traffic of the whole machine, when it can be measured.
    pub mem_bytes: Option<u64>,
    /// Energy used, when it can be measured.
    pub energy_j: Option<f64>,
    /// Each CPU's idle time (by OS index), where the sensor reads it
    /// (`/proc/stat` live, in clock ticks of 10 ms on most kernels): what
    /// the CPUs did not run, the workload's or anyone's. `None`: only the
    /// workload's own CPU time is known (the simulator, where nothing else
    /// runs).
    #[serde(default)]
    pub idle_ns_by_cpu: Option<Vec<u64>>,
}

/// Everything the sensor reports at one decision.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Snapshot {
    /// The time of the snapshot.
    pub now_ns: u64,
    /// Length of the period the observations cover.
    pub period_ns: u64,
    /// Present tasks (arrived, not exited), in a stable order.
    pub tasks: Vec<TaskView>,
    /// Present jobs.
    pub jobs: Vec<JobView>,
    /// Whole-machine observations.
    pub system: SystemObs,
    /// The core budget an outside controller sets while the run goes on
    /// (`herd run --cores-from`, a scenario's consolidation manager): how
    /// many cores the jobs may use. Packing policies follow it instead of
    /// their fixed `cores=`; `None`: no such controller.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub budget_cores: Option<u32>,
    /// Only the thread set and heartbeats are fresh (a cheap turn, for a
    /// policy that decides from progress alone: [`crate::Policy::progress_suffices`]).
    /// Its `period_ns` and each task's `obs` are zero: what they stand for
    /// accrues to the next full snapshot, whose `period_ns` covers the time
    /// since the last full one; `state` and `cpu` are as last seen.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub progress_only: bool,
    /// Whether a plan's [`crate::Lane`]s take effect: always in the
    /// simulator; live only when herd's loop runs above them
    /// (`herd run --realtime`). A policy that would lean on lanes on its
    /// own initiative does so only when they do.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub lanes_apply: bool,
    /// The sensor vouches that `tasks` (each task's state, CPU and
    /// observations, in the same order), `jobs` and `period_ns` are
    /// exactly those of the last snapshot it returned; only the time and
    /// the machine-wide readings moved. The simulator says so when nothing
    /// changed over a period (three turns in four at a thousand tasks);
    /// live, never. Whoever read the last snapshot may reuse what it
    /// derived from it instead of passing over every task again.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub repeats_last: bool,
    /// A name for this snapshot's list of tasks (their ids and jobs, in
    /// order): the sensor gives a new one whenever the list may have
    /// changed, so two snapshots with the same non-zero value list the
    /// same tasks, however many snapshots lie between them. 0 vouches for nothing (live, and a
    /// snapshot read back from a file: not serialised). Lets a policy that
    /// acts when tasks come or go see that none did without comparing a
    /// thousand ids every period.
    #[serde(skip)]
    pub tasks_epoch: u64,
}

impl Snapshot {
    /// Whether this snapshot repeats the one taken at `then_ns`: the sensor
    /// vouches that it repeats its last ([`Snapshot::repeats_last`]), and
    /// that last was taken one period before. What was derived from the
    /// snapshot at `then_ns` alone holds for this one.
    pub fn repeats(&self, then_ns: u64) -> bool {
        self.repeats_last && then_ns == self.now_ns.wrapping_sub(self.period_ns)
    }
}

/// What the profile store knows about a program before it runs.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Estimate {
    /// Run time alone on this machine.
    pub solo_time_s: Option<f64>,
    /// Memory bandwidth alone.
    pub bw_gbps: Option<f64>,
    /// Whole-run LLC miss rate.
    pub llc_miss_rate: Option<f64>,
    /// Amdahl serial fraction.
    pub serial_fraction: Option<f64>,
}

/// Profile estimates by program key.
pub type Estimates = BTreeMap<String, Estimate>;

/// What the loop has learned of one job's program, from earlier runs (the
/// profile store) and from this run's slices so far (S1).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Learned {
    /// The phase of the job's last slice, when it could be told.
    pub phase: Option<u16>,
    /// Predicted bus transactions (cache lines) per µs of CPU time in the
    /// next slice, running alone: the predicted phase's solo estimate.
    pub predicted_btr: Option<f64>,
    /// Transactions per µs of CPU time in the last slice, as measured.
    pub last_btr: Option<f64>,
    /// Share of the last completed run's slices whose phase had a valid
    /// (solo) estimate; 0 before the first run.
    pub coverage: f64,
    /// Completed runs the profile learned from.
    pub runs: u32,
    /// Estimated run time alone.
    pub solo_time_s: Option<f64>,
    /// Memory transactions (cache lines) per run.
    pub mem_requests: Option<f64>,
    /// Memory transactions this run has made so far (0 where the sensor
    /// counts no traffic).
    #[serde(default)]
    pub requests_done: f64,
    /// Heartbeats per thread between barriers, as an earlier run found
    /// them ([`crate::Finding::BarrierBeats`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub barrier_beats: Option<u64>,
}

/// What the loop knows of the present jobs' programs.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Knowledge {
    /// Per present job; a job not here has nothing learned.
    pub jobs: BTreeMap<JobId, Learned>,
    /// The machine's peak memory bandwidth, in transactions per µs, when
    /// known (`herd calibrate`, or the simulator's model).
    pub peak_btr: Option<f64>,
    /// Whether the sensor counts instructions and memory traffic; without
    /// them nothing can be learned and policies fall back to hints.
    pub counters: bool,
}

/// The read-only view a policy decides from.
#[derive(Debug, Clone, Copy)]
pub struct View<'a> {
    /// The machine.
    pub machine: &'a Machine,
    /// Tasks, jobs and observations.
    pub snapshot: &'a Snapshot,
    /// Profile estimates.
    pub estimates: &'a Estimates,
    /// What the loop has learned (empty when learning is off).
    pub learned: &'a Knowledge,
    /// Exact solo profiles, which only the simulator has, and only for a
    /// policy that asks ([`crate::Policy::wants_oracle`]): S1's upper bound.
    pub oracle: Option<&'a Knowledge>,
    /// The run's seed; with `decision`, the only source of randomness.
    pub seed: u64,
    /// How many decisions came before this one.
    pub decision: u64,
}

impl View<'_> {
    /// The current time.
    pub fn now_ns(&self) -> u64 {
        self.snapshot.now_ns
    }
    /// A random generator for this decision: the same (seed, decision) gives
    /// the same numbers, in simulation and live.
    pub fn rng(&self) -> Rng {
        Rng::new(self.seed ^ self.decision.wrapping_mul(0x9E37_79B9_7F4A_7C15))
    }
}

/// SplitMix64: tiny, fast, and fully determined by its seed, which is all a
/// policy needs; a cryptographic or crate-provided generator buys nothing.
#[derive(Debug, Clone)]
pub struct Rng(u64);

impl Rng {
    /// A generator seeded with `seed`.
    pub fn new(seed: u64) -> Self {
        Rng(seed)
    }
    /// The next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
    /// A uniform number in [0, 1).
    pub fn next_f64(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64
    }
    /// A uniform integer in [0, n); `n` must be positive.
    pub fn below(&mut self, n: u64) -> u64 {
        assert!(n > 0, "Rng::below(0)");
        self.next_u64() % n
    }
}

/// The tasks of the last snapshot a policy went through, in order. A
/// snapshot with the same tasks has none new and none gone, so a policy
/// that acts on change has nothing to do (most periods; at a thousand
/// tasks going through them was a policy's whole cost).
#[derive(Debug, Default)]
pub(crate) struct SeenTasks {
    ids: Vec<TaskId>,
    /// [`SeenTasks::changed_noting`]'s suspects (places in the new list)
    /// and the last list's tasks its walk passed over (kept to reuse their
    /// memory).
    suspects: Vec<usize>,
    passed: Vec<TaskId>,
    moved: Vec<usize>,
    /// The snapshot's [`Snapshot::tasks_epoch`] the ids were last found
    /// in (0: none vouched).
    epoch: u64,
}

impl SeenTasks {
    /// The tasks of `snap` seen.
    pub(crate) fn of(snap: &Snapshot) -> Self {
        SeenTasks {
            ids: snap.tasks.iter().map(|t| t.id).collect(),
            suspects: Vec::new(),
            passed: Vec::new(),
            moved: Vec::new(),
            epoch: snap.tasks_epoch,
        }
    }

    /// Whether `snap`'s tasks are the ones seen last, in the same order:
    /// at once when the sensor vouches for it, else id by id.
    pub(crate) fn same(&self, snap: &Snapshot) -> bool {
        (snap.tasks_epoch != 0 && snap.tasks_epoch == self.epoch)
            || snap.tasks.iter().map(|t| t.id).eq(self.ids.iter().copied())
    }

    /// Whether `snap`'s tasks differ from the ones seen last; remembers them.
    pub(crate) fn changed(&mut self, snap: &Snapshot) -> bool {
        if self.same(snap) {
            // The same list under a new name: next time the name suffices.
            self.epoch = snap.tasks_epoch;
            return false;
        }
        self.remember(snap);
        true
    }

    /// Takes `snap`'s list as the one seen last.
    fn remember(&mut self, snap: &Snapshot) {
        self.ids.clear();
        self.ids.extend(snap.tasks.iter().map(|t| t.id));
        self.epoch = snap.tasks_epoch;
    }

    /// [`SeenTasks::changed`], calling `new` with each of `snap`'s tasks
    /// that was not among those seen last, in `snap`'s order, and `gone`
    /// with each task seen last that `snap` lacks, when they changed (a
    /// snapshot's ids are unique). A list changes a few tasks at
    /// a time: the two lists are walked together, a task not found at the
    /// last list's next places is a suspect, and only the suspects are
    /// looked for among the last list's tasks the walk passed over (pack:tp
    /// found the new tasks by putting every task in a set, a thousand
    /// inserts a change and a tenth of its guarded run's instructions; a
    /// sorted copy of the whole last list cost more).
    pub(crate) fn changed_noting<'s>(
        &mut self,
        snap: &'s Snapshot,
        mut new: impl FnMut(&'s TaskView),
        mut gone: impl FnMut(TaskId),
    ) -> bool {
        /// How far ahead in the last list the walk looks for a task: a
        /// program's few threads gone at once.
        const AHEAD: usize = 16;
        if self.same(snap) {
            // The same list under a new name: next time the name suffices.
            self.epoch = snap.tasks_epoch;
            return false;
        }
        let before = &self.ids;
        let (suspects, passed) = (&mut self.suspects, &mut self.passed);
        suspects.clear();
        passed.clear();
        let mut next = 0;
        for (i, t) in snap.tasks.iter().enumerate() {
            // Where the last one found was followed (most tasks).
            if before.get(next) == Some(&t.id) {
                next += 1;
                continue;
            }
            let ahead = &before[next.min(before.len())..(next + AHEAD).min(before.len())];
            match ahead.iter().position(|&id| id == t.id) {
                Some(d) => {
                    passed.extend_from_slice(&ahead[..d]);
                    next += d + 1;
                }
                None => suspects.push(i),
            }
        }
        passed.extend_from_slice(&before[next.min(before.len())..]);
        // A suspect seen last was passed over: the walk matched every other
        // task of the last list to another of this one's. The rest passed
        // over are gone.
        passed.sort_unstable();
        let moved = &mut self.moved;
        moved.clear();
        for &i in suspects.iter() {
            let t = &snap.tasks[i];
            match passed.binary_search(&t.id) {
                Ok(k) => moved.push(k),
                Err(_) => new(t),
            }
        }
        moved.sort_unstable();
        let mut moved = moved.iter().peekable();
        for (k, &id) in passed.iter().enumerate() {
            if moved.next_if_eq(&&k).is_none() {
                gone(id);
            }
        }
        self.remember(snap);
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A runnable task of job 0 that observed nothing.
    fn task(id: TaskId) -> TaskView {
        TaskView {
            id,
            job: 0,
            rank: 0,
            state: TaskState::Runnable,
            cpu: None,
            obs: Obs::default(),
            heartbeats: None,
        }
    }

    #[test]
    fn seen_tasks_change_with_any_task_or_order() {
        let snap = |tasks: Vec<TaskView>, tasks_epoch| Snapshot {
            tasks,
            tasks_epoch,
            ..Snapshot::default()
        };
        let mut seen = SeenTasks::default();
        assert!(seen.same(&snap(vec![], 0)));
        assert!(seen.changed(&snap(vec![task(1), task(2)], 0)));
        assert!(!seen.changed(&snap(vec![task(1), task(2)], 0)));
        assert!(seen.changed(&snap(vec![task(2), task(1)], 0)), "order counts");
        assert!(seen.changed(&snap(vec![task(2)], 0)), "one gone");
        assert!(seen.same(&snap(vec![task(2)], 0)));
        // A sensor's name for the list: a new name with the same ids is
        // still the same list; the name then suffices.
        assert!(!seen.changed(&snap(vec![task(2)], 7)));
        assert!(seen.same(&snap(vec![task(2)], 7)));
        assert!(seen.changed(&snap(vec![task(2), task(3)], 8)));
        assert!(!seen.changed(&snap(vec![task(2), task(3)], 8)));
        // 0 vouches for nothing, even after a name was seen.
        assert!(seen.changed(&snap(vec![task(3)], 0)));
    }

    #[test]
    fn the_tasks_noted_new_and_gone_are_those_one_list_lacks() {
        let mut rng = Rng::new(28);
        let mut seen = SeenTasks::default();
        let mut last: Vec<TaskId> = Vec::new();
        let mut next_id = 0;
        for round in 0..400 {
            // Some leave, some come anywhere, now and then many together
            // (more than the walk looks ahead) or all reordered.
            let mut ids: Vec<TaskId> = last.iter().copied().filter(|_| rng.below(8) != 0).collect();
            if rng.below(5) == 0 && !ids.is_empty() {
                let from = rng.below(ids.len() as u64) as usize;
                let to = (from + 1 + rng.below(30) as usize).min(ids.len());
                ids.drain(from..to);
            }
            for _ in 0..rng.below(if round % 4 == 0 { 40 } else { 6 }) {
                let at = rng.below(ids.len() as u64 + 1) as usize;
                ids.insert(at, next_id);
                next_id += 1;
            }
            if rng.below(10) == 0 {
                for i in (1..ids.len()).rev() {
                    ids.swap(i, rng.below(i as u64 + 1) as usize);
                }
            }
            let s = Snapshot {
                tasks: ids.iter().map(|&id| task(id)).collect(),
                ..Snapshot::default()
            };
            let (mut noted, mut left) = (Vec::new(), Vec::new());
            let changed = seen.changed_noting(&s, |t| noted.push(t.id), |id| left.push(id));
            let want: Vec<TaskId> = ids.iter().copied().filter(|id| !last.contains(id)).collect();
            let mut want_gone: Vec<TaskId> = last.iter().copied().filter(|id| !ids.contains(id)).collect();
            want_gone.sort_unstable();
            left.sort_unstable();
            assert_eq!(changed, ids != last, "round {round}");
            assert_eq!(noted, want, "round {round}: {last:?} -> {ids:?}");
            assert_eq!(left, want_gone, "round {round}: {last:?} -> {ids:?}");
            last = ids;
        }
    }
}
