//! S0's node power model: idle + per active package + per active core +
//! per extra busy sibling.

use serde::{Deserialize, Serialize};

/// Node power as S0 measures it. A package is active when any of its CPUs
/// is busy; a core when any of its siblings is; every busy sibling beyond
/// the first of its core adds `sibling_w`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PowerModel {
    /// The node with nothing running (S0's Pn).
    pub idle_w: f64,
    /// Added by the first active package.
    pub first_package_w: f64,
    /// Added by each further active package.
    pub next_package_w: f64,
    /// Added by each active core (S0's Pc).
    pub core_w: f64,
    /// Added by each busy sibling beyond a core's first (S0's Pt).
    pub sibling_w: f64,
    /// Per-kind core power, weakest kind first, replacing `core_w` on
    /// hybrid machines when given.
    #[serde(default)]
    pub core_w_by_kind: Option<Vec<f64>>,
}

impl PowerModel {
    /// S0's Dell C6100 node, 2x Xeon L5520 (4 cores, 8 threads each):
    /// Pn 76.11 W, first package +35.61, second +14.77, Pc 9.68, Pt 2.61.
    pub fn dell_c6100() -> Self {
        PowerModel {
            idle_w: 76.11,
            first_package_w: 35.61,
            next_package_w: 14.77,
            core_w: 9.68,
            sibling_w: 2.61,
            core_w_by_kind: None,
        }
    }

    /// S0's HP DK388P node, 2x Xeon E5-2667 (6 cores, 12 threads each):
    /// Pn 106.41 W, first package +43.90, second +35.58, Pc 11.13, Pt 2.83.
    pub fn hp_dk388p() -> Self {
        PowerModel {
            idle_w: 106.41,
            first_package_w: 43.90,
            next_package_w: 35.58,
            core_w: 11.13,
            sibling_w: 2.83,
            core_w_by_kind: None,
        }
    }

    /// A preset by name: `dell-c6100` or `hp-dk388p`.
    pub fn preset(name: &str) -> Option<Self> {
        match name {
            "dell-c6100" => Some(Self::dell_c6100()),
            "hp-dk388p" => Some(Self::hp_dk388p()),
            _ => None,
        }
    }

    /// Node power with `packages` active packages, `cores_by_kind[k]`
    /// active cores of kind k, and `extra_siblings` busy siblings beyond
    /// each core's first.
    pub fn power_w(&self, packages: usize, cores_by_kind: &[usize], extra_siblings: usize) -> f64 {
        let pkg = if packages == 0 {
            0.0
        } else {
            self.first_package_w + self.next_package_w * (packages - 1) as f64
        };
        let cores: f64 = cores_by_kind
            .iter()
            .enumerate()
            .map(|(k, &n)| {
                let w = self
                    .core_w_by_kind
                    .as_ref()
                    .and_then(|v| v.get(k))
                    .copied()
                    .unwrap_or(self.core_w);
                w * n as f64
            })
            .sum();
        self.idle_w + pkg + cores + self.sibling_w * extra_siblings as f64
    }

    /// Node power on machine `m` when CPU `os` is busy a fraction
    /// `busy(os)` of the time (0..=1): S0's model with fractional
    /// activity. A core counts as active for its busiest sibling's
    /// fraction and its other siblings' busy time counts as extra siblings;
    /// a package as active for its busiest core's fraction, the most
    /// active package paying `first_package_w`. Whole fractions give
    /// exactly [`PowerModel::power_w`].
    pub fn busy_power_w(&self, m: &herd_topo::Machine, busy: &dyn Fn(u32) -> f64) -> f64 {
        let mut package_active = vec![0.0f64; m.packages().len()];
        let mut cores_w = 0.0;
        let mut extra = 0.0;
        for core in m.cores() {
            let (mut top, mut sum) = (0.0f64, 0.0);
            for f in core.cpus.iter().map(|c| busy(c).clamp(0.0, 1.0)) {
                top = top.max(f);
                sum += f;
            }
            extra += sum - top;
            let w = self
                .core_w_by_kind
                .as_ref()
                .and_then(|v| v.get(core.kind))
                .copied()
                .unwrap_or(self.core_w);
            cores_w += w * top;
            let p = &mut package_active[core.package];
            *p = p.max(top);
        }
        package_active.sort_by(|a, b| b.total_cmp(a));
        let packages_w: f64 = package_active
            .iter()
            .enumerate()
            .map(|(i, &a)| {
                a * if i == 0 {
                    self.first_package_w
                } else {
                    self.next_package_w
                }
            })
            .sum();
        self.idle_w + packages_w + cores_w + self.sibling_w * extra
    }
}

