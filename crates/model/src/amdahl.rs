//! How many units a program should get (S0 §2.3): Amdahl's law, the serial
//! fraction fitted from measured speedups, and the energy rule.
//!
//! With serial fraction S, N units give S_N = 1 / (S + (1 - S) / N). One
//! measured point gives S = (N - S_N) / (S_N (N - 1)). Several points are
//! fitted by least squares on the linear form 1/S_N - 1/N = S (1 - 1/N),
//! which the one-point formula solves exactly.
//!
//! Units need not be equal: an SMT sibling adds sigma of a core (S0). The
//! functions take the *capacity* of N units (N full cores give N; S0's
//! 2 siblings give 1 + sigma) where Amdahl's N stands.

/// Amdahl's speedup with serial fraction `s` on `capacity` (in full cores).
pub fn speedup(s: f64, capacity: f64) -> f64 {
    1.0 / (s + (1.0 - s) / capacity.max(f64::MIN_POSITIVE))
}

/// One measured point: the serial fraction that gives `speedup` on
/// `capacity` > 1. Clamped to [0, 1].
pub fn serial_fraction(capacity: f64, speedup: f64) -> Option<f64> {
    fit_serial_fraction(&[(capacity, speedup)])
}

/// Least-squares serial fraction from (capacity, speedup) points; points at
/// capacity 1 or below carry no information and are skipped. `None` when no
/// point is left or a speedup is not positive.
pub fn fit_serial_fraction(points: &[(f64, f64)]) -> Option<f64> {
    let (mut sxy, mut sxx) = (0.0, 0.0);
    for &(n, sn) in points {
        if !(sn > 0.0 && sn.is_finite() && n.is_finite()) {
            return None;
        }
        if n <= 1.0 + 1e-9 {
            continue;
        }
        let x = 1.0 - 1.0 / n;
        let y = 1.0 / sn - 1.0 / n;
        sxy += x * y;
        sxx += x * x;
    }
    (sxx > 0.0).then(|| (sxy / sxx).clamp(0.0, 1.0))
}

/// Amdahl fitted to measured run times: from (capacity, seconds) points,
/// the one-unit time t1 and serial fraction S of t(c) = t1 (S + (1 - S)/c),
/// by least squares on its linear form t = a + b/c (t1 = a + b,
/// S = a / t1). Needs two distinct capacities; a run at one unit is not
/// required. `None` when the points cannot be fitted.
pub fn fit_times(points: &[(f64, f64)]) -> Option<(f64, f64)> {
    let n = points.len() as f64;
    if !points
        .iter()
        .all(|&(c, t)| c > 0.0 && t > 0.0 && c.is_finite() && t.is_finite())
    {
        return None;
    }
    let x: Vec<f64> = points.iter().map(|&(c, _)| 1.0 / c).collect();
    let mx = x.iter().sum::<f64>() / n;
    let mt = points.iter().map(|&(_, t)| t).sum::<f64>() / n;
    let sxx: f64 = x.iter().map(|&xi| (xi - mx) * (xi - mx)).sum();
    if sxx <= 1e-12 {
        return None;
    }
    let sxt: f64 = x
        .iter()
        .zip(points)
        .map(|(&xi, &(_, t))| (xi - mx) * (t - mt))
        .sum();
    let b = sxt / sxx;
    let a = mt - b * mx;
    let t1 = a + b;
    (t1 > 0.0).then(|| (t1, (a / t1).clamp(0.0, 1.0)))
}

/// The fewest units whose predicted speedup is within `tolerance` (a
/// fraction, e.g. 0.05) of the best over all candidates. `capacities[i]` is
/// the capacity of i + 1 units in the policy's order. Returns a unit count
/// (1-based); 1 for an empty list.
pub fn units_for_speed(s: f64, capacities: &[f64], tolerance: f64) -> usize {
    let best = capacities.iter().map(|&c| speedup(s, c)).fold(0.0, f64::max);
    capacities
        .iter()
        .position(|&c| speedup(s, c) >= (1.0 - tolerance) * best)
        .map_or(1, |i| i + 1)
}

