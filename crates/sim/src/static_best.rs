//! S4's static best: PALM with the one fixed period that does best on this
//! workload, found offline by trying every period. A reference, not a
//! policy one could run on a new program: it needs the runs first.
//!
//! `static-best:pack:palm[:params]` in a scenario's policies (or `herd sim
//! --policy`) runs `pack:palm[:params],period_us=P` for P from the
//! controller's shortest period (`min_period_us`, 125 µs) doubling up to
//! its longest (`max_period_ms`, 64 ms), and reports the best run: the
//! shortest makespan, or in a consolidation study the most batch work.

use herd_policy::PolicyError;

/// The prefix that asks for it.
pub const PREFIX: &str = "static-best:";

/// The policy `name` asks to find the static best of, if it does; an error
/// if that policy is not one with a period (PALM).
pub fn inner(name: &str) -> Result<Option<&str>, PolicyError> {
    let Some(inner) = name.strip_prefix(PREFIX) else {
        return Ok(None);
    };
    let p = herd_policy::build(inner)?;
    if !p.name().starts_with("pack:palm") {
        return Err(PolicyError::Param {
            policy: name.into(),
            why: format!("static-best finds a period for pack:palm, not for {}", p.name()),
        });
    }
    if inner.contains("period_us=") {
        return Err(PolicyError::Param {
            policy: name.into(),
            why: "static-best chooses period_us itself".into(),
        });
    }
    Ok(Some(inner))
}

/// Checks a policy name as `herd sim` takes it: a catalog policy or a
/// static-best of one.
pub fn check(name: &str) -> Result<(), PolicyError> {
    match inner(name)? {
        Some(_) => Ok(()),
        None => herd_policy::build(name).map(|_| ()),
    }
}

/// The periods to try for `inner` (a PALM spec without `period_us`), in µs:
/// its controller's range, doubling.
pub fn periods_us(inner: &str) -> Vec<f64> {
    let param = |key: &str, default: f64| {
        inner
            .split([':', ','])
            .find_map(|kv| kv.strip_prefix(key)?.strip_prefix('=')?.parse::<f64>().ok())
            .unwrap_or(default)
    };
    let (lo, hi) = (param("min_period_us", 125.0), param("max_period_ms", 64.0) * 1e3);
    let mut out = Vec::new();
    let mut p = lo;
    while p <= hi * (1.0 + 1e-9) {
        out.push(p);
        p *= 2.0;
    }
    out
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
        assert_eq!(inner("pack:palm").unwrap(), None);
        assert_eq!(
            inner("static-best:pack:palm:cores=15").unwrap(),
            Some("pack:palm:cores=15")
        );
        assert!(inner("static-best:pack:tp").is_err());
        assert!(inner("static-best:pack:palm:period_us=5").is_err());
        assert!(check("static-best:nope").is_err());
        assert!(check("linux").is_ok());
        let p = periods_us("pack:palm");
        assert_eq!((p[0], p.len(), *p.last().unwrap()), (125.0, 10, 64_000.0));
        assert_eq!(
            periods_us("pack:palm:min_period_us=1000,max_period_ms=4"),
            vec![1000.0, 2000.0, 4000.0]
        );
        assert_eq!(with_period("pack:palm", 250.0), "pack:palm:period_us=250");
        assert_eq!(
            with_period("pack:palm:cores=3", 250.0),
            "pack:palm:cores=3,period_us=250"
        );
        assert!(herd_policy::build(&with_period("pack:palm:cores=3", 250.0)).is_ok());
    }
}
