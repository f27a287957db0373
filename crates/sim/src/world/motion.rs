//! What settling reads and writes of every thread, kept as columns (one
//! vector per quantity) instead of in each `Thread`.
//!
//! Why: at every event the world settles every thread (`settle_all`), and
//! at 1,000 threads that pass was about 30% of a simulated `linux` hour.
//! Read out of each thread's record, with branches, it took about 29
//! instructions a thread for each interval; over columns, with no branch
//! in the loop, the compiler handles two threads an instruction (SSE2)
//! and it takes about 14. Each thread's arithmetic is the same,
//! operation for operation, as before, so every result keeps its bits.

use herd_model::ClassId;

#[cfg(debug_assertions)]
use super::Thread;

/// Counters accumulated per thread.
#[derive(Debug, Clone, Copy, Default)]
pub(super) struct Counters {
    pub(super) instr: f64,
    pub(super) cpu_ns: f64,
    pub(super) wait_ns: f64,
    pub(super) mem_bytes: f64,
    pub(super) llc_refs: f64,
    pub(super) cycles: f64,
    pub(super) migrations: u32,
}

/// Per thread, indexed as `World::threads`.
#[derive(Debug, Default)]
pub(super) struct Motion {
    /// The thread's share of its CPU, 0 off one: its CPU time grows by
    /// this per ns. Set at each recompute, as `rate` is.
    pub(super) share: Vec<f64>,
    /// Instructions per ns: 0 unless the thread is in a memory class.
    pub(super) rate: Vec<f64>,
    /// The class of the thread's memory stream as of the last recompute:
    /// `None` unless it is on a CPU and not at its barrier (the stream is
    /// in `Rates::streams`; see `World::stream_of`).
    pub(super) class: Vec<Option<ClassId>>,
    /// Instructions owed to cache warm-up after a migration: retired at the
    /// thread's rate but not counted, so a move costs time without an event.
    pub(super) debt: Vec<f64>,
    /// Instructions left in the phase, and to the next barrier.
    pub(super) left: Vec<f64>,
    pub(super) to_barrier: Vec<f64>,
    /// When its phase ends and when it reaches its barrier: `left` and
    /// `to_barrier` at or below these (the barrier's is -inf without
    /// one). Kept as each phase starts: every thread event looks at every
    /// thread, and looking them up in the job was most of that look.
    pub(super) ends_below: Vec<f64>,
    pub(super) barrier_below: Vec<f64>,
    /// CPU time and instructions retired, since the run began.
    pub(super) cpu_ns: Vec<f64>,
    pub(super) instr: Vec<f64>,
    /// What only observations read (and only a run that is read keeps,
    /// [`Motion::settle_observed`]): time waiting for the CPU, cycles,
    /// memory traffic and LLC references, since the run began.
    pub(super) wait_ns: Vec<f64>,
    pub(super) cycles: Vec<f64>,
    pub(super) mem_bytes: Vec<f64>,
    pub(super) llc_refs: Vec<f64>,
    /// What they grow by: `1 - share` on a CPU and 0 off one (per ns
    /// waited), cycles per ns on the CPU, bytes and LLC references per
    /// instruction. Set with `share` (`World::stream_of`).
    pub(super) idle_share: Vec<f64>,
    pub(super) cycles_per_ns: Vec<f64>,
    pub(super) bytes_per_instr: Vec<f64>,
    pub(super) refs_per_instr: Vec<f64>,
}

/// `a.min(b)` for numbers that are not NaN, as a comparison the compiler
/// can do on two threads at once (`f64::min` also orders NaN, which costs
/// three instructions more).
#[inline(always)]
fn lesser(a: f64, b: f64) -> f64 {
    if a < b { a } else { b }
}

/// `time.min(other)` for a `time` that is not NaN, as one comparison
/// (`f64::min` spends three instructions more on ordering NaN): a NaN
/// `other` leaves `time`, as `min` does. (A time here is never -0, so the
/// two zeros need no order either.)
#[inline(always)]
fn sooner(time: f64, other: f64) -> f64 {
    if other < time { other } else { time }
}

impl Motion {
    /// A thread that starts with `left` instructions in its phase and
    /// `to_barrier` to its barrier, and `(ends_below, barrier_below)`.
    pub(super) fn push(&mut self, left: f64, to_barrier: f64, below: (f64, f64)) {
        self.ends_below.push(below.0);
        self.barrier_below.push(below.1);
        self.share.push(0.0);
        self.rate.push(0.0);
        self.class.push(None);
        self.debt.push(0.0);
        self.left.push(left);
        self.to_barrier.push(to_barrier);
        self.cpu_ns.push(0.0);
        self.instr.push(0.0);
        for c in [
            &mut self.wait_ns,
            &mut self.cycles,
            &mut self.mem_bytes,
            &mut self.llc_refs,
            &mut self.idle_share,
            &mut self.cycles_per_ns,
            &mut self.bytes_per_instr,
            &mut self.refs_per_instr,
        ] {
            c.push(0.0);
        }
    }

