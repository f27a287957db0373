//! herd's policy API and its policies.
//!
//! A policy gets a read-only [`View`] (the time, the machine, the tasks with
//! their last-period observations, profile estimates, a seeded random
//! generator) and returns a [`Plan`]. It never reads a clock or a file, so the
//! same policy object decides the same way in simulation and on a real
//! machine, and a simulation is reproducible from (scenario, policy, seed).
//!
//! Policies are chosen by name with parameters: `NAME[:key=value,...]`, e.g.
//! `static:compact:places=cores`, parsed once into a [`PolicySpec`]. Each
//! policy module declares its registry [`Entry`] (name, parameters with
//! typed defaults and ranges, constructor) beside its code; [`catalog`]
//! lists them in the order of the registry below.

mod amp_queues;
mod api;
pub mod order;
mod pack_plan;
mod param;
mod plan;
mod spec;
mod view;
mod working;

/// Declares the policy modules and lists the entries each declares, in the
/// order `herd policies` shows them. Adding a policy: a module that declares
/// its [`Entry`], and its line here.
macro_rules! registry {
    ($($module:ident: $($entry:ident),+;)+) => {
        $(mod $module;)+
        /// Every policy herd has, in catalogue order.
        const REGISTRY: &[&Entry] = &[$($(&$module::$entry,)+)+];
    };
}

registry! {
    baseline: LINUX, STATIC_COMPACT, STATIC_SCATTER;
    cosched: COSCHED_FAIR;
    smt: SMT_SPEED, SMT_SPN;
    bw: BW_IABW, BW_ORACLE, BW_GREEDY;
    numa_model: NUMA_MODEL;
    amp: AMP_COMPREHENSIVE, AMP_FF;
    amp_baselines: HASS_S, HASS_D, SAMPLE_RUN;
    pack: PACK_PALM, PACK_TP, PACK_TR;
}

pub use amp::{Comprehensive, FastFirst, PRESETS};
pub use amp_baselines::{HassDynamic, HassStatic, SampleRun};
pub use api::{Finding, Policy};
pub use baseline::{BASELINE, Layout, Linux, Static};
pub use bw::{BwCosched, BwSource, BwTarget, COVERAGE_GATE};
pub use cosched::CoschedFair;
pub use numa_model::{NumaModel, hint_share, numa_distances};
pub use pack::{Controller, Pack, Packing, group_sizes, static_best_periods_us};
pub use param::{Accepts, Args, Entry, Param, PolicyError, Range, Value};
pub use plan::{JobDirective, Lane, Placement, Plan, Reason};
pub use smt::{SmtGoal, SmtPlace};
pub use spec::PolicySpec;
pub use view::{
    Estimate, Estimates, JobId, JobView, Knowledge, Learned, Level, Obs, Rng, Snapshot, SystemObs, TaskId,
    TaskState, TaskView, View,
};
pub use working::wants_cpu_over;

/// Every policy herd has.
pub fn catalog() -> &'static [&'static Entry] {
    REGISTRY
}

/// Builds the policy a `--policy` spec names: `NAME[:key=value,...]`.
/// [`PolicySpec::parse`] then [`PolicySpec::build`], for callers that hold
/// the text only (tests, benches).
pub fn build(spec: &str) -> Result<Box<dyn Policy>, PolicyError> {
    Ok(PolicySpec::parse(spec)?.build())
}

#[cfg(test)]
mod reads_tests;

/// Helpers for the policies' unit tests.
#[cfg(test)]
pub(crate) mod testkit {
    use super::*;

    /// One decision of `p` on `m` and `snap`, with nothing estimated or learned.
    pub(crate) fn decide_once(p: &mut dyn Policy, m: &herd_topo::Machine, snap: &Snapshot) -> Plan {
        decide_at(p, m, snap, 0)
    }

    /// [`decide_once`] as the loop's decision number `decision`.
    pub(crate) fn decide_at(
        p: &mut dyn Policy,
        m: &herd_topo::Machine,
        snap: &Snapshot,
        decision: u64,
    ) -> Plan {
        let (est, know) = (Estimates::default(), Knowledge::default());
        p.decide(&View {
            machine: m,
            snapshot: snap,
            estimates: &est,
            learned: &know,
            oracle: None,
            seed: 1,
            decision,
        })
    }

