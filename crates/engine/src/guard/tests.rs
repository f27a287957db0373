//! The guard's unit tests (a file of their own: guard.rs holds the logic).

use super::*;
use crate::{Actuator, Clock, Config, NoMeter, Sensor};
use herd_policy::{Estimates, JobView, Obs, TaskView};
use herd_topo::Machine;

/// Two threads of one job on a 2-CPU machine, each needing `work_ns` of
/// CPU; two confined to the same single CPU share it.
struct Pair {
    now_ns: u64,
    cpus: [CpuSet; 2],
    done_ns: [u64; 2],
    since_ns: [u64; 2],
    work_ns: u64,
    snapshot: Snapshot,
    /// Whether the sensor says when a snapshot repeats the last, and how
    /// often it did.
    vouch: bool,
    repeats: u32,
    /// Whether the first snapshot shows both threads paused, as `herd
    /// batch` holds its programs until they are first placed.
    held_at_start: bool,
}

impl Pair {
    fn new(work_ns: u64) -> Self {
        let all: CpuSet = [0, 1].into_iter().collect();
        Pair {
            now_ns: 0,
            cpus: [all.clone(), all],
            done_ns: [0; 2],
            since_ns: [0; 2],
            work_ns,
            snapshot: Snapshot::default(),
            vouch: false,
            repeats: 0,
            held_at_start: false,
        }
    }
}

impl Sensor for Pair {
    fn observe(&mut self) -> &Snapshot {
        let tasks = (0..2)
            .filter(|&i| self.done_ns[i] < self.work_ns)
            .map(|i| TaskView {
                id: i as u64 + 1,
                job: 0,
                rank: i as u32,
                state: if self.held_at_start && self.now_ns == 0 {
                    TaskState::Paused
                } else {
                    TaskState::Runnable
                },
                cpu: Some(i as u32),
                obs: Obs {
                    cpu_time_ns: std::mem::take(&mut self.since_ns[i]),
                    ..Obs::default()
                },
                heartbeats: None,
            })
            .collect();
        let repeats_last = self.vouch && tasks == self.snapshot.tasks;
        self.repeats += u32::from(repeats_last);
        self.snapshot = Snapshot {
            now_ns: self.now_ns,
            repeats_last,
            tasks,
            jobs: vec![JobView {
                id: 0,
                name: "pair".into(),
                program: "pair".into(),
                arrival_ns: 0,
                memory_hint: None,
                memory_kb: None,
                threads_declared: None,
            }],
            ..Snapshot::default()
        };
        &self.snapshot
    }
    fn finished(&self) -> bool {
        self.done_ns.iter().all(|&d| d >= self.work_ns)
    }
}
impl Actuator for Pair {
    fn apply(&mut self, plan: &Plan) {
        for (id, p) in &plan.tasks {
            if let Placement::Run { cpus, .. } = p {
                self.cpus[*id as usize - 1] = cpus.clone();
            }
        }
    }
}
impl Clock for Pair {
    fn now_ns(&self) -> u64 {
        self.now_ns
    }
    fn advance_to(&mut self, t_ns: u64) {
        let dt = t_ns - self.now_ns;
        let crowded = self.cpus[0].len() == 1 && self.cpus[0] == self.cpus[1];
        let running = self.done_ns.iter().filter(|&&d| d < self.work_ns).count();
        let share = if crowded && running == 2 { dt / 2 } else { dt };
        for i in 0..2 {
            if self.done_ns[i] < self.work_ns {
                self.done_ns[i] += share;
                self.since_ns[i] += share;
            }
        }
        self.now_ns = t_ns;
    }
}

fn guarded(policy: &str, work_ns: u64) -> (u64, GuardReport) {
    let (end_ns, report, _) = guarded_as(policy, work_ns, false);
    (end_ns, report)
}

