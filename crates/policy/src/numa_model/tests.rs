//! Tests of `numa:model`.

use super::*;
use crate::{JobView, Obs, Snapshot, TaskState, TaskView};

fn job(id: JobId, hint: Level) -> JobView {
    JobView {
        id,
        name: format!("j{id}"),
        program: format!("p{id}"),
        arrival_ns: 0,
        memory_hint: Some(hint),
        memory_kb: None,
        threads_declared: None,
    }
}

fn tasks(job: JobId, first_id: u64, n: u32) -> Vec<TaskView> {
    (0..n)
        .map(|rank| TaskView {
            id: first_id + u64::from(rank),
            job,
            rank,
            state: TaskState::Runnable,
            cpu: None,
            obs: Obs::default(),
            heartbeats: None,
        })
        .collect()
}

fn decide(p: &mut NumaModel, m: &Machine, snap: &Snapshot) -> Plan {
    crate::testkit::decide_once(p, m, snap)
}

/// A 2-node machine of 8 CPUs, the policy, and job 0 at first sight
/// with its one thread (id 100), decided.
fn first_sight_of_one_thread(hint: Level) -> (Machine, NumaModel, Snapshot) {
    let m = Machine::synthetic("package:2 numa:1 core:4").unwrap();
    let mut p = NumaModel::new(DEFAULT_NODE_BW_GBPS, DEFAULT_SHARED);
    let snap = Snapshot {
        tasks: tasks(0, 100, 1),
        jobs: vec![job(0, hint)],
        ..Snapshot::default()
    };
    let first = decide(&mut p, &m, &snap);
    assert_eq!(nodes_of(&m, &first).iter().sum::<u32>(), 1);
    (m, p, snap)
}

/// Threads pinned, and the CPUs they are on.
fn pins(p: &NumaModel) -> (usize, usize) {
    let cpus: std::collections::BTreeSet<u32> = p.cpu_of.values().copied().collect();
    (p.cpu_of.len(), cpus.len())
}

fn nodes_of(m: &Machine, plan: &Plan) -> Vec<u32> {
    let mut per = vec![0; m.numa_nodes().len()];
    for (_, pl) in &plan.tasks {
        if let crate::Placement::Run { cpus, .. } = pl {
            assert_eq!(cpus.len(), 1, "one CPU a thread");
            per[m.cpu(cpus.iter().next().unwrap()).unwrap().numa] += 1;
        }
    }
    per
}

#[test]
fn a_memory_bound_job_scatters_and_a_compute_job_keeps_room_for_the_next() {
    let m = Machine::synthetic("package:2 numa:1 core:8").unwrap();
    let mut p = NumaModel::new(DEFAULT_NODE_BW_GBPS, DEFAULT_SHARED);
    let mut snap = Snapshot {
        tasks: tasks(0, 100, 8),
        jobs: vec![job(0, Level::High)],
        ..Snapshot::default()
    };
    let plan = decide(&mut p, &m, &snap);
    assert_eq!(nodes_of(&m, &plan), vec![4, 4]);
    let note = plan.note.as_deref().unwrap();
    assert!(
        note.contains("j0 (8 threads") && note.contains("scatter [4, 4]") && note.contains("hint high"),
        "{note}"
    );
    // A compute job: every layout is about as fast; it keeps the free
    // CPUs even.
    snap.tasks.extend(tasks(1, 200, 4));
    snap.jobs.push(job(1, Level::Low));
    let plan = decide(&mut p, &m, &snap);
    assert_eq!(nodes_of(&m, &plan), vec![2, 2], "{:?}", plan.note);
    // Placed threads are not moved again; no CPU is given twice.
    assert!(decide(&mut p, &m, &snap).tasks.is_empty());
    let cpus: std::collections::BTreeSet<u32> = p.cpu_of.values().copied().collect();
    assert_eq!(cpus.len(), 12);
    // A job that leaves frees its CPUs.
    snap.tasks.retain(|t| t.job != 0);
    snap.jobs.retain(|j| j.id != 0);
    decide(&mut p, &m, &snap);
    assert_eq!(p.cpu_of.len(), 4);
}

