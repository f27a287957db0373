//! Tests of the co-schedulers' shared turns and of cosched:fair.

use super::*;
use crate::testkit::decide_once;
use crate::{JobView, Obs, Placement, TaskState};

/// `n` programs like sysbench: a main thread that sleeps beside one
/// busy worker each (ids 2j+1 and 2j+2).
fn main_and_worker(n: u32, now_ns: u64) -> Snapshot {
    let task = |id: u64, job: u32, busy: bool| TaskView {
        id,
        job,
        rank: (id % 2) as u32,
        state: if busy { TaskState::Runnable } else { TaskState::Blocked },
        cpu: None,
        obs: Obs {
            cpu_time_ns: if busy { 100_000_000 } else { 0 },
            ..Obs::default()
        },
        heartbeats: None,
    };
    let job = |id: u32| JobView {
        id,
        name: format!("p{id}"),
        program: "p".into(),
        arrival_ns: 0,
        memory_hint: None,
        memory_kb: None,
        threads_declared: None,
    };
    Snapshot {
        now_ns,
        period_ns: 100_000_000,
        tasks: (0..n)
            .flat_map(|j| [task(2 * j as u64 + 1, j, false), task(2 * j as u64 + 2, j, true)])
            .collect(),
        jobs: (0..n).map(job).collect(),
        ..Snapshot::default()
    }
}

/// Where each task stands after `plans` in turn (a plan names only
/// changes): how many CPUs it may use, 0 when paused.
fn standing(plans: &[&Plan]) -> BTreeMap<u64, usize> {
    let mut at = BTreeMap::new();
    for plan in plans {
        for (t, pl) in &plan.tasks {
            let n = match pl {
                Placement::Run { cpus, .. } => cpus.len(),
                Placement::Pause { .. } => 0,
            };
            at.insert(*t, n);
        }
    }
    at
}

/// Rounding a count of CPUs without the maths library agrees with
/// `f64::round`, at the halves, beside them and at the extremes.
#[test]
fn cpus_round_as_f64_round_does() {
    let round = |x: f64| x.round().max(1.0) as usize;
    let mut edges = vec![
        0.0,
        -0.0,
        0.5,
        0.499_999_999_999_999_94,
        1.5,
        2.5,
        -0.7,
        f64::NAN,
        f64::INFINITY,
        f64::NEG_INFINITY,
        4_503_599_627_370_495.5,
        9.007_199_254_740_993e15,
        1e300,
    ];
    let mut rng = crate::Rng::new(5);
    edges.extend((0..10_000).map(|_| rng.next_f64() * 300.0));
    edges.extend((0..300).map(|n| n as f64 + 0.5));
    edges.extend((1..300).map(|n| f64::from_bits((n as f64 + 0.5).to_bits() - 1)));
    for x in edges {
        assert_eq!(round_cpus(x).max(1), round(x), "{x:e}");
    }
}

/// A value per job read and written in job order agrees with a map
/// given the same updates, jobs coming and going.
#[test]
fn values_by_job_agree_with_a_map() {
    let mut by = ByJob::<u64>::default();
    let mut map: BTreeMap<JobId, u64> = BTreeMap::new();
    let rounds: [&[JobId]; 4] = [&[3, 5, 9], &[1, 5, 9, 12], &[0, 2, 3], &[12]];
    for (r, jobs) in rounds.iter().enumerate() {
        let items: Vec<(JobId, u64)> = jobs.iter().map(|&j| (j, u64::from(j) + r as u64)).collect();
        by.update(&items, |had, &x| had.unwrap_or(100) + x);
        for &(j, x) in &items {
            *map.entry(j).or_insert(100) += x;
        }
        let asked: Vec<JobId> = (0..14).collect();
        let want: Vec<Option<u64>> = asked.iter().map(|j| map.get(j).copied()).collect();
        let mut read = by.reader();
        assert_eq!(asked.iter().map(|&j| read(j)).collect::<Vec<_>>(), want, "round {r}");
        // Asked out of order, the same.
        let mut read = by.reader();
        let backwards: Vec<Option<u64>> = asked.iter().rev().map(|&j| read(j)).collect();
        assert!(backwards.into_iter().eq(want.into_iter().rev()), "round {r}");
    }
    by.retain(|j| j > 4);
    assert_eq!(by.iter().map(|e| e.0).collect::<Vec<_>>(), [5, 9, 12]);
}

