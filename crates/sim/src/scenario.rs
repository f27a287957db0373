//! Scenario files (TOML): the machine, the model, the workload, the
//! policies to compare and the seeds. The format is documented in
//! `docs/scenarios.md`; `scenarios/` has examples.
//!
//! Every error names the file, the line and the field.

use std::fmt;

use herd_model::ModelParams;
use herd_policy::Level;
use herd_topo::{CpuSet, Machine};
use serde::{Deserialize, Deserializer};

pub use crate::checked::{Count, NonNegative, Positive};

/// Where the scenario's machine comes from.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MachineSpec {
    /// A synthetic spec (see `herd topo --synthetic`).
    pub synthetic: Option<String>,
    /// An hwloc XML file, relative to the scenario file.
    pub xml: Option<String>,
}

/// Which signals the simulated sensor provides, to mimic machines that lack some.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct SensorSpec {
    /// Instructions, cycles and LLC counters.
    pub hw_counters: bool,
    /// Per-task memory traffic.
    pub mem_bandwidth: bool,
    /// Whole-machine energy (RAPL).
    pub energy: bool,
    /// How much the LLC misses a thread reports vary within a phase: each
    /// thread's count is scaled by a factor drawn from the run's seed every
    /// 200 ms in [1 - j, 1 + j] (S3: up to 5%). 0: exact.
    pub llc_jitter: f64,
}

impl Default for SensorSpec {
    fn default() -> Self {
        SensorSpec {
            hw_counters: true,
            mem_bandwidth: true,
            energy: true,
            llc_jitter: 0.0,
        }
    }
}

/// How a phase's work divides among a job's threads.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Split {
    /// Every thread retires `instructions` on its own (static partitioning).
    #[default]
    PerThread,
    /// `instructions` is the job's total, drawn by its threads as fast as
    /// each runs (a task queue, as MapReduce runtimes like Phoenix have);
    /// the phase ends for all threads together.
    Shared,
    /// Only the first thread retires `instructions`; the others wait,
    /// blocked, until it is done (Amdahl's serial part).
    Serial,
}

/// Where a phase's memory lives.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Memory {
    /// On the node of the CPU the thread runs on now: memory follows the
    /// thread at once (what NUMA balancing converges to).
    Local,
    /// Spread over every node.
    Interleaved,
    /// On node N.
    Node(usize),
    /// On the node where the thread ran once the policy first placed it in
    /// this run, and there however it moves later: first-touch allocation
    /// without NUMA balancing (Linux before 3.8, or `numa_balancing=0`).
    FirstTouch,
    /// S2's program model (`memory = { shared = 0.5 }`): this share of the
    /// requests, in millionths, to data all the job's threads share, on
    /// the node where the job's first thread first ran; the rest to each
    /// thread's own node.
    Shared(u32),
}

impl<'de> Deserialize<'de> for Memory {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        #[derive(Deserialize)]
        #[serde(untagged)]
        enum Raw {
            Name(String),
            Node(i64),
            Shared { shared: f64 },
        }
        match Raw::deserialize(d)? {
            Raw::Name(s) if s == "local" => Ok(Memory::Local),
            Raw::Name(s) if s == "interleaved" => Ok(Memory::Interleaved),
            Raw::Name(s) if s == "first-touch" => Ok(Memory::FirstTouch),
            Raw::Node(n) if n >= 0 => Ok(Memory::Node(n as usize)),
            Raw::Shared { shared } if (0.0..=1.0).contains(&shared) => {
                Ok(Memory::Shared((shared * 1e6).round() as u32))
            }
            _ => Err(serde::de::Error::custom(
                "must be \"local\", \"first-touch\", \"interleaved\", a node number or { shared = F } with F in [0, 1]",
            )),
        }
    }
}

/// One phase of a thread's life.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PhaseSpec {
    /// Instructions each thread retires in this phase (see `split`).
    pub instructions: Positive,
    /// How the instructions divide among the job's threads.
    #[serde(default)]
    pub split: Split,
    /// Instructions per cycle alone on the reference core.
    pub ipc: Positive,
    /// Memory traffic per instruction.
    pub bytes_per_instr: Option<NonNegative>,
    /// Memory traffic as bandwidth alone on the reference core (GB/s).
    pub bw_gbps: Option<NonNegative>,
    /// LLC misses / references, what an LLC-miss counter would show.
    pub llc_miss_rate: Option<NonNegative>,
    /// Where its memory lives.
    #[serde(default = "local")]
    pub memory: Memory,
}

