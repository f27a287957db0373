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
//! Packages that differ are *fragments* joined by `|`, each a spec of its
//! own whose packages, NUMA nodes and cores follow the previous fragment's
//! (S3's NUMA platforms: four single-core packages, two slow, two fast):
//!
//! ```text
//! package:2 numa:1 core:1 capacity:0.74 kind:slow | package:2 numa:1 core:1 kind:fast
//! ```
//!
//! With several fragments each must have a `numa` level, so every node
//! belongs to one of its packages.
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

/// One `|`-separated part of a spec: its outer levels and core groups.
type Fragment = (Vec<(Outer, u32)>, Vec<Group>);

/// Parses `spec` and builds the machine it describes.
pub fn parse(spec: &str) -> Result<Machine, TopoError> {
    let err = |why: String| TopoError::Spec {
        spec: spec.to_string(),
        why,
    };
    let fragments = spec
        .split('|')
        .map(|f| parse_fragment(f, spec))
        .collect::<Result<Vec<Fragment>, TopoError>>()?;
    if fragments.len() > 1
        && fragments
            .iter()
            .any(|(outer, _)| !outer.iter().any(|&(l, _)| l == Outer::Numa))
    {
        return Err(err("with '|', give every fragment a numa level".into()));
    }
    let mut total = Some(0u32);
    for (outer, groups) in &fragments {
        let multiplicity = outer.iter().try_fold(1u32, |acc, &(_, n)| acc.checked_mul(n));
        let per_instance = groups.iter().try_fold(0u32, |acc, g| {
            g.cores.checked_mul(g.pus).and_then(|n| acc.checked_add(n))
        });
        total = match (total, multiplicity, per_instance) {
            (Some(t), Some(m), Some(p)) => m.checked_mul(p).and_then(|n| t.checked_add(n)),
            _ => None,
        };
    }
    if total.is_none_or(|t| t > MAX_CPUS) {
        return Err(err(format!("the spec describes more than {MAX_CPUS} CPUs")));
    }
    build(spec, &fragments)
}

/// One fragment of `spec` (errors name the whole spec).
fn parse_fragment(fragment: &str, spec: &str) -> Result<Fragment, TopoError> {
    let err = |why: String| TopoError::Spec {
        spec: spec.to_string(),
        why,
    };
    let mut outer: Vec<(Outer, u32)> = Vec::new();
    let mut groups: Vec<Group> = Vec::new();
    let mut expect_group = false;
    for token in fragment.split_whitespace() {
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
    Ok((outer, groups))
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

fn build(spec: &str, fragments: &[Fragment]) -> Result<Machine, TopoError> {
    let mut b = MachineBuilder::new(format!("synthetic: {spec}"));
    // One kind per distinct (capacity, name) over all fragments; the
    // group's position names unnamed kinds.
    let all_groups: Vec<&Group> = fragments.iter().flat_map(|(_, g)| g).collect();
    let mut kinds: Vec<(f64, String)> = Vec::new();
    let group_kind: Vec<usize> = all_groups
        .iter()
        .enumerate()
        .map(|(i, g)| {
            let name = g.name.clone().unwrap_or_else(|| {
                if all_groups.len() == 1 {
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
    let mut next = Next::default();
    let mut first_group = 0;
    for (outer, groups) in fragments {
        let kinds_here: Vec<usize> = group_kind[first_group..first_group + groups.len()]
            .iter()
            .map(|&k| kind_ids[k])
            .collect();
        first_group += groups.len();
        build_fragment(&mut b, outer, groups, &kinds_here, &mut next);
    }
    let node_package = next.node_package;
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

/// What the fragments built so far used: the next OS indices, and each
/// NUMA node's package (for the distances).
#[derive(Default)]
struct Next {
    package: u32,
    cpu: u32,
    core: u32,
    node_package: Vec<usize>,
}

/// Builds one fragment's packages after those of the fragments before it.
fn build_fragment(
    b: &mut MachineBuilder,
    outer: &[(Outer, u32)],
    groups: &[Group],
    kind_ids: &[usize],
    next: &mut Next,
) {
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
    // Without a numa level the whole machine is one node, as in hwloc
    // (only a lone fragment may leave it out).
    let has_numa_level = outer.iter().any(|&(l, _)| l == Outer::Numa);
    let machine_node = (!has_numa_level).then(|| b.numa_node(0, (packages == 1).then_some(0), None));
    for _ in 0..packages {
        let pkg = b.package(Some(next.package));
        next.package += 1;
        for _ in 0..numas {
            let node = match machine_node {
                Some(node) => node,
                None => {
                    next.node_package.push(pkg);
                    b.numa_node(next.node_package.len() as u32 - 1, Some(pkg), None)
                }
            };
            for _ in 0..l3s {
                let l3 = (llc_level == Some(Outer::L3)).then(|| b.llc(3, None));
                for _ in 0..l2s {
                    let llc = match llc_level {
                        Some(Outer::L2) => Some(b.llc(2, None)),
                        _ => l3,
                    };
                    for (g, &kind) in groups.iter().zip(kind_ids) {
                        for _ in 0..g.cores {
                            let cpus: Vec<u32> = (next.cpu..next.cpu + g.pus).collect();
                            next.cpu += g.pus;
                            b.core(pkg, node, llc, kind, Some(next.core), &cpus);
                            next.core += 1;
                        }
                    }
                }
            }
        }
    }
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
    fn fragments_join_packages_that_differ() {
        // S3's NUMA1: four single-core packages, two slow then two fast.
        let m = parse(
            "package:2 numa:1 l3:1 core:1 capacity:0.741 kind:slow | package:2 numa:1 l3:1 core:1 kind:fast",
        )
        .unwrap();
        assert_eq!(counts(&m), [4, 4, 4, 4, 4, 2]);
        assert_eq!(m.kinds()[0].label, "slow");
        assert_eq!(m.kinds()[0].cpus.to_string(), "0-1");
        assert_eq!(m.kinds()[1].cpus.to_string(), "2-3");
        assert_eq!(m.capacity(0), Some(0.741));
        assert_eq!(m.capacity(3), Some(1.0));
        // Every package its own node, 21 apart.
        assert_eq!(m.numa_distances().unwrap()[0], vec![10.0, 21.0, 21.0, 21.0]);
        assert_eq!(m.numa_distances().unwrap()[3], vec![21.0, 21.0, 21.0, 10.0]);
        // A fragment without a numa level cannot say whose node it is.
        let e = parse("package:1 core:1 | package:1 numa:1 core:1")
            .unwrap_err()
            .to_string();
        assert!(e.contains("give every fragment a numa level"), "{e}");
        assert!(parse("package:1 numa:1 core:1 |").is_err());
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
