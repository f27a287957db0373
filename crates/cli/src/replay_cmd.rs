//! `herd replay`: feeds a recorded trace's views to a fresh copy of its
//! policy and says whether every decision came out the same (issue 24's
//! parity on live runs). Exit 0 when all match, 1 when some differ.

use std::path::PathBuf;

use clap::Args;

use crate::common::{Failure, MachineArgs};

/// Arguments of `herd replay`.
#[derive(Args, Debug)]
pub struct ReplayArgs {
    /// A trace from `herd run --trace` or `herd batch --trace` (or one
    /// gzip-compressed, as `fixtures/traces/` keeps them).
    #[arg(value_name = "TRACE.jsonl")]
    trace: PathBuf,
    /// The machine the run placed on (an hwloc XML export of it, e.g.
    /// `lstopo-no-graphics --of xml`); this machine by default.
    #[command(flatten)]
    machine: MachineArgs,
}

/// `herd replay`: returns whether every decision matched.
pub fn run(args: &ReplayArgs) -> Result<bool, Failure> {
    let name = args.trace.display().to_string();
    let text =
        herd_cli::trace::read(&args.trace).map_err(|e| Failure::Input(anyhow::anyhow!("{name}: {e}")))?;
    let runs = herd_cli::trace::parse(&text).map_err(|e| Failure::Input(anyhow::anyhow!("{name}: {e}")))?;
    let machine = args.machine.load()?;
    let mut all_same = true;
    let mut text = String::new();
    for (k, run) in runs.iter().enumerate() {
        let (turns, mismatches) = herd_cli::trace::replay(run, &machine)
            .map_err(|e| Failure::Input(anyhow::anyhow!("{name}: run {}: {e}", k + 1)))?;
        text += &format!(
            "run {} under {}: {} of {turns} decisions the same\n",
            k + 1,
            run.header.policy,
            turns - mismatches.len()
        );
        if let Some(m) = mismatches.first() {
            all_same = false;
            text += &format!(
                "  first difference at decision {}:\n    recorded {}\n    replayed {}\n",
                m.turn + 1,
                m.recorded,
                m.replayed
            );
        }
    }
    // A reader that went away (`| head`) is no failure of the replay.
    match crate::output::print(&text) {
        Err(e) if e.kind() != std::io::ErrorKind::BrokenPipe => return Err(Failure::Internal(e.into())),
        _ => {}
    }
    Ok(all_same)
}