impl Default for PowerModel {
    fn default() -> Self {
        Self::dell_c6100()
    }
}

/// One power reading for [`PowerModel::fit`]: how many packages, cores and
/// extra siblings were busy, and the watts read.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct PowerSample {
    /// Active packages.
    pub packages: usize,
    /// Active cores.
    pub cores: usize,
    /// Busy siblings beyond each active core's first.
    pub extra_siblings: usize,
    /// Watts measured.
    pub watts: f64,
}

impl PowerModel {
    /// S0's model fitted to `samples` by least squares: idle, first and
    /// further packages, per core, per extra sibling. A term the samples
    /// cannot tell apart (no second package, no SMT) keeps `fallback`'s
    /// value, and its name is returned with the model. `None` when even
    /// idle, package and core cannot be told apart.
    pub fn fit(samples: &[PowerSample], fallback: &PowerModel) -> Option<(PowerModel, Vec<&'static str>)> {
        // Columns: idle, first package, further packages, cores, siblings.
        let row = |s: &PowerSample| {
            [
                1.0,
                if s.packages > 0 { 1.0 } else { 0.0 },
                s.packages.saturating_sub(1) as f64,
                s.cores as f64,
                s.extra_siblings as f64,
            ]
        };
        let names = [
            "idle_w",
            "first_package_w",
            "next_package_w",
            "core_w",
            "sibling_w",
        ];
        let fixed = [0.0, 0.0, fallback.next_package_w, 0.0, fallback.sibling_w];
        // Terms no sample varies are held at the fallback's value.
        let free: Vec<usize> = (0..5)
            .filter(|&k| k < 2 || k == 3 || samples.iter().any(|s| row(s)[k] > 0.0))
            .collect();
        let held: Vec<&'static str> = (0..5).filter(|k| !free.contains(k)).map(|k| names[k]).collect();
        let n = free.len();
        // Normal equations A^T A x = A^T b over the free terms, the held
        // ones moved to the right-hand side.
        let mut ata = vec![vec![0.0; n]; n];
        let mut atb = vec![0.0; n];
        for s in samples {
            let r = row(s);
            let b = s.watts
                - (0..5)
                    .filter(|k| !free.contains(k))
                    .map(|k| r[k] * fixed[k])
                    .sum::<f64>();
            for (i, &ki) in free.iter().enumerate() {
                atb[i] += r[ki] * b;
                for (j, &kj) in free.iter().enumerate() {
                    ata[i][j] += r[ki] * r[kj];
                }
            }
        }
        let x = solve(ata, atb)?;
        let mut v = fixed;
        for (i, &k) in free.iter().enumerate() {
            v[k] = x[i];
        }
        Some((PowerModel::from_terms(v), held))
    }

    /// The model from its five terms in field order (idle, first package,
    /// further packages, core, sibling), one core kind.
    pub fn from_terms(v: [f64; 5]) -> PowerModel {
        PowerModel {
            idle_w: v[0],
            first_package_w: v[1],
            next_package_w: v[2],
            core_w: v[3],
            sibling_w: v[4],
            core_w_by_kind: None,
        }
    }

    /// Its five terms in field order (as [`PowerModel::from_terms`] takes them).
    pub fn terms(&self) -> [f64; 5] {
        [
            self.idle_w,
            self.first_package_w,
            self.next_package_w,
            self.core_w,
            self.sibling_w,
        ]
    }
}

