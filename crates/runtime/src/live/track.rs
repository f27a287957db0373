//! What a live world keeps of each thread it watches between turns.

use herd_topo::CpuSet;

use super::counters;
use crate::procfs::{self, ThreadSample};

/// A watched thread: its open files and counters, its last sample, and
/// the masks herd found and gave it.
#[derive(Debug)]
pub(super) struct Track {
    pub(super) job: usize,
    pub(super) rank: u32,
    pub(super) files: procfs::ThreadFiles,
    /// perf_event counters on this thread and their last values.
    pub(super) counters: counters::Counters,
    /// Where its instructions were (S1's phases), where sampled.
    pub(super) sampler: Option<crate::ipsample::IpSampler>,
    pub(super) last: ThreadSample,
    pub(super) original: Option<CpuSet>,
    pub(super) placed: Option<CpuSet>,
    /// Its lane as herd last set it (`Fair`: herd never touched its policy).
    pub(super) lane: herd_policy::Lane,
    /// The last turn (`LiveWorld::turns`) that found it alive.
    pub(super) seen_turn: u64,
    /// Its process.
    pub(super) pid: i32,
    /// Its count of times on a CPU and the time it was taken, for
    /// [`counters::judge_switches`]; (0, 0) until its first sample.
    pub(super) switch_mark: (u64, u64),
    /// Its counters are opened once its switches are first judged, and
    /// only if it does not switch too often: a perf event is switched
    /// with its thread on every context switch
    /// ([`counters::SWITCHES_PER_S_LIMIT`]), and opened at first sight a
    /// switch-heavy thread paid that for a whole period before its first
    /// judgement dropped them.
    pub(super) counters_due: bool,
    /// Its schedstat times, read this turn by the look for forked
    /// processes (`family`) and not read again.
    pub(super) pre_times: Option<procfs::Times>,
    /// Whether it wanted a CPU over the last period
    /// ([`herd_policy::wants_cpu_over`], numa:model's rule). Memory
    /// follows the threads that do; a sleeping one the kernel places (a
    /// shell waiting for the program it started) runs anywhere without
    /// making the job's nodes "any".
    pub(super) busy: bool,
}

impl Track {
    /// The descriptors it keeps open.
    pub(super) fn descriptors(&self) -> usize {
        self.files.descriptors() + self.counters.len() + usize::from(self.sampler.is_some())
    }
}
