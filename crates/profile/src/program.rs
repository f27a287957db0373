//! A program's profile across runs (S1's database record) and the learner
//! that extends it during one run.

use serde::{Deserialize, Serialize};

use crate::phase::{CODE_BUCKETS, code_vector};
use crate::{Markov, PhaseId, PhaseTable, Signature, Validity};

use herd_model::params::LINE_BYTES;

/// What herd knows about one program.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ProgramProfile {
    /// Its phases and their solo estimates.
    pub phases: PhaseTable,
    /// Phase transitions.
    pub markov: Markov,
    /// Completed runs learned from.
    pub runs: u32,
    /// Memory transactions per run (mean over runs).
    pub mem_requests: Option<f64>,
    /// Solo run time estimated from the last run: the sum over its slices
    /// of instructions / the slice's phase's solo instruction rate.
    pub solo_time_s: Option<f64>,
    /// Of the last run's slices, the share whose phase has a valid estimate.
    pub coverage: f64,
    /// Heartbeats each thread makes between barriers, as a policy found
    /// them (`pack:palm` learns them: S4's barrier programs), so that the
    /// next run can plan from its start. Absent in profiles stored before.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub barrier_beats: Option<u64>,
    /// Whole-run LLC misses per reference, the mean over runs that counted
    /// them: S3's offline signature (HASS-S) and its whole-run history (GB).
    /// Absent in profiles stored before, and where nothing was counted.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub llc_miss_rate: Option<f64>,
    /// Runs that counted LLC references (the weight of `llc_miss_rate`).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub counted_runs: u32,
}

fn is_zero(n: &u32) -> bool {
    *n == 0
}

/// One slice of one program, as the sensor saw it (summed over its threads).
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Slice {
    /// Instructions retired.
    pub instructions: u64,
    /// CPU time.
    pub cpu_ns: u64,
    /// Memory traffic.
    pub mem_bytes: u64,
    /// LLC references, where counted.
    pub llc_refs: Option<u64>,
    /// LLC misses, where counted.
    pub llc_misses: Option<u64>,
    /// Instruction-pointer samples per code bucket, where sampled.
    pub code_samples: Option<[u32; CODE_BUCKETS]>,
}

impl Slice {
    /// The program's bus transactions per µs of CPU time.
    pub fn btr(&self) -> f64 {
        if self.cpu_ns == 0 {
            0.0
        } else {
            self.mem_bytes as f64 / LINE_BYTES / (self.cpu_ns as f64 * 1e-3)
        }
    }

    fn signature(&self) -> Option<Signature> {
        if self.instructions == 0 {
            return None;
        }
        let per = |x: u64| x as f64 / self.instructions as f64;
        Some(Signature {
            bytes_per_instr: per(self.mem_bytes),
            refs_per_instr: self.llc_refs.map_or(0.0, per),
            miss_rate: match (self.llc_misses, self.llc_refs) {
                (Some(m), Some(r)) if r > 0 => m as f64 / r as f64,
                _ => 0.0,
            },
            code: self.code_samples.as_ref().and_then(code_vector),
        })
    }
}

/// Learns one run of one program instance. The profile it extends is held
/// by the caller and passed in, so several instances of a program in one
/// run (S1's groups hold two or four copies) learn into one phase table.
#[derive(Debug, Clone, Default)]
pub struct RunLearner {
    current: Option<PhaseId>,
    /// Per phase (by id), its slices so far and their instructions, for
    /// the solo time and coverage at the end: bounded by the phases a
    /// table holds. (A list of every slice grew by one a period per job
    /// for the whole run: bw:iabw's scale bench, 250 jobs at 10 ms
    /// periods, held 280 MB at 600 simulated s; 10 MB now.)
    by_phase: Vec<PhaseRun>,
    requests: f64,
    /// LLC (misses, references) over the run's slices that counted both.
    llc: (u64, u64),
}

/// One phase's share of a run: its slices and their instructions (whole
/// numbers, so their sums are exact in any order).
#[derive(Debug, Clone, Copy, Default)]
struct PhaseRun {
    slices: u64,
    instructions: u64,
}

impl RunLearner {
    /// A learner at the start of a run.
    pub fn new() -> Self {
        Self::default()
    }

    /// Memory transactions (cache lines) this run has made so far.
    pub fn requests(&self) -> f64 {
        self.requests
    }

