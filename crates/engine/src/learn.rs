//! The loop's learning step (S1): each period's observations become one
//! slice per job, judged valid or not by S1's low-contention states, and
//! learned into the job's program profile; the policy sees the result as
//! [`Knowledge`].
//!
//! Profiles are keyed by program (executable and argument signature), so
//! what one run learns, the next run of the same program starts from. The
//! caller loads them from the profile store before a run and stores
//! [`Learning::into_profiles`] after it.

use std::collections::BTreeMap;

use herd_model::params::LINE_BYTES;
use herd_policy::{JobId, Knowledge, Snapshot};
use herd_profile::{LowContention, ProgramProfile, RunLearner, Slice, Validity};
use rustc_hash::{FxHashMap, FxHashSet};

/// The place of `program`'s profile in `profiles`, a new empty profile's
/// when it has none.
fn slot_of(slots: &mut BTreeMap<String, usize>, profiles: &mut Vec<ProgramProfile>, program: &str) -> usize {
    if let Some(&slot) = slots.get(program) {
        return slot;
    }
    slots.insert(program.to_string(), profiles.len());
    profiles.push(ProgramProfile::default());
    profiles.len() - 1
}

/// One present job's learner.
#[derive(Debug)]
struct Track {
    program: String,
    /// Its program's place in [`Learning::profiles`].
    slot: usize,
    learner: RunLearner,
}

/// The present jobs' learners in job order: a vector, not a map, since
/// every period walks them all beside the policy's view of each job (the
/// map's walks, that one and another to see that the jobs are the same,
/// cost 1.7% of bw:iabw's simulated minute at 250 jobs); a job comes or
/// goes a few times a minute.
#[derive(Debug, Default)]
struct Tracks(Vec<(JobId, Track)>);

impl Tracks {
    fn len(&self) -> usize {
        self.0.len()
    }

    fn ids(&self) -> impl Iterator<Item = JobId> + '_ {
        self.0.iter().map(|(id, _)| *id)
    }

    /// Where job `id`'s track is, or would go.
    fn find(&self, id: JobId) -> Result<usize, usize> {
        self.0.binary_search_by_key(&id, |(j, _)| *j)
    }

    fn get_mut(&mut self, id: JobId) -> Option<&mut Track> {
        let at = self.find(id).ok()?;
        Some(&mut self.0[at].1)
    }

    /// Job `id`'s new track, at `at`: where [`Tracks::find`] said it
    /// would go.
    fn insert_at(&mut self, at: usize, id: JobId, track: Track) {
        self.0.insert(at, (id, track));
    }

    /// The tracks in job order.
    fn iter_mut(&mut self) -> impl Iterator<Item = &mut (JobId, Track)> + '_ {
        self.0.iter_mut()
    }

    fn remove(&mut self, id: JobId) -> Option<Track> {
        let at = self.find(id).ok()?;
        Some(self.0.remove(at).1)
    }
}

/// Learning over one run. See the module docs.
#[derive(Debug)]
pub struct Learning {
    /// Every program's profile, at the place `slots` gives by name: a
    /// job's track keeps its program's place, so each period's look-up per
    /// job is an index, not a search by name (that search, its string
    /// comparisons, was a sixth of bw:iabw's simulated time at 1,000 jobs).
    profiles: Vec<ProgramProfile>,
    slots: BTreeMap<String, usize>,
    tracks: Tracks,
    knowledge: Knowledge,
    thresholds: LowContention,
    /// Per-job slices of the current period, reused across periods to
    /// avoid allocation; in job order unless `indexed` (a snapshot whose
    /// tasks come in job order, as the simulator's do), else where each
    /// job's is in `index`: a map filled only when needed (its 250 inserts
    /// and look-ups a period were a fiftieth of bw:iabw's simulated time
    /// at 1,000 tasks). Live tasks come in thread id order, which mixes
    /// jobs that start threads at different times.
    slices: Vec<(JobId, Option<Slice>)>,
    index: FxHashMap<JobId, usize>,
    indexed: bool,
    /// The snapshot `slices` were summed from: its time and its task
    /// list's name. A snapshot that repeats that one
    /// ([`Snapshot::repeats_last`]) has the same slices, so they are kept,
    /// not summed again (the pass over every task was a twelfth of
    /// bw:iabw's simulated time, and half the snapshots repeat).
    sliced_from: Option<(u64, u64)>,
    /// How many of `slices` are memory-intensive, counted when they were
    /// summed: kept with them on a repeat (the count works out each job's
    /// traffic rate, a division, every period).
    intensive: usize,
    /// Every job seen's program, kept after the job is gone: a policy's
    /// findings come at the end of the run.
    programs: BTreeMap<JobId, String>,
    /// Everything this run learned in order, per program, with the
    /// profiles as loaded: another run that stored a program's profile
    /// meanwhile is not overwritten; this run's learning is replayed onto
    /// its profile instead ([`Learned::rebased`]).
    journal: Journal,
}