/// More working threads than CPUs: the nodes take them in turn, and a
/// node with more threads than CPUs pins none, so that the kernel
/// shares its CPUs fairly. Twelve one-thread programs on eight CPUs of
/// two nodes went eight to the first node (the even split of one
/// thread starts there), and those past its CPUs to its first CPU
/// (each program's one thread being rank 0): five on one CPU.
#[test]
fn threads_past_the_cpus_share_their_nodes_evenly() {
    let m = Machine::synthetic("package:2 numa:1 core:4").unwrap();
    for (jobs, threads) in [(12u32, 1u32), (8, 2), (5, 4), (9, 1), (2, 4)] {
        let mut p = NumaModel::new(DEFAULT_NODE_BW_GBPS, DEFAULT_SHARED);
        let snap = Snapshot {
            tasks: (0..jobs).flat_map(|j| tasks(j, 100 * u64::from(j + 1), threads)).collect(),
            jobs: (0..jobs).map(|j| job(j, Level::Low)).collect(),
            ..Snapshot::default()
        };
        let plan = decide(&mut p, &m, &snap);
        let case = format!("{jobs} jobs of {threads}: pins {:?}, shared {:?}", p.cpu_of, p.node_of);
        assert_eq!(plan.tasks.len() as u32, jobs * threads, "one placement a thread: {case}");
        let mut per_node = [0u32; 2];
        for &c in p.cpu_of.values() {
            per_node[m.cpu(c).unwrap().numa] += 1;
        }
        for &k in p.node_of.values() {
            per_node[k] += 1;
        }
        assert_eq!(per_node.iter().sum::<u32>(), jobs * threads, "every thread placed: {case}");
        assert!(per_node[0].abs_diff(per_node[1]) <= 1, "{case}");
        for (k, n) in m.numa_nodes().iter().enumerate() {
            let pinned_here = p.cpu_of.values().filter(|&&c| n.cpus.contains(c)).count();
            if per_node[k] as usize > n.cpus.len() {
                assert_eq!(pinned_here, 0, "node {k} over its CPUs keeps no pin: {case}");
            } else {
                assert_eq!(pinned_here, per_node[k] as usize, "node {k} pins each: {case}");
            }
        }
        let cpus: std::collections::BTreeSet<u32> = p.cpu_of.values().copied().collect();
        assert_eq!(cpus.len(), p.cpu_of.len(), "one pin a CPU: {case}");
    }
}

/// Issue 24: a live job is first seen with one thread (its workers
/// start after herd's first decision). Before, its one-node layout
/// stacked all nine threads on node 1's four CPUs while node 0 idled
/// (seen on a real two-socket kernel); now it is laid out again as it
/// grows, and no CPU holds two threads while another is free.
#[test]
fn a_job_that_grows_after_the_first_decision_is_laid_out_again() {
    let (m, mut p, mut snap) = first_sight_of_one_thread(Level::High);
    snap.tasks = tasks(0, 100, 8);
    let plan = decide(&mut p, &m, &snap);
    assert_eq!(nodes_of(&m, &plan), vec![4, 4], "{:?}", plan.note);
    assert_eq!(pins(&p), (8, 8), "one thread a CPU: {:?}", p.cpu_of);
    // A ninth thread: one node holds five, and lets them share its
    // four CPUs; the other keeps its pins.
    snap.tasks = tasks(0, 100, 9);
    decide(&mut p, &m, &snap);
    assert_eq!(pins(&p), (4, 4));
    assert_eq!(p.node_of.len(), 5);
    let shared: std::collections::BTreeSet<usize> = p.node_of.values().copied().collect();
    assert_eq!(shared.len(), 1, "{:?}", p.node_of);
}

