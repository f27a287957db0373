//! Settling: bringing every thread's counters up to now at the rates set
//! by the last `recompute` (constant since: every change settles first).

use super::World;

impl World<'_> {
    /// Brings every thread's counters up to now at the rates set by the last
    /// `recompute` (constant since: every change settles first).
    pub(super) fn settle_all(&mut self) {
        let Some(dt) = self.interval_to_now() else {
            // What an observation at this very time left is still owed.
            self.settle_later_now();
            return;
        };
        if self.view.unread {
            // Nothing will read an observation in this run, so what only
            // observations read is not kept: the sum of every thread's
            // traffic (a chain of dependent additions, a thousand an event
            // at 1,000 threads) and four counters a thread.
            self.unsettled_dts.push(dt);
            self.settle_later_now();
            return;
        }
        self.check_motion();
        let mut traffic = std::mem::take(&mut self.traffic_buf);
        let mem_bytes = self
            .motion
            .settle_observed(dt, &mut traffic, self.view.counters_read);
        self.traffic_buf = traffic;
        self.acct.mem_bytes_total += mem_bytes;
    }

    /// What an observation nobody reads needs of the threads: nothing, but
    /// the interval up to now must be settled on its own, as the same
    /// arithmetic splits it there. So it is kept, and the next
    /// [`World::settle_all`] settles it first: one pass over the threads
    /// instead of two (about half of a `linux` run's settling at 1,000
    /// threads happened at observations).
    pub(super) fn settle_later(&mut self) {
        debug_assert!(self.view.unread, "only an unread run's threads can wait");
        if let Some(dt) = self.interval_to_now() {
            self.unsettled_dts.push(dt);
        }
    }

    /// The ns since the threads were last settled (or kept to settle),
    /// now counted as settled; `None` when no time has passed.
    fn interval_to_now(&mut self) -> Option<f64> {
        let dt = (self.now_ns - self.settled_ns) as f64;
        (dt > 0.0).then(|| {
            self.settled_ns = self.now_ns;
            dt
        })
    }

    /// Settles the intervals `settle_later` kept, in order: each thread
    /// adds exactly what it would have added at each.
    fn settle_later_now(&mut self) {
        if self.unsettled_dts.is_empty() {
            return;
        }
        self.check_motion();
        self.motion.settle(&self.unsettled_dts);
        self.unsettled_dts.clear();
    }

    /// In debug builds: no thread's columns break what settling without
    /// branches assumes of them (`Motion::stale`). Shares and rates are
    /// set at each recompute, and every change settles first and is
    /// followed by a recompute before time passes; this checks that
    /// nothing broke that.
    fn check_motion(&self) {
        #[cfg(debug_assertions)]
        if let Some(t) = self.motion.stale(&self.threads) {
            panic!("thread {t}'s columns do not fit settling (changed without a recompute?)");
        }
    }
}
