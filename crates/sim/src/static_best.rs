//! What `herd sim` runs: a catalogue policy, S4's static best, or
//! `linux:2.6`, the baseline with the kernel model of S3's Linux 2.6.27
//! (`herd_model::KernelModel::Linux26`) whatever the scenario's
//! `model.kernel` says: a second baseline to compare against.
//!
//! S4's static best is PALM with the one fixed period that does best on
//! this workload, found offline by trying every period. A reference, not a
//! policy one could run on a new program: it needs the runs first.
//! `static-best:pack:palm[:params]` in a scenario's policies (or `herd sim
//! --policy`) runs `pack:palm[:params],period_us=P` for every P of the
//! controller's range (`herd_policy::static_best_periods_us`: 125 µs
//! doubling to 64 ms by default), and reports the best run: the shortest
//! makespan, or in a consolidation study the most batch work.

use std::fmt;
use std::str::FromStr;

use herd_policy::{PolicyError, PolicySpec, Value};

/// The prefix that asks for the static best.
pub const PREFIX: &str = "static-best:";

/// The name of the 2.6.27 baseline.
pub const LINUX_26: &str = "linux:2.6";

/// A policy as `herd sim` takes it, parsed once where it is read.
#[derive(Debug, Clone, PartialEq)]
pub enum SimPolicy {
    /// A catalogue policy.
    Spec(PolicySpec),
    /// S4's static best of a `pack:palm` spec that leaves the period open.
    StaticBest(PolicySpec),
    /// Plain Linux under the 2.6.27 kernel model.
    Linux26,
}

impl SimPolicy {
    /// The baseline, `linux`.
    pub fn linux() -> SimPolicy {
        SimPolicy::Spec(PolicySpec::linux())
    }

    /// Whether this is the baseline.
    pub fn is_baseline(&self) -> bool {
        matches!(self, SimPolicy::Spec(s) if s.is_baseline())
    }

    /// The catalogue policy, or `None` for a static best or `linux:2.6`
    /// (a different world rather than a policy).
    pub fn spec(&self) -> Option<&PolicySpec> {
        match self {
            SimPolicy::Spec(s) => Some(s),
            SimPolicy::StaticBest(_) | SimPolicy::Linux26 => None,
        }
    }
}

/// `spec` with a fixed period.
pub fn with_period(spec: &PolicySpec, period_us: f64) -> Result<PolicySpec, PolicyError> {
    spec.with("period_us", Value::Number(period_us))
}

impl FromStr for SimPolicy {
    type Err = PolicyError;
    /// A catalogue spec, or `static-best:` and a PALM spec; an error if
    /// that spec is not PALM's or fixes the period itself.
    fn from_str(text: &str) -> Result<SimPolicy, PolicyError> {
        if text == LINUX_26 {
            return Ok(SimPolicy::Linux26);
        }
        match text.strip_prefix(PREFIX) {
            None => Ok(SimPolicy::Spec(PolicySpec::parse(text)?)),
            Some(inner) => {
                let spec = PolicySpec::parse(inner)?;
                // Refused here, where the text is read, if it is not PALM's
                // or fixes the period itself.
                herd_policy::static_best_periods_us(&spec)?;
                Ok(SimPolicy::StaticBest(spec))
            }
        }
    }
}

impl fmt::Display for SimPolicy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SimPolicy::Spec(s) => write!(f, "{s}"),
            SimPolicy::StaticBest(s) => write!(f, "{PREFIX}{s}"),
            SimPolicy::Linux26 => f.write_str(LINUX_26),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn inner(text: &str) -> Result<Option<(String, Vec<f64>)>, PolicyError> {
        Ok(match text.parse::<SimPolicy>()? {
            SimPolicy::Spec(_) | SimPolicy::Linux26 => None,
            SimPolicy::StaticBest(s) => Some((s.to_string(), herd_policy::static_best_periods_us(&s)?)),
        })
    }

    #[test]
    fn the_prefix_takes_palm_only_and_tries_its_controllers_range() {
        assert!(inner("pack:palm").unwrap().is_none());
        let (spec, p) = inner("static-best:pack:palm:cores=15").unwrap().unwrap();
        assert_eq!(spec, "pack:palm:cores=15");
        assert_eq!((p[0], p.len(), *p.last().unwrap()), (125.0, 10, 64_000.0));
        assert!(
            inner("static-best:pack:tp")
                .unwrap_err()
                .to_string()
                .contains("not for pack:tp")
        );
        assert!(inner("static-best:pack:palm:period_us=5").is_err());
        assert!("static-best:nope".parse::<SimPolicy>().is_err());
        assert!("linux".parse::<SimPolicy>().is_ok());
        let (_, p) = inner("static-best:pack:palm:min_period_us=1000,max_period_ms=4")
            .unwrap()
            .unwrap();
        assert_eq!(p, vec![1000.0, 2000.0, 4000.0]);
        let palm = |t: &str| PolicySpec::parse(t).unwrap();
        assert_eq!(
            with_period(&palm("pack:palm"), 250.0).unwrap().to_string(),
            "pack:palm:period_us=250"
        );
        assert_eq!(
            with_period(&palm("pack:palm:cores=3"), 250.0)
                .unwrap()
                .to_string(),
            "pack:palm:cores=3,period_us=250"
        );
        assert!(
            herd_policy::build(
                &with_period(&palm("pack:palm:cores=3"), 250.0)
                    .unwrap()
                    .to_string()
            )
            .is_ok()
        );
    }
}