fn local() -> Memory {
    Memory::Local
}

/// Barrier synchronisation among a job's threads.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct BarrierSpec {
    /// Instructions between barriers, per thread.
    pub every: Positive,
    /// How threads wait.
    pub kind: BarrierKind,
}

/// How a thread waits at a barrier.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum BarrierKind {
    /// Busy-waits: keeps its CPU, makes no progress.
    Spin,
    /// Sleeps: gives its CPU up.
    Block,
}

/// One job (program) of the workload.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct JobSpec {
    /// Its name in reports.
    pub name: String,
    /// The profile key; the name by default.
    pub program: Option<String>,
    /// Threads.
    #[serde(default = "one")]
    pub threads: Count,
    /// Identical copies of the job (named name#1, name#2, ...).
    #[serde(default = "one")]
    pub copies: Count,
    /// When it arrives, in seconds.
    #[serde(default = "zero")]
    pub arrival_s: NonNegative,
    /// Restart it when it finishes while other jobs still run (S3's method).
    #[serde(default)]
    pub restart: bool,
    /// Run the phase list this many times.
    #[serde(default = "one")]
    pub loops: Count,
    /// The CPUs it may use from the start (as `taskset` would), e.g. "0-3".
    pub cpus: Option<String>,
    /// Pin thread i to the i-th CPU of `cpus` (as OpenMP places would).
    #[serde(default)]
    pub pin_threads: bool,
    /// A memory-intensity hint, for policies on machines without counters.
    pub memory_hint: Option<Level>,
    /// Barrier synchronisation.
    pub barrier: Option<BarrierSpec>,
    /// Emit a heartbeat every this many instructions per thread.
    pub heartbeat_every: Option<Positive>,
    /// The phases every thread runs, in order.
    #[serde(default)]
    pub phase: Vec<toml::Spanned<PhaseSpec>>,
}

fn one() -> Count {
    Count(1)
}
fn zero() -> NonNegative {
    NonNegative(0.0)
}

/// The file as written.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ScenarioSpec {
    /// A name for reports; the file's stem by default.
    pub name: Option<String>,
    /// The machine.
    pub machine: toml::Spanned<MachineSpec>,
    /// Model parameters.
    #[serde(default)]
    pub model: ModelParams,
    /// Which signals the sensor gives.
    #[serde(default)]
    pub sensor: SensorSpec,
    /// Policies to compare; `linux` is always added as the reference.
    #[serde(default)]
    pub policies: Vec<String>,
    /// Seeds; each policy runs once per seed.
    #[serde(default)]
    pub seeds: Vec<u64>,
    /// Decision period in ms.
    #[serde(default = "ten")]
    pub period_ms: Positive,
    /// Stop simulating after this many seconds.
    pub horizon_s: Option<Positive>,
    /// The jobs.
    #[serde(default)]
    pub job: Vec<toml::Spanned<JobSpec>>,
    /// Run the workload again at each of these thread counts (S0's unit sweep).
    pub sweep: Option<toml::Spanned<SweepSpec>>,
    /// Run the workload this many times, each policy learning into its own
    /// profile store across the runs (S1's cross-run experiment).
    pub runs: Option<Count>,
    /// Before those runs, at most this many training runs fill the stores
    /// (S1's database initialisation; see `herd_sim::learning`). Default 0.
    pub train_runs: Option<u32>,
    /// The programs ran before: the profile store knows each one's
    /// whole-run LLC miss rate and solo time (S3's GB, HASS's offline
    /// signature). Default false: nothing is known before a run.
    #[serde(default)]
    pub history: bool,
    /// Whether policies run under herd's guard (`herd_engine::guard`), as
    /// users get them; `false`: each algorithm as published. Default true;
    /// `herd sim --guard` overrides it.
    #[serde(default = "yes")]
    pub guard: bool,
    /// S4's consolidation case study: a latency-critical service whose load
    /// moves the jobs' core budget (see `herd_sim::consolidation`).
    pub consolidation: Option<toml::Spanned<crate::consolidation::ConsolidationSpec>>,
}