/// One step of learning, as [`Learning`] took it.
#[derive(Debug, Clone, Copy)]
enum Step {
    /// A slice the policy placed, with S1's validity; `None`: one the
    /// guard gave the kernel, followed but not learned.
    Observe(JobId, Slice, Option<Validity>),
    Finish(JobId),
    Found(herd_policy::Finding),
}

/// The steps of one run, per program, up to [`JOURNAL_STEPS`] in all.
#[derive(Debug, Default)]
struct Journal {
    /// Whether steps are kept at all (live runs; the simulator stores its
    /// profiles one run after another and needs none).
    on: bool,
    /// The profiles as the run loaded them (kept only when `on`).
    loaded: BTreeMap<String, ProgramProfile>,
    steps: BTreeMap<String, Vec<Step>>,
    len: usize,
    /// Programs whose steps did not all fit.
    overflowed: FxHashSet<String>,
}

impl Journal {
    /// Keeps `step` of `program`, when steps are kept: the step is made
    /// only then (a slice copied into a step and dropped, every job every
    /// period, was a hundredth of bw:iabw's simulated time).
    fn push(&mut self, program: &str, step: impl FnOnce() -> Step) {
        if !self.on {
            return;
        }
        let step = step();
        if self.len >= JOURNAL_STEPS {
            self.overflowed.insert(program.to_string());
            return;
        }
        self.len += 1;
        match self.steps.get_mut(program) {
            Some(v) => v.push(step),
            None => {
                self.steps.insert(program.to_string(), vec![step]);
            }
        }
    }
}

/// The most learning steps a run keeps for replaying (one per job per
/// period, ~120 bytes each, so ~30 MB): one program for seven hours at
/// 100 ms periods, or 200 for two minutes. A program past it stores this
/// run's profile as it is, over any stored meanwhile.
const JOURNAL_STEPS: usize = 250_000;

/// What a finished run learned, ready to store.
#[derive(Debug)]
pub struct Learned {
    /// Each program's profile as this run leaves it.
    pub profiles: BTreeMap<String, ProgramProfile>,
    journal: Journal,
}

impl Learned {
    /// What to store for `program` when the store now holds `stored`: this
    /// run's profile if nobody stored one since this run loaded it, else
    /// this run's learning replayed onto the newer one (so concurrent runs
    /// of one program all count). `None` if this run learned nothing of it.
    pub fn rebased(&self, program: &str, stored: Option<ProgramProfile>) -> Option<ProgramProfile> {
        let mine = self.profiles.get(program)?;
        let unchanged = stored.as_ref() == self.journal.loaded.get(program);
        let mut profile = match stored {
            Some(newer) if !unchanged && !self.journal.overflowed.contains(program) => newer,
            _ => return Some(mine.clone()),
        };
        let mut learners: BTreeMap<JobId, RunLearner> = BTreeMap::new();
        for step in self.journal.steps.get(program).into_iter().flatten() {
            match *step {
                Step::Observe(job, slice, validity) => {
                    let learner = learners.entry(job).or_default();
                    match validity {
                        Some(v) => learner.observe(&mut profile, &slice, v),
                        None => learner.follow(&mut profile, &slice),
                    };
                }
                // Every job seen finishes a run, observed or not (without
                // counters no slice is learned, but the run still counts).
                Step::Finish(job) => learners.remove(&job).unwrap_or_default().finish(&mut profile),
                Step::Found(finding) => found(&mut profile, finding),
            }
        }
        Some(profile)
    }
}

