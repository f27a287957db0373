//! A scenario from a live run's trace (`herd sim --from-trace`, issue 26):
//! what `herd run --trace` or `herd batch --trace` observed, written as a
//! scenario the simulator can run under every policy.
//!
//! What a job becomes:
//! - its threads: the tasks that used at least a tenth of the CPU time of
//!   its busiest task (sleeping helpers, such as a sysbench main thread or
//!   a stress-ng parent, are left out: the simulator has no sleep);
//! - its arrival: when the trace first saw it;
//! - its work: the CPU time its threads used while the trace watched, cut
//!   into phases of at least a second (merged while their rates differ by
//!   less than a quarter). With instruction and cycle counters a phase has
//!   the counted instructions and IPC, and with memory traffic counted its
//!   bytes per instruction; without them a phase is that CPU time at IPC 1
//!   on the reference core, with no memory traffic (the job's memory hint
//!   is kept for the policies that read it).
//!
//! What the trace cannot know, and the scenario therefore lacks (each is
//! said in the file's comments where it applies): time a job spent
//! sleeping or waiting on I/O (its CPU work runs back to back), work done
//! after the last decision the trace recorded, barriers and heartbeats,
//! where its memory was first touched, and anything another program on
//! the machine did. Rates are what the run measured beside its co-runners,
//! not alone: the simulator then adds contention on top of contention
//! already in them (a scenario from a contended run is pessimistic).
//!
//! Pure: the caller reads the trace and describes the machine.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use herd_policy::{Level, Snapshot};
use herd_topo::Machine;

use crate::trace::Trace;

/// A job's tasks that used less than this share of its busiest task's CPU
/// time are helpers, not threads.
const HELPER_SHARE: f64 = 0.1;
/// The shortest phase, in seconds of the job's CPU time per thread.
const MIN_PHASE_S: f64 = 1.0;
/// Adjacent phases whose rates differ by less than this are one.
const SAME_RATE: f64 = 0.25;
/// The reference core's frequency when the trace has no cycle counts:
/// the simulator's default.
const DEFAULT_FREQ_GHZ: f64 = 2.5;

/// Why a trace gives no scenario.
#[derive(Debug, thiserror::Error, PartialEq)]
pub enum FromTraceError {
    /// No decision carried a full snapshot.
    #[error("the trace records no observation (no decision with a full snapshot)")]
    Empty,
    /// No job used any CPU time.
    #[error("no job in the trace used CPU time")]
    NoWork,
}

/// One job's counts over one window of turns.
#[derive(Debug, Clone, Copy, Default)]
struct Counts {
    cpu_ns: f64,
    instructions: Option<f64>,
    cycles: Option<f64>,
    mem_bytes: Option<f64>,
}

impl Counts {
    fn add(&mut self, o: &herd_policy::Obs) {
        self.cpu_ns += o.cpu_time_ns as f64;
        let add = |a: Option<f64>, b: Option<u64>| Some(a.unwrap_or(0.0) + b? as f64);
        self.instructions = add(self.instructions, o.instructions);
        self.cycles = add(self.cycles, o.cycles);
        self.mem_bytes = add(self.mem_bytes, o.mem_bytes);
    }

    fn plus(&self, b: &Counts) -> Counts {
        let sum = |x: Option<f64>, y: Option<f64>| Some(x? + y?);
        Counts {
            cpu_ns: self.cpu_ns + b.cpu_ns,
            instructions: sum(self.instructions, b.instructions),
            cycles: sum(self.cycles, b.cycles),
            mem_bytes: sum(self.mem_bytes, b.mem_bytes),
        }
    }

    /// IPC and bytes per instruction, where counted.
    fn rates(&self) -> (Option<f64>, Option<f64>) {
        let ipc = self
            .instructions
            .zip(self.cycles)
            .filter(|(_, c)| *c > 0.0)
            .map(|(i, c)| i / c);
        let bpi = self
            .mem_bytes
            .zip(self.instructions)
            .filter(|(_, i)| *i > 0.0)
            .map(|(b, i)| b / i);
        (ipc, bpi)
    }
}

/// What the trace saw of one job.
#[derive(Debug, Default)]
struct Seen {
    name: String,
    program: String,
    hint: Option<Level>,
    first_ns: u64,
    last_ns: u64,
    /// CPU time per task over the whole trace.
    task_cpu_ns: BTreeMap<u64, f64>,
    /// Per turn, the job's counts (its helpers' included: a turn cannot
    /// tell them apart before the whole trace is read).
    turns: Vec<(u64, BTreeMap<u64, herd_policy::Obs>)>,
}