/// S0's experiment: every job given each thread count in turn.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SweepSpec {
    /// Thread counts (units) to run every job with.
    pub threads: Vec<Count>,
}

fn yes() -> bool {
    true
}

fn ten() -> Positive {
    Positive(10.0)
}

/// Where a scenario's errors point: its text and file name. Shared by the
/// machine and cluster scenario parsers.
#[derive(Clone, Copy)]
pub(crate) struct Locate<'a> {
    pub(crate) text: &'a str,
    pub(crate) file: &'a str,
}

impl Locate<'_> {
    /// An error at byte `offset` (its line), about `field`.
    pub(crate) fn err(&self, offset: Option<usize>, field: Option<String>, why: String) -> ScenarioError {
        ScenarioError {
            file: self.file.to_string(),
            line: offset.map(|o| line_of(self.text, o)),
            field,
            why,
        }
    }

    /// An error about `field` of the table whose header `span` covers,
    /// pointing at the field's own line when the table writes it.
    pub(crate) fn at(&self, span: std::ops::Range<usize>, field: &str, why: String) -> ScenarioError {
        let leaf = field.rsplit('.').next().unwrap_or(field);
        let offset = field_offset(self.text, span.clone(), leaf).unwrap_or(span.start);
        self.err(Some(offset), Some(field.to_string()), why)
    }

    /// The text as `T`, a syntax or type error pointing at its key's line.
    pub(crate) fn parse<T: serde::de::DeserializeOwned>(&self) -> Result<T, ScenarioError> {
        toml::from_str(self.text).map_err(|e| {
            let offset = e.span().map(|s| s.start);
            self.err(
                offset,
                offset.and_then(|o| key_at(self.text, o)),
                e.message().to_string(),
            )
        })
    }
}

/// A scenario that failed to load.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ScenarioError {
    /// The file.
    pub file: String,
    /// 1-based line, when known.
    pub line: Option<usize>,
    /// The field, when known.
    pub field: Option<String>,
    /// What is wrong.
    pub why: String,
}

impl fmt::Display for ScenarioError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.file)?;
        if let Some(l) = self.line {
            write!(f, ":{l}")?;
        }
        if let Some(field) = &self.field {
            write!(f, ": field '{field}'")?;
        }
        write!(f, ": {}", self.why)
    }
}

impl std::error::Error for ScenarioError {}

fn line_of(text: &str, offset: usize) -> usize {
    text[..offset.min(text.len())]
        .bytes()
        .filter(|&b| b == b'\n')
        .count()
        + 1
}

/// The key written on the line holding `offset`, if the line is `key = value`.
fn key_at(text: &str, offset: usize) -> Option<String> {
    let start = text[..offset.min(text.len())].rfind('\n').map_or(0, |i| i + 1);
    let line = text[start..].lines().next()?;
    let (key, _) = line.split_once('=')?;
    let key = key.trim();
    (!key.is_empty() && !key.starts_with('[')).then(|| key.to_string())
}

/// The offset of the line `leaf = ...` in the table whose header `span`
/// covers (toml's spans for tables cover only the header): from the header
/// up to the next header.
fn field_offset(text: &str, span: std::ops::Range<usize>, leaf: &str) -> Option<usize> {
    let mut offset = span.end;
    for line in text.get(span.end..)?.split_inclusive('\n') {
        let trimmed = line.trim_start();
        if trimmed.starts_with('[') {
            return None;
        }
        if let Some((key, _)) = trimmed.split_once('=') {
            if key.trim() == leaf {
                return Some(offset);
            }
        }
        offset += line.len();
    }
    None
}

