//! herd's control loop: observe -> decide -> act, once per period.
//!
//! The engine is generic over a [`Sensor`], an [`Actuator`] and a [`Clock`].
//! The simulator implements them over a modelled machine; the runtime over
//! Linux. The policy cannot tell which world it is in.
//!
//! Architecture invariant: the engine reads no clock of its own. Time comes
//! from the [`Clock`]; the cost of deciding is measured by an injected
//! [`CostMeter`], so the crate stays pure and simulations stay reproducible.

pub mod guard;
mod guard_accs;
mod guard_crowd;
mod guard_report;
pub mod guard_runs;
pub mod learn;
pub mod memory_follow;
pub mod replay;
#[cfg(test)]
mod test_rng;

pub use guard::{Guard, GuardConfig, GuardReport, InCharge};
pub use learn::{Learned, Learning};

use herd_policy::{Estimates, Knowledge, Plan, Policy, Snapshot, View};
use herd_topo::Machine;
use serde::Serialize;

/// Observes the world.
pub trait Sensor {
    /// What happened since the last call: present tasks, their observations
    /// over the period, and whole-machine observations.
    fn observe(&mut self) -> &Snapshot;
    /// Whether every managed task has finished (the loop then stops).
    fn finished(&self) -> bool;
    /// [`Sensor::observe`], plus exact solo profiles of the present jobs
    /// for a policy that asks (S1's upper bound). Only the simulator knows
    /// them; a real machine gives none.
    fn observe_with_oracle(&mut self) -> (&Snapshot, Option<&Knowledge>) {
        (self.observe(), None)
    }
    /// [`Sensor::observe`] for a policy that decides from progress alone:
    /// the sensor may return a cheaper [`Snapshot::progress_only`] snapshot,
    /// and decides itself when a full one is due. By default, always full.
    fn observe_progress(&mut self) -> &Snapshot {
        self.observe()
    }
    /// [`Sensor::observe`] when nothing will read the snapshot's
    /// observations (a policy that reads none, no guard, no learning): the
    /// world moves on as an observation would move it, but the sensor may
    /// leave the tasks' observations, and the job list, as they were. A run
    /// calls either this every turn or never. By default, a full one.
    fn observe_unread(&mut self) -> &Snapshot {
        self.observe()
    }
    /// Nothing in this run reads the counters beyond CPU time, waits and
    /// instructions ([`herd_policy::Policy::reads_counters`]): the sensor
    /// may leave cycles, LLC references and misses, memory traffic and
    /// migrations unmade (`None`, 0) in every snapshot of the run. Called
    /// once, before the first observation, or never. By default, nothing
    /// changes.
    fn leave_counters(&mut self) {}
}

/// Acts on the world.
pub trait Actuator {
    /// Applies a plan. A task that vanished meanwhile is skipped, not an error.
    fn apply(&mut self, plan: &Plan);
}

/// The world's time.
pub trait Clock {
    /// Now, in nanoseconds since the run started.
    fn now_ns(&self) -> u64;
    /// Lets the world run until `t_ns` (or until everything has finished,
    /// whichever is first): sleeps on a real machine, simulates in the
    /// simulator. A live world also returns as soon as a program exits:
    /// what runs has changed, and a co-scheduler should fill the CPUs it
    /// freed now, not at the next period.
    fn advance_to(&mut self, t_ns: u64);
}

/// Measures what deciding costs, in real nanoseconds of herd's own time.
pub trait CostMeter {
    /// Starts a measurement.
    fn start(&mut self);
    /// Ends it and returns the nanoseconds spent since `start`.
    fn stop(&mut self) -> u64;
}

/// A meter that measures nothing, for byte-reproducible output.
#[derive(Debug, Default, Clone, Copy)]
pub struct NoMeter;

impl CostMeter for NoMeter {
    fn start(&mut self) {}
    fn stop(&mut self) -> u64 {
        0
    }
}