    /// The rates of a recompute: each thread in a memory class gets its
    /// CPU share over the class's ns per instruction (`ns_per_instr`).
    /// With `due`, each such thread is added to it. (A thread at its
    /// barrier is in none: it was given its stream again when it got
    /// there, and `stream_of` gives none then.)
    pub(super) fn set_rates(&mut self, ns_per_instr: &[f64], mut due: Option<&mut Due>) {
        let n = self.class.len();
        let (share, rate) = (&self.share[..n], &mut self.rate[..n]);
        let (debt, left, to_barrier) = (&self.debt[..n], &self.left[..n], &self.to_barrier[..n]);
        for (t, class) in self.class.iter().enumerate() {
            if let Some(c) = *class {
                rate[t] = share[t] / ns_per_instr[c as usize];
                if let Some(due) = due.as_deref_mut() {
                    due.add(debt[t], left[t], to_barrier[t], rate[t]);
                }
            }
        }
    }

    /// Adds to `due` every thread in a memory class.
    pub(super) fn due(&self, due: &mut Due) {
        let n = self.class.len();
        let (debt, left, to_barrier) = (&self.debt[..n], &self.left[..n], &self.to_barrier[..n]);
        for (t, class) in self.class.iter().enumerate() {
            if class.is_some() {
                due.add(debt[t], left[t], to_barrier[t], self.rate[t]);
            }
        }
    }

    /// The first thread from `from` on whose work left or distance to its
    /// barrier is at or below its threshold, if any.
    pub(super) fn past_threshold(&self, from: usize) -> Option<usize> {
        let n = self.left.len();
        let (left, to_barrier) = (&self.left[..n], &self.to_barrier[..n]);
        let (ends_below, barrier_below) = (&self.ends_below[..n], &self.barrier_below[..n]);
        (from..n).find(|&t| left[t] <= ends_below[t] || to_barrier[t] <= barrier_below[t])
    }

    /// When the next thread event is due, in ns from now: the soonest of
    /// each progressing thread's end of phase or barrier, debt included.
    pub(super) fn next_event_in(&self) -> f64 {
        let n = self.rate.len();
        let (debt, left, to_barrier) = (&self.debt[..n], &self.left[..n], &self.to_barrier[..n]);
        let mut best = f64::INFINITY;
        // `rate` is above 0 just where the thread can progress: on a CPU,
        // not at its barrier, with a share of it.
        for (t, &rate) in self.rate.iter().enumerate() {
            if rate > 0.0 {
                best = sooner(best, (debt[t] + lesser(left[t], to_barrier[t])) / rate);
            }
        }
        best
    }

    /// The first thread whose columns settling cannot take as they are,
    /// if any. Off a CPU its share, idle share and rate must be 0 (on one
    /// the idle share is `1 - share`), and at a barrier its rate and class
    /// (see [`Motion::set_rates`]): then settling adds 0 to it, as
    /// branches on its CPU and barrier would add nothing. Its rate, debt
    /// and work left must not be below 0 (nor NaN), and the figures that
    /// multiply its counts must be finite, for [`step`]'s arithmetic
    /// without branches.
    #[cfg(debug_assertions)]
    pub(super) fn stale(&self, threads: &[Thread]) -> Option<usize> {
        threads.iter().enumerate().position(|(t, th)| {
            let (share, rate) = (self.share[t], self.rate[t]);
            let idle = self.idle_share[t];
            let finite = [
                self.cycles_per_ns[t],
                self.bytes_per_instr[t],
                self.refs_per_instr[t],
            ];
            (th.cpu.is_none() && (share != 0.0 || rate != 0.0 || idle != 0.0))
                || (th.cpu.is_some() && idle.to_bits() != (1.0 - share).to_bits())
                || !finite.iter().all(|x| x.is_finite())
                || (th.at_barrier && (rate != 0.0 || self.class[t].is_some()))
                || !(rate >= 0.0 && self.debt[t] >= 0.0 && self.left[t] >= 0.0)
        })
    }