/// A task that leaves the snapshots for some turns and comes back
/// keeps the place it was last given: the plan does not name it again.
#[test]
fn a_task_that_comes_back_keeps_its_place() {
    let m = herd_topo::Machine::synthetic("core:2").unwrap();
    let mut p = CoschedFair::new(None);
    let all = main_and_worker(2, 0);
    let first = decide_once(&mut p, &m, &all);
    assert_eq!(first.tasks.len(), all.tasks.len(), "a first sight places every task");
    let mut gone = None;
    for turn in 1..3 {
        let mut fewer = main_and_worker(2, turn * 100_000_000);
        gone = Some(fewer.tasks.remove(1).id);
        let plan = decide_once(&mut p, &m, &fewer);
        assert!(plan.tasks.is_empty(), "turn {turn}: nothing moves: {plan:?}");
    }
    let back = decide_once(&mut p, &m, &main_and_worker(2, 300_000_000));
    assert!(back.tasks.is_empty(), "task {gone:?} is back where it was: {back:?}");
}

/// Taking turns for many periods, some with a task missing: every
/// task's slot in the map, with the changes not yet taken in applied
/// in order, is the one it was last told, and the changes waiting stay
/// bounded.
#[test]
fn slots_kept_aside_are_the_last_told() {
    let m = herd_topo::Machine::synthetic("core:2").unwrap();
    let mut p = CoschedFair::new(Some(2));
    let mut told: BTreeMap<TaskId, Slot> = BTreeMap::new();
    for turn in 0..40u64 {
        let mut snap = main_and_worker(4, turn * 100_000_000);
        // A paused task ran nothing: the least-served take turns.
        for t in &mut snap.tasks {
            if told.get(&t.id) == Some(&Slot::Paused) {
                t.state = TaskState::Paused;
                t.obs.cpu_time_ns = 0;
            }
        }
        // Long stretches of one task list (the changes waiting are
        // taken in when they grow), then a task away for a turn.
        if turn == 25 || turn == 32 {
            snap.tasks.remove(3);
        }
        decide_once(&mut p, &m, &snap);
        let t = &p.turns;
        for &(id, slot) in &t.aligned {
            told.insert(id, slot.expect("every present task is told"));
        }
        let mut known = t.slots.clone();
        for &i in &t.dirty {
            let (id, slot) = t.aligned[i];
            known.insert(id, slot.unwrap());
        }
        for (id, slot) in &told {
            assert_eq!(known.get(id), Some(slot), "turn {turn}, task {id}");
        }
        assert!(t.dirty.len() <= 2 * t.aligned.len(), "turn {turn}");
    }
}

/// A job's flag reads the same asked in order, out of order, again,
/// or for a job with no count (no).
#[test]
fn flags_by_job_read_alike_in_any_order() {
    let counts = JobCounts(vec![(2, 1), (4, 3), (7, 1), (9, 2)]);
    let yes = [true, false, true, false];
    let want = |j: JobId| counts.position(&j).is_some_and(|i| yes[i]);
    let mut rng = crate::Rng::new(3);
    for round in 0..100 {
        let mut flag = counts.flagged(&yes);
        let mut asked: Vec<JobId> = (0..rng.below(20)).map(|_| rng.below(11) as JobId).collect();
        if round % 2 == 0 {
            asked.sort_unstable();
        }
        for j in asked {
            assert_eq!(flag(j), want(j), "round {round}, job {j}");
        }
    }
}

