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
}