    /// Settles every thread over each of `dts` ns in turn ([`step`]).
    pub(super) fn settle(&mut self, dts: &[f64]) {
        let n = self.left.len();
        let (share, rate) = (&self.share[..n], &self.rate[..n]);
        let (debt, left) = (&mut self.debt[..n], &mut self.left[..n]);
        let (to_barrier, cpu_ns) = (&mut self.to_barrier[..n], &mut self.cpu_ns[..n]);
        let instr = &mut self.instr[..n];
        for &dt in dts {
            for t in 0..n {
                let own = (&mut debt[t], &mut left[t], &mut to_barrier[t], &mut cpu_ns[t]);
                instr[t] += step(share[t], rate[t], own, dt);
            }
        }
    }

    /// Settles every thread over `dt` ns, with what only observations
    /// read; returns the memory traffic of all threads in that time,
    /// summed in thread order. `traffic` is a buffer for each thread's.
    ///
    /// Off a CPU, or unable to progress, a thread adds 0 to each (its
    /// `idle_share`, `share` or instructions are 0, and the figures they
    /// multiply are finite), as branches that added nothing did.
    pub(super) fn settle_observed(&mut self, dt: f64, traffic: &mut Vec<f64>) -> f64 {
        let n = self.left.len();
        traffic.clear();
        traffic.resize(n, 0.0);
        let bytes = &mut traffic[..n];
        let (share, rate, idle_share) = (&self.share[..n], &self.rate[..n], &self.idle_share[..n]);
        let (debt, left) = (&mut self.debt[..n], &mut self.left[..n]);
        let (to_barrier, cpu_ns) = (&mut self.to_barrier[..n], &mut self.cpu_ns[..n]);
        let instr = &mut self.instr[..n];
        let (cycles_per_ns, bytes_per_instr) = (&self.cycles_per_ns[..n], &self.bytes_per_instr[..n]);
        let refs_per_instr = &self.refs_per_instr[..n];
        let (wait_ns, cycles) = (&mut self.wait_ns[..n], &mut self.cycles[..n]);
        let (mem_bytes, llc_refs) = (&mut self.mem_bytes[..n], &mut self.llc_refs[..n]);
        for t in 0..n {
            let own = (&mut debt[t], &mut left[t], &mut to_barrier[t], &mut cpu_ns[t]);
            let d = step(share[t], rate[t], own, dt);
            instr[t] += d;
            wait_ns[t] += idle_share[t] * dt;
            cycles[t] += share[t] * dt * cycles_per_ns[t];
            llc_refs[t] += d * refs_per_instr[t];
            bytes[t] = d * bytes_per_instr[t];
            mem_bytes[t] += bytes[t];
        }
        bytes.iter().sum()
    }
}

/// One thread's step of `dt` ns at `share` of a CPU and `rate`
/// instructions per ns: its debt, work left, distance to its barrier and
/// CPU time move on; returns the instructions it retired and counted.
///
/// The same operations as one thread at a time with branches: CPU time
/// grows by `share * dt` (0 off a CPU: `x + 0` is `x`); a thread that can
/// progress retires `rate * dt`, pays its debt first and stops at its
/// phase's end. With no debt it pays `lesser(d, 0)`, which is 0 as `d` is
/// not below 0, and subtracting 0 changes nothing. One that cannot
/// progress has a rate of 0: it retires `lesser(0, left)`, 0 again, as
/// `left` is not below 0 either (checked in debug builds, with the rest,
/// by [`Motion::stale`]). Without a branch, the compiler steps two threads
/// an instruction.
#[inline(always)]
fn step(share: f64, rate: f64, own: (&mut f64, &mut f64, &mut f64, &mut f64), dt: f64) -> f64 {
    let (debt, left, to_barrier, cpu_ns) = own;
    *cpu_ns += share * dt;
    let d = rate * dt;
    let pay = lesser(d, *debt);
    *debt -= pay;
    let d = lesser(d - pay, *left);
    *left -= d;
    *to_barrier -= d;
    d
}

/// When the next thread event falls and when every warm-up debt is paid,
/// gathered thread by thread at a recompute.
#[derive(Debug, Clone, Copy)]
pub(super) struct Due {
    pub(super) now: f64,
    pub(super) next: f64,
    pub(super) paid: f64,
}

impl Due {
    pub(super) fn new(now: f64) -> Self {
        Due {
            now,
            next: f64::INFINITY,
            paid: now,
        }
    }

