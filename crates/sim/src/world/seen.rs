//! What the observations reported of each thread: the arithmetic of a
//! full observation, in columns.

use herd_model::params::LINE_BYTES;

/// The counters an observation reports from floats, in the order of
/// [`Seen`]'s columns.
pub(super) const INSTR: usize = 0;
pub(super) const CPU_NS: usize = 1;
pub(super) const WAIT_NS: usize = 2;
pub(super) const MEM_BYTES: usize = 3;
pub(super) const LLC_REFS: usize = 4;
pub(super) const CYCLES: usize = 5;
pub(super) const COUNTERS: usize = 6;
/// [`Seen::reported`]'s column of LLC misses (memory traffic in lines).
pub(super) const LLC_MISSES: usize = COUNTERS;

/// A counter delta as a whole number, rounded to nearest. This runs for
/// every field of every task every period, and Rust's saturating `as` casts
/// cost a dozen instructions each; adding 2^52 instead puts the rounded
/// integer in the low mantissa bits (exact for 0 <= x < 2^52, which the
/// clamp guarantees: no per-period counter gets near 4.5e15).
#[expect(
    clippy::manual_clamp,
    reason = "max/min compile to two instructions; clamp adds checks"
)]
#[inline(always)]
pub(super) fn whole(x: f64) -> u64 {
    const TWO_52: f64 = 4_503_599_627_370_496.0;
    debug_assert!(x.is_finite() && x > -1.0, "counter delta {x}");
    (x.max(0.0).min(TWO_52 - 1.0) + TWO_52).to_bits() - TWO_52.to_bits()
}

/// Each thread's counters as of the last observation (`upto`) and what the
/// last full observation reported of it (`last`), a column per counter,
/// indexed as `World::threads`; what the last full observation reported in
/// whole numbers (`reported`), a row per thread; and which threads the
/// snapshot lists (`listed`, [`Seen::list`]), the only ones a pass changes.
///
/// In columns, not a record per thread: a full observation's arithmetic
/// is then a pass down each column, four threads to an instruction where
/// the CPU has AVX2. A thread at a time, arithmetic and view together
/// took 158 instructions a task, and full observations were half of
/// amp:ff's simulated minute (the scale bench's world); in columns, with
/// the pass that writes the views, the minute took 3% fewer (the views'
/// writes, a row's look-up and the mask are what is left). Every listed
/// thread's numbers are made by the same operations in the same order as
/// one at a time, and an unlisted one's are kept (a selection of bits,
/// not arithmetic): the results are the same to the bit.
#[derive(Debug, Default)]
pub(super) struct Seen {
    upto: [Vec<f64>; COUNTERS],
    last: [Vec<f64>; COUNTERS],
    /// Migrations are counted on the thread, not in a column of motion:
    /// the caller's pass over the threads takes them
    /// ([`Report::migrations`]), `upto` and `last` together.
    migrations: Vec<[u32; 2]>,
    /// A row per thread, not a column per number: the caller's pass takes
    /// a listed thread's numbers from one place, checked once (a column's
    /// look-up each, with its own check, cost that pass 4 instructions a
    /// number).
    reported: Vec<[u64; COUNTERS + 1]>,
    /// Whether the snapshot lists each thread, as a mask of 64 bits (all
    /// set: listed) that picks a number's bits without arithmetic, four
    /// threads to an instruction. A thread that finished before its job's
    /// others is not listed until the job starts again, and what it did
    /// before it finished is reported then: a pass leaves it as it was.
    /// (Such threads are common: a pass over only the listed ones, looked
    /// up one by one, cost more than a thread at a time did.)
    listed: Vec<u64>,
}

/// What a full observation's pass reports besides CPU time and waits,
/// which it always reports.
#[derive(Clone, Copy)]
pub(super) struct Wanted {
    /// Instructions, cycles, LLC references.
    pub(super) hw: bool,
    /// Memory traffic.
    pub(super) mem: bool,
    /// LLC misses as memory traffic in lines, as the pass makes them
    /// (else the caller makes them, with each thread's jitter).
    pub(super) misses: bool,
}

impl Seen {
    pub(super) fn new(threads: usize) -> Self {
        let zeros = || vec![0.0; threads];
        Seen {
            upto: std::array::from_fn(|_| zeros()),
            last: std::array::from_fn(|_| zeros()),
            migrations: vec![[0; 2]; threads],
            reported: vec![[0; COUNTERS + 1]; threads],
            listed: vec![0; threads],
        }
    }

    /// The threads the snapshot lists from now on (`present`, each below
    /// the count [`Seen::new`] was given).
    pub(super) fn list(&mut self, present: &[usize]) {
        self.listed.fill(0);
        for &t in present {
            self.listed[t] = !0;
        }
    }

