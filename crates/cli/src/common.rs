//! What every subcommand shares: how a command fails (and so its exit
//! code), the machine it works on, and the live loop's configuration.

use std::path::PathBuf;

use clap::Args;

/// Where the machine description comes from; this machine by default.
#[derive(Args, Debug, Clone, Default)]
pub struct MachineArgs {
    /// An hwloc XML export, or a directory holding a Linux sys/ and proc/ tree.
    #[arg(long, value_name = "FILE.xml|DIR", conflicts_with = "synthetic")]
    pub input: Option<PathBuf>,
    /// A synthetic machine, e.g. 'package:2 core:4 pu:2' or
    /// 'package:1 core:6 pu:2 capacity:1.0 + core:8 capacity:0.6'.
    #[arg(long, value_name = "SPEC")]
    pub synthetic: Option<String>,
}

impl MachineArgs {
    /// Loads the machine these arguments name.
    pub fn load(&self) -> Result<herd_topo::Machine, Failure> {
        let loaded = match (&self.input, &self.synthetic) {
            (Some(path), _) => herd_topo::Machine::from_path(path),
            (None, Some(spec)) => herd_topo::Machine::synthetic(spec),
            (None, None) => return this_machine(),
        };
        loaded.map_err(|e| Failure::Input(e.into()))
    }
}

/// The machine herd runs on; failing to read it is herd's problem (exit 3).
pub fn this_machine() -> Result<herd_topo::Machine, Failure> {
    herd_topo::Machine::this_machine().map_err(|e| Failure::Internal(e.into()))
}

/// The CPUs this run may use: what a running `herd daemon` grants it
/// (held while the returned lease lives: keep it until the programs end;
/// a run under `linux` places nothing and asks for none),
/// else `machine` less the CPUs other herd instances on it hold
/// (`herd_runtime::peers`), said on stderr; the whole machine when they
/// hold none, or all of them. `what` and `policy` name the run to the
/// daemon; `attached` is the process `herd attach` manages.
pub fn around_other_herds(
    machine: herd_topo::Machine,
    what: &str,
    policy: &herd_policy::PolicySpec,
    attached: Option<i32>,
) -> (herd_topo::Machine, Option<crate::daemon_wire::Lease>) {
    // Under `linux` herd places nothing: it holds no CPU to ask for.
    let lease = if policy.is_baseline() {
        None
    } else {
        crate::daemon_wire::lease(&herd_runtime::peers::dir(), attached, what, policy.name(), 0)
    };
    match lease {
        Some(Ok(lease)) => match machine.restricted(&lease.cpus) {
            Ok(m) => {
                eprintln!("herd: the herd daemon gives this run CPUs {}", lease.cpus);
                return (m, Some(lease));
            }
            Err(e) => eprintln!(
                "herd: warning: the herd daemon gave CPUs {} this machine lacks ({e})",
                lease.cpus
            ),
        },
        Some(Err(e)) => eprintln!("herd: warning: the herd daemon gives this run no CPUs: {e}"),
        None => {}
    }
    let others = herd_runtime::peers::held_by_others(&herd_runtime::peers::dir());
    if others.is_empty() {
        return (machine, None);
    }
    let held = others
        .iter()
        .fold(herd_topo::CpuSet::default(), |a, (_, c)| a.union(c));
    let who: Vec<String> = others.iter().map(|(pid, c)| format!("{pid} holds {c}")).collect();
    let free = machine.all_cpus().difference(&held);
    let m = match machine.restricted(&free) {
        Ok(m) if !free.is_empty() => {
            eprintln!(
                "herd: other herd instances run here ({}): this run places on CPUs {free}",
                who.join(", ")
            );
            m
        }
        _ => {
            eprintln!(
                "herd: warning: other herd instances hold every CPU ({}): this run places on all of them",
                who.join(", ")
            );
            machine
        }
    };
    (m, None)
}

/// On or off.
#[derive(clap::ValueEnum, Debug, Clone, Copy, PartialEq, Eq)]
pub enum OnOff {
    /// On.
    On,
    /// Off.
    Off,
}

/// How the live loop runs: its period and its guard.
#[derive(Args, Debug, Clone)]
pub struct LoopArgs {
    /// Decision period in milliseconds.
    #[arg(long, default_value_t = 100.0)]
    pub period_ms: f64,
    /// The guard: compare the policy with the kernel in short probes and
    /// give the kernel the workload back while the policy loses more than
    /// 2% of its progress (heartbeats, instructions, or CPU time). Off: the
    /// policy as written.
    #[arg(long, value_enum, default_value = "on")]
    pub guard: OnOff,
    /// Memory follows placement: when the policy has kept a job's threads
    /// on other NUMA nodes than most of its pages for a second, herd moves
    /// those pages to the job's nodes (migrate_pages; at most once per job
    /// every 5 s, and twice as seldom after each move that left most of
    /// them away, up to 320 s); so too for a job herd pinned and then
    /// handed to the kernel, onto the nodes the kernel keeps it on. Off:
    /// pages stay where they were first touched, unless the kernel's NUMA
    /// balancing moves them. Only machines with several NUMA nodes.
    #[arg(long, value_enum, default_value = "on")]
    pub memory_follow: OnOff,
}

