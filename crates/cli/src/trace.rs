//! Replayable traces (issue 24, parity on live runs). `herd run --trace`
//! and `herd batch --trace` write a header line (the policy, the loop's
//! configuration, what learning started from) and, per decision, the
//! snapshot the policy saw and the plan it made. [`replay`] feeds those
//! snapshots to a fresh policy through the engine's `Replay` world and
//! reports every turn whose plan differs: the policy decides the same on
//! the same view, live or replayed, or the difference is named.
//!
//! Pure: the caller reads the file and loads the machine the run placed on
//! (an hwloc XML export of it).

use std::collections::BTreeMap;

use herd_engine::{Config, GuardConfig, Learning, NoMeter, replay::Replay};
use herd_policy::{Plan, PolicySpec, Snapshot};
use herd_profile::ProgramProfile;
use herd_topo::Machine;
use serde::{Deserialize, Serialize};

/// The version of the trace format a header names.
pub const VERSION: u32 = 1;

/// A trace's first line.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Header {
    /// [`VERSION`].
    pub herd_trace: u32,
    /// The policy, as `--policy` took it.
    pub policy: String,
    /// The loop's period and its bounds, and the run's seed.
    pub period_ns: u64,
    /// The shortest period a policy could ask for.
    pub min_period_ns: u64,
    /// The longest.
    pub max_period_ns: u64,
    /// The run's seed.
    pub seed: u64,
    /// Whether the guard ran (with its default settings, the only ones).
    pub guard: bool,
    /// Whether the run learned, and from what: the stored profiles and the
    /// calibrated peak as the run loaded them.
    pub learning: Option<LearningStart>,
}

/// What a run's learning started from.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LearningStart {
    /// The profiles the store held for the run's programs.
    pub profiles: BTreeMap<String, ProgramProfile>,
    /// The calibrated peak bandwidth, transactions per µs.
    pub peak_btr: Option<f64>,
}

impl Header {
    /// The header of a run under `policy` with `cfg`, learning from `learning`.
    pub fn new(
        policy: &PolicySpec,
        cfg: &Config,
        learning: Option<(BTreeMap<String, ProgramProfile>, Option<f64>)>,
    ) -> Header {
        Header {
            herd_trace: VERSION,
            policy: policy.to_string(),
            period_ns: cfg.period_ns,
            min_period_ns: cfg.min_period_ns,
            max_period_ns: cfg.max_period_ns,
            seed: cfg.seed,
            guard: cfg.guard.is_some(),
            learning: learning.map(|(profiles, peak_btr)| LearningStart { profiles, peak_btr }),
        }
    }
}

/// The fields a decision line adds for replay: the snapshot and the plan.
pub fn decision_fields(line: &mut serde_json::Value, snapshot: &Snapshot, plan: &Plan) {
    line["snapshot"] = serde_json::to_value(snapshot).unwrap_or_default();
    line["plan"] = comparable(plan);
}

/// A plan as traces record and compare it: everything it decides, without
/// its sentences (a reason may quote a measured figure in a form that is
/// not part of the decision).
fn comparable(plan: &Plan) -> serde_json::Value {
    let mut v = serde_json::to_value(plan).unwrap_or_default();
    if let Some(o) = v.as_object_mut() {
        o.remove("note");
        if let Some(tasks) = o.get_mut("tasks").and_then(|t| t.as_array_mut()) {
            for t in tasks {
                // [id, {"action": "run", "cpus": [..], "why": ".."}]
                if let Some(p) = t.get_mut(1).and_then(|p| p.as_object_mut()) {
                    p.remove("why");
                }
            }
        }
        if let Some(jobs) = o.get_mut("jobs").and_then(|t| t.as_array_mut()) {
            for j in jobs.iter_mut().filter_map(|j| j.as_object_mut()) {
                j.remove("why");
            }
        }
    }
    v
}

/// A trace read back.
#[derive(Debug, Clone)]
pub struct Trace {
    /// Its header.
    pub header: Header,
    /// Per decision, the snapshot seen and the plan made.
    pub turns: Vec<(Snapshot, serde_json::Value)>,
}

/// Why a trace cannot be replayed.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum TraceError {
    /// A line is not what the format says.
    #[error("line {line}: {why}")]
    Line {
        /// From 1.
        line: usize,
        /// What is wrong.
        why: String,
    },
    /// The header names a format or policy this herd cannot replay.
    #[error("{0}")]
    Header(String),
}

