//! `herd attach PID`: manage a running process herd did not start, until it
//! exits or herd is stopped. On SIGINT or SIGTERM herd continues it if it
//! paused it, gives its threads their affinities back, and detaches: the
//! process is not herd's, so the signal is not passed on.

use std::sync::Arc;

use clap::Args;
use herd_runtime::live::{Learn, LiveWorld, Program, Session};

use crate::common::Failure;
use crate::signals::Signals;

/// Arguments of `herd attach`.
#[derive(Args, Debug)]
pub struct AttachArgs {
    /// The process to manage.
    pid: i32,
    /// The policy, NAME[:key=value,...].
    #[arg(long, default_value_t = herd_policy::PolicySpec::linux())]
    policy: herd_policy::PolicySpec,
    #[command(flatten)]
    looping: crate::common::LoopArgs,
}

/// `herd attach`.
pub fn run(args: &AttachArgs) -> Result<u8, Failure> {
    let cfg = crate::common::period_config(&args.looping)?;
    let mut policy = crate::common::live_policy(&args.policy)?;
    let program = Program::attach(args.pid).map_err(|e| {
        Failure::Input(anyhow::anyhow!(
            "cannot manage process {}: {e} (herd manages only what you could signal yourself)",
            args.pid
        ))
    })?;
    // A process the machine's daemon manages by its rules is not managed
    // twice.
    let dir = herd_runtime::peers::dir();
    if let Some(j) = crate::daemon_wire::connect(&dir)
        .and_then(|c| {
            crate::daemon_wire::ask::<crate::daemon_wire::Status>(&c, &crate::daemon_wire::Request::Status)
                .ok()
        })
        .and_then(|s| {
            s.jobs
                .into_iter()
                .find(|j| j.pid == args.pid && j.source != "registered")
        })
    {
        return Err(Failure::Input(anyhow::anyhow!(
            "process {} is managed by the herd daemon already (rule '{}', {}): herd attach leaves it to the daemon",
            args.pid,
            j.rule,
            j.policy
        )));
    }
    let machine = crate::common::this_machine()?;
    crate::common::check_cores(&args.policy, &machine)?;
    let (machine, _lease) =
        crate::common::around_other_herds(machine, &program.name, &args.policy, Some(args.pid));
    let sig = Signals::install()?;
    let name = program.name.clone();
    let world = args
        .looping
        .world(LiveWorld::new(vec![program], Arc::clone(&sig.stop)));
    let (mut session, _) = Session::start(world, Learn::Off);
    session.run(policy.as_mut(), &machine, &cfg, |_, _| {});
    let done = session.finish();
    let how = match sig.received() {
        Some(s) => format!("detached on signal {s}"),
        None => "it exited".to_string(),
    };
    let st = done.world.stats;
    crate::run_cmd::warn_after_live(
        &st,
        &policy.name(),
        "herd attach does not apply them, herd run --realtime does",
    );
    eprintln!(
        "herd: managed {name} (pid {}) under {}: {} placements, {} migrations, {} decisions{}; {how}; affinities restored",
        args.pid,
        policy.name(),
        st.placements,
        st.migrations,
        done.overhead.decisions,
        st.memory_followed().map(|m| format!("; {m}")).unwrap_or_default()
    );
    Ok(0)
}