impl Learning {
    /// Starts a run from stored `profiles`, on a machine whose peak memory
    /// bandwidth is `peak_btr` transactions per µs (unknown: every sample
    /// counts as invalid, since contention cannot be judged).
    pub fn new(profiles: BTreeMap<String, ProgramProfile>, peak_btr: Option<f64>) -> Self {
        let mut slots = BTreeMap::new();
        let mut by_slot = Vec::with_capacity(profiles.len());
        for (program, profile) in profiles {
            slots.insert(program, by_slot.len());
            by_slot.push(profile);
        }
        Learning {
            journal: Journal::default(),
            profiles: by_slot,
            slots,
            tracks: Tracks::default(),
            knowledge: Knowledge {
                peak_btr: peak_btr.filter(|p| *p > 0.0),
                ..Knowledge::default()
            },
            thresholds: LowContention::default(),
            slices: Vec::new(),
            index: FxHashMap::default(),
            indexed: false,
            sliced_from: None,
            intensive: 0,
            programs: BTreeMap::new(),
        }
    }

    /// Keeps the steps of learning, so that [`Learned::rebased`] can replay
    /// them onto a profile another run stored meanwhile (live runs).
    pub fn journaled(mut self) -> Self {
        self.journal.on = true;
        self.journal.loaded = self.profiles();
        self
    }

    /// Stores what a policy found about job `job`'s program
    /// ([`herd_policy::Policy::findings`]) in its profile.
    pub fn record(&mut self, job: JobId, finding: herd_policy::Finding) {
        let Some(program) = self.programs.get(&job) else {
            return;
        };
        let slot = slot_of(&mut self.slots, &mut self.profiles, program);
        found(&mut self.profiles[slot], finding);
        self.journal.push(program, || Step::Found(finding));
    }

    /// The profiles as they stand (as loaded, before the run learns): what
    /// a trace records so that a replay starts from the same store.
    pub fn profiles(&self) -> BTreeMap<String, ProgramProfile> {
        self.slots
            .iter()
            .map(|(program, &slot)| (program.clone(), self.profiles[slot].clone()))
            .collect()
    }

    /// What has been learned, for the view.
    pub fn knowledge(&self) -> &Knowledge {
        &self.knowledge
    }

