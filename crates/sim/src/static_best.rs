//! S4's static best: PALM with the one fixed period that does best on this
//! workload, found offline by trying every period. A reference, not a
//! policy one could run on a new program: it needs the runs first.
//!
//! `static-best:pack:palm[:params]` in a scenario's policies (or `herd sim
//! --policy`) runs `pack:palm[:params],period_us=P` for every P of the
//! controller's range (`herd_policy::static_best_periods_us`: 125 µs
//! doubling to 64 ms by default), and reports the best run: the shortest
//! makespan, or in a consolidation study the most batch work.

use herd_policy::PolicyError;

/// The prefix that asks for it.
pub const PREFIX: &str = "static-best:";

/// What `name` asks for: `None` for a catalog policy, else the PALM spec
/// to find the static best of and the periods (µs) to try; an error if
/// that spec is not PALM's or fixes the period itself.
pub fn inner(name: &str) -> Result<Option<(&str, Vec<f64>)>, PolicyError> {
    let Some(inner) = name.strip_prefix(PREFIX) else {
        return Ok(None);
    };
    Ok(Some((inner, herd_policy::static_best_periods_us(inner)?)))
}

/// Checks a policy name as `herd sim` takes it: a catalog policy or a
/// static-best of one.
pub fn check(name: &str) -> Result<(), PolicyError> {
    match inner(name)? {
        Some(_) => Ok(()),
        None => herd_policy::build(name).map(|_| ()),
    }
}

/// `inner` with a fixed period.
pub fn with_period(inner: &str, period_us: f64) -> String {
    let sep = if inner == "pack:palm" { ":" } else { "," };
    format!("{inner}{sep}period_us={period_us}")
}

#[cfg(test)]
mod tests {
    use super::*;

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
        assert!(check("static-best:nope").is_err());
        assert!(check("linux").is_ok());
        let (_, p) = inner("static-best:pack:palm:min_period_us=1000,max_period_ms=4")
            .unwrap()
            .unwrap();
        assert_eq!(p, vec![1000.0, 2000.0, 4000.0]);
        assert_eq!(with_period("pack:palm", 250.0), "pack:palm:period_us=250");
        assert_eq!(
            with_period("pack:palm:cores=3", 250.0),
            "pack:palm:cores=3,period_us=250"
        );
        assert!(herd_policy::build(&with_period("pack:palm:cores=3", 250.0)).is_ok());
    }
}
