//! `pack`'s tests (their own file: pack.rs is long enough).

use super::*;

use crate::{Snapshot, TaskState};
use herd_topo::Machine;

fn snap(now_ns: u64, beats: &[Option<u64>]) -> Snapshot {
    crate::testkit::beats_snapshot(now_ns, beats)
}

/// The period PALM asks for after a decision at `now_ns` with three threads
/// at `beats` each (and a fourth that does not beat).
fn period_after(p: &mut Pack, m: &Machine, now_ns: u64, beats: u64) -> u64 {
    let s = snap(now_ns, &[Some(beats), Some(beats), Some(beats), None]);
    crate::testkit::decide_once(p, m, &s).next_period_ns.unwrap()
}

fn cpu_of(plan: &Plan, task: TaskId) -> Option<u32> {
    plan.tasks
        .iter()
        .find(|(t, _)| *t == task)
        .and_then(|(_, p)| match p {
            crate::Placement::Run { cpus, .. } => cpus.iter().next(),
            crate::Placement::Pause { .. } => None,
        })
}

#[test]
fn the_least_progressed_thread_gets_a_core_alone_and_the_period_adapts() {
    let m = Machine::synthetic("core:2").unwrap();
    // S4's controller: an epoch of one period, any change moves it.
    let mut p = Pack::new(Packing::Palm, Some(2), Controller::s4());
    // Three workers and a main thread that beats nothing (waiting in join).
    let plan = crate::testkit::decide_once(&mut p, &m, &snap(0, &[Some(10), Some(5), Some(8), None]));
    assert_eq!(plan.next_period_ns, Some(125_000));
    let solo = cpu_of(&plan, 2).expect("placed");
    assert_ne!(cpu_of(&plan, 3), Some(solo), "the least progressed is alone");
    assert_eq!(cpu_of(&plan, 1), cpu_of(&plan, 3), "the other two share a core");
    let main = plan.tasks.iter().find(|(t, _)| *t == 4).expect("main placed");
    assert!(matches!(&main.1, crate::Placement::Run { cpus, .. } if cpus.len() == 2));
    assert!(plan.note.as_deref().unwrap().contains("progress from heartbeats"));
    // More progress per second in the next epoch: the period doubles.
    crate::testkit::decide_once(&mut p, &m, &snap(200_000, &[Some(20), Some(15), Some(18), None]));
    let plan = crate::testkit::decide_once(&mut p, &m, &snap(400_000, &[Some(40), Some(35), Some(38), None]));
    assert_eq!(plan.next_period_ns, Some(250_000));
    assert_eq!(
        crate::build("pack:palm:cores=2,max_period_ms=8").unwrap().name(),
        "pack:palm:cores=2,max_period_ms=8"
    );
    // A fixed period: the controller never moves it.
    let mut fixed = crate::build("pack:palm:cores=2,period_us=500").unwrap();
    assert_eq!(fixed.name(), "pack:palm:cores=2,period_us=500");
    for t in 0..4u64 {
        let plan = crate::testkit::decide_once(
            fixed.as_mut(),
            &m,
            &snap(t * 600_000, &[Some(10 * t * t), Some(5), Some(8), None]),
        );
        assert_eq!(plan.next_period_ns, Some(500_000));
    }
}

/// Without heartbeats, a thread that neither runs nor waits (a parent
/// waiting for its children) takes no group's place: with the least CPU
/// time it held a core of its own for good, and its two working children
/// shared the other (stress-ng --cpu 2 under herd on 2 CPUs: 0.44x the
/// kernel's progress). It rejoins the groups once it works.
#[test]
fn a_sleeping_parent_takes_no_core_from_the_workers() {
    let m = Machine::synthetic("core:2").unwrap();
    let mut p = Pack::new(Packing::Palm, Some(2), Controller::s4());
    // Period 1 ms: the parent (1) slept through it, the workers ran it all.
    let at = |now_ns: u64, parent: (u64, TaskState)| {
        let mut s = snap(now_ns, &[None, None, None]);
        s.period_ns = 1_000_000;
        for t in &mut s.tasks {
            t.obs.cpu_time_ns = 1_000_000;
        }
        (s.tasks[0].obs.cpu_time_ns, s.tasks[0].state) = parent;
        s
    };
    let plan = crate::testkit::decide_once(&mut p, &m, &at(1_000_000, (1_000, TaskState::Blocked)));
    let parent = plan.tasks.iter().find(|(t, _)| *t == 1).expect("parent placed");
    assert!(
        matches!(&parent.1, crate::Placement::Run { cpus, .. } if cpus.len() == 2),
        "the parent may run on either core: {:?}",
        parent.1
    );
    let (a, b) = (cpu_of(&plan, 2).expect("placed"), cpu_of(&plan, 3).expect("placed"));
    assert_ne!(a, b, "each worker has a core of its own");
    // It works again: it joins a group.
    let plan = crate::testkit::decide_once(&mut p, &m, &at(2_000_000, (900_000, TaskState::Runnable)));
    let parent = plan.tasks.iter().find(|(t, _)| *t == 1).expect("parent placed again");
    assert!(matches!(&parent.1, crate::Placement::Run { cpus, .. } if cpus.len() == 1));
}

