//! herd's synthetic machine specs: hwloc's synthetic syntax, extended.
//!
//! A spec is a list of `level:count` tokens from the outside in, as in hwloc
//! (`package:2 numa:2 l3:1 core:4 pu:2`). hwloc's syntax is symmetric: every
//! core looks alike. herd extends it with *core groups* so a spec can say
//! what hybrid machines look like:
//!
//! ```text
//! package:1 l3:1 core:6 pu:2 capacity:1.0 kind:P + core:8 pu:1 capacity:0.6 kind:E
//! ```
//!
//! Outer levels (`package`, `numa`, `l3`, `l2`, each at most once, in that
//! order) are followed by one or more core groups joined by `+`. A group is
//! `core:N`, then optionally `pu:M` (threads per core, default 1),
//! `capacity:X` (relative speed in (0, 1], default 1.0) and `kind:NAME`.
//! Every group is repeated inside each instance of the innermost outer level.
//! Groups with the same capacity and name are one kind. OS indices are handed
//! out in order, as hwloc's synthetic backend does.
//!
//! Parsing here rather than through hwloc is deliberate: hwloc cannot express
//! groups of different shapes, and the simulator must build machines without
//! linking hwloc. A test checks that plain specs give what hwloc gives.

use crate::{Machine, MachineBuilder, TopoError, cpuset::MAX_CPUS};

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Outer {
    Package,
    Numa,
    L3,
    L2,
}

#[derive(Debug, Clone)]
struct Group {
    cores: u32,
    pus: u32,
    capacity: f64,
    name: Option<String>,
}

/// Parses `spec` and builds the machine it describes.
pub fn parse(spec: &str) -> Result<Machine, TopoError> {
    let err = |why: String| TopoError::Spec {
        spec: spec.to_string(),
        why,
    };
    let mut outer: Vec<(Outer, u32)> = Vec::new();
    let mut groups: Vec<Group> = Vec::new();
    let mut expect_group = false;
    for token in spec.split_whitespace() {
        if token == "+" {
            if groups.is_empty() || expect_group {
                return Err(err("'+' must stand between two core groups".into()));
            }
            expect_group = true;
            continue;
        }
        let (key, value) = token
            .split_once(':')
            .ok_or_else(|| err(format!("'{token}' is not of the form level:count")))?;
        let key = key.to_ascii_lowercase();
        let count = || -> Result<u32, TopoError> {
            let n: u32 = value
                .parse()
                .map_err(|_| err(format!("'{token}': '{value}' is not a whole number")))?;
            if n == 0 {
                return Err(err(format!("'{token}': a count must be at least 1")));
            }
            Ok(n)
        };
        let outer_level = match key.as_str() {
            "machine" if value == "1" => continue,
            "package" | "pack" | "socket" => Some(Outer::Package),
            "numa" | "numanode" | "node" => Some(Outer::Numa),
            "l3" | "l3cache" => Some(Outer::L3),
            "l2" | "l2cache" => Some(Outer::L2),
            _ => None,
        };
        if let Some(level) = outer_level {
            if !groups.is_empty() {
                return Err(err(format!(
                    "'{token}' comes after a core level; outer levels go first"
                )));
            }
            if outer.last().is_some_and(|&(last, _)| last >= level) {
                return Err(err(format!(
                    "'{token}' is out of order or repeated; the order is package, numa, l3, l2, core, pu"
                )));
            }
            outer.push((level, count()?));
            continue;
        }
        match key.as_str() {
            "core" => {
                if !groups.is_empty() && !expect_group {
                    return Err(err(format!("'{token}': join core groups with ' + '")));
                }
                expect_group = false;
                groups.push(Group {
                    cores: count()?,
                    pus: 0,
                    capacity: 1.0,
                    name: None,
                });
            }
            "pu" | "thread" => {
                let g = current(&mut groups, expect_group, token, spec)?;
                if g.pus != 0 {
                    return Err(err(format!("'{token}': pu given twice for one core group")));
                }
                g.pus = count()?;
            }
            "capacity" => {
                let g = current(&mut groups, expect_group, token, spec)?;
                let cap: f64 = value
                    .parse()
                    .map_err(|_| err(format!("'{token}': '{value}' is not a number")))?;
                if !(cap.is_finite() && cap > 0.0 && cap <= 1.0) {
                    return Err(err(format!("'{token}': capacity must be in (0, 1]")));
                }
                g.capacity = cap;
            }
            "kind" => current(&mut groups, expect_group, token, spec)?.name = Some(value.to_string()),
            _ => return Err(err(format!("unknown level '{key}' in '{token}'"))),
        }
    }
    if expect_group {
        return Err(err("the spec ends with '+'; a core group must follow".into()));
    }
    if groups.is_empty() {
        return Err(err("the spec has no 'core:N' level".into()));
    }
    for g in &mut groups {
        g.pus = g.pus.max(1);
    }
    let multiplicity = outer.iter().try_fold(1u32, |acc, &(_, n)| acc.checked_mul(n));
    let per_instance = groups.iter().try_fold(0u32, |acc, g| {
        g.cores.checked_mul(g.pus).and_then(|n| acc.checked_add(n))
    });
    match (multiplicity, per_instance) {
        (Some(m), Some(p)) if m.checked_mul(p).is_some_and(|total| total <= MAX_CPUS) => {}
        _ => return Err(err(format!("the spec describes more than {MAX_CPUS} CPUs"))),
    }
    build(spec, &outer, &groups)
}