/// Issue 24: a job declared with 8 threads (`--threads`,
/// `OMP_NUM_THREADS`) is laid out for 8 at first sight, while only its
/// main thread exists; its workers then fill that layout without a
/// second one, and the first thread keeps its CPU.
#[test]
fn a_declared_thread_count_sizes_the_first_layout() {
    let m = Machine::synthetic("package:2 numa:1 core:4").unwrap();
    let mut p = NumaModel::new(DEFAULT_NODE_BW_GBPS, DEFAULT_SHARED);
    let mut declared = job(0, Level::High);
    declared.threads_declared = Some(8);
    let mut snap = Snapshot {
        tasks: tasks(0, 100, 1),
        jobs: vec![declared],
        ..Snapshot::default()
    };
    let first = decide(&mut p, &m, &snap);
    let note = first.note.as_deref().unwrap();
    assert!(note.contains("j0 (8 threads") && note.contains("[4, 4]"), "{note}");
    let main_cpu = p.cpu_of[&100];
    snap.tasks = tasks(0, 100, 8);
    let plan = decide(&mut p, &m, &snap);
    assert!(plan.note.is_none(), "laid out once: {:?}", plan.note);
    assert_eq!(p.cpu_of[&100], main_cpu);
    let mut per = nodes_of(&m, &first);
    for (k, n) in nodes_of(&m, &plan).into_iter().enumerate() {
        per[k] += n;
    }
    assert_eq!(per, vec![4, 4]);
}

/// A shell that started a program and waits for it, and the program's
/// main thread in join, take no place: the job is laid out for its two
/// workers, the shell pinned at first sight is let go, and a sleeper
/// that starts to work is placed then.
#[test]
fn sleeping_threads_of_a_process_tree_take_no_place() {
    let (m, mut p, mut snap) = first_sight_of_one_thread(Level::Low);
    let period_ns = 100_000_000;
    let sleeping = |mut t: TaskView| {
        t.state = TaskState::Blocked;
        t.obs.cpu_time_ns = period_ns / 100;
        t
    };
    let working = |mut t: TaskView| {
        t.obs.cpu_time_ns = period_ns;
        t
    };
    let all = tasks(0, 100, 4);
    snap.period_ns = period_ns;
    snap.tasks = vec![
        sleeping(all[0].clone()),
        sleeping(all[1].clone()),
        working(all[2].clone()),
        working(all[3].clone()),
    ];
    let plan = decide(&mut p, &m, &snap);
    let note = plan.note.as_deref().unwrap();
    assert!(note.contains("j0 (2 threads"), "{note}");
    match plan.tasks.iter().find(|(id, _)| *id == 100) {
        Some((_, crate::Placement::Run { cpus, .. })) => assert_eq!(cpus, m.all_cpus(), "the shell let go"),
        other => panic!("the shell is not let go: {other:?}"),
    }
    assert!(!plan.tasks.iter().any(|(id, _)| *id == 101), "the sleeping main thread is left alone");
    let mut pinned: Vec<TaskId> = p.cpu_of.keys().copied().collect();
    pinned.sort_unstable();
    assert_eq!(pinned, vec![102, 103]);
    // Still asleep: nothing to do (the decision looks at the sleeper
    // alone, by its place in the snapshot).
    assert!(decide(&mut p, &m, &snap).tasks.is_empty());
    // The main thread works: it is placed, on a CPU of its own.
    snap.tasks[1] = working(all[1].clone());
    let plan = decide(&mut p, &m, &snap);
    assert!(plan.tasks.iter().any(|(id, _)| *id == 101), "{plan:?}");
    assert_eq!(pins(&p), (3, 3));
}

/// Eight barrier workers that inherited their main thread's one CPU
/// each run a twentieth of the period and are asleep at the barrier
/// when looked at, but wait for that CPU most of the period: they want
/// CPUs, and are laid out on eight (counted by CPU time alone, none
/// of them would be: they would stay stacked on that one CPU).
#[test]
fn threads_crowded_on_an_inherited_pin_are_laid_out() {
    let (m, mut p, mut snap) = first_sight_of_one_thread(Level::Low);
    let period_ns = 100_000_000;
    snap.period_ns = period_ns;
    snap.tasks = tasks(0, 100, 9);
    for t in &mut snap.tasks {
        t.state = TaskState::Blocked;
        if t.rank > 0 {
            t.obs.cpu_time_ns = period_ns / 20;
            t.obs.wait_ns = period_ns * 6 / 10;
        }
    }
    let plan = decide(&mut p, &m, &snap);
    assert!(plan.note.as_deref().unwrap().contains("j0 (8 threads"), "{:?}", plan.note);
    let cpus: std::collections::BTreeSet<u32> =
        (101..109).map(|t| p.cpu_of.get(&t).copied().expect("each worker pinned")).collect();
    assert_eq!(cpus.len(), 8, "one worker a CPU: {:?}", p.cpu_of);
}

