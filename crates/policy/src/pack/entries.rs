//! The registry entries of `pack:palm`, `pack:tp` and `pack:tr`, and
//! PALM's controller from its parameters.

use super::{Controller, DEFAULT_EPOCH_BEATS, DEFAULT_EPOCH_US, DEFAULT_TOLERANCE, Pack, Packing};
use crate::param::{Accepts, Args, Entry, Param, PolicyError, Range, Value};
use crate::{Policy, PolicySpec};

/// A number parameter in `range`, or one of `words`.
const fn number(key: &'static str, default: Value, range: Range, words: &'static [&'static str], about: &'static str) -> Param {
    Param {
        key,
        default,
        accepts: Accepts::Number { range, words },
        about,
    }
}

/// `cores`, with what it means for the policy.
const fn cores(about: &'static str) -> Param {
    number("cores", Value::Word("all"), Range::whole(1, u64::MAX), &["all"], about)
}

/// A period in µs, up to a minute (a longer one is a typo: 1e308 µs would
/// saturate the controller's nanoseconds).
const PERIOD_US: Range = Range::from(0.0, true, 6e7, false);
/// A period in ms, up to a minute.
const PERIOD_MS: Range = Range::from(0.0, true, 6e4, false);

/// Registry entry: `pack:palm`.
pub(crate) const PACK_PALM: Entry = Entry {
    name: "pack:palm",
    about: "S4 PALM: threads packed on K cores, least progress to most capacity per thread, adaptive period",
    params: &[
        cores("K: how many cores the job gets (the first K in compact order)"),
        number(
            "min_period_us",
            Value::Number(125.0),
            PERIOD_US,
            &[],
            "the period the controller starts at and never goes below",
        ),
        number(
            "max_period_ms",
            Value::Number(64.0),
            PERIOD_MS,
            &[],
            "the longest period the controller doubles to",
        ),
        number(
            "epoch_us",
            Value::Number(DEFAULT_EPOCH_US),
            Range::NON_NEGATIVE,
            &[],
            "the controller's shortest epoch: it compares progress over at least this long (0: one period, S4's; see pack::DEFAULT_EPOCH_US)",
        ),
        number(
            "epoch_beats",
            Value::Number(DEFAULT_EPOCH_BEATS as f64),
            Range::whole(0, u64::MAX),
            &[],
            "heartbeats per thread an epoch waits for at least (0: none, S4's)",
        ),
        number(
            "climb",
            Value::Number(1.0),
            Range::whole(0, 1),
            &[],
            "hill climbing: a better epoch repeats the last move, a worse one undoes it (0: double when better, halve when worse, S4's)",
        ),
        number(
            "tolerance",
            Value::Number(DEFAULT_TOLERANCE),
            Range::UNIT_OPEN,
            &[],
            "relative change in progress rate within which the controller keeps the period (0: S4's)",
        ),
        number(
            "period_us",
            Value::Word("adaptive"),
            PERIOD_US,
            &["adaptive"],
            "a fixed period, the controller off (S4's static best: the period found offline; herd sim's static-best: prefix finds it)",
        ),
        number(
            "barrier_beats",
            Value::Word("auto"),
            Range::whole(0, u64::MAX),
            &["auto"],
            "the beats each thread makes between barriers: with heartbeats, more threads than cores and identical cores, run McNaughton's schedule of the work left to the next barrier through lanes (live: SCHED_FIFO, needs --realtime; the job's threads then run ahead of normal processes on its K cores) instead of the groups' turns. auto: learned from the heartbeats of one job's threads (no thread passes a barrier its laggard has not reached), and the plan runs only where lanes take effect, with fewer than two threads a core and pieces of at least two beats (--explain says what was learned); 0: off",
        ),
    ],
    build: |a| {
        let pack = Pack::new(Packing::Palm, job_cores(a), controller(a));
        match a.number("barrier_beats") {
            None => Box::new(pack.with_learned_barriers()),
            Some(n) => Box::new(pack.with_barrier_beats(n as u64)),
        }
    },
    check: Some(|a| {
        // A controller whose floor is above its ceiling would silently run
        // at one fixed period: say so instead.
        let (min_us, max_ms) = (a.real("min_period_us"), a.real("max_period_ms"));
        if a.number("period_us").is_none() && min_us > max_ms * 1e3 {
            return Err(format!(
                "min_period_us={min_us} is above max_period_ms={max_ms} ({} us): for a fixed period use period_us",
                max_ms * 1e3
            ));
        }
        Ok(())
    }),
};

/// Registry entry: `pack:tp`.
pub(crate) const PACK_TP: Entry = Entry {
    name: "pack:tp",
    about: "thread packing (S4's TP): every thread may run on the K cores, Linux balances",
    params: &[cores("K: how many cores the job gets")],
    build: |a| baseline(Packing::Tp, a),
    check: None,
};

/// Registry entry: `pack:tr`.
pub(crate) const PACK_TR: Entry = Entry {
    name: "pack:tr",
    about: "thread reduction (S4's TR): K threads on K cores (run with herd run --threads K)",
    params: &[cores("K: how many cores and threads")],
    build: |a| baseline(Packing::Tr, a),
    check: None,
};

/// `cores`: `None` for all.
fn job_cores(a: &Args) -> Option<usize> {
    a.number("cores").map(|k| k as usize)
}

/// S4's baselines, which have no controller.
fn baseline(kind: Packing, a: &Args) -> Box<dyn Policy> {
    Box::new(Pack::new(kind, job_cores(a), Controller::default()))
}

/// PALM's controller from its parameters.
fn controller(a: &Args) -> Controller {
    let ns = |us: f64| ((us * 1e3) as u64).max(1);
    if let Some(p) = a.number("period_us") {
        // A fixed period: the controller's bounds meet.
        return Controller::fixed(ns(p));
    }
    Controller {
        min_period_ns: ns(a.real("min_period_us")),
        max_period_ns: ns(a.real("max_period_ms") * 1e3),
        min_epoch_ns: (a.real("epoch_us") * 1e3) as u64,
        tolerance: a.real("tolerance"),
        epoch_beats: a.real("epoch_beats") as u64,
        climb: a.real("climb") == 1.0,
    }
}

/// The periods S4's static best tries for `spec`, a `pack:palm` spec
/// without `period_us`: its controller's range, doubling, in µs.
pub fn static_best_periods_us(spec: &PolicySpec) -> Result<Vec<f64>, PolicyError> {
    let why = if spec.entry().name != PACK_PALM.name {
        format!("static-best finds a period for pack:palm, not for {}", spec.name())
    } else if spec.args().number("period_us").is_some() {
        "static-best chooses period_us itself".into()
    } else {
        return Ok(controller(spec.args()).periods_us());
    };
    Err(PolicyError::Param {
        policy: spec.to_string(),
        why,
    })
}
