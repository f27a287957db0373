//! Memory follows placement (issue 24, `--memory-follow`): when a policy
//! has held a job's threads on a set of NUMA nodes for a while and a good
//! share of the job's pages lies on other nodes, herd moves those pages
//! onto the job's nodes with `migrate_pages(2)`.
//!
//! Without this, a job placed away from where it first touched its memory
//! keeps reading it remotely for good on a machine whose kernel does not
//! balance NUMA memory (`numa_balancing=0`, common on HPC nodes and what
//! S3 assumed): the simulator's `first-touch` memory model. With it, the
//! job's memory comes to its nodes within seconds of a lasting move: the
//! `local` model, reached in steps. A job confined by a cgroup cpuset
//! already has its pages moved by the kernel when `cpuset.mems` changes
//! (`cgroup.rs`); this is the path for jobs placed by affinity alone.
//!
//! What it does not do: spread a job's memory over the nodes it runs on
//! (which pages a thread uses is not visible without sampling its
//! accesses; the kernel's NUMA balancing does that), or follow a job the
//! kernel places (a thread herd has not pinned that wants a CPU: its
//! nodes are any; one asleep, as a shell waiting for the program it
//! started, is left out). A job's memory is its program's and every
//! process it forked.
//!
//! Written on the raw syscall rather than libnuma: it is one call whose
//! arguments are two node bitmasks, and libnuma would add a C library to
//! every install for it.

use std::collections::BTreeSet;
use std::sync::mpsc;

use herd_policy::JobView;
use herd_topo::CpuSet;

use super::forked;
use crate::procfs;

/// A job's nodes must have stayed the same this long before its memory is
/// moved: a policy that tries a node and moves on should not drag gigabytes
/// behind it.
pub const SETTLED_NS: u64 = 1_000_000_000;
/// At least this long between two moves of one job's memory: moving pages
/// stalls the threads that touch them, and a policy that moves a job to
/// and fro must not have its memory chase it.
pub const GAP_NS: u64 = 5_000_000_000;
/// Memory on other nodes smaller than this is left where it is: the move
/// would cost more than the remote accesses it saves.
pub const MIN_KB: u64 = 4 * 1024;
/// ... and so is a share smaller than this of the job's memory.
pub const MIN_SHARE: f64 = 0.10;

/// One move: the pages of `pids` on nodes `from`, onto nodes `to`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Move {
    /// The job.
    pub job: usize,
    /// Its processes.
    pub pids: Vec<i32>,
    /// The nodes its pages leave (OS numbers).
    pub from: Vec<u32>,
    /// The nodes they go to: the nodes its threads run on.
    pub to: Vec<u32>,
    /// How much memory was on `from`, from the last `numa_maps` reading.
    pub kb: u64,
}

/// The nodes to move a job's memory from, given the nodes it runs on and
/// where its memory is (kB per OS node): those outside `run_on`, when what
/// they hold is worth a move. Pure, for tests.
pub fn worth_moving(run_on: &BTreeSet<u32>, memory_kb: &[(u32, u64)]) -> Option<(Vec<u32>, u64)> {
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
    (kb >= MIN_KB && kb as f64 >= MIN_SHARE * total as f64)
        .then(|| (away.iter().map(|(n, _)| *n).collect(), kb))
}

/// Where each of `jobs` jobs runs, for its memory to follow: the union of
/// the CPUs its threads are pinned to, or `None` once a thread that works
/// is the kernel's to place (its nodes are then any), and for a job with
/// no thread. `threads`: (job, the CPUs herd set, whether it works). A
/// thread that sleeps with no mask of herd's or with every CPU of the
/// machine (`every`; a policy letting it go) says nothing of where the job
/// runs: a shell waiting for the program it started, a main thread in join.
/// Counted, numa:model's let-go main thread made a job laid out on node 0
/// "run" on both nodes of a 2-socket guest, and the quarter of its memory
/// it had touched from node 1 never followed (`docs/results.md`, issue
/// 24's twentieth session).
pub fn run_on_by_job<'a>(
    jobs: usize,
    threads: impl Iterator<Item = (usize, Option<&'a CpuSet>, bool)>,
    every: &CpuSet,
) -> Vec<Option<CpuSet>> {
    let mut pinned: Vec<Option<CpuSet>> = vec![Some(CpuSet::new()); jobs];
    let mut seen = vec![false; jobs];
    for (job, placed, works) in threads {
        let Some(slot) = pinned.get_mut(job) else {
            continue;
        };
        seen[job] = true;
        let anywhere = placed.is_none_or(|c| every.is_subset(c));
        *slot = match (slot.take(), placed) {
            (Some(cpus), _) if anywhere && !works => Some(cpus),
            (Some(cpus), Some(c)) if !anywhere => Some(cpus.union(c)),
            _ => None,
        };
    }
    for (slot, seen) in pinned.iter_mut().zip(seen) {
        if !seen {
            *slot = None;
        }
    }
    pinned
}