    avx2_where_present! {
        /// For each listed thread: adds each reused observation's report
        /// (`last`) to `upto`, `repeats` times over; then takes its
        /// counters now (`now`, columns in [`Seen`]'s order, indexed as the
        /// threads) as the last full observation's report, and makes its
        /// whole numbers for `reported`, those `wanted`. Migrations are
        /// left to [`Seen::migrations`].
        fn take, take_avx2 => take_any(&mut self, now: [&[f64]; COUNTERS], repeats: u32, wanted: Wanted)
    }

    avx2_where_present! {
        /// Adds each reused observation's report to `upto`, `repeats`
        /// times over, for each listed thread (migrations too): what a full
        /// observation's pass does first, when the list will change before
        /// the next one.
        fn add_repeats, add_repeats_avx2 => add_repeats_any(&mut self, repeats: u32)
    }

    #[inline(always)]
    fn take_any(&mut self, now: [&[f64]; COUNTERS], repeats: u32, wanted: Wanted) {
        let n = self.listed.len();
        let listed = &self.listed[..];
        let want = |c: usize| match c {
            CPU_NS | WAIT_NS => true,
            MEM_BYTES => wanted.mem,
            _ => wanted.hw,
        };
        for c in 0..COUNTERS {
            let (upto, last, now) = (&mut self.upto[c][..n], &mut self.last[c][..n], &now[c][..n]);
            add_to_listed(upto, last, listed, repeats);
            for (((u, l), d), &p) in upto.iter_mut().zip(last.iter_mut()).zip(now).zip(listed) {
                *l = pick(p, *d - *u, *l);
                *u = pick(p, *d, *u);
            }
            if want(c) {
                for (r, l) in self.reported[..n].iter_mut().zip(last.iter()) {
                    r[c] = whole(*l);
                }
            }
        }
        if wanted.misses {
            let mem = &self.last[MEM_BYTES][..n];
            for (r, m) in self.reported[..n].iter_mut().zip(mem) {
                r[LLC_MISSES] = whole(m / LINE_BYTES);
            }
        }
    }

    #[inline(always)]
    fn add_repeats_any(&mut self, repeats: u32) {
        let n = self.listed.len();
        for c in 0..COUNTERS {
            add_to_listed(&mut self.upto[c][..n], &self.last[c][..n], &self.listed, repeats);
        }
        for (m, &p) in self.migrations[..n].iter_mut().zip(&self.listed) {
            if p != 0 {
                m[0] += m[1] * repeats;
            }
        }
    }

    /// What the last [`Seen::take`] made, for the pass over the threads
    /// that writes it into their views.
    pub(super) fn report(&mut self) -> Report<'_> {
        let n = self.listed.len();
        Report {
            reported: &self.reported[..n],
            last_mem_bytes: &self.last[MEM_BYTES][..n],
            migrations: &mut self.migrations[..n],
        }
    }
}

/// What the last full observation made of each thread.
pub(super) struct Report<'a> {
    /// The whole numbers of each counter ([`LLC_MISSES`] too), a row per
    /// thread: a listed thread's.
    pub(super) reported: &'a [[u64; COUNTERS + 1]],
    /// What it reported of each thread's memory traffic, as a float.
    pub(super) last_mem_bytes: &'a [f64],
    migrations: &'a mut [[u32; 2]],
}

impl Report<'_> {
    /// Thread `t`'s migrations since the last full observation, when it
    /// has made `now` in all and `repeats` reused observations came since
    /// (each adds its report first, as [`Seen::take`] does the others).
    #[inline(always)]
    pub(super) fn migrations(&mut self, t: usize, now: u32, repeats: u32) -> u32 {
        let [upto, last] = &mut self.migrations[t];
        *upto += *last * repeats;
        let since = now - *upto;
        *last = now.saturating_sub(*upto);
        *upto = now;
        since
    }
}

/// `upto += last`, `repeats` times over, for each listed thread (an
/// unlisted one's is kept as it was). Four threads at a time, their sums
/// kept in a register through the additions and the mask applied once:
/// full observations most often follow many reused ones, and a pass down
/// the column for each (a load, a store and the mask each time) cost
/// three times as much.
#[inline(always)]
fn add_to_listed(upto: &mut [f64], last: &[f64], listed: &[u64], repeats: u32) {
    if repeats == 0 {
        return;
    }
    const LANES: usize = 4;
    let lanes = upto
        .chunks_exact_mut(LANES)
        .zip(last.chunks_exact(LANES))
        .zip(listed.chunks_exact(LANES));
    for ((u, l), p) in lanes {
        let mut sum: [f64; LANES] = std::array::from_fn(|j| u[j]);
        for _ in 0..repeats {
            for j in 0..LANES {
                sum[j] += l[j];
            }
        }
        for j in 0..LANES {
            u[j] = pick(p[j], sum[j], u[j]);
        }
    }
    let done = upto.len() / LANES * LANES;
    for ((u, l), &p) in upto[done..].iter_mut().zip(&last[done..]).zip(&listed[done..]) {
        let mut sum = *u;
        for _ in 0..repeats {
            sum += *l;
        }
        *u = pick(p, sum, *u);
    }
}

