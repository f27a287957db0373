//! The simulated kernel's periodic work on the world: load balancing and,
//! with `timeslice_ms`, tasks taking turns on shared CPUs.

use herd_policy::Lane;

use super::World;

impl World<'_> {
    /// Kernel balancing at the current event: periodic balancing once
    /// `balance_ms` has passed (fairness rotation once `fairness_ms` has),
    /// new-idle pulls whenever the running set changed. Balancing piggybacks
    /// on events instead of adding its own, so its effective interval is
    /// the larger of `balance_ms` and the time between events.
    pub(super) fn kernel_balance(&mut self) {
        let since = (self.now_ns - self.last_balance_ns) as f64;
        let moves = if since >= self.model.balance_ms * 1e6 {
            self.last_balance_ns = self.now_ns;
            // 2.6.27's balancer evened task counts only; fairness across
            // CPUs is today's CFS.
            let rotate = self.model.kernel == herd_model::KernelModel::Current
                && (self.now_ns - self.last_fairness_ns) as f64 >= self.model.fairness_ms * 1e6;
            let min_gap = if rotate {
                self.last_fairness_ns = self.now_ns;
                // Trade places only past half an interval of CPU time, so
                // equal tasks do not ping-pong.
                self.model.fairness_ms * 0.5e6
            } else {
                f64::INFINITY
            };
            if rotate {
                self.settle_all();
            }
            if !rotate && self.balanced {
                // Nothing moved and no affinity changed since a balance
                // that found nothing to do: it would find nothing again.
                return;
            }
            // Each thread's CPU time, which only a rotation reads (settled
            // above when it rotates).
            let service = &self.motion.cpu_ns;
            let moves = self.kernel.balance(&self.allowed, service, min_gap);
            self.balanced = !rotate && moves.is_empty();
            moves
        } else if self.dirty {
            self.kernel.pull_idle(&self.allowed)
        } else {
            return;
        };
        if !moves.is_empty() {
            self.settle_all();
            self.apply_moves(moves);
            self.push_front_lanes();
        }
    }

    /// With `timeslice_ms`, at each turn boundary the head of every queue
    /// of two or more tasks goes to the back (round robin, as CFS's equal
    /// vruntimes give).
    pub(super) fn take_turns(&mut self) {
        let Some(slice_ms) = self.model.timeslice_ms else {
            return;
        };
        let slice_ns = ((slice_ms * 1e6) as u64).max(1);
        if self.next_turn_ns == u64::MAX {
            self.next_turn_ns = self.now_ns + slice_ns;
        }
        if self.now_ns < self.next_turn_ns {
            return;
        }
        self.next_turn_ns = self.now_ns + slice_ns;
        if !self.kernel.queues.iter().any(|q| q.len() >= 2) {
            return;
        }
        self.settle_all();
        for pos in 0..self.kernel.queues.len() {
            if self.kernel.queues[pos].len() >= 2 {
                self.kernel.queues.rotate_left(pos);
                self.rates.touched_cpus.push(pos);
                self.dirty = true;
            }
        }
    }

    /// Real-time balancing for lanes: a CPU with two `Front` threads gives
    /// one to an allowed CPU that has none, at once, as the kernel pushes
    /// SCHED_FIFO tasks to CPUs running lower priorities.
    pub(super) fn push_front_lanes(&mut self) {
        let fronts = |w: &World<'_>, pos: usize| {
            w.kernel.queues[pos]
                .iter()
                .filter(|&&q| w.threads[q].lane == Lane::Front)
                .count()
        };
        let n = self.kernel.queues.len();
        if !self.fronts_ever || !(0..n).any(|p| fronts(self, p) >= 2) {
            return;
        }
        self.settle_all();
        let mut moves = Vec::new();
        // Each move empties a slot on a CPU that had none: at most n moves.
        for _ in 0..n {
            let Some(from) = (0..n).find(|&p| fronts(self, p) >= 2) else {
                break;
            };
            let t = *self.kernel.queues[from]
                .iter()
                .rev()
                .find(|&&q| self.threads[q].lane == Lane::Front)
                .expect("two fronts here");
            let Some(to) = (0..n)
                .find(|&p| p != from && fronts(self, p) == 0 && self.allowed[t].contains(self.kernel.os[p]))
            else {
                break;
            };
            self.kernel.queues.retain(from, |&q| q != t);
            self.kernel.queues.push(to, t);
            moves.push((t, from, to));
        }
        self.apply_moves(moves);
    }
}