/// Without heartbeats, threads that hand work on in short bursts (two
/// stress-ng switch pairs) take no group's place, and with nothing to
/// rotate PALM looks again at its longest period, not every 0.125 ms:
/// turns that fast parted the pairs (1.55x plain Linux's time).
#[test]
fn threads_that_hand_work_on_are_left_to_the_kernel_at_a_slow_pace() {
    let m = Machine::synthetic("core:2").unwrap();
    let mut p = Pack::new(Packing::Palm, None, Controller::default());
    let mut s = snap(1_000_000, &[None, None, None, None]);
    s.period_ns = 1_000_000;
    for t in &mut s.tasks {
        // Half the period, in 2 us bursts.
        t.obs.cpu_time_ns = 500_000;
        t.obs.timeslices = Some(250);
    }
    let plan = crate::testkit::decide_once(&mut p, &m, &s);
    assert_eq!(plan.tasks.len(), 4);
    for (id, placement) in &plan.tasks {
        assert!(
            matches!(placement, crate::Placement::Run { cpus, .. } if cpus.len() == 2),
            "{id}: {placement:?}"
        );
    }
    assert_eq!(plan.next_period_ns, Some(Controller::default().max_period_ns));
    // They compute (slices of milliseconds): four threads on two cores,
    // rotated at PALM's pace.
    s.now_ns = 2_000_000;
    for t in &mut s.tasks {
        t.obs.timeslices = Some(1);
    }
    let plan = crate::testkit::decide_once(&mut p, &m, &s);
    assert!(plan.tasks.iter().all(|(_, pl)| matches!(pl, crate::Placement::Run { cpus, .. } if cpus.len() == 1)));
    assert_eq!(plan.next_period_ns, Some(Controller::default().min_period_ns));
}

#[test]
fn a_budget_set_from_outside_moves_every_thread_onto_the_new_cores() {
    let m = Machine::synthetic("core:4").unwrap();
    let cpus_of = |plan: &Plan| -> Vec<CpuSet> {
        plan.tasks
            .iter()
            .filter_map(|(_, p)| match p {
                crate::Placement::Run { cpus, .. } => Some(cpus.clone()),
                crate::Placement::Pause { .. } => None,
            })
            .collect()
    };
    let union = |plan: &Plan| -> CpuSet { cpus_of(plan).iter().flat_map(|c| c.iter()).collect() };
    for kind in [Packing::Tp, Packing::Palm] {
        let mut p = Pack::new(kind, Some(3), Controller::default());
        let mut s = snap(0, &[Some(1), Some(2), Some(3), Some(4)]);
        let plan = crate::testkit::decide_once(&mut p, &m, &s);
        assert_eq!(union(&plan).len(), 3, "{kind:?}: cores=3 without a budget");
        // The controller shrinks the budget to 2 cores: all four threads
        // are placed again, on two cores only.
        s.now_ns = 1_000_000;
        s.budget_cores = Some(2);
        let plan = crate::testkit::decide_once(&mut p, &m, &s);
        assert_eq!(cpus_of(&plan).len(), 4, "{kind:?}: every thread placed again");
        assert_eq!(union(&plan).len(), 2, "{kind:?}");
        assert!(plan.note.as_deref().unwrap().contains("budget is now 2 cores"));
        // Unchanged budget: nothing moves for TP.
        s.now_ns = 2_000_000;
        let plan = crate::testkit::decide_once(&mut p, &m, &s);
        if kind == Packing::Tp {
            assert!(plan.tasks.is_empty());
        }
        // A budget beyond the machine is the machine.
        s.budget_cores = Some(99);
        let plan = crate::testkit::decide_once(&mut p, &m, &s);
        assert_eq!(union(&plan).len(), 4, "{kind:?}");
    }
}

