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
//!
//! The passes over every thread also have a copy compiled for AVX2, taken
//! where the CPU has it (checked at run time, so one binary still runs on
//! any x86-64): four threads an instruction instead of two. The
//! operations are IEEE's either way (no fused multiply-add: Rust never
//! contracts), so each copy gives the same bits.

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
    /// The class of the thread's memory stream as of the last recompute,
    /// plus 1, and 0 for none (see [`Motion::class`]): a number that
    /// indexes the recompute's table of classes with no branch.
    slot: Vec<u32>,
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
    /// At each recompute ([`Motion::set_rates`]): the ns per instruction of
    /// the thread's class (infinite without one), and 0 for a thread in a
    /// class, NaN for one in none: added to a time, it leaves the time as
    /// it is or makes it one no comparison picks ([`Motion::due`]).
    ns_of: Vec<f64>,
    unless_member: Vec<f64>,
    /// Both of those by slot, rebuilt at each recompute.
    by_slot: Vec<(f64, f64)>,
    /// At each [`Motion::due`]: when the thread's phase or barrier comes,
    /// and when its warm-up debt is paid (NaN outside every class).
    until: Vec<f64>,
    debt_end: Vec<f64>,
}

/// Defines a pass over every thread, `pub(super) fn $name` (the motion's,
/// and the world's pass that reads the threads into a snapshot), that runs
/// `$any` (its body, `#[inline(always)]`) compiled for AVX2 where this
/// CPU has it (`$wide`), and as built everywhere else. std checks the CPU
/// once and keeps the answer, so each pass pays a load and a test.
///
/// Why not build everything for AVX2: herd's binary is copied across a
/// cluster's nodes, and one without AVX2 would stop at the first AVX2
/// instruction it met; `-C target-cpu=x86-64-v3` for the whole simulator saved
/// 16% of a simulated `linux` minute's instructions, almost all of it in
/// these passes.
macro_rules! avx2_where_present {
    ($(#[$doc:meta])* fn $name:ident, $wide:ident => $any:ident(&mut self $(, $arg:ident: $ty:ty)*) $(-> $ret:ty)?) => {
        $(#[$doc])*
        pub(super) fn $name(&mut self $(, $arg: $ty)*) $(-> $ret)? {
            #[cfg(target_arch = "x86_64")]
            if std::arch::is_x86_feature_detected!("avx2") {
                // SAFETY: `$wide` needs only AVX2, which this CPU has (the
                // test just above).
                return unsafe { self.$wide($($arg),*) };
            }
            self.$any($($arg),*)
        }

        /// The same pass compiled for AVX2.
        #[cfg(target_arch = "x86_64")]
        #[target_feature(enable = "avx2")]
        fn $wide(&mut self $(, $arg: $ty)*) $(-> $ret)? {
            self.$any($($arg),*)
        }
    };
}

pub(super) use avx2_where_present;

/// Threads [`Motion::past_threshold`] compares before it branches.
const PAST_BLOCK: usize = 8;

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
        self.slot.push(0);
        self.debt.push(0.0);
        self.left.push(left);
        self.to_barrier.push(to_barrier);
        self.cpu_ns.push(0.0);
        self.instr.push(0.0);
        self.ns_of.push(f64::INFINITY);
        self.unless_member.push(f64::NAN);
        self.until.push(f64::NAN);
        self.debt_end.push(f64::NAN);
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

    /// The class of thread `t`'s memory stream as of the last recompute:
    /// `None` unless it is on a CPU and not at its barrier (the stream is
    /// in `Rates::streams`; see `World::stream_of`).
    pub(super) fn class(&self, t: usize) -> Option<ClassId> {
        self.slot[t].checked_sub(1)
    }

    /// Puts thread `t` in `class`; returns the class it was in.
    pub(super) fn set_class(&mut self, t: usize, class: Option<ClassId>) -> Option<ClassId> {
        let was = self.class(t);
        // A class id is an index into the classes, far below `u32::MAX`.
        self.slot[t] = class.map_or(0, |c| c + 1);
        was
    }

    avx2_where_present! {
        /// The rates of a recompute: each thread in a memory class gets its
        /// CPU share over the class's ns per instruction (`ns_per_instr`),
        /// every other thread 0 (its share over infinity: it is off a CPU,
        /// at its barrier or done, and `World::stream_of` gave it rate 0
        /// already). With `due`, each thread in a class is added to it
        /// ([`Motion::due`]).
        fn set_rates, set_rates_avx2 => set_rates_any(&mut self, ns_per_instr: &[f64], due: Option<&mut Due>)
    }

    #[inline(always)]
    fn set_rates_any(&mut self, ns_per_instr: &[f64], due: Option<&mut Due>) {
        let n = self.slot.len();
        // Each thread's class's figures first, one look-up a thread, so
        // that the divisions run over columns without a branch.
        self.by_slot.clear();
        self.by_slot.push((f64::INFINITY, f64::NAN));
        self.by_slot.extend(ns_per_instr.iter().map(|&ns| (ns, 0.0)));
        let by_slot = &self.by_slot[..];
        let gathered = self.ns_of[..n].iter_mut().zip(&mut self.unless_member[..n]);
        for (&slot, (ns, unless)) in self.slot.iter().zip(gathered) {
            (*ns, *unless) = by_slot[slot as usize];
        }
        let rates = self.rate[..n].iter_mut().zip(&self.share[..n]);
        for ((rate, share), ns) in rates.zip(&self.ns_of[..n]) {
            *rate = share / ns;
        }
        if let Some(due) = due {
            self.due_any(due);
        }
    }

    avx2_where_present! {
        /// Adds to `due` every thread in a memory class as of the last
        /// [`Motion::set_rates`]: the soonest end of a phase or barrier,
        /// debt included, and the latest end of a warm-up debt.
        fn due, due_avx2 => due_any(&mut self, due: &mut Due)
    }

    #[inline(always)]
    fn due_any(&mut self, due: &mut Due) {
        let n = self.rate.len();
        let now = due.now;
        // Each thread's times first, over columns. A thread outside every
        // class has rate 0: its times would be infinite, NaN (0/0, no work
        // and no rate), or minus infinity at a barrier passed by a
        // rounding. Adding its `unless_member` (NaN) makes them NaN, which
        // no comparison below picks; a member's (0) changes nothing (but -0
        // to 0, which the now it is added to makes the same). Without a
        // debt, its end is now (or NaN), which never passes `paid`: that
        // starts at now and only grows.
        let (until, debt_end) = (&mut self.until[..n], &mut self.debt_end[..n]);
        let (rate, debt, unless) = (&self.rate[..n], &self.debt[..n], &self.unless_member[..n]);
        let (left, to_barrier) = (&self.left[..n], &self.to_barrier[..n]);
        for t in 0..n {
            until[t] = (debt[t] + lesser(left[t], to_barrier[t])) / rate[t] + unless[t];
            debt_end[t] = now + debt[t] / rate[t] + unless[t];
        }
        // Then the soonest and the latest in four lanes, met at the end: the
        // soonest and the latest of a set do not depend on the order they
        // are taken in (a NaN never wins a comparison), so the result is the
        // one a thread at a time gave.
        let later = |a: f64, b: f64| if b > a { b } else { a };
        let (mut next, mut paid) = ([due.next; 4], [due.paid; 4]);
        for (until, debt_end) in until.chunks_exact(4).zip(debt_end.chunks_exact(4)) {
            for k in 0..4 {
                next[k] = sooner(next[k], until[k]);
                paid[k] = later(paid[k], debt_end[k]);
            }
        }
        for t in n - n % 4..n {
            next[0] = sooner(next[0], until[t]);
            paid[0] = later(paid[0], debt_end[t]);
        }
        due.next = sooner(sooner(next[0], next[1]), sooner(next[2], next[3]));
        due.paid = later(later(paid[0], paid[1]), later(paid[2], paid[3]));
    }

    /// The first thread from `from` on whose work left or distance to its
    /// barrier is at or below its threshold, if any.
    pub(super) fn past_threshold(&self, from: usize) -> Option<usize> {
        let n = self.left.len();
        let (left, to_barrier) = (&self.left[..n], &self.to_barrier[..n]);
        let (ends_below, barrier_below) = (&self.ends_below[..n], &self.barrier_below[..n]);
        let past = |t: usize| (left[t] <= ends_below[t]) | (to_barrier[t] <= barrier_below[t]);
        // Eight threads at a time with no branch a thread (the compiler
        // compares them two or four an instruction), then the first of a
        // block that has one: this runs after every settling, and almost
        // every block has none.
        let block = |c: &[f64], start: usize| -> [f64; PAST_BLOCK] { std::array::from_fn(|i| c[start + i]) };
        let mut start = from;
        while start + PAST_BLOCK <= n {
            let (l, e) = (block(left, start), block(ends_below, start));
            let (d, b) = (block(to_barrier, start), block(barrier_below, start));
            let mut any = false;
            for i in 0..PAST_BLOCK {
                any |= (l[i] <= e[i]) | (d[i] <= b[i]);
            }
            if any {
                return (start..start + PAST_BLOCK).find(|&t| past(t));
            }
            start += PAST_BLOCK;
        }
        (start..n).find(|&t| past(t))
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
                || (th.at_barrier && (rate != 0.0 || self.slot[t] != 0))
                || !(rate >= 0.0 && self.debt[t] >= 0.0 && self.left[t] >= 0.0)
        })
    }

    avx2_where_present! {
        /// Settles every thread over each of `dts` ns in turn ([`step`]).
        fn settle, settle_avx2 => settle_any(&mut self, dts: &[f64])
    }

    #[inline(always)]
    fn settle_any(&mut self, dts: &[f64]) {
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

    avx2_where_present! {
        /// Settles every thread over `dt` ns, with what only observations
        /// read; returns the memory traffic of all threads in that time,
        /// summed in thread order. `traffic` is a buffer for each thread's.
        /// Each thread's cycles, LLC references and traffic are kept only
        /// if `counters` (else nothing reads them: `Sensor::leave_counters`).
        ///
        /// Off a CPU, or unable to progress, a thread adds 0 to each (its
        /// `idle_share`, `share` or instructions are 0, and the figures they
        /// multiply are finite), as branches that added nothing did.
        fn settle_observed, settle_observed_avx2 => settle_observed_any(&mut self, dt: f64, traffic: &mut Vec<f64>, counters: bool) -> f64
    }

    #[inline(always)]
    fn settle_observed_any(&mut self, dt: f64, traffic: &mut Vec<f64>, counters: bool) -> f64 {
        // One loop for each, so a thread's turn does not ask which.
        if counters {
            self.settle_observed_loop::<true>(dt, traffic)
        } else {
            self.settle_observed_loop::<false>(dt, traffic)
        }
    }

    /// [`Motion::settle_observed`]'s loop, keeping the cycles, LLC
    /// references and memory traffic of each thread if `COUNTERS` (else
    /// only their sum, for the machine's).
    #[inline(always)]
    fn settle_observed_loop<const COUNTERS: bool>(&mut self, dt: f64, traffic: &mut Vec<f64>) -> f64 {
        let n = self.left.len();
        // Every thread's is written below: only a new size needs filling.
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
            bytes[t] = d * bytes_per_instr[t];
            if COUNTERS {
                cycles[t] += share[t] * dt * cycles_per_ns[t];
                llc_refs[t] += d * refs_per_instr[t];
                mem_bytes[t] += bytes[t];
            }
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

    /// The bits of every column settling writes.
    fn settled_bits(m: &Motion) -> [Vec<u64>; 9] {
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
        .map(|c| c.iter().map(|x| x.to_bits()).collect())
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
                cols.settle_observed(dt, &mut traffic, true)
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
        assert_eq!(settled_bits(&cols), settled_bits(&each));
        // The steps did something: a phase ended, a debt was paid off.
        assert_eq!(cols.left[3], 0.0);
        assert_eq!(cols.debt[1], 0.0);
        assert!(cols.debt[2] > 0.0 && cols.instr[0] > 0.0);
        assert!(cols.mem_bytes[1] > 0.0 && cols.wait_ns[4] > 0.0 && cols.wait_ns[5] == 0.0);
    }

    /// `n` threads in every state a recompute and settling meet: off a CPU,
    /// at a barrier (no class, rate 0, the barrier passed by a rounding),
    /// in a class with no share of its CPU (rate 0), with and without a
    /// warm-up debt, with no work left; and each class's ns per
    /// instruction. The same `seed` gives the same threads.
    fn mixed(n: usize, seed: u64) -> (Motion, Vec<f64>) {
        let mut rng = herd_policy::Rng::new(seed);
        let classes = 7;
        let ns_per_instr: Vec<f64> = (0..classes).map(|_| 0.3 + rng.next_f64()).collect();
        let mut m = Motion::default();
        for t in 0..n {
            let left = if t % 7 == 0 {
                0.0
            } else {
                1e3 + 1e7 * rng.next_f64()
            };
            let at_barrier = t % 5 == 1;
            let to_barrier = match t % 5 {
                0 => f64::INFINITY,
                1 => -1e-9 * rng.next_f64(),
                _ => 1e7 * rng.next_f64(),
            };
            m.push(left, to_barrier, (0.0, f64::NEG_INFINITY));
            let on = t % 3 != 0;
            let share = if on && t % 11 != 2 { rng.next_f64() } else { 0.0 };
            m.share[t] = share;
            m.idle_share[t] = if on { 1.0 - share } else { 0.0 };
            m.debt[t] = if t % 4 == 0 { 1e5 * rng.next_f64() } else { 0.0 };
            m.cycles_per_ns[t] = 2.0 + rng.next_f64();
            m.bytes_per_instr[t] = 64.0 * rng.next_f64();
            m.refs_per_instr[t] = rng.next_f64();
            let class = (on && !at_barrier).then(|| rng.below(classes) as ClassId);
            m.set_class(t, class);
        }
        (m, ns_per_instr)
    }

    /// A recompute's rates and times, one thread at a time, as the pass
    /// with a branch a thread gave them before the columns.
    fn by_threads(m: &Motion, ns_per_instr: &[f64], now: f64) -> (Vec<u64>, u64, u64) {
        let (mut next, mut paid) = (f64::INFINITY, now);
        let mut rates = vec![0.0f64; m.slot.len()];
        for (t, rate) in rates.iter_mut().enumerate() {
            let Some(c) = m.class(t) else { continue };
            *rate = m.share[t] / ns_per_instr[c as usize];
            next = next.min((m.debt[t] + m.left[t].min(m.to_barrier[t])) / *rate);
            if m.debt[t] != 0.0 {
                paid = paid.max(now + m.debt[t] / *rate);
            }
        }
        let rates = rates.iter().map(|r| r.to_bits()).collect();
        (rates, (now + next).to_bits(), paid.to_bits())
    }

    #[test]
    fn rates_and_times_are_what_one_thread_at_a_time_gave() {
        // Not a multiple of four: the lanes' rest is taken too.
        for (n, seed) in [(1003, 1), (997, 2), (3, 3), (0, 4)] {
            let (mut m, ns_per_instr) = mixed(n, seed);
            let now = 5e9;
            let expected = by_threads(&m, &ns_per_instr, now);
            let mut due = Due::new(now);
            m.set_rates(&ns_per_instr, Some(&mut due));
            let rates: Vec<u64> = m.rate.iter().map(|r| r.to_bits()).collect();
            assert_eq!(
                (rates, (due.now + due.next).to_bits(), due.paid.to_bits()),
                expected
            );
            // Apart, as a run with shared pools takes them.
            let (mut apart, _) = mixed(n, seed);
            let mut due_apart = Due::new(now);
            apart.set_rates(&ns_per_instr, None);
            apart.due(&mut due_apart);
            assert_eq!(
                (due_apart.next.to_bits(), due_apart.paid.to_bits()),
                (due.next.to_bits(), due.paid.to_bits())
            );
            if n > 100 {
                assert!(
                    due.next.is_finite() && due.paid > now,
                    "the case has events and debts"
                );
            }
        }
    }

    /// Where this CPU has AVX2, the passes' copies for it give the bits
    /// the copies built for any x86-64 give (elsewhere both are one).
    #[test]
    fn every_copy_of_a_pass_gives_the_same_bits() {
        let kept = every_copy_gives_the_same_bits(false);
        // With the counters left, what is still kept is what was kept.
        let left = every_copy_gives_the_same_bits(true);
        assert_eq!(kept.0.to_bits(), left.0.to_bits(), "the machine's traffic");
        for (k, l) in [
            (&kept.1.instr, &left.1.instr),
            (&kept.1.cpu_ns, &left.1.cpu_ns),
            (&kept.1.wait_ns, &left.1.wait_ns),
        ] {
            assert!(k.iter().zip(l).all(|(a, b)| a.to_bits() == b.to_bits()));
        }
        assert!(left.1.cycles.iter().all(|&c| c == 0.0) && kept.1.cycles.iter().any(|&c| c > 0.0));
    }

    /// Both copies of each pass on the same threads, compared; returns the
    /// observed settling's total traffic and the threads after it.
    fn every_copy_gives_the_same_bits(counters_left: bool) -> (f64, Motion) {
        let n = 1001;
        let (mut wide, ns_per_instr) = mixed(n, 9);
        let (mut any, _) = mixed(n, 9);
        let (mut due_wide, mut due_any) = (Due::new(1e9), Due::new(1e9));
        wide.set_rates(&ns_per_instr, Some(&mut due_wide));
        any.set_rates_any(&ns_per_instr, Some(&mut due_any));
        assert_eq!(due_wide.next.to_bits(), due_any.next.to_bits());
        assert_eq!(due_wide.paid.to_bits(), due_any.paid.to_bits());
        let dts = [1e6, 2.5e5, 3.0, 7e6];
        wide.settle(&dts);
        any.settle_any(&dts);
        let (mut traffic_wide, mut traffic_any) = (Vec::new(), Vec::new());
        let total_wide = wide.settle_observed(4e6, &mut traffic_wide, !counters_left);
        let total_any = any.settle_observed_any(4e6, &mut traffic_any, !counters_left);
        assert_eq!(total_wide.to_bits(), total_any.to_bits());
        assert_eq!(wide.rate.len(), n);
        assert!(
            wide.rate
                .iter()
                .zip(&any.rate)
                .all(|(a, b)| a.to_bits() == b.to_bits())
        );
        assert_eq!(settled_bits(&wide), settled_bits(&any));
        assert!(wide.instr.iter().any(|&i| i > 0.0) && wide.debt.iter().any(|&d| d > 0.0));
        (total_wide, wide)
    }

    /// The blocks find what a thread-by-thread search finds, from every
    /// start, with the rest after the last whole block too.
    #[test]
    fn past_threshold_finds_the_first_past_one() {
        let mut rng = herd_policy::Rng::new(5);
        for n in [0, 1, 7, 8, 9, 61] {
            let mut m = Motion::default();
            for _ in 0..n {
                // About one thread in five past its end or its barrier.
                let (left, to_barrier) = (rng.next_f64(), rng.next_f64());
                m.push(left, to_barrier, (0.2 * rng.next_f64(), 0.2 * rng.next_f64()));
            }
            for from in 0..=n {
                let want = (from..n)
                    .find(|&t| m.left[t] <= m.ends_below[t] || m.to_barrier[t] <= m.barrier_below[t]);
                assert_eq!(m.past_threshold(from), want, "{n} threads from {from}");
            }
            if n == 61 {
                assert!(
                    m.past_threshold(9).is_some(),
                    "the case has one past its threshold"
                );
            }
        }
    }
}