/// A snapshot's tasks in any order, a job's tasks together or not, give
/// the same counts and the same needs.
#[test]
fn accounts_do_not_depend_on_the_order_of_tasks() {
    let base = main_and_worker(5, 100_000_000);
    let mut reversed = base.clone();
    reversed.tasks.reverse();
    let mut scattered = base.clone();
    scattered.tasks.sort_by_key(|t| (t.rank, t.job));
    let mut counts = Vec::new();
    for snap in [&base, &reversed, &scattered] {
        let mut turns = Turns::default();
        let threads = turns.account(snap);
        let mut need: Vec<(JobId, usize)> = turns.need.iter().map(|(j, n)| (*j, *n)).collect();
        need.sort();
        let mut received: Vec<(JobId, u64)> = turns.received_ns.iter().map(|(j, n)| (*j, *n)).collect();
        received.sort();
        counts.push((threads, need, received));
    }
    assert_eq!(counts[0].0.keys().copied().collect::<Vec<_>>(), [0, 1, 2, 3, 4]);
    // One busy worker beside a sleeping main thread: one CPU each.
    assert!(counts[0].0.values().all(|&n| n == 1), "{:?}", counts[0].0);
    assert_eq!(counts[0], counts[1]);
    assert_eq!(counts[0], counts[2]);
}

/// Two programs of two processes on two CPUs, each process 50 ms of
/// CPU and `wait_ms` of waits over `slices` times on a CPU in a 100 ms
/// period (`None`: a sensor that does not count them).
fn pairs(wait_ms: u64, slices: Option<u64>, now_ns: u64) -> Snapshot {
    let mut snap = main_and_worker(2, now_ns);
    for t in &mut snap.tasks {
        t.state = TaskState::Runnable;
        t.obs = Obs {
            cpu_time_ns: 50_000_000,
            wait_ns: wait_ms * 1_000_000,
            timeslices: slices,
            ..Obs::default()
        };
    }
    snap
}

/// A snapshot that repeats the last one period on is accounted as
/// summing it again would (its sums kept, not its tasks walked); one
/// that says it repeats but does not follow the last is summed from
/// its tasks. Each job's tasks in one run, and scattered.
#[test]
fn a_repeated_snapshot_accounts_as_summing_it_again() {
    let state = |t: &Turns| (t.received_ns.clone(), t.need.clone());
    for scatter in [false, true] {
        let at = |now_ns: u64, busy_ns: u64, repeats_last: bool| {
            let mut snap = main_and_worker(3, now_ns);
            for (i, t) in snap.tasks.iter_mut().enumerate() {
                t.obs.cpu_time_ns = busy_ns * (i as u64 % 3);
            }
            if scatter {
                snap.tasks.sort_by_key(|t| (t.rank, t.job));
            }
            snap.repeats_last = repeats_last;
            snap
        };
        let run = |snaps: &[Snapshot]| {
            let mut turns = Turns::default();
            let counts: Vec<JobCounts> = snaps.iter().map(|s| turns.account(s)).collect();
            (counts, state(&turns))
        };
        let p = 100_000_000;
        let first = at(p, 40_000_000, false);
        let summed = run(&[first.clone(), at(2 * p, 40_000_000, false)]);
        assert_eq!(run(&[first.clone(), at(2 * p, 40_000_000, true)]), summed);
        // Two periods on, with other readings: its own are summed.
        let own = run(&[first.clone(), at(3 * p, 5_000_000, false)]);
        assert_ne!(own, run(&[first.clone(), at(3 * p, 40_000_000, false)]));
        assert_eq!(run(&[first, at(3 * p, 5_000_000, true)]), own, "scattered: {scatter}");
    }
}

