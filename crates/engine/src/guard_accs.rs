//! The guard's accounts of what each job did during a span (see `guard`).

use herd_policy::JobId;

/// What one job did during a span.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct JobAcc {
    pub(crate) cpu_ns: u64,
    pub(crate) instructions: u64,
    /// Some observation of the job's had no instruction count.
    pub(crate) uncounted: bool,
    pub(crate) beats: u64,
    pub(crate) has_beats: bool,
    /// The most of its tasks seen counting heartbeats in one snapshot:
    /// each counts whole beats, so each may be up to one beat short.
    pub(crate) beaters: u64,
    pub(crate) present_ns: u64,
    /// Some task of the job's was seen paused during the span.
    pub(crate) paused: bool,
    /// Time in a kernel span with a task away from the job's memory's node
    /// because the guard's release had no room for it there (`guard`).
    pub(crate) away_ns: u64,
}

/// What one run of a job's tasks in one snapshot adds to the job's
/// account: the part of a [`JobAcc`] a snapshot's tasks count. Its own
/// type, not a `JobAcc`: one is made and kept per run (250 a turn at a
/// thousand tasks), and a whole account was three times its size.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct RunSum {
    pub(crate) cpu_ns: u64,
    pub(crate) instructions: u64,
    /// Some task of the run had no instruction count.
    pub(crate) uncounted: bool,
    /// Some task of the run was paused.
    pub(crate) paused: bool,
}

impl JobAcc {
    /// Adds what `add` counted (its CPU time, instructions and flags).
    pub(crate) fn absorb(&mut self, add: &RunSum) {
        self.cpu_ns += add.cpu_ns;
        self.instructions += add.instructions;
        self.uncounted |= add.uncounted;
        self.paused |= add.paused;
    }

    /// [`JobAcc::absorb`] `times` times over: sums of integers, so one
    /// product adds what as many additions did.
    pub(crate) fn absorb_times(&mut self, add: &RunSum, times: u64) {
        self.cpu_ns += add.cpu_ns * times;
        self.instructions += add.instructions * times;
        self.uncounted |= add.uncounted;
        self.paused |= add.paused;
    }
}

/// What the last full snapshot added to each job's account, run by run of
/// its tasks: a snapshot that repeats it (`Snapshot::repeats_last`) adds
/// the same, without a pass over every task. Sums of integers, so adding
/// a run's sum gives what adding its tasks one by one gave.
#[derive(Debug, Clone, Default)]
pub(crate) struct LastSums {
    pub(crate) runs: Vec<(JobId, RunSum)>,
    /// Whether `runs` is the last snapshot's (none had heartbeats, which
    /// are counted per task).
    pub(crate) valid: bool,
    /// Where each run's account, then each of the last snapshot's jobs'
    /// accounts (those it has), lie in the span's [`JobAccs`] while its
    /// layout is `layout` ([`JobAccs::layout`]; 0: none): a repeated
    /// snapshot then adds to them without a look-up per job (two per job a
    /// turn were a sixth of the guard's cost at 250 jobs).
    pub(crate) run_at: Vec<usize>,
    pub(crate) job_at: Vec<usize>,
    /// The turn before's `job_at`: where to look first for each job.
    pub(crate) job_last: Vec<usize>,
    pub(crate) layout: u64,
    /// How many tasks each of `runs` has, and the sensor's name for the
    /// list they were found in (`Snapshot::tasks_epoch`; 0: none) with its
    /// length (a name that came with another length names nothing): a
    /// full snapshot of the same list has the same runs.
    pub(crate) run_len: Vec<usize>,
    pub(crate) epoch: (u64, usize),
    /// Repeated snapshots taken in but not yet added (each would add
    /// `runs` to their places again), and the time they covered: added at
    /// once ([`LastSums::settle`]) before the accounts are read or their
    /// places may move. Adding them turn by turn, 250 runs and 250 jobs a
    /// turn, was a fortieth of amp:ff's simulated minute.
    pub(crate) held: u64,
    pub(crate) held_ns: u64,
}

impl LastSums {
    /// Adds the repeated snapshots held back to `accs`, the accounts the
    /// places in `run_at` and `job_at` are of.
    pub(crate) fn settle(&mut self, accs: &mut JobAccs) {
        if self.held == 0 {
            return;
        }
        for (&i, (_, add)) in self.run_at.iter().zip(&self.runs) {
            accs.jobs[i].1.absorb_times(add, self.held);
        }
        for &i in &self.job_at {
            accs.jobs[i].1.present_ns += self.held_ns;
        }
        (self.held, self.held_ns) = (0, 0);
    }
}

/// Each job's accounts in job order (what compare sums runs in that order),
/// in a vector: a snapshot's tasks come job by job, so the next lookup is
/// almost always the entry after the last, found without a search (a map's
/// search per job per turn was a fifth of a simulated turn at 250 jobs).
#[derive(Debug, Clone)]
pub(crate) struct JobAccs {
    pub(crate) jobs: Vec<(JobId, JobAcc)>,
    /// Where the last lookup ended.
    cursor: usize,
    /// A name for where each job's account lies: new for every `JobAccs`
    /// and at every insert (which moves the accounts after it), never 0
    /// and never given twice in this process.
    layout: u64,
}

impl Default for JobAccs {
    fn default() -> Self {
        JobAccs {
            jobs: Vec::new(),
            cursor: 0,
            layout: next_layout(),
        }
    }
}

