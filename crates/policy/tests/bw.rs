//! `bw:*` pins the co-runners it chooses to CPUs of their own, and pins
//! nothing where what runs is wider than the machine (one process tree of
//! many busy processes, as hackbench is).

use herd_policy::{
    Estimates, JobView, Knowledge, Level, Obs, Placement, Snapshot, TaskState, TaskView, View,
};
use herd_topo::Machine;

const PERIOD_NS: u64 = 100_000_000;

/// A busy single-threaded task: it ran the whole last period.
fn busy(id: u64, job: u32) -> TaskView {
    TaskView {
        id,
        job,
        rank: 0,
        state: TaskState::Runnable,
        cpu: None,
        obs: Obs {
            cpu_time_ns: PERIOD_NS,
            ..Obs::default()
        },
        heartbeats: None,
    }
}

fn job(id: u32) -> JobView {
    JobView {
        id,
        name: format!("j{id}"),
        program: format!("p{id}"),
        arrival_ns: 0,
        memory_hint: Some(Level::Low),
        memory_kb: None,
        threads_declared: None,
    }
}

/// The tasks pinned to one CPU over three decisions of `bw:iabw` (hints
/// only: no counters) on two CPUs.
fn pinned(tasks: Vec<TaskView>, jobs: Vec<JobView>) -> Vec<u64> {
    let m = Machine::synthetic("core:2").unwrap();
    let mut p = herd_policy::build("bw:iabw").unwrap();
    let snapshot = Snapshot {
        tasks,
        jobs,
        period_ns: PERIOD_NS,
        ..Snapshot::default()
    };
    let mut out = Vec::new();
    for decision in 0..3 {
        let plan = p.decide(&View {
            machine: &m,
            snapshot: &snapshot,
            estimates: &Estimates::new(),
            learned: &Knowledge::default(),
            oracle: None,
            seed: 1,
            decision,
        });
        for (id, pl) in &plan.tasks {
            if let Placement::Run { cpus, .. } = pl
                && cpus.len() == 1
            {
                out.push(*id);
            }
        }
    }
    out
}

#[test]
fn one_program_wider_than_the_machine_has_none_of_its_processes_pinned() {
    let tasks = (0..8).map(|i| busy(100 + i, 0)).collect();
    assert_eq!(pinned(tasks, vec![job(0)]), Vec::<u64>::new());
}

#[test]
fn co_runners_chosen_among_more_programs_than_cpus_are_pinned() {
    let tasks = (0..4).map(|j| busy(100 + j as u64, j)).collect();
    let pins = pinned(tasks, (0..4).map(job).collect());
    assert!(!pins.is_empty(), "no co-runner pinned");
}