    /// A thread with `debt`, `left` and `to_barrier` at `rate`.
    #[inline(always)]
    fn add(&mut self, debt: f64, left: f64, to_barrier: f64, rate: f64) {
        self.next = sooner(self.next, (debt + lesser(left, to_barrier)) / rate);
        // A thread with no warm-up debt pays it off now: `paid` starts at
        // now and only grows, so the division is skipped (the same result:
        // now + 0 / rate is now, or NaN, which `max` passes over).
        if debt != 0.0 {
            let paid = self.now + debt / rate;
            self.paid = if paid > self.paid { paid } else { self.paid };
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// One thread settled with the branches `Thread::progress` had.
    fn by_branches(m: &mut Motion, t: usize, share: f64, rate: f64, on: bool, dt: f64) -> Option<f64> {
        if !on {
            return None;
        }
        m.cpu_ns[t] += share * dt;
        if rate <= 0.0 {
            return None;
        }
        let mut d = rate * dt;
        if m.debt[t] > 0.0 {
            let pay = d.min(m.debt[t]);
            m.debt[t] -= pay;
            d -= pay;
        }
        let d = d.min(m.left[t]);
        m.instr[t] += d;
        m.left[t] -= d;
        m.to_barrier[t] -= d;
        Some(d)
    }

    #[test]
    fn columns_settle_to_the_bit_as_branches_do() {
        // Threads off a CPU, at a barrier (rate 0), with debts larger and
        // smaller than a step, ending their phase within a step, and with
        // no barrier (infinite distance).
        let cases = [
            (0.5, 1.3, true, 0.0, 1e9, f64::INFINITY),
            (0.25, 0.7, true, 3e5, 1e9, 5e6),
            (1.0, 2.1, true, 1e9, 4e6, 7e6),
            (1.0 / 3.0, 0.9, true, 0.0, 1234.5, 1e12),
            (0.5, 0.0, true, 20.0, 1e9, 1e9),
            (0.0, 0.0, false, 7.5, 3.0, f64::INFINITY),
            (0.2, 1.7, false, 0.0, 1e7, 1e7),
        ];
        let mut cols = Motion::default();
        let mut each = Motion::default();
        for &(.., left, to_barrier) in &cases {
            cols.push(left, to_barrier, (0.0, 0.0));
            each.push(left, to_barrier, (0.0, 0.0));
        }
        // Per-instruction and per-ns figures as `World::stream_of` sets
        // them (a thread off a CPU keeps its last ones).
        let (cycles_per_ns, bytes_per_instr, refs_per_instr) = (2.4, 64.0, 2.5);
        for (t, &(share, rate, on, debt, ..)) in cases.iter().enumerate() {
            for m in [&mut cols, &mut each] {
                m.debt[t] = debt;
                m.cycles_per_ns[t] = cycles_per_ns;
                m.bytes_per_instr[t] = bytes_per_instr;
                m.refs_per_instr[t] = refs_per_instr;
            }
            cols.share[t] = if on { share } else { 0.0 };
            cols.idle_share[t] = if on { 1.0 - share } else { 0.0 };
            cols.rate[t] = if on && rate > 0.0 { rate } else { 0.0 };
        }
        let dts = [1e7, 3.3e6, 0.5, 2e6, 1e7];
        let mut traffic = Vec::new();
        for (k, &dt) in dts.iter().enumerate() {
            // Unread and read steps in turn, as observations come.
            let observed = k % 2 == 1;
            let total = if observed {
                cols.settle_observed(dt, &mut traffic)
            } else {
                cols.settle(&[dt]);
                0.0
            };
            let mut sum = 0.0;
            for (t, &(share, rate, on, ..)) in cases.iter().enumerate() {
                if observed && on {
                    // What a thread on a CPU adds, progressing or not.
                    each.wait_ns[t] += (1.0 - share) * dt;
                    each.cycles[t] += share * dt * cycles_per_ns;
                }
                let d = by_branches(&mut each, t, share, rate, on, dt);
                if let (true, Some(d)) = (observed, d) {
                    each.mem_bytes[t] += d * bytes_per_instr;
                    each.llc_refs[t] += d * refs_per_instr;
                    sum += d * bytes_per_instr;
                }
            }
            assert_eq!(total.to_bits(), sum.to_bits(), "step {k}");
        }
        let bits = |m: &Motion| {
            [
                &m.debt,
                &m.left,
                &m.to_barrier,
                &m.cpu_ns,
                &m.instr,
                &m.wait_ns,
                &m.cycles,
                &m.mem_bytes,
                &m.llc_refs,
            ]
            .map(|c| c.iter().map(|x| x.to_bits()).collect::<Vec<_>>())
        };
        assert_eq!(bits(&cols), bits(&each));
        // The steps did something: a phase ended, a debt was paid off.
        assert_eq!(cols.left[3], 0.0);
        assert_eq!(cols.debt[1], 0.0);
        assert!(cols.debt[2] > 0.0 && cols.instr[0] > 0.0);
        assert!(cols.mem_bytes[1] > 0.0 && cols.wait_ns[4] > 0.0 && cols.wait_ns[5] == 0.0);
    }
}