    /// Learns one period. Jobs gone since the last period have finished
    /// their run: their learners fold into their profiles. A period the
    /// guard gave the kernel (`kernel_placed`) is followed, not learned
    /// (see [`RunLearner::follow`]).
    pub fn observe(&mut self, snap: &Snapshot, kernel_placed: bool) {
        self.finish_gone(snap);
        // A snapshot that repeats the one the slices were summed from
        // (the last, at one period before) has the same slices.
        let repeat = snap.repeats_last
            && self.sliced_from == Some((snap.now_ns.wrapping_sub(snap.period_ns), snap.tasks_epoch));
        self.sliced_from = Some((snap.now_ns, snap.tasks_epoch));
        if !repeat {
            self.sum_slices(snap);
        }
        let system_bytes = snap.system.mem_bytes.unwrap_or_else(|| {
            self.slices
                .iter()
                .filter_map(|(_, s)| s.map(|s| s.mem_bytes))
                .sum()
        });
        let system_btr = system_bytes as f64 / LINE_BYTES / (snap.period_ns as f64 * 1e-3).max(1e-9);
        // Memory-intensive jobs that ran this period (S1's state 3 counts
        // them among each job's co-runners).
        let lc = self.thresholds;
        let peak = self.knowledge.peak_btr;
        let intensive_now = |s: &Slice| s.cpu_ns > 0 && peak.is_some_and(|p| lc.is_intensive(s.btr(), p));
        // The slices, the peak and the thresholds are those the count was
        // made of when this snapshot repeats the last (the first never does).
        if !repeat {
            self.intensive = self
                .slices
                .iter()
                .filter(|(_, s)| s.as_ref().is_some_and(intensive_now))
                .count();
        }
        let intensive = self.intensive;
        // Every present job has a track and an entry in what the policy
        // sees; the walk below then pairs them with the snapshot's jobs.
        if self.tracks.len() != snap.jobs.len() || self.knowledge.jobs.len() != snap.jobs.len() {
            for job in &snap.jobs {
                // A job's program is noted when its track starts: a look-up
                // of it every period was a cost paid for nothing.
                if let Err(at) = self.tracks.find(job.id) {
                    self.programs.entry(job.id).or_insert_with(|| job.program.clone());
                    let track = Track {
                        program: job.program.clone(),
                        slot: slot_of(&mut self.slots, &mut self.profiles, &job.program),
                        learner: RunLearner::new(),
                    };
                    self.tracks.insert_at(at, job.id, track);
                }
                self.knowledge.jobs.entry(job.id).or_default();
            }
        }
        // In job order, the slices are met in turn as the walk below meets
        // the jobs in id order: each is found after the last one found.
        let mut next_slice = 0;
        let mut step = |job: &herd_policy::JobView, track: &mut Track, l: &mut herd_policy::Learned| {
            let profile = &mut self.profiles[track.slot];
            let at = if self.indexed {
                self.index.get(&job.id).copied()
            } else if self.slices.get(next_slice).is_some_and(|(j, _)| *j == job.id) {
                Some(next_slice)
            } else {
                // A job with no slice, or met out of order: searched for.
                self.slices.binary_search_by_key(&job.id, |(j, _)| *j).ok()
            };
            if let Some(k) = at {
                next_slice = k + 1;
            }
            // Borrowed, not copied: a slice with its code samples is 120
            // bytes, and this runs for every job every period.
            let slice = at.and_then(|k| self.slices[k].1.as_ref());
            let mut last_btr = None;
            if let Some(s) = slice.filter(|s| s.cpu_ns > 0) {
                let own = s.btr();
                last_btr = Some(own);
                let validity = (!kernel_placed).then(|| match peak {
                    Some(peak) => {
                        // `intensive_now(s)`, with the rate just worked out.
                        let others = intensive - usize::from(lc.is_intensive(own, peak));
                        lc.classify(own, system_btr, others, peak)
                    }
                    None => herd_profile::Validity::Invalid,
                });
                match validity {
                    Some(v) => track.learner.observe(profile, s, v),
                    None => track.learner.follow(profile, s),
                };
                self.journal
                    .push(&job.program, || Step::Observe(job.id, *s, validity));
            }
            l.phase = track.learner.current();
            l.predicted_btr = track.learner.predicted_btr(profile);
            l.last_btr = last_btr;
            l.coverage = profile.coverage;
            l.runs = profile.runs;
            l.solo_time_s = profile.solo_time_s;
            l.mem_requests = profile.mem_requests;
            l.barrier_beats = profile.barrier_beats;
            l.requests_done = track.learner.requests();
        };
        // Both maps hold exactly the present jobs, in id order: when the
        // snapshot lists its jobs in id order too (the simulator's and the
        // live loop's do), one walk pairs them, with no search of either
        // map per job (those searches were a twelfth of bw:iabw's
        // simulated time at 1,000 jobs).
        let n = snap.jobs.len();
        let in_id_order = snap.jobs.windows(2).all(|w| w[0].id < w[1].id);
        if in_id_order && self.tracks.len() == n && self.knowledge.jobs.len() == n {
            let walk = snap
                .jobs
                .iter()
                .zip(self.tracks.iter_mut())
                .zip(self.knowledge.jobs.iter_mut());
            for ((job, (tid, track)), (&lid, l)) in walk {
                debug_assert!(
                    *tid == job.id && lid == job.id,
                    "learning's maps hold the present jobs"
                );
                step(job, track, l);
            }
        } else {
            for job in &snap.jobs {
                if let (Some(track), Some(l)) =
                    (self.tracks.get_mut(job.id), self.knowledge.jobs.get_mut(&job.id))
                {
                    step(job, track, l);
                }
            }
        }
    }

