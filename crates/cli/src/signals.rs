//! SIGINT and SIGTERM for commands that manage programs: the handler only
//! records the signal; the loop notices, restores the programs, and decides
//! what to pass on.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicI32, Ordering};

use crate::common::Failure;

/// What the handlers saw.
pub struct Signals {
    /// Set on SIGINT or SIGTERM; the live world stops its loop on it.
    pub stop: Arc<AtomicBool>,
    received: Arc<AtomicI32>,
}

impl Signals {
    /// Installs the handlers (before any program starts, so none is lost).
    pub fn install() -> Result<Signals, Failure> {
        let sig = Signals {
            stop: Arc::new(AtomicBool::new(false)),
            received: Arc::new(AtomicI32::new(0)),
        };
        for s in [signal_hook::consts::SIGINT, signal_hook::consts::SIGTERM] {
            signal_hook::flag::register(s, Arc::clone(&sig.stop)).map_err(|e| Failure::Internal(e.into()))?;
            let received = Arc::clone(&sig.received);
            // SAFETY: the handler only stores into an atomic, which is async-signal-safe.
            unsafe { signal_hook::low_level::register(s, move || received.store(s, Ordering::Relaxed)) }
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

    /// The signal received, if any.
    pub fn received(&self) -> Option<i32> {
        Some(self.received.load(Ordering::Relaxed)).filter(|&s| s != 0)
    }
}