/// A validated, ready-to-simulate scenario.
#[derive(Debug, Clone)]
pub struct Scenario {
    /// Its name.
    pub name: String,
    /// The machine.
    pub machine: Machine,
    /// The model.
    pub model: ModelParams,
    /// The sensor's signals.
    pub sensor: SensorSpec,
    /// Policies to compare (`compare` runs `linux` first in any case).
    pub policies: Vec<crate::SimPolicy>,
    /// Seeds.
    pub seeds: Vec<u64>,
    /// Decision period.
    pub period_ns: u64,
    /// Simulation horizon.
    pub horizon_ns: Option<u64>,
    /// Jobs, copies expanded.
    pub jobs: Vec<Job>,
    /// Thread counts of a unit sweep (`[sweep]`); empty for none.
    pub sweep_threads: Vec<u32>,
    /// Runs of the cross-run learning experiment (`runs`); 1 for none.
    pub runs: u32,
    /// Most training runs before them (`train_runs`).
    pub train_runs: u32,
    /// Whether the profile store knows the programs (`history`).
    pub history: bool,
    /// Whether policies run under the guard (`guard`).
    pub guard: bool,
    /// Whether the guard makes no scheduled probes (`GuardConfig::trusting`): set by the learning runs when the guard across
    /// runs finds its makespans vouching for the policy; never from a file.
    pub guard_trusting: bool,
    /// The consolidation case study, when asked for: the run lasts until
    /// its trace ends and the jobs follow its core budget.
    pub consolidation: Option<crate::consolidation::Consolidation>,
}

/// A job, ready to simulate.
#[derive(Debug, Clone)]
pub struct Job {
    /// Its name (with `#k` for copies).
    pub name: String,
    /// Profile key.
    pub program: String,
    /// Threads.
    pub threads: u32,
    /// Arrival time.
    pub arrival_ns: u64,
    /// Restart on finish.
    pub restart: bool,
    /// Times the phase list runs.
    pub loops: u32,
    /// Initial affinity.
    pub cpus: CpuSet,
    /// Thread i pinned to the i-th CPU of `cpus`.
    pub pin_threads: bool,
    /// Memory hint.
    pub memory_hint: Option<Level>,
    /// Barrier.
    pub barrier: Option<(f64, BarrierKind)>,
    /// Heartbeat interval in instructions.
    pub heartbeat_every: Option<f64>,
    /// Phases.
    pub phases: Vec<Phase>,
}

/// A phase, with its model inputs derived.
#[derive(Debug, Clone, PartialEq)]
pub struct Phase {
    /// Instructions per thread, or the job's total (see `split`).
    pub instructions: f64,
    /// How they divide among the threads.
    pub split: Split,
    /// Core-only time per instruction on the reference core, in ns.
    pub core_ns_per_instr: f64,
    /// Cache-line requests per instruction.
    pub requests_per_instr: f64,
    /// LLC misses / references.
    pub llc_miss_rate: f64,
    /// Where memory lives.
    pub memory: Memory,
}

impl Phase {
    /// Unloaded time per instruction on the reference core, in ns.
    pub fn solo_ns_per_instr(&self, request_ns: f64) -> f64 {
        self.core_ns_per_instr + self.requests_per_instr * request_ns
    }

    /// Bus transactions (cache lines) per µs of CPU time running alone on
    /// the reference core (S1's BTR), without contention.
    pub fn solo_btr(&self, request_ns: f64) -> f64 {
        1e3 * self.requests_per_instr / self.solo_ns_per_instr(request_ns)
    }
}

/// The most jobs (copies counted) a scenario may hold.
pub const MAX_JOBS: usize = 10_000;
/// The most threads (over all jobs and copies) a scenario may hold.
pub const MAX_TASKS: usize = 100_000;
/// The most loop periods a run may need before its last job can finish:
/// at the simulator's 10-100 us a period (a debug build: 8 us for one job),
/// minutes to hours of wall time.
pub const MAX_TURNS: f64 = 1e7;
/// The shortest period: below a microsecond a period models nothing a
/// scheduler does (S4's PALM starts at 125 us).
pub const MIN_PERIOD_MS: f64 = 1e-3;
/// How much faster than the reference core any core may run, for a lower
/// bound on a job's time that holds on every machine herd models.
const FASTEST_CORE: f64 = 8.0;

/// A lower bound on when the last of `jobs` can finish, in ns: its arrival
/// plus its phases' work, every thread on a core `FASTEST_CORE` times the
/// reference, alone, each phase split over all its threads. Jobs that
/// restart run until the horizon and bound nothing here.
fn least_end_ns(jobs: &[Job]) -> f64 {
    jobs.iter()
        .filter(|j| !j.restart)
        .map(|j| {
            let work: f64 = j
                .phases
                .iter()
                .map(|p| p.instructions * p.core_ns_per_instr / f64::from(j.threads))
                .sum();
            j.arrival_ns as f64 + f64::from(j.loops) * work / FASTEST_CORE
        })
        .fold(0.0, f64::max)
}

