//! How many units a program should get (S0 §2.3), from its recorded runs:
//! the glue between the profile store's run records, Amdahl's fit
//! (`herd_model::amdahl`), the policies' unit orders and the power model.
//! Used by `herd run --threads auto` and `herd db show`.

use herd_model::{PowerModel, amdahl};
use herd_store::RunRecord;
use herd_topo::Machine;
use serde::Serialize;

/// The unit order a policy hands out: S0's SPN-first order for `smt:spn`,
/// else strongest units first (Linux's order, and `smt:speed`'s).
pub fn order_for(m: &Machine, policy: &str) -> Vec<u32> {
    if policy.starts_with("smt:spn") {
        herd_policy::order::spn_first(m)
    } else {
        herd_policy::order::speed_first(m)
    }
}

/// Runs at one unit count.
#[derive(Debug, Clone, Serialize)]
pub struct UnitRuns {
    /// Units asked for (`--threads`), else the most threads seen.
    pub units: u32,
    /// Completed runs (exit code 0).
    pub runs: usize,
    /// Median wall time.
    pub median_s: f64,
    /// Median machine energy: RAPL where measured, else the model's.
    pub energy_j: Option<f64>,
    /// Whether `energy_j` was measured (RAPL) rather than modelled.
    pub energy_measured: bool,
    /// Capacity of that many units in the order of the runs' policy.
    pub capacity: f64,
}

/// One unit count predicted from the fit.
#[derive(Debug, Clone, Serialize)]
pub struct Prediction {
    /// Units.
    pub units: u32,
    /// Their capacity in full cores.
    pub capacity: f64,
    /// Predicted wall time.
    pub time_s: f64,
    /// The power model's machine power with those units busy.
    pub power_w: f64,
    /// time x power.
    pub energy_j: f64,
    /// Physical cores the units span.
    pub physical_cores: usize,
    /// Speedup over one unit.
    pub speedup: f64,
    /// 1000 speedup / (power x physical cores).
    pub spn: f64,
}

/// What the runs say about a program.
#[derive(Debug, Clone, Serialize)]
pub struct Curve {
    /// Runs grouped by unit count.
    pub by_units: Vec<UnitRuns>,
    /// The Amdahl fit: serial fraction and one-unit time, when two or more
    /// unit counts completed.
    pub serial_fraction: Option<f64>,
    /// One-unit time from the fit.
    pub one_unit_s: Option<f64>,
    /// Predictions for 1..=CPUs units in the order of `policy`.
    pub predictions: Vec<Prediction>,
    /// The fewest units within `tolerance` of the best predicted speedup.
    pub for_speed: Option<u32>,
    /// The units with the least predicted energy.
    pub for_energy: Option<u32>,
    /// S0's σ the unit capacities were computed with: `herd calibrate`'s
    /// measurement on this machine where one is stored, else S0's 0.3.
    pub smt_sigma: f64,
}