    /// Learns one slice into `profile`: classifies its phase, adds its
    /// sample under `validity`, records the transition. Returns the phase,
    /// or `None` for a slice with no instructions counted (idle, or no PMU).
    pub fn observe(
        &mut self,
        profile: &mut ProgramProfile,
        slice: &Slice,
        validity: Validity,
    ) -> Option<PhaseId> {
        self.take(profile, slice, Some(validity))
    }

    /// Follows one slice that someone other than the policy placed (the
    /// guard's kernel probes): it counts for the run (its traffic; if its
    /// signature is a known phase's, that phase and its instructions for
    /// the solo time, coverage and the predictor) but adds no sample, makes
    /// no phase and moves no centroid: the table stays of the program under
    /// the policy, as a whole run the kernel places learns nothing.
    /// (Learning those samples cost bw:iabw on S1's group 4 nearly all of
    /// its gain; phases made from them, which no sample under the policy
    /// fills, kept S1's coverage gate shut on group 2 at seed 5:
    /// docs/results.md.) Returns `None` for a signature no phase matches.
    pub fn follow(&mut self, profile: &mut ProgramProfile, slice: &Slice) -> Option<PhaseId> {
        self.take(profile, slice, None)
    }

    fn take(
        &mut self,
        profile: &mut ProgramProfile,
        slice: &Slice,
        validity: Option<Validity>,
    ) -> Option<PhaseId> {
        self.requests += slice.mem_bytes as f64 / LINE_BYTES;
        if let (Some(m), Some(r)) = (slice.llc_misses, slice.llc_refs) {
            self.llc = (self.llc.0 + m, self.llc.1 + r);
        }
        let sig = slice.signature()?;
        let id = match validity {
            Some(_) => profile.phases.classify(&sig),
            None => profile.phases.recognise(&sig)?,
        };
        if let Some(validity) = validity
            && slice.cpu_ns > 0
        {
            let ips = slice.instructions as f64 / (slice.cpu_ns as f64 * 1e-3);
            profile
                .phases
                .add_sample(id, ips, slice.btr(), validity.is_valid());
        }
        if let Some(prev) = self.current {
            profile.markov.observe(prev, id);
        }
        self.current = Some(id);
        let i = usize::from(id);
        if self.by_phase.len() <= i {
            self.by_phase.resize(i + 1, PhaseRun::default());
        }
        let run = &mut self.by_phase[i];
        run.slices += 1;
        run.instructions = run.instructions.saturating_add(slice.instructions);
        Some(id)
    }

    /// The phase of the last slice.
    pub fn current(&self) -> Option<PhaseId> {
        self.current
    }

    /// The predicted phase of the next slice (S1: the current one when the
    /// Markov predictor has no history).
    pub fn predicted(&self, profile: &ProgramProfile) -> Option<PhaseId> {
        self.current.map(|c| profile.markov.predict(c))
    }

    /// The predicted phase's solo bandwidth, in transactions per µs of CPU.
    pub fn predicted_btr(&self, profile: &ProgramProfile) -> Option<f64> {
        let p = self.predicted(profile)?;
        profile.phases.estimate(p)?.solo().map(|(_, btr)| btr)
    }