/// The unit count with the least energy: time t_N = t_1 / S_N at power
/// `power_w[i]` for i + 1 units. Adding units pays off only while
/// (P0 + dP)(t0 - dt) < P0 t0 (S0), which comparing energies decides for
/// every count at once. Returns a unit count (1-based); 1 for an empty list.
pub fn units_for_energy(s: f64, capacities: &[f64], power_w: &[f64]) -> usize {
    capacities
        .iter()
        .zip(power_w)
        .map(|(&c, &p)| p / speedup(s, c))
        .enumerate()
        .min_by(|a, b| a.1.total_cmp(&b.1))
        .map_or(1, |(i, _)| i + 1)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_point_inverts_amdahl() {
        for s in [0.0, 0.05, 0.1, 0.5] {
            for n in [2.0, 4.0, 12.0] {
                let got = serial_fraction(n, speedup(s, n)).unwrap();
                assert!((got - s).abs() < 1e-12, "s={s} n={n}: {got}");
            }
        }
        // S0's formula written out: S = (N - S_N) / (S_N (N - 1)).
        let (n, sn) = (12.0, 6.48);
        assert!((serial_fraction(n, sn).unwrap() - (n - sn) / (sn * (n - 1.0))).abs() < 1e-12);
    }

    #[test]
    fn least_squares_recovers_s_from_noisy_points() {
        let s = 0.07;
        let points: Vec<(f64, f64)> = [2.0, 4.0, 8.0, 16.0]
            .iter()
            .zip([1.01, 0.99, 1.02, 0.98])
            .map(|(&n, noise)| (n, speedup(s, n) * noise))
            .collect();
        let got = fit_serial_fraction(&points).unwrap();
        assert!((got - s).abs() < 0.01, "{got}");
        assert_eq!(fit_serial_fraction(&[(1.0, 1.0)]), None, "one unit says nothing");
        assert_eq!(fit_serial_fraction(&[(4.0, -1.0)]), None);
    }

    #[test]
    fn times_fit_without_a_one_unit_run() {
        let (t1, s) = (100.0, 0.08);
        let at = |c: f64| t1 * (s + (1.0 - s) / c);
        let (ft1, fs) = fit_times(&[(2.0, at(2.0)), (4.0, at(4.0)), (8.0, at(8.0))]).unwrap();
        assert!((ft1 - t1).abs() < 1e-9 && (fs - s).abs() < 1e-12, "{ft1} {fs}");
        // Two points, one of them at one unit: S0's one-point formula.
        let (_, fs) = fit_times(&[(1.0, 10.0), (4.0, 4.0)]).unwrap();
        assert!((fs - serial_fraction(4.0, 2.5).unwrap()).abs() < 1e-12);
        assert_eq!(
            fit_times(&[(4.0, 1.0), (4.0, 2.0)]),
            None,
            "one capacity says nothing"
        );
        assert_eq!(fit_times(&[(1.0, 1.0)]), None);
    }

    #[test]
    fn unit_choices_follow_the_curve() {
        let caps: Vec<f64> = (1..=16).map(f64::from).collect();
        // Perfectly parallel: every unit helps.
        assert_eq!(units_for_speed(0.0, &caps, 0.0), 16);
        // S = 0.1: 16 units give 6.4x; 13 are the fewest within 10% of it
        // (5.76x needs 0.9/N <= 0.0736), 10 within 20%.
        assert_eq!(units_for_speed(0.1, &caps, 0.10), 13);
        assert_eq!(units_for_speed(0.1, &caps, 0.20), 10);
        // Energy: a big idle power rewards finishing fast; a unit that costs
        // more than it saves is not added.
        let flat: Vec<f64> = (1..=16).map(|i| 100.0 + f64::from(i)).collect();
        assert_eq!(units_for_energy(0.0, &caps, &flat), 16);
        let steep: Vec<f64> = (1..=16).map(|i| 10.0 + 50.0 * f64::from(i)).collect();
        assert_eq!(units_for_energy(0.5, &caps, &steep), 1);
    }
}
