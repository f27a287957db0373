//! `--pause` and `--confine`: which kernel mechanisms `herd run` and `herd
//! batch` use for the programs they start.

use clap::{Args, ValueEnum};
use herd_runtime::cgroup::{Cgroups, Request, Version};
use herd_runtime::doctor::{self, CpusetBackend, PauseBackend, Roots};
use herd_runtime::live::LiveWorld;

use crate::common::Failure;

/// How to pause programs.
#[derive(ValueEnum, Debug, Clone, Copy, PartialEq, Eq)]
pub enum PauseArg {
    /// The cgroup freezer where `herd doctor` finds one, else signals.
    Auto,
    /// SIGSTOP/SIGCONT to the process.
    Signals,
    /// The cgroup freezer (v2 `cgroup.freeze`, else v1 `freezer`); an error where there is none.
    Freezer,
}

/// How to confine programs to CPUs.
#[derive(ValueEnum, Debug, Clone, Copy, PartialEq, Eq)]
pub enum ConfineArg {
    /// A cgroup cpuset where `herd doctor` finds one, else affinity only.
    Auto,
    /// Per-thread sched_setaffinity only.
    Affinity,
    /// A cpuset per program (children and new threads stay inside) plus per-thread affinity.
    Cgroup,
}

/// The mechanism flags of `herd run` and `herd batch`.
#[derive(Args, Debug, Clone)]
pub struct MechanismArgs {
    /// How to pause programs that wait their turn.
    #[arg(long, value_enum, default_value_t = PauseArg::Auto)]
    pause: PauseArg,
    /// How to confine programs to the CPUs a policy gives them.
    #[arg(long, value_enum, default_value_t = ConfineArg::Auto)]
    confine: ConfineArg,
}

impl MechanismArgs {
    /// Sets up what the flags ask for, before any program starts, and says
    /// in a few words what is in use. An explicitly requested mechanism that
    /// the machine lacks is exit 3; `auto` falls back with a warning.
    pub fn setup(&self) -> Result<Mechanism, Failure> {
        let found = doctor::mechanisms(&Roots::default());
        let freezer_here = match found.pause {
            PauseBackend::CgroupV2Freeze => Some(Version::V2),
            PauseBackend::CgroupV1Freezer => Some(Version::V1),
            PauseBackend::Signals => None,
        }
        .zip(found.pause_path);
        let cpuset_here = match found.cpuset {
            CpusetBackend::CgroupV2 => Some(Version::V2),
            CpusetBackend::CgroupV1 => Some(Version::V1),
            CpusetBackend::AffinityOnly => None,
        }
        .zip(found.cpuset_path);
        let freezer = choose(
            self.pause == PauseArg::Signals,
            self.pause == PauseArg::Freezer,
            freezer_here,
            "--pause freezer: this machine has no writable cgroup freezer",
        )?;
        let cpuset = choose(
            self.confine == ConfineArg::Affinity,
            self.confine == ConfineArg::Cgroup,
            cpuset_here,
            "--confine cgroup: this machine has no writable cgroup cpuset",
        )?;
        let describe = |f: &Option<(Version, std::path::PathBuf)>, what: &str, none: &str| match f {
            Some((Version::V2, _)) => format!("cgroup v2 {what}"),
            Some((Version::V1, _)) => format!("cgroup v1 {what}"),
            None => none.to_string(),
        };
        let exe = herd_runtime::keeper::own_binary().map_err(|e| Failure::Internal(e.into()))?;
        let fallback = Mechanism {
            cgroups: None,
            said: "pause=signals confine=affinity".to_string(),
            exe: exe.clone(),
        };
        if freezer.is_none() && cpuset.is_none() {
            return Ok(fallback);
        }
        let said = format!(
            "pause={} confine={}",
            describe(&freezer, "freezer", "signals"),
            describe(&cpuset, "cpuset", "affinity")
        );
        let request = Request { cpuset, freezer };
        match Cgroups::new(&request, &exe) {
            Ok(cg) => Ok(Mechanism {
                cgroups: Some(cg),
                said,
                exe,
            }),
            Err(e) if self.pause == PauseArg::Freezer || self.confine == ConfineArg::Cgroup => Err(
                Failure::Internal(anyhow::anyhow!("cannot set up herd's cgroups: {e}")),
            ),
            Err(e) => {
                eprintln!("herd: not using cgroups ({e}); pausing with signals, confining with affinity");
                Ok(fallback)
            }
        }
    }
}

/// The mechanisms set up for one run.
pub struct Mechanism {
    cgroups: Option<Cgroups>,
    /// What is in use, e.g. `pause=cgroup v2 freezer confine=cgroup v1 cpuset`.
    pub said: String,
    /// herd's binary, to start the keeper from.
    exe: std::path::PathBuf,
}

impl Mechanism {
    /// Hands the cgroups to `world`, whose programs move into them when a
    /// plan first pauses or confines them, and has a keeper undo herd's
    /// pins and stops if herd is killed.
    pub fn attach(self, world: &mut LiveWorld) -> String {
        if let Some(cg) = self.cgroups {
            world.use_cgroups(cg);
        }
        world.keep_with(self.exe);
        world.record_in(&herd_runtime::peers::dir());
        self.said
    }
}

/// The hierarchy a flag resolves to: none when the flag turns cgroups off,
/// the machine's when it has one, exit 3 when the flag requires one and the
/// machine has none (`auto` then falls back).
fn choose(
    off: bool,
    required: bool,
    here: Option<(Version, std::path::PathBuf)>,
    missing: &str,
) -> Result<Option<(Version, std::path::PathBuf)>, Failure> {
    match here {
        _ if off => Ok(None),
        None if required => Err(Failure::Internal(anyhow::anyhow!(
            "{missing} (see `herd doctor`)"
        ))),
        here => Ok(here),
    }
}
