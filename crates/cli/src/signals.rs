//! SIGINT and SIGTERM for commands that manage programs: the handler only
//! records the signal; the loop notices, restores the programs, and decides
//! what to pass on.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicI32, AtomicUsize, Ordering};

use crate::common::Failure;

/// What the handlers saw.
pub struct Signals {
    /// Set on SIGINT or SIGTERM; the live world stops its loop on it.
    pub stop: Arc<AtomicBool>,
    received: Arc<AtomicI32>,
    /// How many SIGINT or SIGTERM came: a second one while herd waits for
    /// programs that ignore the first makes herd leave them running.
    count: Arc<AtomicUsize>,
}

impl Signals {
    /// Installs the handlers (before any program starts, so none is lost).
    pub fn install() -> Result<Signals, Failure> {
        let sig = Signals {
            stop: Arc::new(AtomicBool::new(false)),
            received: Arc::new(AtomicI32::new(0)),
            count: Arc::new(AtomicUsize::new(0)),
        };
        for s in [signal_hook::consts::SIGINT, signal_hook::consts::SIGTERM] {
            signal_hook::flag::register(s, Arc::clone(&sig.stop)).map_err(|e| Failure::Internal(e.into()))?;
            let received = Arc::clone(&sig.received);
            let count = Arc::clone(&sig.count);
            // SAFETY: the handler only stores into atomics, which is async-signal-safe.
            unsafe {
                signal_hook::low_level::register(s, move || {
                    received.store(s, Ordering::Relaxed);
                    count.fetch_add(1, Ordering::Relaxed);
                })
            }
            .map_err(|e| Failure::Internal(e.into()))?;
        }
        Ok(sig)
    }

    /// Passes the signal herd received, if any, on to every program still
    /// running (call after `LiveWorld::restore`, so none is stopped).
    pub fn pass_on(&self, world: &herd_runtime::live::LiveWorld) {
        let Some(signal) = self.received() else { return };
        for p in world.programs().iter().filter(|p| p.alive()) {
            let _ = herd_runtime::control::signal(p.pid, signal);
        }
        eprintln!(
            "herd: got signal {signal}: resumed and restored the programs, passed the signal on, waiting for them"
        );
    }

    /// Waits for the programs still running after `pass_on`, unless a
    /// second signal comes: then herd leaves them running (its own changes
    /// are already undone) and says which. Returns their statuses.
    pub fn wait(&self, world: &mut herd_runtime::live::LiveWorld) -> Vec<Option<std::process::ExitStatus>> {
        let statuses = world.wait_all_or(|| self.count.load(Ordering::Relaxed) >= 2);
        let left: Vec<String> = world
            .programs()
            .iter()
            .zip(&statuses)
            .filter(|(_, st)| st.is_none())
            .map(|(p, _)| format!("{} (pid {})", p.name, p.pid))
            .collect();
        if !left.is_empty() {
            eprintln!(
                "herd: a second signal: leaving {} running, as plain Linux runs it: {}",
                left.len(),
                left.join(", ")
            );
        }
        statuses
    }

    /// The signal received, if any.
    pub fn received(&self) -> Option<i32> {
        Some(self.received.load(Ordering::Relaxed)).filter(|&s| s != 0)
    }
}