#[test]
fn one_numa_node_leaves_the_kernel_alone_and_says_why() {
    let m = Machine::synthetic("core:4").unwrap();
    let mut p = NumaModel::new(DEFAULT_NODE_BW_GBPS, DEFAULT_SHARED);
    let snap = Snapshot {
        tasks: tasks(0, 1, 4),
        jobs: vec![job(0, Level::High)],
        ..Snapshot::default()
    };
    let plan = decide(&mut p, &m, &snap);
    assert!(plan.tasks.is_empty());
    assert!(plan.note.as_deref().unwrap().contains("one NUMA node"));
    assert!(decide(&mut p, &m, &snap).note.is_none(), "said once");
    assert_eq!(
        crate::build("numa:model:shared=0.2").unwrap().name(),
        "numa:model:shared=0.2"
    );
    assert!(crate::build("numa:model:shared=2").is_err());
}

/// Placed jobs alike in characteristics, layout and memory are one kind,
/// counted; any difference makes another; kinds keep the order in which
/// they first come.
#[test]
fn alike_placed_jobs_are_one_kind_counted() {
    let placed = |beta_ns: f64, layout: Vec<u32>, memory: Vec<f64>| Placed {
        character: numa::Character {
            beta_ns,
            accesses_per_thread: 1e9,
            shared_fraction: 0.5,
        },
        threads_per_node: layout,
        memory,
    };
    let jobs = [
        placed(2.0, vec![2, 0], vec![]),
        placed(3.0, vec![2, 0], vec![]),
        placed(2.0, vec![2, 0], vec![]),
        placed(2.0, vec![0, 2], vec![]),
        placed(2.0, vec![2, 0], vec![1.0, 0.0]),
        placed(2.0, vec![2, 0], vec![]),
        placed(3.0, vec![2, 0], vec![]),
    ];
    let (kinds, copies) = kinds(jobs.iter());
    assert_eq!(copies, [3, 2, 1, 1]);
    assert_eq!(kinds, [jobs[0].clone(), jobs[1].clone(), jobs[3].clone(), jobs[4].clone()]);
}

/// Scoring placed jobs alike as one program with copies chooses what
/// scoring every job alone chooses: 2-thread jobs of three kinds seen at
/// once on a 4-node machine of 48 CPUs (the jobs merge into a few kinds,
/// every layout is scored: they fit), then more.
#[test]
fn kinds_of_jobs_choose_what_every_job_alone_chooses() {
    let m = Machine::synthetic("package:2 numa:2 core:12").unwrap();
    let levels = [Level::High, Level::Low, Level::Medium];
    let snap_of = |n: u32| Snapshot {
        tasks: (0..n).flat_map(|j| tasks(j, 100 + 10 * u64::from(j), 2)).collect(),
        jobs: (0..n).map(|j| job(j, levels[j as usize % 3])).collect(),
        ..Snapshot::default()
    };
    let mut grouped = NumaModel::new(DEFAULT_NODE_BW_GBPS, DEFAULT_SHARED);
    let mut alone = NumaModel::new(DEFAULT_NODE_BW_GBPS, DEFAULT_SHARED);
    alone.group_kinds = false;
    for n in [16, 22] {
        let snap = snap_of(n);
        let (a, b) = (decide(&mut grouped, &m, &snap), decide(&mut alone, &m, &snap));
        assert_eq!(a.tasks, b.tasks, "{n} jobs");
        assert_eq!(a.note, b.note, "{n} jobs");
        // The layouts were chosen by their predicted times.
        assert!(a.note.as_deref().is_some_and(|s| s.contains("vs the others")), "{:?}", a.note);
        assert_eq!(grouped.placed, alone.placed, "{n} jobs");
    }
    let (kinds, copies) = kinds(grouped.placed.values());
    assert!(kinds.len() < grouped.placed.len() / 2, "{} kinds: the test must merge jobs", kinds.len());
    assert_eq!(copies.iter().sum::<u32>() as usize, grouped.placed.len());
}