/// How the loop runs.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Config {
    /// The period between decisions unless the policy asks for another.
    pub period_ns: u64,
    /// The shortest period a policy may ask for.
    pub min_period_ns: u64,
    /// The longest period a policy may ask for.
    pub max_period_ns: u64,
    /// The run's seed.
    pub seed: u64,
    /// Stop after this long even if tasks remain.
    pub horizon_ns: Option<u64>,
    /// The share of one CPU the loop may take: each period lasts at least
    /// the loop's recent cost per turn (observing, deciding, acting and
    /// waking from the clock's wait, as the meter measures them) over this
    /// share; for a policy with timed turns (`Policy::timed_turns`) it is a
    /// budget instead, each turn's cost paid from the share of the time
    /// since the last, a period stretched only while it is overdrawn. The
    /// meter must count CPU time, not wall time, or the wait itself would
    /// count (live runs meter the loop thread's CPU clock).
    /// On a real machine observing a thread and moving one cost ~10 µs each
    /// (`cargo bench -p herd-runtime --bench affinity`), so a policy asking
    /// for 0.125 ms periods would otherwise spend half a CPU on itself.
    /// `None`: no floor (the simulator, whose meter measures the host, not
    /// the modelled machine).
    pub loop_share: Option<f64>,
    /// The guard ([`guard`]): with `Some`, a policy other than `linux` is
    /// compared with the kernel in short probes and backed off where it
    /// loses; `None`: the policy as written.
    pub guard: Option<GuardConfig>,
    /// Whether the caller's `on_decision` reads the view's tasks, their
    /// observations or the job list. When it does not and nothing else in
    /// the loop does, the sensor may skip making them
    /// ([`Sensor::observe_unread`]), or the counters nothing else reads
    /// ([`Sensor::leave_counters`]); the view's time and the plan stay true.
    pub views_read: bool,
}

impl Config {
    /// A fixed period; policies may ask for 1/1000x to 100x of it.
    pub fn with_period(period_ns: u64, seed: u64) -> Self {
        assert!(period_ns > 0, "a period must be positive");
        Config {
            period_ns,
            min_period_ns: (period_ns / 1000).max(1),
            max_period_ns: period_ns.saturating_mul(100),
            seed,
            horizon_ns: None,
            loop_share: None,
            guard: None,
            views_read: true,
        }
    }
}

/// What the loop itself cost, reported with every run.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize)]
pub struct Overhead {
    /// Decisions taken.
    pub decisions: u64,
    /// Total time spent learning and in the policy.
    pub decide_ns_total: u64,
    /// The slowest decision.
    pub decide_ns_max: u64,
    /// Total time spent applying plans.
    pub apply_ns_total: u64,
    /// Total time spent observing.
    pub observe_ns_total: u64,
    /// Turns whose period the loop's own cost stretched (`Config::loop_share`).
    pub stretched_periods: u64,
}

impl Overhead {
    /// Mean time per decision.
    pub fn decide_ns_mean(&self) -> f64 {
        if self.decisions == 0 {
            0.0
        } else {
            self.decide_ns_total as f64 / self.decisions as f64
        }
    }
}

/// What a run of the loop reports.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct Ran {
    /// What the loop cost.
    pub overhead: Overhead,
    /// What the guard did, when there was one.
    pub guard: Option<GuardReport>,
}

