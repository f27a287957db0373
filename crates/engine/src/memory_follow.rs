//! Memory follows placement: when a job has run on a set of NUMA nodes for
//! a while and a good share of its memory lies on other nodes, its memory
//! is moved onto the job's nodes. This is the rule: when a move is due and
//! from which nodes to which. The live follower
//! (`herd_runtime::live::memory`) makes the move with `migrate_pages(2)`;
//! the simulator moves a job's first-touch memory, so that it models what
//! herd does live.
//!
//! Which jobs it follows:
//! - a job herd pinned: its memory comes to the nodes herd keeps it on;
//! - a job herd pinned earlier and has since handed to the kernel (the
//!   guard backed the policy off, or the policy let it go): its memory
//!   comes to the nodes the kernel has kept its working threads on. herd's
//!   placement decided where that memory was first touched, and on a
//!   kernel without NUMA balancing (`numa_balancing=0`, common on HPC
//!   nodes and what S3 assumed) nothing else would ever move it: plain
//!   Linux would have had it where the kernel runs the job. Handing a job
//!   back without this left two of S3's eight ND copies on NUMA2 reading
//!   remote memory for the rest of their runs (`docs/results.md`, issue
//!   23);
//! - never a job herd has not pinned: where the kernel put its memory is
//!   where plain Linux puts it.
//!
//! Pure: time comes from the caller.

use std::collections::BTreeSet;

use herd_topo::CpuSet;

/// A job's nodes must have stayed the same this long before its memory is
/// moved: a policy that tries a node and moves on should not drag gigabytes
/// behind it.
pub const SETTLED_NS: u64 = 1_000_000_000;
/// At least this long between two moves of one job's memory: moving pages
/// stalls the threads that touch them, and a policy (or the kernel) that
/// moves a job to and fro must not have its memory chase it.
pub const GAP_NS: u64 = 5_000_000_000;
/// The longest wait between two moves of one job's memory that did not
/// take: a move that leaves at least half of what was away where it was
/// (the job's nodes cannot hold it all: a 6 GiB program on 5 GiB nodes in
/// a guest was moved every 5 s, 9 times in two minutes, each a GB walked
/// in vain) doubles the wait before the next, up to this.
pub const MAX_GAP_NS: u64 = 320_000_000_000;
/// A share of the job's memory smaller than this away from its nodes is
/// left where it is: the move would cost more than the remote accesses it
/// saves.
pub const MIN_SHARE: f64 = 0.10;

/// Where a job runs, for its memory to follow.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RunsOn {
    /// Not known: no thread seen, or a working thread the kernel places
    /// whose CPU was not seen.
    Unknown,
    /// On the CPUs herd pinned its threads to.
    Pinned(CpuSet),
    /// Some working threads are the kernel's to place: the CPUs they were
    /// last seen on, with those of the threads herd pinned.
    Kernel(CpuSet),
}

/// Where each of `jobs` jobs runs. `threads`: (job, the CPUs herd set if
/// it set any, whether it works, the CPU it was last seen on). A thread
/// that sleeps with no mask of herd's or with every CPU of the machine
/// (`every`; a policy letting it go) says nothing of where the job runs: a
/// shell waiting for the program it started, a main thread in join.
/// Counted, numa:model's let-go main thread made a job laid out on node 0
/// "run" on both nodes of a 2-socket guest, and the quarter of its memory
/// it had touched from node 1 never followed (`docs/results.md`, issue
/// 24's twentieth session).
pub fn runs_on_by_job<'a>(
    jobs: usize,
    threads: impl Iterator<Item = (usize, Option<&'a CpuSet>, bool, Option<u32>)>,
    every: &CpuSet,
) -> Vec<RunsOn> {
    #[derive(Default)]
    struct Acc {
        seen: bool,
        pinned: CpuSet,
        ran: CpuSet,
        kernel: bool,
        unknown: bool,
    }
    // Made, not cloned: a clone copies two sets a job, every turn.
    let mut acc: Vec<Acc> = std::iter::repeat_with(Acc::default).take(jobs).collect();
    for (job, placed, works, last_cpu) in threads {
        let Some(a) = acc.get_mut(job) else { continue };
        a.seen = true;
        match placed.filter(|c| !every.is_subset(c)) {
            Some(c) => a.pinned.union_with(c),
            None if works => {
                a.kernel = true;
                match last_cpu {
                    Some(cpu) => {
                        a.ran.insert(cpu);
                    }
                    None => a.unknown = true,
                }
            }
            None => {}
        }
    }
    acc.into_iter()
        .map(|a| match a {
            Acc { seen: false, .. } | Acc { unknown: true, .. } => RunsOn::Unknown,
            Acc {
                kernel: true,
                pinned,
                ran,
                ..
            } => RunsOn::Kernel(pinned.union(&ran)),
            Acc { pinned, .. } => RunsOn::Pinned(pinned),
        })
        .collect()
}