/// Fits `runs` on machine `m` and predicts every unit count for `policy`.
/// `sigma`: what two busy SMT siblings deliver beyond one (S0's σ).
pub fn curve(
    m: &Machine,
    runs: &[RunRecord],
    policy: &str,
    power: &PowerModel,
    tolerance: f64,
    sigma: f64,
) -> Curve {
    let mut groups: std::collections::BTreeMap<u32, Vec<&RunRecord>> = Default::default();
    for r in runs.iter().filter(|r| r.exit_code == Some(0) && r.wall_s > 0.0) {
        let units = r.units.unwrap_or(r.threads).max(1);
        groups.entry(units).or_default().push(r);
    }
    let by_units: Vec<UnitRuns> = groups
        .iter()
        .map(|(&units, rs)| {
            // Capacity in the order of the policy most of these runs used.
            let caps = herd_policy::order::unit_capacities(m, &order_for(m, &rs[rs.len() / 2].policy), sigma);
            let measured: Vec<f64> = rs.iter().filter_map(|r| r.energy_j).collect();
            let modelled: Vec<f64> = rs.iter().filter_map(|r| r.model_energy_j).collect();
            let (energy_j, energy_measured) = if !measured.is_empty() {
                (Some(herd_model::median(measured)), true)
            } else if !modelled.is_empty() {
                (Some(herd_model::median(modelled)), false)
            } else {
                (None, false)
            };
            UnitRuns {
                units,
                runs: rs.len(),
                median_s: herd_model::median(rs.iter().map(|r| r.wall_s).collect()),
                energy_j,
                energy_measured,
                capacity: caps
                    .get(units as usize - 1)
                    .copied()
                    .unwrap_or_else(|| caps.last().copied().unwrap_or(1.0)),
            }
        })
        .collect();
    let points: Vec<(f64, f64)> = by_units.iter().map(|u| (u.capacity, u.median_s)).collect();
    let fit = amdahl::fit_times(&points);
    let order = order_for(m, policy);
    let caps = herd_policy::order::unit_capacities(m, &order, sigma);
    let mut predictions = Vec::new();
    if let Some((t1, s)) = fit {
        // The first n units: each step adds one CPU and maybe its core.
        let mut busy = std::collections::BTreeSet::new();
        let mut cores = std::collections::BTreeSet::new();
        for n in 1..=order.len() {
            busy.insert(order[n - 1]);
            cores.extend(m.cpu(order[n - 1]).map(|c| c.core));
            let power_w = power.busy_power_w(m, &|c| if busy.contains(&c) { 1.0 } else { 0.0 });
            let speedup = amdahl::speedup(s, caps[n - 1]);
            let time_s = t1 / speedup;
            predictions.push(Prediction {
                units: n as u32,
                capacity: caps[n - 1],
                time_s,
                power_w,
                energy_j: time_s * power_w,
                physical_cores: cores.len(),
                speedup,
                spn: 1000.0 * speedup / (power_w * cores.len() as f64),
            });
        }
    }
    let (for_speed, for_energy) = match fit {
        Some((_, s)) if !predictions.is_empty() => {
            let powers: Vec<f64> = predictions.iter().map(|p| p.power_w).collect();
            (
                Some(amdahl::units_for_speed(s, &caps, tolerance) as u32),
                Some(amdahl::units_for_energy(s, &caps, &powers) as u32),
            )
        }
        _ => (None, None),
    };
    Curve {
        by_units,
        serial_fraction: fit.map(|f| f.1),
        one_unit_s: fit.map(|f| f.0),
        predictions,
        for_speed,
        for_energy,
        smt_sigma: sigma,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(units: u32, wall_s: f64) -> RunRecord {
        RunRecord {
            program: "p".into(),
            policy: "smt:speed".into(),
            started_unix_s: 0.0,
            wall_s,
            cpu_s: wall_s,
            threads: units,
            exit_code: Some(0),
            herd_cpu_s: 0.0,
            units: Some(units),
            energy_j: None,
            model_energy_j: None,
        }
    }

    /// Issue 26: the unit capacities, and so the predictions and the unit
    /// choice, follow the σ given (a measured one where `herd calibrate`
    /// stored it): units past the full cores add σ of a core each.
    #[test]
    fn sibling_units_add_sigma_of_a_core() {
        let m = Machine::synthetic("package:1 core:2 pu:2").unwrap();
        let runs = [run(1, 10.0), run(2, 5.5)];
        let power = PowerModel::default();
        let low = curve(&m, &runs, "smt:speed", &power, 0.05, 0.1);
        let high = curve(&m, &runs, "smt:speed", &power, 0.05, 0.5);
        assert_eq!((low.smt_sigma, high.smt_sigma), (0.1, 0.5));
        let cap = |c: &Curve, n: usize| c.predictions[n - 1].capacity;
        // Two full cores first (smt:speed), then the siblings.
        assert!((cap(&low, 2) - 2.0).abs() < 1e-9 && (cap(&high, 2) - 2.0).abs() < 1e-9);
        assert!((cap(&low, 4) - 2.2).abs() < 1e-9, "{}", cap(&low, 4));
        assert!((cap(&high, 4) - 3.0).abs() < 1e-9, "{}", cap(&high, 4));
        assert!(high.predictions[3].time_s < low.predictions[3].time_s);
    }
}
