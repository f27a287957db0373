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
//! `local` model, reached in steps. It is the one path for every job, those
//! confined by a cgroup cpuset too: their `cpuset.mems` is left as the
//! parent's (`Cgroups::set_cpus` says why), so the kernel moves no page
//! when herd moves their CPUs.
//!
//! When a move is due, and for which jobs (those herd pinned, and those it
//! pinned and then handed to the kernel), is the rule in
//! `herd_engine::memory_follow`, which the simulator follows too; this
//! module reads where the threads run and makes the moves. What it does
//! not do: spread a job's memory over the nodes it runs on (which pages a
//! thread uses is not visible without sampling its accesses; the kernel's
//! NUMA balancing does that). A job's memory is its program's and every
//! process it forked.
//!
//! Written on the raw syscall rather than libnuma: it is one call whose
//! arguments are two node bitmasks, and libnuma would add a C library to
//! every install for it.

use std::fs;
use std::path::Path;
use std::sync::mpsc;

use herd_engine::memory_follow::{Due, Rule, RunsOn};
use herd_policy::JobView;
use herd_topo::CpuSet;

use super::forked;
use crate::procfs;

/// Memory on other nodes smaller than this is left where it is: the move
/// would cost more than the remote accesses it saves.
pub const MIN_KB: u64 = 4 * 1024;

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

/// What became of a move, reported by the thread that made it.
#[derive(Debug)]
pub struct Moved {
    /// The job.
    pub job: usize,
    /// Pages the kernel could not move (summed over the processes), or the
    /// error of the first process it refused.
    pub result: Result<u64, std::io::Error>,
}

/// The follower: the rule's state (which jobs are settled), and the one
/// move in flight.
#[derive(Debug)]
pub struct Follower {
    /// When each job's memory is due to move.
    pub rule: Rule,
    /// The move in flight, on a thread of its own: `migrate_pages` runs as
    /// long as copying the pages takes (a second per few GB), and herd's
    /// loop must keep its period meanwhile.
    in_flight: Option<(usize, mpsc::Receiver<Moved>)>,
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
        Some(Follower {
            rule: Rule::new(nodes, MIN_KB)?,
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
        let Some((_, rx)) = &self.in_flight else { return };
        match rx.try_recv() {
            Ok(done) => {
                self.count(done);
                self.in_flight = None;
            }
            Err(mpsc::TryRecvError::Empty) => {}
            Err(mpsc::TryRecvError::Disconnected) => self.in_flight = None,
        }
    }

    /// The job whose memory is moving, if a move is under way.
    pub fn moving(&self) -> Option<usize> {
        self.in_flight.as_ref().map(|(job, _)| *job)
    }

    /// [`Rule::due`], free while no move is in flight.
    pub fn due(&mut self, job: usize, on: &RunsOn, kb: Option<&[(u32, u64)]>, now_ns: u64) -> Option<Due> {
        let free = self.in_flight.is_none();
        self.rule.due(job, on, kb, now_ns, free)
    }

    /// Leaves job `job`'s memory where it is until the rule's gap from
    /// now, as if it had just moved: one of its threads no longer has the
    /// mask herd set (the program set its own), so where herd pinned it is
    /// not where it runs.
    pub fn hold_off(&mut self, job: usize, now_ns: u64) {
        self.rule.rest(job, now_ns);
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
            self.in_flight = Some((job, rx));
            self.moves += 1;
            self.moved_kb += mv.kb;
        } else {
            self.refused += 1;
        }
        self.rule.rest(job, now_ns);
    }