    /// This period's slices, one per job: the sum over its counted
    /// threads. A thread the sensor could not count (the machine has no
    /// counters, or herd had no descriptor for it) is left out, not the
    /// whole job: rates (traffic per instruction, per CPU second) over the
    /// counted threads stand for the job. A job with no counted thread
    /// gives no slice.
    fn sum_slices(&mut self, snap: &Snapshot) {
        self.slices.clear();
        self.index.clear();
        self.indexed = false;
        let mut counters = false;
        for t in &snap.tasks {
            // A job's tasks are listed together: the last slice is most
            // often the one, and a job after it in order has none yet.
            let k = match self.slices.last() {
                Some((job, _)) if *job == t.job => self.slices.len() - 1,
                last if !self.indexed && last.is_none_or(|(job, _)| *job < t.job) => {
                    self.slices.push((t.job, None));
                    self.slices.len() - 1
                }
                _ => {
                    if !self.indexed {
                        self.indexed = true;
                        self.index
                            .extend(self.slices.iter().enumerate().map(|(k, (job, _))| (*job, k)));
                    }
                    *self.index.entry(t.job).or_insert_with(|| {
                        self.slices.push((t.job, None));
                        self.slices.len() - 1
                    })
                }
            };
            let o = &t.obs;
            let (Some(instructions), Some(mem_bytes)) = (o.instructions, o.mem_bytes) else {
                continue;
            };
            counters = true;
            let part = Slice {
                instructions,
                cpu_ns: o.cpu_time_ns,
                mem_bytes,
                llc_refs: o.llc_refs,
                llc_misses: o.llc_misses,
                code_samples: o.code_samples,
            };
            // Added in place: a slice is a dozen words, and copying the sum
            // out and back per task was a twentieth of bw:iabw's simulated
            // time at 1,000 tasks.
            match &mut self.slices[k].1 {
                Some(sum) => add_to(sum, &part),
                none => *none = Some(part),
            }
        }
        self.knowledge.counters = counters;
    }

    fn finish_gone(&mut self, snap: &Snapshot) {
        // The same jobs in the same (id) order: one walk, no search.
        let same = |tracks: &Tracks| tracks.ids().eq(snap.jobs.iter().map(|j| j.id));
        if self.tracks.len() == snap.jobs.len()
            && (same(&self.tracks) || snap.jobs.iter().all(|j| self.tracks.find(j.id).is_ok()))
        {
            return;
        }
        let present: FxHashSet<JobId> = snap.jobs.iter().map(|j| j.id).collect();
        let gone: Vec<JobId> = self.tracks.ids().filter(|id| !present.contains(id)).collect();
        for id in gone {
            self.finish(id);
        }
    }

    fn finish(&mut self, id: JobId) {
        if let Some(t) = self.tracks.remove(id) {
            self.journal.push(&t.program, || Step::Finish(id));
            t.learner.finish(&mut self.profiles[t.slot]);
        }
        self.knowledge.jobs.remove(&id);
    }

    /// What the stored profiles say of each program before this run, as
    /// the policies' estimates (S3's offline signature and history): the
    /// whole-run miss rate and solo time of earlier runs.
    pub fn estimates(&self) -> herd_policy::Estimates {
        self.slots
            .iter()
            .map(|(program, &slot)| {
                let p = &self.profiles[slot];
                (
                    program.clone(),
                    herd_policy::Estimate {
                        solo_time_s: p.solo_time_s,
                        llc_miss_rate: p.llc_miss_rate,
                        ..Default::default()
                    },
                )
            })
            .collect()
    }

    /// Ends the run: every job still present finishes too (the run is over
    /// for it as well), and the profiles come back for storing.
    pub fn into_profiles(self) -> BTreeMap<String, ProgramProfile> {
        self.into_learned().profiles
    }

    /// [`Learning::into_profiles`], with what it takes to replay the run
    /// onto profiles another run stored meanwhile.
    pub fn into_learned(mut self) -> Learned {
        let ids: Vec<JobId> = self.tracks.ids().collect();
        for id in ids {
            self.finish(id);
        }
        let mut by_slot: Vec<Option<ProgramProfile>> = self.profiles.into_iter().map(Some).collect();
        Learned {
            profiles: (self.slots.into_iter())
                .map(|(program, slot)| (program, by_slot[slot].take().unwrap_or_default()))
                .collect(),
            journal: self.journal,
        }
    }
}

/// What a policy found, into the program's profile.
fn found(profile: &mut ProgramProfile, finding: herd_policy::Finding) {
    match finding {
        herd_policy::Finding::BarrierBeats(n) => profile.barrier_beats = n,
    }
}