/// The NUMA nodes (OS numbers) of `cpus`.
pub fn nodes_of(nodes: &[(u32, CpuSet)], cpus: &CpuSet) -> BTreeSet<u32> {
    nodes_among(nodes, cpus).collect()
}

/// [`nodes_of`], one node at a time, in `nodes`' order: each node's CPUs
/// met with `cpus` a word at a time (asked CPU by CPU, and collected into
/// a new set per job per turn, [`Rule::due`] was 38% of the instructions
/// of `herd sim scenarios/s3-numa2-hd1.toml`).
fn nodes_among<'a>(nodes: &'a [(u32, CpuSet)], cpus: &'a CpuSet) -> impl Iterator<Item = u32> + 'a {
    nodes
        .iter()
        .filter(|(_, c)| c.intersects(cpus))
        .map(|(id, _)| *id)
}

/// The nodes to move a job's memory from, given the nodes it runs on and
/// where its memory is (kB, or any unit, per OS node): those outside
/// `run_on`, when what they hold is at least `min_kb` and a share of
/// [`MIN_SHARE`]. With the amount they hold.
pub fn worth_moving(
    run_on: &BTreeSet<u32>,
    memory_kb: &[(u32, u64)],
    min_kb: u64,
) -> Option<(Vec<u32>, u64)> {
    if run_on.is_empty() {
        return None;
    }
    let total: u64 = memory_kb.iter().map(|(_, kb)| kb).sum();
    let away: Vec<(u32, u64)> = memory_kb
        .iter()
        .copied()
        .filter(|(node, kb)| *kb > 0 && !run_on.contains(node))
        .collect();
    let kb: u64 = away.iter().map(|(_, kb)| kb).sum();
    (kb > 0 && kb >= min_kb && kb as f64 >= MIN_SHARE * total as f64)
        .then(|| (away.iter().map(|(n, _)| *n).collect(), kb))
}

/// A move due: the nodes its memory leaves, those it goes to (the job's),
/// and how much was on the first.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Due {
    /// The nodes the pages leave (OS numbers).
    pub from: Vec<u32>,
    /// The nodes they go to: those the job runs on.
    pub to: Vec<u32>,
    /// How much was on `from`.
    pub kb: u64,
}

/// Per job: the nodes last seen, since when, when its memory last moved,
/// and whether herd ever pinned it.
#[derive(Debug, Default, Clone)]
struct JobState {
    nodes: BTreeSet<u32>,
    since_ns: u64,
    moved_ns: Option<u64>,
    pinned_ever: bool,
    /// How much was away when its last move was due.
    last_kb: Option<u64>,
    /// The wait after its last move: [`GAP_NS`], doubled after each move
    /// that did not take (0: [`GAP_NS`]).
    gap_ns: u64,
}

/// The rule's state over a run.
#[derive(Debug, Clone)]
pub struct Rule {
    /// The machine's NUMA nodes and their CPUs.
    pub nodes: Vec<(u32, CpuSet)>,
    /// Every CPU of those nodes: a thread's mask of all of them places it
    /// nowhere in particular.
    pub every: CpuSet,
    /// The least memory away that is worth a move, in the unit of the
    /// readings.
    min_kb: u64,
    jobs: Vec<JobState>,
}

impl Rule {
    /// A rule for a machine with `nodes`; `None` with fewer than two.
    pub fn new(nodes: Vec<(u32, CpuSet)>, min_kb: u64) -> Option<Rule> {
        (nodes.len() >= 2).then(|| Rule {
            every: nodes.iter().fold(CpuSet::new(), |a, (_, c)| a.union(c)),
            nodes,
            min_kb,
            jobs: Vec::new(),
        })
    }

    /// Notes that job `job` runs on `runs_on` at `now_ns`; returns the move
    /// its memory is due, if any. `memory_kb`: where its memory was last
    /// read. `free`: no move is in flight (one at a time).
    pub fn due(
        &mut self,
        job: usize,
        runs_on: &RunsOn,
        memory_kb: Option<&[(u32, u64)]>,
        now_ns: u64,
        free: bool,
    ) -> Option<Due> {
        self.due_with(job, runs_on, || memory_kb, now_ns, free)
    }