/// A trace file's text, gzip-compressed or not (the recorded fixtures in
/// `fixtures/traces/` are; read as text, a user got "stream did not
/// contain valid UTF-8").
pub fn read(path: &std::path::Path) -> std::io::Result<String> {
    use std::io::Read;
    let bytes = std::fs::read(path)?;
    if !bytes.starts_with(&[0x1f, 0x8b]) {
        return String::from_utf8(bytes).map_err(|e| std::io::Error::new(std::io::ErrorKind::InvalidData, e));
    }
    let mut text = String::new();
    flate2::read::GzDecoder::new(&bytes[..])
        .read_to_string(&mut text)
        .map_err(|e| std::io::Error::new(e.kind(), format!("gzip: {e}")))?;
    Ok(text)
}

/// Parses a trace file: one run per header line, each with the decision
/// lines that follow it (a batch with `--repeat` writes several runs).
/// Lines without a snapshot (traces from before format 1) are refused.
pub fn parse(text: &str) -> Result<Vec<Trace>, TraceError> {
    let bad = |line: usize, why: String| TraceError::Line { line: line + 1, why };
    let mut runs: Vec<Trace> = Vec::new();
    for (n, l) in text.lines().enumerate().filter(|(_, l)| !l.trim().is_empty()) {
        let v: serde_json::Value = serde_json::from_str(l).map_err(|e| bad(n, e.to_string()))?;
        if v.get("herd_trace").is_some() {
            let header: Header = serde_json::from_value(v).map_err(|e| bad(n, format!("header: {e}")))?;
            if header.herd_trace != VERSION {
                return Err(TraceError::Header(format!(
                    "trace format {} (this herd replays {VERSION})",
                    header.herd_trace
                )));
            }
            runs.push(Trace {
                header,
                turns: Vec::new(),
            });
            continue;
        }
        let Some(run) = runs.last_mut() else {
            return Err(bad(
                n,
                format!(
                    "a decision before any header: not a replayable trace (format {VERSION}, herd run/batch --trace)"
                ),
            ));
        };
        let snapshot: Snapshot =
            serde_json::from_value(v["snapshot"].clone()).map_err(|e| bad(n, format!("snapshot: {e}")))?;
        run.turns.push((snapshot, v["plan"].clone()));
    }
    if runs.is_empty() {
        return Err(TraceError::Header("no run in the trace".into()));
    }
    Ok(runs)
}

/// One turn whose replayed plan differs from the recorded one.
#[derive(Debug, Clone, PartialEq)]
pub struct Mismatch {
    /// The turn, from 0.
    pub turn: usize,
    /// The plan the run made.
    pub recorded: serde_json::Value,
    /// The plan the replay made.
    pub replayed: serde_json::Value,
}

/// Replays `trace` on `machine` through a fresh policy; returns the turns
/// replayed and those whose plans differ.
pub fn replay(trace: &Trace, machine: &Machine) -> Result<(usize, Vec<Mismatch>), TraceError> {
    let spec: PolicySpec = trace
        .header
        .policy
        .parse()
        .map_err(|e| TraceError::Header(format!("policy '{}': {e}", trace.header.policy)))?;
    let mut policy = spec.build();
    let h = &trace.header;
    let cfg = Config {
        period_ns: h.period_ns,
        min_period_ns: h.min_period_ns,
        max_period_ns: h.max_period_ns,
        seed: h.seed,
        horizon_ns: None,
        loop_share: None,
        guard: h.guard.then(GuardConfig::default),
        views_read: true,
    };
    let mut learning = h
        .learning
        .as_ref()
        .map(|l| Learning::new(l.profiles.clone(), l.peak_btr));
    let estimates = learning
        .as_ref()
        .map_or_else(Default::default, Learning::estimates);
    let mut world = Replay::new(trace.turns.iter().map(|(s, _)| s.clone()).collect());
    let mut replayed = Vec::new();
    herd_engine::run(
        policy.as_mut(),
        machine,
        &estimates,
        learning.as_mut(),
        &mut world,
        &mut NoMeter,
        &cfg,
        |_, plan| replayed.push(comparable(plan)),
    );
    let mismatches = trace
        .turns
        .iter()
        .map(|(_, p)| p)
        .zip(&replayed)
        .enumerate()
        .filter(|(_, (a, b))| a != b)
        .map(|(turn, (a, b))| Mismatch {
            turn,
            recorded: a.clone(),
            replayed: b.clone(),
        })
        .collect();
    if replayed.len() != trace.turns.len() {
        return Err(TraceError::Header(format!(
            "the replay made {} decisions for the trace's {}",
            replayed.len(),
            trace.turns.len()
        )));
    }
    Ok((replayed.len(), mismatches))
}