/// `guarded`, the sensor saying when a snapshot repeats the last if
/// `vouch`; also how many did.
fn guarded_as(policy: &str, work_ns: u64, vouch: bool) -> (u64, GuardReport, u32) {
    guarded_with(policy, work_ns, vouch, GuardConfig::default())
}

/// `guarded_as` under the guard `guard`.
fn guarded_with(policy: &str, work_ns: u64, vouch: bool, guard: GuardConfig) -> (u64, GuardReport, u32) {
    let mut world = Pair::new(work_ns);
    world.vouch = vouch;
    guarded_in(policy, world, guard)
}

/// `policy` under the guard `guard` in `world`: when it ended, what the
/// guard did, how many snapshots repeated the last.
fn guarded_in(policy: &str, mut world: Pair, guard: GuardConfig) -> (u64, GuardReport, u32) {
    let mut p = herd_policy::build(policy).unwrap();
    let machine = Machine::synthetic("core:2").unwrap();
    let mut cfg = Config::with_period(10_000_000, 0);
    cfg.guard = Some(guard);
    let ran = crate::run(
        p.as_mut(),
        &machine,
        &Estimates::new(),
        None,
        &mut world,
        &mut NoMeter,
        &cfg,
        |_, _| {},
    );
    (world.now_ns, ran.guard.unwrap(), world.repeats)
}

/// A snapshot that repeats the last is taken as the last was: the guard
/// reuses its sums and its look for crowding, and judges exactly as it
/// does when it passes over every task again.
#[test]
fn a_repeated_snapshot_is_judged_as_the_one_it_repeats() {
    for policy in ["static:compact:cpus=1", "static:scatter"] {
        let (end_ns, report, none) = guarded_as(policy, 2_000_000_000, false);
        let (end_vouched, vouched, repeats) = guarded_as(policy, 2_000_000_000, true);
        assert_eq!(none, 0);
        assert!(repeats > 50, "{policy}: the sensor vouched {repeats} times");
        assert_eq!(end_vouched, end_ns, "{policy}");
        assert_eq!(format!("{vouched:?}"), format!("{report:?}"), "{policy}");
    }
}

#[test]
fn crowding_is_caught_at_the_first_probe_and_handed_back() {
    // 2 s of work per thread: 2 s alone, 4 s crowded.
    let (end_ns, g) = guarded("static:compact:cpus=1", 2_000_000_000);
    assert_eq!(g.backoffs, 1, "{g:?}");
    assert_eq!(g.in_charge_at_end, Some(InCharge::Kernel));
    assert!((g.comparisons[0].ratio - 0.5).abs() < 0.05, "{g:?}");
    assert_eq!(g.comparisons[0].signal, Signal::CpuTime);
    // Crowded for the first 8 periods only.
    assert!(end_ns < 2_150_000_000, "{end_ns}");
    assert!(
        g.summary().contains("the kernel had the workload back"),
        "{}",
        g.summary()
    );
}

/// A program held until it is first placed (`herd batch`) reads paused in
/// the first snapshot, before any plan: that is not the policy making it
/// take turns, whose single reading is never judged. Before, the same
/// crowding was left in charge at the first probe (pack:palm on two
/// stress-ng switch copies read 0.689x the kernel and stayed).
#[test]
fn a_program_held_until_placed_is_judged_at_the_first_probe() {
    let mut world = Pair::new(2_000_000_000);
    world.held_at_start = true;
    let (end_ns, g, _) = guarded_in("static:compact:cpus=1", world, GuardConfig::default());
    // (The policy places the held threads a period late: a little over
    // half the kernel's progress.)
    assert!(g.comparisons[0].ratio < 0.6, "{g:?}");
    assert_eq!(g.comparisons[0].in_charge, InCharge::Kernel, "{g:?}");
    assert_eq!(g.backoffs, 1, "{g:?}");
    assert!(end_ns < 2_150_000_000, "{end_ns}");
}