/// A turn on a snapshot that repeats the last, after a turn that changed
/// nothing, changes nothing without a pass over the tasks; every plan is
/// the one a turn that walks every task gives; so does a turn without pins
/// on the same tasks, repeated or not. Admissions and pinning are drawn at
/// random, tasks sleep and wake (a resumed task counts as busy for one
/// turn, so a repeat after it may move it), threads end and others start,
/// and some turns are not the policy's (the next snapshot does not follow
/// its last).
#[test]
fn a_quiet_turn_repeated_plans_as_walking_the_tasks_does() {
    let m = herd_topo::Machine::synthetic("core:6").unwrap();
    let (est, know) = (crate::Estimates::default(), crate::Knowledge::default());
    let mut rng = crate::Rng::new(11);
    let (mut told, mut walked) = (Turns::default(), Turns::default());
    let p = 100_000_000;
    let mut snap = main_and_worker(5, p);
    let (mut admit_bits, mut pin) = (0u32, false);
    let (mut quiet_repeats, mut moved_on_repeat, mut moved_after_moves) = (0, 0, 0);
    let (mut last_turn, mut unpinned_new_readings, mut epoch) = (0, 0, 1);
    for turn in 1..4_000u64 {
        let repeat = turn > 1 && rng.next_f64() < 0.6;
        if !repeat {
            for t in &mut snap.tasks {
                let busy = rng.next_f64() < 0.5;
                t.state = if busy { TaskState::Runnable } else { TaskState::Blocked };
                t.obs.cpu_time_ns = if busy { p } else { 0 };
            }
            if rng.next_f64() < 0.2 {
                // A thread ends and another of its program's starts: the
                // same runs of tasks, one new task, a new list.
                let k = (rng.next_f64() * snap.tasks.len() as f64) as usize;
                snap.tasks[k].id += 100;
                epoch += 1;
            }
        }
        // The sensor names the list, or (as live) vouches for nothing.
        snap.tasks_epoch = if rng.next_f64() < 0.2 { 0 } else { epoch };
        // New readings with the same admissions too, so that only the
        // snapshot tells the turns apart.
        let mut redrawn = false;
        if rng.next_f64() < if repeat { 0.1 } else { 0.3 } {
            admit_bits = (rng.next_f64() * 32.0) as u32;
            redrawn = true;
        }
        if rng.next_f64() < 0.1 {
            pin = !pin;
            redrawn = true;
        }
        snap.now_ns = turn * p;
        if rng.next_f64() < 0.05 {
            // A turn the policy did not take: the next does not follow it.
            continue;
        }
        snap.repeats_last = repeat;
        let mut plain = snap.clone();
        plain.repeats_last = false;
        let view = |s| View {
            machine: &m,
            snapshot: s,
            estimates: &est,
            learned: &know,
            oracle: None,
            seed: 1,
            decision: turn,
        };
        let admitted = |j: JobId| admit_bits >> j & 1 == 1;
        let quiet = told.quiet.is_some();
        let got = told.apply(&view(&snap), admitted, pin, "run", "pause");
        // The reference has no memo to answer from.
        walked.quiet = None;
        let want = walked.apply(&view(&plain), admitted, pin, "run", "pause");
        assert_eq!(got, want, "turn {turn}");
        if !repeat && !redrawn && !pin && quiet {
            unpinned_new_readings += 1;
        }
        if repeat && !redrawn && last_turn + 1 == turn {
            if quiet {
                quiet_repeats += 1;
                moved_on_repeat += usize::from(!want.tasks.is_empty());
            } else {
                moved_after_moves += usize::from(!want.tasks.is_empty());
            }
        }
        last_turn = turn;
    }
    // The same turn after a quiet one is quiet, often; after one that
    // moved tasks, sometimes not (a resumed task that sleeps leaves its
    // CPU): what the memo must not answer for.
    assert!(quiet_repeats > 200, "{quiet_repeats} quiet repeats");
    assert_eq!(moved_on_repeat, 0);
    assert!(moved_after_moves > 20, "{moved_after_moves} repeats that moved tasks");
    // New readings after a quiet turn without pins, with the same
    // admissions: quiet unless a task is new.
    assert!(unpinned_new_readings > 50, "{unpinned_new_readings} unpinned turns");
}

