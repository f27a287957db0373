//! Tests of the simulated kernel's placement and balancing.

use super::*;

/// The lazy order is the full stable sort's: most served first, then
/// by queue, then as gathered (equal services on one queue).
#[test]
fn most_served_are_taken_in_the_order_a_stable_sort_gives() {
    let mut rng = herd_policy::Rng::new(7);
    let mut next = move || rng.next_u64();
    // One kept across rounds, as the kernel keeps it.
    let mut lazy = MostServed::default();
    for round in 0..50 {
        let n = 1 + (next() % 40) as usize;
        // Few distinct values, so ties on service and queue abound
        // (and both zeros, which `total_cmp` tells apart).
        let values = [-1.5, -0.0, 0.0, 2.5, 3.0];
        let service: Vec<f64> = (0..n).map(|_| values[(next() % 5) as usize]).collect();
        // Gathered queue by queue, as the round gathers them.
        let mut threads: Vec<(usize, usize)> = (0..n).map(|t| (t, (next() % 5) as usize)).collect();
        threads.sort_by_key(|&(_, p)| p);
        let mut want = threads.clone();
        want.sort_by(|a, b| service[b.0].total_cmp(&service[a.0]).then(a.1.cmp(&b.1)));
        lazy.gather(threads.iter().copied(), &service);
        // Asked out of order, as the fairness round's scans ask.
        let k = (next() % n as u64) as usize;
        assert_eq!(lazy.get(k), Some(want[k]), "round {round}");
        let got: Vec<_> = (0..).map_while(|k| lazy.get(k)).collect();
        assert_eq!(got, want, "round {round}");
    }
}

/// Evening out takes the shortest queue a thread may move to, the
/// lowest position among equals, and the most recently queued thread
/// that may go there; a queue none of the long queue's threads may use
/// is passed over however short.
#[test]
fn evening_out_takes_the_shortest_queue_a_thread_may_use() {
    let m = Machine::synthetic("package:1 core:4").unwrap();
    let mut k = Kernel::new(&m);
    // CPU 0 holds threads 0-3; CPU 1 one thread, CPUs 2 and 3 none.
    for t in 0..4 {
        k.enqueue(t, 0);
    }
    k.enqueue(4, 1);
    let set = |cpus: &[u32]| cpus.iter().copied().collect::<CpuSet>();
    let mut allowed = vec![set(&[0, 1, 3]); 5];
    allowed[3] = set(&[0, 1]);
    // CPU 2 is the shortest and first, but nothing on CPU 0 may use it;
    // CPU 3 is next, and thread 3, queued last, may not go there.
    assert_eq!(k.even_target(0, 4, &allowed), Some((2, 3)));
    // Two apart at most: nothing to even out.
    assert_eq!(k.even_target(1, 1, &allowed), None);
    allowed[..3].fill(set(&[0]));
    assert_eq!(
        k.even_target(0, 4, &allowed),
        Some((3, 1)),
        "thread 3 may go to CPU 1"
    );
}

/// An idle CPU pulls from the longest queue holding a thread that may
/// run on it, and evening out goes to the shortest queue one of the
/// long queue's threads may use: what a scan of every queued thread
/// finds, with threads confined to a few CPUs (whose queues grow long
/// beside idle CPUs) and free ones mixed.
#[test]
fn idle_pulls_and_evening_go_where_a_scan_of_every_thread_says() {
    let m = Machine::synthetic("package:2 core:8 pu:2").unwrap();
    let n = m.all_cpus().len();
    let sets: Vec<CpuSet> = vec![
        m.all_cpus().clone(),
        (0..4).collect(),
        (2..6).collect(),
        (8..16).filter(|c| c % 2 == 0).collect(),
        [9u32].into_iter().collect(),
    ];
    let mut rng = herd_policy::Rng::new(19);
    let mut next = move || rng.next_u64();
    for round in 0..200 {
        let mut k = Kernel::new(&m);
        let threads = 1 + (next() % 60) as usize;
        let allowed: Vec<CpuSet> = (0..threads)
            .map(|_| sets[(next() % sets.len() as u64) as usize].clone())
            .collect();
        for (t, a) in allowed.iter().enumerate() {
            let cpus: Vec<u32> = a.iter().collect();
            let cpu = cpus[(next() % cpus.len() as u64) as usize];
            k.enqueue(t, k.pos_of[cpu as usize]);
        }
        // The pulls, as a scan of every queued thread makes them.
        let mut want = k.clone();
        let mut want_moves = Vec::new();
        for to in 0..n {
            if !want.queues[to].is_empty() {
                continue;
            }
            let (llc, os_to) = (want.llc[to], want.os[to]);
            let from = (0..n)
                .filter(|&p| want.queues[p].len() >= 2)
                .filter(|&p| want.queues[p].iter().any(|&t| allowed[t].contains(os_to)))
                .max_by_key(|&p| (want.queues[p].len(), want.llc[p] == llc, usize::MAX - p));
            if let Some(from) = from {
                let i = want.queues[from]
                    .iter()
                    .rposition(|&t| allowed[t].contains(os_to))
                    .unwrap();
                let t = want.queues.remove(from, i);
                want.queues.push(to, t);
                want_moves.push((t, from, to));
            }
        }
        // Evening out from the longest queue before the pulls.
        let from = (0..n)
            .max_by_key(|&p| (k.queues[p].len(), usize::MAX - p))
            .unwrap();
        let longest = k.queues[from].len();
        let shortest = k.queues.iter().map(Vec::len).min().unwrap();
        let kq = &k;
        let want_even = (shortest..=longest.saturating_sub(2))
            .filter(|_| shortest + 2 <= longest)
            .flat_map(|len| (0..n).filter(move |&p| kq.queues[p].len() == len))
            .find_map(|to| {
                let os_to = k.os[to];
                k.queues[from]
                    .iter()
                    .rposition(|&t| allowed[t].contains(os_to))
                    .map(|i| (i, to))
            });
        assert_eq!(k.even_target(from, longest, &allowed), want_even, "round {round}");
        assert_eq!(k.pull_idle(&allowed), want_moves, "round {round}");
        let queues: Vec<Vec<usize>> = k.queues.iter().cloned().collect();
        let want_queues: Vec<Vec<usize>> = want.queues.iter().cloned().collect();
        assert_eq!(queues, want_queues, "round {round}");
    }
}