#[test]
fn herds_controller_waits_out_an_epoch_and_keeps_the_period_within_its_dead_band() {
    let m = Machine::synthetic("core:2").unwrap();
    let c = Controller {
        min_epoch_ns: 1_000_000,
        tolerance: 0.1,
        ..Controller::default()
    };
    let mut p = Pack::new(Packing::Palm, Some(2), c);
    let mut period_at = |t_us: u64, beats: u64| period_after(&mut p, &m, t_us * 1000, beats);
    // 100 beats per ms each epoch.
    assert_eq!(period_at(0, 0), 125_000);
    assert_eq!(period_at(500, 50), 125_000, "the first epoch is not over");
    assert_eq!(
        period_at(1000, 100),
        125_000,
        "no epoch before it to compare with"
    );
    // 5% faster: inside the 10% dead band, the period stays.
    assert_eq!(period_at(2000, 205), 125_000);
    // 20% faster than that: double.
    assert_eq!(period_at(3000, 331), 250_000);
    // Much slower: halve.
    assert_eq!(period_at(4000, 381), 125_000);
}

#[test]
fn a_better_epoch_after_an_undone_move_holds_where_s4s_rule_doubles_again() {
    let m = Machine::synthetic("core:2").unwrap();
    let c = Controller {
        min_epoch_ns: 1_000_000,
        epoch_beats: 0,
        ..Controller::default()
    };
    for (climb, want) in [(true, 125_000), (false, 250_000)] {
        let mut p = Pack::new(Packing::Palm, Some(2), Controller { climb, ..c });
        let mut beats = 0;
        let mut period = 0;
        // Beats per ms, epoch after epoch: better (double), worse
        // (back), better again (the recovery).
        for (ms, rate) in [100, 100, 120, 90, 120].into_iter().enumerate() {
            beats += rate;
            period = period_after(&mut p, &m, ms as u64 * 1_000_000, beats);
        }
        assert_eq!(period, want, "climb={climb}");
    }
}

#[test]
fn one_thread_moves_when_the_laggard_changes_among_three_on_two_cores() {
    let m = Machine::synthetic("core:2").unwrap();
    let mut p = Pack::new(Packing::Palm, Some(2), Controller::fixed(125_000));
    let first = crate::testkit::decide_once(&mut p, &m, &snap(0, &[Some(10), Some(5), Some(8), None]));
    let alone = cpu_of(&first, 2).unwrap();
    assert_ne!(cpu_of(&first, 1), Some(alone));
    // Thread 3 falls behind: it keeps its core and gets it alone; one of
    // the others joins the former laggard, who stays where it is.
    let next = crate::testkit::decide_once(&mut p, &m, &snap(125_000, &[Some(20), Some(15), Some(9), None]));
    let moved: Vec<_> = next.tasks.iter().filter(|(t, _)| *t != 4).collect();
    assert_eq!(moved.len(), 1, "{moved:?}");
    assert!(cpu_of(&next, 3).is_none(), "the new laggard is not moved");
    assert!(cpu_of(&next, 2).is_none(), "the old laggard is not moved");
    assert_eq!(
        arrange_sizes(
            &[1.0, 1.0],
            &[2, 1],
            &[vec![1.0f64.to_bits(), 0.5f64.to_bits()], vec![0.5f64.to_bits()]]
        ),
        vec![1, 2]
    );
}

#[test]
fn group_sizes_follow_capacity_per_thread() {
    assert_eq!(group_sizes(&[360.0, 220.0, 100.0], 6), vec![3, 2, 1]);
    assert_eq!(group_sizes(&[1.0, 1.0], 3), vec![2, 1]);
    assert_eq!(group_sizes(&[1.0, 1.0], 1), vec![1, 0]);
}

