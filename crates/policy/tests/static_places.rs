//! `static:compact` and `static:scatter` on what real programs look like:
//! OpenMP teams (every thread works from the start) and process trees
//! (a shell or pool parent and helper threads asleep beside the workers).

use herd_policy::{Estimates, Knowledge, Obs, Placement, Snapshot, TaskState, TaskView, View};
use herd_topo::Machine;

const PERIOD_NS: u64 = 100_000_000;

/// A task of job 0; `busy`: it used the whole last period and is runnable,
/// else it slept through it.
fn task(id: u64, rank: u32, busy: bool) -> TaskView {
    TaskView {
        id,
        job: 0,
        rank,
        state: if busy {
            TaskState::Runnable
        } else {
            TaskState::Blocked
        },
        cpu: None,
        obs: Obs {
            cpu_time_ns: if busy { PERIOD_NS } else { 0 },
            ..Obs::default()
        },
        heartbeats: None,
    }
}

/// (task, CPU) of each placement the policy makes for `tasks` after a
/// period of `period_ns` (0: the first look, nothing measured yet), sorted.
fn decide(
    p: &mut dyn herd_policy::Policy,
    m: &Machine,
    tasks: Vec<TaskView>,
    period_ns: u64,
) -> Vec<(u64, u32)> {
    let snapshot = Snapshot {
        tasks,
        period_ns,
        ..Snapshot::default()
    };
    let plan = p.decide(&View {
        machine: m,
        snapshot: &snapshot,
        estimates: &Estimates::new(),
        learned: &Knowledge::default(),
        oracle: None,
        seed: 1,
        decision: 0,
    });
    let mut out: Vec<(u64, u32)> = plan
        .tasks
        .iter()
        .map(|(id, pl)| match pl {
            Placement::Run { cpus, .. } => {
                assert_eq!(cpus.len(), 1, "one hardware thread per thread");
                (*id, cpus.iter().next().unwrap())
            }
            Placement::Pause { .. } => panic!("static policies never pause"),
        })
        .collect();
    out.sort_unstable();
    out
}

#[test]
fn an_openmp_team_takes_the_order_by_rank() {
    let m = Machine::synthetic("package:1 core:4 pu:1").unwrap();
    let mut p = herd_policy::build("static:compact").unwrap();
    // Listed out of rank order: the ranks decide, not the listing.
    let team = vec![
        task(13, 3, true),
        task(10, 0, true),
        task(12, 2, true),
        task(11, 1, true),
    ];
    assert_eq!(
        decide(p.as_mut(), &m, team.clone(), 0),
        vec![(10, 0), (11, 1), (12, 2), (13, 3)]
    );
    // Placed once: nothing more to do.
    assert!(decide(p.as_mut(), &m, team, PERIOD_NS).is_empty());
}

#[test]
fn sleeping_helpers_take_no_place_and_the_workers_get_cpus_of_their_own() {
    // A Python pool on two CPUs: the parent is placed at first sight (it
    // was starting up); then it waits, and of its helper threads and two
    // worker processes only the workers work.
    let m = Machine::synthetic("package:1 core:2 pu:1").unwrap();
    let mut p = herd_policy::build("static:compact").unwrap();
    assert_eq!(decide(p.as_mut(), &m, vec![task(1, 0, true)], 0), vec![(1, 0)]);
    let tree = vec![
        task(1, 0, false),
        task(2, 1, false),
        task(3, 2, false),
        task(4, 3, true),
        task(5, 4, true),
    ];
    let placed = decide(p.as_mut(), &m, tree.clone(), PERIOD_NS);
    assert_eq!(placed.len(), 2, "only the workers: {placed:?}");
    assert_ne!(placed[0].1, placed[1].1, "the workers share a CPU: {placed:?}");
    // A helper that starts to work is placed then, though the tasks are
    // the same as last time.
    let mut woke = tree;
    woke[1] = task(2, 1, true);
    assert_eq!(decide(p.as_mut(), &m, woke, PERIOD_NS).len(), 1);
}