/// On a machine with more CPUs than [`MASKED_FROM`], a wake-up that
/// finds every allowed queue busy goes to the shortest one, its
/// previous CPU first among equals, then the lowest tie-break: what a
/// scan of the allowed CPUs finds, for sets of every size (through the
/// rank masks above the threshold, the index CPU by CPU below).
#[test]
fn wake_ups_on_a_busy_machine_go_where_a_scan_says() {
    let m = Machine::synthetic("package:2 core:32 pu:2").unwrap();
    let mut k = Kernel::new(&m);
    k.shuffle_ties(11);
    let all = m.all_cpus().clone();
    let sets: Vec<CpuSet> = vec![
        all.clone(),
        (0..64).collect(),
        (0..128).filter(|c| c % 2 == 1).collect(),
        (40..80).collect(),
        (5..20).collect(),
        // One CPU: answered without a search.
        CpuSet::single(9),
        CpuSet::single(100),
    ];
    // Every CPU busy: the idle searches find nothing and the shortest
    // queue is the answer.
    for t in 0..128 {
        k.enqueue(t, t);
    }
    let mut rng = herd_policy::Rng::new(3);
    let mut next = move || rng.next_u64();
    for (step, thread) in (0..400).zip(128..) {
        let allowed = &sets[(next() % sets.len() as u64) as usize];
        let prev = (next() % 3 > 0).then(|| (next() % 128) as usize);
        let want = (0..128)
            .filter(|&p| allowed.contains(k.os[p]))
            .min_by_key(|&p| (k.queues[p].len(), Some(p) != prev, k.queues.ties()[p]));
        let got = k.select(allowed, prev);
        assert_eq!(got, want, "step {step}");
        // Queue there, and now and then take a thread off a long queue
        // (never emptying one), so lengths spread.
        k.enqueue(thread, got.unwrap());
        if step % 3 == 0 {
            let p = (next() % 128) as usize;
            if k.queues[p].len() > 1 {
                k.queues.pop(p);
            }
        }
    }
}

/// With idle CPUs about, a wake-up goes to an idle core, then an idle
/// CPU, ranked by the previous CPU's LLC, then the idlest package, then
/// the tie-break: a brute-force search over every allowed CPU agrees
/// with the masks' visit of the empty ones, for sets of every size.
#[test]
fn wake_ups_beside_idle_cpus_go_where_a_brute_force_search_says() {
    let m = Machine::synthetic("package:4 core:16 pu:2").unwrap();
    let mut k = Kernel::new(&m);
    k.shuffle_ties(5);
    let sets: Vec<CpuSet> = vec![
        m.all_cpus().clone(),
        (0..64).collect(),
        (0..128).filter(|c| c % 3 != 0).collect(),
        (30..70).collect(),
        (5..20).collect(),
        // One CPU: answered without a search.
        CpuSet::single(9),
        CpuSet::single(100),
    ];
    // A CPU this machine lacks is no answer.
    assert_eq!(k.select(&CpuSet::single(500), Some(3)), None);
    let brute = |k: &Kernel, allowed: &CpuSet, prev: Option<usize>| {
        let ok: Vec<usize> = (0..k.len()).filter(|&p| allowed.contains(k.os[p])).collect();
        let idle_core = |p: usize| k.core_cpus[k.core[p]].iter().all(|&c| k.queues[c].is_empty());
        if let Some(p) = prev.filter(|&p| ok.contains(&p) && idle_core(p)) {
            return Some(p);
        }
        let shortest = ok
            .iter()
            .copied()
            .min_by_key(|&p| (k.queues[p].len(), Some(p) != prev, k.queues.ties()[p]));
        if shortest.is_none_or(|p| !k.queues[p].is_empty()) {
            return shortest;
        }
        let idle: Vec<usize> = (0..k.packages)
            .map(|pk| {
                (0..k.len())
                    .filter(|&p| k.package[p] == pk && k.queues[p].is_empty())
                    .count()
            })
            .collect();
        let prev_llc = prev.and_then(|p| k.llc[p]);
        let rank = |p: usize| {
            (
                prev_llc.is_none() || k.llc[p] != prev_llc,
                usize::MAX - idle[k.package[p]],
                k.queues.ties()[p],
            )
        };
        let empty = || ok.iter().copied().filter(|&p| k.queues[p].is_empty());
        empty()
            .filter(|&p| idle_core(p))
            .min_by_key(|&p| rank(p))
            .or_else(|| empty().min_by_key(|&p| rank(p)))
    };
    let mut rng = herd_policy::Rng::new(9);
    let mut next = move || rng.next_u64();
    for (step, thread) in (0..300).zip(0..) {
        let allowed = &sets[(next() % sets.len() as u64) as usize];
        let prev = (next() % 3 > 0).then(|| (next() % 128) as usize);
        let want = brute(&k, allowed, prev);
        let got = k.select(allowed, prev);
        assert_eq!(got, want, "step {step}");
        // Fill to about a third of the CPUs, emptying now and then.
        k.enqueue(thread, got.unwrap());
        if step % 2 == 0 {
            let p = (next() % 128) as usize;
            k.queues.pop(p);
        }
    }
}

