//! What a live run did, for its summary: placements, migrations, pauses,
//! memory moved, and what the machine could not give.

/// What herd did, for the run summary.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct LiveStats {
    /// Affinity changes applied.
    pub placements: u64,
    /// Whether this run warned that another herd holds CPUs it took.
    pub overlap_warned: bool,
    /// Affinity changes the kernel refused (other than vanished threads).
    pub failed_placements: u64,
    /// Threads and processes born on a pin herd gave their creator and
    /// given their program's mask at birth (`births`).
    pub births_freed: u64,
    /// Migrations seen for managed threads: periods in which a thread's last
    /// CPU changed (a lower bound on the kernel's count).
    pub migrations: u64,
    /// Times a program was stopped.
    pub pauses: u64,
    /// Time turns waited for the programs they paused to stop before
    /// letting others run (ns): the CPUs those leave may idle meanwhile.
    pub pause_wait_ns: u64,
    /// Lane changes applied (a thread's SCHED_FIFO priority set or reset).
    pub lane_changes: u64,
    /// Lane changes ignored because herd's loop does not run under
    /// SCHED_FIFO (`--realtime`) above them.
    pub lanes_ignored: u64,
    /// Most threads seen at once.
    pub max_threads: usize,
    /// Thread samples carried over from the last period because the thread
    /// slept throughout (no `stat` or counter read).
    pub threads_kept: u64,
    /// Of those, samples kept without reading the thread's `schedstat`
    /// either: taskstats said none of its process's threads ran.
    pub threads_unread: u64,
    /// Thread samples taken from herd's eBPF program (`sched_bpf`) rather
    /// than the thread's `/proc` files.
    pub threads_from_kernel: u64,
    /// Threads that went without some perf counter the machine has, for
    /// want of open-file descriptors (their jobs learn from the others).
    pub uncounted_threads: u64,
    /// Threads whose `/proc` files were read by path each period, for want
    /// of descriptors (seen all the same, at more cost per read).
    pub uncached_threads: u64,
    /// Threads the kernel refused counters to while others had them.
    pub refused_threads: u64,
    /// Threads judged to switch too often for counting to be cheap
    /// (`counters::SWITCHES_PER_S_LIMIT`): none are opened on them (on a
    /// machine without hardware counters none are opened at all).
    pub switchy_threads: u64,
    /// Readings of where a program's memory lies (`numa_maps`).
    pub memory_reads: u64,
    /// Time those readings took on herd's loop (ns).
    pub memory_read_ns: u64,
    /// Times a job's memory was moved onto the nodes it runs on
    /// (`--memory-follow`), and the memory that was away when they started.
    pub memory_moves: u64,
    /// kB away from the jobs' nodes when those moves started.
    pub memory_moved_kb: u64,
    /// Pages the kernel could not move.
    pub memory_pages_left: u64,
    /// Moves the kernel refused.
    pub memory_moves_refused: u64,
    /// Moves not made because a program had set its own threads' masks.
    pub memory_held_off: u64,
    /// Energy the machine used while herd watched (RAPL), where it can tell.
    pub energy_j: Option<f64>,
    /// Bytes the managed programs moved to and from memory (resctrl MBM, else
    /// LLC misses x 64 B), where the machine can tell.
    pub mem_bytes: Option<u64>,
}

impl LiveStats {
    /// The summary's words on memory placement: how often herd read it,
    /// and memory that followed placement, if any moved.
    pub fn memory_followed(&self) -> Option<String> {
        let read = (self.memory_reads > 0).then(|| {
            format!(
                "memory placement read {} time(s) ({:.1} ms)",
                self.memory_reads,
                self.memory_read_ns as f64 / 1e6
            )
        });
        let held = (self.memory_held_off > 0).then(|| {
            format!(
                "memory left where the program put it {} time(s): it had set its own threads' CPUs",
                self.memory_held_off
            )
        });
        let moved = (self.memory_moves > 0).then(|| {
            format!(
                "memory followed placement {} time(s) ({:.1} MB was on other nodes, {} pages stayed)",
                self.memory_moves,
                self.memory_moved_kb as f64 / 1024.0,
                self.memory_pages_left
            )
        });
        let said: Vec<String> = [read, moved, held].into_iter().flatten().collect();
        (!said.is_empty()).then(|| said.join("; "))
    }

    /// What herd could not do as it would on a machine with room for it,
    /// one sentence each: the run summary's warnings and `--json`'s
    /// `degraded` (empty when nothing was).
    pub fn degradations(&self) -> Vec<String> {
        let mut out = Vec::new();
        // The limit matters to the shortfalls of descriptors only.
        let limit = || crate::fds::limits().map_or(String::from("?"), |(soft, _)| soft.to_string());
        if self.uncounted_threads > 0 {
            out.push(format!(
                "{} thread(s) went without perf counters for want of open-file descriptors (`ulimit -n`); \
                 their jobs learned from the threads that had them (open-file limit {})",
                self.uncounted_threads,
                limit()
            ));
        }
        if self.refused_threads > 0 {
            out.push(format!(
                "{} thread(s) were refused perf counters the others had; their jobs learned from the threads \
                 that had them",
                self.refused_threads
            ));
        }
        if self.switchy_threads > 0 {
            out.push(format!(
                "{} thread(s) were put on a CPU over {} times a second: herd opens no perf counter on such a \
                 thread (counting would cost it every switch); their jobs learned from CPU time and the other threads",
                self.switchy_threads,
                super::counters::SWITCHES_PER_S_LIMIT
            ));
        }
        if self.memory_moves_refused > 0 {
            out.push(format!(
                "{} move(s) of a job's memory onto its nodes were refused by the kernel; that memory stayed remote",
                self.memory_moves_refused
            ));
        }
        if self.uncached_threads > 0 {
            out.push(format!(
                "{} thread(s) had their /proc files read by path each period for want of descriptors \
                 (open-file limit {})",
                self.uncached_threads,
                limit()
            ));
        }
        out
    }
}