    /// [`Rule::due`], with where the job's memory is asked of `memory_kb`
    /// only when a move could be due (the job settled and rested, no move
    /// in flight): the simulator works it out from the job's threads, and
    /// did so for every job it asked about each turn (a twenty-fifth of
    /// `herd sim scenarios/s3-numa2-hd1.toml`), to use it a few times a run.
    pub fn due_with<M: AsRef<[(u32, u64)]>>(
        &mut self,
        job: usize,
        runs_on: &RunsOn,
        memory_kb: impl FnOnce() -> Option<M>,
        now_ns: u64,
        free: bool,
    ) -> Option<Due> {
        if self.jobs.len() <= job {
            self.jobs.resize(job + 1, JobState::default());
        }
        let st = &mut self.jobs[job];
        let cpus = match runs_on {
            RunsOn::Pinned(c) => {
                st.pinned_ever |= !c.is_empty();
                Some(c)
            }
            RunsOn::Kernel(c) if st.pinned_ever => Some(c),
            RunsOn::Kernel(_) | RunsOn::Unknown => None,
        };
        // Most turns a job runs where it ran: its nodes are compared with
        // those kept, and a set made only when they differ. (Node numbers
        // are distinct: as many, each among those kept, is the same set.)
        let same = match cpus {
            Some(c) => {
                let mut count = 0;
                nodes_among(&self.nodes, c).all(|id| {
                    count += 1;
                    st.nodes.contains(&id)
                }) && count == st.nodes.len()
            }
            None => st.nodes.is_empty(),
        };
        if !same {
            st.nodes = cpus.map(|c| nodes_of(&self.nodes, c)).unwrap_or_default();
            st.since_ns = now_ns;
        }
        let settled = !st.nodes.is_empty() && now_ns.saturating_sub(st.since_ns) >= SETTLED_NS;
        let gap_ns = st.gap_ns.max(GAP_NS);
        let rested = st.moved_ns.is_none_or(|t| now_ns.saturating_sub(t) >= gap_ns);
        if !(settled && rested && free) {
            return None;
        }
        let (from, kb) = worth_moving(&st.nodes, memory_kb()?.as_ref(), self.min_kb)?;
        // The last move, to these same nodes, left at least half of what
        // was away: the next one waits twice as long.
        let took = st
            .last_kb
            .is_none_or(|last| st.moved_ns.is_none_or(|t| t < st.since_ns) || kb.saturating_mul(2) < last);
        st.gap_ns = if took {
            GAP_NS
        } else {
            gap_ns.saturating_mul(2).min(MAX_GAP_NS)
        };
        st.last_kb = Some(kb);
        Some(Due {
            from,
            to: st.nodes.iter().copied().collect(),
            kb,
        })
    }

