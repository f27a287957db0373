//! CPU orders derived from the topology: the sequences in which placement
//! policies hand out CPUs. Nothing here is hard-coded to an SMT width or a
//! number of packages.

use herd_topo::Machine;

/// The hierarchy path of a core: (package, NUMA node, LLC, core index).
fn core_path(m: &Machine, core: usize) -> [usize; 4] {
    let c = &m.cores()[core];
    let cpu = c.cpus.first().and_then(|os| m.cpu(os)).expect("a core has CPUs");
    [c.package, cpu.numa, cpu.llc.map_or(0, |l| l + 1), core]
}

/// Cores sorted by their place in the hierarchy: neighbours stay together.
pub fn compact_cores(m: &Machine) -> Vec<usize> {
    let mut cores: Vec<usize> = (0..m.cores().len()).collect();
    // Each core's path made once, not at every comparison (keys are
    // unique: the core is the last part).
    cores.sort_by_cached_key(|&c| core_path(m, c));
    cores
}

/// Cores spread as far apart as possible: round-robin over packages, then
/// over NUMA nodes and LLCs inside each package, then cores.
pub fn scatter_cores(m: &Machine) -> Vec<usize> {
    let cores = compact_cores(m);
    let paths: Vec<[usize; 4]> = (0..m.cores().len()).map(|c| core_path(m, c)).collect();
    interleave(&paths, &cores, 0)
}

/// `cores` spread round-robin over the groups of `paths[core][level]`,
/// each group spread the same way over the next level.
fn interleave(paths: &[[usize; 4]], cores: &[usize], level: usize) -> Vec<usize> {
    if level >= 3 || cores.len() <= 1 {
        return cores.to_vec();
    }
    // Group by the key at this level, keeping compact order inside groups.
    let mut groups: Vec<(usize, Vec<usize>)> = Vec::new();
    for &c in cores {
        let key = paths[c][level];
        match groups.iter_mut().find(|(k, _)| *k == key) {
            Some((_, g)) => g.push(c),
            None => groups.push((key, vec![c])),
        }
    }
    let ordered: Vec<Vec<usize>> = groups
        .into_iter()
        .map(|(_, g)| interleave(paths, &g, level + 1))
        .collect();
    let longest = ordered.iter().map(Vec::len).max().unwrap_or(0);
    (0..longest)
        .flat_map(|i| ordered.iter().filter_map(move |g| g.get(i).copied()))
        .collect()
}

/// CPUs core by core: all SMT siblings of a core before the next core
/// (OpenMP `close` over hardware threads; S0's SPN-first order).
pub fn compact(m: &Machine) -> Vec<u32> {
    compact_cores(m)
        .into_iter()
        .flat_map(|c| m.cores()[c].cpus.iter())
        .collect()
}

/// The first thread of every core, spread over the machine, before any
/// second sibling (OpenMP `spread`; Linux's and S0's speedup-first order).
pub fn scatter(m: &Machine) -> Vec<u32> {
    let cores = scatter_cores(m);
    let smt = m.smt_max();
    (0..smt)
        .flat_map(|s| cores.iter().filter_map(move |&c| m.cores()[c].cpus.iter().nth(s)))
        .collect()
}

/// Cores with the strongest kind first, keeping `cores`' order inside a
/// kind (kinds are indexed weakest first).
fn strongest_first(m: &Machine, mut cores: Vec<usize>) -> Vec<usize> {
    cores.sort_by_key(|&c| std::cmp::Reverse(m.cores()[c].kind));
    cores
}

/// S0's policy 1, speedup first (its Table 1, what Linux does): the
/// strongest units first. Every core's first hardware thread (a
/// full-resource unit) before any core's second; inside each round the
/// strongest core kind first, spread over packages, NUMA nodes and LLCs.
/// Works for any SMT width, and for cores of different widths on one
/// machine (a core with fewer threads drops out of later rounds).
pub fn speed_first(m: &Machine) -> Vec<u32> {
    let cores = strongest_first(m, scatter_cores(m));
    (0..m.smt_max())
        .flat_map(|s| cores.iter().filter_map(move |&c| m.cores()[c].cpus.iter().nth(s)))
        .collect()
}

/// S0's policy 2, SPN first (speedup per watt per physical core): every
/// sibling of a core before the next core, every core of a package before
/// the next package, so each unit opens as little new power (a core, a
/// package) as it can. Inside a package the strongest kind comes first.
pub fn spn_first(m: &Machine) -> Vec<u32> {
    let mut cores = compact_cores(m);
    // Stable: packages stay in compact order, kinds strongest first inside.
    cores.sort_by_key(|&c| (m.cores()[c].package, std::cmp::Reverse(m.cores()[c].kind)));
    cores.into_iter().flat_map(|c| m.cores()[c].cpus.iter()).collect()
}

/// S0's sigma: a busy sibling adds 0.3 of a core (their Xeons).
pub const S0_SIGMA: f64 = 0.3;

/// Capacity, in full cores of the strongest kind, of the first 1, 2, ...
/// units of `order`: a core's first unit in the order brings its kind's
/// capacity, each further sibling `sigma` of it (S0's units).
pub fn unit_capacities(m: &Machine, order: &[u32], sigma: f64) -> Vec<f64> {
    let mut opened = vec![false; m.cores().len()];
    let mut total = 0.0;
    order
        .iter()
        .map(|&cpu| {
            if let Some(c) = m.cpu(cpu) {
                let kind = m.kinds()[c.kind].capacity;
                total += if std::mem::replace(&mut opened[c.core], true) {
                    sigma * kind
                } else {
                    kind
                };
            }
            total
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn compact_fills_siblings_first() {
        let m = Machine::synthetic("package:2 core:2 pu:2").unwrap();
        assert_eq!(compact(&m), vec![0, 1, 2, 3, 4, 5, 6, 7]);
    }

    #[test]
    fn scatter_spreads_packages_then_siblings() {
        let m = Machine::synthetic("package:2 core:2 pu:2").unwrap();
        // Core order: p0c0, p1c0, p0c1, p1c1; first siblings, then second.
        assert_eq!(scatter(&m), vec![0, 4, 2, 6, 1, 5, 3, 7]);
        let m = Machine::synthetic("package:2 numa:2 core:2").unwrap();
        // Packages alternate, and inside a package the two nodes alternate.
        assert_eq!(scatter(&m), vec![0, 4, 2, 6, 1, 5, 3, 7]);
    }

    #[test]
    fn unit_capacities_count_siblings_as_sigma() {
        let m = Machine::synthetic("package:1 core:2 pu:2").unwrap();
        let caps = unit_capacities(&m, &spn_first(&m), 0.3);
        let want = [1.0, 1.3, 2.3, 2.6];
        assert!(
            caps.iter().zip(want).all(|(a, b)| (a - b).abs() < 1e-12),
            "{caps:?}"
        );
        let caps = unit_capacities(&m, &speed_first(&m), 0.3);
        let want = [1.0, 2.0, 2.3, 2.6];
        assert!(
            caps.iter().zip(want).all(|(a, b)| (a - b).abs() < 1e-12),
            "{caps:?}"
        );
    }

    #[test]
    fn orders_are_permutations_for_any_smt_width() {
        for spec in [
            "package:2 core:3 pu:4",
            "core:5 pu:8",
            "package:1 core:2 pu:2 + core:3",
        ] {
            let m = Machine::synthetic(spec).unwrap();
            for order in [compact(&m), scatter(&m)] {
                let mut sorted = order.clone();
                sorted.sort();
                assert_eq!(sorted, m.all_cpus().iter().collect::<Vec<_>>(), "{spec}");
            }
        }
    }
}