#[test]
fn a_policy_that_does_no_harm_keeps_its_place_and_is_probed_ever_less() {
    let (end_ns, g) = guarded("static:compact", 20_000_000_000);
    assert_eq!(g.backoffs, 0, "{g:?}");
    assert_eq!(end_ns, 20_000_000_000);
    assert!(g.comparisons.iter().all(|c| (c.ratio - 1.0).abs() < 1e-9));
    // The spans between probes double to 64 periods: probes end under 5%
    // of the time.
    let share = g.kernel_share();
    assert!(share < 0.07, "{share}");
}

/// Where the guard across runs vouches for the policy, the in-run guard
/// makes no scheduled probe: the kernel never places the run. What it
/// would have caught at its first probe (two threads on one CPU) is left
/// to the batch's next makespan.
#[test]
fn a_policy_vouched_for_across_runs_is_not_probed() {
    let trusting = GuardConfig::default().trusting();
    let (end_ns, g, _) = guarded_with("static:compact", 2_000_000_000, false, trusting);
    assert_eq!(
        (end_ns, g.kernel_ns, g.comparisons.len()),
        (2_000_000_000, 0, 0),
        "{g:?}"
    );
    let (end_ns, g, _) = guarded_with("static:compact:cpus=1", 2_000_000_000, false, trusting);
    assert_eq!((g.kernel_ns, g.backoffs), (0, 0), "{g:?}");
    assert_eq!(end_ns, 4_000_000_000);
}

#[test]
fn one_comparison_decides_only_a_large_difference() {
    assert_eq!(verdict(&[0.5], 0.02), Verdict::Losing);
    assert_eq!(verdict(&[0.85], 0.02), Verdict::Unsure);
    assert_eq!(verdict(&[1.25], 0.02), Verdict::NotLosing);
}

#[test]
fn several_decide_beyond_the_margin_by_two_standard_errors() {
    assert_eq!(verdict(&[0.95, 0.96, 0.94], 0.02), Verdict::Losing);
    assert_eq!(verdict(&[1.0, 0.99, 1.01], 0.02), Verdict::NotLosing);
    // Noisy around the margin: not yet.
    assert_eq!(verdict(&[0.90, 1.05], 0.02), Verdict::Unsure);
}

fn past(ratio: f64) -> Past {
    Past {
        ratio,
        jobs: Vec::new(),
    }
}

#[test]
fn a_confirmed_large_difference_is_probed_at_once_rarely() {
    let mut g = Guard::new(GuardConfig::default(), 10_000_000);
    // Losing 29%: a 3-period probe costs 0.87 periods, 1% (half the
    // margin) of 87; the gap goes at once to its most, 64.
    g.history = vec![past(0.71), past(0.71)];
    assert_eq!(g.confirmed_gap(), 64);
    // Losing 10%: 30 periods would do; doubling from 8 gives 16.
    g.history = vec![past(0.90), past(0.90)];
    assert_eq!(g.confirmed_gap(), 30);
    // A close call is probed at the doubling pace.
    g.history = vec![past(1.01), past(1.0)];
    assert_eq!(g.confirmed_gap(), 16);
    // A win of 25% costs the kernel's probe 20% of its periods.
    g.history = vec![past(1.25)];
    assert_eq!(g.confirmed_gap(), 60);
}

#[test]
fn one_reading_ahead_but_unsure_is_probed_as_rarely_as_its_probe_costs() {
    let mut g = Guard::new(GuardConfig::default(), 10_000_000);
    let reading = Reading {
        ratio: 1.125,
        signal: Signal::Instructions,
        jobs: 1,
        took_turns: false,
    };
    assert!(g.judge(0, reading, &[]).is_none(), "not sure: the policy stays");
    // The kernel's 3-period probe of it costs 0.33 periods: 1% (half the
    // margin) of 34. Doubling from 8 would have given 16.
    assert_eq!(g.gap_periods, 34);
}

