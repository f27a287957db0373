//! How PALM sizes its groups (threads per core, by capacity per thread)
//! and orders them: pure functions of the cores' capacities and the
//! worker count, apart from the policy for their tests; and the K cores
//! the groups are of.

use std::collections::BTreeMap;

use herd_profile::iabw::order_key;
use herd_topo::CpuSet;

use crate::View;

/// A group's class: its capacity per thread, as bits (an exact key).
pub(super) fn class_key(cap: f64, size: usize) -> u64 {
    (cap / size.max(1) as f64).to_bits()
}

/// The groups in order of capacity per thread, most first (ties: lowest).
pub(super) fn most_per_thread_first(caps: &[f64], sizes: &[usize]) -> Vec<usize> {
    // Each group's key once, as an integer (a division per comparison
    // was a twentieth of a decision at 1,024 threads); unique with the
    // group, so an unstable sort gives the order.
    let mut keyed: Vec<(std::cmp::Reverse<i64>, usize)> = (0..caps.len())
        .map(|g| (std::cmp::Reverse(order_key(caps[g] / sizes[g].max(1) as f64)), g))
        .collect();
    keyed.sort_unstable();
    keyed.into_iter().map(|(_, g)| g).collect()
}

/// `base` (thread counts per core, from [`group_sizes`]) rearranged among
/// cores of equal capacity so that the cores keep as many of the threads
/// already on them (`current[g]`: the classes, capacity per thread as bits,
/// they now want) as they can. Among cores of one capacity [`group_sizes`]
/// gives sizes m and m + 1 only, so the best arrangement gives m + 1 to
/// the cores that gain most from it: exact, and a sort.
pub fn arrange_sizes(caps: &[f64], base: &[usize], current: &[Vec<u64>]) -> Vec<usize> {
    let mut out = base.to_vec();
    let mut kinds: BTreeMap<u64, Vec<usize>> = BTreeMap::new();
    for (g, cap) in caps.iter().enumerate().take(base.len()) {
        kinds.entry(cap.to_bits()).or_default().push(g);
    }
    for cores in kinds.values() {
        let small = cores.iter().map(|&g| base[g]).min().unwrap_or(0);
        let big = cores.iter().filter(|&&g| base[g] > small).count();
        debug_assert!(
            cores.iter().all(|&g| base[g] <= small + 1),
            "group_sizes differ by one at most"
        );
        // Most gained by the larger size first; then the core that had it
        // (no change for nothing); then the lowest core. Each core's key
        // once, from one pass over its threads' wants (a key made at every
        // comparison, two passes each, was a seventh of a decision at 1,024
        // threads); unique with the core, so an unstable sort gives the
        // order a stable one did.
        let mut ranked: Vec<(std::cmp::Reverse<i64>, bool, usize)> = cores
            .iter()
            .map(|&g| {
                let (at_small, at_big) = (class_key(caps[g], small), class_key(caps[g], small + 1));
                let (mut n_small, mut n_big) = (0usize, 0usize);
                for &c in &current[g] {
                    n_small += usize::from(c == at_small);
                    n_big += usize::from(c == at_big);
                }
                let gain = n_big.min(small + 1) as i64 - n_small.min(small) as i64;
                (std::cmp::Reverse(gain), base[g] == small, g)
            })
            .collect();
        ranked.sort_unstable();
        for (i, &(_, _, g)) in ranked.iter().enumerate() {
            out[g] = if i < big { small + 1 } else { small };
        }
    }
    out
}

/// Thread counts per group: one each, then each remaining thread to the
/// group with the largest capacity per thread (S4: capacities 360, 220,
/// 100 and 6 threads give 3, 2, 1).
pub fn group_sizes(capacities: &[f64], threads: usize) -> Vec<usize> {
    use std::cmp::Reverse;
    // Groups alike (one capacity, positive and far from underflow, so that
    // capacity / n falls strictly as n grows): the rule below deals the
    // threads round in group order, so each group has the quotient and the
    // first ones the remainder. The heap took a fifth of PALM's first
    // decision at 1,024 threads on 192 alike cores.
    if let Some(&c) = capacities.first()
        && capacities.iter().all(|x| x.to_bits() == c.to_bits())
        && c > 0.0
        && (c / (threads + 1) as f64).is_normal()
    {
        let (q, r) = (threads / capacities.len(), threads % capacities.len());
        return (0..capacities.len()).map(|g| q + usize::from(g < r)).collect();
    }
    // A capacity per thread as an integer that orders as `total_cmp`
    // does, the lower group first on a tie (the heap's greatest is
    // taken): integer comparisons, not floats' total order (the heap was
    // two thirds of PALM's first decision at 1,024 threads).
    let key = |g: usize, n: usize| (order_key(capacities[g] / (n + 1) as f64), Reverse(g));
    let mut n = vec![0usize; capacities.len()];
    // Each group's capacity per thread were it given one more, greatest
    // first: a heap, not a search of every group per thread (1,024
    // threads on 192 cores: most of a PALM decision).
    let mut next = std::collections::BinaryHeap::with_capacity(capacities.len());
    for t in 0..threads {
        let g = if t < capacities.len() {
            t
        } else {
            if t == capacities.len() {
                next.extend((0..capacities.len()).map(|g| key(g, n[g])));
            }
            next.pop().expect("at least one group").1.0
        };
        n[g] += 1;
        if t >= capacities.len() {
            next.push(key(g, n[g]));
        }
    }
    n
}

/// The K cores: (CPUs, capacity) in the machine's compact order. A core's
/// CPUs and kind are the machine's record of them, which its builder
/// makes from the same list as each CPU's core (found instead by a search
/// of every CPU for every core, this was most of pack:tp's first decision
/// at 384 CPUs).
pub(super) fn allowed_cores(view: &View<'_>, k: Option<usize>) -> Vec<(CpuSet, f64)> {
    let m = view.machine;
    let cores: Vec<&herd_topo::Core> = (crate::order::compact_cores(m).into_iter())
        .map(|c| &m.cores()[c])
        .collect();
    let k = k.unwrap_or(cores.len()).clamp(1, cores.len().max(1));
    (cores.into_iter().take(k))
        .map(|c| (c.cpus.clone(), m.kinds()[c.kind].capacity))
        .collect()
}