/// The scenario, as TOML text, that `trace` describes on the machine that
/// `machine_toml` (the `[machine]` table's body, e.g. `synthetic = "..."`)
/// names. `source` names the trace in the file's comments.
pub fn scenario(trace: &Trace, machine_toml: &str, source: &str) -> Result<String, FromTraceError> {
    let full: Vec<&Snapshot> = trace
        .turns
        .iter()
        .map(|(s, _)| s)
        .filter(|s| !s.progress_only && s.period_ns > 0)
        .collect();
    let first = full.first().ok_or(FromTraceError::Empty)?;
    // Times are from the run's start; a job's arrival is its start.
    let start_ns = full
        .iter()
        .flat_map(|s| s.jobs.iter().map(|j| j.arrival_ns))
        .min()
        .unwrap_or(0)
        .min(first.now_ns.saturating_sub(first.period_ns));
    let mut jobs: BTreeMap<u32, Seen> = BTreeMap::new();
    for s in &full {
        for j in &s.jobs {
            jobs.entry(j.id).or_insert_with(|| Seen {
                name: j.name.clone(),
                program: j.program.clone(),
                hint: j.memory_hint,
                first_ns: j.arrival_ns,
                ..Seen::default()
            });
        }
        let mut by_job: BTreeMap<u32, BTreeMap<u64, herd_policy::Obs>> = BTreeMap::new();
        for t in &s.tasks {
            by_job.entry(t.job).or_default().insert(t.id, t.obs.clone());
        }
        for (job, obs) in by_job {
            if let Some(seen) = jobs.get_mut(&job) {
                // Its last turn with a task present.
                seen.last_ns = s.now_ns;
                for (id, o) in &obs {
                    *seen.task_cpu_ns.entry(*id).or_default() += o.cpu_time_ns as f64;
                }
                seen.turns.push((s.now_ns, obs));
            }
        }
    }
    // The reference frequency: the trace's own cycles per CPU-ns, where
    // counted, so a phase's time alone is the CPU time it took.
    let (cycles, cpu_ns) = full
        .iter()
        .flat_map(|s| &s.tasks)
        .filter_map(|t| Some((t.obs.cycles? as f64, t.obs.cpu_time_ns as f64)))
        .fold((0.0, 0.0), |(c, n), (a, b)| (c + a, n + b));
    let freq_ghz = if cycles > 0.0 && cpu_ns > 0.0 {
        cycles / cpu_ns
    } else {
        DEFAULT_FREQ_GHZ
    };

    let period_ms = (trace.header.period_ns as f64 * 1e-6).max(0.001);
    let last_ns = full.last().map_or(0, |s| s.now_ns);
    let mut out = String::new();
    let _ = writeln!(
        out,
        "# Written by `herd sim --from-trace {source}` from a live run under {}:\n\
         # each job is what the trace saw it do (crates/cli/src/from_trace.rs says how,\n\
         # and what a trace cannot know).",
        trace.header.policy
    );
    let _ = writeln!(out, "name = \"{}\"", toml_escape(&stem(source)));
    let policies = if trace.header.policy == "linux" {
        String::new()
    } else {
        format!("\"{}\"", toml_escape(&trace.header.policy))
    };
    let _ = writeln!(out, "policies = [{policies}]\nperiod_ms = {period_ms}\n");
    let _ = writeln!(out, "[machine]\n{machine_toml}\n");
    let header = out;
    let mut out = String::new();
    // The most traffic a phase makes per ns of CPU, for the model's
    // per-core limit below.
    let mut max_gbps: f64 = 0.0;
    let mut any_work = false;
    for seen in jobs.values() {
        let busiest = seen.task_cpu_ns.values().copied().fold(0.0, f64::max);
        if busiest <= 0.0 {
            continue;
        }
        let threads: Vec<u64> = seen
            .task_cpu_ns
            .iter()
            .filter(|(_, ns)| **ns >= HELPER_SHARE * busiest)
            .map(|(id, _)| *id)
            .collect();
        let phases = phases(seen, &threads);
        if phases.is_empty() {
            continue;
        }
        any_work = true;
        let n = threads.len();
        let helpers = seen.task_cpu_ns.len() - n;
        let life_s = seen.last_ns.saturating_sub(seen.first_ns) as f64 * 1e-9;
        let busy_s: f64 = threads.iter().map(|id| seen.task_cpu_ns[id]).sum::<f64>() * 1e-9;
        let _ = writeln!(out, "[[job]]");
        let _ = writeln!(
            out,
            "# seen {life_s:.2} s; its {n} thread(s) on a CPU {:.0}% of that{}",
            100.0 * busy_s / (life_s * n as f64).max(1e-9),
            if helpers > 0 {
                format!("; {helpers} helper task(s) left out (under a tenth of the busiest's CPU time)")
            } else {
                String::new()
            }
        );
        if seen.last_ns < last_ns {
            let _ = writeln!(
                out,
                "# it ended between two decisions: its work after {:.3} s is not in the trace",
                seen.last_ns.saturating_sub(start_ns) as f64 * 1e-9
            );
        }
        let _ = writeln!(out, "name = \"{}\"", toml_escape(&seen.name));
        let _ = writeln!(out, "program = \"{}\"", toml_escape(&seen.program));
        let _ = writeln!(out, "threads = {n}");
        let _ = writeln!(
            out,
            "arrival_s = {:.3}",
            seen.first_ns.saturating_sub(start_ns) as f64 * 1e-9
        );
        if let Some(h) = seen.hint {
            let _ = writeln!(out, "memory_hint = \"{}\"", level_word(h));
        }
        for c in &phases {
            let (ipc, bpi) = c.rates();
            // Without counts: the CPU time at IPC 1 on the reference core.
            // With them: the IPC measured, memory stalls included, as a
            // scenario's `ipc` is (the simulator takes the traffic's own
            // time out of it).
            let instructions = c.instructions.filter(|i| *i > 0.0).unwrap_or(c.cpu_ns * freq_ghz);
            let _ = writeln!(out, "[[job.phase]]");
            let _ = writeln!(out, "instructions = {:.4e}", instructions / n as f64);
            let _ = writeln!(out, "ipc = {:.4}", ipc.unwrap_or(1.0));
            if let Some(b) = bpi {
                let _ = writeln!(out, "bytes_per_instr = {b:.4}");
                max_gbps = max_gbps.max(b * ipc.unwrap_or(1.0) * freq_ghz);
            }
        }
        let _ = writeln!(out);
    }
    if !any_work {
        return Err(FromTraceError::NoWork);
    }
    // The model lets one core stream at most a line per `request_ns`
    // (10 GB/s at its default): a program measured faster gets a shorter
    // unloaded request time, or its scenario would be refused.
    let default_ns = herd_model::ModelParams::default().request_ns;
    let limit_gbps = herd_model::params::LINE_BYTES / default_ns;
    let model = if max_gbps > 0.9 * limit_gbps {
        let request_ns = 0.9 * herd_model::params::LINE_BYTES / max_gbps;
        format!(
            "[model]\nfreq_ghz = {freq_ghz:.3}\n# a phase streamed {max_gbps:.1} GB/s on one core; the default \
             request time ({default_ns} ns) allows {limit_gbps:.1}\nrequest_ns = {request_ns:.4}\n"
        )
    } else {
        format!("[model]\nfreq_ghz = {freq_ghz:.3}\n")
    };
    Ok(format!("{header}{model}\n{out}"))
}