    /// Job `job`'s memory moved (or was held off) at `now_ns`: the next
    /// move waits [`GAP_NS`], or longer after moves that did not take
    /// ([`MAX_GAP_NS`]).
    pub fn rest(&mut self, job: usize, now_ns: u64) {
        if let Some(st) = self.jobs.get_mut(job) {
            st.moved_ns = Some(now_ns);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn set(n: &[u32]) -> BTreeSet<u32> {
        n.iter().copied().collect()
    }

    fn cpus(c: &[u32]) -> CpuSet {
        c.iter().copied().collect()
    }

    #[test]
    fn a_sleeping_thread_let_go_on_every_cpu_does_not_widen_its_job() {
        let every = cpus(&[0, 1, 2, 3, 4, 5, 6, 7]);
        let node0 = cpus(&[0]);
        let node0b = cpus(&[2]);
        // Job 0: a shell and a main thread in join let go on every CPU,
        // two workers pinned on node 0. Job 1: a worker the kernel places,
        // last seen on CPU 5. Job 2: a sleeping thread pinned on node 1, a
        // worker on node 0. Job 4: a worker the kernel places, not seen on
        // a CPU.
        let node1 = cpus(&[4]);
        let threads = [
            (0, Some(&every), false, Some(1)),
            (0, None, false, Some(6)),
            (0, Some(&node0), true, Some(0)),
            (0, Some(&node0b), true, Some(2)),
            (1, Some(&every), true, Some(5)),
            (2, Some(&node1), false, None),
            (2, Some(&node0), true, Some(0)),
            (4, None, true, None),
        ];
        let on = runs_on_by_job(5, threads.into_iter(), &every);
        assert_eq!(
            on[0],
            RunsOn::Pinned(cpus(&[0, 2])),
            "the let-go threads say nothing"
        );
        assert_eq!(on[1], RunsOn::Kernel(cpus(&[5])), "where the kernel ran it");
        assert_eq!(
            on[2],
            RunsOn::Pinned(cpus(&[0, 4])),
            "a pinned thread keeps its node while it sleeps"
        );
        assert_eq!(on[3], RunsOn::Unknown, "no threads: nowhere known");
        assert_eq!(on[4], RunsOn::Unknown, "a worker on no CPU seen");
    }

    #[test]
    fn memory_away_from_the_job_is_moved_when_it_is_worth_it() {
        let min = 4 * 1024;
        // 198 MB on node 0, the job runs on node 1: all of node 0's moves.
        assert_eq!(
            worth_moving(&set(&[1]), &[(0, 198_000), (1, 39_000)], min),
            Some((vec![0], 198_000))
        );
        // Already where it runs, or too little away to pay.
        assert_eq!(
            worth_moving(&set(&[0, 1]), &[(0, 198_000), (1, 39_000)], min),
            None
        );
        assert_eq!(worth_moving(&set(&[1]), &[(0, 2_000), (1, 39_000)], min), None);
        assert_eq!(
            worth_moving(&set(&[1]), &[(0, 5_000), (1, 390_000)], min),
            None,
            "under 10%"
        );
        assert_eq!(worth_moving(&set(&[]), &[(0, 198_000)], min), None);
        // In the simulator's units (one per thread), with no floor.
        assert_eq!(worth_moving(&set(&[1]), &[(0, 1)], 0), Some((vec![0], 1)));
        assert_eq!(worth_moving(&set(&[1]), &[(1, 1)], 0), None);
    }

    fn two_nodes() -> Rule {
        Rule::new(vec![(0, cpus(&[0, 1, 2, 3])), (1, cpus(&[4, 5, 6, 7]))], 4096).unwrap()
    }

    #[test]
    fn a_job_must_settle_and_rest_between_moves() {
        let mut f = two_nodes();
        let mem = [(0, 100_000), (1, 0)];
        let on1 = RunsOn::Pinned(cpus(&[4]));
        assert_eq!(f.due(0, &on1, Some(&mem), 0, true), None, "just placed");
        assert_eq!(f.due(0, &on1, Some(&mem), SETTLED_NS / 2, true), None);
        let due = Due {
            from: vec![0],
            to: vec![1],
            kb: 100_000,
        };
        assert_eq!(
            f.due(0, &on1, Some(&mem), SETTLED_NS, false),
            None,
            "another in flight"
        );
        assert_eq!(f.due(0, &on1, Some(&mem), SETTLED_NS, true), Some(due));
        f.rest(0, SETTLED_NS);
        assert_eq!(
            f.due(0, &on1, Some(&mem), SETTLED_NS + GAP_NS / 2, true),
            None,
            "resting"
        );
        assert!(f.due(0, &on1, Some(&mem), SETTLED_NS + GAP_NS, true).is_some());
        assert!(Rule::new(vec![(0, cpus(&[0, 1, 2, 3]))], 0).is_none());
    }

    /// A move that leaves most of the memory away (the job's nodes cannot
    /// hold it) doubles the wait before the next, up to MAX_GAP_NS; one
    /// that takes, or a move of the job to other nodes, brings the wait
    /// back to GAP_NS.
    #[test]
    fn moves_that_do_not_take_wait_longer_each_time() {
        let mut f = two_nodes();
        let stuck = [(0, 1_000_000), (1, 5_000_000)];
        let on1 = RunsOn::Pinned(cpus(&[4]));
        assert_eq!(f.due(0, &on1, Some(&stuck), 0, true), None);
        // Each due move made at once; the memory stays away.
        let mut at = Vec::new();
        let mut now = SETTLED_NS;
        while now < SETTLED_NS + 3 * MAX_GAP_NS {
            if f.due(0, &on1, Some(&stuck), now, true).is_some() {
                at.push((now - SETTLED_NS) / GAP_NS);
                f.rest(0, now);
            }
            now += GAP_NS / 5;
        }
        // Waits of 5, 10, 20, ... 320 s, then 320 s again.
        assert_eq!(at, [0, 1, 3, 7, 15, 31, 63, 127, 191]);
        // The memory comes (the last move took): back to GAP_NS.
        let now = SETTLED_NS + 191 * GAP_NS + MAX_GAP_NS;
        let came = [(0, 450_000), (1, 3_000_000)];
        assert!(f.due(0, &on1, Some(&came), now, true).is_some());
        f.rest(0, now);
        assert!(
            f.due(0, &on1, Some(&came), now + GAP_NS, true).is_some(),
            "the wait is 5 s again"
        );
        // Another job, stuck twice, then moved to node 0: no longer waits longer.
        let on0 = RunsOn::Pinned(cpus(&[0]));
        let away = [(0, 1_000_000), (1, 1_000_000)];
        let _ = f.due(1, &on1, Some(&away), 0, true);
        for now in [SETTLED_NS, SETTLED_NS + GAP_NS] {
            assert!(f.due(1, &on1, Some(&away), now, true).is_some());
            f.rest(1, now);
        }
        let moved_at = SETTLED_NS + GAP_NS + 1;
        assert_eq!(f.due(1, &on0, Some(&away), moved_at, true), None, "just moved");
        // The wait set at the last move holds (10 s: it did not take)...
        let rested = SETTLED_NS + 3 * GAP_NS;
        assert_eq!(f.due(1, &on0, Some(&away), rested - 1, true), None);
        assert!(f.due(1, &on0, Some(&away), rested, true).is_some());
        f.rest(1, rested);
        // ... but the move to node 0's is a first one: 5 s after it.
        assert!(f.due(1, &on0, Some(&away), rested + GAP_NS, true).is_some());
    }

    /// `due_with` asks where the memory is only when a move could be due,
    /// and answers as `due` does.
    #[test]
    fn memory_is_asked_only_when_a_move_could_be_due() {
        let (mut lazy, mut eager) = (two_nodes(), two_nodes());
        let mem = [(0, 100_000), (1, 0)];
        let on1 = RunsOn::Pinned(cpus(&[4]));
        let asked = std::cell::Cell::new(0);
        let times = [
            (0, true, 0),
            (SETTLED_NS / 2, true, 0),
            (SETTLED_NS, false, 0),
            (SETTLED_NS, true, 1),
            (SETTLED_NS + GAP_NS / 2, true, 1),
        ];
        for (i, (now, free, asked_by_now)) in times.into_iter().enumerate() {
            let got = lazy.due_with(
                0,
                &on1,
                || {
                    asked.set(asked.get() + 1);
                    Some(mem)
                },
                now,
                free,
            );
            assert_eq!(got, eager.due(0, &on1, Some(&mem), now, free), "step {i}");
            assert_eq!(asked.get(), asked_by_now, "step {i}");
            if got.is_some() {
                lazy.rest(0, now);
                eager.rest(0, now);
            }
        }
    }

    #[test]
    fn the_kernels_placement_is_followed_only_for_a_job_herd_had_pinned() {
        let mut f = two_nodes();
        let mem = [(0, 100_000)];
        let kernel_on1 = RunsOn::Kernel(cpus(&[5]));
        // Job 1 was never pinned: where the kernel put its memory is where
        // plain Linux puts it.
        assert_eq!(f.due(1, &kernel_on1, Some(&mem), 0, true), None);
        assert_eq!(f.due(1, &kernel_on1, Some(&mem), 10 * GAP_NS, true), None);
        // Job 0 was pinned on node 0 (its memory came there), then handed
        // to the kernel, which keeps it on node 1: after a settled second
        // its memory follows.
        assert_eq!(f.due(0, &RunsOn::Pinned(cpus(&[0])), Some(&mem), 0, true), None);
        let t = SETTLED_NS;
        assert_eq!(
            f.due(0, &kernel_on1, Some(&mem), t, true),
            None,
            "just handed back"
        );
        assert_eq!(
            f.due(
                0,
                &RunsOn::Kernel(cpus(&[1, 5])),
                Some(&mem),
                t + SETTLED_NS / 2,
                true
            ),
            None
        );
        assert_eq!(
            f.due(0, &kernel_on1, Some(&mem), t + SETTLED_NS, true),
            None,
            "it moved: again"
        );
        assert_eq!(
            f.due(0, &kernel_on1, Some(&mem), t + 5 * SETTLED_NS / 2, true)
                .map(|d| d.to),
            Some(vec![1])
        );
        assert_eq!(f.due(0, &RunsOn::Unknown, Some(&mem), 10 * GAP_NS, true), None);
    }
}