/// `yes` where `mask` is all set, `no` where it is clear: a selection of
/// bits, so either is kept exactly.
#[inline(always)]
fn pick(mask: u64, yes: f64, no: f64) -> f64 {
    f64::from_bits(yes.to_bits() & mask | no.to_bits() & !mask)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// One thread's counters, a record per thread: how a full observation
    /// was made before the columns.
    #[derive(Clone, Copy, Default)]
    struct Record {
        upto: [f64; COUNTERS],
        last: [f64; COUNTERS],
        upto_migrations: u32,
        last_migrations: u32,
    }

    impl Record {
        fn repeat(&mut self) {
            for c in 0..COUNTERS {
                self.upto[c] += self.last[c];
            }
            self.upto_migrations += self.last_migrations;
        }

        /// The report of a full observation after `repeats` reused ones.
        fn take(
            &mut self,
            now: [f64; COUNTERS],
            migrations: u32,
            repeats: u32,
        ) -> ([u64; COUNTERS + 1], u32) {
            for _ in 0..repeats {
                self.repeat();
            }
            let mut out = [0; COUNTERS + 1];
            for c in 0..COUNTERS {
                out[c] = whole(now[c] - self.upto[c]);
                self.last[c] = now[c] - self.upto[c];
                self.upto[c] = now[c];
            }
            out[LLC_MISSES] = whole(self.last[MEM_BYTES] / LINE_BYTES);
            let since = migrations - self.upto_migrations;
            self.last_migrations = migrations.saturating_sub(self.upto_migrations);
            self.upto_migrations = migrations;
            (out, since)
        }
    }

    /// Through full observations, reused ones and lists that change,
    /// the columns report every listed thread's numbers to the bit as a
    /// record per thread did, and leave unlisted threads as they were.
    #[test]
    fn columns_report_what_a_record_per_thread_did() {
        let mut seed = 0x6A09_E667_F3BC_C909u64;
        let mut next = move || {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            seed
        };
        let n = 37;
        let mut cols = Seen::new(n);
        let mut records = vec![Record::default(); n];
        let mut now = vec![[0.0f64; COUNTERS]; n];
        let mut migrations = vec![0u32; n];
        let want = Wanted {
            hw: true,
            mem: true,
            misses: true,
        };
        let mut checked = 0;
        for _ in 0..300 {
            // Up to 6: a reused observation most often follows others.
            let repeats = (next() % 7) as u32;
            // Each reused observation stood for as much as the last full
            // one reported (that is when one is reused); the full one
            // reports more on top, in irregular fractions that round.
            for ((counters, m), r) in now.iter_mut().zip(&mut migrations).zip(&records) {
                for (x, last) in counters.iter_mut().zip(r.last) {
                    *x += repeats as f64 * last + (next() % 1_000_000) as f64 / 7.0 * 1e3;
                }
                *m += repeats * r.last_migrations + (next() % 3) as u32;
            }
            let all: Vec<usize> = (0..n).collect();
            let some: Vec<usize> = (0..n).filter(|_| next() % 3 != 0).collect();
            let list = if next() % 2 == 0 { &all } else { &some };
            cols.list(list);
            let columns: [Vec<f64>; COUNTERS] = std::array::from_fn(|c| now.iter().map(|x| x[c]).collect());
            if next() % 5 == 0 {
                // The list changes before the next full observation.
                cols.add_repeats(repeats);
                for &t in list {
                    (0..repeats).for_each(|_| records[t].repeat());
                }
                continue;
            }
            cols.take(std::array::from_fn(|c| &columns[c][..]), repeats, want);
            for &t in list {
                let (want_out, want_since) = records[t].take(now[t], migrations[t], repeats);
                let mut report = cols.report();
                assert_eq!(report.migrations(t, migrations[t], repeats), want_since);
                assert_eq!(report.reported[t], want_out, "thread {t}");
                checked += 1;
            }
            // Listed or not, every thread's columns are its record's.
            for (t, r) in records.iter().enumerate() {
                for c in 0..COUNTERS {
                    assert_eq!(cols.upto[c][t].to_bits(), r.upto[c].to_bits(), "thread {t}");
                    assert_eq!(cols.last[c][t].to_bits(), r.last[c].to_bits(), "thread {t}");
                }
                assert_eq!(cols.migrations[t][0], r.upto_migrations, "thread {t}");
            }
        }
        assert!(checked > 3_000, "{checked} checked");
    }

    #[test]
    fn whole_rounds_to_nearest_and_clamps() {
        assert_eq!(whole(0.0), 0);
        assert_eq!(whole(-0.4), 0);
        assert_eq!(whole(2.4), 2);
        assert_eq!(whole(2.6), 3);
        assert_eq!(whole(1e12 + 0.7), 1_000_000_000_001);
        assert_eq!(whole(9.0e15), (1u64 << 52) - 1);
    }
}