impl LoopArgs {
    /// `world`, with memory following placement or not, as asked.
    pub fn world(&self, world: herd_runtime::live::LiveWorld) -> herd_runtime::live::LiveWorld {
        match self.memory_follow {
            OnOff::On => world,
            OnOff::Off => world.without_memory_follow(),
        }
    }
}

/// The loop's configuration for `--period-ms` and `--guard`, checked.
/// The policy `spec` names, for a live run: one that decides from what
/// only the simulator knows (S1's exact solo profiles) is refused, not run
/// as something it is not.
pub fn live_policy(spec: &herd_policy::PolicySpec) -> Result<Box<dyn herd_policy::Policy>, Failure> {
    let p = spec.build();
    if p.wants_oracle() {
        return Err(Failure::Input(anyhow::anyhow!(
            "policy '{}' decides from exact solo profiles only the simulator has: simulation only \
             (live, bw:iabw learns them)",
            spec.name()
        )));
    }
    Ok(p)
}

/// Refuses a policy whose `cores` asks for more cores than `machine` has
/// (`pack:palm:cores=99999` was taken as "all").
pub fn check_cores(spec: &herd_policy::PolicySpec, machine: &herd_topo::Machine) -> Result<(), Failure> {
    if !spec.entry().params.iter().any(|p| p.key == "cores") {
        return Ok(());
    }
    match spec.args().number("cores") {
        Some(k) if k as usize > machine.cores().len() => Err(Failure::Input(anyhow::anyhow!(
            "policy '{}': cores={k}: this machine has {} cores",
            spec.name(),
            machine.cores().len()
        ))),
        _ => Ok(()),
    }
}

pub fn period_config(args: &LoopArgs) -> Result<herd_engine::Config, Failure> {
    let period_ms = args.period_ms;
    if !(period_ms.is_finite() && period_ms > 0.0) {
        return Err(Failure::Input(anyhow::anyhow!(
            "--period-ms must be a positive number, got {period_ms}"
        )));
    }
    let mut cfg = herd_engine::Config::with_period((period_ms * 1e6) as u64, 0);
    // On a real machine the loop keeps to 5% of one CPU, whatever period a
    // policy asks for (PALM starts at 0.125 ms, which observing and moving
    // 3 threads would turn into half a CPU). On the barrier benchmark with
    // 75 ms phases PALM took 1.04x TR's time at 5% and 1.11x at 20%; with
    // 2 ms phases 1.22x and 1.19x (medians of 10, scripts/s4-barrier.py
    // --sweep [--loop-share 20]): a share that suits every program does not
    // exist, and herd's CPU is the user's. `herd run --loop-share` sets it.
    cfg.loop_share = Some(LIVE_LOOP_SHARE);
    cfg.guard = (args.guard == OnOff::On).then(herd_engine::GuardConfig::default);
    Ok(cfg)
}

/// The share of one CPU herd's loop may take on a real machine.
pub const LIVE_LOOP_SHARE: f64 = 0.05;

/// Why a command failed; decides the exit code.
#[derive(Debug)]
pub enum Failure {
    /// Bad flags, files or specs (exit 2).
    Input(anyhow::Error),
    /// herd could not do its work on this machine (exit 3).
    Internal(anyhow::Error),
}

impl Failure {
    /// The exit code it leaves with.
    pub fn code(&self) -> u8 {
        match self {
            Failure::Input(_) => 2,
            Failure::Internal(_) => 3,
        }
    }
}

/// A program that could not be started: running out of processes, memory
/// or file descriptors is the machine's state (exit 3); anything else, such
/// as a missing program or working directory, is the user's input (exit 2).
pub fn spawn_failure(err: &std::io::Error, what: String) -> Failure {
    let failure = anyhow::anyhow!("{what}: {err}");
    match err.raw_os_error() {
        Some(libc::EAGAIN | libc::ENOMEM | libc::EMFILE | libc::ENFILE) => Failure::Internal(failure),
        _ => Failure::Input(failure),
    }
}

impl From<std::io::Error> for Failure {
    fn from(e: std::io::Error) -> Self {
        Failure::Internal(e.into())
    }
}

/// Now, in seconds since the Unix epoch (0 on a clock set before it), for
/// the records herd keeps.
pub fn unix_now_s() -> f64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0.0, |d| d.as_secs_f64())
}