/// The job's threads' counts cut into phases: windows of at least
/// [`MIN_PHASE_S`] of CPU time per thread, adjacent ones merged while
/// their rates stay within [`SAME_RATE`] (only counted rates can differ).
fn phases(seen: &Seen, threads: &[u64]) -> Vec<Counts> {
    let n = threads.len().max(1) as f64;
    let mut windows: Vec<Counts> = Vec::new();
    let mut open = Counts::default();
    for (_, obs) in &seen.turns {
        for id in threads {
            if let Some(o) = obs.get(id) {
                open.add(o);
            }
        }
        if open.cpu_ns / n >= MIN_PHASE_S * 1e9 {
            windows.push(std::mem::take(&mut open));
        }
    }
    if open.cpu_ns > 0.0 {
        match windows.last_mut() {
            // A short remainder joins the last phase.
            Some(last) => *last = last.plus(&open),
            None => windows.push(open),
        }
    }
    let mut merged: Vec<Counts> = Vec::new();
    for w in windows {
        let same = merged.last().is_some_and(|m| {
            let (a, b) = (m.rates(), w.rates());
            close(a.0, b.0) && close(a.1, b.1)
        });
        if same {
            let last = merged.last_mut().expect("checked above");
            *last = last.plus(&w);
        } else {
            merged.push(w);
        }
    }
    merged
}