/// LLC references per memory request when a phase gives no miss rate: one
/// miss per four references, a middle value for SPEC-like code.
const DEFAULT_LLC_MISS_RATE: f64 = 0.25;

impl Scenario {
    /// Parses and validates scenario text. `file` names it in errors;
    /// `load_xml` resolves `machine.xml` (the caller owns the file system).
    pub fn parse(
        text: &str,
        file: &str,
        load_xml: &dyn Fn(&str) -> Result<Machine, String>,
    ) -> Result<Scenario, ScenarioError> {
        let loc = Locate { text, file };
        let err = |offset, field, why| loc.err(offset, field, why);
        let at = |span, field: &str, why| loc.at(span, field, why);
        let spec: ScenarioSpec = loc.parse()?;

        let mspan = spec.machine.span();
        let mspec = spec.machine.get_ref();
        let machine = match (&mspec.synthetic, &mspec.xml) {
            (Some(s), None) => {
                Machine::synthetic(s).map_err(|e| at(mspan.clone(), "machine.synthetic", e.to_string()))?
            }
            (None, Some(x)) => load_xml(x).map_err(|e| at(mspan.clone(), "machine.xml", e))?,
            _ => {
                return Err(at(
                    mspan,
                    "machine",
                    "give exactly one of synthetic or xml".into(),
                ));
            }
        };
        spec.model
            .validate(&machine)
            .map_err(|(f, why)| err(None, Some(format!("model.{f}")), why))?;
        let jitter = spec.sensor.llc_jitter;
        if !(0.0..1.0).contains(&jitter) {
            return Err(err(
                None,
                Some("sensor.llc_jitter".into()),
                format!("must be in [0, 1), got {jitter}"),
            ));
        }
        if spec.job.is_empty() {
            return Err(err(
                None,
                Some("job".into()),
                "the scenario has no [[job]]".into(),
            ));
        }
        let mut jobs = Vec::new();
        // Threads over the jobs so far, for the bound below.
        let mut tasks_total = 0u64;
        for sj in &spec.job {
            let span = sj.span();
            let j = sj.get_ref();
            let field = |f: &str| format!("job '{}'.{f}", j.name);
            let cpus = match &j.cpus {
                None => machine.all_cpus().clone(),
                Some(list) => {
                    let set = CpuSet::parse_list(list)
                        .map_err(|e| at(span.clone(), &field("cpus"), e.to_string()))?;
                    if set.is_empty() || !set.is_subset(machine.all_cpus()) {
                        let why = format!(
                            "'{list}' is not a non-empty subset of the machine's CPUs {}",
                            machine.all_cpus()
                        );
                        return Err(at(span.clone(), &field("cpus"), why));
                    }
                    set
                }
            };
            if j.pin_threads && j.threads.0 as usize > cpus.len() {
                let why = format!(
                    "pins {} threads to {} CPUs ({cpus}): at most one thread per CPU",
                    j.threads.0,
                    cpus.len()
                );
                return Err(at(span.clone(), &field("pin_threads"), why));
            }
            if j.phase.is_empty() {
                return Err(at(
                    span.clone(),
                    &field("phase"),
                    "a job needs at least one [[job.phase]]".into(),
                ));
            }
            let mut phases = Vec::new();
            for sp in &j.phase {
                phases.push(
                    derive_phase(sp.get_ref(), &spec.model, &machine)
                        .map_err(|(f, why)| at(sp.span(), &field(&format!("phase.{f}")), why))?,
                );
            }
            // Bounds said up front, not found by the kernel's OOM killer:
            // the simulator's state grows with the jobs and tasks (some of
            // it with their square: contention among co-runners).
            let tasks_before = tasks_total;
            let adding_jobs = u64::from(j.copies.0);
            if jobs.len() as u64 + adding_jobs > MAX_JOBS as u64 {
                let why = format!(
                    "{} jobs in all (copies counted) is more than herd's simulator holds ({MAX_JOBS})",
                    jobs.len() as u64 + adding_jobs
                );
                return Err(at(span.clone(), &field("copies"), why));
            }
            if tasks_before + adding_jobs * u64::from(j.threads.0) > MAX_TASKS as u64 {
                let why = format!(
                    "{} threads in all (threads x copies, summed over jobs) is more than herd's simulator \
                     holds ({MAX_TASKS})",
                    tasks_before + adding_jobs * u64::from(j.threads.0)
                );
                return Err(at(span.clone(), &field("threads"), why));
            }
            tasks_total += adding_jobs * u64::from(j.threads.0);
            for copy in 0..j.copies.0 {
                let name = if j.copies.0 > 1 {
                    format!("{}#{}", j.name, copy + 1)
                } else {
                    j.name.clone()
                };
                jobs.push(Job {
                    name,
                    program: j.program.clone().unwrap_or_else(|| j.name.clone()),
                    threads: j.threads.0,
                    arrival_ns: (j.arrival_s.0 * 1e9) as u64,
                    restart: j.restart,
                    loops: j.loops.0,
                    cpus: cpus.clone(),
                    pin_threads: j.pin_threads,
                    memory_hint: j.memory_hint,
                    barrier: j.barrier.as_ref().map(|b| (b.every.0, b.kind)),
                    heartbeat_every: j.heartbeat_every.map(|h| h.0),
                    phases: phases.clone(),
                });
            }
        }
        let mut sweep_threads = Vec::new();
        if let Some(sw) = &spec.sweep {
            sweep_threads = sw.get_ref().threads.iter().map(|c| c.0).collect();
            let where_ = |why: String| at(sw.span(), "sweep.threads", why);
            if sweep_threads.is_empty() {
                return Err(where_("give at least one thread count".into()));
            }
            let most = sweep_threads.iter().copied().max().unwrap_or(1);
            if let Some(j) = jobs
                .iter()
                .find(|j| j.pin_threads && most as usize > j.cpus.len())
            {
                return Err(where_(format!(
                    "{most} threads, but job '{}' pins its threads to {} CPUs",
                    j.name,
                    j.cpus.len()
                )));
            }
        }
        let policies = spec
            .policies
            .iter()
            .map(|p| p.parse())
            .collect::<Result<Vec<crate::SimPolicy>, _>>()
            .map_err(|e| err(None, Some("policies".into()), e.to_string()))?;
        let consolidation = match &spec.consolidation {
            None => None,
            Some(c) => Some(
                crate::consolidation::Consolidation::new(c.get_ref(), machine.cores().len() as u32).map_err(
                    |(f, why)| {
                        let field = if f == "consolidation" {
                            f.to_string()
                        } else {
                            format!("consolidation.{f}")
                        };
                        at(c.span(), &field, why)
                    },
                )?,
            ),
        };
        if spec.period_ms.0 < MIN_PERIOD_MS {
            return Err(err(
                None,
                Some("period_ms".into()),
                format!(
                    "must be at least {MIN_PERIOD_MS} (1 us), got {}",
                    spec.period_ms.0
                ),
            ));
        }
        let period_ns = (spec.period_ms.0 * 1e6) as u64;
        let horizon_ns = match (spec.horizon_s, &consolidation) {
            (h, Some(c)) => Some(h.map_or(c.end_ns(), |h| ((h.0 * 1e9) as u64).min(c.end_ns()))),
            (h, None) => h.map(|h| (h.0 * 1e9) as u64),
        };
        // A run that cannot end in reasonable time is refused with the
        // reason, not left to spin: the loop takes a turn per period until
        // the last job can have finished (or the horizon).
        let least_end_ns = horizon_ns.unwrap_or(u64::MAX).min(least_end_ns(&jobs) as u64);
        let turns = least_end_ns as f64 / period_ns as f64;
        if turns > MAX_TURNS {
            return Err(err(
                None,
                Some("period_ms".into()),
                format!(
                    "the run lasts at least {:.3e} s of simulated time (the latest arrival, or the work of the \
                     longest job on its fastest core), {turns:.1e} periods of {} ms: more than herd's simulator \
                     runs ({MAX_TURNS:.0e} periods); give a longer period_ms, a horizon_s, or less work",
                    least_end_ns as f64 * 1e-9,
                    spec.period_ms.0
                ),
            ));
        }
        let name = spec.name.unwrap_or_else(|| {
            std::path::Path::new(file)
                .file_stem()
                .map_or(file.to_string(), |s| s.to_string_lossy().into_owned())
        });
        Ok(Scenario {
            name,
            machine,
            model: spec.model,
            sensor: spec.sensor,
            policies,
            seeds: if spec.seeds.is_empty() {
                vec![1]
            } else {
                spec.seeds
            },
            period_ns,
            // A consolidation study lasts as long as its trace.
            horizon_ns,
            jobs,
            sweep_threads,
            runs: spec.runs.map_or(1, |r| r.0),
            train_runs: spec.train_runs.unwrap_or(0),
            history: spec.history,
            guard: spec.guard,
            guard_trusting: false,
            consolidation,
        })
    }
}