    /// One job's threads with these heartbeats (`None`: a thread that
    /// reports none), ids from 1, ranks from 0, at `now_ns`.
    pub(crate) fn beats_snapshot(now_ns: u64, beats: &[Option<u64>]) -> Snapshot {
        Snapshot {
            now_ns,
            tasks: beats
                .iter()
                .enumerate()
                .map(|(i, b)| TaskView {
                    id: i as u64 + 1,
                    job: 0,
                    rank: i as u32,
                    state: TaskState::Runnable,
                    cpu: None,
                    obs: Obs::default(),
                    heartbeats: *b,
                })
                .collect(),
            jobs: vec![JobView {
                id: 0,
                name: "b".into(),
                program: "b".into(),
                arrival_ns: 0,
                memory_hint: None,
                memory_kb: None,
                threads_declared: None,
            }],
            ..Snapshot::default()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn specs_parse_with_parameters() {
        assert_eq!(build("linux").unwrap().name(), "linux");
        assert_eq!(build("static:compact").unwrap().name(), "static:compact");
        assert_eq!(
            build("static:scatter:places=cores").unwrap().name(),
            "static:scatter:places=cores"
        );
        assert!(matches!(build("static"), Err(PolicyError::Unknown(_))));
        assert!(matches!(build("linuxx"), Err(PolicyError::Unknown(_))));
        let e = build("static:compact:bogus=1").err().unwrap().to_string();
        assert!(
            e.contains("unknown parameter 'bogus'") && e.contains("places"),
            "{e}"
        );
        let e = build("static:compact:places=sockets").err().unwrap().to_string();
        assert!(e.contains("expected one of threads, cores"), "{e}");
        assert!(build("linux:x=1").is_err());
        // Parameters that differ from the defaults show in the name, so
        // results tables tell the variants apart.
        assert_eq!(
            build("bw:iabw:target=remaining,window=2").unwrap().name(),
            "bw:iabw"
        );
        assert_eq!(
            build("bw:iabw:target=iabw").unwrap().name(),
            "bw:iabw:target=iabw"
        );
        assert_eq!(
            build("bw:oracle:window=3,target=fair").unwrap().name(),
            "bw:oracle:window=3,target=fair"
        );
        assert!(build("bw:iabw:target=mean").is_err());
        assert_eq!(
            build("bw:oracle:scale=1.2").unwrap().name(),
            "bw:oracle:scale=1.2"
        );
        assert!(build("bw:oracle:scale=0").is_err());
        assert!(build("bw:greedy:scale=2").is_err());
        assert!(build("bw:greedy:target=fair").is_err());
    }

    #[test]
    fn every_catalog_entry_builds_with_defaults() {
        for info in catalog() {
            let p = build(info.name).unwrap();
            assert_eq!(p.name(), info.name);
        }
    }

    /// Meeting the machine first changes nothing a policy decides: every
    /// policy's first two plans are the same prepared or not.
    #[test]
    fn a_prepared_policy_decides_as_one_that_was_not() {
        let m = herd_topo::Machine::synthetic("package:2 core:4 pu:2").unwrap();
        let mut snap = testkit::beats_snapshot(0, &[None; 6]);
        for (i, t) in snap.tasks.iter_mut().enumerate() {
            t.job = (i / 2) as u32;
        }
        snap.jobs = (0..3)
            .map(|j| JobView {
                id: j,
                ..snap.jobs[0].clone()
            })
            .collect();
        for info in catalog() {
            let plans = |prepare: bool| {
                let mut p = build(info.name).unwrap();
                if prepare {
                    p.prepare(&m);
                }
                [
                    testkit::decide_once(p.as_mut(), &m, &snap),
                    testkit::decide_once(p.as_mut(), &m, &snap),
                ]
            };
            assert_eq!(plans(true), plans(false), "{}", info.name);
        }
    }

    #[test]
    fn rng_is_deterministic() {
        let mut a = Rng::new(7);
        let mut b = Rng::new(7);
        let xs: Vec<u64> = (0..5).map(|_| a.next_u64()).collect();
        assert_eq!(xs, (0..5).map(|_| b.next_u64()).collect::<Vec<_>>());
        assert!((0..1000).map(|_| a.next_f64()).all(|x| (0.0..1.0).contains(&x)));
    }
}