#[test]
fn a_place_freed_by_a_thread_that_left_is_taken_by_the_next() {
    // make on two CPUs: one compiler after another, two at a time.
    let m = Machine::synthetic("package:1 core:2 pu:1").unwrap();
    let mut p = herd_policy::build("static:scatter").unwrap();
    let first = decide(p.as_mut(), &m, vec![task(1, 0, true), task(2, 1, true)], 0);
    assert_eq!(first, vec![(1, 0), (2, 1)]);
    // The second compiler exits first and a third starts: it takes the
    // second's CPU, not (by its rank) the one the first still runs on.
    let next = decide(
        p.as_mut(),
        &m,
        vec![task(1, 0, true), task(3, 2, true)],
        PERIOD_NS,
    );
    assert_eq!(next, vec![(3, 1)]);
}

#[test]
fn threads_that_wait_for_their_children_leave_the_cpu_to_them() {
    // make -j2 on two CPUs: make and each `cc` driver work a moment, then
    // wait while the compiler they started (`cc1`) works. Two compilers
    // at once must get a CPU each, whatever places the waiting ones hold.
    let m = Machine::synthetic("package:1 core:2 pu:1").unwrap();
    let mut p = herd_policy::build("static:compact").unwrap();
    let (sh, make, cc_a, cc1_a, cc_b, cc1_b) = (1, 2, 3, 4, 5, 6);
    assert_eq!(decide(p.as_mut(), &m, vec![task(sh, 0, true)], 0), vec![(sh, 0)]);
    let mut tree = vec![task(sh, 0, false), task(make, 1, true)];
    assert_eq!(decide(p.as_mut(), &m, tree.clone(), PERIOD_NS).len(), 1);
    tree[1] = task(make, 1, false);
    tree.push(task(cc_a, 2, true));
    assert_eq!(decide(p.as_mut(), &m, tree.clone(), PERIOD_NS).len(), 1);
    tree[2] = task(cc_a, 2, false);
    tree.extend([task(cc1_a, 3, true), task(cc_b, 4, true)]);
    let placed = decide(p.as_mut(), &m, tree.clone(), PERIOD_NS);
    assert_eq!(placed.len(), 2, "{placed:?}");
    let cpu_a = placed.iter().find(|(t, _)| *t == cc1_a).unwrap().1;
    tree[4] = task(cc_b, 4, false);
    tree.push(task(cc1_b, 5, true));
    let placed = decide(p.as_mut(), &m, tree, PERIOD_NS);
    assert_eq!(placed.len(), 1, "{placed:?}");
    assert_ne!(placed[0].1, cpu_a, "two compilers on one CPU of two");
}

/// Processes that hand work to each other (stress-ng's switch stressor:
/// each ran 2 us at a time, 126,000 times in half a second) take no CPU
/// of their own: the kernel keeps each pair on one CPU as it wakes them.
/// Pinned one to a CPU, the two pairs were split across the two CPUs and
/// static:compact took 5.0x plain Linux's time with the guard off. A
/// thread that computes (a slice of milliseconds) is placed as before.
#[test]
fn threads_that_hand_work_on_take_no_cpu_of_their_own() {
    let m = Machine::synthetic("package:1 core:2 pu:1").unwrap();
    // Each of a pair ran half the period in 2 us bursts.
    let bursty = |id: u64, rank: u32| {
        let mut t = task(id, rank, true);
        t.obs.cpu_time_ns = PERIOD_NS / 2;
        t.obs.timeslices = Some(PERIOD_NS / 2 / 2_000);
        t
    };
    for policy in ["static:compact", "static:scatter", "smt:spn"] {
        let mut p = herd_policy::build(policy).unwrap();
        // Their first look (nothing measured) places the parent alone.
        assert_eq!(
            decide(p.as_mut(), &m, vec![task(1, 0, true)], 0).len(),
            1,
            "{policy}"
        );
        let mut pairs = vec![
            task(1, 0, false),
            bursty(2, 1),
            bursty(3, 2),
            bursty(4, 3),
            bursty(5, 4),
        ];
        assert!(
            decide(p.as_mut(), &m, pairs.clone(), PERIOD_NS).is_empty(),
            "{policy}: a thread that hands work on was pinned"
        );
        // One of them starts to compute: it is placed.
        pairs[1].obs.timeslices = Some(20);
        assert_eq!(
            decide(p.as_mut(), &m, pairs.clone(), PERIOD_NS).len(),
            1,
            "{policy}"
        );
    }
}