impl Job {
    /// The job run with `k` threads and the same total work: per-thread
    /// phases and the instructions between barriers and heartbeats grow by
    /// threads / k (shared and serial phases are totals already), so the
    /// job still meets at the same number of barriers.
    pub fn with_threads(&self, k: u32) -> Job {
        let k = k.max(1);
        let scale = f64::from(self.threads) / f64::from(k);
        let mut j = self.clone();
        j.threads = k;
        for p in &mut j.phases {
            if p.split == Split::PerThread {
                p.instructions *= scale;
            }
        }
        j.barrier = self.barrier.map(|(every, kind)| (every * scale, kind));
        j.heartbeat_every = self.heartbeat_every.map(|h| h * scale);
        j
    }

    /// LLC misses over references across one pass of its phases, weighted
    /// by instructions, as a whole run would count them; `None` when no
    /// phase references the LLC.
    pub fn whole_run_llc_miss_rate(&self) -> Option<f64> {
        let (mut misses, mut refs) = (0.0, 0.0);
        for p in &self.phases {
            let m = p.instructions * p.requests_per_instr;
            if p.llc_miss_rate > 0.0 {
                misses += m;
                refs += m / p.llc_miss_rate;
            }
        }
        (refs > 0.0).then(|| misses / refs)
    }
}