#[test]
fn new_threads_get_full_cores_spread_over_packages_then_siblings() {
    let m = Machine::synthetic("package:2 core:2 pu:2").unwrap();
    let mut k = Kernel::new(&m);
    let all = m.all_cpus().clone();
    let mut order = Vec::new();
    for t in 0..8 {
        let p = k.select(&all, None).unwrap();
        k.enqueue(t, p);
        order.push(k.os[p]);
    }
    // Full cores first, alternating packages (S0 Table 1), siblings last.
    assert_eq!(&order[..4], &[0, 4, 2, 6]);
    let mut siblings = order[4..].to_vec();
    siblings.sort();
    assert_eq!(siblings, vec![1, 3, 5, 7]);
}

#[test]
fn seeded_ties_change_which_equal_cpu_comes_first_but_not_the_rules() {
    let m = Machine::synthetic("package:1 core:4").unwrap();
    let all = m.all_cpus().clone();
    let first = |seed: Option<u64>| {
        let mut k = Kernel::new(&m);
        if let Some(s) = seed {
            k.shuffle_ties(s);
        }
        let order: Vec<u32> = (0..4)
            .map(|t| {
                let p = k.select(&all, None).unwrap();
                k.enqueue(t, p);
                k.os[p]
            })
            .collect();
        // Still one task per idle CPU before any CPU gets two.
        let mut sorted = order.clone();
        sorted.sort();
        assert_eq!(sorted, vec![0, 1, 2, 3]);
        order
    };
    assert_eq!(first(None), vec![0, 1, 2, 3]);
    let orders: std::collections::BTreeSet<Vec<u32>> = (1..=10).map(|s| first(Some(s))).collect();
    assert!(orders.len() > 5, "{orders:?}");
    assert_eq!(first(Some(3)), first(Some(3)));
}

#[test]
fn balancing_evens_queues_within_affinity() {
    let m = Machine::synthetic("core:4").unwrap();
    let mut k = Kernel::new(&m);
    for t in 0..6 {
        k.enqueue(t, 0);
    }
    let sets: Vec<CpuSet> = (0..6)
        .map(|t| {
            if t == 5 {
                CpuSet::single(0)
            } else {
                m.all_cpus().clone()
            }
        })
        .collect();
    let moves = k.balance(&sets, &[0.0; 6], 0.0);
    assert!(!moves.is_empty());
    let lens: Vec<usize> = k.queues.iter().map(Vec::len).collect();
    assert!(
        lens.iter().max().unwrap() - lens.iter().min().unwrap() <= 1,
        "{lens:?}"
    );
    assert!(k.queues[0].contains(&5), "the pinned thread stays home");
}

#[test]
fn the_2_6_kernel_wakes_a_task_where_it_last_ran_even_beside_an_idle_core() {
    let m = Machine::synthetic("core:2").unwrap();
    let all = m.all_cpus().clone();
    let mut k = Kernel::new(&m);
    k.enqueue(0, 0);
    // Task 1 last ran on CPU 0, now busy; CPU 1 is idle.
    assert_eq!(
        k.select(&all, Some(0)),
        Some(1),
        "today's kernel finds the idle core"
    );
    k.era = KernelModel::Linux26;
    assert_eq!(k.select(&all, Some(0)), Some(0), "2.6.27 goes back to CPU 0");
    // A new task (no last CPU) still goes to the least loaded CPU.
    assert_eq!(k.select(&all, None), Some(1));
}
