//! Settling: bringing every thread's counters up to now at the rates set
//! by the last `recompute` (constant since: every change settles first).

use super::{Thread, World};

impl Thread {
    /// Accounts `dt` ns more at the current rates; returns the memory
    /// traffic in that time.
    fn settle(&mut self, dt: f64) -> f64 {
        if self.cpu.is_none() {
            return 0.0;
        }
        self.total.wait_ns += (1.0 - self.share) * dt;
        self.total.cycles += self.share * dt * self.cycles_per_ns;
        match self.progress(dt) {
            Some(d) => {
                self.total.mem_bytes += d * self.bytes_per_instr;
                self.total.llc_refs += d * self.refs_per_instr;
                d * self.bytes_per_instr
            }
            None => 0.0,
        }
    }

    /// [`Thread::settle`] less what only observations read (waiting,
    /// cycles, memory traffic, LLC references): what moves the world on
    /// (progress, debt, CPU time for the kernel's fairness, instructions
    /// for the consolidation study), in the same arithmetic.
    fn settle_unobserved(&mut self, dt: f64) {
        if self.cpu.is_some() {
            self.progress(dt);
        }
    }

    /// CPU time and progress over `dt` ns on a CPU: the instructions
    /// retired and counted, or `None` when the thread cannot progress.
    #[inline(always)]
    fn progress(&mut self, dt: f64) -> Option<f64> {
        self.total.cpu_ns += self.share * dt;
        if self.at_barrier || self.rate <= 0.0 {
            return None;
        }
        let mut d = self.rate * dt;
        if self.debt > 0.0 {
            let pay = d.min(self.debt);
            self.debt -= pay;
            d -= pay;
        }
        let d = d.min(self.left);
        self.total.instr += d;
        self.left -= d;
        self.to_barrier -= d;
        Some(d)
    }
}

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
        let mem_bytes: f64 = self.threads.iter_mut().map(|th| th.settle(dt)).sum();
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
        for th in &mut self.threads {
            self.unsettled_dts.iter().for_each(|&dt| th.settle_unobserved(dt));
        }
        self.unsettled_dts.clear();
    }
}
