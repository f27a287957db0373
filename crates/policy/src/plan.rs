//! What a policy returns: where each task may run, or that it pauses.

use std::fmt;
use std::ops::Deref;
use std::sync::Arc;

use herd_topo::CpuSet;
use serde::Serialize;

use crate::view::{JobId, TaskId};

/// A short reason, shown by `--explain`. Fixed text costs nothing; text
/// made at run time is shared, so a reason made once and given to many
/// tasks (smt:\*'s reason per unit) costs a count to give, not a copy (a
/// copy per task was a tenth of smt:speed's first decision at 1,024
/// tasks).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Reason {
    /// Text written in the program.
    Fixed(&'static str),
    /// Text made at run time.
    Shared(Arc<str>),
}

impl Deref for Reason {
    type Target = str;
    fn deref(&self) -> &str {
        match self {
            Reason::Fixed(s) => s,
            Reason::Shared(s) => s,
        }
    }
}

impl AsRef<str> for Reason {
    fn as_ref(&self) -> &str {
        self
    }
}

impl fmt::Display for Reason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self)
    }
}

impl From<&'static str> for Reason {
    fn from(s: &'static str) -> Self {
        Reason::Fixed(s)
    }
}

impl From<String> for Reason {
    fn from(s: String) -> Self {
        Reason::Shared(s.into())
    }
}

impl Serialize for Reason {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self)
    }
}

/// Where one task goes.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "action", rename_all = "snake_case")]
pub enum Placement {
    /// Run, restricted to these CPUs.
    Run {
        /// The CPUs the task may run on.
        cpus: CpuSet,
        /// Why.
        why: Reason,
    },
    /// Stop until a later plan runs the task again.
    Pause {
        /// Why.
        why: Reason,
    },
}

/// A directive for a whole job (S0 unit counts, S4 core budgets).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct JobDirective {
    /// The job.
    pub job: JobId,
    /// How many cores the job may use.
    pub cores: Option<u32>,
    /// How many threads the job should run, for programs with a thread knob.
    pub threads: Option<u32>,
    /// Why.
    pub why: Reason,
}

/// A policy's decision.
///
/// Plans are changes: a task the plan does not name keeps its previous
/// placement, and a task never named runs wherever the kernel puts it
/// (within its original affinity). An empty plan means "no intervention".
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct Plan {
    /// New placements.
    pub tasks: Vec<(TaskId, Placement)>,
    /// Job-level directives.
    pub jobs: Vec<JobDirective>,
    /// The period until the next decision, when the policy wants to change it.
    pub next_period_ns: Option<u64>,
    /// A note about the decision as a whole (e.g. why the policy fell back).
    pub note: Option<Reason>,
    /// Lane changes: which tasks go first where they share a CPU. A task
    /// not named keeps its lane; every task starts in [`Lane::Fair`].
    pub lanes: Vec<(TaskId, Lane)>,
}

/// Which task runs where several share a CPU. Between ticks the kernel
/// leaves a busy thread running whatever its fair share says (on the
/// 2-CPU VM, `workloads/switch_probe`: up to the 4 ms tick), so a policy
/// that must decide who runs *now* (S4's packing with a plan) says it with
/// lanes: `Front` runs before `Back` at once, and both before `Fair`. Live,
/// they are SCHED_FIFO priorities 2 and 1, set only under `--realtime`
/// (herd's loop above them) and reset when the run ends. While they last,
/// the job's threads run ahead of every normal process on their CPUs, which
/// keep only the kernel's reserve for those (the fair server's 50 ms a
/// second): give such a job cores of its own (`cores=K`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Lane {
    /// The kernel's fair sharing.
    #[default]
    Fair,
    /// Runs first on its CPUs.
    Front,
    /// Runs where no `Front` task wants the CPU.
    Back,
}

impl Plan {
    /// Runs `task` on `cpus`.
    pub fn run(&mut self, task: TaskId, cpus: CpuSet, why: impl Into<Reason>) {
        self.tasks.push((
            task,
            Placement::Run {
                cpus,
                why: why.into(),
            },
        ));
    }
    /// Puts `task` in `lane`.
    pub fn lane(&mut self, task: TaskId, lane: Lane) {
        self.lanes.push((task, lane));
    }
    /// Pauses `task`.
    pub fn pause(&mut self, task: TaskId, why: impl Into<Reason>) {
        self.tasks.push((task, Placement::Pause { why: why.into() }));
    }
}