fn current<'a>(
    groups: &'a mut [Group],
    expect_group: bool,
    token: &str,
    spec: &str,
) -> Result<&'a mut Group, TopoError> {
    match groups.last_mut() {
        Some(g) if !expect_group => Ok(g),
        _ => Err(TopoError::Spec {
            spec: spec.to_string(),
            why: format!("'{token}' must follow a 'core:N' level"),
        }),
    }
}

fn count_of(outer: &[(Outer, u32)], level: Outer) -> u32 {
    outer.iter().find(|&&(l, _)| l == level).map_or(1, |&(_, n)| n)
}

fn build(spec: &str, outer: &[(Outer, u32)], groups: &[Group]) -> Result<Machine, TopoError> {
    let mut b = MachineBuilder::new(format!("synthetic: {spec}"));
    // One kind per distinct (capacity, name); the group's position names unnamed kinds.
    let mut kinds: Vec<(f64, String)> = Vec::new();
    let group_kind: Vec<usize> = groups
        .iter()
        .enumerate()
        .map(|(i, g)| {
            let name = g.name.clone().unwrap_or_else(|| {
                if groups.len() == 1 {
                    "core".into()
                } else {
                    format!("group{i}")
                }
            });
            match kinds.iter().position(|(c, n)| *c == g.capacity && *n == name) {
                Some(k) => k,
                None => {
                    kinds.push((g.capacity, name));
                    kinds.len() - 1
                }
            }
        })
        .collect();
    let kind_ids: Vec<usize> = kinds
        .iter()
        .map(|(cap, name)| b.kind(*cap, name.clone(), None))
        .collect();
    let llc_level = outer
        .iter()
        .map(|&(l, _)| l)
        .filter(|&l| l == Outer::L3 || l == Outer::L2)
        .min();
    let (packages, numas, l3s, l2s) = (
        count_of(outer, Outer::Package),
        count_of(outer, Outer::Numa),
        count_of(outer, Outer::L3),
        count_of(outer, Outer::L2),
    );
    let mut next_cpu = 0u32;
    let mut next_core = 0u32;
    let mut node_package = Vec::new();
    // Without a numa level the whole machine is one node, as in hwloc.
    let has_numa_level = outer.iter().any(|&(l, _)| l == Outer::Numa);
    let machine_node = (!has_numa_level).then(|| b.numa_node(0, (packages == 1).then_some(0), None));
    for p in 0..packages {
        let pkg = b.package(Some(p));
        for _ in 0..numas {
            let node = match machine_node {
                Some(node) => node,
                None => {
                    node_package.push(pkg);
                    b.numa_node(node_package.len() as u32 - 1, Some(pkg), None)
                }
            };
            for _ in 0..l3s {
                let l3 = (llc_level == Some(Outer::L3)).then(|| b.llc(3, None));
                for _ in 0..l2s {
                    let llc = match llc_level {
                        Some(Outer::L2) => Some(b.llc(2, None)),
                        _ => l3,
                    };
                    for (g, kind) in groups.iter().zip(&group_kind) {
                        for _ in 0..g.cores {
                            let cpus: Vec<u32> = (next_cpu..next_cpu + g.pus).collect();
                            next_cpu += g.pus;
                            b.core(pkg, node, llc, kind_ids[*kind], Some(next_core), &cpus);
                            next_core += 1;
                        }
                    }
                }
            }
        }
    }
    if node_package.len() > 1 {
        // ACPI SLIT conventions: 10 local; 11 for a sibling node in the same
        // package (as sub-NUMA clustering reports); 21 across packages.
        let matrix = node_package
            .iter()
            .enumerate()
            .map(|(i, pi)| {
                node_package
                    .iter()
                    .enumerate()
                    .map(|(j, pj)| {
                        if i == j {
                            10.0
                        } else if pi == pj {
                            11.0
                        } else {
                            21.0
                        }
                    })
                    .collect()
            })
            .collect();
        b.numa_distances(matrix);
    }
    b.build()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn counts(m: &Machine) -> [usize; 6] {
        [
            m.cpus().len(),
            m.cores().len(),
            m.packages().len(),
            m.numa_nodes().len(),
            m.llcs().len(),
            m.kinds().len(),
        ]
    }

    #[test]
    fn plain_spec() {
        let m = parse("package:2 numa:2 l3:1 core:4 pu:2").unwrap();
        assert_eq!(counts(&m), [32, 16, 2, 4, 4, 1]);
        assert_eq!(m.smt_max(), 2);
        assert_eq!(m.siblings(5).unwrap().to_string(), "4-5");
        assert_eq!(m.numa_distances().unwrap()[0], vec![10.0, 11.0, 21.0, 21.0]);
    }

    #[test]
    fn hybrid_spec() {
        let m = parse("package:1 l3:1 core:6 pu:2 capacity:1.0 kind:P + core:8 pu:1 capacity:0.6 kind:E")
            .unwrap();
        assert_eq!(counts(&m), [20, 14, 1, 1, 1, 2]);
        // Weakest kind first.
        assert_eq!(m.kinds()[0].label, "E");
        assert_eq!(m.kinds()[0].cpus.to_string(), "12-19");
        assert_eq!(m.kinds()[1].cpus.to_string(), "0-11");
        assert!(m.is_asymmetric());
        assert_eq!(m.capacity(13), Some(0.6));
    }

    #[test]
    fn l2_is_the_llc_without_l3() {
        let m = parse("package:1 l2:4 core:2").unwrap();
        assert_eq!(m.llcs().len(), 4);
        assert_eq!(m.llcs()[0].level, 2);
        let m = parse("core:2").unwrap();
        assert_eq!(m.llcs().len(), 0);
        assert_eq!(m.cpu(1).unwrap().llc, None);
    }

    #[test]
    fn malformed_specs_say_what_is_wrong() {
        for (spec, needle) in [
            ("", "no 'core:N'"),
            ("package:2", "no 'core:N'"),
            ("package:0 core:2", "at least 1"),
            ("core:0", "at least 1"),
            ("core:x", "not a whole number"),
            ("core:2 package:2", "after a core level"),
            ("l3:1 package:2 core:1", "out of order"),
            ("core:2 +", "ends with '+'"),
            ("core:2 core:2", "join core groups"),
            ("core:2 capacity:1.5", "(0, 1]"),
            ("core:2 capacity:nan", "(0, 1]"),
            ("widget:2 core:1", "unknown level"),
            ("pu:2", "must follow"),
            ("package:4096 core:4096", "more than"),
            ("core", "level:count"),
        ] {
            let e = parse(spec).unwrap_err().to_string();
            assert!(e.contains(needle), "spec {spec:?}: {e}");
        }
    }
}
