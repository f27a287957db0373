//! herd's policy API and its policies.
//!
//! A policy gets a read-only [`View`] (the time, the machine, the tasks with
//! their last-period observations, profile estimates, a seeded random
//! generator) and returns a [`Plan`]. It never reads a clock or a file, so the
//! same policy object decides the same way in simulation and on a real
//! machine, and a simulation is reproducible from (scenario, policy, seed).
//!
//! Policies are chosen by name with parameters: `NAME[:key=value,...]`, e.g.
//! `static:compact:places=cores`. [`catalog`] lists them.

mod amp;
mod amp_baselines;
mod baseline;
mod bw;
mod cosched;
pub mod node;
mod numa_model;
pub mod order;
mod pack;
mod pack_plan;
mod plan;
mod smt;
mod view;

pub use amp::{Comprehensive, FastFirst, PRESETS};
pub use amp_baselines::{HassDynamic, HassStatic, SampleRun};
pub use baseline::{Layout, Linux, Static};
pub use bw::{BwCosched, BwSource, BwTarget, COVERAGE_GATE};
pub use cosched::CoschedFair;
pub use numa_model::NumaModel;
pub use pack::{Controller, Pack, Packing, group_sizes};
pub use plan::{JobDirective, Lane, Placement, Plan, Reason};
pub use smt::{SmtGoal, SmtPlace};
pub use view::{
    Estimate, Estimates, JobId, JobView, Knowledge, Learned, Level, Obs, Rng, Snapshot, SystemObs, TaskId,
    TaskState, TaskView, View,
};

