//! The policy API: what a policy is to the loop ([`Policy`]) and what it
//! can report back ([`Finding`]).

use crate::plan::Plan;
use crate::view::{JobId, View};

/// A placement policy.
pub trait Policy: Send {
    /// The policy's name with its non-default parameters, as `--policy` takes it.
    fn name(&self) -> String;
    /// Decides from `view`. Must not read clocks, files or global state.
    fn decide(&mut self, view: &View<'_>) -> Plan;
    /// Meets the machine every later view will hold, once, before the
    /// first decision (the loop calls it before its first turn): work that
    /// depends on the machine alone (CPU orders, each unit's reason) is
    /// done here, not in the first turn, which places every task at once
    /// while they wait. A policy never prepared prepares itself at its
    /// first decision.
    fn prepare(&mut self, _machine: &herd_topo::Machine) {}
    /// Whether it wants exact solo profiles in [`View::oracle`]. Only the
    /// simulator has them; on a real machine the view has none.
    fn wants_oracle(&self) -> bool {
        false
    }
    /// Whether its decisions read the snapshot at all. `linux` reads
    /// nothing; when nothing else in the loop does either (no guard, no
    /// learning), the sensor may skip building the observations
    /// (the engine's `Sensor::observe_unread`). Must not change during
    /// a run.
    fn reads_snapshot(&self) -> bool {
        true
    }
    /// Whether its decisions on `machine` read the counters beyond each
    /// task's CPU time, waits and instructions: cycles, LLC references and
    /// misses, memory traffic and migrations ([`Obs`](crate::Obs)). When
    /// nothing else in the loop reads them either (no learning, no oracle),
    /// the sensor may leave them unmade (`None`, 0), as on a machine
    /// without them (the engine's `Sensor::leave_counters`): in the
    /// simulator, 10-17% of a guarded minute's instructions at a thousand
    /// tasks.
    /// Asked once, after [`Policy::prepare`]; by default, yes.
    fn reads_counters(&self, _machine: &herd_topo::Machine) -> bool {
        true
    }
    /// Whether it decides from what the loop learns ([`View::learned`]):
    /// the simulator then learns even when no profile store is kept.
    fn wants_learning(&self) -> bool {
        false
    }
    /// The thread count jobs should be started with, for policies that
    /// change it (S4's thread reduction): the simulator then runs each job
    /// with that many threads and the same total work. `None`: as written.
    fn launch_threads(&self, _machine: &herd_topo::Machine) -> Option<u32> {
        None
    }

    /// Whether, between the sensor's full observations, the thread set and
    /// heartbeats suffice to decide ([`Snapshot::progress_only`](crate::Snapshot::progress_only)). PALM
    /// decides every 0.125 ms at first, and reading each thread's /proc
    /// files costs more than that allows; asked before every turn.
    fn progress_suffices(&self) -> bool {
        false
    }
    /// Whether the periods the policy asks for are the moments of events it
    /// must meet (PALM's plan: when its schedule next changes) rather than
    /// a rate. The engine's loop share is then a budget over time, so a
    /// short period comes when asked while the average stays within the
    /// share; otherwise every period is at least the loop's cost over the
    /// share, which spaces a fast-asking policy's turns evenly (for PALM's
    /// rotation, 1.21x thread reduction's time against 1.28x with the
    /// budget, 2 ms phases on the 2-CPU VM). Asked after every decision.
    fn timed_turns(&self) -> bool {
        false
    }
    /// Whether the policy puts more threads than CPUs on the CPUs it uses
    /// by design, so that threads wait for a CPU while another idles (the
    /// packing policies: S4 rotates a job's threads through K cores, and
    /// a thread at a barrier leaves its CPU idle while others queue). The
    /// guard then judges it by its probes alone, not by idle CPUs beside
    /// waiting threads.
    fn shares_cpus_by_design(&self) -> bool {
        false
    }
    /// Whether the policy keeps its jobs within
    /// [`Snapshot::budget_cores`](crate::Snapshot::budget_cores) when an outside controller sets one (the
    /// packing policies); others place as if there were none, and a study
    /// of a moving budget cannot judge them.
    fn follows_budget(&self) -> bool {
        false
    }
    /// The CPUs the user gave the workload, when a policy parameter or an
    /// outside core budget restricts it (`pack:*`'s K cores): the guard's
    /// probes then ask how Linux would place the tasks within them, not on
    /// the whole machine, which the user did not offer. `None`: every CPU.
    fn allowed_cpus(&self) -> Option<herd_topo::CpuSet> {
        None
    }
    /// What the policy found out about its jobs' programs that the next
    /// run should start from (the loop stores it in each program's
    /// profile when the run ends). Asked once, at the end.
    fn findings(&self) -> Vec<(JobId, Finding)> {
        Vec::new()
    }
}

/// Something a policy found out about a program during a run
/// ([`Policy::findings`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Finding {
    /// Heartbeats each thread makes between barriers (`pack:palm` learns
    /// them); `None`: what an earlier run found does not hold.
    BarrierBeats(Option<u64>),
}