#[test]
fn work_handed_between_a_programs_processes_asks_one_cpu_not_two() {
    let m = herd_topo::Machine::synthetic("core:2").unwrap();
    let paused = |wait_ms, slices| {
        let mut p = CoschedFair::new(None);
        let plans: Vec<Plan> = (0..3)
            .map(|t| decide_once(&mut p, &m, &pairs(wait_ms, slices, t * 100_000_000)))
            .collect();
        let at = standing(&plans.iter().collect::<Vec<_>>());
        at.values().filter(|&&n| n == 0).count()
    };
    // stress-ng's switch stressor: 25 ms of waits over 16,000 times on
    // a CPU (1.6 us each), hand-offs. Each program wants one CPU: both
    // run, nobody waits its turn.
    assert_eq!(paused(25, Some(16_000)), 0);
    // The same waits over 12 times on a CPU (2 ms each, a time slice):
    // both processes want a CPU at once, two per program; they take
    // turns.
    assert_eq!(paused(25, Some(12)), 2);
    // Without the count every wait is a want of a CPU, as before.
    assert_eq!(paused(25, None), 2);
}

#[test]
fn sleeping_threads_take_no_cpu_from_busy_ones() {
    let m = herd_topo::Machine::synthetic("core:2").unwrap();
    // Two such programs on two CPUs both run, every turn, and the
    // kernel places them: there are no turns to take.
    let mut p = CoschedFair::new(None);
    for t in 0..4 {
        let plan = decide_once(&mut p, &m, &main_and_worker(2, t * 100_000_000));
        assert!(
            plan.tasks.iter().all(|(_, pl)| matches!(pl, Placement::Run { cpus, .. } if cpus.len() == 2)),
            "turn {t}: nobody waits or is pinned: {plan:?}"
        );
    }
    // Three, under a cap of two threads at once, take turns: whoever
    // runs has its worker on a CPU of its own, and its sleeping main
    // thread anywhere. The first turn cannot tell the sleeping threads
    // yet: a task with no place counts as busy until it has had a
    // period to show.
    let mut p = CoschedFair::new(Some(2));
    let first = decide_once(&mut p, &m, &main_and_worker(3, 0));
    let second = decide_once(&mut p, &m, &main_and_worker(3, 100_000_000));
    let at = standing(&[&first, &second]);
    assert_eq!(at.values().filter(|&&n| n == 0).count(), 2, "one program waits: {at:?}");
    let pinned: Vec<u64> = at.iter().filter(|(_, n)| **n == 1).map(|(t, _)| *t).collect();
    assert_eq!(pinned.len(), 2, "two workers run, a CPU each: {at:?}");
    assert!(pinned.iter().all(|id| id % 2 == 0), "only workers are pinned: {at:?}");
    assert!(
        at.iter().any(|(id, n)| id % 2 == 1 && *n == 2),
        "a running main thread may run anywhere: {at:?}"
    );
}

/// Programs that each need one CPU have no gang to keep together: once
/// their sleeping threads are told apart, all run and the kernel
/// places them, more of them than CPUs. A cap the user gives holds.
#[test]
fn programs_of_one_busy_thread_each_are_left_to_the_kernel() {
    let m = herd_topo::Machine::synthetic("core:2").unwrap();
    for (slots, turns) in [(None, false), (Some(2), true)] {
        let mut p = CoschedFair::new(slots);
        let plans: Vec<Plan> = (0..4)
            .map(|t| decide_once(&mut p, &m, &main_and_worker(3, t * 100_000_000)))
            .collect();
        let at = standing(&plans.iter().collect::<Vec<_>>());
        let waiting = at.values().filter(|&&n| n == 0).count();
        let pinned = at.values().filter(|&&n| n == 1).count();
        if turns {
            assert_eq!((waiting, pinned), (2, 2), "slots=2: one program waits: {at:?}");
        } else {
            assert_eq!((waiting, pinned), (0, 0), "nobody waits or is pinned: {at:?}");
        }
    }
}