/// A placement policy.
pub trait Policy: Send {
    /// The policy's name with its non-default parameters, as `--policy` takes it.
    fn name(&self) -> String;
    /// Decides from `view`. Must not read clocks, files or global state.
    fn decide(&mut self, view: &View<'_>) -> Plan;
    /// Whether it wants exact solo profiles in [`View::oracle`]. Only the
    /// simulator has them; on a real machine the view has none.
    fn wants_oracle(&self) -> bool {
        false
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
    /// heartbeats suffice to decide ([`Snapshot::progress_only`]). PALM
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
    /// Whether the policy keeps its jobs within
    /// [`Snapshot::budget_cores`] when an outside controller sets one (the
    /// packing policies); others place as if there were none, and a study
    /// of a moving budget cannot judge them.
    fn follows_budget(&self) -> bool {
        false
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

/// A parameter a policy takes.
#[derive(Debug, Clone, Copy)]
pub struct ParamInfo {
    /// The key, as in `key=value`.
    pub key: &'static str,
    /// The default value.
    pub default: &'static str,
    /// What it does.
    pub about: &'static str,
}

/// A policy in the catalog.
#[derive(Debug, Clone, Copy)]
pub struct PolicyInfo {
    /// The name `--policy` takes.
    pub name: &'static str,
    /// One line about it.
    pub about: &'static str,
    /// Its parameters.
    pub params: &'static [ParamInfo],
}

const PLACES: ParamInfo = ParamInfo {
    key: "places",
    default: "threads",
    about: "threads: pin each thread to one hardware thread; cores: to every sibling of its core",
};

const WINDOW: ParamInfo = ParamInfo {
    key: "window",
    default: "2",
    about: "co-runners come from the window x slots least-served programs (fairness vs. choice)",
};

const SCALE: ParamInfo = ParamInfo {
    key: "scale",
    default: "1",
    about: "aim at the target times this (exact solo demand does best aimed above IABW in herd's model)",
};

const TARGET: ParamInfo = ParamInfo {
    key: "target",
    default: "remaining",
    about: "remaining: S1's ideal average bandwidth over the work left, each period; iabw: S1's over the whole run, once (ends with the longest program alone); fair: requests over summed solo times per CPU",
};

/// Every policy herd has.
pub fn catalog() -> &'static [PolicyInfo] {
    &[
        PolicyInfo {
            name: "linux",
            about: "no intervention: the kernel places every task (the baseline)",
            params: &[],
        },
        PolicyInfo {
            name: "static:compact",
            about: "pin threads to neighbouring hardware threads, job after job (OpenMP close)",
            params: &[PLACES],
        },
        PolicyInfo {
            name: "cosched:fair",
            about: "time-slice programs: the least-served run while their threads fit the CPUs, the rest pause",
            params: &[ParamInfo {
                key: "slots",
                default: "cpus",
                about: "how many threads may run at once (default: one per CPU)",
            }],
        },
        PolicyInfo {
            name: "smt:speed",
            about: "S0 policy 1, speedup first: full cores spread over packages before any SMT sibling (Linux's order)",
            params: &[],
        },
        PolicyInfo {
            name: "smt:spn",
            about: "S0 policy 2, SPN first: both siblings of a core, then the next core, then a new package",
            params: &[],
        },
        PolicyInfo {
            name: "bw:iabw",
            about: "S1: co-runners whose predicted bandwidth sums to the group's ideal average (learned profiles; like linux below 80% coverage)",
            params: &[WINDOW, TARGET, SCALE],
        },
        PolicyInfo {
            name: "bw:oracle",
            about: "S1's upper bound: bw:iabw with exact solo profiles (simulator only)",
            params: &[WINDOW, TARGET, SCALE],
        },
        PolicyInfo {
            name: "bw:greedy",
            about: "bandwidth balancing with no history: last measured bandwidth, target the mean demand",
            params: &[WINDOW],
        },
        PolicyInfo {
            name: "amp:comprehensive",
            about: "S3: tasks on core kinds by integrated LLC-miss behaviour (IB), moved only on stable phase changes, load within beta",
            params: &[
                ParamInfo {
                    key: "preset",
                    default: "none",
                    about: "S3's platforms: uma (alpha 0.3, beta 0), numa1 (0.8, 0.3), numa2 (0.6, 0.3); other keys override it",
                },
                ParamInfo {
                    key: "alpha",
                    default: "0.3",
                    about: "weight of the whole-run miss rate GB in IB (1: history only, fewer migrations)",
                },
                ParamInfo {
                    key: "beta",
                    default: "0",
                    about: "tolerated load imbalance between adjacent kinds, in [0, 1)",
                },
                ParamInfo {
                    key: "interval_ms",
                    default: "200",
                    about: "how often each task's LLC miss rate is sampled",
                },
                ParamInfo {
                    key: "threshold1",
                    default: "0.12",
                    about: "relative change of LB that starts a new phase",
                },
                ParamInfo {
                    key: "threshold2",
                    default: "0.05",
                    about: "relative change under which a new phase is stable (two intervals)",
                },
            ],
        },
        PolicyInfo {
            name: "pack:palm",
            about: "S4 PALM: threads packed on K cores, least progress to most capacity per thread, adaptive period",
            params: &[
                ParamInfo {
                    key: "cores",
                    default: "all",
                    about: "K: how many cores the job gets (the first K in compact order)",
                },
                ParamInfo {
                    key: "min_period_us",
                    default: "125",
                    about: "the period the controller starts at and never goes below",
                },
                ParamInfo {
                    key: "max_period_ms",
                    default: "64",
                    about: "the longest period the controller doubles to",
                },
                ParamInfo {
                    key: "epoch_us",
                    default: "4000",
                    about: "the controller's shortest epoch: it compares progress over at least this long (0: one period, S4's; see pack::DEFAULT_EPOCH_US)",
                },
                ParamInfo {
                    key: "epoch_beats",
                    default: "8",
                    about: "heartbeats per thread an epoch waits for at least (0: none, S4's)",
                },
                ParamInfo {
                    key: "climb",
                    default: "1",
                    about: "hill climbing: a better epoch repeats the last move, a worse one undoes it (0: double when better, halve when worse, S4's)",
                },
                ParamInfo {
                    key: "tolerance",
                    default: "0.02",
                    about: "relative change in progress rate within which the controller keeps the period (0: S4's)",
                },
                ParamInfo {
                    key: "period_us",
                    default: "adaptive",
                    about: "a fixed period, the controller off (S4's static best: the period found offline; herd sim's static-best: prefix finds it)",
                },
                ParamInfo {
                    key: "barrier_beats",
                    default: "auto",
                    about: "the beats each thread makes between barriers: with heartbeats, more threads than cores and identical cores, run McNaughton's schedule of the work left to the next barrier through lanes (live: SCHED_FIFO, needs --realtime; the job's threads then run ahead of normal processes on its K cores) instead of the groups' turns. auto: learned from the heartbeats of one job's threads (no thread passes a barrier its laggard has not reached), and the plan runs only where lanes take effect, with fewer than two threads a core and pieces of at least two beats (--explain says what was learned); 0: off",
                },
            ],
        },
        PolicyInfo {
            name: "pack:tp",
            about: "thread packing (S4's TP): every thread may run on the K cores, Linux balances",
            params: &[ParamInfo {
                key: "cores",
                default: "all",
                about: "K: how many cores the job gets",
            }],
        },
        PolicyInfo {
            name: "pack:tr",
            about: "thread reduction (S4's TR): K threads on K cores (run with herd run --threads K)",
            params: &[ParamInfo {
                key: "cores",
                default: "all",
                about: "K: how many cores and threads",
            }],
        },
        PolicyInfo {
            name: "amp:hass-s",
            about: "HASS static (S3's baseline): offline signature (whole-run LLC miss rate, else hint) fixes each task's core kind",
            params: &[],
        },
        PolicyInfo {
            name: "amp:hass-d",
            about: "HASS dynamic (S3's baseline): the same ranking from the online miss rate, every interval, no stability filter",
            params: &[ParamInfo {
                key: "interval_ms",
                default: "200",
                about: "how often the ranking is recomputed",
            }],
        },
        PolicyInfo {
            name: "amp:sample-run",
            about: "Sample-Run (S3's baseline): every task sampled on each kind, then the best fast/slow ratios run on fast cores",
            params: &[
                ParamInfo {
                    key: "interval_ms",
                    default: "200",
                    about: "length of one sampling or run interval",
                },
                ParamInfo {
                    key: "period",
                    default: "10",
                    about: "run intervals between samplings",
                },
            ],
        },
        PolicyInfo {
            name: "amp:ff",
            about: "fast cores first, tasks per kind in proportion to its capacity (S3's FF baseline)",
            params: &[],
        },
        PolicyInfo {
            name: "numa:model",
            about: "S2: each multithreaded job compact (on which NUMA nodes) or scatter, by the NUMA queueing model's predicted time given what runs",
            params: &[
                ParamInfo {
                    key: "node_bw_gbps",
                    default: "25.6",
                    about: "bandwidth per NUMA node when herd calibrate has stored no peak",
                },
                ParamInfo {
                    key: "shared",
                    default: "0.5",
                    about: "share of a job's accesses to data all its threads share (the rest is local)",
                },
            ],
        },
        PolicyInfo {
            name: "static:scatter",
            about: "pin threads spread over packages, NUMA nodes and cores (OpenMP spread)",
            params: &[PLACES],
        },
    ]
}

/// Why a policy spec was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PolicyError {
    /// No policy has that name.
    #[error("unknown policy '{0}' (herd policies lists them)")]
    Unknown(String),
    /// A parameter is unknown or its value is bad.
    #[error("policy '{policy}': {why}")]
    Param {
        /// The policy.
        policy: String,
        /// What is wrong.
        why: String,
    },
}

/// Parsed `key=value` parameters, checked against a policy's catalog entry.
#[derive(Debug)]
pub struct Params {
    policy: &'static str,
    values: Vec<(String, String)>,
}

impl Params {
    fn parse(info: &PolicyInfo, text: &str) -> Result<Self, PolicyError> {
        let mut values = Vec::new();
        for pair in text.split(',').filter(|p| !p.is_empty()) {
            let bad = |why: String| PolicyError::Param {
                policy: info.name.into(),
                why,
            };
            let (k, v) = pair
                .split_once('=')
                .ok_or_else(|| bad(format!("'{pair}' is not key=value")))?;
            if !info.params.iter().any(|p| p.key == k) {
                let known: Vec<&str> = info.params.iter().map(|p| p.key).collect();
                let known = if known.is_empty() {
                    "none".to_string()
                } else {
                    known.join(", ")
                };
                return Err(bad(format!("unknown parameter '{k}' (known: {known})")));
            }
            values.push((k.to_string(), v.to_string()));
        }
        Ok(Params {
            policy: info.name,
            values,
        })
    }

    /// The value of `key`, or `default`.
    pub fn str_or<'a>(&'a self, key: &str, default: &'a str) -> &'a str {
        self.values
            .iter()
            .rev()
            .find(|(k, _)| k == key)
            .map_or(default, |(_, v)| v.as_str())
    }

    /// The number `key` (or `default`), which must pass `ok`; `must` says
    /// what it must be.
    fn number(&self, key: &str, default: &str, ok: fn(f64) -> bool, must: &str) -> Result<f64, PolicyError> {
        let v = self.str_or(key, default);
        v.parse::<f64>()
            .ok()
            .filter(|x| x.is_finite() && ok(*x))
            .ok_or_else(|| PolicyError::Param {
                policy: self.policy.into(),
                why: format!("{key}={v}: must be {must}"),
            })
    }

    fn one_of<'a>(&self, key: &str, default: &'a str, allowed: &[&'a str]) -> Result<&'a str, PolicyError> {
        let v = self.str_or(key, default);
        allowed
            .iter()
            .copied()
            .find(|a| *a == v)
            .ok_or_else(|| PolicyError::Param {
                policy: self.policy.into(),
                why: format!("{key}={v}: expected one of {}", allowed.join(", ")),
            })
    }
}

/// PALM's controller from its parameters.
fn palm_controller(params: &Params) -> Result<Controller, PolicyError> {
    let ns = |us: f64| ((us * 1e3) as u64).max(1);
    if params.str_or("period_us", "adaptive") != "adaptive" {
        // A fixed period: the controller's bounds meet.
        let p = params.number("period_us", "adaptive", |x| x > 0.0, "a positive number")?;
        return Ok(Controller::fixed(ns(p)));
    }
    Ok(Controller {
        min_period_ns: ns(params.number("min_period_us", "125", |x| x > 0.0, "a positive number")?),
        max_period_ns: ns(params.number("max_period_ms", "64", |x| x > 0.0, "a positive number")? * 1e3),
        min_epoch_ns: (params.number("epoch_us", "4000", |x| x >= 0.0, "a number >= 0")? * 1e3) as u64,
        tolerance: params.number(
            "tolerance",
            "0.02",
            |x| (0.0..1.0).contains(&x),
            "a number from 0 to 1",
        )?,
        epoch_beats: params.number(
            "epoch_beats",
            "8",
            |x| x >= 0.0 && x.fract() == 0.0,
            "a whole number >= 0",
        )? as u64,
        climb: params.number("climb", "1", |x| x == 0.0 || x == 1.0, "0 or 1")? == 1.0,
    })
}

/// The periods S4's static best tries for `spec`, a `pack:palm` spec
/// without `period_us`: its controller's range, doubling, in µs.
pub fn static_best_periods_us(spec: &str) -> Result<Vec<f64>, PolicyError> {
    let (info, params) = lookup(spec)?;
    let why = if info.name != "pack:palm" {
        format!("static-best finds a period for pack:palm, not for {}", info.name)
    } else if params.str_or("period_us", "adaptive") != "adaptive" {
        "static-best chooses period_us itself".into()
    } else {
        return Ok(palm_controller(&params)?.periods_us());
    };
    Err(PolicyError::Param {
        policy: spec.into(),
        why,
    })
}

/// The catalog entry a spec names, and its parameters.
fn lookup(spec: &str) -> Result<(&'static PolicyInfo, Params), PolicyError> {
    // Names contain ':' themselves, so take the longest catalog name that
    // the spec starts with and that ends at ':' or the end.
    let info = catalog()
        .iter()
        .filter(|i| {
            spec == i.name
                || spec
                    .strip_prefix(i.name)
                    .is_some_and(|rest| rest.starts_with(':'))
        })
        .max_by_key(|i| i.name.len())
        .ok_or_else(|| PolicyError::Unknown(spec.to_string()))?;
    let params = Params::parse(info, spec[info.name.len()..].trim_start_matches(':'))?;
    Ok((info, params))
}

/// Builds the policy a `--policy` spec names: `NAME[:key=value,...]`.
pub fn build(spec: &str) -> Result<Box<dyn Policy>, PolicyError> {
    let (info, params) = lookup(spec)?;
    Ok(match info.name {
        "linux" => Box::new(Linux),
        "static:compact" | "static:scatter" => {
            let layout = if info.name == "static:compact" {
                Layout::Compact
            } else {
                Layout::Scatter
            };
            let whole_cores = params.one_of("places", "threads", &["threads", "cores"])? == "cores";
            Box::new(Static::new(layout, whole_cores))
        }
        "smt:speed" => Box::new(SmtPlace::new(SmtGoal::Speed)),
        "smt:spn" => Box::new(SmtPlace::new(SmtGoal::Spn)),
        "bw:iabw" | "bw:oracle" | "bw:greedy" => {
            let source = match info.name {
                "bw:iabw" => BwSource::Iabw,
                "bw:oracle" => BwSource::Oracle,
                _ => BwSource::Greedy,
            };
            let v = params.str_or("window", "2");
            let window = v
                .parse::<usize>()
                .ok()
                .filter(|&n| (1..=64).contains(&n))
                .ok_or_else(|| PolicyError::Param {
                    policy: info.name.into(),
                    why: format!("window={v} is not a whole number from 1 to 64"),
                })?;
            let target = if source == BwSource::Greedy {
                BwTarget::Iabw
            } else {
                match params.one_of("target", "remaining", &["remaining", "iabw", "fair"])? {
                    "fair" => BwTarget::Fair,
                    "remaining" => BwTarget::Remaining,
                    _ => BwTarget::Iabw,
                }
            };
            let scale = if source == BwSource::Greedy {
                1.0
            } else {
                params.number("scale", "1", |x| x > 0.0, "a positive number")?
            };
            Box::new(BwCosched::with_target(source, window, target).scaled(scale))
        }
        "pack:palm" | "pack:tp" | "pack:tr" => {
            let kind = match info.name {
                "pack:palm" => Packing::Palm,
                "pack:tp" => Packing::Tp,
                _ => Packing::Tr,
            };
            let cores = match params.str_or("cores", "all") {
                "all" => None,
                _ => Some(params.number(
                    "cores",
                    "all",
                    |x| x >= 1.0 && x.fract() == 0.0,
                    "a whole number >= 1",
                )? as usize),
            };
            let controller = if kind == Packing::Palm {
                palm_controller(&params)?
            } else {
                Controller::default()
            };
            let pack = Pack::new(kind, cores, controller);
            if kind != Packing::Palm {
                Box::new(pack)
            } else if params.str_or("barrier_beats", "auto") == "auto" {
                Box::new(pack.with_learned_barriers())
            } else {
                let n = params.number(
                    "barrier_beats",
                    "0",
                    |x| x >= 0.0 && x.fract() == 0.0,
                    "auto or a whole number >= 0",
                )?;
                Box::new(pack.with_barrier_beats(n as u64))
            }
        }
        "amp:ff" => Box::new(FastFirst::default()),
        "amp:hass-s" => Box::new(HassStatic::default()),
        "amp:hass-d" => Box::new(HassDynamic::new(params.number(
            "interval_ms",
            "200",
            |x| x > 0.0,
            "a positive number",
        )?)),
        "amp:sample-run" => Box::new(SampleRun::new(
            params.number("interval_ms", "200", |x| x > 0.0, "a positive number")?,
            params.number(
                "period",
                "10",
                |x| x >= 1.0 && x.fract() == 0.0,
                "a whole number >= 1",
            )? as u32,
        )),
        "amp:comprehensive" => {
            let number = |key: &str, default: &str, ok: fn(f64) -> bool, must: &str| {
                params.number(key, default, ok, must)
            };
            let preset = match params.str_or("preset", "none") {
                "none" => None,
                p => Some(
                    *PRESETS
                        .iter()
                        .find(|(n, _, _)| *n == p)
                        .ok_or_else(|| PolicyError::Param {
                            policy: info.name.into(),
                            why: format!("preset={p}: expected one of uma, numa1, numa2"),
                        })?,
                ),
            };
            let (alpha0, beta0) = preset.map_or((0.3, 0.0), |(_, a, b)| (a, b));
            let (a0, b0) = (alpha0.to_string(), beta0.to_string());
            let monitor = herd_profile::behaviour::MonitorParams {
                alpha: number("alpha", &a0, |x| (0.0..=1.0).contains(&x), "in [0, 1]")?,
                threshold1: number("threshold1", "0.12", |x| x > 0.0, "a positive number")?,
                threshold2: number("threshold2", "0.05", |x| x > 0.0, "a positive number")?,
                ..Default::default()
            };
            let beta = number("beta", &b0, |x| (0.0..1.0).contains(&x), "in [0, 1)")?;
            let interval_ms = number("interval_ms", "200", |x| x > 0.0, "a positive number")?;
            // A preset names itself only when nothing overrides it.
            let named =
                preset.filter(|(_, a, b)| monitor.alpha == *a && beta == *b && params.values.len() == 1);
            Box::new(Comprehensive::new(monitor, beta, interval_ms, named.map(|p| p.0)))
        }
        "numa:model" => {
            let number = |key: &str, default: &str, ok: fn(f64) -> bool, must: &str| {
                params.number(key, default, ok, must)
            };
            Box::new(NumaModel::new(
                number("node_bw_gbps", "25.6", |x| x > 0.0, "a positive number")?,
                number("shared", "0.5", |x| (0.0..=1.0).contains(&x), "in [0, 1]")?,
            ))
        }
        "cosched:fair" => {
            let slots =
                match params.str_or("slots", "cpus") {
                    "cpus" => None,
                    v => Some(v.parse::<usize>().ok().filter(|&n| n >= 1).ok_or_else(|| {
                        PolicyError::Param {
                            policy: info.name.into(),
                            why: format!("slots={v} is not a whole number >= 1"),
                        }
                    })?),
                };
            Box::new(CoschedFair::new(slots))
        }
        other => unreachable!("catalog entry {other} has no constructor"),
    })
}

/// Helpers for the policies' unit tests.
#[cfg(test)]
pub(crate) mod testkit {
    use super::*;

    /// One decision of `p` on `m` and `snap`, with nothing estimated or learned.
    pub(crate) fn decide_once(p: &mut dyn Policy, m: &herd_topo::Machine, snap: &Snapshot) -> Plan {
        let (est, know) = (Estimates::default(), Knowledge::default());
        p.decide(&View {
            machine: m,
            snapshot: snap,
            estimates: &est,
            learned: &know,
            oracle: None,
            seed: 1,
            decision: 0,
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

    #[test]
    fn rng_is_deterministic() {
        let mut a = Rng::new(7);
        let mut b = Rng::new(7);
        let xs: Vec<u64> = (0..5).map(|_| a.next_u64()).collect();
        assert_eq!(xs, (0..5).map(|_| b.next_u64()).collect::<Vec<_>>());
        assert!((0..1000).map(|_| a.next_f64()).all(|x| (0.0..1.0).contains(&x)));
    }
}