fn next_layout() -> u64 {
    static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(1);
    NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
}

impl JobAccs {
    fn position(&mut self, job: JobId) -> Result<usize, usize> {
        let near = [self.cursor, self.cursor + 1];
        let found = near
            .into_iter()
            .find(|&i| self.jobs.get(i).is_some_and(|(j, _)| *j == job))
            .map_or_else(|| self.jobs.binary_search_by_key(&job, |(j, _)| *j), Ok);
        if let Ok(i) = found {
            self.cursor = i;
        }
        found
    }

    /// Job `job`'s account, opened empty if it has none.
    pub(crate) fn entry(&mut self, job: JobId) -> &mut JobAcc {
        let i = self.slot(job);
        &mut self.jobs[i].1
    }

    /// Where job `job`'s account lies, opened empty if it has none.
    pub(crate) fn slot(&mut self, job: JobId) -> usize {
        match self.position(job) {
            Ok(i) => i,
            Err(i) => {
                self.jobs.insert(i, (job, JobAcc::default()));
                self.cursor = i;
                self.layout = next_layout();
                i
            }
        }
    }

    /// Where the `k`th run of a snapshot's tasks, of job `job`, has its
    /// account: where `run_at[k]` says while that is still `job`'s (the
    /// same task list as the turn before, no account opened before it),
    /// else found or opened and noted there. One comparison a run, not a
    /// look-up: those were a seventh of the guard's accounts in amp:ff's
    /// simulated minute at 250 jobs (the scale bench).
    pub(crate) fn slot_noted(&mut self, run_at: &mut Vec<usize>, k: usize, job: JobId) -> usize {
        if let Some(&i) = run_at.get(k)
            && self.holds(i, job)
        {
            return i;
        }
        let i = self.slot(job);
        match run_at.get_mut(k) {
            Some(at) => *at = i,
            None => run_at.push(i),
        }
        i
    }

    /// Whether place `i` holds job `job`'s account (a place noted on an
    /// earlier turn holds it until an account is opened before it).
    pub(crate) fn holds(&self, i: usize, job: JobId) -> bool {
        self.jobs.get(i).is_some_and(|(j, _)| *j == job)
    }

    /// Where job `job`'s account lies, if it has one.
    pub(crate) fn find(&mut self, job: JobId) -> Option<usize> {
        self.position(job).ok()
    }

    /// The name of where each account lies now: equal names, equal places.
    pub(crate) fn layout(&self) -> u64 {
        self.layout
    }

    pub(crate) fn get(&self, job: JobId) -> Option<&JobAcc> {
        let i = self.jobs.binary_search_by_key(&job, |(j, _)| *j).ok()?;
        Some(&self.jobs[i].1)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The accounts stay in job order and each lookup finds its own job,
    /// whatever order the jobs come in.
    #[test]
    fn job_accounts_stay_in_job_order() {
        let mut accs = JobAccs::default();
        let order = [5u32, 6, 7, 2, 9, 6, 1, 5, 5, 8, 3, 7];
        for (n, &job) in order.iter().enumerate() {
            accs.entry(job).cpu_ns += n as u64 + 1;
        }
        let jobs: Vec<u32> = accs.jobs.iter().map(|(j, _)| *j).collect();
        assert_eq!(jobs, [1, 2, 3, 5, 6, 7, 8, 9]);
        for job in 0..11u32 {
            let want: u64 = order
                .iter()
                .enumerate()
                .filter(|(_, j)| **j == job)
                .map(|(n, _)| n as u64 + 1)
                .sum();
            assert_eq!(
                accs.get(job).map(|a| a.cpu_ns),
                (want > 0).then_some(want),
                "job {job}"
            );
            assert_eq!(accs.find(job).is_some(), want > 0);
        }
    }

    /// A noted place is taken only while it is still its job's: turns of
    /// runs that repeat, gain a job before the others (every account after
    /// it moves), lose one, or come out of order each land every run's
    /// sum in its own job's account, as a look-up by job does.
    #[test]
    fn noted_places_are_taken_only_while_they_are_their_jobs() {
        let turns: [&[u32]; 6] = [
            &[3, 5, 8, 9],
            &[3, 5, 8, 9],
            &[1, 3, 5, 8, 9],
            &[3, 8, 9],
            &[9, 3, 8, 1],
            &[1, 2, 3, 4, 5, 6, 7, 8, 9, 10],
        ];
        let (mut noted, mut looked_up) = (JobAccs::default(), JobAccs::default());
        let mut run_at = Vec::new();
        for (turn, runs) in turns.iter().enumerate() {
            for (k, &job) in runs.iter().enumerate() {
                let at = noted.slot_noted(&mut run_at, k, job);
                assert_eq!(noted.jobs[at].0, job, "turn {turn}, run {k}");
                assert_eq!(run_at[k], at, "turn {turn}, run {k}: the place is noted");
                noted.jobs[at].1.cpu_ns += 1;
                looked_up.entry(job).cpu_ns += 1;
            }
            run_at.truncate(runs.len());
        }
        let sums = |a: &JobAccs| a.jobs.iter().map(|(j, acc)| (*j, acc.cpu_ns)).collect::<Vec<_>>();
        assert_eq!(sums(&noted), sums(&looked_up));
    }
}