/// Solves the small dense system `a x = b` by Gaussian elimination with
/// partial pivoting; `None` if it is singular. Five unknowns at most: a
/// linear-algebra crate would be a large dependency for this.
fn solve(mut a: Vec<Vec<f64>>, mut b: Vec<f64>) -> Option<Vec<f64>> {
    let n = b.len();
    for c in 0..n {
        let p = (c..n).max_by(|&i, &j| a[i][c].abs().total_cmp(&a[j][c].abs()))?;
        if a[p][c].abs() < 1e-9 {
            return None;
        }
        a.swap(c, p);
        b.swap(c, p);
        for r in c + 1..n {
            let f = a[r][c] / a[c][c];
            let (upper, lower) = a.split_at_mut(r);
            for (x, p) in lower[0][c..n].iter_mut().zip(&upper[c][c..n]) {
                *x -= f * p;
            }
            b[r] -= f * b[c];
        }
    }
    let mut x = vec![0.0; n];
    for r in (0..n).rev() {
        let s: f64 = (r + 1..n).map(|k| a[r][k] * x[k]).sum();
        x[r] = (b[r] - s) / a[r][r];
    }
    Some(x)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn s0_four_siblings_cost_about_three_full_cores() {
        // S0: 4 busy units as 2 cores x 2 siblings draw about what 3 full
        // cores draw (their 130.13 W), all in one package.
        let p = PowerModel::dell_c6100();
        let siblings = p.power_w(1, &[2], 2);
        let full = p.power_w(1, &[3], 0);
        assert!((siblings - full).abs() / full < 0.05, "{siblings} vs {full}");
        assert!((p.power_w(0, &[0], 0) - 76.11).abs() < 1e-9);
    }

    #[test]
    fn fractional_activity_matches_whole_counts() {
        let m = herd_topo::Machine::synthetic("package:2 core:4 pu:2").unwrap();
        let p = PowerModel::dell_c6100();
        // CPUs 0-3: cores 0 and 1 of package 0 with both siblings busy.
        let four = p.busy_power_w(&m, &|c| if c < 4 { 1.0 } else { 0.0 });
        assert!((four - p.power_w(1, &[2], 2)).abs() < 1e-9);
        // One full core on each package.
        let spread = p.busy_power_w(&m, &|c| if c == 0 || c == 8 { 1.0 } else { 0.0 });
        assert!((spread - p.power_w(2, &[2], 0)).abs() < 1e-9);
        // Half busy costs half the active power above idle.
        let half = p.busy_power_w(&m, &|c| if c == 0 { 0.5 } else { 0.0 });
        assert!((half - (76.11 + 0.5 * (35.61 + 9.68))).abs() < 1e-9);
        assert!((p.busy_power_w(&m, &|_| 0.0) - 76.11).abs() < 1e-9);
    }

    #[test]
    fn a_fit_recovers_the_model_that_made_its_samples() {
        let truth = PowerModel::hp_dk388p();
        let mut samples = Vec::new();
        for (packages, cores, extra) in [
            (0, 0, 0),
            (1, 1, 0),
            (1, 2, 0),
            (1, 6, 0),
            (1, 6, 6),
            (2, 2, 0),
            (2, 12, 3),
        ] {
            let watts = truth.power_w(packages, &[cores], extra);
            samples.push(PowerSample {
                packages,
                cores,
                extra_siblings: extra,
                watts,
            });
        }
        let (fit, held) = PowerModel::fit(&samples, &PowerModel::dell_c6100()).unwrap();
        assert!(held.is_empty());
        for (a, b) in [
            (fit.idle_w, truth.idle_w),
            (fit.first_package_w, truth.first_package_w),
            (fit.next_package_w, truth.next_package_w),
            (fit.core_w, truth.core_w),
            (fit.sibling_w, truth.sibling_w),
        ] {
            assert!((a - b).abs() < 1e-6, "{fit:?}");
        }
        // One package, no SMT: those two terms are held at the fallback's.
        let one: Vec<PowerSample> = samples
            .iter()
            .copied()
            .filter(|s| s.packages <= 1 && s.extra_siblings == 0)
            .collect();
        let fallback = PowerModel::dell_c6100();
        let (fit, held) = PowerModel::fit(&one, &fallback).unwrap();
        assert_eq!(held, vec!["next_package_w", "sibling_w"]);
        assert_eq!(
            (fit.next_package_w, fit.sibling_w),
            (fallback.next_package_w, fallback.sibling_w)
        );
        // Idle alone cannot separate anything.
        assert!(PowerModel::fit(&samples[..1], &fallback).is_none());
    }
}