/// The NUMA nodes (OS numbers) of `cpus`.
pub fn nodes_of(nodes: &[(u32, CpuSet)], cpus: &CpuSet) -> BTreeSet<u32> {
    nodes
        .iter()
        .filter(|(_, c)| c.iter().any(|cpu| cpus.contains(cpu)))
        .map(|(id, _)| *id)
        .collect()
}

/// What became of a move, reported by the thread that made it.
#[derive(Debug)]
pub struct Moved {
    /// The job.
    pub job: usize,
    /// Pages the kernel could not move (summed over the processes), or the
    /// error of the first process it refused.
    pub result: Result<u64, std::io::Error>,
}

/// Per job: the nodes last seen, since when, and when its memory last moved.
#[derive(Debug, Default, Clone)]
struct JobState {
    nodes: BTreeSet<u32>,
    since_ns: u64,
    moved_ns: Option<u64>,
}

/// The follower: which jobs are settled, and the one move in flight.
#[derive(Debug)]
pub struct Follower {
    /// The machine's NUMA nodes and their CPUs.
    pub nodes: Vec<(u32, CpuSet)>,
    /// Every CPU of those nodes: a thread's mask of all of them places it
    /// nowhere in particular.
    pub every: CpuSet,
    jobs: Vec<JobState>,
    /// The move in flight, on a thread of its own: `migrate_pages` runs as
    /// long as copying the pages takes (a second per few GB), and herd's
    /// loop must keep its period meanwhile.
    in_flight: Option<mpsc::Receiver<Moved>>,
    /// Moves started.
    pub moves: u64,
    /// kB on other nodes when those moves started.
    pub moved_kb: u64,
    /// Pages the kernel could not move, over all moves.
    pub pages_left: u64,
    /// Moves the kernel refused (a process that left, no permission).
    pub refused: u64,
    /// Moves not made because a thread's mask was no longer herd's.
    pub held_off: u64,
}

impl Follower {
    /// A follower for a machine with `nodes`; `None` with fewer than two.
    pub fn new(nodes: Vec<(u32, CpuSet)>) -> Option<Follower> {
        (nodes.len() >= 2).then(|| Follower {
            every: nodes.iter().fold(CpuSet::new(), |a, (_, c)| a.union(c)),
            nodes,
            jobs: Vec::new(),
            in_flight: None,
            moves: 0,
            moved_kb: 0,
            pages_left: 0,
            refused: 0,
            held_off: 0,
        })
    }

    /// Collects a finished move, if one finished.
    pub fn collect(&mut self) {
        let Some(rx) = &self.in_flight else { return };
        match rx.try_recv() {
            Ok(done) => {
                self.count(done);
                self.in_flight = None;
            }
            Err(mpsc::TryRecvError::Empty) => {}
            Err(mpsc::TryRecvError::Disconnected) => self.in_flight = None,
        }
    }

    /// Notes that job `job` runs on `run_on` (`None`: some of its threads
    /// are the kernel's to place) at `now_ns`; returns the move its memory
    /// is due, if any. `memory_kb`: where its memory was last read.
    pub fn due(
        &mut self,
        job: usize,
        run_on: Option<BTreeSet<u32>>,
        memory_kb: Option<&[(u32, u64)]>,
        now_ns: u64,
    ) -> Option<(Vec<u32>, Vec<u32>, u64)> {
        if self.jobs.len() <= job {
            self.jobs.resize(job + 1, JobState::default());
        }
        let st = &mut self.jobs[job];
        let run_on = run_on.unwrap_or_default();
        if st.nodes != run_on {
            st.nodes = run_on;
            st.since_ns = now_ns;
        }
        let settled = !st.nodes.is_empty() && now_ns.saturating_sub(st.since_ns) >= SETTLED_NS;
        let rested = st.moved_ns.is_none_or(|t| now_ns.saturating_sub(t) >= GAP_NS);
        if !(settled && rested && self.in_flight.is_none()) {
            return None;
        }
        let (from, kb) = worth_moving(&st.nodes, memory_kb?)?;
        Some((from, st.nodes.iter().copied().collect(), kb))
    }

    /// Leaves job `job`'s memory where it is until [`GAP_NS`] from now, as
    /// if it had just moved: one of its threads no longer has the mask herd
    /// set (the program set its own), so where herd pinned it is not where
    /// it runs.
    pub fn hold_off(&mut self, job: usize, now_ns: u64) {
        if let Some(st) = self.jobs.get_mut(job) {
            st.moved_ns = Some(now_ns);
        }
        self.held_off += 1;
    }