/// Splits a phase's solo time into core time and memory requests.
fn derive_phase(p: &PhaseSpec, model: &ModelParams, m: &Machine) -> Result<Phase, (String, String)> {
    let solo_ns = 1.0 / (p.ipc.0 * model.freq_ghz);
    let bytes_per_instr = match (p.bytes_per_instr, p.bw_gbps) {
        (Some(b), None) => b.0,
        // GB/s is bytes per ns; divided by instructions per ns.
        (None, Some(bw)) => bw.0 * solo_ns,
        (None, None) => 0.0,
        (Some(_), Some(_)) => {
            return Err((
                "bw_gbps".into(),
                "give bytes_per_instr or bw_gbps, not both".into(),
            ));
        }
    };
    let requests = bytes_per_instr / herd_model::params::LINE_BYTES;
    let core_ns = solo_ns - requests * model.request_ns;
    if core_ns <= 0.0 {
        let max_gbps = herd_model::params::LINE_BYTES / model.request_ns;
        let why = format!(
            "demands {:.2} GB/s alone, but one core streams at most {max_gbps:.2} GB/s (64 B / request_ns)",
            bytes_per_instr / solo_ns
        );
        return Err(("bw_gbps".into(), why));
    }
    if let Memory::Node(n) = p.memory {
        if n >= m.numa_nodes().len() {
            return Err((
                "memory".into(),
                format!(
                    "node {n} does not exist (the machine has {})",
                    m.numa_nodes().len()
                ),
            ));
        }
    }
    let llc_miss_rate = p.llc_miss_rate.map_or(DEFAULT_LLC_MISS_RATE, |r| r.0);
    if llc_miss_rate > 1.0 {
        return Err((
            "llc_miss_rate".into(),
            format!("must be in [0, 1], got {llc_miss_rate}"),
        ));
    }
    Ok(Phase {
        instructions: p.instructions.0,
        split: p.split,
        core_ns_per_instr: core_ns,
        requests_per_instr: requests,
        llc_miss_rate,
        memory: p.memory,
    })
}