/// The rule as first written: a search of every group per thread.
fn group_sizes_scan(capacities: &[f64], threads: usize) -> Vec<usize> {
    let mut n = vec![0usize; capacities.len()];
    for t in 0..threads {
        let g = if t < capacities.len() {
            t
        } else {
            (0..capacities.len())
                .max_by(|&a, &b| {
                    (capacities[a] / (n[a] + 1) as f64)
                        .total_cmp(&(capacities[b] / (n[b] + 1) as f64))
                        .then(b.cmp(&a))
                })
                .expect("at least one group")
        };
        n[g] += 1;
    }
    n
}

#[test]
fn group_sizes_from_the_heap_are_the_scans() {
    let mut x = 0x2545_F491_4F6C_DD1Du64;
    let mut next = || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x
    };
    assert_eq!(group_sizes(&[360.0, 220.0, 100.0], 6), vec![3, 2, 1]);
    for _ in 0..600 {
        let groups = 1 + (next() % 12) as usize;
        // Equal capacities too (ties go to the lower group).
        let mut caps: Vec<f64> = (0..groups).map(|_| [1.0, 0.6, 2.5][(next() % 3) as usize]).collect();
        // Every group alike a third of the time (the dealt-round path),
        // some of them at capacities where dividing stops falling: zero,
        // infinity and the smallest subnormal (the heap's path).
        if next() % 3 == 0 {
            let c = [1.0, 0.6, 0.0, f64::INFINITY, 5e-324, 1e-300][(next() % 6) as usize];
            caps.iter_mut().for_each(|x| *x = c);
        }
        let threads = (next() % 80) as usize;
        assert_eq!(group_sizes(&caps, threads), group_sizes_scan(&caps, threads), "{caps:?} {threads}");
    }
}

/// [`arrange_sizes`] as first written: each core's gain counted at every
/// comparison of a stable sort.
fn arrange_sizes_by_stable_sort(caps: &[f64], base: &[usize], current: &[Vec<u64>]) -> Vec<usize> {
    let keep = |g: usize, n: usize| {
        let class = class_key(caps[g], n);
        current[g].iter().filter(|&&c| c == class).count().min(n)
    };
    let mut out = base.to_vec();
    let mut kinds: std::collections::BTreeMap<u64, Vec<usize>> = Default::default();
    for (g, cap) in caps.iter().enumerate().take(base.len()) {
        kinds.entry(cap.to_bits()).or_default().push(g);
    }
    for cores in kinds.values() {
        let small = cores.iter().map(|&g| base[g]).min().unwrap_or(0);
        let big = cores.iter().filter(|&&g| base[g] > small).count();
        let mut ranked = cores.clone();
        ranked.sort_by_key(|&g| {
            let gain = keep(g, small + 1) as i64 - keep(g, small) as i64;
            (std::cmp::Reverse(gain), base[g] == small, g)
        });
        for (i, &g) in ranked.iter().enumerate() {
            out[g] = if i < big { small + 1 } else { small };
        }
    }
    out
}

/// Sizes arranged with each core's key made once are those the stable
/// sort by keys made at each comparison gave: cores of up to three
/// capacities, sizes 0-6, and threads wanting those classes, others, or
/// none.
#[test]
fn arranged_sizes_are_the_stable_sorts() {
    let mut rng = crate::Rng::new(29);
    for round in 0..400 {
        let cores = 1 + rng.below(24) as usize;
        let threads = rng.below(7 * cores as u64) as usize;
        // Positive capacities: at zero `group_sizes` gives one core every
        // thread, outside what `arrange_sizes` takes (sizes one apart).
        let caps: Vec<f64> = (0..cores).map(|_| [1.0, 0.6, 2.5][rng.below(3) as usize]).collect();
        let base = group_sizes(&caps, threads);
        let classes: Vec<u64> = (0..8)
            .map(|n| class_key([1.0, 0.6, 2.5][rng.below(3) as usize], n))
            .collect();
        let current: Vec<Vec<u64>> = (0..cores)
            .map(|_| (0..rng.below(8)).map(|_| classes[rng.below(8) as usize]).collect())
            .collect();
        assert_eq!(
            arrange_sizes(&caps, &base, &current),
            arrange_sizes_by_stable_sort(&caps, &base, &current),
            "round {round}: {caps:?} {base:?} {current:?}"
        );
    }
}