/// A span in which job 0's `beaters` tasks counted `beats` heartbeats in
/// all and retired `instructions`, over 3 ms.
fn beating_span(beats: u64, beaters: u64, instructions: u64) -> Span {
    let mut span = Span::default();
    let acc = span.jobs.entry(0);
    acc.beats = beats;
    acc.has_beats = true;
    acc.beaters = beaters;
    acc.instructions = instructions;
    acc.cpu_ns = 48_000_000;
    acc.present_ns = 3_000_000;
    span
}

#[test]
fn heartbeats_judge_only_when_each_task_counted_enough() {
    // Like PALM's sixteen threads on s4-nosync-15 in a 3-period probe:
    // 2-3 whole beats each, here 36 against 48 in all, while their
    // instructions are even. Each task may be a beat short: not enough.
    let (policy, kernel) = (
        beating_span(36, 16, 160_000_000),
        beating_span(48, 16, 160_000_000),
    );
    let r = compare(&policy, &kernel).unwrap();
    assert_eq!(r.signal, Signal::Instructions);
    assert!((r.ratio - 1.0).abs() < 1e-12, "{}", r.ratio);
    // The same counts from one task that counts the job's beats: 16 or
    // more a span is enough, and heartbeats decide.
    let (policy, kernel) = (beating_span(36, 1, 160_000_000), beating_span(48, 1, 160_000_000));
    let r = compare(&policy, &kernel).unwrap();
    assert_eq!(r.signal, Signal::Heartbeats);
    assert!((r.ratio - 0.75).abs() < 1e-12, "{}", r.ratio);
    // Sixteen tasks with 16 beats each: enough.
    let (policy, kernel) = (beating_span(256, 16, 1), beating_span(512, 16, 1));
    assert_eq!(compare(&policy, &kernel).unwrap().signal, Signal::Heartbeats);
}

#[test]
fn a_probe_leaves_a_sleeping_thread_free_and_its_node_to_the_busy_ones() {
    // Two nodes of two CPUs; a job's four threads, its memory on node
    // 0, all placed there by the policy: its main thread asleep (no CPU
    // last period), one worker blocked at a barrier for the instant
    // (a third of the period on a CPU), two running.
    let m = Machine::synthetic("package:2 numa:1 core:2").unwrap();
    let node0: CpuSet = m.numa_nodes()[0].cpus.clone();
    let node1: CpuSet = m.numa_nodes()[1].cpus.clone();
    let states = [
        TaskState::Blocked,
        TaskState::Blocked,
        TaskState::Runnable,
        TaskState::Runnable,
    ];
    let cpu_ns = [0, 30_000_000, 100_000_000, 100_000_000];
    let snap = Snapshot {
        now_ns: 100_000_000,
        period_ns: 100_000_000,
        tasks: (0..4)
            .map(|i| TaskView {
                id: i as u64 + 1,
                job: 0,
                rank: i as u32,
                state: states[i],
                cpu: node0.iter().nth(i % 2),
                obs: Obs {
                    cpu_time_ns: cpu_ns[i],
                    ..Obs::default()
                },
                heartbeats: None,
            })
            .collect(),
        jobs: vec![JobView {
            id: 0,
            name: "omp".into(),
            program: "omp".into(),
            arrival_ns: 0,
            memory_hint: None,
            memory_kb: Some(vec![(m.numa_nodes()[0].os, 1000)]),
            threads_declared: None,
        }],
        ..Snapshot::default()
    };
    let mut g = Guard::new(GuardConfig::default(), 100_000_000);
    let mut placed = Plan::default();
    for t in &snap.tasks {
        placed.run(t.id, node0.clone(), "packed");
    }
    g.remember(&placed);
    g.was_busy.update(&snap, 100_000_000, false);
    let nothing = Nothing::default();
    let view = nothing.view(&m, &snap, 0);
    let plan = g.release(&view, None);
    let cpus_of = |id: u64| {
        plan.tasks.iter().find(|(t, _)| *t == id).map(|(_, p)| match p {
            Placement::Run { cpus, .. } => cpus.clone(),
            Placement::Pause { .. } => panic!("a probe pauses nothing"),
        })
    };
    // The sleeper is let go; three busy threads on four CPUs: node 0
    // keeps two near their memory, the third starts on node 1.
    assert_eq!(cpus_of(1), Some(m.all_cpus().clone()));
    let on = |set: &CpuSet| (2..=4).filter(|&t| cpus_of(t).as_ref() == Some(set)).count();
    assert_eq!((on(&node0), on(&node1)), (2, 1), "{plan:?}");
    // The next turn lets the one started on node 1 go.
    let widened = g.widen(&view, None);
    assert_eq!(widened.tasks.len(), 1, "{widened:?}");
}