    /// Starts `mv` on a thread of its own.
    pub fn start(&mut self, mv: Move, now_ns: u64) {
        let (tx, rx) = mpsc::channel();
        let job = mv.job;
        let spawned = std::thread::Builder::new()
            .name("herd-memory".into())
            .spawn(move || {
                let mut left = 0;
                let mut result: std::io::Result<()> = Ok(());
                for pid in &mv.pids {
                    match migrate_pages(*pid, &mv.from, &mv.to) {
                        Ok(n) => left += n,
                        // A forked helper that left: the others still move.
                        Err(e) if e.raw_os_error() == Some(libc::ESRCH) => {}
                        Err(e) => {
                            result = Err(e);
                            break;
                        }
                    }
                }
                let _ = tx.send(Moved {
                    job,
                    result: result.map(|()| left),
                });
            });
        if spawned.is_ok() {
            self.in_flight = Some(rx);
            self.moves += 1;
            self.moved_kb += mv.kb;
        } else {
            self.refused += 1;
        }
        if let Some(st) = self.jobs.get_mut(job) {
            st.moved_ns = Some(now_ns);
        }
    }

    /// Waits for the move in flight, if any (at the end of a run, so the
    /// summary counts it and no thread outlives herd's loop).
    pub fn finish(&mut self) {
        if let Some(done) = self.in_flight.take().and_then(|rx| rx.recv().ok()) {
            self.count(done);
        }
    }

    /// Adds a finished move to the counts.
    fn count(&mut self, done: Moved) {
        match done.result {
            Ok(left) => self.pages_left += left,
            Err(_) => self.refused += 1,
        }
    }
}

/// A node bitmask as `migrate_pages` takes it: unsigned longs, node `n` at
/// bit `n % 64` of word `n / 64`.
fn mask(nodes: &[u32]) -> Vec<libc::c_ulong> {
    let bits = libc::c_ulong::BITS;
    let words = nodes.iter().map(|n| n / bits + 1).max().unwrap_or(1) as usize;
    let mut m = vec![0 as libc::c_ulong; words];
    for n in nodes {
        m[(n / bits) as usize] |= 1 << (n % bits);
    }
    m
}

/// Moves the pages of process `pid` on nodes `from` onto nodes `to`
/// (`migrate_pages(2)`); returns the pages it could not move.
pub fn migrate_pages(pid: i32, from: &[u32], to: &[u32]) -> std::io::Result<u64> {
    let (mut old, mut new) = (mask(from), mask(to));
    let words = old.len().max(new.len());
    old.resize(words, 0);
    new.resize(words, 0);
    let maxnode = words as libc::c_ulong * libc::c_ulong::from(libc::c_ulong::BITS);
    // SAFETY: both masks are `words` unsigned longs, which covers the
    // `maxnode` bits the kernel reads; it writes nothing back.
    let r = unsafe { libc::syscall(libc::SYS_migrate_pages, pid, maxnode, old.as_ptr(), new.as_ptr()) };
    if r < 0 {
        Err(std::io::Error::last_os_error())
    } else {
        Ok(r as u64)
    }
}

/// Programs' memory per NUMA node (kB by OS node), as last read.
pub(super) struct NumaMemory {
    pub(super) read_ns: Option<u64>,
    pub(super) kb: Vec<Option<Vec<(u32, u64)>>>,
}