    /// Waits for the move in flight, if any (at the end of a run, so the
    /// summary counts it and no thread outlives herd's loop).
    pub fn finish(&mut self) {
        if let Some(done) = self.in_flight.take().and_then(|(_, rx)| rx.recv().ok()) {
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

/// The NUMA nodes under `sys/devices/system/node` and their CPUs.
pub(crate) fn numa_nodes(sys: &Path) -> Vec<(u32, CpuSet)> {
    let Ok(dir) = fs::read_dir(sys.join("devices/system/node")) else {
        return Vec::new();
    };
    let mut nodes: Vec<(u32, CpuSet)> = dir
        .flatten()
        .filter_map(|e| {
            let id = e.file_name().to_str()?.strip_prefix("node")?.parse().ok()?;
            let cpus = CpuSet::parse_list(fs::read_to_string(e.path().join("cpulist")).ok()?.trim()).ok()?;
            Some((id, cpus))
        })
        .collect();
    nodes.sort_by_key(|(id, _)| *id);
    nodes
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

/// The least time between two readings of one program's memory.
pub const READ_EVERY_NS: u64 = 1_000_000_000;

/// A reading of `/proc/<pid>/numa_maps` walks every page the program has
/// mapped, on herd's loop: about 10 ms a GiB on this VM (1 GiB 10.1-10.9
/// ms, 4 GiB 36.0-41.4 ms; `scripts/vm/numa-read-cost.py --no-herd`).
/// Read every second, a 64 GiB program would
/// take most of a CPU and stall every turn. So a program's next reading
/// waits this many times as long as its last one took: reading stays
/// within 1% of a CPU, and such a program is read about once a minute.
/// Where memory lies changes slowly (first touch, and herd's own moves).
pub const READ_COST_FACTOR: u64 = 100;

/// When a program whose memory was read at `now_ns`, in `took_ns`, is next
/// read.
pub(super) fn next_read_ns(now_ns: u64, took_ns: u64) -> u64 {
    now_ns.saturating_add(READ_EVERY_NS.max(took_ns.saturating_mul(READ_COST_FACTOR)))
}

/// Programs' memory per NUMA node (kB by OS node), as last read.
pub(super) struct NumaMemory {
    /// Each program's memory as last read.
    pub(super) kb: Vec<Option<Vec<(u32, u64)>>>,
    /// When each program's memory is next read (ns into the run).
    next_ns: Vec<u64>,
    /// Whether each program's reading was taken with no move of its memory
    /// under way or begun since: the follower moves a job's memory only on
    /// such a reading, not on one from before its last move that a
    /// program read seldom still holds.
    pub(super) settled: Vec<bool>,
}

impl NumaMemory {
    /// Nothing read yet of `programs` programs; each is read at once.
    pub(super) fn new(programs: usize) -> NumaMemory {
        NumaMemory {
            kb: vec![None; programs],
            next_ns: vec![0; programs],
            settled: vec![false; programs],
        }
    }
}

impl super::LiveWorld {
    /// Reads where each program's memory is when due ([`next_read_ns`]),
    /// into its job view. `rebuilt`: the views are new and hold no reading
    /// yet.
    pub(super) fn refresh_numa_memory(&mut self, now_ns: u64, jobs: &mut [JobView], rebuilt: bool) {
        let Some(m) = &mut self.numa_memory else {
            return;
        };
        let moving = self.follower.as_ref().and_then(Follower::moving);
        let mut read = false;
        for (j, p) in self.programs.iter().enumerate().filter(|(_, p)| p.alive()) {
            if now_ns < m.next_ns[j] {
                continue;
            }
            let started = std::time::Instant::now();
            // The program and every process it forked: a shell's memory
            // alone said nothing of the program it started.
            m.kb[j] = procfs::numa_memory_kb(&self.proc_root, p.pid);
            for &pid in forked(&self.family, j) {
                if let Some(more) = procfs::numa_memory_kb(&self.proc_root, pid) {
                    procfs::add_node_kb(m.kb[j].get_or_insert_with(Vec::new), &more);
                }
            }
            let took_ns = started.elapsed().as_nanos() as u64;
            m.next_ns[j] = next_read_ns(now_ns, took_ns);
            self.stats.memory_reads += 1;
            self.stats.memory_read_ns += took_ns;
            m.settled[j] = moving != Some(j);
            read = true;
        }
        if !(read || rebuilt) {
            return;
        }
        for v in jobs.iter_mut() {
            v.memory_kb = m.kb.get(v.id as usize).cloned().flatten();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use herd_engine::memory_follow::{GAP_NS, SETTLED_NS};

    /// A program is read every second while reading it is cheap; one
    /// whose reading took long (numa_maps of a large program) waits a
    /// hundred times as long, so reading stays within 1% of a CPU.
    #[test]
    fn a_dear_reading_is_made_seldom() {
        let ms = 1_000_000;
        assert_eq!(next_read_ns(5_000 * ms, 2 * ms), 6_000 * ms);
        assert_eq!(next_read_ns(5_000 * ms, 10 * ms), 6_000 * ms);
        assert_eq!(
            next_read_ns(5_000 * ms, 600 * ms),
            65_000 * ms,
            "64 GiB: once a minute"
        );
        assert_eq!(next_read_ns(u64::MAX - 1, u64::MAX), u64::MAX, "no overflow");
    }

    #[test]
    fn a_job_must_settle_and_rest_between_moves() {
        let nodes = vec![
            (0, CpuSet::parse_list("0-3").unwrap()),
            (1, CpuSet::parse_list("4-7").unwrap()),
        ];
        let mut f = Follower::new(nodes).unwrap();
        let mem = [(0, 100_000), (1, 0)];
        let on1 = RunsOn::Pinned(CpuSet::parse_list("4").unwrap());
        assert_eq!(f.due(0, &on1, Some(&mem), 0), None, "just placed");
        let due = f.due(0, &on1, Some(&mem), SETTLED_NS).expect("settled");
        assert_eq!((due.from, due.to, due.kb), (vec![0], vec![1], 100_000));
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
        assert_eq!(f.moving(), Some(0), "job 0's move under way");
        f.finish();
        assert_eq!(f.moving(), None);
        assert_eq!((f.moves, f.refused), (1, 0), "a process gone is not a refusal");
        assert_eq!(
            f.due(0, &on1, Some(&mem), SETTLED_NS + GAP_NS / 2),
            None,
            "resting"
        );
        assert!(f.due(0, &on1, Some(&mem), SETTLED_NS + GAP_NS).is_some());
        // Held off (a thread's mask is the program's own now): rested anew,
        // twice as long, for the memory stayed where it was after the
        // first move.
        let t = SETTLED_NS + GAP_NS;
        f.hold_off(0, t);
        assert_eq!(f.due(0, &on1, Some(&mem), t + GAP_NS), None, "held off");
        assert!(f.due(0, &on1, Some(&mem), t + 2 * GAP_NS).is_some());
        // Too little away: not worth a move.
        assert_eq!(f.due(1, &on1, Some(&[(0, 2_000)]), 10 * GAP_NS), None);
        assert!(Follower::new(vec![(0, CpuSet::parse_list("0-3").unwrap())]).is_none());
    }

    #[test]
    fn node_masks_are_the_kernels_bitmaps() {
        assert_eq!(mask(&[0]), vec![1]);
        assert_eq!(mask(&[1, 3]), vec![0b1010]);
        assert_eq!(mask(&[64]), vec![0, 1]);
    }
}