/// Nothing estimated or learned: what a policy sees on a first run.
#[derive(Default)]
struct Nothing {
    estimates: Estimates,
    learned: herd_policy::Knowledge,
}

impl Nothing {
    fn view<'a>(&'a self, machine: &'a Machine, snapshot: &'a Snapshot, decision: u64) -> View<'a> {
        View {
            machine,
            snapshot,
            estimates: &self.estimates,
            learned: &self.learned,
            oracle: None,
            seed: 0,
            decision,
        }
    }
}

/// A job of one program, known by its id alone.
fn job(id: u32) -> JobView {
    JobView {
        id,
        name: format!("j{id}"),
        program: "p".into(),
        arrival_ns: 0,
        memory_hint: None,
        memory_kb: None,
        threads_declared: None,
    }
}

#[test]
fn a_job_leaving_mid_span_still_gives_the_kernel_its_probe() {
    // Two single-thread jobs; the second leaves during the first policy
    // span (8 periods). The probe after that span cannot be compared with
    // it, and is run all the same (while jobs come and go, the kernel's
    // share of the time is the only bound on a policy's harm); the next
    // pair of spans is compared.
    let m = Machine::synthetic("core:2").unwrap();
    let period_ns = 10_000_000;
    let snap_at = |turn: u64, both: bool| Snapshot {
        now_ns: turn * period_ns,
        period_ns,
        tasks: (0..if both { 2 } else { 1 })
            .map(|i| TaskView {
                id: i + 1,
                job: i as u32,
                rank: 0,
                state: TaskState::Runnable,
                cpu: Some(i as u32),
                obs: Obs {
                    cpu_time_ns: period_ns,
                    ..Obs::default()
                },
                heartbeats: None,
            })
            .collect(),
        jobs: (0..if both { 2 } else { 1 }).map(job).collect(),
        ..Snapshot::default()
    };
    let mut policy = herd_policy::build("static:compact").unwrap();
    let mut g = Guard::new(GuardConfig::default(), period_ns);
    let nothing = Nothing::default();
    let mut kernel_turns = Vec::new();
    for turn in 0..30u64 {
        let snap = snap_at(turn, turn < 4);
        g.turn(&nothing.view(&m, &snap, turn), policy.as_mut());
        if g.now_placing == InCharge::Kernel {
            kernel_turns.push(turn);
        }
    }
    // The span of turns 0-8 saw the job leave: its probe (turns 8-10) is
    // not compared; the next policy span (8 periods) and probe are.
    assert_eq!(kernel_turns.first(), Some(&8), "{kernel_turns:?}");
    assert_eq!(g.report().comparisons.len(), 1, "{:?}", g.report());
}

#[test]
fn readings_survive_a_change_of_a_minority_of_the_jobs() {
    let mut g = Guard::new(GuardConfig::default(), 10_000_000);
    let snap = |jobs: &[u32]| Snapshot {
        jobs: jobs.iter().map(|&id| job(id)).collect(),
        ..Snapshot::default()
    };
    let taken_over = |ratio: f64, jobs: &[u32]| Past {
        ratio,
        jobs: jobs.to_vec(),
    };
    // One job of four arrives: three of four were there before.
    g.history = vec![taken_over(0.88, &[0, 1, 2])];
    g.forget_if_new_mix(&snap(&[0, 1, 2, 3]));
    assert_eq!(g.ratios(), vec![0.88]);
    // Two of the three leave: one of three remains, another workload.
    g.forget_if_new_mix(&snap(&[0]));
    assert!(g.history.is_empty());
    // One job of two leaves: one of two remains (half: still the same).
    g.history = vec![taken_over(0.88, &[0, 1])];
    g.forget_if_new_mix(&snap(&[0]));
    assert_eq!(g.ratios(), vec![0.88]);
}