impl super::LiveWorld {
    /// Reads where each program's memory is, at most once a second (numa_maps
    /// walks every mapping: ms for a large process), into its job view.
    /// `rebuilt`: the views are new and hold no reading yet.
    pub(super) fn refresh_numa_memory(&mut self, now_ns: u64, jobs: &mut [JobView], rebuilt: bool) {
        let Some(NumaMemory { read_ns: last, kb }) = &mut self.numa_memory else {
            return;
        };
        let due = last.is_none_or(|l| now_ns.saturating_sub(l) >= 1_000_000_000);
        if due {
            *last = Some(now_ns);
            for (j, p) in self.programs.iter().enumerate().filter(|(_, p)| p.alive()) {
                // The program and every process it forked: a shell's
                // memory alone said nothing of the program it started.
                kb[j] = procfs::numa_memory_kb(&self.proc_root, p.pid);
                for &pid in forked(&self.family, j) {
                    if let Some(more) = procfs::numa_memory_kb(&self.proc_root, pid) {
                        procfs::add_node_kb(kb[j].get_or_insert_with(Vec::new), &more);
                    }
                }
            }
        }
        if !(due || rebuilt) {
            return;
        }
        for v in jobs.iter_mut() {
            v.memory_kb = kb.get(v.id as usize).cloned().flatten();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn set(n: &[u32]) -> BTreeSet<u32> {
        n.iter().copied().collect()
    }

    #[test]
    fn a_sleeping_thread_let_go_on_every_cpu_does_not_widen_its_job() {
        let cpus = |c: &[u32]| c.iter().copied().collect::<CpuSet>();
        let every = cpus(&[0, 1, 2, 3, 4, 5, 6, 7]);
        let node0 = cpus(&[0]);
        let node0b = cpus(&[2]);
        // Job 0: a shell and a main thread in join let go on every CPU,
        // two workers pinned on node 0. Job 1: a worker the kernel places.
        // Job 2: a sleeping thread pinned on node 1, a worker on node 0.
        let node1 = cpus(&[4]);
        let threads = [
            (0, Some(&every), false),
            (0, None, false),
            (0, Some(&node0), true),
            (0, Some(&node0b), true),
            (1, Some(&every), true),
            (2, Some(&node1), false),
            (2, Some(&node0), true),
        ];
        let on = run_on_by_job(4, threads.into_iter(), &every);
        assert_eq!(on[0], Some(cpus(&[0, 2])), "the let-go threads say nothing");
        assert_eq!(on[1], None, "a worker the kernel places runs anywhere");
        assert_eq!(
            on[2],
            Some(cpus(&[0, 4])),
            "a pinned thread keeps its node while it sleeps"
        );
        assert_eq!(on[3], None, "no threads: nowhere known");
    }

    #[test]
    fn memory_away_from_the_job_is_moved_when_it_is_worth_it() {
        // 198 MB on node 0, the job runs on node 1: all of node 0's moves.
        assert_eq!(
            worth_moving(&set(&[1]), &[(0, 198_000), (1, 39_000)]),
            Some((vec![0], 198_000))
        );
        // Already where it runs, or too little away to pay.
        assert_eq!(worth_moving(&set(&[0, 1]), &[(0, 198_000), (1, 39_000)]), None);
        assert_eq!(worth_moving(&set(&[1]), &[(0, 2_000), (1, 39_000)]), None);
        assert_eq!(
            worth_moving(&set(&[1]), &[(0, 5_000), (1, 390_000)]),
            None,
            "under 10%"
        );
        assert_eq!(worth_moving(&set(&[]), &[(0, 198_000)]), None);
    }

    #[test]
    fn a_job_must_settle_and_rest_between_moves() {
        let nodes = vec![
            (0, CpuSet::parse_list("0-3").unwrap()),
            (1, CpuSet::parse_list("4-7").unwrap()),
        ];
        let mut f = Follower::new(nodes).unwrap();
        let mem = [(0, 100_000), (1, 0)];
        let on1 = || Some(set(&[1]));
        assert_eq!(f.due(0, on1(), Some(&mem), 0), None, "just placed");
        assert_eq!(f.due(0, on1(), Some(&mem), SETTLED_NS / 2), None);
        assert_eq!(
            f.due(0, on1(), Some(&mem), SETTLED_NS),
            Some((vec![0], vec![1], 100_000))
        );
        // Moved (to a pid that is not there: the kernel refuses, ESRCH).
        f.start(
            Move {
                job: 0,
                pids: vec![i32::MAX],
                from: vec![0],
                to: vec![1],
                kb: 100_000,
            },
            SETTLED_NS,
        );
        f.finish();
        assert_eq!((f.moves, f.refused), (1, 0), "a process gone is not a refusal");
        assert_eq!(
            f.due(0, on1(), Some(&mem), SETTLED_NS + GAP_NS / 2),
            None,
            "resting"
        );
        assert!(f.due(0, on1(), Some(&mem), SETTLED_NS + GAP_NS).is_some());
        // Held off (a thread's mask is the program's own now): rested anew.
        let t = SETTLED_NS + GAP_NS;
        f.hold_off(0, t);
        assert_eq!(f.due(0, on1(), Some(&mem), t + GAP_NS / 2), None, "held off");
        assert!(f.due(0, on1(), Some(&mem), t + GAP_NS).is_some());
        // The kernel's to place: never followed.
        assert_eq!(f.due(1, None, Some(&mem), 10 * GAP_NS), None);
        assert!(Follower::new(vec![(0, CpuSet::parse_list("0-3").unwrap())]).is_none());
    }

    #[test]
    fn node_masks_are_the_kernels_bitmaps() {
        assert_eq!(mask(&[0]), vec![1]);
        assert_eq!(mask(&[1, 3]), vec![0b1010]);
        assert_eq!(mask(&[64]), vec![0, 1]);
    }
}