    /// Ends the run: folds it into `profile` (coverage and solo time from
    /// this run's slices, memory requests averaged over runs, one more run).
    /// A run with no classified slice (no counters) adds only its memory
    /// requests, when counted, and the run.
    pub fn finish(self, profile: &mut ProgramProfile) {
        let runs = f64::from(profile.runs);
        profile.runs = profile.runs.saturating_add(1);
        if self.requests > 0.0 {
            profile.mem_requests = Some(match profile.mem_requests {
                Some(m) => (m * runs + self.requests) / (runs + 1.0),
                None => self.requests,
            });
        }
        if self.llc.1 > 0 {
            let rate = self.llc.0 as f64 / self.llc.1 as f64;
            let n = f64::from(profile.counted_runs);
            profile.llc_miss_rate = Some(profile.llc_miss_rate.map_or(rate, |r| (r * n + rate) / (n + 1.0)));
            profile.counted_runs = profile.counted_runs.saturating_add(1);
        }
        let slices: u64 = self.by_phase.iter().map(|r| r.slices).sum();
        if slices == 0 {
            return;
        }
        // Each phase's instructions at its solo rate as the run ends: the
        // sum over the run's slices, a phase at a time.
        let mut solo_us = 0.0;
        let mut covered = 0u64;
        for (id, run) in self.by_phase.iter().enumerate().filter(|(_, r)| r.slices > 0) {
            let est = profile.phases.estimate(id as PhaseId);
            if est.is_some_and(|e| e.is_valid()) {
                covered += run.slices;
            }
            if let Some((ips, _)) = est.and_then(|e| e.solo()).filter(|(ips, _)| *ips > 0.0) {
                solo_us += run.instructions as f64 / ips;
            }
        }
        profile.coverage = covered as f64 / slices as f64;
        profile.solo_time_s = Some(solo_us * 1e-6);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// 10 ms of CPU at `ips` instructions per µs and `bytes_per_instr`.
    fn slice(ips: f64, bytes_per_instr: f64) -> Slice {
        let instructions = (ips * 1e4) as u64;
        Slice {
            instructions,
            cpu_ns: 10_000_000,
            mem_bytes: (instructions as f64 * bytes_per_instr) as u64,
            llc_refs: Some(instructions / 50),
            llc_misses: Some(instructions / 100),
            code_samples: None,
        }
    }

    /// Issue 24: the whole-run miss rate (S3's offline signature) is kept
    /// across runs, as a mean over the runs that counted it; a run without
    /// counters leaves it as it was.
    #[test]
    fn the_whole_run_miss_rate_is_a_mean_over_counted_runs() {
        let mut profile = ProgramProfile::default();
        for (misses_per_50, counted) in [(1u64, true), (3, true), (0, false)] {
            let mut l = RunLearner::new();
            let mut s = slice(1000.0, 1.0);
            if counted {
                s.llc_misses = s.llc_refs.map(|r| r * misses_per_50 / 4);
            } else {
                (s.llc_refs, s.llc_misses, s.instructions) = (None, None, 0);
            }
            l.observe(&mut profile, &s, Validity::Invalid);
            l.finish(&mut profile);
        }
        // 1/4 and 3/4: a mean of 1/2 over two counted runs of three.
        assert_eq!((profile.runs, profile.counted_runs), (3, 2));
        assert!(
            (profile.llc_miss_rate.unwrap() - 0.5).abs() < 1e-9,
            "{:?}",
            profile.llc_miss_rate
        );
    }

    #[test]
    fn a_two_phase_program_is_learned_and_improves_across_runs() {
        let mut profile = ProgramProfile::default();
        for run in 0..3 {
            let mut l = RunLearner::new();
            for k in 0..20 {
                // Phases alternate every 5 slices: streaming, then compute.
                // Streaming slices are slowed (invalid) in the first run.
                let streaming = (k / 5) % 2 == 0;
                let (s, v) = if streaming {
                    let contended = run == 0;
                    let ips = if contended { 500.0 } else { 1000.0 };
                    (
                        slice(ips, 2.0),
                        if contended {
                            Validity::Invalid
                        } else {
                            Validity::SystemLow
                        },
                    )
                } else {
                    (slice(2500.0, 0.05), Validity::OwnLow)
                };
                l.observe(&mut profile, &s, v);
            }
            l.finish(&mut profile);
            assert_eq!(profile.runs, run + 1);
            assert_eq!(profile.phases.phases().len(), 2, "run {run}");
            if run == 0 {
                // Streaming phase only has invalid samples: half covered.
                assert!((profile.coverage - 0.5).abs() < 1e-9);
            } else {
                assert_eq!(profile.coverage, 1.0);
            }
        }
        // Solo time: 10 streaming slices of 1e7 instructions at 1000/us and
        // 10 compute slices of 2.5e7 at 2500/us: 0.2 s.
        assert!(
            (profile.solo_time_s.unwrap() - 0.2).abs() < 1e-6,
            "{:?}",
            profile.solo_time_s
        );
        // Streaming phase: 2 bytes/instr x 1000 instr/us / 64 B = 31.25 trans/us.
        let stream = profile.phases.classify(&slice(1000.0, 2.0).signature().unwrap());
        let (_, btr) = profile.phases.estimate(stream).unwrap().solo().unwrap();
        assert!((btr - 31.25).abs() < 0.01, "{btr}");
        // Serialises for the store.
        let json = serde_json::to_string(&profile).unwrap();
        let back: ProgramProfile = serde_json::from_str(&json).unwrap();
        assert_eq!(back.runs, 3);
    }

    /// A slice the guard gave the kernel counts for the run (traffic; a
    /// known phase's solo time, coverage and transitions) and adds no
    /// sample: a known phase's estimate and centroid are unchanged by a
    /// slower sample, and a signature no phase matches makes no phase and
    /// counts for neither coverage nor the predictor.
    #[test]
    fn a_followed_slice_counts_for_the_run_but_is_not_learned() {
        let mut p = ProgramProfile::default();
        let mut l = RunLearner::new();
        l.observe(&mut p, &slice(2500.0, 0.05), Validity::OwnLow);
        l.observe(&mut p, &slice(2500.0, 2.0), Validity::Invalid);
        let before = p.phases.clone();
        // The known phases, slowed (a contended probe), then a signature
        // seen only under the kernel.
        assert_eq!(l.follow(&mut p, &slice(1000.0, 0.05)), Some(0));
        assert_eq!(l.follow(&mut p, &slice(1000.0, 2.0)), Some(1));
        assert_eq!(l.follow(&mut p, &slice(1000.0, 40.0)), None);
        assert_eq!(p.phases, before);
        // 0.05 bytes an instruction over 2.5e7 and 1e7 instructions, 2 over
        // 2.5e7 and 1e7, 40 over 1e7.
        let lines = (0.05 * 3.5e7 + 2.0 * 3.5e7 + 40.0 * 1e7) / LINE_BYTES;
        assert!((l.requests() - lines).abs() < 1.0, "{}", l.requests());
        assert_eq!(l.current(), Some(1));
        l.finish(&mut p);
        // Two of four counted slices in the phase with a valid estimate.
        assert!((p.coverage - 0.5).abs() < 1e-9, "{}", p.coverage);
        // Solo time over the counted slices, from each phase's estimate
        // under the policy (2500 an µs for both): 7e7 instructions.
        assert!(
            (p.solo_time_s.unwrap() - 0.028).abs() < 1e-9,
            "{:?}",
            p.solo_time_s
        );
        assert_eq!(p.markov, {
            let mut m = Markov::default();
            m.observe(0, 1);
            m.observe(1, 0);
            m.observe(0, 1);
            m
        });
    }

    /// A run's learner holds one entry a phase, however long the run: its
    /// solo time and coverage are those of every slice summed one by one.
    #[test]
    fn a_long_run_is_held_in_one_entry_a_phase() {
        let mut p = ProgramProfile::default();
        let mut l = RunLearner::new();
        let mut by_slice_us = 0.0;
        for i in 0..10_000u32 {
            let (ips, bytes) = if i % 7 < 3 { (1000.0, 2.0) } else { (2500.0, 0.05) };
            let s = slice(ips, bytes);
            l.observe(&mut p, &s, Validity::OwnLow);
            by_slice_us += s.instructions as f64 / ips;
        }
        assert_eq!(p.phases.phases().len(), 2);
        assert_eq!(l.by_phase.len(), 2, "one entry a phase, not a slice");
        assert_eq!(l.by_phase.iter().map(|r| r.slices).sum::<u64>(), 10_000);
        l.finish(&mut p);
        assert_eq!(p.coverage, 1.0);
        let solo_us = p.solo_time_s.unwrap() * 1e6;
        assert!(
            ((solo_us - by_slice_us) / by_slice_us).abs() < 1e-12,
            "{solo_us} {by_slice_us}"
        );
    }

    #[test]
    fn prediction_follows_the_phase_sequence() {
        let mut p = ProgramProfile::default();
        let mut l = RunLearner::new();
        assert_eq!(l.predicted(&p), None);
        for k in 0..40 {
            let s = if (k / 4) % 2 == 0 {
                slice(1000.0, 2.0)
            } else {
                slice(2500.0, 0.05)
            };
            l.observe(&mut p, &s, Validity::OwnLow);
        }
        // After 4 slices of a phase, staying is still the likeliest (3 of 4).
        let cur = l.current().unwrap();
        assert_eq!(l.predicted(&p), Some(cur));
        assert!(l.predicted_btr(&p).is_some());
        assert_eq!(
            l.observe(&mut p, &Slice::default(), Validity::OwnLow),
            None,
            "an idle slice"
        );
    }
}
