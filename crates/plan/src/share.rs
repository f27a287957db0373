//! How the machine-wide daemon divides CPUs among the jobs it manages
//! (issue 27): each job gets its own CPUs, so two policies never claim the
//! same CPU unless the rules say the jobs may share.
//!
//! A job asks for as many CPUs as it has busy threads (at least one, at
//! most its rule's cap). It is given them from its rule's reservation if
//! the rule has one, else from the CPUs no rule reserves, less what other
//! jobs hold; a job whose rule allows sharing may also take CPUs held by
//! other sharing jobs. Within what is free, whole cores on one NUMA node
//! come first (the node with the most free CPUs), so a job's threads keep
//! their caches and memory close and leave whole cores to the next job.
//! A job that finds no CPU free waits, left to the kernel, until one is.

use herd_topo::{CpuSet, Machine};

/// What a job asks for.
#[derive(Debug, Clone, PartialEq)]
pub struct Ask {
    /// How many CPUs it would use (its busy threads); at least one is given.
    pub want: usize,
    /// The most its rule lets it hold.
    pub max: Option<usize>,
    /// Its rule's reservation: it takes only from these.
    pub reserve: Option<CpuSet>,
    /// Whether it may take CPUs that other sharing jobs hold.
    pub share: bool,
}

/// A CPU set a job holds now.
#[derive(Debug, Clone, PartialEq)]
pub struct Held {
    /// The CPUs.
    pub cpus: CpuSet,
    /// Whether its job's rule allows sharing them.
    pub share: bool,
}

/// The CPUs to give a job asking `ask` on `machine`, where `reserved` are
/// every rule's reservations and `held` what jobs hold now; `None` when
/// nothing is free for it.
pub fn grant(machine: &Machine, ask: &Ask, reserved: &CpuSet, held: &[Held]) -> Option<CpuSet> {
    let pool = match &ask.reserve {
        Some(r) => r.intersection(machine.all_cpus()),
        None => machine.all_cpus().difference(reserved),
    };
    let taken = held
        .iter()
        .filter(|h| !(ask.share && h.share))
        .fold(CpuSet::default(), |a, h| a.union(&h.cpus));
    let free = pool.difference(&taken);
    let n = ask.want.max(1).min(ask.max.unwrap_or(usize::MAX)).min(free.len());
    if n == 0 {
        return None;
    }
    // CPUs no job holds first; a sharing job then takes the CPUs the
    // fewest other jobs share, so fifty sharing jobs spread, not stack.
    let unheld = held.iter().fold(free.clone(), |a, h| a.difference(&h.cpus));
    if unheld.len() >= n {
        return Some(pick(machine, &unheld, n));
    }
    let mut shared: Vec<(usize, u32)> = free
        .difference(&unheld)
        .iter()
        .map(|c| (held.iter().filter(|h| h.cpus.contains(c)).count(), c))
        .collect();
    shared.sort_unstable();
    let mut out = unheld;
    for (_, c) in shared.into_iter().take(n - out.len()) {
        out.insert(c);
    }
    Some(out)
}

/// `n` CPUs of `free`: the NUMA nodes with the most free CPUs first, and
/// in each, cores wholly free before cores another job half holds, a
/// core's CPUs together.
fn pick(machine: &Machine, free: &CpuSet, n: usize) -> CpuSet {
    let mut nodes: Vec<(usize, CpuSet)> = machine
        .numa_nodes()
        .iter()
        .map(|node| {
            let f = node.cpus.intersection(free);
            (f.len(), f)
        })
        .filter(|(k, _)| *k > 0)
        .collect();
    // Most free first; ties by the lower CPU, so the choice is stable.
    nodes.sort_by_key(|(k, f)| (std::cmp::Reverse(*k), f.first()));
    let mut out = CpuSet::default();
    for (_, node_free) in nodes {
        let mut cores: Vec<(bool, CpuSet)> = machine
            .cores()
            .iter()
            .map(|c| (c.cpus.is_subset(&node_free), c.cpus.intersection(&node_free)))
            .filter(|(_, f)| !f.is_empty())
            .collect();
        cores.sort_by_key(|(whole, f)| (!*whole, f.first()));
        for (_, f) in cores {
            for cpu in f.iter() {
                if out.len() == n {
                    return out;
                }
                out.insert(cpu);
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn machine(spec: &str) -> Machine {
        Machine::synthetic(spec).unwrap()
    }

    fn set(list: &str) -> CpuSet {
        CpuSet::parse_list(list).unwrap()
    }

    fn ask(want: usize) -> Ask {
        Ask {
            want,
            max: None,
            reserve: None,
            share: false,
        }
    }

    #[test]
    fn jobs_get_disjoint_cpus_whole_cores_on_one_node_first() {
        // Two packages (one NUMA node each) of 2 cores x 2 SMT.
        let m = machine("package:2 numa:1 core:2 pu:2");
        let a = grant(&m, &ask(2), &CpuSet::default(), &[]).unwrap();
        // One whole core.
        assert_eq!(a.len(), 2);
        assert!(m.cores().iter().any(|c| c.cpus == a), "{a} is one core");
        let held = vec![Held {
            cpus: a.clone(),
            share: false,
        }];
        // The next job goes to the node with the most free CPUs: the other one.
        let b = grant(&m, &ask(3), &CpuSet::default(), &held).unwrap();
        assert!(!a.intersects(&b));
        assert_eq!(b.len(), 3);
        let node_of = |s: &CpuSet| m.cpu(s.first().unwrap()).unwrap().numa;
        assert_ne!(node_of(&a), node_of(&b));
        assert!(b.iter().all(|c| m.cpu(c).unwrap().numa == node_of(&b)));
    }

    #[test]
    fn reservations_caps_and_sharing_are_kept() {
        let m = machine("package:1 core:4 pu:1");
        let reserved = set("2-3");
        // An unreserved job never takes reserved CPUs, however many it wants.
        let a = grant(&m, &ask(8), &reserved, &[]).unwrap();
        assert_eq!(a, set("0-1"));
        // A reserving rule's job takes only from its reservation, capped.
        let r = Ask {
            max: Some(1),
            reserve: Some(set("2-3")),
            ..ask(8)
        };
        assert_eq!(grant(&m, &r, &reserved, &[]), Some(set("2")));
        // Nothing free: the job waits.
        let all = vec![Held {
            cpus: set("0-1"),
            share: true,
        }];
        assert_eq!(grant(&m, &ask(1), &reserved, &all), None);
        // Unless both it and the holder may share.
        let sharing = Ask {
            share: true,
            ..ask(1)
        };
        assert_eq!(grant(&m, &sharing, &reserved, &all), Some(set("0")));
        // Sharing jobs spread over the CPUs the fewest share.
        let mut shared = all.clone();
        for _ in 0..4 {
            let c = grant(&m, &sharing, &reserved, &shared).unwrap();
            shared.push(Held { cpus: c, share: true });
        }
        let on = |cpu: u32| shared.iter().filter(|h| h.cpus.contains(cpu)).count();
        assert_eq!((on(0), on(1)), (3, 3), "{shared:?}");
        // A job always asks for at least one CPU.
        assert_eq!(grant(&m, &ask(0), &reserved, &[]).map(|s| s.len()), Some(1));
    }
}