#[test]
fn readings_of_jobs_that_left_one_by_one_are_forgotten() {
    // Eighteen jobs read well; they leave one at a time, each a minority
    // of the mix before it. Once fewer than half remain, the readings of
    // all eighteen no longer speak for the rest (S1's group 6).
    let mut g = Guard::new(GuardConfig::default(), 10_000_000);
    let all: Vec<u32> = (0..18).collect();
    g.history = vec![Past {
        ratio: 1.3,
        jobs: all.clone(),
    }];
    let mut kept_with = Vec::new();
    for left in 1..=12usize {
        let snap = Snapshot {
            jobs: all[left..].iter().map(|&id| job(id)).collect(),
            ..Snapshot::default()
        };
        g.forget_if_new_mix(&snap);
        if !g.history.is_empty() {
            kept_with.push(18 - left);
        }
    }
    assert_eq!(kept_with.last(), Some(&9), "{kept_with:?}");
    assert!(g.history.is_empty());
}

/// A snapshot that repeats one the guard saw, with the span's first jobs,
/// is taken as having them without a comparison; one that repeats a
/// snapshot the guard missed (a turn skipped, the jobs changed in it) is
/// compared job by job, and the span is marked changed.
#[test]
fn only_a_repeat_of_a_snapshot_seen_skips_the_comparison_of_jobs() {
    let period_ns = 10_000_000;
    let snap_at = |turn: u64, jobs: &[u32], repeats_last: bool| Snapshot {
        now_ns: turn * period_ns,
        period_ns,
        repeats_last,
        tasks: jobs
            .iter()
            .map(|&j| TaskView {
                id: u64::from(j) + 1,
                job: j,
                rank: 0,
                state: TaskState::Runnable,
                cpu: Some(j),
                obs: Obs {
                    cpu_time_ns: period_ns,
                    ..Obs::default()
                },
                heartbeats: None,
            })
            .collect(),
        jobs: jobs.iter().map(|&j| job(j)).collect(),
        ..Snapshot::default()
    };
    let mut g = Guard::new(GuardConfig::default(), period_ns);
    g.account(&snap_at(1, &[0, 1], false), period_ns);
    g.account(&snap_at(2, &[0, 1], true), period_ns);
    g.account(&snap_at(3, &[0, 1], true), period_ns);
    assert!(!g.span.as_ref().unwrap().changed, "the same jobs throughout");
    // Turn 4 (job 1 gone) was missed; turn 5 repeats it.
    g.account(&snap_at(5, &[0], true), period_ns);
    assert!(g.span.as_ref().unwrap().changed, "job 1 left in a missed turn");
}

