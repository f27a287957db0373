//! Progress-only turns: for a policy that decides from heartbeats alone
//! (PALM), most turns read only the heartbeat files, not each thread's /proc
//! files. On this project's 2-CPU VM a full observation of a 3-thread
//! program costs about 55 µs and a heartbeat read about 1 µs; a whole turn
//! of herd's loop, waking included, then costs about 40 µs instead of 80,
//! which under the 5% cap on the loop's CPU is a 0.8 ms period instead of
//! 1.6 ms, and S4's benchmark phases last a few milliseconds.

use herd_engine::Clock;

use super::LiveWorld;

/// A progress-only run still takes a full snapshot (new threads show up,
/// and the trace keeps CPU times) once the last is this old. It was 10 ms
/// (and 8 cheap turns): with PALM's plan on the 2 ms barrier benchmark
/// (`scripts/s4-barrier.py --total 4e6 --phases 300`, three alternations
/// against that build) 100 ms gave 1.084x, 1.096x and 1.090x thread
/// reduction's time against 1.106x, 1.111x and 1.115x: a full turn costs
/// more than its 55 µs of /proc, since it also pays for the loop's
/// bookkeeping of everything it saw. A program's exit and its threads'
/// exits (heartbeats) are seen at once either way.
const FULL_EVERY_NS: u64 = 100_000_000;

impl LiveWorld {
    /// Refreshes `self.snapshot` as a progress-only snapshot and returns
    /// true, or returns false when a full one is due: none yet, the last
    /// one old enough ([`FULL_EVERY_NS`]), a program that ended, or no
    /// heartbeats to read (progress then comes from CPU time, which needs
    /// /proc).
    pub(super) fn progress_turn(&mut self) -> bool {
        self.reap();
        let now_ns = self.now_ns();
        let age_ns = now_ns.saturating_sub(self.full_ns);
        if self.full_ns == 0 || age_ns >= FULL_EVERY_NS {
            return false;
        }
        let alive: Vec<bool> = self.programs.iter().map(|p| p.alive()).collect();
        if alive != self.jobs_alive {
            return false;
        }
        let mut beats = Vec::with_capacity(self.programs.len());
        for (job, p) in self.programs.iter().enumerate() {
            beats.push(if p.alive() {
                self.heartbeats.read(job, p.pid, now_ns)
            } else {
                None
            });
        }
        if beats.iter().all(Option::is_none) {
            return false;
        }
        let snapshot = &mut self.snapshot;
        snapshot.now_ns = now_ns;
        // Its observations cover no time: the next full snapshot covers it.
        snapshot.period_ns = 0;
        snapshot.progress_only = true;
        snapshot.system = Default::default();
        for t in &mut snapshot.tasks {
            t.obs = Default::default();
            // Sorted by thread id, as in a full observation.
            t.heartbeats = beats.get(t.job as usize).and_then(Option::as_ref).and_then(|b| {
                b.binary_search_by_key(&(t.id as i32), |&(tid, _)| tid)
                    .ok()
                    .map(|i| b[i].1)
            });
        }
        if let Some(b) = self.budget.as_mut() {
            snapshot.budget_cores = b.poll(now_ns);
        }
        true
    }
}