/// Runs the loop until the sensor reports everything finished or the
/// horizon passes. With `learning`, every period's observations are learned
/// before the policy decides, the policy sees what was learned, and its
/// [`Policy::findings`] are recorded at the end. `on_decision` sees every
/// view and plan (for traces, `--explain`, and the sim/live parity test).
#[allow(clippy::too_many_arguments)] // The loop's collaborators, each distinct.
pub fn run<P, W, M>(
    policy: &mut P,
    machine: &Machine,
    estimates: &Estimates,
    mut learning: Option<&mut Learning>,
    world: &mut W,
    meter: &mut M,
    config: &Config,
    mut on_decision: impl FnMut(&View<'_>, &Plan),
) -> Ran
where
    P: Policy + ?Sized,
    W: Sensor + Actuator + Clock,
    M: CostMeter,
{
    let mut overhead = Overhead::default();
    let mut period = config.period_ns;
    let nothing_learned = Knowledge::default();
    let wants_oracle = policy.wants_oracle();
    // The loop's cost per turn, smoothed over the last few turns.
    let mut turn_ns = 0.0f64;
    // For policies with timed turns: the loop's CPU budget and when it was
    // last topped up.
    let mut credit_ns = 0.0f64;
    let mut last_turn_ns: Option<u64> = None;
    let mut guard = config
        .guard
        .filter(|_| policy.name() != herd_policy::BASELINE)
        .map(|g| Guard::new(g, config.period_ns));
    // Nothing reads the observations: the sensor need not make them (at a
    // thousand tasks, a third of a simulated `linux` turn).
    let unread = !config.views_read
        && !policy.reads_snapshot()
        && guard.is_none()
        && learning.is_none()
        && !wants_oracle;
    // What the last wait cost beyond the wait itself: waking, the clock's
    // system calls (half of herd's CPU per turn at 0.3 ms periods here).
    let mut woke_ns = 0u64;
    // The policy meets the machine before the first turn; what that costs
    // is herd's, counted with deciding.
    meter.start();
    policy.prepare(machine);
    overhead.decide_ns_total += meter.stop();
    // The guard reads CPU time, waits, instructions, states and CPUs, and
    // heartbeats; learning, an oracle's policy and a reader of the views
    // may read every counter.
    if !policy.reads_counters(machine) && learning.is_none() && !wants_oracle && !config.views_read {
        world.leave_counters();
    }
    // Bounded: the clock moves forward by at least min_period_ns per turn, so
    // a horizon bounds the turns; without one the sensor's `finished` does.
    loop {
        if world.finished() || config.horizon_ns.is_some_and(|h| world.now_ns() >= h) {
            break;
        }
        meter.start();
        // The plan, and what observing and deciding it cost.
        let (plan, observed_and_spent) = {
            let kernel_places = guard.as_ref().is_some_and(Guard::kernel_places);
            let (snapshot, oracle) = if unread {
                (world.observe_unread(), None)
            } else if wants_oracle {
                world.observe_with_oracle()
            } else if !kernel_places && policy.progress_suffices() {
                (world.observe_progress(), None)
            } else {
                (world.observe(), None)
            };
            let observed = meter.stop();
            overhead.observe_ns_total += observed;
            // Learning is part of deciding's cost: S1 counts its profiling
            // work in the scheduler's overhead.
            meter.start();
            // A progress-only snapshot's observations are zero; they reach
            // learning with the next full one. A period the guard gave the
            // kernel is followed, not learned: the store is of the programs
            // under the policy, as a whole run the kernel places learns
            // nothing (guard across runs).
            if let Some(l) = learning.as_deref_mut().filter(|_| !snapshot.progress_only) {
                l.observe(snapshot, kernel_places);
            }
            let view = View {
                machine,
                snapshot,
                estimates,
                learned: learning.as_deref().map_or(&nothing_learned, Learning::knowledge),
                oracle,
                seed: config.seed,
                decision: overhead.decisions,
            };
            let plan = match guard.as_mut() {
                Some(g) => g.turn(&view, policy),
                None => policy.decide(&view),
            };
            let spent = meter.stop();
            overhead.decisions += 1;
            overhead.decide_ns_total += spent;
            overhead.decide_ns_max = overhead.decide_ns_max.max(spent);
            on_decision(&view, &plan);
            (plan, observed + spent)
        };
        meter.start();
        world.apply(&plan);
        let applied = meter.stop();
        overhead.apply_ns_total += applied;
        let cost_ns = observed_and_spent + applied + woke_ns;
        // The first turn opens every thread's files and counters (on the
        // 2-CPU VM the kernel's first perf event alone took 5.8 ms): a
        // one-off, which would otherwise stretch the next dozen periods
        // while the average forgets it.
        if overhead.decisions == 2 {
            turn_ns = cost_ns as f64;
        } else if overhead.decisions > 2 {
            turn_ns = 0.8 * turn_ns + 0.2 * cost_ns as f64;
        }
        if let Some(p) = plan.next_period_ns {
            period = p.clamp(config.min_period_ns, config.max_period_ns);
        }
        let mut this_period = period;
        if let Some(share) = config.loop_share.filter(|s| *s > 0.0) {
            // The budget: the share of the time since the last turn comes
            // in, this turn's cost goes out (not the first, set-up turn's),
            // savings capped at BURST_NS' worth. Kept for every policy so
            // that one switching to timed turns starts from the truth.
            let now = world.now_ns();
            if let Some(then) = last_turn_ns {
                credit_ns += share * now.saturating_sub(then) as f64 - cost_ns as f64;
                credit_ns = credit_ns.min(share * BURST_NS);
            }
            last_turn_ns = Some(now);
            let kernel_places = guard.as_ref().is_some_and(Guard::kernel_places);
            let floor = if policy.timed_turns() && !kernel_places {
                // Wait only while the budget is overdrawn.
                (-credit_ns / share).max(0.0) as u64
            } else {
                (turn_ns / share) as u64
            };
            if floor > this_period {
                this_period = floor;
                overhead.stretched_periods += 1;
            }
        }
        let mut next = world.now_ns().saturating_add(this_period);
        if let Some(h) = config.horizon_ns {
            next = next.min(h);
        }
        if config.loop_share.is_some() {
            meter.start();
            world.advance_to(next);
            woke_ns = meter.stop();
        } else {
            world.advance_to(next);
        }
    }
    if let Some(l) = learning {
        for (job, finding) in policy.findings() {
            l.record(job, finding);
        }
    }
    Ran {
        overhead,
        guard: guard.map(|g| g.report().clone()),
    }
}

/// The most of its share the loop may save for timed turns: at 5%, half a
/// millisecond of CPU, a dozen turns of PALM's plan on the 2-CPU VM.
const BURST_NS: f64 = 10e6;

#[cfg(test)]
mod tests {
    use super::*;

    /// A world with nothing in it whose clock goes exactly where told.
    #[derive(Default)]
    struct Empty {
        snapshot: Snapshot,
        now_ns: u64,
        gaps_ns: Vec<u64>,
        /// Observations, and whether the counters were left before the first.
        observed: u32,
        counters_left: Option<u32>,
    }

    impl Sensor for Empty {
        fn observe(&mut self) -> &Snapshot {
            self.observed += 1;
            &self.snapshot
        }
        fn finished(&self) -> bool {
            false
        }
        fn leave_counters(&mut self) {
            self.counters_left = Some(self.observed);
        }
    }
    impl Actuator for Empty {
        fn apply(&mut self, _plan: &Plan) {}
    }
    impl Clock for Empty {
        fn now_ns(&self) -> u64 {
            self.now_ns
        }
        fn advance_to(&mut self, t_ns: u64) {
            self.gaps_ns.push(t_ns - self.now_ns);
            self.now_ns = t_ns;
        }
    }

    /// Every measured step costs 50 µs.
    struct Costly;
    impl CostMeter for Costly {
        fn start(&mut self) {}
        fn stop(&mut self) -> u64 {
            50_000
        }
    }

    /// Asks for 10 ms, then twice 0.1 ms, and so on: events it must meet.
    #[derive(Default)]
    struct Timed(u32);
    impl herd_policy::Policy for Timed {
        fn name(&self) -> String {
            "timed".into()
        }
        fn decide(&mut self, _view: &View<'_>) -> Plan {
            self.0 += 1;
            Plan {
                next_period_ns: Some(if self.0 % 3 == 0 { 10_000_000 } else { 100_000 }),
                ..Plan::default()
            }
        }
        fn timed_turns(&self) -> bool {
            true
        }
    }

    /// `policy` on an empty world whose every turn costs 200 us, for
    /// `horizon_ns`: the gaps between turns and the overhead.
    fn costly_run(
        policy: &mut dyn Policy,
        period_ns: u64,
        horizon_ns: u64,
        share: Option<f64>,
    ) -> (Vec<u64>, Overhead) {
        let machine = Machine::synthetic("core:2").unwrap();
        let mut cfg = Config::with_period(period_ns, 0);
        cfg.horizon_ns = Some(horizon_ns);
        cfg.loop_share = share;
        let mut world = Empty::default();
        let o = run(
            policy,
            &machine,
            &Estimates::new(),
            None,
            &mut world,
            &mut Costly,
            &cfg,
            |_, _| {},
        );
        (world.gaps_ns, o.overhead)
    }

    /// Records the machine it met and whether that came before deciding.
    #[derive(Default)]
    struct Meets {
        met_cpus: Option<usize>,
        decided_unmet: bool,
    }
    impl herd_policy::Policy for Meets {
        fn name(&self) -> String {
            "meets".into()
        }
        fn prepare(&mut self, machine: &Machine) {
            self.met_cpus = Some(machine.cpus().len());
        }
        fn decide(&mut self, _view: &View<'_>) -> Plan {
            self.decided_unmet |= self.met_cpus.is_none();
            Plan::default()
        }
    }

    /// The loop lets the policy meet the machine before its first turn,
    /// and counts that as deciding's cost.
    #[test]
    fn the_policy_meets_the_machine_before_its_first_turn() {
        let mut p = Meets::default();
        let (_, o) = costly_run(&mut p, 1_000_000, 10_000_000, None);
        assert_eq!(p.met_cpus, Some(2));
        assert!(!p.decided_unmet);
        assert_eq!(o.decide_ns_total, 50_000 * (o.decisions + 1));
    }

    #[test]
    fn timed_turns_spend_the_share_as_a_budget() {
        let (gaps, o) = costly_run(&mut Timed::default(), 1_000_000, 1_000_000_000, Some(0.05));
        // 200 us a turn: a floor would space every turn 4 ms apart; the
        // budget saved over a 10 ms wait lets two short ones through.
        assert!(
            gaps.iter().filter(|&&g| g == 100_000).count() > 50,
            "{:?}",
            &gaps[..12]
        );
        // And the loop's CPU stays within its share on average.
        let spent = 200_000.0 * (o.decisions - 1) as f64;
        assert!(spent <= 0.05 * 1e9 + 0.05 * BURST_NS + 200_000.0, "{spent}");
    }

    #[test]
    fn the_loop_stretches_periods_shorter_than_its_own_cost_allows() {
        let run_with = |share: Option<f64>| costly_run(&mut herd_policy::Linux, 125_000, 100_000_000, share);
        let (gaps, o) = run_with(None);
        assert!(gaps.iter().all(|&g| g == 125_000));
        assert_eq!(o.stretched_periods, 0);
        assert_eq!(o.observe_ns_total, 50_000 * o.decisions);
        // 200 µs a turn (observe, decide, apply, wake) over 5% of a CPU: 4 ms.
        let (gaps, o) = run_with(Some(0.05));
        let last = *gaps.iter().rev().nth(1).unwrap();
        assert!((last as f64 / 4e6 - 1.0).abs() < 0.01, "{last}");
        assert!(
            gaps.windows(2)
                .all(|w| w[1] >= w[0] || w[1] == *gaps.last().unwrap())
        );
        // All but the first turn, which is set-up.
        assert_eq!(gaps[0], 125_000);
        assert_eq!(o.stretched_periods, o.decisions - 1);
    }

    /// Reads CPU time alone: no counters.
    struct Blind;
    impl herd_policy::Policy for Blind {
        fn name(&self) -> String {
            "blind".into()
        }
        fn decide(&mut self, _view: &View<'_>) -> Plan {
            Plan::default()
        }
        fn reads_counters(&self, _machine: &Machine) -> bool {
            false
        }
    }

    /// The counters are left, before the first observation, exactly when
    /// neither the policy, learning, nor a reader of the views reads them
    /// (the guard reads none of them).
    #[test]
    fn counters_are_left_only_where_nothing_reads_them() {
        let machine = Machine::synthetic("core:2").unwrap();
        let left = |policy: &mut dyn Policy, learn: bool, views_read: bool, guard: bool| {
            let mut cfg = Config::with_period(10_000_000, 0);
            cfg.horizon_ns = Some(50_000_000);
            cfg.views_read = views_read;
            cfg.guard = guard.then(GuardConfig::default);
            let mut learning = Learning::new(Default::default(), None);
            let mut world = Empty::default();
            run(
                policy,
                &machine,
                &Estimates::new(),
                learn.then_some(&mut learning),
                &mut world,
                &mut NoMeter,
                &cfg,
                |_, _| {},
            );
            assert!(world.observed > 0);
            world.counters_left
        };
        assert_eq!(left(&mut Blind, false, false, false), Some(0));
        assert_eq!(
            left(&mut Blind, false, false, true),
            Some(0),
            "the guard reads none"
        );
        assert_eq!(left(&mut Blind, true, false, false), None, "learning reads them");
        assert_eq!(
            left(&mut Blind, false, true, false),
            None,
            "a reader of the views may"
        );
        assert_eq!(
            left(&mut Timed::default(), false, false, false),
            None,
            "by default, read"
        );
    }
}