/// Repeated snapshots held back and added at once leave each job's
/// account as adding every snapshot's tasks turn by turn does, through
/// repeats, changed readings, jobs that come and go, and a probe's
/// accounts of time away (which may open an account).
#[test]
fn held_repeats_add_what_each_turn_added() {
    let period_ns = 10_000_000;
    let mut next = crate::test_rng::xorshift(0x5DEE_CE66_D1CE_4E5Bu64);
    let m = Machine::synthetic("core:2").unwrap();
    let mut g = Guard::new(GuardConfig::default(), period_ns);
    g.sent_away = vec![1, 4];
    // Per job: CPU time, instructions, time present.
    let mut want: std::collections::BTreeMap<u32, (u64, u64, u64)> = Default::default();
    let mut snap = Snapshot::default();
    let mut held_turns = 0;
    let mut epoch = 0;
    // Heartbeats: each task's count so far, the count the guard last saw,
    // each job's beats since, and whether the list's jobs 0 and 3 beat.
    let mut counts: std::collections::HashMap<u64, u64> = Default::default();
    let mut seen: std::collections::HashMap<u64, u64> = Default::default();
    let mut want_beats: std::collections::BTreeMap<u32, u64> = Default::default();
    let mut beating = false;
    let mut read = |t: &mut TaskView, next: &mut dyn FnMut() -> u64, beating: bool| {
        t.obs.cpu_time_ns = next() % 1_000;
        t.obs.instructions = Some(next() % 5_000);
        t.heartbeats = (beating && t.job % 3 == 0).then(|| {
            let c = counts.entry(t.id).or_default();
            *c += next() % 4;
            *c
        });
    };
    for turn in 1..400u64 {
        let repeat = turn > 1 && next() % 3 != 0;
        if repeat {
            snap.repeats_last = true;
        } else if turn > 1 && next() % 2 == 0 {
            // The same list, named as before (or not named): new readings.
            snap.repeats_last = false;
            for t in &mut snap.tasks {
                read(t, &mut next, beating);
            }
        } else {
            // A new list, named anew (now and then not named at all).
            epoch += 1;
            let jobs: Vec<u32> = (0..6).filter(|_| next() % 5 != 0).collect();
            snap = Snapshot {
                period_ns,
                jobs: jobs.iter().map(|&j| job(j)).collect(),
                tasks: jobs
                    .iter()
                    .flat_map(|&j| (0..1 + u64::from(j) % 3).map(move |k| (j, k)))
                    .map(|(j, k)| TaskView {
                        id: u64::from(j) * 10 + k,
                        job: j,
                        rank: k as u32,
                        state: TaskState::Runnable,
                        cpu: Some(j % 2),
                        obs: Obs::default(),
                        heartbeats: None,
                    })
                    .collect(),
                tasks_epoch: if next() % 4 == 0 { 0 } else { epoch },
                ..Snapshot::default()
            };
            beating = next() % 3 == 0;
            for t in &mut snap.tasks {
                read(t, &mut next, beating);
            }
        }
        snap.now_ns = turn * period_ns;
        held_turns += u32::from(repeat && g.last_sums.valid);
        g.account(&snap, period_ns);
        if next() % 7 == 0 {
            g.account_away(&m, &snap, period_ns);
        }
        for t in &snap.tasks {
            let w = want.entry(t.job).or_default();
            w.0 += t.obs.cpu_time_ns;
            w.1 += t.obs.instructions.unwrap_or(0);
            if let Some(b) = t.heartbeats {
                *want_beats.entry(t.job).or_default() += b - seen.insert(t.id, b).unwrap_or(b);
            }
        }
        for j in &snap.jobs {
            want.entry(j.id).or_default().2 += period_ns;
        }
        // Beats are never held back: each turn's are in at once (a turn's
        // missed beats would come with the task's next, so only a look at
        // every turn tells).
        for (j, &b) in &want_beats {
            let acc = g.span.as_ref().and_then(|s| s.jobs.get(*j));
            assert_eq!(acc.map_or(0, |a| a.beats), b, "turn {turn}: job {j}'s beats");
        }
    }
    assert!(held_turns > 100, "{held_turns} repeats held");
    g.settle_held();
    let span = g.span.as_ref().unwrap();
    for (j, w) in &want {
        let acc = span.jobs.get(*j).expect("an account for every job seen");
        assert_eq!((acc.cpu_ns, acc.instructions, acc.present_ns), *w, "job {j}");
        assert_eq!(
            acc.beats,
            want_beats.get(j).copied().unwrap_or(0),
            "job {j}'s beats"
        );
    }
    assert!(want_beats.values().any(|&b| b > 0), "some beats counted");
}
