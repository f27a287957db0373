//! `Policy::reads_counters` held to what each policy does: one that says
//! it reads no counters on a machine decides there as it would with none.

use herd_topo::Machine;

use crate::testkit::decide_at;
use crate::{JobView, Obs, Rng, Snapshot, TaskState, TaskView, build, catalog};

const PERIOD_NS: u64 = 50_000_000;

/// Turn `turn`'s snapshot: 12 tasks in 4 jobs, states, CPU time, waits and
/// every counter drawn from `rng` (a task's miss rate stays near its job's
/// for a while, so monitors see phases, and changes now and then).
fn snapshot(rng: &mut Rng, turn: u64, m: &Machine) -> Snapshot {
    let cpus: Vec<u32> = m.all_cpus().iter().collect();
    let tasks = (0..12u64)
        .map(|i| {
            let job = (i / 3) as u32;
            let phase = (turn / 20 + u64::from(job)) % 3;
            let refs = 1_000_000 + rng.next_u64() % 1_000;
            let misses = refs / [50, 5, 2][phase as usize] + rng.next_u64() % 100;
            let runs = rng.next_u64() % 8 != 0;
            TaskView {
                id: i + 1,
                job,
                rank: (i % 3) as u32,
                state: if runs {
                    TaskState::Runnable
                } else {
                    TaskState::Blocked
                },
                cpu: Some(cpus[(rng.next_u64() % cpus.len() as u64) as usize]),
                obs: Obs {
                    cpu_time_ns: if runs {
                        PERIOD_NS - rng.next_u64() % 1_000_000
                    } else {
                        0
                    },
                    wait_ns: rng.next_u64() % 2_000_000,
                    timeslices: None,
                    instructions: Some(50_000_000 + rng.next_u64() % 1_000_000),
                    cycles: Some(40_000_000 + rng.next_u64() % 1_000_000),
                    llc_refs: Some(refs),
                    llc_misses: Some(misses),
                    mem_bytes: Some(misses * 64),
                    migrations: (rng.next_u64() % 4 == 0) as u32,
                    code_samples: None,
                },
                heartbeats: None,
            }
        })
        .collect();
    let jobs = (0..4u32)
        .map(|j| JobView {
            id: j,
            name: format!("j{j}"),
            program: format!("p{j}"),
            arrival_ns: 0,
            memory_hint: None,
            memory_kb: None,
            threads_declared: None,
        })
        .collect();
    Snapshot {
        now_ns: (turn + 1) * PERIOD_NS,
        period_ns: PERIOD_NS,
        tasks,
        jobs,
        ..Snapshot::default()
    }
}

/// `snap` as a sensor that leaves the counters gives it (`None`, 0).
fn without_counters(snap: &Snapshot) -> Snapshot {
    let mut out = snap.clone();
    for t in &mut out.tasks {
        let o = &mut t.obs;
        (o.cycles, o.llc_refs, o.llc_misses, o.mem_bytes, o.migrations) = (None, None, None, None, 0);
    }
    out
}

/// Whether `name` decides on `m` as it does with every counter when the
/// counters are blank, turn by turn (the first turn that differs, if any).
fn first_difference(name: &str, m: &Machine) -> Option<u64> {
    let (mut with, mut without) = (build(name).unwrap(), build(name).unwrap());
    with.prepare(m);
    without.prepare(m);
    let mut rng = Rng::new(11);
    (0..80).find(|&turn| {
        let snap = snapshot(&mut rng, turn, m);
        decide_at(with.as_mut(), m, &snap, turn)
            != decide_at(without.as_mut(), m, &without_counters(&snap), turn)
    })
}

/// Every policy of the catalogue that says it reads no counters, on an
/// SMT machine of two packages and on a hybrid one, decides alike with
/// them and without. The check can tell: an asymmetric-core policy, which
/// reads them on the hybrid machine, decides otherwise there without them.
#[test]
fn a_policy_that_reads_no_counters_decides_alike_without_them() {
    let machines = [
        Machine::synthetic("package:2 numa:1 core:4 pu:2").unwrap(),
        Machine::synthetic("package:1 core:4 capacity:0.5 kind:slow + core:4 capacity:1.0 kind:fast")
            .unwrap(),
    ];
    let mut checked = 0;
    for m in &machines {
        for entry in catalog() {
            let mut p = build(entry.name).unwrap();
            p.prepare(m);
            if p.reads_counters(m) {
                continue;
            }
            checked += 1;
            assert_eq!(
                first_difference(entry.name, m),
                None,
                "{} on {} CPUs",
                entry.name,
                m.cpus().len()
            );
        }
    }
    assert!(checked >= 20, "{checked} policy and machine pairs checked");
    let hybrid = &machines[1];
    assert!(build("amp:comprehensive").unwrap().reads_counters(hybrid));
    assert!(first_difference("amp:comprehensive", hybrid).is_some());
}