/// Whether two rates are within [`SAME_RATE`] of each other (or both unknown).
fn close(a: Option<f64>, b: Option<f64>) -> bool {
    match (a, b) {
        (Some(a), Some(b)) => (a - b).abs() <= SAME_RATE * a.abs().max(b.abs()),
        (None, None) => true,
        _ => false,
    }
}

fn level_word(l: Level) -> &'static str {
    match l {
        Level::Low => "low",
        Level::Medium => "medium",
        Level::High => "high",
    }
}

fn stem(source: &str) -> String {
    let base = source.rsplit('/').next().unwrap_or(source);
    base.split('.').next().unwrap_or(base).to_string()
}

/// A string as a TOML basic string's contents.
fn toml_escape(s: &str) -> String {
    let mut out = String::new();
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            c if c.is_control() => {
                let _ = write!(out, "\\u{:04X}", c as u32);
            }
            c => out.push(c),
        }
    }
    out
}

/// The `[machine]` table's body for `m` as a synthetic spec, when `m` is
/// regular enough for one (one core kind, the same count of NUMA nodes per
/// package, cores per node and threads per core); `None` otherwise (give
/// the machine as an hwloc XML file then).
pub fn synthetic_machine(m: &Machine) -> Option<String> {
    if m.kinds().len() != 1 {
        return None;
    }
    let packages = m.packages().len().max(1);
    let nodes = m.numa_nodes().len().max(1);
    let cores = m.cores().len();
    let cpus = m.cpus().len();
    if nodes % packages != 0 || cores % nodes != 0 || cpus % cores != 0 {
        return None;
    }
    let spec = format!(
        "package:{packages} numa:{} core:{} pu:{}",
        nodes / packages,
        cores / nodes,
        cpus / cores
    );
    // Only if it gives back the same shape.
    let again = Machine::synthetic(&spec).ok()?;
    let shape = |m: &Machine| {
        (
            m.packages().len(),
            m.numa_nodes().len(),
            m.cores().len(),
            m.cpus().len(),
        )
    };
    (shape(&again) == shape(m)).then(|| format!("synthetic = \"{spec}\""))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// A trace line: one turn at `now_s` of `period_s`, each task `(id,
    /// job, cpu_s, instructions, cycles, mem_bytes)`.
    fn turn(now_s: f64, period_s: f64, tasks: &[(u64, u32, f64, f64, f64, f64)]) -> String {
        let tasks: Vec<_> = tasks
            .iter()
            .map(|&(id, job, cpu, ins, cyc, mem)| {
                json!({"id": id, "job": job, "rank": 0, "state": "runnable", "cpu": 0, "heartbeats": null,
                       "obs": {"cpu_time_ns": (cpu * 1e9) as u64, "wait_ns": 0, "instructions": ins as u64,
                               "cycles": cyc as u64, "llc_refs": null, "llc_misses": null,
                               "mem_bytes": mem as u64, "migrations": 0, "code_samples": null}})
            })
            .collect();
        let jobs: Vec<_> = (0..2)
            .map(|j| {
                json!({"id": j, "name": format!("j{j}"), "program": format!("p{j}"), "arrival_ns": 0,
                            "memory_hint": null, "threads_declared": null})
            })
            .collect();
        json!({"plan": {}, "snapshot": {"now_ns": (now_s * 1e9) as u64, "period_ns": (period_s * 1e9) as u64,
               "tasks": tasks, "jobs": jobs, "system": {"mem_bytes": null, "energy_j": null}}})
        .to_string()
    }

    fn header() -> String {
        json!({"herd_trace": crate::trace::VERSION, "policy": "linux", "period_ns": 500_000_000u64,
               "min_period_ns": 100_000, "max_period_ns": 10_000_000_000u64, "seed": 0, "guard": true,
               "learning": null})
        .to_string()
    }

    #[test]
    fn a_counted_trace_gives_threads_phases_and_rates() {
        // Job 0: two workers and a sleeping helper; compute-bound for 2 s
        // (IPC 2, no traffic), then memory-bound for 2 s (IPC 0.5, 4 B per
        // instruction). Job 1: one thread, IPC 1 throughout, gone after 1 s.
        let mut lines = vec![header()];
        for k in 0..8 {
            let t = 0.5 * (k + 1) as f64;
            let (ipc, bpi) = if k < 4 { (2.0, 0.0) } else { (0.5, 4.0) };
            let cyc = 0.5 * 3e9;
            let ins = cyc * ipc;
            let mut tasks = vec![
                (1, 0, 0.5, ins, cyc, ins * bpi),
                (2, 0, 0.5, ins, cyc, ins * bpi),
                (3, 0, 0.001, 1e3, 3e6, 0.0),
            ];
            if k < 2 {
                tasks.push((4, 1, 0.5, cyc, cyc, 0.0));
            }
            lines.push(turn(t, 0.5, &tasks));
        }
        let trace = &crate::trace::parse(&lines.join("\n")).unwrap()[0];
        let toml = scenario(trace, "synthetic = \"core:4\"", "t.jsonl").unwrap();
        let s = herd_sim::Scenario::parse(&toml, "t", &|_| Err("no xml".into())).unwrap();
        assert_eq!(s.jobs.len(), 2, "{toml}");
        assert_eq!(s.jobs[0].threads, 2, "the helper is left out: {toml}");
        assert_eq!(s.jobs[0].phases.len(), 2, "two phases: {toml}");
        let (a, b) = (&s.jobs[0].phases[0], &s.jobs[0].phases[1]);
        // Each worker's instructions: 4 turns x 1.5e9 cycles x IPC.
        assert!(
            (a.instructions - 4.0 * 1.5e9 * 2.0).abs() < 1e6,
            "{}",
            a.instructions
        );
        assert!(
            (b.instructions - 4.0 * 1.5e9 * 0.5).abs() < 1e6,
            "{}",
            b.instructions
        );
        assert!(a.requests_per_instr == 0.0 && b.requests_per_instr > 0.0);
        // The cycles per CPU-ns counted: 3 GHz.
        assert!((s.model.freq_ghz - 3.0).abs() < 0.01, "{}", s.model.freq_ghz);
        assert!(toml.contains("it ended between two decisions"), "{toml}");
        // Each phase takes the CPU time it took live, 2 s each, and more
        // for the two workers' traffic together (6 GB/s each): their rates
        // were measured beside each other, so that contention counts twice
        // (the module docs' limits). 4.50 s when this was written.
        let r = herd_sim::run_one(&s, &herd_sim::SimPolicy::linux(), 1).unwrap();
        assert!(r.makespan_s > 3.99 && r.makespan_s < 4.6, "{}", r.makespan_s);
    }

    #[test]
    fn a_program_streaming_faster_than_the_models_core_limit_still_simulates() {
        // 40 bytes an instruction at IPC 1 and 3 GHz: 120 GB/s a core,
        // past the default model's 10.
        let mut lines = vec![header()];
        for k in 0..4 {
            let cyc = 0.5 * 3e9;
            lines.push(turn(
                0.5 * (k + 1) as f64,
                0.5,
                &[(1, 0, 0.5, cyc, cyc, cyc * 40.0)],
            ));
        }
        let trace = &crate::trace::parse(&lines.join("\n")).unwrap()[0];
        let toml = scenario(trace, "synthetic = \"core:2\"", "t").unwrap();
        assert!(toml.contains("request_ns = "), "{toml}");
        herd_sim::Scenario::parse(&toml, "t", &|_| Err("no xml".into())).unwrap();
    }

    #[test]
    fn a_trace_without_observations_is_refused() {
        let trace = &crate::trace::parse(&header()).unwrap()[0];
        assert_eq!(
            scenario(trace, "synthetic = \"core:2\"", "t"),
            Err(FromTraceError::Empty)
        );
    }

    #[test]
    fn regular_machines_have_a_synthetic_spec_and_hybrid_ones_none() {
        let m = Machine::synthetic("package:2 numa:2 core:4 pu:2").unwrap();
        assert_eq!(
            synthetic_machine(&m).as_deref(),
            Some("synthetic = \"package:2 numa:2 core:4 pu:2\"")
        );
        let hybrid =
            Machine::synthetic("package:1 core:2 capacity:1.0 kind:P + core:4 capacity:0.5 kind:E").unwrap();
        assert_eq!(synthetic_machine(&hybrid), None);
    }
}