/// Adds `b` to `a`: counts that both have (a count one lacks is unknown
/// for the sum), and code samples that either has.
fn add_to(a: &mut Slice, b: &Slice) {
    let opt = |x: Option<u64>, y: Option<u64>| x.zip(y).map(|(x, y)| x + y);
    a.instructions += b.instructions;
    a.cpu_ns += b.cpu_ns;
    a.mem_bytes += b.mem_bytes;
    a.llc_refs = opt(a.llc_refs, b.llc_refs);
    a.llc_misses = opt(a.llc_misses, b.llc_misses);
    // A thread without samples adds nothing to where the job's code ran.
    match (&mut a.code_samples, &b.code_samples) {
        (Some(x), Some(y)) => x.iter_mut().zip(y).for_each(|(x, y)| *x = x.saturating_add(*y)),
        (x @ None, Some(y)) => *x = Some(*y),
        // Nothing to add (not even a copy of nothing: this runs for every
        // task every period, and the copy was a hundredth of bw:iabw's
        // simulated time).
        (_, None) => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use herd_policy::{Finding, JobView};

    fn one_job(program: &str) -> Snapshot {
        Snapshot {
            jobs: vec![JobView {
                id: 7,
                name: program.into(),
                program: program.into(),
                arrival_ns: 0,
                memory_hint: None,
                memory_kb: None,
                threads_declared: None,
            }],
            ..Snapshot::default()
        }
    }

    #[test]
    fn a_policys_finding_reaches_the_programs_profile_and_the_next_run() {
        let mut l = Learning::new(BTreeMap::new(), None);
        l.observe(&one_job("bench"), false);
        // The job is gone by the end of the run; its program is not.
        l.observe(&Snapshot::default(), false);
        l.record(7, Finding::BarrierBeats(Some(16)));
        l.record(8, Finding::BarrierBeats(Some(4)));
        let profiles = l.into_profiles();
        assert_eq!(profiles["bench"].barrier_beats, Some(16));
        assert_eq!(profiles.len(), 1, "an unknown job's finding is dropped");
        let mut next = Learning::new(profiles, None);
        next.observe(&one_job("bench"), false);
        assert_eq!(next.knowledge().jobs[&7].barrier_beats, Some(16));
        // Refuted: the profile forgets it.
        next.record(7, Finding::BarrierBeats(None));
        assert_eq!(next.into_profiles()["bench"].barrier_beats, None);
    }

    /// A thread of `job` with the CPU time `cpu_ns`, counted or not.
    fn thread(id: u64, job: u32, cpu_ns: u64, counted: bool) -> herd_policy::TaskView {
        herd_policy::TaskView {
            id,
            job,
            rank: id as u32,
            state: herd_policy::TaskState::Runnable,
            cpu: Some(0),
            obs: herd_policy::Obs {
                cpu_time_ns: cpu_ns,
                instructions: counted.then_some(cpu_ns * 2),
                mem_bytes: counted.then_some(cpu_ns / 10),
                ..herd_policy::Obs::default()
            },
            heartbeats: None,
        }
    }

    /// Issue 24: one uncounted thread (herd out of descriptors for it) no
    /// longer turns the whole group to hints: the job learns from its
    /// counted threads, at their rate.
    #[test]
    fn a_job_learns_from_its_counted_threads_when_one_is_uncounted() {
        let mut l = Learning::new(BTreeMap::new(), None);
        let mut snap = one_job("bench");
        snap.period_ns = 100_000_000;
        snap.tasks = vec![
            thread(1, 7, 50_000_000, true),
            thread(2, 7, 50_000_000, false),
            thread(3, 7, 50_000_000, true),
        ];
        l.observe(&snap, false);
        assert!(l.knowledge().counters, "counted threads are counters");
        let btr = l.knowledge().jobs[&7]
            .last_btr
            .expect("a slice from the counted threads");
        // The rate of the counted two: 2 x 5 MB over 2 x 50 ms of CPU.
        let mut counted_only = one_job("bench");
        counted_only.period_ns = snap.period_ns;
        counted_only.tasks = vec![thread(1, 7, 50_000_000, true), thread(3, 7, 50_000_000, true)];
        let mut m = Learning::new(BTreeMap::new(), None);
        m.observe(&counted_only, false);
        assert_eq!(Some(btr), m.knowledge().jobs[&7].last_btr);
        // No thread counted anywhere: no counters.
        snap.tasks = vec![thread(1, 7, 50_000_000, false)];
        let mut n = Learning::new(BTreeMap::new(), None);
        n.observe(&snap, false);
        assert!(!n.knowledge().counters);
        assert_eq!(n.knowledge().jobs[&7].last_btr, None);
    }

    /// Each job's slice sums its own threads wherever they stand in the
    /// list: in job order (found by order, no map), interleaved or in
    /// reverse (found by the map made then).
    #[test]
    fn a_jobs_slice_sums_its_threads_in_any_order() {
        let job = |id: u32| JobView {
            id,
            ..one_job(&format!("p{id}")).jobs[0].clone()
        };
        // Each thread with its own traffic per CPU second, so a thread
        // summed into another job's slice moves both jobs' rates.
        let tasks: Vec<_> = [(1, 3), (2, 3), (3, 5), (4, 9), (5, 9), (6, 9)]
            .into_iter()
            .map(|(id, j)| {
                let mut t = thread(id, j, 10_000_000 * id, true);
                t.obs.mem_bytes = Some(1_000_000 * id * id);
                t
            })
            .collect();
        let learned_as = |order: &[usize], jobs: [u32; 3]| {
            let mut l = Learning::new(BTreeMap::new(), None);
            let snap = Snapshot {
                period_ns: 100_000_000,
                jobs: jobs.map(job).to_vec(),
                tasks: order.iter().map(|&i| tasks[i].clone()).collect(),
                ..Snapshot::default()
            };
            l.observe(&snap, false);
            l.knowledge().clone()
        };
        let learned = |order: &[usize]| learned_as(order, [3, 5, 9]);
        let grouped = learned(&[0, 1, 2, 3, 4, 5]);
        assert_eq!(grouped.jobs.len(), 3);
        assert!(grouped.jobs.values().all(|l| l.last_btr.is_some()));
        assert_eq!(learned(&[2, 0, 3, 1, 5, 4]), grouped, "interleaved");
        assert_eq!(learned(&[5, 4, 3, 2, 1, 0]), grouped, "reversed");
        assert_eq!(learned(&[0, 3, 4, 1, 2, 5]), grouped, "a job's threads apart");
        // The jobs listed out of id order, their tasks in job order.
        assert_eq!(
            learned_as(&[0, 1, 2, 3, 4, 5], [9, 3, 5]),
            grouped,
            "jobs out of order"
        );
        // A job with no task this period: no slice, the others theirs.
        let without_5 = learned(&[0, 1, 3, 4, 5]);
        assert_eq!(without_5.jobs[&5].last_btr, None);
        assert_eq!(without_5.jobs[&9], grouped.jobs[&9]);
    }

    /// A snapshot that repeats the last (one period on, the same tasks)
    /// is learned from the slices summed before, exactly as if summed
    /// again; one that says it repeats but does not follow the last
    /// (a turn was missed) is summed from its own tasks.
    #[test]
    fn a_repeated_snapshot_learns_what_summing_it_again_learns() {
        let period_ns = 100_000_000;
        let at = |now_ns: u64, cpu_ns: u64, repeats_last: bool| {
            let mut snap = one_job("bench");
            snap.period_ns = period_ns;
            snap.now_ns = now_ns;
            snap.tasks_epoch = 3;
            snap.repeats_last = repeats_last;
            snap.tasks = vec![thread(1, 7, cpu_ns, true), thread(2, 7, cpu_ns / 2, true)];
            for t in &mut snap.tasks {
                t.obs.mem_bytes = Some(cpu_ns * cpu_ns / 1_000_000);
            }
            snap
        };
        let learn = |snaps: &[Snapshot]| {
            let mut l = Learning::new(BTreeMap::new(), Some(1e3));
            for s in snaps {
                l.observe(s, false);
            }
            (l.knowledge().clone(), l.into_profiles())
        };
        let (first, second) = (
            at(period_ns, 40_000_000, false),
            at(2 * period_ns, 40_000_000, true),
        );
        let summed = learn(&[first.clone(), at(2 * period_ns, 40_000_000, false)]);
        assert_eq!(learn(&[first.clone(), second]), summed, "a true repeat");
        // Said to repeat, but two periods on and with other readings: its
        // own are learned, not the slices of the snapshot before.
        let late = at(3 * period_ns, 90_000_000, true);
        let own = learn(&[first.clone(), at(3 * period_ns, 90_000_000, false)]);
        assert_ne!(own, learn(&[first.clone(), first.clone()]));
        assert_eq!(
            learn(&[first.clone(), late]),
            own,
            "a repeat of a turn learning missed"
        );
        // A new list of tasks is summed, whatever the snapshot says.
        let mut renamed = at(2 * period_ns, 90_000_000, true);
        renamed.tasks_epoch = 4;
        let mut renamed_read = renamed.clone();
        renamed_read.repeats_last = false;
        assert_eq!(learn(&[first.clone(), renamed]), learn(&[first, renamed_read]));
    }

    /// A repeat keeps the count of memory-intensive co-runners with the
    /// slices it was made of; a snapshot said to repeat that does not is
    /// counted afresh.
    #[test]
    fn a_repeat_counts_intensive_co_runners_as_summing_again_does() {
        let period_ns = 100_000_000;
        // Four one-thread jobs, the first `heavy` moving a thousand times
        // the traffic of the rest (S1's intensive co-runners).
        let at = |periods: u64, heavy: u32, repeats_last: bool| {
            let mut snap = Snapshot {
                period_ns,
                now_ns: periods * period_ns,
                tasks_epoch: 5,
                repeats_last,
                ..Snapshot::default()
            };
            for j in 0..4u32 {
                let mut job = one_job(&format!("p{j}")).jobs.remove(0);
                job.id = j;
                snap.jobs.push(job);
                let mut t = thread(u64::from(j), j, 50_000_000, true);
                if j < heavy {
                    t.obs.mem_bytes = Some(5_000_000_000);
                }
                snap.tasks.push(t);
            }
            snap
        };
        let learn = |snaps: &[Snapshot]| {
            let mut l = Learning::new(BTreeMap::new(), Some(1e3));
            for s in snaps {
                l.observe(s, false);
            }
            l.into_profiles()
        };
        let first = at(1, 4, false);
        // A true repeat, and the same summed again.
        let repeated = learn(&[first.clone(), at(2, 4, true)]);
        assert_eq!(repeated, learn(&[first.clone(), at(2, 4, false)]));
        // Said to repeat two periods on, with one intensive job, not four:
        // the first job's slice is learned with no intensive co-runner.
        let late = learn(&[first.clone(), at(3, 1, true)]);
        assert_eq!(late, learn(&[first.clone(), at(3, 1, false)]));
        assert_ne!(late["p0"], repeated["p0"], "the count decides p0's sample");
    }

    /// A period the guard gave the kernel is followed: the run's traffic
    /// counts, no sample is learned, and a replay onto a profile stored
    /// meanwhile follows it the same way.
    #[test]
    fn a_period_the_kernel_placed_is_followed_not_learned() {
        let mut snap = one_job("bench");
        snap.period_ns = 100_000_000;
        snap.tasks = vec![thread(1, 7, 50_000_000, true)];
        let learn = |kernel: &[bool]| {
            let mut l = Learning::new(BTreeMap::new(), Some(1e3)).journaled();
            for &k in kernel {
                l.observe(&snap, k);
            }
            let done = l.knowledge().jobs[&7].requests_done;
            (done, l.into_learned())
        };
        let samples = |p: &ProgramProfile| -> u32 {
            p.phases
                .phases()
                .iter()
                .map(|ph| ph.estimate.valid.n + ph.estimate.invalid.n)
                .sum()
        };
        let (done_mixed, mixed) = learn(&[false, true, true]);
        let (done_policy, policy) = learn(&[false, false, false]);
        assert_eq!(done_mixed, done_policy, "the kernel's periods count for the run");
        assert_eq!(samples(&mixed.profiles["bench"]), 1);
        assert_eq!(samples(&policy.profiles["bench"]), 3);
        // Someone stored a profile meanwhile: the run is replayed onto it.
        let stored = ProgramProfile {
            runs: 5,
            ..ProgramProfile::default()
        };
        let replayed = mixed.rebased("bench", Some(stored)).unwrap();
        assert_eq!((replayed.runs, samples(&replayed)), (6, 1));
    }
}
